import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { issueApiKey } from '../src/domain/api-key.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from './helpers.js';
import { sleep } from './support/processes.js';

type Response = Awaited<ReturnType<typeof sendWebhook>>;

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MISSING_KEY = { error: 'Missing API key', message: 'API key is required in the X-API-Key header.' };
const INVALID_KEY = { error: 'Invalid API key', message: 'The provided API key is not valid or has been revoked.' };
const FORBIDDEN = {
  error: 'Insufficient permissions',
  message: 'Your API key does not have permission to access this resource.',
};
const DISABLED = { error: 'Integration disabled', message: 'This integration is disabled and does not accept webhooks.' };
const UNSUPPORTED = {
  error: 'Unsupported media type',
  message: 'The request body must be JSON, sent with Content-Type: application/json.',
};
const INVALID_EVENT = {
  error: 'Validation failed',
  message: 'Field "event" is required and must be a non-empty string of at most 200 characters.',
  field: 'event',
};
const INVALID_DATA = { error: 'Validation failed', message: 'Field "data" must be a JSON object when present.', field: 'data' };

/** The response is the contract's JSON error with this status and these fields. */
function expectError(response: Response, status: number, fields: Record<string, string>) {
  expect(response.statusCode).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  const body = response.json() as Record<string, unknown>;
  expect(body).toMatchObject(fields);
  expect(typeof body.error).toBe('string');
  expect(typeof body.message).toBe('string');
}

function expectAccepted(response: Response): { uuid: string; received_at: string } {
  expect(response.statusCode).toBe(202);
  const body = response.json() as { uuid: string; received_at: string };
  expect(Object.keys(body).sort()).toEqual(['received_at', 'uuid']);
  expect(body.uuid).toMatch(UUID);
  expect(new Date(body.received_at).toISOString()).toBe(body.received_at);
  return body;
}

async function listUuids(tenant: TestTenant): Promise<string[]> {
  const response = await t.app.inject({
    method: 'GET',
    url: `/api/webhooks/${tenant.integrationKey}?limit=200`,
    headers: { 'x-api-key': tenant.apiKey },
  });
  expect(response.statusCode).toBe(200);
  return (response.json() as { data: Array<{ uuid: string }> }).data.map((item) => item.uuid);
}

/** Resends until the key cache has seen a change made through Management (contract: within 1 s). */
function sendUntil(status: number, send: () => Promise<Response>): Promise<Response> {
  return waitFor(async () => {
    const response = await send();
    return response.statusCode === status ? response : undefined;
  }, `status ${status}`);
}

/** A second integration of the tenant's company, with its own key. */
function siblingOf(tenant: TestTenant): Promise<TestTenant> {
  return t.newTenant({ companyId: tenant.companyId });
}

