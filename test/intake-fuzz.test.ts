import fc from 'fast-check';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { issueApiKey } from '../src/domain/api-key.js';
import { MAX_NESTING_DEPTH } from '../src/domain/webhook-body.js';
import { Management } from '../src/services/management.js';
import { buildTestApp, freshStore, sendWebhook, type TestApp, type TestTenant } from './helpers.js';
import type { TestDatabase } from './support/databases.js';
import { cleanupAll, LOOPBACK, startServer, type ServerProcess } from './support/processes.js';

/**
 * Property tests of the intake addresses and the key-authenticated reads: whatever arrives
 * (bodies, headers, paths, queries, raw bytes on a socket), the answer is one the contract
 * names, never a 5xx; every error is a JSON body with `error` and `message`; nothing leaks
 * into Object.prototype; an accepted body reads back byte for byte; one sender's request
 * never makes another's fail; and a real server process keeps answering throughout.
 *
 * The failed-authentication limit per IP is turned off here (every request comes from
 * 127.0.0.1 and most carry junk keys); the tests of the limits cover it.
 *
 * Properties with `examples` always try those inputs first: each once broke the property
 * (see the comments there), so they are checked on every run, not only when drawn.
 */

const FUZZ_ENV = { INTAKE_AUTH_FAILURE_LIMIT: '0' };

/** fast-check runs per property; together they keep this file well under 30 s. */
const RUNS = {
  bodies: 300,
  valid: 200,
  evilKeys: 200,
  events: 150,
  nesting: 60,
  invalidUtf8: 150,
  paths: 300,
  headers: 150,
  reads: 200,
  timeFilters: 120,
  isolation: 80,
  managementBodies: 100,
  managementReads: 150,
  rawSocket: 200,
} as const;

/** Statuses the contract names for the intake addresses and their reads. */
const INTAKE_STATUSES = new Set([200, 202, 400, 401, 403, 404, 405, 413, 414, 415, 422, 429]);
/** What the HTTP layer itself may answer before a route runs: too slow, too long, an Expect it cannot meet. */
const TRANSPORT_STATUSES = new Set([408, 414, 417, 431]);
const SNAKE_CASE = /^[a-z][a-z0-9_]*$/;

let t: TestApp;
let open: TestTenant;
let small: TestTenant;
let limited: TestTenant;
let victim: TestTenant;
let managementHeaders: Record<string, string>;
let prototypeBefore: string[];

beforeAll(async () => {
  prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
  t = await buildTestApp(FUZZ_ENV);
  open = await t.newTenant();
  small = await t.newTenant({ bodyLimitBytes: 512 });
  limited = await t.newTenant({ rateLimitPerMinute: 20 });
  victim = await t.newTenant();
  const key = await t.management.createManagementKey(open.companyId, ['integrations:manage', 'logs:read']);
  managementHeaders = { 'x-api-key': key.apiKey };
});

afterAll(async () => {
  await t?.close();
});

type Response = Awaited<ReturnType<typeof sendWebhook>>;

/** Object.prototype is as it was: no property added, none polluted. */
function expectNoPollution(): void {
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
  const probe = {} as Record<string, unknown>;
  for (const name of ['polluted', 'event', 'data', 'isAdmin']) expect(probe[name], `Object.prototype.${name}`).toBeUndefined();
}

