import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { csrfTokenMatches, Sessions } from '../src/admin/sessions.js';
import { SignIn } from '../src/admin/sign-in.js';
import { SignInGuard } from '../src/admin/sign-in-guard.js';
import { setupLinkIfFirstRun } from '../src/admin/setup.js';
import { hashApiKey, hashesEqual, hashIfWellFormed, issueApiKey } from '../src/domain/api-key.js';
import { hashPassword, verifyPassword } from '../src/domain/password.js';
import { Authenticator } from '../src/intake/authenticate.js';
import type { KeyCache } from '../src/intake/key-cache.js';
import type { SessionRecord, Store } from '../src/store/store.js';
import { testSecretBox } from './helpers.js';
import { ROOT, TEST_PASSWORD_HASH_COST } from './support/processes.js';

/**
 * Where secrets come from and how they are compared, checked at the seams: node:crypto is
 * wrapped (not replaced) so a test can see every call to randomBytes, timingSafeEqual and
 * scrypt, and can make randomBytes return chosen bytes. A secret that does not change when
 * randomBytes does, or a comparison that no longer goes through timingSafeEqual, fails here.
 * (Timing itself is never measured: that would be flaky, and it is not needed.)
 */
const crypto = vi.hoisted(() => ({ fixedBytes: undefined as ((size: number) => Buffer) | undefined }));

vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  const randomBytes = vi.fn((size: number) => (crypto.fixedBytes ? crypto.fixedBytes(size) : actual.randomBytes(size)));
  const timingSafeEqual = vi.fn(actual.timingSafeEqual);
  const scrypt = vi.fn(actual.scrypt);
  const wrapped = { ...actual, randomBytes, timingSafeEqual, scrypt };
  return { ...wrapped, default: wrapped };
});

const { randomBytes, timingSafeEqual, scrypt } = vi.mocked(await import('node:crypto'));

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_SHAPE = /^whk_(dev|stg|live)_([0-9A-Za-z]+)$/;
const CHECKSUM_LENGTH = 6;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const COST = Number(TEST_PASSWORD_HASH_COST);

/** The part of a key drawn from the CSPRNG: between `whk_<env>_` and the checksum. */
function randomPart(key: string): string {
  const match = KEY_SHAPE.exec(key);
  if (!match) throw new Error(`not a key: ${key}`);
  return match[2]!.slice(0, -CHECKSUM_LENGTH);
}

beforeEach(() => {
  crypto.fixedBytes = undefined;
  vi.clearAllMocks();
});
afterEach(() => {
  crypto.fixedBytes = undefined;
});

describe('API keys: CSPRNG material, checksum, entropy', () => {
  const GENERATIONS = 20_000;
  const environments = ['development', 'staging', 'production'] as const;
  const issued = Array.from({ length: GENERATIONS }, (_, i) => ({ environment: environments[i % 3]!, key: issueApiKey(environments[i % 3]!) }));

  test(`${GENERATIONS} keys are all different, well-formed, pass their own checksum, and are stored as their SHA-256`, () => {
    expect(new Set(issued.map(({ key }) => key.plaintext)).size).toBe(GENERATIONS);
    expect(new Set(issued.map(({ key }) => key.hash)).size).toBe(GENERATIONS);
    for (const { environment, key } of issued) {
      expect(key.plaintext).toMatch(/^whk_(dev|stg|live)_[0-9A-Za-z]{34}$/);
      expect(key.plaintext.startsWith(`whk_${{ development: 'dev', staging: 'stg', production: 'live' }[environment]}_`)).toBe(true);
      expect(hashIfWellFormed(key.plaintext, environment)).toBe(key.hash);
      expect(key.hash).toBe(sha256(key.plaintext));
      expect(key.hash).toBe(hashApiKey(key.plaintext));
      // The visible prefix: the environment and 6 of the random characters, no more.
      expect(key.prefix).toBe(key.plaintext.slice(0, key.plaintext.indexOf('_', 4) + 1 + 6));
    }
  });

  test('the random part carries at least 160 bits by construction: 28 characters drawn uniformly from 62', () => {
    const lengths = new Set(issued.map(({ key }) => randomPart(key.plaintext).length));
    expect([...lengths]).toEqual([28]);
    const alphabet = new Set(issued.flatMap(({ key }) => [...randomPart(key.plaintext)]));
    expect(alphabet.size).toBe(62);
    expect(28 * Math.log2(alphabet.size)).toBeGreaterThanOrEqual(160);
  });

  test('every random character is uniform over the 62 symbols: no modulo bias (chi-squared)', () => {
    const counts = new Map<string, number>();
    let total = 0;
    for (const { key } of issued) {
      for (const char of randomPart(key.plaintext)) {
        counts.set(char, (counts.get(char) ?? 0) + 1);
        total++;
      }
    }
    const expected = total / 62;
    let chiSquared = 0;
    for (const char of BASE62) chiSquared += ((counts.get(char) ?? 0) - expected) ** 2 / expected;
    // 61 degrees of freedom: mean 61, standard deviation 11; 150 is beyond p = 1e-9. Mapping
    // a byte to a symbol with `% 62` and no rejection makes 8 symbols 25% likelier: ~ 7000.
    expect(chiSquared).toBeLessThan(150);
  });

  test('any one character changed, or another environment, fails the checksum: refused without a lookup', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...issued.slice(0, 500)),
        fc.nat(),
        fc.constantFrom(...BASE62),
        ({ environment, key }, at, replacement) => {
          const body = key.plaintext;
          const position = body.indexOf('_', 4) + 1 + (at % 34);
          fc.pre(body[position] !== replacement);
          const typo = body.slice(0, position) + replacement + body.slice(position + 1);
          expect(hashIfWellFormed(typo, environment)).toBeUndefined();
          const elsewhere = environments.find((e) => e !== environment)!;
          expect(hashIfWellFormed(body, elsewhere)).toBeUndefined();
        },
      ),
      { numRuns: 2000 },
    );
  });

  test('key material comes from crypto.randomBytes and nothing else', () => {
    // Every byte 5: every random character is BASE62[5].
    crypto.fixedBytes = (size) => Buffer.alloc(size, 5);
    const first = issueApiKey('development');
    const second = issueApiKey('development');
    expect(randomPart(first.plaintext)).toBe('5'.repeat(28));
    // Nothing else (a clock, Math.random) goes into a key: the same bytes, the same key.
    expect(second.plaintext).toBe(first.plaintext);
    expect(hashIfWellFormed(first.plaintext, 'development')).toBe(first.hash);
    // Bytes 248 to 255 are drawn again, not folded onto 0 to 7 (which would bias those).
    crypto.fixedBytes = (size) => Buffer.from(Array.from({ length: size }, (_, i) => (i % 9 === 8 ? 61 : 248 + (i % 9))));
    expect(randomPart(issueApiKey('production').plaintext)).toBe('z'.repeat(28));
    expect(randomBytes).toHaveBeenCalled();
  });
});

