import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { parseCidrList } from '../src/domain/cidr.js';
import { AddressGuard } from '../src/destinations/address-guard.js';
import { hashApiKey, hashIfWellFormed, hashesEqual, issueApiKey } from '../src/domain/api-key.js';
import { decodeCursor, encodeCursor } from '../src/domain/cursor.js';
import { isId, newId, newIntegrationKey, newSequencedId, newTimeOrderedId, newWebhookUuid, randomBase62, toBase62 } from '../src/domain/ids.js';
import { decoyPasswordHash, hashPassword, verifyPassword } from '../src/domain/password.js';
import { isJsonContentType, MAX_NESTING_DEPTH, nestingDepth, parseWebhookBody } from '../src/domain/webhook-body.js';
import { AppError, type ErrorCode } from '../src/errors.js';
import { GroupCommitWriter } from '../src/intake/group-commit.js';
import { RateLimiter } from '../src/intake/rate-limit.js';
import { DestinationManagement } from '../src/services/destinations.js';
import { Management } from '../src/services/management.js';
import type { PendingWebhook, RequestLogEntry, Store } from '../src/store/store.js';
import { addDestination } from './support/deliveries.js';
import { pendingLog } from './support/webhooks.js';
import { freshStore, testSecretBox } from './helpers.js';
import { seedKey } from './support/seed.js';
import { TEST_PASSWORD_HASH_COST, TEST_SECRETS_KEY } from './support/processes.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** The AppError `run` throws; fails the test when it throws something else or nothing. */
function appErrorOf(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error('expected an AppError, nothing was thrown');
}

function expectAppError(run: () => unknown, code: ErrorCode, field?: string): void {
  const error = appErrorOf(run);
  expect(error.code).toBe(code);
  if (field !== undefined) expect(error.details.field).toBe(field);
}

describe('api keys', () => {
  test('an issued key is whk_dev_ and 34 base62 characters', () => {
    const key = issueApiKey('development');
    expect(key.plaintext).toMatch(/^whk_dev_[0-9A-Za-z]{34}$/);
    expect(issueApiKey('staging').plaintext).toMatch(/^whk_stg_[0-9A-Za-z]{34}$/);
    expect(issueApiKey('production').plaintext).toMatch(/^whk_live_[0-9A-Za-z]{34}$/);
  });

  test('issued keys pass hashIfWellFormed, and the hash is the SHA-256 hex of the key', () => {
    for (let i = 0; i < 50; i++) {
      const key = issueApiKey('development');
      const expected = createHash('sha256').update(key.plaintext).digest('hex');
      expect(key.hash).toMatch(/^[0-9a-f]{64}$/);
      expect(key.hash).toBe(expected);
      expect(hashApiKey(key.plaintext)).toBe(expected);
      expect(hashIfWellFormed(key.plaintext, 'development')).toBe(expected);
    }
  });

  test('any single-character change makes the key fail', () => {
    const key = issueApiKey('development').plaintext;
    const replacements = `${BASE62}_-. `;
    let tried = 0;
    for (let i = 0; i < key.length; i++) {
      for (const c of replacements) {
        if (c === key[i]) continue;
        const changed = key.slice(0, i) + c + key.slice(i + 1);
        expect(hashIfWellFormed(changed, 'development'), changed).toBeUndefined();
        tried++;
      }
      // Dropped and doubled characters too.
      expect(hashIfWellFormed(key.slice(0, i) + key.slice(i + 1), 'development')).toBeUndefined();
      expect(hashIfWellFormed(key.slice(0, i) + key[i]! + key.slice(i), 'development')).toBeUndefined();
    }
    expect(tried).toBeGreaterThan(key.length * 60);
  });

  test("another environment's key fails, also with its tag rewritten", () => {
    const live = issueApiKey('production').plaintext;
    expect(hashIfWellFormed(live, 'production')).toBeDefined();
    expect(hashIfWellFormed(live, 'development')).toBeUndefined();
    expect(hashIfWellFormed(live, 'staging')).toBeUndefined();
    expect(hashIfWellFormed(live.replace('whk_live_', 'whk_dev_'), 'development')).toBeUndefined();
    const dev = issueApiKey('development').plaintext;
    expect(hashIfWellFormed(dev, 'production')).toBeUndefined();
  });

  test('the prefix is a short beginning of the key', () => {
    const key = issueApiKey('development');
    expect(key.plaintext.startsWith(key.prefix)).toBe(true);
    expect(key.prefix.startsWith('whk_dev_')).toBe(true);
    expect(key.prefix.length).toBeGreaterThan('whk_dev_'.length);
    expect(key.prefix.length).toBeLessThanOrEqual(16);
    const live = issueApiKey('production');
    expect(live.plaintext.startsWith(live.prefix)).toBe(true);
    expect(live.prefix.length).toBeGreaterThan('whk_live_'.length);
  });

  test('two keys differ', () => {
    const keys = Array.from({ length: 200 }, () => issueApiKey('development'));
    expect(new Set(keys.map((k) => k.plaintext)).size).toBe(200);
    expect(new Set(keys.map((k) => k.hash)).size).toBe(200);
  });

  test('random strings never pass hashIfWellFormed', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (candidate) => {
        expect(hashIfWellFormed(candidate, 'development')).toBeUndefined();
      }),
      { numRuns: 2000 },
    );
  });

  test('well-shaped keys with a random checksum do not pass', () => {
    const base62 = fc.constantFrom(...BASE62);
    fc.assert(
      fc.property(fc.string({ unit: base62, minLength: 34, maxLength: 34 }), (random) => {
        expect(hashIfWellFormed(`whk_dev_${random}`, 'development')).toBeUndefined();
      }),
      { numRuns: 2000 },
    );
  });

  test('hashesEqual compares hashes', () => {
    const a = issueApiKey('development').hash;
    const b = issueApiKey('development').hash;
    expect(hashesEqual(a, a)).toBe(true);
    expect(hashesEqual(a, b)).toBe(false);
    expect(hashesEqual(a, a.slice(0, 62))).toBe(false);
  });
});