/** An error answer: JSON, with non-empty string `error` and `message`, and a snake_case `code` if any. */
function expectJsonError(status: number, contentType: string | undefined, text: string, what: string): void {
  expect(String(contentType ?? ''), `${what}: ${status} without a JSON Content-Type: ${text.slice(0, 300)}`).toMatch(
    /^application\/json/i,
  );
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${what}: ${status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 300))}`);
  }
  expect(typeof body === 'object' && body !== null && !Array.isArray(body), `${what}: ${text.slice(0, 300)}`).toBe(true);
  const { error, message, code } = body as { error?: unknown; message?: unknown; code?: unknown };
  expect(typeof error === 'string' && error.length > 0, `${what}: "error" in ${text.slice(0, 300)}`).toBe(true);
  expect(typeof message === 'string' && message.length > 0, `${what}: "message" in ${text.slice(0, 300)}`).toBe(true);
  if (code !== undefined) expect(code, `${what}: code in ${text.slice(0, 300)}`).toMatch(SNAKE_CASE);
}

/** The properties every answer keeps, whatever the request. */
function expectContractAnswer(response: Response, allowed: ReadonlySet<number> = INTAKE_STATUSES): void {
  const what = `${response.statusCode}: ${response.body.slice(0, 300)}`;
  expect(allowed.has(response.statusCode), `status ${what}`).toBe(true);
  if (response.statusCode >= 300) expectJsonError(response.statusCode, response.headers['content-type'] as string, response.body, 'answer');
  if (response.statusCode === 429) expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(response.headers['x-injected'], 'a header sent by the client came back').toBeUndefined();
  expectNoPollution();
}

/** A 200 or 202 names a webhook whose stored body is exactly the bytes sent. */
async function expectReadBack(tenant: TestTenant, response: Response, sent: Buffer): Promise<void> {
  if (response.statusCode !== 200 && response.statusCode !== 202) return;
  const { uuid } = response.json() as { uuid: string };
  if (response.statusCode === 200) expect(response.headers['idempotent-replayed']).toBe('true');
  const stored = await t.store.getWebhook(tenant.companyId, tenant.integrationId, uuid);
  expect(stored, `webhook ${uuid} not stored`).toBeDefined();
  // A replay (200) names the first body, which had the same SHA-256: the same bytes.
  expect(stored!.rawBody.equals(sent), 'stored raw body differs from the bytes sent').toBe(true);

  const read = await t.app.inject({
    method: 'GET',
    url: `/api/webhooks/${tenant.integrationKey}/${uuid}`,
    headers: { 'x-api-key': tenant.apiKey },
  });
  expect(read.statusCode, read.body.slice(0, 300)).toBe(200);
  expect(Buffer.from((read.json() as { raw_body: string }).raw_body, 'utf8').equals(sent), 'raw_body read back differs').toBe(true);
}

/** JSON.stringify of a parsed document: the same text for the same JSON value, whatever its keys. */
const canonical = (value: unknown) => JSON.stringify(value);

/**
 * An accepted webhook reads back with the event and data it was sent with (as JSON.parse
 * reads the raw body): no key dropped, no prototype swapped in on the way out.
 */
async function expectSameDocument(tenant: TestTenant, response: Response, sent: Buffer): Promise<void> {
  expect(response.statusCode, response.body.slice(0, 300)).toBe(202);
  const { uuid } = response.json() as { uuid: string };
  const document = JSON.parse(sent.toString('utf8').replace(/^\ufeff/, '')) as { event: string; data?: unknown };
  const read = await t.app.inject({
    method: 'GET',
    url: `/api/webhooks/${tenant.integrationKey}/${uuid}`,
    headers: { 'x-api-key': tenant.apiKey },
  });
  expect(read.statusCode, read.body.slice(0, 300)).toBe(200);
  const item = JSON.parse(read.body) as { event: string; data: unknown };
  expect(item.event, 'event read back').toBe(document.event);
  expect(canonical(item.data), 'data read back').toBe(canonical(document.data ?? {}));
}

// --- Generators ----------------------------------------------------------------------------

const jsonText = (value: unknown) => JSON.stringify(value);

/** Keys an attacker reaches for, and some that collide with the webhook's own fields. */
const EVIL_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'polluted',
  'toString',
  'valueOf',
  'hasOwnProperty',
  '__defineGetter__',
  '__lookupGetter__',
  'isPrototypeOf',
  'isAdmin',
  'length',
  'then',
];
const jsonKey = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...EVIL_KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 6 }) });

/** Number literals JSON allows, however large, small or long. */
const numberText = fc.oneof(
  fc.constantFrom(
    '1e400',
    '-1e400',
    '1e-400',
    '123456789012345678901234567890',
    '-0',
    '0.0000001',
    '9007199254740993',
    '1.7976931348623157e309',
    '4.9e-325',
    '0e999999999',
    '1E+99999999999999999999',
  ),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => jsonText(n)),
  fc
    .tuple(
      fc.stringMatching(/^-?[1-9][0-9]{0,400}$/),
      fc.option(fc.stringMatching(/^\.[0-9]{1,60}$/), { nil: '' }),
      fc.option(fc.stringMatching(/^[eE][+-]?[0-9]{1,8}$/), { nil: '' }),
    )
    .map(([whole, fraction, exponent]) => whole + fraction + exponent),
);

/** Strings of any code points, lone surrogates and U+0000 included, JSON-escaped. */
const stringText = fc.string({ unit: 'binary', maxLength: 20 }).map(jsonText);

const leafText = fc.oneof(fc.constantFrom('null', 'true', 'false'), numberText, stringText);

const objectText = (entries: Array<[string, string]>) => `{${entries.map(([key, value]) => `${jsonText(key)}:${value}`).join(',')}}`;

/**
 * JSON text written by hand, not by JSON.stringify: objects are lists of entries, so the
 * same key may come twice and `__proto__` is an ordinary key, at any depth.
 */
const { value: evilValue, object: evilObject } = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', maxDepth: 6 }, leafText, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
  object: fc.array(fc.tuple(jsonKey, tie('value')), { maxLength: 5 }).map(objectText),
}));

/** What a prototype-pollution payload looks like once it lands on Object.prototype. */
const POISON = '{"polluted":"yes","isAdmin":true,"event":"polluted-event","data":{"polluted":"yes"},"prototype":{"polluted":"yes"}}';

/** A pollution payload under __proto__, constructor or prototype, below 0 to 60 levels of objects and arrays. */
const poisonAtDepth = fc
  .tuple(
    fc.array(fc.constantFrom('[', '__proto__', 'constructor', 'prototype', 'x'), { maxLength: 60 }),
    fc.constantFrom('{"__proto__":P}', '{"constructor":{"prototype":P}}', '{"prototype":P}', '{"__proto__":{"__proto__":P}}'),
  )
  .map(([path, shape]) => {
    let text = shape.replace('P', POISON);
    for (const step of [...path].reverse()) text = step === '[' ? `[${text}]` : `{${jsonText(step)}:${text}}`;
    return text;
  });

/** A valid event: 1 to 200 characters of printable text. */
const validEvent = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 50 });

/** Extra top-level entries (neither event nor data), evil ones most of all. */
const extraEntries = fc.array(
  fc.tuple(
    jsonKey.filter((key) => key !== 'event' && key !== 'data'),
    fc.oneof(evilValue, poisonAtDepth),
  ),
  { maxLength: 3 },
);

/** Valid webhooks whose keys are __proto__, constructor and the like, at every depth, repeated. */
const evilValidBody = fc
  .tuple(validEvent, fc.oneof(evilObject, poisonAtDepth.map((p) => (p.startsWith('[') ? `{"k":${p}}` : p))), extraEntries, fc.boolean())
  .map(([event, data, extra, eventLast]) => {
    const entries: Array<[string, string]> = [['data', data], ...extra];
    if (eventLast) entries.push(['event', jsonText(event)]);
    else entries.unshift(['event', jsonText(event)]);
    return Buffer.from(objectText(entries));
  });

/** Byte sequences that are not UTF-8: stray continuations, overlongs, surrogates, past U+10FFFF, truncated. */
const INVALID_UTF8 = [
  [0x80],
  [0xbf],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf0, 0x80, 0x80, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xfc, 0x84, 0x80, 0x80, 0x80, 0x80],
  [0xfe],
  [0xff],
  [0xc3],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
].map((bytes) => Buffer.from(bytes));

/** A valid webhook with invalid UTF-8 bytes spliced into its event, a data key or a data value. */
const invalidUtf8Body = fc
  .tuple(
    fc.constantFrom('event', 'key', 'value', 'extra'),
    fc.array(fc.constantFrom(...INVALID_UTF8), { minLength: 1, maxLength: 3 }),
    fc.string({ unit: 'grapheme', maxLength: 10 }),
  )
  .map(([where, bad, text]) => {
    const before = Buffer.from(text.slice(0, 5).replace(/["\\]/g, ''));
    // Each bad sequence between ASCII letters, so that two of them never make a valid one.
    const inside = Buffer.concat([before, ...bad.flatMap((sequence) => [Buffer.from('x'), sequence]), Buffer.from('xé😀')]);
    const parts: Record<string, [string, string]> = {
      event: ['{"event":"', '","data":{}}'],
      key: ['{"event":"e","data":{"', '":1}}'],
      value: ['{"event":"e","data":{"k":"', '"}}'],
      extra: ['{"event":"e","', '":null}'],
    };
    const [head, tail] = parts[where]!;
    return Buffer.concat([Buffer.from(head), inside, Buffer.from(tail)]);
  });

/** Nesting from 100 levels (some under the limit) to 100,000, of arrays or objects, here or there. */
const deepBody = fc
  .tuple(
    fc.oneof(fc.integer({ min: 100, max: 200 }), fc.constantFrom(MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH - 1, 1000, 10_000, 100_000)),
    fc.constantFrom('[', '{"a":'),
    fc.constantFrom('data', 'extra', 'whole', 'string'),
  )
  .map(([depth, open, where]): { body: string; depth: number; withinLimit?: number } => {
    const close = open === '[' ? ']' : '}';
    const nested = `${open.repeat(depth)}1${close.repeat(depth)}`;
    // Depth counted as the service counts it: every [ and { outside strings.
    switch (where) {
      case 'data':
        return { body: `{"event":"deep","data":{"x":${nested}}}`, depth: depth + 2 };
      case 'extra':
        return { body: `{"event":"deep","x":${nested}}`, depth: depth + 1 };
      case 'whole':
        // An array is not a webhook (400); an object without event is one that breaks the rules (422).
        return { body: nested, depth, withinLimit: open === '[' ? 400 : 422 };
      default:
        // Brackets inside a string are text, not nesting.
        return { body: `{"event":"deep","data":{"s":${jsonText(nested)}}}`, depth: 2 };
    }
  });

/** Bodies a sender, a buggy client or an attacker may send. */
const bodies: fc.Arbitrary<Buffer> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }).map((s) => Buffer.from(s, 'utf8')),
  fc.uint8Array({ maxLength: 600 }).map((bytes) => Buffer.from(bytes)),
  fc.json({ maxDepth: 4 }).map((text) => Buffer.from(text)),
  fc
    .record({ event: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 210 }), data: fc.jsonValue({ maxDepth: 3 }) })
    .map((doc) => Buffer.from(jsonText(doc))),
  fc
    .record({ event: fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }), data: fc.object({ maxDepth: 2 }) })
    .map((doc) => Buffer.from(jsonText(doc))),
  fc
    .record({ event: fc.string({ maxLength: 20 }), data: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })) }, { requiredKeys: ['event'] })
    .map((doc) => Buffer.from(jsonText(doc))),
  deepBody.map(({ body }) => Buffer.from(body)),
  numberText.chain((n) => fc.constantFrom(`{"event":"number","data":{"n":${n}}}`, `{"event":${n}}`, `{"event":"n","data":${n}}`, n)).map((s) => Buffer.from(s)),
  evilValidBody,
  fc.tuple(extraEntries, evilObject).map(([extra, object]) => Buffer.from(objectText([...extra, ['x', object]]))),
  poisonAtDepth.map((p) => Buffer.from(p)),
  fc
    .tuple(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 1 }))
    .map(([event, other]) => Buffer.from(`{"event":${jsonText(event)},"event":${jsonText(other)},"data":{"k":1,"k":2}}`)),
  fc
    .tuple(fc.integer({ min: 190, max: 1000 }), fc.constantFrom('a', 'é', '😀', '\u0000', '"', '\ud800'))
    .map(([length, char]) => Buffer.from(jsonText({ event: char.repeat(length), data: {} }))),
  fc.integer({ min: 1000, max: 200_000 }).map((length) => Buffer.from(`{"event":"long key","data":{${jsonText('k'.repeat(length))}:1}}`)),
  invalidUtf8Body,
  fc.constantFrom('', ' ', 'null', '[]', '{}', '"x"', '{"event":null}', '{"event":"e","data":null}', '\ufeff{"event":"bom"}', '{"event":"\\u0000"}').map((s) =>
    Buffer.from(s),
  ),
);

const validBody = fc
  .record({ event: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 50 }), data: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })) })
  .map((doc) => Buffer.from(jsonText(doc)));

/** Characters a header value may carry on the wire: visible ASCII, space, tab, obs-text. */
const headerChar = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.constant(0x09),
  fc.integer({ min: 0x80, max: 0xff }),
).map((code) => String.fromCharCode(code));
const headerValue = fc.string({ unit: headerChar, maxLength: 300 });

const contentTypes = fc.oneof(
  fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON;charset=UTF-8',
    'application/cloudevents+json',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=----x',
    'application/json; charset=latin1',
    'application/json;;;',
    ';',
    '',
  ),
  headerValue,
);

const idempotencyKeys = fc.option(fc.oneof(fc.constantFrom('a', 'b', 'same-key'), headerValue), { nil: undefined });

const tenants = () => fc.constantFrom(open, small, limited);

/** Keys that look real: right shape and checksum, but unknown, or of another environment. */
const lookalikeKeys = () =>
  fc.constantFrom(
    issueApiKey('development').plaintext,
    issueApiKey('production').plaintext,
    issueApiKey('staging').plaintext,
    `${open.apiKey.slice(0, -1)}${open.apiKey.endsWith('0') ? '1' : '0'}`,
    open.apiKey.replace('whk_dev_', 'whk_live_'),
    open.apiKey.toUpperCase(),
    ` ${open.apiKey}`,
    `${open.apiKey}\t`,
    `Bearer ${open.apiKey}`,
  );

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
/** An instant long before or long after the webhooks above, written in one of RFC 3339's forms. */
const stamp = fc
  .record({
    future: fc.boolean(),
    date: fc.date({ min: new Date('1971-01-01T00:00:00Z'), max: new Date('2018-12-31T00:00:00Z'), noInvalidDate: true }),
    leapSecond: fc.boolean(),
    fraction: fc.option(fc.stringMatching(/^[0-9]{1,12}$/), { nil: undefined }),
    offset: fc.option(fc.tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 })), {
      nil: undefined,
    }),
    lowerCase: fc.boolean(),
  })
  .map(({ future, date, leapSecond, fraction, offset, lowerCase }) => {
    const year = date.getUTCFullYear() + (future ? 200 : 0);
    const time = leapSecond ? '23:59:60' : `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}`;
    const zone = offset === undefined ? 'Z' : `${offset[0]}${pad(offset[1])}:${pad(offset[2])}`;
    const text = `${pad(year, 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}T${time}${fraction ? `.${fraction}` : ''}${zone}`;
    return { future, text: lowerCase ? text.toLowerCase() : text };
  });

/** Text with U+0000 somewhere, as a query value or path segment may carry it. */
const withNul = fc.tuple(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 })).map(([a, b]) => `${a}\u0000${b}`);

describe('intake fuzzing, in process', () => {
  test('arbitrary bodies, content types and idempotency keys', async () => {
    await fc.assert(
      fc.asyncProperty(
        tenants(),
        bodies,
        fc.option(contentTypes, { nil: undefined }),
        idempotencyKeys,
        fc.constantFrom('/api/webhooks', '/api/webhook'),
        async (tenant, body, contentType, idempotencyKey, path) => {
          const headers: Record<string, string> = {};
          if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
          const response = await sendWebhook(t.app, tenant.integrationKey, {
            apiKey: tenant.apiKey,
            body,
            contentType,
            headers,
            path,
          });
          expectContractAnswer(response);
          await expectReadBack(tenant, response, body);
        },
      ),
      { numRuns: RUNS.bodies },
    );
  });

  test('valid webhooks are accepted and read back, with any idempotency key', async () => {
    await fc.assert(
      fc.asyncProperty(validBody, idempotencyKeys, async (body, idempotencyKey) => {
        const headers: Record<string, string> = {};
        if (idempotencyKey !== undefined) headers['webhook-id'] = idempotencyKey;
        const response = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body, headers });
        expectContractAnswer(response);
        if (idempotencyKey === undefined || idempotencyKey === '') expect(response.statusCode).toBe(202);
        await expectReadBack(open, response, body);
      }),
      { numRuns: RUNS.valid },
    );
  });

  test('__proto__, constructor and prototype keys at any depth, repeated keys, huge numbers: accepted as sent, nothing polluted', async () => {
    await fc.assert(
      fc.asyncProperty(evilValidBody, async (body) => {
        const response = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body });
        expectContractAnswer(response);
        expect(response.statusCode, `${body.toString().slice(0, 300)} → ${response.body}`).toBe(202);
        await expectReadBack(open, response, body);
        await expectSameDocument(open, response, body);
        expectNoPollution();
      }),
      { numRuns: RUNS.evilKeys },
    );
  });

  test('an event of any code points (U+0000, lone surrogates) is refused with 422 or stored and read back as sent', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
          fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\ufffe', '\u2028', '😀'.repeat(200)),
        ),
        async (event) => {
          const body = Buffer.from(jsonText({ event, data: {} }));
          const response = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body });
          expectContractAnswer(response);
          expect([202, 422], `event ${jsonText(event)} → ${response.statusCode} ${response.body}`).toContain(response.statusCode);
          if (response.statusCode === 422) {
            expect((response.json() as { field?: string }).field).toBe('event');
            return;
          }
          await expectReadBack(open, response, body);
          await expectSameDocument(open, response, body);
        },
      ),
      {
        numRuns: RUNS.events,
        // U+0000: 503 on PostgreSQL (text cannot hold it); a lone surrogate: stored as U+FFFD.
        examples: [['\u0000'], ['\ud800']],
      },
    );
  });

  test('deep nesting, to 100,000 levels: refused with 400 past the limit, accepted and read back within it', async () => {
    await fc.assert(
      fc.asyncProperty(deepBody, async ({ body, depth, withinLimit }) => {
        const sent = Buffer.from(body);
        const response = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body: sent });
        expectContractAnswer(response);
        const expected = depth > MAX_NESTING_DEPTH ? 400 : (withinLimit ?? 202);
        expect(response.statusCode, `depth ${depth}: ${response.body.slice(0, 200)}`).toBe(expected);
        if (expected === 202) {
          await expectReadBack(open, response, sent);
          await expectSameDocument(open, response, sent);
        }
      }),
      { numRuns: RUNS.nesting },
    );
  });

  test('invalid UTF-8 bytes anywhere in a body are refused with 400, never stored', async () => {
    await fc.assert(
      fc.asyncProperty(invalidUtf8Body, async (body) => {
        const response = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body });
        expectContractAnswer(response);
        expect(response.statusCode, `${body.toString('hex')} → ${response.body}`).toBe(400);
      }),
      { numRuns: RUNS.invalidUtf8 },
    );
  });

  test('arbitrary API keys and integration keys in the path, very long ones too', async () => {
    const segments = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 250 }).map((s) => encodeURIComponent(s)),
      fc.string({ unit: fc.constantFrom(...'abcXYZ019%._~-+!$&\'()*,;=:@'), minLength: 1, maxLength: 60 }),
      fc.integer({ min: 100, max: 20_000 }).map((n) => 'k'.repeat(n)),
      withNul.map((s) => encodeURIComponent(s)),
      fc.constantFrom('%00', '%2F', '..', '.', '%2e%2e', `${open.integrationKey}%00`, `${open.integrationKey}/`, `${open.integrationKey}?x=1`),
      fc.constantFrom(open.integrationKey, small.integrationKey, `${open.integrationKey}x`, open.integrationKey.toLowerCase()),
    );
    const apiKeys = fc.option(
      fc.oneof(
        headerValue,
        fc.integer({ min: 1000, max: 20_000 }).map((n) => `whk_dev_${'A'.repeat(n)}`),
        lookalikeKeys(),
        fc.constantFrom(open.apiKey, small.apiKey, limited.apiKey, open.apiKey.slice(0, -1), `${open.apiKey} `),
      ),
      { nil: undefined },
    );
    await fc.assert(
      fc.asyncProperty(segments, apiKeys, fc.constantFrom('/api/webhooks', '/api/webhook'), async (segment, apiKey, path) => {
        const response = await sendWebhook(t.app, segment, { apiKey, path });
        expectContractAnswer(response);
        if (response.statusCode === 202) {
          // Only a key on its own integration's address is accepted.
          const owner = [open, small, limited].find((tenant) => tenant.integrationKey === segment.replace(/[/?].*$/, ''));
          expect(owner?.apiKey).toBe(apiKey);
        }
      }),
      // U+0000 in the address: 503 on PostgreSQL (the key lookup fails).
      { numRuns: RUNS.paths, examples: [['%00', open.apiKey, '/api/webhooks']] },
    );
  });

  test('any header a sender adds is kept as sent; credentials are never kept', async () => {
    const names = fc.stringMatching(/^x-fuzz-[a-z0-9-]{1,20}$/);
    const credentials = fc.record(
      {
        authorization: fc.constantFrom(`Bearer ${open.apiKey}`, `Basic ${Buffer.from(`u:${open.apiKey}`).toString('base64')}`),
        cookie: fc.constant(`intake_session=${open.apiKey}`),
        'proxy-authorization': fc.constant(`Bearer ${open.apiKey}`),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.dictionary(names, headerValue, { maxKeys: 6 }), credentials, validBody, async (extra, secret, body) => {
        const response = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body, headers: { ...extra, ...secret } });
        expectContractAnswer(response);
        expect(response.statusCode).toBe(202);
        const { uuid } = response.json() as { uuid: string };
        const read = await t.app.inject({
          method: 'GET',
          url: `/api/webhooks/${open.integrationKey}/${uuid}`,
          headers: { 'x-api-key': open.apiKey },
        });
        const kept = (read.json() as { headers: Record<string, string> }).headers;
        for (const [name, value] of Object.entries(extra)) expect(kept[name], name).toBe(value);
        for (const name of ['x-api-key', 'authorization', 'cookie', 'proxy-authorization']) expect(kept).not.toHaveProperty(name);
        expect(read.body).not.toContain(open.apiKey.slice(8));
      }),
      { numRuns: RUNS.headers },
    );
  });

  test('arbitrary headers, queries and uuids on reads of the log', async () => {
    const queryValue = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 40 }), withNul, fc.constantFrom('-1', '0', '201', '1e3', '50.5', ''));
    await fc.assert(
      fc.asyncProperty(
        fc.option(fc.oneof(headerValue, lookalikeKeys()), { nil: undefined }),
        fc.option(fc.oneof(fc.uuid(), fc.string({ unit: 'grapheme', maxLength: 80 }).map((s) => encodeURIComponent(s)), withNul.map(encodeURIComponent)), {
          nil: undefined,
        }),
        fc.dictionary(fc.constantFrom('limit', 'cursor', 'event', 'since', 'until'), queryValue),
        async (apiKey, uuid, query) => {
          const headers: Record<string, string> = { 'x-api-key': apiKey ?? open.apiKey };
          const search = new URLSearchParams(query).toString();
          const response = await t.app.inject({
            method: 'GET',
            url: `/api/webhooks/${open.integrationKey}${uuid === undefined ? '' : `/${uuid}`}${search ? `?${search}` : ''}`,
            headers,
          });
          expectContractAnswer(response);
        },
      ),
      // U+0000 in a filter or a uuid: 500 on PostgreSQL.
      { numRuns: RUNS.reads, examples: [[undefined, undefined, { event: '\u0000' }], [undefined, '%00', {}]] },
    );
  });

  test('since and until in any RFC 3339 form either filter correctly or are refused with 400', async () => {
    const tenant = await t.newTenant();
    for (let i = 0; i < 3; i++) {
      const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: `{"event":"t${i}"}` });
      expect(response.statusCode).toBe(202);
    }
    const list = (query: string) =>
      t.app.inject({ method: 'GET', url: `/api/webhooks/${tenant.integrationKey}?${query}`, headers: { 'x-api-key': tenant.apiKey } });
    const everything = (await list('limit=200')).json<{ data: Array<{ uuid: string }> }>().data.map((w) => w.uuid);
    expect(everything).toHaveLength(3);

    await fc.assert(
      fc.asyncProperty(stamp, fc.constantFrom('since', 'until'), async ({ future, text }, name) => {
        const response = await list(`limit=200&${name}=${encodeURIComponent(text)}`);
        expectContractAnswer(response);
        expect([200, 400], `${name}=${text} → ${response.statusCode} ${response.body}`).toContain(response.statusCode);
        if (response.statusCode === 400) return;
        const listed = response.json<{ data: Array<{ uuid: string }> }>().data.map((w) => w.uuid);
        // since in the past or until in the future: everything; the other way round: nothing.
        const expected = (name === 'since') !== future ? everything : [];
        expect(listed, `${name}=${text}`).toEqual(expected);
      }),
      {
        numRuns: RUNS.timeFilters,
        // A leap second passes the date-time format but not Date.parse: NaN filtered nothing
        // (SQLite) or failed the query (PostgreSQL, 500).
        examples: [
          [{ future: false, text: '2016-12-31T23:59:60Z' }, 'since'],
          [{ future: true, text: '2216-12-31T23:59:60Z' }, 'until'],
        ],
      },
    );
  });

  test("one sender's request, whatever it holds, never makes another company's webhook fail", async () => {
    const victimBody = Buffer.from('{"event":"victim","data":{"n":1}}');
    /** Valid JSON whose text a database may refuse to store: U+0000, lone surrogates, in the event or the data. */
    const awkward = fc
      .tuple(fc.constantFrom('\\u0000', 'a\\u0000b', '\\ud800', '\\udfff\\ud800', '\\u0000\\u0000'), fc.constantFrom('event', 'data', 'key'))
      .map(([text, where]) =>
        Buffer.from(
          where === 'event' ? `{"event":"${text}"}` : where === 'data' ? `{"event":"e","data":{"s":"${text}"}}` : `{"event":"e","data":{"${text}":1}}`,
        ),
      );
    await fc.assert(
      fc.asyncProperty(fc.oneof(bodies, awkward), idempotencyKeys, async (body, idempotencyKey) => {
        const headers: Record<string, string> = idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey };
        // Sent together, victims on both sides, so the service may write them in one group commit.
        const sendVictim = () => sendWebhook(t.app, victim.integrationKey, { apiKey: victim.apiKey, body: victimBody });
        const [before1, before2, attack, after1, after2] = await Promise.all([
          sendVictim(),
          sendVictim(),
          sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body, headers }),
          sendVictim(),
          sendVictim(),
        ]);
        const victims = [before1!, before2!, after1!, after2!];
        for (const response of victims) {
          expect(response.statusCode, `next to ${body.toString('utf8').slice(0, 200)}: ${response.body}`).toBe(202);
          await expectReadBack(victim, response, victimBody);
        }
        expectContractAnswer(attack!);
      }),
      // On PostgreSQL this event failed its whole group commit: every webhook in it got 503.
      { numRuns: RUNS.isolation, examples: [[Buffer.from('{"event":"\\u0000"}'), undefined]] },
    );
  });

  test('a body with a UTF-8 byte order mark, once accepted, reads back one by one and in the list', async () => {
    const tenant = await t.newTenant();
    const body = Buffer.from('\ufeff{"event":"bom","data":{"a":1}}', 'utf8');
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
    expectContractAnswer(response);
    if (response.statusCode !== 202) return; // Refusing a BOM with 400 would be as right.
    await expectReadBack(tenant, response, body);
    const list = await t.app.inject({
      method: 'GET',
      url: `/api/webhooks/${tenant.integrationKey}`,
      headers: { 'x-api-key': tenant.apiKey },
    });
    expect(list.statusCode, list.body).toBe(200);
    expect((list.json() as { data: Array<{ event: string; data: unknown }> }).data).toEqual([
      expect.objectContaining({ event: 'bom', data: { a: 1 } }),
    ]);
  });

  test('every stored webhook of the run can be listed, page by page', async () => {
    for (const tenant of [open, small, limited, victim]) {
      let cursor: string | null = null;
      let pages = 0;
      do {
        const response: Response = await t.app.inject({
          method: 'GET',
          url: `/api/webhooks/${tenant.integrationKey}?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
          headers: { 'x-api-key': tenant.apiKey },
        });
        expect(response.statusCode, response.body.slice(0, 300)).toBe(200);
        cursor = (response.json() as { next_cursor: string | null }).next_cursor;
        pages++;
      } while (cursor !== null && pages < 100);
    }
  });

  test('a request without Content-Type is 415, not 500', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: `/api/webhooks/${open.integrationKey}`,
      headers: { 'x-api-key': open.apiKey },
      payload: Buffer.from('{"event":"e"}'),
    });
    expectContractAnswer(response);
    expect(response.statusCode).toBe(415);
  });

  test('management API: JSON bodies with __proto__ and constructor keys are refused or taken as data, never 5xx', async () => {
    const managementStatuses = new Set([200, 201, 400, 403, 404, 409, 413, 415, 422, 429]);
    const body = fc.oneof(
      fc.tuple(fc.string({ minLength: 1, maxLength: 20 }), extraEntries).map(([name, extra]) => objectText([['name', jsonText(name)], ...extra])),
      evilObject,
      poisonAtDepth,
      evilValue,
    );
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom('POST /api/v1/integrations', `PATCH /api/v1/integrations/${open.integrationId}`), async (payload, route) => {
        const [method, url] = route.split(' ') as ['POST' | 'PATCH', string];
        const response = await t.app.inject({
          method,
          url,
          headers: { ...managementHeaders, 'content-type': 'application/json' },
          payload,
        });
        expectContractAnswer(response, managementStatuses);
      }),
      {
        numRuns: RUNS.managementBodies,
        // U+0000 in a name: 500 on PostgreSQL.
        examples: [
          ['{"name":"a\\u0000b"}', 'POST /api/v1/integrations'],
          ['{"name":"ok","__proto__":{"polluted":"yes"}}', 'POST /api/v1/integrations'],
        ],
      },
    );
    // The integration the PATCHes aimed at still takes webhooks as before.
    const after = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey });
    expect([202, 403]).toContain(after.statusCode);
  });

  test('management API: arbitrary filters on the key-authenticated reads are answered or refused, never 5xx', async () => {
    const managementStatuses = new Set([200, 400, 404, 429]);
    const junk = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 30 }), withNul, fc.constantFrom('-1', '0', '1e9', '', '%'));
    /** Mostly values the route takes, so that most requests get past validation to the query. */
    const field = <T extends string>(valid: fc.Arbitrary<T>) => fc.oneof({ weight: 6, arbitrary: valid }, { weight: 1, arbitrary: junk });
    const query = fc.record(
      {
        limit: field(fc.integer({ min: 1, max: 200 }).map(String)),
        cursor: junk,
        event: field(fc.oneof(fc.constantFrom('e', 'victim'), withNul)),
        since: field(fc.oneof(stamp.map(({ text }) => text), fc.constantFrom('2016-12-31T23:59:60Z', '2020-01-01T00:00:00+01'))),
        until: field(fc.oneof(stamp.map(({ text }) => text), fc.constantFrom('2016-12-31T23:59:60Z', '2020-01-01T00:00:00+01'))),
        q: field(fc.oneof(fc.constantFrom('event', '%', '_'), withNul)),
        integration_id: field(fc.constant(open.integrationId)),
        key_id: field(fc.constant(open.keyId)),
        status_class: field(fc.constantFrom('2xx', '4xx', '5xx')),
        error_code: field(fc.constantFrom('invalid_api_key', 'validation_failed')),
        bucket: field(fc.constantFrom('minute', 'hour', 'day')),
        group_by: field(fc.constantFrom('integration', 'key')),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/api/v1/webhooks', '/api/v1/requests', '/api/v1/usage', '/api/v1/audit-log', '/api/v1/integrations'),
        query,
        async (path, fields) => {
          const search = new URLSearchParams(fields as Record<string, string>).toString();
          const response = await t.app.inject({ method: 'GET', url: `${path}${search ? `?${search}` : ''}`, headers: managementHeaders });
          expectContractAnswer(response, managementStatuses);
        },
      ),
      {
        numRuns: RUNS.managementReads,
        // The leap second: 500 from /api/v1/usage (both databases); U+0000: 500 on PostgreSQL.
        examples: [
          ['/api/v1/usage', { since: '2016-12-31T23:59:60Z' }],
          ['/api/v1/webhooks', { q: '\u0000' }],
        ],
      },
    );
  });

  test('Object.prototype is not polluted after the run, and no webhook inherits an event or data', async () => {
    expectNoPollution();
    // Had any body reached Object.prototype, a webhook without event would pass as "polluted-event".
    const missing = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body: '{"data":{}}' });
    expect(missing.statusCode, missing.body).toBe(422);
    const bare = Buffer.from('{"event":"bare"}');
    const accepted = await sendWebhook(t.app, open.integrationKey, { apiKey: open.apiKey, body: bare });
    await expectSameDocument(open, accepted, bare);
  });
});