describe('POST /api/webhooks/:integration_key, happy path', () => {
  test.each(['/api/webhooks', '/api/webhook'])('%s accepts a webhook with 202 {uuid, received_at}', async (path) => {
    const tenant = await t.newTenant();
    const before = Date.now();
    const accepted = expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, path }));
    expect(Date.parse(accepted.received_at)).toBeGreaterThanOrEqual(before - 1);
    expect(await listUuids(tenant)).toEqual([accepted.uuid]);
  });

  test('both address shapes name the same integration', async () => {
    const tenant = await t.newTenant();
    const first = expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, path: '/api/webhooks' }));
    const second = expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, path: '/api/webhook' }));
    expect(first.uuid).not.toBe(second.uuid);
    expect(await listUuids(tenant)).toEqual([second.uuid, first.uuid]);
  });

  test('received_at is when the whole body had come: a request begun first whose body comes last is the newest', async () => {
    const tenant = await t.newTenant();
    const slowBody = new PassThrough();
    const slow = t.app.inject({
      method: 'POST',
      url: `/api/webhooks/${tenant.integrationKey}`,
      headers: { 'x-api-key': tenant.apiKey, 'content-type': 'application/json' },
      payload: slowBody,
    });
    slowBody.write('{"event":"slow.body",');
    // Its request has been authenticated and is reading the body when the fast one comes.
    await sleep(30);
    const fast = expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    await sleep(30);
    slowBody.end('"data":{}}');
    const late = expectAccepted(await slow);
    // Stamped in the order they joined the group commit, which writes them in that order,
    // so (received_at, uuid) grows with the rows and the time indexes fill their pages.
    expect(Date.parse(late.received_at)).toBeGreaterThanOrEqual(Date.parse(fast.received_at) + 25);
    expect(late.uuid > fast.uuid).toBe(true);
    expect(await listUuids(tenant)).toEqual([late.uuid, fast.uuid]);
  });

  test('Content-Type parameters such as charset are allowed', async () => {
    const tenant = await t.newTenant();
    expectAccepted(
      await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, contentType: 'application/json; charset=utf-8' }),
    );
  });

  test('data may be missing', async () => {
    const tenant = await t.newTenant();
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: '{"event":"no.data"}' }));
  });

  test('an event of exactly 200 characters is accepted', async () => {
    const tenant = await t.newTenant();
    const body = JSON.stringify({ event: 'e'.repeat(200), data: {} });
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body }));
  });

  test('event length counts characters, not UTF-16 units: 200 emoji are accepted', async () => {
    const tenant = await t.newTenant();
    const body = JSON.stringify({ event: '😀'.repeat(200) });
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body }));
  });

  test('the address with a trailing slash is the same address', async () => {
    const tenant = await t.newTenant();
    const response = await t.app.inject({
      method: 'POST',
      url: `/api/webhooks/${tenant.integrationKey}/`,
      headers: { 'x-api-key': tenant.apiKey, 'content-type': 'application/json' },
      payload: '{"event":"slash"}',
    });
    const accepted = expectAccepted(response);
    expect(await listUuids(tenant)).toEqual([accepted.uuid]);
  });

  test('a body of exactly the integration limit is accepted', async () => {
    const tenant = await t.newTenant({ bodyLimitBytes: 100 });
    const base = '{"event":"e","data":{"p":""}}';
    const body = base.replace('""', `"${'x'.repeat(100 - Buffer.byteLength(base))}"`);
    expect(Buffer.byteLength(body)).toBe(100);
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body }));
  });
});

describe('authentication errors', () => {
  test('401 Missing API key when the header is absent', async () => {
    const tenant = await t.newTenant();
    expectError(await sendWebhook(t.app, tenant.integrationKey), 401, MISSING_KEY);
    expect(await listUuids(tenant)).toEqual([]);
  });

  test('401 Missing API key when the header is empty', async () => {
    const tenant = await t.newTenant();
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: '' }), 401, MISSING_KEY);
  });

  test('401 Invalid API key for a well-formed key that was never issued', async () => {
    const tenant = await t.newTenant();
    const unknown = issueApiKey('development').plaintext;
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: unknown }), 401, INVALID_KEY);
  });

  test.each([
    ['garbage', 'not-a-key'],
    ['a truncated key', 'whk_dev_abc'],
    ['a key with an unknown environment tag', 'whk_test_0123456789abcdefghijklmnopqrstuvwx'],
  ])('401 Invalid API key for a malformed key: %s', async (_name, apiKey) => {
    const tenant = await t.newTenant();
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey }), 401, INVALID_KEY);
  });

  test('401 Invalid API key for a real key with one character changed (bad checksum)', async () => {
    const tenant = await t.newTenant();
    const index = 'whk_dev_'.length + 3;
    const original = tenant.apiKey[index]!;
    const altered = tenant.apiKey.slice(0, index) + (original === 'A' ? 'B' : 'A') + tenant.apiKey.slice(index + 1);
    expect(altered).not.toBe(tenant.apiKey);
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: altered }), 401, INVALID_KEY);
    const lastChanged = tenant.apiKey.slice(0, -1) + (tenant.apiKey.endsWith('0') ? '1' : '0');
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: lastChanged }), 401, INVALID_KEY);
  });

  test("401 Invalid API key for another environment's key", async () => {
    const tenant = await t.newTenant();
    expect(t.config.environment).toBe('development');
    for (const environment of ['production', 'staging'] as const) {
      const apiKey = issueApiKey(environment).plaintext;
      expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey }), 401, INVALID_KEY);
    }
  });

  test('401 Invalid API key for a revoked key', async () => {
    const tenant = await t.newTenant();
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    await t.management.revokeKey(tenant.companyId, tenant.keyId);
    const refused = await sendUntil(401, () => sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    expectError(refused, 401, INVALID_KEY);
  });

  test('401 Invalid API key for a key expired by rotation with no grace; the new key works', async () => {
    const tenant = await t.newTenant();
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    const rotated = await t.management.rotateIntegrationKey(tenant.companyId, tenant.integrationId, 0);
    const refused = await sendUntil(401, () => sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    expectError(refused, 401, INVALID_KEY);
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: rotated.apiKey }));
  });

  test('a key rotated with a grace period keeps working', async () => {
    const tenant = await t.newTenant();
    const rotated = await t.management.rotateIntegrationKey(tenant.companyId, tenant.integrationId, 3600);
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: rotated.apiKey }));
  });

  test("403 Insufficient permissions for another integration's key in the same company", async () => {
    const tenant = await t.newTenant();
    const sibling = await siblingOf(tenant);
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: sibling.apiKey }), 403, FORBIDDEN);
    expect(await listUuids(tenant)).toEqual([]);
  });

  test("403 Insufficient permissions for another company's key", async () => {
    const tenant = await t.newTenant();
    const other = await t.newTenant();
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: other.apiKey }), 403, FORBIDDEN);
    expect(await listUuids(tenant)).toEqual([]);
    expect(await listUuids(other)).toEqual([]);
  });

  test("403 Insufficient permissions for the company's management key", async () => {
    const tenant = await t.newTenant();
    const management = await t.management.createManagementKey(tenant.companyId, ['integrations:manage', 'logs:read']);
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: management.apiKey }), 403, FORBIDDEN);
  });

  test('403 Insufficient permissions for a valid key aimed at an address that names no integration', async () => {
    const tenant = await t.newTenant();
    expectError(await sendWebhook(t.app, 'NoSuchIntegrationKey0000', { apiKey: tenant.apiKey }), 403, FORBIDDEN);
    expectError(await sendWebhook(t.app, 'NoSuchIntegrationKey0000'), 401, MISSING_KEY);
  });

  test('403 Integration disabled once the integration is disabled', async () => {
    const tenant = await t.newTenant();
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    await t.management.setIntegrationEnabled(tenant.companyId, tenant.integrationId, false);
    const refused = await sendUntil(403, () => sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    expectError(refused, 403, DISABLED);
  });
});

