import { randomBytes } from 'node:crypto';

/**
 * A Standard Webhooks secret (`whsec_` and the base64 of the HMAC key), as a `standard_webhooks`
 * source verifies with it and a destination signs with it: one reading of the format for both.
 * https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
 */
export const WHSEC_PREFIX = 'whsec_';

/** A new secret: `whsec_` and the base64 of 32 random bytes. */
export function newWhsecSecret(): string {
  return WHSEC_PREFIX + randomBytes(32).toString('base64');
}

/** The HMAC key: the bytes whose base64 follows `whsec_` (a secret without the prefix is taken as the base64 alone). */
export function whsecKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(WHSEC_PREFIX) ? secret.slice(WHSEC_PREFIX.length) : secret, 'base64');
}
