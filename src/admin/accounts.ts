import type { Logger } from 'pino';
import { FailureWindows } from '../domain/failure-windows.js';
import { MIN_PASSWORD_LENGTH } from '../domain/password.js';
import type { SecretBox } from '../domain/secret-box.js';
import { newRecoveryCodes, newTotpSecret, otpauthUri, recoveryCodeHash, totpStep } from '../domain/two-factor.js';
import { AppError } from '../errors.js';
import { addressKey } from '../intake/auth-failures.js';
import type { Actor, AuditEvent, PasswordReset, Store, UserAccount } from '../store/store.js';
import { linkTokenHash, newLinkToken, PASSWORD_RESET_LIFETIME_MS, passwordResetUrl } from './links.js';
import type { Mailer } from './mailer.js';
import type { SignInGuard } from './sign-in-guard.js';

export interface AccountsDeps {
  store: Store;
  secrets: SecretBox;
  guard: SignInGuard;
  mailer: Mailer;
  baseUrl: string;
  logger: Logger;
  now?: () => number;
}

/** Reset emails one account may be sent per hour, and reset requests one address may make. */
const RESET_WINDOW_MS = 60 * 60 * 1000;
const RESET_EMAILS_PER_ACCOUNT = 3;
const RESET_REQUESTS_PER_ADDRESS = 10;

/**
 * What a person does with their own account: change or reset the password, turn two-factor
 * sign-in on or off, renew recovery codes. Only the holder chooses the password: the
 * current one, a one-time link sent to them, or one printed for the operator, never
 * anyone else's say. Every change that must end sessions ends them in its transaction, and
 * goes into the audit log of each company of the user in it too (by the user, of the user).
 */
export class Accounts {
  private readonly store: Store;
  private readonly now: () => number;
  private readonly resetRequests: FailureWindows;

  constructor(private readonly deps: AccountsDeps) {
    this.store = deps.store;
    this.now = deps.now ?? Date.now;
    this.resetRequests = new FailureWindows(RESET_WINDOW_MS, this.now);
  }

  async describe(userId: string) {
    const user = await this.user(userId);
    return {
      id: user.id,
      email: user.email,
      twoFactorEnabled: user.totpSecret !== null,
      recoveryCodesLeft: user.totpSecret === null ? 0 : await this.store.countRecoveryCodes(user.id),
      createdAt: user.createdAt,
    };
  }

  /** A new password for the signed-in user; every other session ends. */
  async changePassword(userId: string, input: { currentPassword: string; newPassword: string }, ip: string, keepSession: string) {
    const user = await this.confirmPassword(userId, input.currentPassword, ip);
    const hash = await newPasswordHash(this.deps.guard, input.newPassword, ip, 'new_password');
    const at = this.now();
    await this.store.setPassword(user.id, hash, at, keepSession, accountAudit('account.password_change', user, ip, at));
    this.deps.logger.info({ userId }, 'password changed; other sessions ended');
  }

  /**
   * A reset link for `email`, by email when SMTP is configured and the account exists. The
   * caller is told the same whatever happened, and at once: the email goes out behind the
   * answer, so its time says nothing either.
   */
  requestPasswordReset(email: string, ip: string): void {
    const account = email.trim().toLowerCase();
    const address = `ip:${addressKey(ip)}`;
    const wait = this.resetRequests.blockedFor(address, RESET_REQUESTS_PER_ADDRESS);
    if (wait > 0) {
      throw new AppError('rate_limited', 'Too many password reset requests from this address; try again later.', {
        retryAfterSeconds: Math.ceil(wait / 1000),
      });
    }
    this.resetRequests.count(address);
    if (!this.deps.mailer.enabled || this.resetRequests.blockedFor(`account:${account}`, RESET_EMAILS_PER_ACCOUNT) > 0) return;
    this.resetRequests.count(`account:${account}`);
    void this.emailResetLink(account).catch((error: unknown) => this.deps.logger.warn({ err: error }, 'password reset email failed'));
  }

  private async emailResetLink(email: string): Promise<void> {
    const user = await this.store.findUserByEmail(email);
    if (!user) return;
    const url = await passwordResetLink(this.store, this.deps.baseUrl, user.id, this.now());
    await this.deps.mailer.send({
      // Not one budget for every reset: a flood of requests must not use up a real user's.
      sender: `reset:${user.id}`,
      to: user.email,
      subject: 'Reset your intake password',
      text:
        `Someone (hopefully you) asked to reset the password of your intake account ${user.email}.\n\n` +
        `Choose a new password here; the link works once, for an hour:\n\n${url}\n\n` +
        'If it was not you, ignore this email: your password stays as it is.\n',
    });
  }

  /** The account a reset link is for, while it can be used; reading it does not use it up. */
  async checkPasswordReset(token: string): Promise<PasswordReset> {
    const reset = await this.store.findUsablePasswordReset(linkTokenHash(token), this.now());
    if (!reset) throw new AppError('reset_link_invalid');
    return reset;
  }

  /** Sets the password from a reset link; every session of the account ends. */
  async completePasswordReset(token: string, password: string, ip: string): Promise<void> {
    // Checked before the password is hashed: guessing links costs the server nothing.
    const reset = await this.checkPasswordReset(token);
    const passwordHash = await newPasswordHash(this.deps.guard, password, ip, 'password');
    const at = this.now();
    const user = { id: reset.userId, email: reset.email };
    const userId = await this.store.resetPassword(linkTokenHash(token), at, passwordHash, accountAudit('account.password_reset', user, ip, at));
    if (userId === undefined) throw new AppError('reset_link_invalid');
    this.deps.logger.info({ userId }, 'password reset; every session ended');
  }