describe('body errors', () => {
  test('415 for text/plain', async () => {
    const tenant = await t.newTenant();
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, contentType: 'text/plain' });
    expectError(response, 415, UNSUPPORTED);
    expect(await listUuids(tenant)).toEqual([]);
  });

  test('415 when Content-Type is missing', async () => {
    const tenant = await t.newTenant();
    const response = await t.app.inject({
      method: 'POST',
      url: `/api/webhooks/${tenant.integrationKey}`,
      headers: { 'x-api-key': tenant.apiKey },
      // A string payload: app.inject adds no Content-Type of its own.
      payload: '{"event":"no.content.type"}',
    });
    expectError(response, 415, UNSUPPORTED);
  });

  test('413 when the declared Content-Length is over the integration limit', async () => {
    const tenant = await t.newTenant({ bodyLimitBytes: 100 });
    const body = JSON.stringify({ event: 'big', data: { p: 'x'.repeat(200) } });
    const response = await sendWebhook(t.app, tenant.integrationKey, {
      apiKey: tenant.apiKey,
      body,
      headers: { 'content-length': String(Buffer.byteLength(body)) },
    });
    expectError(response, 413, {
      error: 'Payload too large',
      message: 'The request body is larger than the limit of 100 bytes.',
    });
    expect(await listUuids(tenant)).toEqual([]);
  });

  test('413 when a body without Content-Length streams past the integration limit', async () => {
    const tenant = await t.newTenant({ bodyLimitBytes: 100 });
    const body = JSON.stringify({ event: 'big', data: { p: 'x'.repeat(200) } });
    const response = await t.app.inject({
      method: 'POST',
      url: `/api/webhooks/${tenant.integrationKey}`,
      // A stream payload: app.inject sends no Content-Length, so only the limit can stop it.
      headers: { 'x-api-key': tenant.apiKey, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      payload: Readable.from([Buffer.from(body.slice(0, 60)), Buffer.from(body.slice(60))]),
    });
    expectError(response, 413, {
      error: 'Payload too large',
      message: 'The request body is larger than the limit of 100 bytes.',
    });
    expect(await listUuids(tenant)).toEqual([]);
  });

  test.each([
    ['invalid JSON', '{"event": "x",', 'The request body is not valid JSON.'],
    ['an empty body', '', 'The request body is not valid JSON.'],
    ['a JSON array', '[{"event":"x"}]', 'The request body must be a JSON object.'],
    ['a JSON string', '"event"', 'The request body must be a JSON object.'],
    ['JSON null', 'null', 'The request body must be a JSON object.'],
  ])('400 for %s', async (_name, body, message) => {
    const tenant = await t.newTenant();
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
    expectError(response, 400, { error: 'Invalid JSON', message });
  });

  test('400 for a document nested deeper than 128 levels', async () => {
    const tenant = await t.newTenant();
    const body = `{"event":"deep","data":{"a":${'['.repeat(200)}${']'.repeat(200)}}}`;
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
    expectError(response, 400, { error: 'Invalid JSON', message: 'The request body nests deeper than 128 levels.' });
  });

  test('400 for a body that is not valid UTF-8', async () => {
    const tenant = await t.newTenant();
    const body = Buffer.concat([Buffer.from('{"event":"bad.'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]);
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
    expectError(response, 400, { error: 'Invalid JSON', message: 'The request body is not valid UTF-8.' });
    expect(await listUuids(tenant)).toEqual([]);
  });

  test.each([
    ['missing', { data: {} }],
    ['empty', { event: '', data: {} }],
    ['201 characters', { event: 'e'.repeat(201) }],
    ['a number', { event: 42 }],
    ['null', { event: null }],
    ['an object', { event: { name: 'x' } }],
  ])('422 naming "event" when event is %s', async (_name, document) => {
    const tenant = await t.newTenant();
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: JSON.stringify(document) });
    expectError(response, 422, INVALID_EVENT);
    expect(await listUuids(tenant)).toEqual([]);
  });

  test.each([
    ['an array', []],
    ['a string', 'text'],
    ['null', null],
    ['a number', 7],
  ])('422 naming "data" when data is %s', async (_name, data) => {
    const tenant = await t.newTenant();
    const body = JSON.stringify({ event: 'x', data });
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
    expectError(response, 422, INVALID_DATA);
  });

  test('429 with Retry-After over the integration rate limit', async () => {
    const tenant = await t.newTenant({ rateLimitPerMinute: 2 });
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    const limited = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
    expectError(limited, 429, { error: 'Rate limit exceeded', message: 'This integration accepts 2 webhooks a minute.' });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(30);
    expect(await listUuids(tenant)).toHaveLength(2);
  });

  test('an idempotency key longer than 255 characters is a 400', async () => {
    const tenant = await t.newTenant();
    const response = await sendWebhook(t.app, tenant.integrationKey, {
      apiKey: tenant.apiKey,
      headers: { 'idempotency-key': 'k'.repeat(256) },
    });
    expectError(response, 400, {
      error: 'Invalid request',
      message: 'The idempotency key must be at most 255 characters.',
    });
  });
});