// --- A real server process, over TCP ---------------------------------------------------------

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Writes `request` on a new connection and collects everything the server sends until it
 * closes the connection (every request says Connection: close). A request known to be
 * truncated is followed at once by closing the sending side, so the server sees it end;
 * so is any request after `idleMs` without a byte from the server (one the server still
 * waits on). A complete request keeps the sending side open: a server may take a client's
 * half-close as the client giving up, and answer nothing.
 */
function exchange(
  port: number,
  request: Buffer,
  options: { truncated: boolean; idleMs?: number; timeoutMs?: number },
): Promise<{ data: Buffer; timedOut: boolean; error?: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, LOOPBACK);
    const chunks: Buffer[] = [];
    let timedOut = false;
    let error: string | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, options.timeoutMs ?? 10_000);
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => socket.end(), options.idleMs ?? 1_500);
    };
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      armIdle();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.on('close', () => {
      clearTimeout(timer);
      clearTimeout(idle);
      resolve({ data: Buffer.concat(chunks), timedOut, error });
    });
    if (options.truncated) socket.end(request);
    else {
      socket.write(request);
      armIdle();
    }
  });
}

/** The HTTP/1.1 responses in a byte stream, in order; throws on anything that is not one. */
function parseResponses(data: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  let at = 0;
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    if (headEnd < 0) throw new Error(`incomplete response head: ${JSON.stringify(data.subarray(at).toString('latin1').slice(0, 300))}`);
    const [statusLine, ...lines] = data.subarray(at, headEnd).toString('latin1').split('\r\n');
    const match = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine!);
    if (!match) throw new Error(`not an HTTP response: ${JSON.stringify(statusLine)}`);
    const status = Number(match[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    at = headEnd + 4;
    let body: Buffer = Buffer.alloc(0);
    if (status >= 200 && status !== 204 && status !== 304) {
      if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        const parts: Buffer[] = [];
        for (;;) {
          const lineEnd = data.indexOf('\r\n', at);
          if (lineEnd < 0) throw new Error('truncated chunked body');
          const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
          at = lineEnd + 2;
          if (size === 0) {
            at = data.indexOf('\r\n', at) + 2;
            break;
          }
          parts.push(data.subarray(at, at + size));
          at += size + 2;
        }
        body = Buffer.concat(parts);
      } else if (headers['content-length'] !== undefined) {
        const length = Number(headers['content-length']);
        body = data.subarray(at, at + length);
        if (body.length !== length) throw new Error(`body shorter than Content-Length ${length}`);
        at += length;
      } else {
        body = data.subarray(at);
        at = data.length;
      }
    }
    responses.push({ status, headers, body });
  }
  return responses;
}