/** A store with just what Sessions and the setup link use. */
function fakeStore(overrides: Partial<Store> = {}): Store {
  return {
    createSession: vi.fn(async () => undefined),
    listMembershipsOfUser: vi.fn(async () => []),
    findUserByEmail: vi.fn(async () => undefined),
    countUsers: vi.fn(async () => 0),
    createSetupToken: vi.fn(async () => undefined),
    ...overrides,
  } as unknown as Store;
}

describe('session cookies, CSRF tokens, setup tokens and salts: 256 or 128 bits from crypto.randomBytes', () => {
  test('a session cookie and its CSRF token are 32 bytes of randomBytes each; the store gets the SHA-256 of the cookie', async () => {
    const sessions = new Sessions(fakeStore());
    const seen: number[] = [];
    let next = 0;
    crypto.fixedBytes = (size) => {
      seen.push(size);
      return Buffer.alloc(size, ++next);
    };
    const signedIn = await sessions.start({ id: 'usr_x', email: 'x@example.com' }, '127.0.0.1', null);
    expect(seen).toEqual([32, 32]);
    expect(signedIn.cookieValue).toBe(Buffer.alloc(32, 1).toString('base64url'));
    expect(signedIn.session.csrfToken).toBe(Buffer.alloc(32, 2).toString('base64url'));
    expect(signedIn.session.idHash).toBe(sha256(signedIn.cookieValue));
    expect(JSON.stringify(signedIn.session)).not.toContain(signedIn.cookieValue);
  });

  test('the setup token is 32 bytes of randomBytes; only its SHA-256 is stored', async () => {
    crypto.fixedBytes = (size) => Buffer.alloc(size, 9);
    const createSetupToken = vi.fn(async () => undefined);
    const link = await setupLinkIfFirstRun(fakeStore({ createSetupToken }), 'http://x');
    const token = Buffer.alloc(32, 9).toString('base64url');
    expect(link).toBe(`http://x/admin/setup?token=${token}`);
    expect(randomBytes).toHaveBeenCalledWith(32);
    expect(createSetupToken).toHaveBeenCalledWith(sha256(token), expect.any(Number), expect.any(Number));
  });

  test('each password hash has a salt of 16 bytes from randomBytes', async () => {
    crypto.fixedBytes = (size) => Buffer.alloc(size, 3);
    const hash = await hashPassword('correct horse battery staple', COST);
    expect(randomBytes).toHaveBeenCalledWith(16);
    expect(hash.split('$')[4]).toBe(Buffer.alloc(16, 3).toString('base64url'));
  });

  test('no server code uses Math.random', () => {
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (/\.ts$/.test(name)) files.push(path);
      }
    };
    walk(join(ROOT, 'src'));
    expect(files.length).toBeGreaterThan(20);
    // The transformation sandbox's prelude replaces QuickJS's Math.random (a company's code
    // gets none): text run inside the sandbox, not the server's. Its mentions are in comments
    // and that prelude only.
    const sandbox = join(ROOT, 'src', 'destinations', 'transform', 'sandbox.ts');
    const outsidePrelude = readFileSync(sandbox, 'utf8').replace(/const PRELUDE = `[\s\S]*?`;/, '').replace(/^\s*(\/\*\*|\*).*$/gm, '');
    expect(outsidePrelude).not.toMatch(/Math\.random/);
    expect(files.filter((file) => file !== sandbox && /Math\.random/.test(readFileSync(file, 'utf8')))).toEqual([]);
  });
});

