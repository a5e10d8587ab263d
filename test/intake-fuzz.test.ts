import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_NESTING_DEPTH } from '../src/domain/webhook-body.js';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from './helpers.js';
import { FUZZ_ENV, fuzzExpectations, RUNS, type Response } from './support/fuzz-expectations.js';
import {
  apiKeyHeaders,
  awkwardBodies,
  bodies,
  contentTypes,
  credentialHeaders,
  deepBody,
  evilValidBody,
  headerValue,
  idempotencyKeys,
  invalidUtf8Body,
  jsonText,
  lookalikeKeys,
  managementBodies,
  managementQueries,
  pathSegments,
  stamp,
  tenants,
  validBody,
  withNul,
} from './support/fuzz-inputs.js';

/**
 * Property tests of the intake addresses and the key-authenticated reads: whatever arrives
 * (bodies, headers, paths, queries, raw bytes on a socket), the answer is one the contract
 * names, never a 5xx; every error is a JSON body with `error` and `message`; nothing leaks
 * into Object.prototype; an accepted body reads back byte for byte; one sender's request
 * never makes another's fail; and a real server process keeps answering throughout
 * (intake-fuzz-tcp.test.ts).
 *
 * The failed-authentication limit per IP is turned off here (every request comes from
 * 127.0.0.1 and most carry junk keys); the tests of the limits cover it.
 *
 * Properties with `examples` always try those inputs first: each once broke the property
 * (see the comments there), so they are checked on every run, not only when drawn.
 */

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

const { expectNoPollution, expectContractAnswer, expectReadBack, expectSameDocument } = fuzzExpectations({
  app: () => t,
  prototypeBefore: () => prototypeBefore,
});

describe('intake fuzzing, in process', () => {
  test('arbitrary bodies, content types and idempotency keys', async () => {
    await fc.assert(
      fc.asyncProperty(
        tenants(open, small, limited),
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
    const segments = pathSegments(open, small);
    const apiKeys = apiKeyHeaders(open, [small, limited]);
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
    const credentials = credentialHeaders(open.apiKey);
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
        fc.option(fc.oneof(headerValue, lookalikeKeys(open.apiKey)), { nil: undefined }),
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
    await fc.assert(
      fc.asyncProperty(fc.oneof(bodies, awkwardBodies), idempotencyKeys, async (body, idempotencyKey) => {
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
    await fc.assert(
      fc.asyncProperty(managementBodies, fc.constantFrom('POST /api/v1/integrations', `PATCH /api/v1/integrations/${open.integrationId}`), async (payload, route) => {
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
    const query = managementQueries(open);
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
