import { randomBytes, randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * `length` base62 characters from the CSPRNG, uniform (bytes ≥ 248 are redrawn, not folded),
 * drawn fresh from randomBytes: for secrets (API keys, integration keys).
 */
export function randomBase62(length: number): string {
  let bytes = randomBytes(length * 2);
  let next = 0;
  return base62Characters(length, () => {
    if (next === bytes.length) {
      bytes = randomBytes(length * 2);
      next = 0;
    }
    return bytes[next++]!;
  });
}

/**
 * CSPRNG bytes for ids, drawn 4 KiB at a time and handed out once each: every request takes
 * an id, and one call into OpenSSL per id cost about 4 % of the event loop under load (as
 * `uuid` pools its bytes for v7 ids). Ids are not secrets; keys still draw fresh bytes.
 */
const idBytes = Buffer.alloc(4096);
let idBytesUsed = idBytes.length;

function nextIdByte(): number {
  if (idBytesUsed === idBytes.length) {
    randomFillSync(idBytes);
    idBytesUsed = 0;
  }
  return idBytes[idBytesUsed++]!;
}

function base62Characters(length: number, nextByte: () => number): string {
  let out = '';
  while (out.length < length) {
    const byte = nextByte();
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

/** When a time-ordered id (newTimeOrderedId) was made, in ms; undefined for any other string. */
export function timeOfTimeOrderedId(id: string, prefix: IdPrefix): number | undefined {
  const match = new RegExp(`^${prefix}_([0-9A-Za-z]{8})[0-9A-Za-z]{14}$`).exec(id);
  if (!match) return undefined;
  let value = 0;
  for (const character of match[1]!) value = value * 62 + BASE62.indexOf(character);
  return value;
}

export type IdPrefix = 'cmp' | 'usr' | 'int' | 'key' | 'req' | 'aud' | 'inv' | 'sec' | 'dst' | 'dlv' | 'att' | 'ers';

/** A new id with its type prefix, as Stripe and Svix do: `int_4Fh2…`. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${base62Characters(22, nextIdByte)}`;
}

/**
 * A new id whose first characters are its time: rows written in time order land at the end
 * of their primary key's index instead of all over it (deliveries and attempts, written by
 * the thousand a second). Same shape as newId: 8 base62 characters of milliseconds (enough
 * until the year 8000), then 14 random ones (83 bits).
 */
export function newTimeOrderedId(prefix: IdPrefix, at: number): string {
  return `${prefix}_${toBase62(Math.max(0, Math.floor(at)), 8)}${base62Characters(14, nextIdByte)}`;
}

/** The millisecond of the last sequenced id, and how many were made in it before. */
let sequencedMs = -1;
let sequenceInMs = 0;

/**
 * A time-ordered id that also sorts in the order it was made, within one millisecond on this
 * node: 8 base62 characters of milliseconds, a 4-digit count of the ids made before it in
 * that millisecond, then 10 random characters (59 bits). For lists read newest first by
 * time then id (the audit log, integrations, keys, destinations): random ids made ties of
 * the same millisecond come back in any order (three changes made within a millisecond
 * were listed Two, Three, One). The
 * count is digits, which collations order as ASCII does (tested on C.UTF-8). Ids of other nodes
 * in the same millisecond, or of a clock that went back, tie by their random part.
 */
export function newSequencedId(prefix: IdPrefix, at: number): string {
  const ms = Math.max(0, Math.floor(at));
  sequenceInMs = ms === sequencedMs ? Math.min(sequenceInMs + 1, 9999) : 0;
  sequencedMs = ms;
  return `${prefix}_${toBase62(ms, 8)}${String(sequenceInMs).padStart(4, '0')}${base62Characters(10, nextIdByte)}`;
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