describe("the contract's order of checks", () => {
  test('no key with text/plain and an oversized body: 401 (authentication comes first)', async () => {
    const tenant = await t.newTenant({ bodyLimitBytes: 100 });
    const response = await sendWebhook(t.app, tenant.integrationKey, { contentType: 'text/plain', body: 'x'.repeat(500) });
    expectError(response, 401, MISSING_KEY);
  });

  test("another company's key with an invalid body: 403 Insufficient permissions", async () => {
    const tenant = await t.newTenant();
    const other = await t.newTenant();
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: other.apiKey, body: 'not json' });
    expectError(response, 403, FORBIDDEN);
  });

  test('a disabled integration with text/plain: 403, not 415', async () => {
    const tenant = await t.newTenant();
    await t.management.setIntegrationEnabled(tenant.companyId, tenant.integrationId, false);
    const response = await sendUntil(403, () =>
      sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, contentType: 'text/plain', body: 'hello' }),
    );
    expectError(response, 403, DISABLED);
  });

  test('text/plain with an oversized body: 415, not 413', async () => {
    const tenant = await t.newTenant({ bodyLimitBytes: 100 });
    const response = await sendWebhook(t.app, tenant.integrationKey, {
      apiKey: tenant.apiKey,
      contentType: 'text/plain',
      body: 'x'.repeat(500),
    });
    expectError(response, 415, UNSUPPORTED);
  });

  test('oversized invalid JSON: 413, not 400', async () => {
    const tenant = await t.newTenant({ bodyLimitBytes: 100 });
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: `{${'x'.repeat(500)}` });
    expectError(response, 413, { error: 'Payload too large' });
  });

  test('a JSON array breaking the event rules: 400, not 422', async () => {
    const tenant = await t.newTenant();
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: '[]' });
    expectError(response, 400, { error: 'Invalid JSON' });
  });

  test('invalid JSON and a broken event beyond the rate limit: 400 and 422, not 429', async () => {
    const tenant = await t.newTenant({ rateLimitPerMinute: 2 });
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }));
    expectError(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey }), 429, {
      error: 'Rate limit exceeded',
    });
    const invalidJson = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: '{nope' });
    expectError(invalidJson, 400, { error: 'Invalid JSON', message: 'The request body is not valid JSON.' });
    const invalidEvent = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: '{"event":""}' });
    expectError(invalidEvent, 422, INVALID_EVENT);
  });
});