const latin1 = (bytes: Uint8Array) => Buffer.from(bytes).toString('latin1');

describe('intake fuzzing, a real server process over TCP', () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let tenant: TestTenant;

  beforeAll(async () => {
    database = await freshStore();
    const management = new Management(
      database.store,
      { environment: 'development', baseUrl: 'http://127.0.0.1', defaultBodyLimit: 1024 * 1024 },
      { type: 'cli', id: 'fuzz', ip: null },
    );
    const companyId = (await management.createCompany('Raw fuzz')).id;
    const created = await management.createIntegration(companyId, { name: 'Raw' });
    tenant = {
      companyId,
      integrationId: created.integration.id,
      integrationKey: created.integration.integrationKey,
      apiKey: created.apiKey,
      keyId: created.keyId,
    };
    server = await startServer({ databaseUrl: database.databaseUrl, env: FUZZ_ENV });
  });

  afterAll(async () => {
    await cleanupAll();
    await database?.cleanup();
  });

  const readWebhook = (uuid: string) =>
    fetch(server.url(`/api/webhooks/${tenant.integrationKey}/${uuid}`), { headers: { 'x-api-key': tenant.apiKey } });

  test('whatever bytes arrive, every answer is well-formed, no 5xx, errors are JSON, and a 202 is stored byte for byte', async () => {
    const address = () => `/api/webhooks/${tenant.integrationKey}`;
    const targets = fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(address(), `/api/webhook/${tenant.integrationKey}`) },
      fc.constantFrom(
        `${address()}/`,
        `${address()}?x=1&x=2`,
        `//api/webhooks/${tenant.integrationKey}`,
        `${address()}/../${tenant.integrationKey}`,
        `/api/webhooks/%2e%2e/${tenant.integrationKey}`,
        `http://evil.test${address()}`,
        '*',
        `${address()}#fragment`,
        `${address()}%00`,
        '/api/webhooks/%',
        '/api/webhooks/%ff%fe',
      ),
      fc.integer({ min: 1, max: 40_000 }).map((n) => `${address()}/${'a'.repeat(n)}`),
      fc.integer({ min: 1, max: 40_000 }).map((n) => `/api/webhooks/${'k'.repeat(n)}`),
      fc.uint8Array({ minLength: 1, maxLength: 40 }).map((bytes) => `/api/webhooks/${latin1(bytes)}`),
    );
    /** Header values as raw bytes: CR, LF, NUL, DEL, obs-text, folded lines, whole smuggled requests, very long ones. */
    const injected = fc.oneof(
      fc.constantFrom(
        'a\rb',
        'a\nb',
        'a\u0000b',
        '\u007f',
        'a\r\nX-Injected: 1',
        `a\r\n\r\nPOST ${address()} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${tenant.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{"event":"smug"}`,
        'a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
        'a\r\nContent-Length: 0',
        'a\r\nTransfer-Encoding: chunked',
        'a\r\n X-Injected: folded',
        ' \t ',
        'é\u00ff',
      ),
      fc.uint8Array({ maxLength: 40 }).map(latin1),
      fc.integer({ min: 1000, max: 40_000 }).map((n) => 'x'.repeat(n)),
    );
    const sometimes = <T>(arbitrary: fc.Arbitrary<T>, weight = 1) =>
      fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight, arbitrary });
    /** Anything at all, on every part of the request. */
    const fuzzed = fc.record({
      method: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'post', 'P@ST', 'PROPFIND'),
      target: targets,
      version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/1.2', 'HTTP/2.0', 'HTTP/9'),
      host: fc.constantFrom(true, true, true, true, false),
      apiKey: fc.oneof(
        { weight: 5, arbitrary: fc.constant(tenant.apiKey) },
        { weight: 1, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.uint8Array({ maxLength: 60 }).map(latin1) },
      ),
      contentType: fc.oneof(
        { weight: 5, arbitrary: fc.constant('application/json') },
        { weight: 1, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: contentTypes },
      ),
      injection: sometimes(
        fc.tuple(
          fc.constantFrom('Idempotency-Key', 'X-API-Key', 'Content-Type', 'User-Agent', 'Webhook-Id', 'X-Fuzz', 'Host', 'Content-Length', 'Expect'),
          injected,
        ),
        3,
      ),
      expect: sometimes(fc.constantFrom('100-continue', '100-Continue', 'bogus', '')),
      body: fc.oneof({ weight: 3, arbitrary: validBody }, bodies),
      framing: fc.constantFrom('length', 'length', 'length', 'chunked', 'none', 'short', 'long', 'both'),
      chunkSize: fc.integer({ min: 1, max: 64 }),
    });
    /** A well-formed request to the address with the right key: its 202 must read back byte for byte. */
    const wellFormed = fc.record({
      method: fc.constant('POST'),
      target: fc.constantFrom(address(), `/api/webhook/${tenant.integrationKey}`),
      version: fc.constant('HTTP/1.1'),
      host: fc.constant(true),
      apiKey: fc.constant<string | undefined>(tenant.apiKey),
      contentType: fc.constant<string | undefined>('application/json'),
      injection: fc.constant(undefined),
      expect: fc.constantFrom(undefined, '100-continue'),
      // Mostly bodies that are accepted, whose bytes then must come back exactly.
      body: fc.oneof({ weight: 2, arbitrary: validBody }, { weight: 2, arbitrary: evilValidBody }, { weight: 1, arbitrary: bodies }),
      framing: fc.constantFrom('length', 'chunked'),
      chunkSize: fc.integer({ min: 1, max: 64 }),
    });
    const request = fc.oneof({ weight: 3, arbitrary: wellFormed }, { weight: 7, arbitrary: fuzzed });
    /** Requests that once broke a rule here, always tried first. */
    type Spec = typeof request extends fc.Arbitrary<infer T> ? T : never;
    const plain: Spec = {
      method: 'POST',
      target: address(),
      version: 'HTTP/1.1',
      host: true,
      apiKey: tenant.apiKey,
      contentType: 'application/json',
      injection: undefined,
      expect: undefined,
      body: Buffer.from('{"event":"e"}'),
      framing: 'length',
      chunkSize: 1,
    };
    const examples: Array<[Spec]> = [
      [{ ...plain, host: false }], // HTTP/1.1 without Host: Node's own 400, with an empty body
      [{ ...plain, expect: 'bogus' } as Spec], // Node's own 417, with an empty body
      [{ ...plain, body: Buffer.from('{"event":"\\u0000"}') }], // 503 on PostgreSQL
      [{ ...plain, target: `${address()}%00` }], // 503 on PostgreSQL
    ];

    let clean = 0;
    await fc.assert(
      fc.asyncProperty(request, async (spec) => {
        const head: string[] = [`${spec.method} ${spec.target} ${spec.version}`];
        if (spec.host) head.push(`Host: ${LOOPBACK}`);
        if (spec.apiKey !== undefined) head.push(`X-API-Key: ${spec.apiKey}`);
        if (spec.contentType !== undefined) head.push(`Content-Type: ${spec.contentType}`);
        if (spec.expect !== undefined) head.push(`Expect: ${spec.expect}`);
        if (spec.injection) head.push(`${spec.injection[0]}: ${spec.injection[1]}`);
        let payload = spec.body;
        switch (spec.framing) {
          case 'length':
            head.push(`Content-Length: ${spec.body.length}`);
            break;
          case 'short':
            head.push(`Content-Length: ${Math.max(0, spec.body.length - 1 - (spec.chunkSize % 5))}`);
            break;
          case 'long':
            head.push(`Content-Length: ${spec.body.length + spec.chunkSize}`);
            break;
          case 'chunked':
          case 'both': {
            if (spec.framing === 'both') head.push(`Content-Length: ${spec.body.length}`);
            head.push('Transfer-Encoding: chunked');
            const chunks: Buffer[] = [];
            for (let at = 0; at < spec.body.length; at += spec.chunkSize) {
              const piece = spec.body.subarray(at, at + spec.chunkSize);
              chunks.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
            }
            payload = Buffer.concat([...chunks, Buffer.from('0\r\n\r\n')]);
            break;
          }
        }
        head.push('Connection: close');
        const bytes = Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
        const isClean =
          spec.method === 'POST' &&
          spec.version === 'HTTP/1.1' &&
          spec.host &&
          spec.apiKey === tenant.apiKey &&
          spec.contentType === 'application/json' &&
          spec.injection === undefined &&
          (spec.expect === undefined || spec.expect.toLowerCase() === '100-continue') &&
          (spec.framing === 'length' || spec.framing === 'chunked') &&
          (spec.target === address() || spec.target === `/api/webhook/${tenant.integrationKey}`);

        const { data, timedOut, error } = await exchange(server.port, bytes, { truncated: spec.framing === 'long' });
        const describeRun = () =>
          `request ${JSON.stringify(bytes.toString('latin1').slice(0, 400))} → ${JSON.stringify(data.toString('latin1').slice(0, 600))}${error ? ` (${error})` : ''}`;
        expect(timedOut, `no end of answer: ${describeRun()}`).toBe(false);
        expect(server.running, `the server exited: ${server.describe()}`).toBe(true);
        let responses: RawResponse[];
        try {
          responses = parseResponses(data);
        } catch (parseError) {
          throw new Error(`${(parseError as Error).message}: ${describeRun()}`);
        }
        const final = responses.filter((r) => r.status >= 200);
        if (isClean) {
          clean++;
          expect(final, describeRun()).toHaveLength(1);
        }
        for (const response of responses) {
          const what = describeRun();
          expect(response.status < 500, `5xx: ${what}`).toBe(true);
          expect(response.headers['x-injected'], what).toBeUndefined();
          if (response.status >= 400) {
            expect(INTAKE_STATUSES.has(response.status) || TRANSPORT_STATUSES.has(response.status), `status: ${what}`).toBe(true);
            expectJsonError(response.status, response.headers['content-type'], response.body.toString('utf8'), what);
          }
          if (response.status === 202 || response.status === 200) {
            const json = JSON.parse(response.body.toString('utf8')) as { uuid?: string };
            if (typeof json.uuid !== 'string') continue; // a 200 of /healthz, smuggled
            // Every acknowledged webhook is stored; a clean request's, byte for byte.
            const read = await readWebhook(json.uuid);
            const text = await read.text();
            expect(read.status, `acknowledged ${json.uuid} but cannot read it: ${text}; ${what}`).toBe(200);
            if (isClean && response.status === 202) {
              const rawBody = (JSON.parse(text) as { raw_body: string }).raw_body;
              expect(Buffer.from(rawBody, 'utf8').equals(spec.body), `raw body differs: ${what}`).toBe(true);
            }
          }
        }
      }),
      { numRuns: RUNS.rawSocket, examples },
    );
    // The generator must keep sending well-formed requests too, or byte-for-byte is untested.
    expect(clean).toBeGreaterThan(RUNS.rawSocket / 20);
  });

  test('after the run the server still answers: health, a webhook read back, the unpolluted canary, no error logged', async () => {
    expect(server.running, server.describe()).toBe(true);
    const health = await fetch(server.url('/healthz'));
    expect(health.status).toBe(200);
    const send = (body: string) =>
      fetch(server.url(`/api/webhooks/${tenant.integrationKey}`), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': tenant.apiKey },
        body,
      });
    // A body without an event is refused: nothing on Object.prototype supplies one.
    const missing = await send('{"data":{}}');
    expect(missing.status, await missing.text()).toBe(422);
    const body = '{"event":"after the fuzz","data":{"ok":true}}';
    const accepted = await send(body);
    expect(accepted.status).toBe(202);
    const { uuid } = (await accepted.json()) as { uuid: string };
    const read = (await (await readWebhook(uuid)).json()) as { raw_body: string; event: string; data: unknown };
    expect(read.raw_body).toBe(body);
    expect(read.data).toEqual({ ok: true });
    // Nothing a client sent made the server log an error (an unhandled error or a failed commit).
    const errors = server
      .stdoutLines()
      .filter((line) => line.startsWith('{'))
      .filter((line) => (JSON.parse(line) as { level?: number }).level! >= 50);
    expect(errors, errors.join('\n').slice(0, 2000)).toEqual([]);
    expect(server.stderr).toBe('');
  });
});
