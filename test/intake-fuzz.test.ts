import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from './helpers.js';

/**
 * Property tests of the intake address: whatever arrives, the answer is one the contract
 * names, errors are JSON, nothing leaks into Object.prototype, and an accepted body reads
 * back byte for byte.
 */

const ALLOWED_STATUSES = new Set([200, 202, 400, 401, 403, 404, 413, 415, 422, 429]);
const NUM_RUNS = 200;

let t: TestApp;
let open: TestTenant;
let small: TestTenant;
let limited: TestTenant;
let prototypeBefore: string[];

beforeAll(async () => {
  prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
  t = await buildTestApp();
  open = await t.newTenant();
  small = await t.newTenant({ bodyLimitBytes: 512 });
  limited = await t.newTenant({ rateLimitPerMinute: 20 });
});

afterAll(async () => {
  await t?.close();
});

type Response = Awaited<ReturnType<typeof sendWebhook>>;

/** The properties every answer keeps, whatever the request. */
function expectContractAnswer(response: Response): void {
  expect(ALLOWED_STATUSES.has(response.statusCode), `status ${response.statusCode}: ${response.body}`).toBe(true);
  if (response.statusCode >= 300) {
    expect(String(response.headers['content-type'])).toMatch(/^application\/json/);
    const body = JSON.parse(response.body) as { error?: unknown; message?: unknown };
    expect(typeof body.error).toBe('string');
    expect(typeof body.message).toBe('string');
    expect((body.error as string).length).toBeGreaterThan(0);
    expect((body.message as string).length).toBeGreaterThan(0);
  }
  if (response.statusCode === 429) expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
}

/** A 200 or 202 names a webhook whose stored body is exactly the bytes sent. */
async function expectReadBack(tenant: TestTenant, response: Response, sent: Buffer): Promise<void> {
  if (response.statusCode !== 200 && response.statusCode !== 202) return;
  const { uuid } = response.json() as { uuid: string };
  if (response.statusCode === 200) expect(response.headers['idempotent-replayed']).toBe('true');
  const stored = await t.store.getWebhook(tenant.companyId, tenant.integrationId, uuid);
  expect(stored, `webhook ${uuid} not stored`).toBeDefined();
  expect(stored!.rawBody.equals(sent)).toBe(true);

  const read = await t.app.inject({
    method: 'GET',
    url: `/api/webhooks/${tenant.integrationKey}/${uuid}`,
    headers: { 'x-api-key': tenant.apiKey },
  });
  expect(read.statusCode).toBe(200);
  expect((read.json() as { raw_body: string }).raw_body).toBe(sent.toString('utf8'));
}

const jsonText = (value: unknown) => JSON.stringify(value);

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
  fc
    .tuple(fc.integer({ min: 1, max: 3000 }), fc.constantFrom('[', '{"a":'), fc.boolean())
    .map(([depth, open, inData]) => {
      const close = open === '[' ? ']' : '}';
      const nested = `${open.repeat(depth)}1${close.repeat(depth)}`;
      return Buffer.from(inData ? `{"event":"deep","data":{"x":${nested}}}` : `{"event":"deep","x":${nested}}`);
    }),
  fc
    .constantFrom('1e400', '-1e400', '1e-400', '123456789012345678901234567890', '-0', '0.0000001', '9007199254740993')
    .map((n) => Buffer.from(`{"event":"number","data":{"n":${n}}}`)),
  fc
    .tuple(fc.constantFrom('__proto__', 'constructor', 'prototype'), fc.constantFrom('top', 'data'))
    .map(([key, where]) => {
      const evil = `"${key}":{"polluted":true,"prototype":{"polluted":true}}`;
      return Buffer.from(where === 'top' ? `{"event":"evil",${evil}}` : `{"event":"evil","data":{${evil}}}`);
    }),
  fc
    .tuple(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 1 }))
    .map(([event, other]) => Buffer.from(`{"event":${jsonText(event)},"event":${jsonText(other)},"data":{"k":1,"k":2}}`)),
  fc
    .tuple(fc.integer({ min: 190, max: 1000 }), fc.constantFrom('a', 'é', '😀', '\u0000', '"'))
    .map(([length, char]) => Buffer.from(jsonText({ event: char.repeat(length), data: {} }))),
  fc.constantFrom('', ' ', 'null', '[]', '{}', '"x"', '{"event":null}', '{"event":"e","data":null}', '\ufeff{"event":"bom"}').map((s) =>
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

describe('intake fuzzing', () => {
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
      { numRuns: NUM_RUNS },
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
      { numRuns: NUM_RUNS },
    );
  });

  test('arbitrary API keys and integration keys in the path', async () => {
    const segments = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 250 }).map((s) => encodeURIComponent(s)),
      fc.string({ unit: fc.constantFrom(...'abcXYZ019%._~-+!$&\'()*,;=:@'), minLength: 1, maxLength: 60 }),
      fc.constantFrom(open.integrationKey, small.integrationKey, `${open.integrationKey}x`, open.integrationKey.toLowerCase()),
    );
    const apiKeys = fc.option(
      fc.oneof(headerValue, fc.constantFrom(open.apiKey, small.apiKey, limited.apiKey, open.apiKey.slice(0, -1), `${open.apiKey} `)),
      { nil: undefined },
    );
    await fc.assert(
      fc.asyncProperty(segments, apiKeys, fc.constantFrom('/api/webhooks', '/api/webhook'), async (segment, apiKey, path) => {
        const response = await sendWebhook(t.app, segment, { apiKey, path });
        expectContractAnswer(response);
        if (response.statusCode === 202) {
          // Only a key on its own integration's address is accepted.
          const owner = [open, small, limited].find((tenant) => tenant.integrationKey === segment);
          expect(owner?.apiKey).toBe(apiKey);
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('arbitrary headers, queries and uuids on reads of the log', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.option(headerValue, { nil: undefined }),
        fc.option(fc.oneof(fc.uuid(), fc.string({ unit: 'grapheme', maxLength: 80 }).map((s) => encodeURIComponent(s))), {
          nil: undefined,
        }),
        fc.dictionary(fc.constantFrom('limit', 'cursor', 'event', 'since', 'until'), fc.string({ unit: 'grapheme', maxLength: 40 })),
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
      { numRuns: NUM_RUNS },
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
    for (const tenant of [open, small, limited]) {
      let cursor: string | null = null;
      let pages = 0;
      do {
        const response: Response = await t.app.inject({
          method: 'GET',
          url: `/api/webhooks/${tenant.integrationKey}?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
          headers: { 'x-api-key': tenant.apiKey },
        });
        expect(response.statusCode, response.body).toBe(200);
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

  test('Object.prototype is not polluted after the run', () => {
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
