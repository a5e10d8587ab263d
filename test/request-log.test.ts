import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { issueApiKey } from '../src/domain/api-key.js';
import { Management } from '../src/services/management.js';
import type { RequestLogEntry } from '../src/store/store.js';
import { buildTestApp, freshStore, sendWebhook, testSecretBox, waitFor, type TestApp, type TestTenant } from './helpers.js';
import { scrapeUrl } from './support/metrics.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

const USER_AGENT = 'request-log-test/1.0';
const SENTINEL_AGENT = 'request-log-sentinel';

/**
 * Every row of the tenant's request log once the writer has caught up, oldest first.
 * Rejected requests are queued for the group-commit writer after the answer, in order; a
 * last rejected request is sent and its row awaited, so every row before it was queued, and
 * the writer is then drained, so every one is written. A row written twice would show.
 */
async function settledLog(tenant: TestTenant): Promise<RequestLogEntry[]> {
  await sendWebhook(t.app, tenant.integrationKey, { headers: { 'user-agent': SENTINEL_AGENT } });
  await waitFor(async () => {
    const found = await t.store.listRequestLog(tenant.companyId, tenant.integrationId, 1000);
    return found.some((row) => row.userAgent === SENTINEL_AGENT) ? true : undefined;
  }, 'the request log to catch up');
  // Every row queued before the sentinel's is queued now, but on PostgreSQL two groups commit
  // on two connections, so an earlier group may still be committing after a later one.
  await t.app.writer.drain();
  const rows = await t.store.listRequestLog(tenant.companyId, tenant.integrationId, 1000);
  return rows.filter((row) => row.userAgent !== SENTINEL_AGENT).reverse();
}

/**
 * Rows of one millisecond have no order among them (their ids are random), so requests whose
 * order a test checks are sent in distinct milliseconds.
 */
async function nextMillisecond(): Promise<void> {
  const now = Date.now();
  await waitFor(async () => (Date.now() > now ? true : undefined), 'the next millisecond');
}

function send(tenant: TestTenant, options: Parameters<typeof sendWebhook>[2] = {}) {
  return sendWebhook(t.app, tenant.integrationKey, {
    ...options,
    headers: { 'user-agent': USER_AGENT, ...options.headers },
  });
}

function expectCommonFields(row: RequestLogEntry, tenant: TestTenant) {
  expect(row.companyId).toBe(tenant.companyId);
  expect(row.integrationId).toBe(tenant.integrationId);
  expect(row.method).toBe('POST');
  expect(row.ip).toBe('127.0.0.1');
  expect(row.userAgent).toBe(USER_AGENT);
  expect(row.durationMs).toBeGreaterThanOrEqual(0);
  expect(row.id).toMatch(/^req_/);
}