  /** Starts (or restarts) enrolment: a new secret, kept sealed until a code from it turns two-factor on. */
  async startTwoFactor(userId: string): Promise<{ secret: string; otpauthUri: string }> {
    const user = await this.user(userId);
    if (user.totpSecret !== null) throw new AppError('conflict', 'Two-factor sign-in is on already; turn it off first to use another app.');
    const secret = newTotpSecret();
    await this.store.setPendingTwoFactor(user.id, this.deps.secrets.seal(secret));
    return { secret, otpauthUri: otpauthUri(secret, user.email) };
  }

  /** Turns two-factor on once a code of the pending secret proves the app has it; every other session ends. */
  async enableTwoFactor(userId: string, code: string, keepSession: string, ip: string): Promise<string[]> {
    const user = await this.user(userId);
    if (user.totpSecret !== null) throw new AppError('conflict', 'Two-factor sign-in is on already.');
    if (user.totpPendingSecret === null) throw new AppError('conflict', 'Start the setup first: there is no secret waiting for a code.');
    const step = totpStep(this.deps.secrets.open(user.totpPendingSecret), code, this.now());
    if (step === undefined) throw new AppError('invalid_two_factor_code', 'That code does not match: check the app and the time of this device, and try the next code.');
    const codes = newRecoveryCodes();
    const at = this.now();
    const enabled = await this.store.enableTwoFactor(
      user.id,
      { sealedSecret: user.totpPendingSecret, step, recoveryCodeHashes: codes.map(recoveryCodeHash), at, keepSession },
      accountAudit('account.two_factor_enable', user, ip, at),
    );
    if (!enabled) throw new AppError('conflict', 'The setup was restarted meanwhile: scan the new code and try again.');
    this.deps.logger.info({ userId }, 'two-factor sign-in turned on; other sessions ended');
    return codes;
  }

  /** Turns two-factor off (the password confirms it), unless a company of the user requires it. */
  async disableTwoFactor(userId: string, password: string, ip: string): Promise<void> {
    const user = await this.confirmPassword(userId, password, ip);
    if (user.totpSecret === null) return;
    const requiring = (await this.store.listMembershipsOfUser(user.id)).filter((m) => m.requiresTwoFactor);
    if (requiring.length > 0) {
      throw new AppError(
        'conflict',
        `${requiring.map((m) => m.companyName).join(', ')} ${requiring.length === 1 ? 'requires' : 'require'} two-factor sign-in of its members: it stays on.`,
      );
    }
    await this.store.disableTwoFactor(user.id, accountAudit('account.two_factor_disable', user, ip, this.now()));
    this.deps.logger.info({ userId }, 'two-factor sign-in turned off');
  }

  /** New recovery codes (the password confirms it); the old ones stop working. */
  async renewRecoveryCodes(userId: string, password: string, ip: string): Promise<string[]> {
    const user = await this.confirmPassword(userId, password, ip);
    if (user.totpSecret === null) throw new AppError('conflict', 'Two-factor sign-in is off: there are no recovery codes.');
    const codes = newRecoveryCodes();
    const at = this.now();
    await this.store.replaceRecoveryCodes(user.id, codes.map(recoveryCodeHash), at, accountAudit('account.recovery_codes_renew', user, ip, at));
    return codes;
  }

  /**
   * The user, once their password is confirmed: counted as a sign-in attempt of the account,
   * so a session left open cannot be used to guess the password.
   */
  private async confirmPassword(userId: string, password: string, ip: string): Promise<UserAccount> {
    const user = await this.user(userId);
    const attempt = await this.deps.guard.checkPassword(user.email, ip, password, async () => user.passwordHash);
    if (!attempt) throw new AppError('invalid_credentials', 'The password is not correct.');
    attempt.giveBack();
    return user;
  }

  private async user(userId: string): Promise<UserAccount> {
    const user = await this.store.findUserById(userId);
    if (!user) throw new AppError('not_signed_in');
    return user;
  }
}

/**
 * A change of the user's own account for the audit logs of their companies: of them, with
 * their email (never a password, a secret or a code); by them from `ip`, or by `actor` (the
 * operator's CLI).
 */
export function accountAudit(action: string, user: { id: string; email: string }, by: string | Actor, at: number): AuditEvent {
  const actor: Actor = typeof by === 'string' ? { type: 'user', id: user.id, ip: by } : by;
  return { actor, action, targetType: 'user', targetId: user.id, after: { email: user.email }, at };
}

/** The hash of a password someone chose for their own account, within the bounds on password work. */
export async function newPasswordHash(guard: SignInGuard, password: string, ip: string, field = 'password'): Promise<string> {
  if (password.length < MIN_PASSWORD_LENGTH) {
    throw new AppError('invalid_request', `The password must be at least ${MIN_PASSWORD_LENGTH} characters.`, { field });
  }
  return guard.newHash(ip, password);
}

/** A new one-time reset link for the account: the email's, or the operator's to pass on (`intake user reset-password`). */
export async function passwordResetLink(store: Store, baseUrl: string, userId: string, now = Date.now()): Promise<string> {
  const { token, hash } = newLinkToken();
  await store.createPasswordReset(userId, hash, now, now + PASSWORD_RESET_LIFETIME_MS);
  return passwordResetUrl(baseUrl, token);
}
