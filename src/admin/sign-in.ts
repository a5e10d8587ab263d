import type { SecretBox } from '../domain/secret-box.js';
import { isTotpCode, recoveryCodeHash, totpStep } from '../domain/two-factor.js';
import { AppError } from '../errors.js';
import type { Store, UserAccount } from '../store/store.js';
import type { Sessions, SignedIn } from './sessions.js';
import type { SignInGuard } from './sign-in-guard.js';

/**
 * Sign-in with email, password and, when the account has it, a second factor. One message
 * for a wrong email and a wrong password alike, and the same work for both (the guard's decoy hash).
 * Every attempt is counted before the password is checked and given back only when it did
 * not fail; a right password without the code is not a failure (the step asking for the
 * code, `TwoFactorRequired`), a wrong code is.
 */
export class SignIn {
  /** Refused sign-ins since start, by the code they were refused with (exposed in /metrics). */
  readonly failures: Record<SignInFailure, number> = {
    invalid_credentials: 0,
    invalid_two_factor_code: 0,
    rate_limited: 0,
    service_unavailable: 0,
  };

  constructor(
    private readonly store: Store,
    private readonly sessions: Sessions,
    private readonly guard: SignInGuard,
    private readonly secrets: SecretBox,
    private readonly now: () => number = Date.now,
  ) {}

  /** A new session, the step asking for the second factor, or the AppError that refuses it (counted in `failures`). */
  async signIn(
    credentials: { email: string; password: string; twoFactorCode?: string },
    ip: string,
    userAgent: string | null,
  ): Promise<SignedIn | TwoFactorRequired> {
    try {
      return await this.check(credentials, ip, userAgent);
    } catch (error) {
      if (error instanceof AppError && Object.hasOwn(this.failures, error.code)) this.failures[error.code as SignInFailure]++;
      throw error;
    }
  }

  private async check(
    credentials: { email: string; password: string; twoFactorCode?: string },
    ip: string,
    userAgent: string | null,
  ): Promise<SignedIn | TwoFactorRequired> {
    const account = credentials.email.trim().toLowerCase();
    let user: UserAccount | undefined;
    const attempt = await this.guard.checkPassword(account, ip, credentials.password, async () => {
      user = await this.store.findUserByEmail(account);
      return user?.passwordHash;
    });
    if (!attempt || !user) throw new AppError('invalid_credentials');
    if (user.totpSecret !== null) {
      if (credentials.twoFactorCode === undefined || credentials.twoFactorCode.trim() === '') {
        attempt.giveBack();
        return { twoFactorRequired: true };
      }
      // A wrong code is a failed attempt: its count stays.
      if (!(await verifySecondFactor(this.store, this.secrets, user, credentials.twoFactorCode, this.now()))) {
        throw new AppError('invalid_two_factor_code');
      }
    }
    attempt.giveBack();
    return this.sessions.start(user, ip, userAgent);
  }
}

/** The password was right and the account has two-factor sign-in: the same credentials again, with the code. */
export interface TwoFactorRequired {
  twoFactorRequired: true;
}

/**
 * Why a sign-in is refused: a wrong email or password, a wrong second factor, too many
 * failures (of the account or the address), or the password hashing busy.
 */
export type SignInFailure = 'invalid_credentials' | 'invalid_two_factor_code' | 'rate_limited' | 'service_unavailable';

/**
 * Whether `code` is the account's current TOTP code (never one already used) or one of its
 * unused recovery codes, which it then uses up.
 */
export async function verifySecondFactor(store: Store, secrets: SecretBox, user: UserAccount, code: string, now: number): Promise<boolean> {
  if (user.totpSecret === null) return false;
  if (isTotpCode(code)) {
    const step = totpStep(secrets.open(user.totpSecret), code, now);
    return step !== undefined && (await store.useTotpStep(user.id, step));
  }
  return store.useRecoveryCode(user.id, recoveryCodeHash(code), now);
}