describe('the request log', () => {
  test('an accepted webhook is logged with its status, uuid, key id, IP, user agent and size', async () => {
    const tenant = await t.newTenant();
    const body = '{"event":"order.paid","data":{"amount":10}}';
    const response = await send(tenant, { apiKey: tenant.apiKey, body });
    expect(response.statusCode).toBe(202);
    const { uuid } = response.json() as { uuid: string };

    // Written in the webhook's own transaction: there as soon as the 202 is.
    const immediate = await t.store.listRequestLog(tenant.companyId, tenant.integrationId, 10);
    expect(immediate.map((row) => row.webhookUuid)).toEqual([uuid]);

    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expectCommonFields(row, tenant);
    expect(row).toMatchObject({
      status: 202,
      errorCode: null,
      keyId: tenant.keyId,
      webhookUuid: uuid,
      sizeBytes: Buffer.byteLength(body),
    });
  });

  test('a request without a key is logged as 401 missing_api_key with no key id', async () => {
    const tenant = await t.newTenant();
    const body = '{"event":"x"}';
    expect((await send(tenant, { body })).statusCode).toBe(401);
    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(1);
    expectCommonFields(rows[0]!, tenant);
    expect(rows[0]).toMatchObject({
      status: 401,
      errorCode: 'missing_api_key',
      keyId: null,
      webhookUuid: null,
      sizeBytes: Buffer.byteLength(body),
    });
  });

  test('a request with an invalid key is logged as 401 invalid_api_key with no key id', async () => {
    const tenant = await t.newTenant();
    expect((await send(tenant, { apiKey: issueApiKey('development').plaintext })).statusCode).toBe(401);
    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 401, errorCode: 'invalid_api_key', keyId: null, webhookUuid: null });
  });

  test('a 415 is logged with its error code and the key that sent it', async () => {
    const tenant = await t.newTenant();
    expect((await send(tenant, { apiKey: tenant.apiKey, contentType: 'text/plain', body: 'hello' })).statusCode).toBe(415);
    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(1);
    expectCommonFields(rows[0]!, tenant);
    expect(rows[0]).toMatchObject({
      status: 415,
      errorCode: 'unsupported_media_type',
      keyId: tenant.keyId,
      webhookUuid: null,
      sizeBytes: 5,
    });
  });

  test('a 422 is logged with its error code and the body size', async () => {
    const tenant = await t.newTenant();
    const body = '{"event":""}';
    expect((await send(tenant, { apiKey: tenant.apiKey, body })).statusCode).toBe(422);
    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(1);
    expectCommonFields(rows[0]!, tenant);
    expect(rows[0]).toMatchObject({
      status: 422,
      errorCode: 'validation_failed',
      keyId: tenant.keyId,
      webhookUuid: null,
      sizeBytes: Buffer.byteLength(body),
    });
  });

  test('a replay is logged as 200 with the original uuid; a conflict as 422 idempotency_conflict', async () => {
    const tenant = await t.newTenant();
    const headers = { 'idempotency-key': 'evt_log' };
    const first = await send(tenant, { apiKey: tenant.apiKey, headers, body: '{"event":"a"}' });
    expect(first.statusCode).toBe(202);
    const { uuid } = first.json() as { uuid: string };
    await nextMillisecond();
    expect((await send(tenant, { apiKey: tenant.apiKey, headers, body: '{"event":"a"}' })).statusCode).toBe(200);
    await nextMillisecond();
    expect((await send(tenant, { apiKey: tenant.apiKey, headers, body: '{"event":"b"}' })).statusCode).toBe(422);

    const rows = await settledLog(tenant);
    expect(rows.map((row) => [row.status, row.errorCode, row.webhookUuid])).toEqual([
      [202, null, uuid],
      [200, null, uuid],
      [422, 'idempotency_conflict', null],
    ]);
    for (const row of rows) {
      expectCommonFields(row, tenant);
      expect(row.keyId).toBe(tenant.keyId);
    }
  });

  test('one row per request, accepted or rejected, in order', async () => {
    const tenant = await t.newTenant({ bodyLimitBytes: 100, rateLimitPerMinute: 2 });
    const other = await t.newTenant();
    const statuses: number[] = [];
    const attempts: Array<Parameters<typeof sendWebhook>[2]> = [
      {},
      { apiKey: 'whk_dev_garbage' },
      { apiKey: other.apiKey },
      { apiKey: tenant.apiKey, contentType: 'text/plain' },
      { apiKey: tenant.apiKey, body: `{"event":"${'x'.repeat(200)}"}` },
      { apiKey: tenant.apiKey, body: '[1,2]' },
      { apiKey: tenant.apiKey, body: '{"event":1}' },
      { apiKey: tenant.apiKey },
      { apiKey: tenant.apiKey },
      { apiKey: tenant.apiKey },
    ];
    for (const attempt of attempts) {
      await nextMillisecond();
      statuses.push((await send(tenant, attempt)).statusCode);
    }
    expect(statuses).toEqual([401, 401, 403, 415, 413, 400, 422, 202, 202, 429]);

    const rows = await settledLog(tenant);
    expect(rows.map((row) => row.status)).toEqual(statuses);
    expect(rows.map((row) => row.errorCode)).toEqual([
      'missing_api_key',
      'invalid_api_key',
      'insufficient_permissions',
      'unsupported_media_type',
      'payload_too_large',
      'invalid_json',
      'validation_failed',
      null,
      null,
      'rate_limited',
    ]);
    for (const row of rows) expectCommonFields(row, tenant);
    expect(rows.filter((row) => row.webhookUuid !== null)).toHaveLength(2);
    expect(await t.store.listRequestLog(other.companyId, other.integrationId, 100)).toEqual([]);
  });

  test("a 403 with another company's key does not put that company's key id in this company's log", async () => {
    const tenant = await t.newTenant();
    const other = await t.newTenant();
    expect((await send(tenant, { apiKey: other.apiKey })).statusCode).toBe(403);
    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 403, errorCode: 'insufficient_permissions' });
    // Contract: no request ever sees another company's data; its key id is that company's.
    expect(rows[0]!.keyId).toBeNull();
  });

  test('no API key ever appears in a log row', async () => {
    const tenant = await t.newTenant();
    const other = await t.newTenant();
    const unknown = issueApiKey('development').plaintext;
    const foreign = issueApiKey('production').plaintext;
    await send(tenant, { apiKey: tenant.apiKey });
    await send(tenant, { apiKey: tenant.apiKey, body: 'nope' });
    await send(tenant, { apiKey: other.apiKey });
    await send(tenant, { apiKey: unknown });
    await send(tenant, { apiKey: foreign });
    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(5);
    const text = JSON.stringify(rows);
    for (const key of [tenant.apiKey, other.apiKey, unknown, foreign]) {
      expect(text).not.toContain(key);
      // Nor the secret part of it, in case a row kept a transformed copy.
      expect(text).not.toContain(key.slice(-20));
    }
  });

  test('a long user agent is kept, cut to a bounded length', async () => {
    const tenant = await t.newTenant();
    await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, headers: { 'user-agent': 'u'.repeat(5000) } });
    const rows = await settledLog(tenant);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.userAgent!.startsWith('uuu')).toBe(true);
    expect(rows[0]!.userAgent!.length).toBeLessThan(5000);
  });
});