describe('idempotency', () => {
  const body = '{"event":"order.paid","data":{"id":1}}';

  test.each(['idempotency-key', 'webhook-id'])(
    'a repeated %s gets 200 with the original uuid and Idempotent-Replayed: true, storing nothing new',
    async (header) => {
      const tenant = await t.newTenant();
      const headers = { [header]: 'evt_0001' };
      const first = expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body, headers }));
      const repeat = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body, headers });
      expect(repeat.statusCode).toBe(200);
      expect(repeat.headers['idempotent-replayed']).toBe('true');
      expect(repeat.json()).toEqual(first);
      expect(await listUuids(tenant)).toEqual([first.uuid]);
    },
  );

  test('the first answer carries no Idempotent-Replayed header', async () => {
    const tenant = await t.newTenant();
    const first = await sendWebhook(t.app, tenant.integrationKey, {
      apiKey: tenant.apiKey,
      body,
      headers: { 'idempotency-key': 'evt_first' },
    });
    expectAccepted(first);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
  });

  test.each(['idempotency-key', 'webhook-id'])('the same %s with a different body is a 422', async (header) => {
    const tenant = await t.newTenant();
    const headers = { [header]: 'evt_0002' };
    const first = expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body, headers }));
    const changed = '{"event":"order.paid","data":{"id":2}}';
    const conflict = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: changed, headers });
    expectError(conflict, 422, {
      error: 'Idempotency key reused',
      message: 'This idempotency key was already used with a different body.',
    });
    expect(await listUuids(tenant)).toEqual([first.uuid]);
  });

  test('a different idempotency key with the same body is a new webhook', async () => {
    const tenant = await t.newTenant();
    const first = expectAccepted(
      await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body, headers: { 'idempotency-key': 'a' } }),
    );
    const second = expectAccepted(
      await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body, headers: { 'idempotency-key': 'b' } }),
    );
    expect(second.uuid).not.toBe(first.uuid);
  });

  test('the same idempotency key on another integration is independent', async () => {
    const tenant = await t.newTenant();
    const sibling = await siblingOf(tenant);
    const other = await t.newTenant();
    const headers = { 'idempotency-key': 'shared-key' };
    const uuids = new Set<string>();
    for (const target of [tenant, sibling, other]) {
      const accepted = expectAccepted(await sendWebhook(t.app, target.integrationKey, { apiKey: target.apiKey, body, headers }));
      uuids.add(accepted.uuid);
      expect(await listUuids(target)).toEqual([accepted.uuid]);
    }
    expect(uuids.size).toBe(3);
  });

  test('concurrent identical requests: exactly one 202, the others 200 with the same uuid', async () => {
    const tenant = await t.newTenant();
    const headers = { 'idempotency-key': 'evt_concurrent' };
    const responses = await Promise.all(
      Array.from({ length: 6 }, () => sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body, headers })),
    );
    const accepted = responses.filter((r) => r.statusCode === 202);
    const replayed = responses.filter((r) => r.statusCode === 200);
    expect(accepted).toHaveLength(1);
    expect(replayed).toHaveLength(5);
    const { uuid } = expectAccepted(accepted[0]!);
    for (const response of replayed) {
      expect(response.json()).toMatchObject({ uuid });
      expect(response.headers['idempotent-replayed']).toBe('true');
    }
    expect(await listUuids(tenant)).toEqual([uuid]);
  });

  test('concurrent requests with one key and different bodies: one 202, the others 422', async () => {
    const tenant = await t.newTenant();
    const headers = { 'idempotency-key': 'evt_concurrent_conflict' };
    const responses = await Promise.all(
      [1, 2, 3].map((n) =>
        sendWebhook(t.app, tenant.integrationKey, {
          apiKey: tenant.apiKey,
          body: JSON.stringify({ event: 'order.paid', data: { n } }),
          headers,
        }),
      ),
    );
    expect(responses.map((r) => r.statusCode).sort()).toEqual([202, 422, 422]);
    expect(await listUuids(tenant)).toHaveLength(1);
  });
});