describe('ids', () => {
  test('an id carries its prefix and 22 base62 characters', () => {
    for (const prefix of ['cmp', 'usr', 'int', 'key', 'req'] as const) {
      const id = newId(prefix);
      expect(id).toMatch(new RegExp(`^${prefix}_[0-9A-Za-z]{22}$`));
      expect(isId(prefix, id)).toBe(true);
    }
    expect(newId('cmp')).not.toBe(newId('cmp'));
  });

  test('isId refuses other types and wrong shapes', () => {
    const id = newId('cmp');
    expect(isId('int', id)).toBe(false);
    expect(isId('cmp', id.slice(0, -1))).toBe(false);
    expect(isId('cmp', `${id}x`)).toBe(false);
    expect(isId('cmp', `${id.slice(0, -1)}-`)).toBe(false);
    expect(isId('cmp', id.replace('cmp_', 'cmp-'))).toBe(false);
    expect(isId('cmp', '')).toBe(false);
    expect(isId('cmp', `cmp_${'a'.repeat(21)}\n`)).toBe(false);
  });

  test('random characters drawn across many refills of the byte pool never repeat a draw, and each of the 62 is as likely', () => {
    // 30,000 ids of 22 characters take about 165 refills of the 4 KiB pool.
    const ids = Array.from({ length: 30_000 }, () => newId('req'));
    expect(new Set(ids).size).toBe(ids.length);
    const counts = new Map<string, number>();
    for (const char of ids.map((id) => id.slice(4)).join('')) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect(counts.size).toBe(62);
    // Folding the bytes 248-255 onto the first 8 characters would give those a quarter more.
    const expected = (ids.length * 22) / 62;
    for (const [char, count] of counts) expect(Math.abs(count - expected) / expected, char).toBeLessThan(0.06);
  });

  test('time-ordered ids sort by their time, then are random', () => {
    const at = Date.UTC(2026, 10, 25);
    const earlier = newTimeOrderedId('req', at);
    const later = newTimeOrderedId('req', at + 1);
    expect(isId('req', earlier)).toBe(true);
    expect(earlier < later).toBe(true);
    expect(newTimeOrderedId('req', at).slice(0, 12)).toBe(earlier.slice(0, 12));
    expect(newTimeOrderedId('req', at)).not.toBe(earlier);
  });

  test('sequenced ids sort in the order they were made, also within one millisecond', () => {
    const at = Date.UTC(2026, 10, 28);
    const sameMs = Array.from({ length: 1000 }, () => newSequencedId('aud', at));
    expect(sameMs.every((id) => isId('aud', id))).toBe(true);
    expect(new Set(sameMs).size).toBe(sameMs.length);
    expect([...sameMs].sort()).toEqual(sameMs);
    // A later millisecond sorts after, its count starting again.
    const later = newSequencedId('aud', at + 1);
    expect(later > sameMs.at(-1)!).toBe(true);
    expect(later.slice(12, 16)).toBe('0000');
  });

  test('the audit log lists changes made in one millisecond newest first, in the order they were made', async () => {
    const fresh = await freshStore();
    try {
      const { companyId } = await seedKey(fresh.store);
      const at = Date.now();
      const names = Array.from({ length: 30 }, (_, i) => `Name ${i}`);
      for (const name of names) {
        await fresh.store.updateCompany(companyId, { name }, {
          actor: { type: 'cli', id: 'test', ip: null },
          action: 'company.update',
          targetType: 'company',
          targetId: companyId,
          after: { name },
          at,
        });
      }
      const listed = await fresh.store.listAuditLog(companyId, { action: 'company.update', limit: 100 });
      expect(listed.map((record) => (record.after as { name: string }).name)).toEqual([...names].reverse());
    } finally {
      await fresh.cleanup();
    }
  });

  test('integrations, keys and destinations made in one millisecond list newest first, in the order they were made', async () => {
    const fresh = await freshStore();
    try {
      const { companyId } = await seedKey(fresh.store);
      const at = Date.now();
      const actor = { type: 'cli' as const, id: 'test', ip: null };
      const management = new Management(fresh.store, { environment: 'development', baseUrl: 'http://localhost', defaultBodyLimit: 1024, secrets: testSecretBox() }, actor, () => at);
      const destinations = new DestinationManagement(
        fresh.store,
        { environment: 'development', secrets: testSecretBox(), addressGuard: new AddressGuard(parseCidrList('127.0.0.1/32')), baseUrl: 'http://localhost' },
        actor,
        () => at,
      );
      const names = Array.from({ length: 12 }, (_, i) => `Made ${i}`);
      for (const name of names) await management.createIntegration(companyId, { name });
      const made = await fresh.store.listIntegrations(companyId, { limit: 100 });
      expect(made.filter((each) => names.includes(each.name)).map((each) => each.name)).toEqual([...names].reverse());

      const integrationId = made.find((each) => each.name === names[0])!.id;
      const keyNames = names.map((name) => `key ${name}`);
      for (const name of keyNames) await management.createIntegrationKey(companyId, integrationId, { name });
      const keys = await fresh.store.listKeys(companyId, integrationId, { limit: 100 });
      expect(keys.filter((key) => keyNames.includes(key.name)).map((key) => key.name)).toEqual([...keyNames].reverse());

      for (const name of names) await destinations.create(companyId, { name, url: 'http://127.0.0.1:9/hook' });
      const listed = await fresh.store.listDestinations(companyId, { limit: 100 });
      expect(listed.map((each) => each.name)).toEqual([...names].reverse());
    } finally {
      await fresh.cleanup();
    }
  });

  test('webhook uuids are v7 and time ordered', () => {
    const first = newWebhookUuid();
    expect(first).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const many = Array.from({ length: 100 }, () => newWebhookUuid());
    expect(many).toEqual([...many].sort());
  });

  test('integration keys and random strings are base62', () => {
    expect(newIntegrationKey()).toMatch(/^[0-9A-Za-z]{24}$/);
    expect(randomBase62(100)).toMatch(/^[0-9A-Za-z]{100}$/);
    expect(toBase62(0, 6)).toBe('000000');
    expect(toBase62(61, 1)).toBe('z');
    expect(toBase62(62, 2)).toBe('10');
    expect(toBase62(2 ** 32 - 1, 6)).toHaveLength(6);
  });
});

