import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * CSPRNG bytes drawn 4 KiB at a time and handed out once each: every request takes an id, and
 * one call into OpenSSL per id cost about 4 % of the event loop under load (as `uuid` does
 * for its v7 ids). Bytes are never handed out twice.
 */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** `length` base62 characters from the CSPRNG, uniform (bytes ≥ 248 are redrawn, not folded). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

/** Base62 of a non-negative integer, left-padded with '0' to `width`. */
export function toBase62(value: number, width: number): string {
  let out = '';
  let rest = value;
  do {
    out = BASE62[rest % 62] + out;
    rest = Math.floor(rest / 62);
  } while (rest > 0);
  return out.padStart(width, '0');
}

export type IdPrefix = 'cmp' | 'usr' | 'int' | 'key' | 'req' | 'aud' | 'inv' | 'sec' | 'dst' | 'dlv' | 'att';

/** A new id with its type prefix, as Stripe and Svix do: `int_4Fh2…`. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(22)}`;
}

/**
 * A new id whose first characters are its time: rows written in time order land at the end
 * of their primary key's index instead of all over it (deliveries and attempts, written by
 * the thousand a second). Same shape as newId: 8 base62 characters of milliseconds (enough
 * until the year 8000), then 14 random ones (83 bits).
 */
export function newTimeOrderedId(prefix: IdPrefix, at: number): string {
  return `${prefix}_${toBase62(Math.max(0, Math.floor(at)), 8)}${randomBase62(14)}`;
}

/** Whether `value` looks like an id of this type (checked before any lookup). */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && /^[A-Za-z0-9]{22}$/.test(value.slice(prefix.length + 1));
}

/** Time-ordered UUID (v7) for webhooks: new rows land at the end of the time index. */
export function newWebhookUuid(): string {
  return uuidv7();
}

/** The public last segment of an integration's webhook address: not a secret, not guessable. */
export function newIntegrationKey(): string {
  return randomBase62(24);
}
