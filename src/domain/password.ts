import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * scrypt's cost as log2 N (INTAKE_PASSWORD_HASH_COST). The default is OWASP's N=2^17, r=8,
 * p=1: 128 MiB of work memory per hash, about 0.4 s of a libuv thread on a 2-core machine.
 * The tests run at the lowest. Every hash carries its own parameters, so a hash made at one
 * cost verifies under any other: changing the setting re-hashes nothing.
 */
export const DEFAULT_PASSWORD_HASH_COST = 17;
/** From 2^10 (1 MiB, 2 ms a hash) to 2^20 (1 GiB, 4 s). */
export const MIN_PASSWORD_HASH_COST = 10;
export const MAX_PASSWORD_HASH_COST = 20;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
/** scrypt needs 128·N·r bytes: twice what the highest cost takes, as the one bound for every hash. */
const MAX_MEMORY = 2 * 128 * R * 2 ** MAX_PASSWORD_HASH_COST;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, KEY_LENGTH, { N: n, r, p, maxmem: MAX_MEMORY }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

/** `scrypt$N$r$p$salt$hash` at N=2^cost, salt and hash in base64url; the parameters travel with the hash. */
export async function hashPassword(password: string, cost: number): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  return formatHash(cost, salt, await derive(password, salt, 2 ** cost, R, P));
}

/**
 * A stored hash no password matches, to verify against when there is no account: checking
 * a password against it costs what checking a real one made at `cost` does (the same
 * parameters, so the same scrypt), but making it costs nothing. The hash is random bytes
 * rather than the scrypt of a random password: both are out of reach, and computing one
 * took 128 MiB and 0.7 s of a libuv thread at every start (the service's start-up RSS peak).
 */
export function decoyPasswordHash(cost: number): string {
  return formatHash(cost, randomBytes(SALT_LENGTH), randomBytes(KEY_LENGTH));
}

function formatHash(cost: number, salt: Buffer, key: Buffer): string {
  return ['scrypt', 2 ** cost, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), Number(n), Number(r), Number(p));
  return key.length === expected.length && timingSafeEqual(key, expected);
}

export const MIN_PASSWORD_LENGTH = 12;
