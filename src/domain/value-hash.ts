import { createHmac } from 'node:crypto';
import type { SecretBox } from './secret-box.js';

/**
 * Keyed hashes of personal values (issue 40): what a redaction in `hash` mode stores instead
 * of a value, so that equal values stay equal (a support person can still tell that two
 * webhooks are about one customer, an erasure can still find them) without the value being
 * stored. HMAC-SHA256 with a key of the company's own, derived from INTAKE_SECRETS_KEY: a
 * copy of the database alone cannot be searched for a guessed email, and one company's
 * hashes say nothing about another's.
 *
 * The value is hashed in lower case, as erasure searches without case: `Jane@Example.com`
 * and `jane@example.com` give one hash.
 */

export const HASH_PREFIX = 'hmac-sha256:';
/** 128 bits of the MAC: enough to tell values apart, short enough to read. */
const HASH_HEX_CHARS = 32;
const PURPOSE = 'intake redaction hash v1';
/** Companies whose keys a node remembers at most (past it, it derives them again). */
const MAX_COMPANIES = 10_000;

export class ValueHasher {
  constructor(private readonly key: Buffer) {}

  hash(value: string): string {
    return HASH_PREFIX + createHmac('sha256', this.key).update(value.toLowerCase(), 'utf8').digest('hex').slice(0, HASH_HEX_CHARS);
  }
}

/** Each company's hashers, derived once and remembered. */
export class CompanyHashers {
  private readonly derived = new Map<string, ValueHasher[]>();

  constructor(private readonly secrets: SecretBox) {}

  /** The hasher redaction stores with: the current secrets key's. */
  of(companyId: string): ValueHasher {
    return this.all(companyId)[0]!;
  }

  /**
   * One hasher per configured secrets key, the current one first: an erasure searches with
   * every one, so values hashed before a key rotation are still found.
   */
  all(companyId: string): ValueHasher[] {
    let hashers = this.derived.get(companyId);
    if (hashers === undefined) {
      if (this.derived.size >= MAX_COMPANIES) this.derived.clear();
      hashers = this.secrets.derivedKeys(`${PURPOSE} ${companyId}`).map((key) => new ValueHasher(key));
      this.derived.set(companyId, hashers);
    }
    return hashers;
  }
}