describe('the raw body', () => {
  test('is stored byte for byte: whitespace, unicode, escapes and extra top-level fields', async () => {
    const tenant = await t.newTenant();
    const body =
      '{ "event" : "raw.test" ,\n\t"data":{"text":"héllo – 😀 \\u00e9","n":1.50,"big":12345678901234567890},\r\n' +
      '  "extra": [1, 2, {"k": null}], "version": "2" }\n';
    const accepted = expectAccepted(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body }));
    const response = await t.app.inject({
      method: 'GET',
      url: `/api/webhooks/${tenant.integrationKey}/${accepted.uuid}`,
      headers: { 'x-api-key': tenant.apiKey },
    });
    expect(response.statusCode).toBe(200);
    const stored = response.json() as { raw_body: string; event: string; data: unknown };
    expect(stored.raw_body).toBe(body);
    expect(Buffer.from(stored.raw_body, 'utf8').equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(stored.event).toBe('raw.test');
    expect(stored.data).toEqual({ text: 'héllo – 😀 é', n: 1.5, big: 12345678901234567890 });
  });
});

describe('security: every intake route refuses keys that do not own the address', () => {
  const routes = [
    ['POST', '/api/webhooks/:key'],
    ['POST', '/api/webhook/:key'],
    ['GET', '/api/webhooks/:key'],
    ['GET', '/api/webhook/:key'],
    ['GET', '/api/webhooks/:key/:uuid'],
    ['GET', '/api/webhook/:key/:uuid'],
  ] as const;

  let victim: TestTenant;
  let sibling: TestTenant;
  let stranger: TestTenant;
  let managementKey: string;
  let victimUuid: string;

  beforeAll(async () => {
    victim = await t.newTenant();
    sibling = await siblingOf(victim);
    stranger = await t.newTenant();
    managementKey = (await t.management.createManagementKey(victim.companyId, ['integrations:manage', 'logs:read'])).apiKey;
    victimUuid = expectAccepted(await sendWebhook(t.app, victim.integrationKey, { apiKey: victim.apiKey })).uuid;
  });

  function request(method: 'GET' | 'POST', template: string, apiKey: string | undefined) {
    const url = template.replace(':key', victim.integrationKey).replace(':uuid', victimUuid);
    return t.app.inject({
      method,
      url,
      headers: {
        ...(apiKey === undefined ? {} : { 'x-api-key': apiKey }),
        ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
      },
      ...(method === 'POST' ? { payload: '{"event":"intruder"}' } : {}),
    });
  }

  test.each(routes)("%s %s with another company's key: 403", async (method, template) => {
    const response = await request(method, template, stranger.apiKey);
    expectError(response, 403, FORBIDDEN);
    expect(response.body).not.toContain('intruder');
    expect(response.body).not.toContain(victimUuid);
  });

  test.each(routes)("%s %s with another integration's key of the same company: 403", async (method, template) => {
    const response = await request(method, template, sibling.apiKey);
    expectError(response, 403, FORBIDDEN);
    expect(response.body).not.toContain(victimUuid);
  });

  test.each(routes)("%s %s with the company's management key: 403", async (method, template) => {
    expectError(await request(method, template, managementKey), 403, FORBIDDEN);
  });

  test.each(routes)('%s %s without a key: 401', async (method, template) => {
    expectError(await request(method, template, undefined), 401, MISSING_KEY);
  });

  test('nothing was stored by the refused senders', async () => {
    expect(await listUuids(victim)).toEqual([victimUuid]);
    expect(await listUuids(sibling)).toEqual([]);
    expect(await listUuids(stranger)).toEqual([]);
  });
});