describe('secrets are compared in constant time', () => {
  test('a key’s checksum and its hash are compared with timingSafeEqual', async () => {
    const key = issueApiKey('development');
    vi.clearAllMocks();
    expect(hashIfWellFormed(key.plaintext, 'development')).toBe(key.hash);
    expect(timingSafeEqual).toHaveBeenCalledTimes(1);
    expect(timingSafeEqual.mock.calls[0]![0]).toHaveLength(CHECKSUM_LENGTH);

    vi.clearAllMocks();
    expect(hashesEqual(key.hash, key.hash)).toBe(true);
    expect(hashesEqual(key.hash, sha256('other'))).toBe(false);
    expect(timingSafeEqual).toHaveBeenCalledTimes(2);

    // The authenticator checks the hash the cache returned the same way.
    const grant = { keyId: 'key_x', keyHash: key.hash, companyId: 'cmp_x', integrationId: 'int_x', scopes: ['webhooks:write'], expiresAt: null };
    const cache = { findKey: vi.fn(async () => grant), findIntegration: vi.fn(async () => undefined) } as unknown as KeyCache;
    vi.clearAllMocks();
    // (Built loosely: what else the constructor takes, a failure limiter, plays no part in liveGrant.)
    const noLimit = { retryAfterSeconds: () => 0, recordFailure: () => undefined };
    const authenticator = new (Authenticator as unknown as new (...args: unknown[]) => Authenticator)(cache, 'development', noLimit);
    expect(await authenticator.liveGrant(key.plaintext, Date.now())).toEqual(grant);
    // Once for the checksum, once for the hash.
    expect(timingSafeEqual).toHaveBeenCalledTimes(2);
  });

  test('a password is checked with scrypt and timingSafeEqual', async () => {
    const stored = await hashPassword('correct horse battery staple', COST);
    vi.clearAllMocks();
    expect(await verifyPassword('correct horse battery staple', stored)).toBe(true);
    expect(await verifyPassword('correct horse battery stapler', stored)).toBe(false);
    expect(scrypt).toHaveBeenCalledTimes(2);
    expect(timingSafeEqual).toHaveBeenCalledTimes(2);
  });

  test('an unknown email costs the same scrypt as a wrong password (no shortcut that tells accounts apart)', async () => {
    // Not the test processes' cost, nor the default: the decoy follows the configured one.
    const cost = COST + 2;
    const stored = await hashPassword('correct horse battery staple', cost);
    const store = fakeStore({
      findUserByEmail: vi.fn(async (email: string) =>
        email === 'known@example.com'
          ? { id: 'usr_k', email, passwordHash: stored, createdAt: 0, totpSecret: null, totpPendingSecret: null, totpLastStep: null }
          : undefined,
      ),
    });
    const signIn = new SignIn(store, new Sessions(store), new SignInGuard(cost), testSecretBox());
    const attempt = (email: string, password: string, ip: string) => signIn.signIn({ email, password }, ip, null);
    await expect(attempt('warm-up@example.com', 'x', '10.0.0.1')).rejects.toMatchObject({ code: 'invalid_credentials' });
    vi.clearAllMocks();
    await expect(attempt('unknown@example.com', 'a wrong password', '10.0.0.2')).rejects.toMatchObject({ code: 'invalid_credentials' });
    const work = () => ({ scrypt: scrypt.mock.calls.length, N: scrypt.mock.calls.map((call) => (call[3] as { N: number }).N), compare: timingSafeEqual.mock.calls.length });
    const unknownWork = work();
    vi.clearAllMocks();
    await expect(attempt('known@example.com', 'a wrong password', '10.0.0.3')).rejects.toMatchObject({ code: 'invalid_credentials' });
    const knownWork = work();
    expect(unknownWork).toEqual(knownWork);
    expect(knownWork).toMatchObject({ scrypt: 1, N: [2 ** cost] });
  });

  test('a CSRF token is compared with timingSafeEqual', () => {
    const session = { csrfToken: Buffer.alloc(32, 1).toString('base64url') } as SessionRecord;
    expect(csrfTokenMatches(session, session.csrfToken)).toBe(true);
    expect(csrfTokenMatches(session, `${session.csrfToken.slice(0, -1)}A`)).toBe(false);
    expect(timingSafeEqual).toHaveBeenCalledTimes(2);
    expect(csrfTokenMatches(session, undefined)).toBe(false);
    expect(csrfTokenMatches(session, 'short')).toBe(false);
  });
});
