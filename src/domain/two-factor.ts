import { createHash, randomInt } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';

/**
 * TOTP (RFC 6238: SHA-1, 6 digits, 30-second steps, as every authenticator app reads them)
 * and one-time recovery codes. Pure: the caller keeps the secret sealed and the last step
 * used, so each code is good once.
 */

const PERIOD_SECONDS = 30;
/** Codes of the step before and after are accepted too: clocks drift, people type slowly. */
const WINDOW_STEPS = 1;
export const ISSUER = 'intake';
export const RECOVERY_CODE_COUNT = 10;
/** No 0/o, 1/l/i: read off paper, typed back. */
const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

/** A new secret: 160 bits (RFC 4226's recommendation), base32 as apps expect it. */
export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

/** The `otpauth://` URI an app scans from a QR code. */
export function otpauthUri(secret: string, email: string): string {
  return totpOf(secret, email).toString();
}

/** Six digits, perhaps typed with spaces. */
export function isTotpCode(code: string): boolean {
  return /^\d{6}$/.test(code.replace(/\s/g, ''));
}

/** The time step `code` belongs to (within the window around `now`), or undefined when it matches none. */
export function totpStep(secret: string, code: string, now: number): number | undefined {
  const token = code.replace(/\s/g, '');
  const delta = totpOf(secret).validate({ token, timestamp: now, window: WINDOW_STEPS });
  return delta === null ? undefined : Math.floor(now / 1000 / PERIOD_SECONDS) + delta;
}

/** The code of `secret` at `now` (tests, and nothing else, need to make one). */
export function totpCodeAt(secret: string, now: number): string {
  return totpOf(secret).generate({ timestamp: now });
}

function totpOf(secret: string, label = 'account'): TOTP {
  return new TOTP({ issuer: ISSUER, label, algorithm: 'SHA1', digits: 6, period: PERIOD_SECONDS, secret: Secret.fromBase32(secret) });
}

/** Ten codes like `k3m7q-x9tbr`: 50 bits each, from the CSPRNG. */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const chars = Array.from({ length: 10 }, () => RECOVERY_ALPHABET[randomInt(RECOVERY_ALPHABET.length)]).join('');
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
}

/** What is stored of a recovery code: the SHA-256 of its normalised form (case, spaces and dashes ignored). */
export function recoveryCodeHash(code: string): string {
  return createHash('sha256').update(code.toLowerCase().replace(/[\s-]/g, '')).digest('hex');
}