describe('requests to an address that names no integration', () => {
  test('store nothing in the request log', async () => {
    const database = await freshStore();
    const { store, cleanup } = database;
    const config = loadConfig({ LOG_LEVEL: 'silent' });
    const app = await buildApp({ config, store, logger: pino({ level: 'silent' }), secrets: testSecretBox() });
    try {
      const management = new Management(
        store,
        { environment: config.environment, baseUrl: config.baseUrl, defaultBodyLimit: config.defaultBodyLimit },
        { type: 'cli', id: 'test', ip: null },
      );
      const company = await management.createCompany('Lonely company');
      const { integration, apiKey } = await management.createIntegration(company.id, { name: 'Known' });

      const unknownAddress = 'NoIntegrationHasThisKey00';
      const statuses: number[] = [];
      for (const key of [undefined, apiKey, issueApiKey('development').plaintext, 'garbage']) {
        statuses.push((await sendWebhook(app, unknownAddress, { apiKey: key })).statusCode);
        statuses.push(
          (await app.inject({ method: 'GET', url: `/api/webhooks/${unknownAddress}`, headers: key ? { 'x-api-key': key } : {} }))
            .statusCode,
        );
      }
      expect(statuses).toEqual([401, 401, 403, 403, 401, 401, 401, 401]);
      // One rejected request to the known integration: proof that logging works in this app.
      expect((await sendWebhook(app, integration.integrationKey)).statusCode).toBe(401);

      await app.close(); // drains the group-commit writer
      const rows = await database.query('SELECT integration_id, status FROM request_log');
      expect(rows).toEqual([{ integration_id: integration.id, status: 401 }]);
    } finally {
      await app.close();
      await cleanup();
    }
  });
});

describe('a flood refused by the per-address limit on failed authentications (issue 13, finding 5)', () => {
  test('over HTTP: one row per address, integration and window, the rest counted in /metrics; other rows stay', async () => {
    const flood = await buildTestApp({ INTAKE_AUTH_FAILURE_LIMIT: '5', INTAKE_AUTH_FAILURE_WINDOW_SECONDS: '600' });
    try {
      const target = await flood.newTenant();
      const sibling = await flood.newTenant({ companyId: target.companyId });
      const stranger = await flood.newTenant();
      await flood.app.listen({ port: 0, host: '127.0.0.1' });
      const base = `http://127.0.0.1:${(flood.app.server.address() as AddressInfo).port}`;
      const post = async (to: TestTenant) => {
        const response = await fetch(`${base}/api/webhooks/${to.integrationKey}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"event":"flood"}',
        });
        await response.arrayBuffer();
        return response.status;
      };
      /** `count` requests to `to`, 8 at a time on kept-alive connections, as a flood would come. */
      const burst = async (to: TestTenant, count: number) => {
        const statuses: number[] = [];
        let left = count;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            while (left-- > 0) statuses.push(await post(to));
          }),
        );
        return statuses;
      };

      for (let i = 0; i < 5; i++) expect(await post(target)).toBe(401);
      const FLOOD = 400;
      expect(new Set(await burst(target, FLOOD))).toEqual(new Set([429]));
      expect(new Set(await burst(sibling, 50))).toEqual(new Set([429]));
      // Other addresses' refusals keep a row each: a missing key, another company's key.
      const fromElsewhere = (headers: Record<string, string>) =>
        flood.app.inject({
          method: 'POST',
          url: `/api/webhooks/${target.integrationKey}`,
          headers: { 'content-type': 'application/json', ...headers },
          payload: '{"event":"elsewhere"}',
          remoteAddress: '198.51.100.7',
        });
      expect((await fromElsewhere({})).statusCode).toBe(401);
      expect((await fromElsewhere({ 'x-api-key': stranger.apiKey })).statusCode).toBe(403);

      // Rows are written in order: once the last request's row is in, every earlier one is.
      const rowsOf = (of: TestTenant) => flood.store.listRequestLog(of.companyId, of.integrationId, 1000);
      await waitFor(async () => ((await rowsOf(target)).some((row) => row.status === 403) ? true : undefined), 'the request log to catch up');
      const summary = async (of: TestTenant) => (await rowsOf(of)).map((row) => `${row.status} ${row.errorCode}`).sort();
      expect(await summary(target)).toEqual([
        ...Array<string>(6).fill('401 missing_api_key'),
        '403 insufficient_permissions',
        '429 auth_rate_limited',
      ]);
      expect(await summary(sibling)).toEqual(['429 auth_rate_limited']);
      const [throttled] = (await rowsOf(target)).filter((row) => row.status === 429);
      expect(throttled).toMatchObject({ ip: '127.0.0.1', keyId: null, method: 'POST' });

      const metrics = await scrapeUrl(`${base}/metrics`);
      expect(metrics.value('intake_auth_rate_limited_unlogged_total')).toBe(FLOOD - 1 + 50 - 1);
    } finally {
      await flood.close();
    }
  });
});