describe('AppError', () => {
  test('carries no stack trace (an answer to a client, not a fault), and leaves the limit as it was', () => {
    const limit = Error.stackTraceLimit;
    const error = new AppError('service_unavailable', 'The service is overloaded; retry later.', { retryAfterSeconds: 1 });

    expect(error.stack).toBe('AppError: The service is overloaded; retry later.');
    expect(error).toMatchObject({ code: 'service_unavailable', status: 503, details: { retryAfterSeconds: 1 } });
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error('a fault').stack).toMatch(/\n\s+at /);
  });
});

describe('cursor', () => {
  test('round trip', () => {
    const cursor = { receivedAt: Date.UTC(2025, 5, 1), uuid: newWebhookUuid() };
    const text = encodeCursor(cursor);
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(text)).toEqual(cursor);
    expect(decodeCursor(encodeCursor({ receivedAt: 0, uuid: cursor.uuid }))).toEqual({ receivedAt: 0, uuid: cursor.uuid });
  });

  test('garbage is an invalid_request', () => {
    const uuid = newWebhookUuid();
    const garbage = [
      '',
      'abc',
      '!!!',
      Buffer.from(`12.not-a-uuid`).toString('base64url'),
      Buffer.from(`-1.${uuid}`).toString('base64url'),
      Buffer.from(`1.5.${uuid}`).toString('base64url'),
      Buffer.from(`${'9'.repeat(16)}.${uuid}`).toString('base64url'),
      Buffer.from(`${uuid}`).toString('base64url'),
      Buffer.from(`12.${uuid}\n`).toString('base64url'),
      'x'.repeat(10_000),
    ];
    for (const text of garbage) expectAppError(() => decodeCursor(text), 'invalid_request');
  });

  test('any string either decodes to a cursor or is an invalid_request', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 120 }), (text) => {
        try {
          const cursor = decodeCursor(text);
          expect(Number.isSafeInteger(cursor.receivedAt)).toBe(true);
          expect(cursor.uuid).toMatch(/^[0-9a-f-]{36}$/);
        } catch (error) {
          expect(error).toBeInstanceOf(AppError);
          expect((error as AppError).code).toBe('invalid_request');
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe('webhook body', () => {
  test.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['application/json;charset=UTF-8', true],
    ['Application/JSON', true],
    ['  application/json  ', true],
    ['application/cloudevents+json', true],
    ['application/vnd.api+json; charset=utf-8', true],
    ['text/plain', false],
    ['text/plain; charset=utf-8', false],
    ['application/x-www-form-urlencoded', false],
    ['multipart/form-data; boundary=x', false],
    ['application/jsonp', false],
    ['application/json-patch', false],
    ['application/octet-stream', false],
    ['+json', false],
    ['', false],
    [undefined, false],
  ])('isJsonContentType(%j) is %s', (header, expected) => {
    expect(isJsonContentType(header)).toBe(expected);
  });

  const parse = (text: string | Buffer) => parseWebhookBody(Buffer.isBuffer(text) ? text : Buffer.from(text, 'utf8'));

  test('event and data are read; data defaults to {}', () => {
    expect(parse('{"event":"invoice.paid","data":{"id":7},"extra":[1]}')).toEqual({
      event: 'invoice.paid',
      data: { id: 7 },
    });
    expect(parse('{"event":"ping"}')).toEqual({ event: 'ping', data: {} });
    expect(parse('  {"data":{},"event":"x"}\n')).toEqual({ event: 'x', data: {} });
  });

  test('the event must be a non-empty string', () => {
    for (const body of ['{}', '{"event":""}', '{"event":1}', '{"event":null}', '{"event":["a"]}', '{"event":{}}', '{"data":{}}']) {
      expectAppError(() => parse(body), 'validation_failed', 'event');
    }
  });

  test('the event is at most 200 characters, counted as code points', () => {
    expect(parse(JSON.stringify({ event: 'a'.repeat(200) })).event).toHaveLength(200);
    expectAppError(() => parse(JSON.stringify({ event: 'a'.repeat(201) })), 'validation_failed', 'event');
    const emoji = '😀'.repeat(200);
    expect(emoji.length).toBe(400);
    expect(parse(JSON.stringify({ event: emoji })).event).toBe(emoji);
    expectAppError(() => parse(JSON.stringify({ event: '😀'.repeat(201) })), 'validation_failed', 'event');
    expectAppError(() => parse(JSON.stringify({ event: `${'😀'.repeat(200)}a` })), 'validation_failed', 'event');
  });

  test('data, when present, is a JSON object', () => {
    for (const data of ['null', '[]', '[1]', '"x"', '1', 'true']) {
      expectAppError(() => parse(`{"event":"e","data":${data}}`), 'validation_failed', 'data');
    }
  });

  test('a body that is not a JSON object is invalid_json', () => {
    for (const body of ['', ' ', 'null', '[]', '[{"event":"e"}]', '"event"', '42', 'true', '{', '{"event":"e",}', "{'event':'e'}", '{"event":"e"} x']) {
      expectAppError(() => parse(body), 'invalid_json');
    }
  });

  test('nesting deeper than 128 levels is invalid_json', () => {
    // The top-level object is level 1 and data level 2: `k` arrays inside data reach 2 + k.
    const nested = (levels: number) => {
      const arrays = levels - 2;
      return `{"event":"deep","data":{"a":${'['.repeat(arrays)}${']'.repeat(arrays)}}}`;
    };
    expect(nestingDepth(nested(MAX_NESTING_DEPTH))).toBe(128);
    expect(parse(nested(128)).event).toBe('deep');
    expectAppError(() => parse(nested(129)), 'invalid_json');
    expectAppError(() => parse(nested(100_000)), 'invalid_json');
    // Objects count as arrays do, and only the deepest branch matters.
    const objects = (levels: number) => `{"event":"deep","data":{"wide":[1,2,{"x":null}],"a":${'{"k":'.repeat(levels - 2)}0${'}'.repeat(levels - 2)}}}`;
    expect(parse(objects(128)).event).toBe('deep');
    expectAppError(() => parse(objects(129)), 'invalid_json');
    // Brackets inside strings, escaped quotes included, are not nesting.
    const inString = JSON.stringify({ event: 'e', data: { s: `\\"${'['.repeat(1000)}`, t: '{'.repeat(1000) } });
    expect(nestingDepth(inString)).toBe(2);
    expect(parse(inString).event).toBe('e');
  });

  test('invalid UTF-8 is invalid_json', () => {
    const wrap = (bytes: number[]) =>
      Buffer.concat([Buffer.from('{"event":"'), Buffer.from(bytes), Buffer.from('"}')]);
    for (const bytes of [[0xff], [0xfe, 0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80]]) {
      expectAppError(() => parseWebhookBody(wrap(bytes)), 'invalid_json');
    }
    expect(parseWebhookBody(wrap([0xe2, 0x82, 0xac])).event).toBe('€');
  });

  test('__proto__, constructor and prototype keys do not pollute Object.prototype', () => {
    const body =
      '{"event":"e","__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":2}},' +
      '"data":{"__proto__":{"polluted":3},"constructor":{"prototype":{"polluted":4}},"prototype":{"polluted":5}}}';
    const payload = parse(body);
    expect(payload.event).toBe('e');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
    expect(Object.getPrototypeOf(payload.data)).toBe(Object.prototype);
    expect((payload.data as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('huge numbers and duplicate keys are still JSON', () => {
    expect(parse('{"event":"e","data":{"n":1e400,"m":-1e400,"i":123456789012345678901234567890}}').event).toBe('e');
    expect(parse('{"event":"first","event":"second"}').event).toBe('second');
  });
});

describe('config', () => {
  test('defaults', () => {
    expect(loadConfig({})).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      databaseUrl: 'sqlite:./data/intake.db',
      environment: 'development',
      baseUrl: 'http://localhost:8080',
      logLevel: 'info',
      writeQueueMax: 10_000,
      writeQueueMaxBytes: 64 * 1024 * 1024,
      defaultBodyLimit: 1024 * 1024,
    });
  });

  test('values are read and converted; empty means unset; unknown variables are ignored', () => {
    const config = loadConfig({
      PORT: '9090',
      HOST: '127.0.0.1',
      INTAKE_DATABASE_URL: 'postgres://intake:secret@db:5432/intake',
      INTAKE_SECRETS_KEY: TEST_SECRETS_KEY,
      INTAKE_ENV: 'production',
      LOG_LEVEL: '',
      PATH: '/usr/bin',
    });
    expect(config).toMatchObject({
      port: 9090,
      host: '127.0.0.1',
      databaseUrl: 'postgres://intake:secret@db:5432/intake',
      environment: 'production',
      baseUrl: 'http://localhost:9090',
      logLevel: 'info',
    });
    expect(loadConfig({ INTAKE_DATABASE_URL: 'postgresql://h/db', INTAKE_SECRETS_KEY: TEST_SECRETS_KEY }).databaseUrl).toBe('postgresql://h/db');
    expect(loadConfig({ INTAKE_DATABASE_URL: 'sqlite:/var/lib/intake.db' }).databaseUrl).toBe('sqlite:/var/lib/intake.db');
  });

  test('the base URL loses its trailing slashes', () => {
    expect(loadConfig({ INTAKE_BASE_URL: 'https://hooks.example.com/' }).baseUrl).toBe('https://hooks.example.com');
    expect(loadConfig({ INTAKE_BASE_URL: 'https://example.com/intake///' }).baseUrl).toBe('https://example.com/intake');
    expect(loadConfig({ INTAKE_BASE_URL: 'http://example.com:8080' }).baseUrl).toBe('http://example.com:8080');
  });

  test('every bad variable is reported at once, each naming its variable', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: 'abc', INTAKE_ENV: 'prod', INTAKE_DATABASE_URL: 'mysql://x' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(3);
    for (const name of ['PORT', 'INTAKE_ENV', 'INTAKE_DATABASE_URL']) {
      expect(problems.filter((p) => p.startsWith(`${name}=`)), name).toHaveLength(1);
    }
    expect(problems.find((p) => p.startsWith('INTAKE_ENV='))).toContain('development, staging, production');
    for (const problem of problems) expect((error as ConfigError).message).toContain(problem);
  });

  test.each([
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['PORT', '8080x'],
    ['INTAKE_BASE_URL', 'ftp://example.com'],
    ['INTAKE_BASE_URL', 'example.com'],
    ['INTAKE_DATABASE_URL', 'sqlite:'],
    ['LOG_LEVEL', 'verbose'],
    ['INTAKE_WRITE_QUEUE_MAX', '0'],
    ['INTAKE_DEFAULT_BODY_LIMIT', 'lots'],
  ])('%s=%s is refused', (name, value) => {
    let error: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toHaveLength(1);
    expect((error as ConfigError).problems[0]!.startsWith(`${name}=`)).toBe(true);
  });
});

describe('password', () => {
  const cost = Number(TEST_PASSWORD_HASH_COST);

  test('verifyPassword accepts the password and nothing else', async () => {
    const [first, second] = await Promise.all([
      hashPassword('correct horse battery staple', cost),
      hashPassword('correct horse battery staple', cost),
    ]);
    expect(first).toMatch(/^scrypt\$/);
    expect(first).not.toContain('correct horse');
    expect(first).not.toBe(second);
    expect(await verifyPassword('correct horse battery staple', first)).toBe(true);
    expect(await verifyPassword('correct horse battery stapl', first)).toBe(false);
    expect(await verifyPassword('correct horse battery staple', 'not-a-hash')).toBe(false);
    expect(await verifyPassword('correct horse battery staple', '')).toBe(false);
  });

  test.each([cost, cost + 3])('a decoy hash is made at once, costs a check what a real hash of its cost (2^%i) does, and no password matches it', async (at) => {
    const real = await hashPassword('correct horse battery staple', at);
    const decoy = decoyPasswordHash(at);
    const fields = (hash: string) => hash.split('$');

    // The scheme and the scrypt parameters, which set what a check costs, are a real hash's.
    expect(fields(decoy).slice(0, 4)).toEqual(fields(real).slice(0, 4));
    expect(fields(decoy)[1]).toBe(String(2 ** at));
    expect(fields(decoy).map((field) => field.length)).toEqual(fields(real).map((field) => field.length));
    expect(decoy).not.toBe(decoyPasswordHash(at));
    for (const password of ['', 'correct horse battery staple', 'decoy']) expect(await verifyPassword(password, decoy)).toBe(false);
  });
});

describe('RateLimiter', () => {
  test('a burst up to the limit, then refusals with a retry delay, then refill', () => {
    let now = 1_000_000;
    const limiter = new RateLimiter(() => now);
    for (let i = 0; i < 3; i++) expect(limiter.take('int_a', 3)).toBe(0);
    const wait = limiter.take('int_a', 3);
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(20);
    expect(Number.isInteger(wait)).toBe(true);

    // Another integration has its own bucket.
    expect(limiter.take('int_b', 3)).toBe(0);

    // 3 a minute is one every 20 s.
    now += 20_000;
    expect(limiter.take('int_a', 3)).toBe(0);
    expect(limiter.take('int_a', 3)).toBeGreaterThanOrEqual(1);

    // A long pause refills the bucket, but never beyond the limit.
    now += 10 * 60_000;
    for (let i = 0; i < 3; i++) expect(limiter.take('int_a', 3)).toBe(0);
    expect(limiter.take('int_a', 3)).toBeGreaterThanOrEqual(1);
  });

  test('a fast limit still asks for at least one second', () => {
    let now = 0;
    const limiter = new RateLimiter(() => now);
    for (let i = 0; i < 6000; i++) expect(limiter.take('int_fast', 6000)).toBe(0);
    expect(limiter.take('int_fast', 6000)).toBe(1);
    now += 10;
    expect(limiter.take('int_fast', 6000)).toBe(0);
  });
});

describe('GroupCommitWriter', () => {
  const logger = pino({ level: 'silent' });
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup() {
    const fresh = await freshStore();
    cleanups.push(() => fresh.cleanup());
    const seeded = await seedKey(fresh.store);
    // A spy that counts and delegates to the real method: the database is real.
    const commits = vi.spyOn(fresh.store, 'commitBatch');
    return { store: fresh.store, seeded, commits };
  }

  type Seeded = Awaited<ReturnType<typeof seedKey>>;

  function logRow(seeded: Seeded, status: number, webhookUuid: string | null): RequestLogEntry {
    return {
      id: newId('req'),
      companyId: seeded.companyId,
      integrationId: seeded.integrationId,
      receivedAt: Date.now(),
      method: 'POST',
      status,
      errorCode: status === 202 ? null : 'invalid_json',
      keyId: seeded.keyId,
      ip: '127.0.0.1',
      userAgent: null,
      sizeBytes: 10,
      durationMs: 1,
      webhookUuid,
    };
  }

  function webhook(seeded: Seeded, options: { uuid?: string; size?: number } = {}): PendingWebhook {
    const rawBody = Buffer.from(JSON.stringify({ event: 'e', data: { pad: 'x'.repeat(options.size ?? 0) } }));
    const uuid = options.uuid ?? newWebhookUuid();
    return {
      uuid,
      companyId: seeded.companyId,
      integrationId: seeded.integrationId,
      keyId: seeded.keyId,
      event: 'e',
      receivedAt: Date.now(),
      rawBody,
      bodySha256: createHash('sha256').update(rawBody).digest('hex'),
      headers: '{}',
      sourceIp: '127.0.0.1',
      idempotencyKey: null,
      log: pendingLog(logRow(seeded, 202, null)),
    };
  }

  const stored = (store: Store, seeded: Seeded) =>
    store.listWebhooks(seeded.companyId, seeded.integrationId, { limit: 1000 }).then((rows) => rows.map((r) => r.uuid));

  test('webhooks submitted in the same tick go into one transaction', async () => {
    const { store, seeded, commits } = await setup();
    const writer = new GroupCommitWriter(store, { maxQueued: 1000, maxQueuedBytes: 1 << 20 }, logger);
    const batch = Array.from({ length: 50 }, () => webhook(seeded));
    const outcomes = await Promise.all(batch.map((w) => writer.submit(w)));

    expect(commits).toHaveBeenCalledTimes(1);
    expect(commits.mock.calls[0]![0]).toHaveLength(50);
    expect(outcomes).toEqual(batch.map((w) => ({ kind: 'accepted', uuid: w.uuid, receivedAt: w.receivedAt })));
    expect((await stored(store, seeded)).sort()).toEqual(batch.map((w) => w.uuid).sort());
    expect(await store.listRequestLog(seeded.companyId, seeded.integrationId, 100)).toHaveLength(50);
  });

  test('after a commit, only the webhooks with a delivery due are handed on (the others are not kept for delivery)', async () => {
    const { store, seeded } = await setup();
    await addDestination(store, seeded.companyId, { name: 'Orders', eventPatterns: ['order.*'] });
    const handedOn: string[][] = [];
    const writer = new GroupCommitWriter(
      store,
      { maxQueued: 1000, maxQueuedBytes: 1 << 20, onDeliveriesDue: (webhooks) => handedOn.push(webhooks.map((w) => w.uuid)) },
      logger,
    );
    const order = { ...webhook(seeded), event: 'order.created' };
    const others = [webhook(seeded), webhook(seeded)];
    await Promise.all([order, ...others].map((w) => writer.submit(w)));
    expect(handedOn).toEqual([[order.uuid]]);

    await Promise.all([webhook(seeded), webhook(seeded)].map((w) => writer.submit(w)));
    expect(handedOn).toEqual([[order.uuid]]);
  });

  test('beyond maxQueued, submit refuses with service_unavailable and a retry delay; nothing is stored', async () => {
    const { store, seeded } = await setup();
    const writer = new GroupCommitWriter(store, { maxQueued: 3, maxQueuedBytes: 1 << 20 }, logger);
    const accepted = Array.from({ length: 3 }, () => webhook(seeded));
    const pendingOutcomes = accepted.map((w) => writer.submit(w));
    const refused = webhook(seeded);

    let error: unknown;
    try {
      await writer.submit(refused);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('service_unavailable');
    expect((error as AppError).status).toBe(503);
    expect((error as AppError).details.retryAfterSeconds).toBeGreaterThanOrEqual(1);

    await Promise.all(pendingOutcomes);
    expect((await stored(store, seeded)).sort()).toEqual(accepted.map((w) => w.uuid).sort());
    // Once the queue has drained, there is room again.
    await expect(writer.submit(webhook(seeded))).resolves.toMatchObject({ kind: 'accepted' });
  });

  test('beyond maxQueuedBytes, submit refuses with service_unavailable', async () => {
    const { store, seeded } = await setup();
    const writer = new GroupCommitWriter(store, { maxQueued: 100, maxQueuedBytes: 4096 }, logger);
    const first = writer.submit(webhook(seeded, { size: 3000 }));
    let error: unknown;
    try {
      await writer.submit(webhook(seeded, { size: 3000 }));
    } catch (caught) {
      error = caught;
    }
    expect((error as AppError).code).toBe('service_unavailable');
    await first;
    expect(await stored(store, seeded)).toHaveLength(1);
  });

  test('drain() resolves after everything queued is written', async () => {
    const { store, seeded } = await setup();
    const writer = new GroupCommitWriter(store, { maxQueued: 1000, maxQueuedBytes: 1 << 20, maxBatch: 7 }, logger);
    await writer.drain();
    const batch = Array.from({ length: 30 }, () => webhook(seeded));
    const outcomes = batch.map((w) => writer.submit(w));
    writer.submitLog(logRow(seeded, 401, null));

    await writer.drain();
    expect(writer.queued).toBe(0);
    expect((await stored(store, seeded)).sort()).toEqual(batch.map((w) => w.uuid).sort());
    const statuses = (await store.listRequestLog(seeded.companyId, seeded.integrationId, 100)).map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(1);
    expect(statuses).toHaveLength(31);
    await Promise.all(outcomes);
  });

  test('minSpread: what has queued is spread over the groups in flight, at least minSpread each, at most maxBatch', async () => {
    const { store, seeded, commits } = await setup();
    const writer = new GroupCommitWriter(store, { maxQueued: 1000, maxQueuedBytes: 1 << 20, maxInFlight: 2, minSpread: 3, maxBatch: 10 }, logger);
    const sizes = () => commits.mock.calls.map(([webhooks]) => webhooks.length);

    // A short queue: groups of minSpread, the rest in the last.
    let outcomes = Array.from({ length: 5 }, () => writer.submit(webhook(seeded)));
    await writer.drain();
    expect(sizes()).toEqual([3, 2]);

    // A deeper queue: spread over the two groups in flight (a writer filling each group to
    // maxBatch would send 10 first).
    commits.mockClear();
    outcomes = outcomes.concat(Array.from({ length: 14 }, () => writer.submit(webhook(seeded))));
    await writer.drain();
    expect(sizes()[0]).toBe(7);
    expect(sizes().reduce((sum, size) => sum + size, 0)).toBe(14);

    // A deep queue: each group at most maxBatch.
    commits.mockClear();
    outcomes = outcomes.concat(Array.from({ length: 30 }, () => writer.submit(webhook(seeded))));
    await writer.drain();
    expect(sizes().slice(0, 2)).toEqual([10, 10]);
    expect(sizes().reduce((sum, size) => sum + size, 0)).toBe(30);
    expect((await Promise.all(outcomes)).every((outcome) => outcome.kind === 'accepted')).toBe(true);
  });

  test('a log row alone is written with the next group', async () => {
    const { store, seeded, commits } = await setup();
    const writer = new GroupCommitWriter(store, { maxQueued: 10, maxQueuedBytes: 1 << 20 }, logger);
    writer.submitLog(logRow(seeded, 415, null));
    await writer.drain();
    expect(commits).toHaveBeenCalledTimes(1);
    expect(await store.listRequestLog(seeded.companyId, seeded.integrationId, 10)).toHaveLength(1);
  });

  test('a failed transaction refuses every webhook in it with 503 and stores none', async () => {
    const { store, seeded } = await setup();
    const writer = new GroupCommitWriter(store, { maxQueued: 10, maxQueuedBytes: 1 << 20 }, logger);
    const uuid = newWebhookUuid();
    const results = await Promise.allSettled([
      writer.submit(webhook(seeded)),
      writer.submit(webhook(seeded, { uuid })),
      writer.submit(webhook(seeded, { uuid })),
    ]);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      const reason = (result as PromiseRejectedResult).reason as AppError;
      expect(reason).toBeInstanceOf(AppError);
      expect(reason.code).toBe('service_unavailable');
    }
    expect(writer.failing).toBe(true);
    expect(await stored(store, seeded)).toEqual([]);

    await expect(writer.submit(webhook(seeded))).resolves.toMatchObject({ kind: 'accepted' });
    expect(writer.failing).toBe(false);
  });
});
