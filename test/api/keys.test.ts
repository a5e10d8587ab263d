import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { hashApiKey } from '../../src/domain/api-key.js';
import { newId } from '../../src/domain/ids.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member, type SignedIn } from '../support/api.js';

/**
 * /api/v1/integrations/:id/keys: happy paths, each error, and every route with another
 * company's key, session and ids. A revoked or rotated-out key must really stop working
 * at the intake address, and every change must leave an audit record without the key.
 */
type Headers = Record<string, string>;
interface KeyBody {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  status: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_ip: string | null;
  requests_24h: number;
}

let t: TestApp;
let tenant: TestTenant;
let keyHeaders: Headers;
let readOnlyKey: Headers;
let owner: SignedIn;
let viewer: SignedIn;
let other: { tenant: TestTenant; key: Headers; owner: SignedIn };

beforeAll(async () => {
  t = await buildTestApp();
  tenant = await t.newTenant();
  keyHeaders = await managementKey(t, tenant.companyId);
  readOnlyKey = await managementKey(t, tenant.companyId, ['logs:read']);
  owner = await member(t, tenant.companyId, 'owner');
  viewer = await member(t, tenant.companyId, 'viewer');
  const theirs = await t.newTenant();
  other = { tenant: theirs, key: await managementKey(t, theirs.companyId), owner: await member(t, theirs.companyId, 'owner') };
});
afterAll(() => t.close());

const api = (method: 'GET' | 'POST', url: string, headers: Headers, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });
const keysOf = (integrationId: string) => `/integrations/${integrationId}/keys`;
const send = (of: TestTenant, apiKey: string, headers: Headers = {}) => sendWebhook(t.app, of.integrationKey, { apiKey, headers });
const sibling = () => t.newTenant({ companyId: tenant.companyId });

async function listKeys(of: TestTenant, headers: Headers = keyHeaders): Promise<Map<string, KeyBody>> {
  const response = await api('GET', `${keysOf(of.integrationId)}?limit=200`, headers);
  expect(response.statusCode, response.body).toBe(200);
  return new Map(response.json<{ data: KeyBody[] }>().data.map((k) => [k.id, k]));
}

async function createKey(of: TestTenant, payload: object = {}, headers: Headers = keyHeaders) {
  const response = await api('POST', keysOf(of.integrationId), headers, payload);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ key: KeyBody; api_key: string }>();
}

/** The audit records of `action` on `targetId`; none may hold a key or its hash. */
async function audited(action: string, targetId: string, secret: string) {
  const records = await t.store.listAuditLog(tenant.companyId, { limit: 50, action, targetId });
  expect(JSON.stringify(records)).not.toContain(secret);
  expect(JSON.stringify(records)).not.toContain(hashApiKey(secret));
  return records;
}

describe('happy paths', () => {
  test('create returns the key once; it sends webhooks; the list shows it with its use, never the key', async () => {
    const of = await sibling();
    const created = await createKey(of, { name: ' Second sender ' }, owner.change);
    expect(created.api_key).toMatch(/^whk_dev_/);
    expect(created.api_key.startsWith(created.key.prefix)).toBe(true);
    expect(created.key).toMatchObject({ name: 'Second sender', status: 'active', expires_at: null, requests_24h: 0 });
    expect(created.key.scopes.sort()).toEqual(['webhooks:read', 'webhooks:write']);
    expect((await send(of, created.api_key)).statusCode).toBe(202);
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
    const list = await api('GET', `${keysOf(of.integrationId)}?limit=200`, viewer.read);
    expect(list.body).not.toContain(created.api_key);
    expect(list.body).not.toContain(of.apiKey);
    const listed = await waitFor(async () => {
      const keys = await listKeys(of);
      return keys.get(created.key.id)?.last_used_ip ? keys : undefined;
    }, 'last use written behind');
    expect(listed.get(created.key.id)).toMatchObject({ requests_24h: 1, status: 'active', last_used_ip: '127.0.0.1' });
    expect(listed.get(of.keyId)).toMatchObject({ requests_24h: 1, name: '' });
    const [record] = await audited('key.create', created.key.id, created.api_key);
    expect(record).toMatchObject({ actor: { type: 'user' }, after: { integrationId: of.integrationId, name: 'Second sender' } });
  });

  test('a key with an expiry is active, or expiring within 7 days', async () => {
    const far = await createKey(tenant, { expires_at: new Date(Date.now() + 30 * 86_400_000).toISOString() });
    const near = await createKey(tenant, { expires_at: new Date(Date.now() + 3_600_000).toISOString() });
    expect(far.key.status).toBe('active');
    expect(near.key.status).toBe('expiring');
    expect(Date.parse(near.key.expires_at!)).toBeGreaterThan(Date.now());
  });

  test('the list pages newest first by cursor, without gaps or repeats', async () => {
    const of = await sibling();
    const ids = [of.keyId];
    for (let i = 0; i < 4; i++) ids.push((await createKey(of, { name: `k${i}` })).key.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await api('GET', `${keysOf(of.integrationId)}?limit=2${cursor ? `&cursor=${cursor}` : ''}`, keyHeaders);
      const body = page.json<{ data: KeyBody[]; next_cursor: string | null }>();
      seen.push(...body.data.map((k) => k.id));
      cursor = body.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
  });

  test('rotate: the new key works, old keys keep working for the grace period, then (grace 0) get 401', async () => {
    const of = await sibling();
    const before = Date.now();
    const response = await api('POST', `${keysOf(of.integrationId)}/rotate`, owner.change, { grace_seconds: 3600 });
    expect(response.statusCode, response.body).toBe(201);
    const rotated = response.json<{ key: KeyBody; api_key: string; previous_keys_expire_at: string }>();
    expect(Date.parse(rotated.previous_keys_expire_at)).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(rotated.key).toMatchObject({ status: 'active', expires_at: null });
    expect((await send(of, rotated.api_key)).statusCode).toBe(202);
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
    expect((await listKeys(of)).get(of.keyId)).toMatchObject({ status: 'expiring', expires_at: rotated.previous_keys_expire_at });

    const now = await api('POST', `${keysOf(of.integrationId)}/rotate`, keyHeaders, { grace_seconds: 0 });
    const newest = now.json<{ api_key: string }>().api_key;
    for (const old of [of.apiKey, rotated.api_key]) {
      const refused = await send(of, old);
      expect(refused.statusCode).toBe(401);
      expect(refused.json()).toMatchObject({ error: 'Invalid API key' });
    }
    expect((await send(of, newest)).statusCode).toBe(202);
    expect((await listKeys(of)).get(of.keyId)?.status).toBe('expired');
    const records = await audited('key.rotate', of.integrationId, newest);
    expect(records.map((r) => r.actor.type)).toEqual(['key', 'user']);
  });

  test.each([['without a body', undefined], ['with an empty body', {}]])('rotate %s gives the old keys 24 hours', async (_what, payload) => {
    const of = await sibling();
    const before = Date.now();
    const response = await api('POST', `${keysOf(of.integrationId)}/rotate`, keyHeaders, payload);
    expect(response.statusCode, response.body).toBe(201);
    const expiresAt = Date.parse(response.json<{ previous_keys_expire_at: string }>().previous_keys_expire_at);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 86_400_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 86_400_000);
  });

  test('revoke: the key gets 401 at intake at once; revoking again changes nothing', async () => {
    const of = await sibling();
    const extra = await createKey(of);
    expect((await send(of, extra.api_key)).statusCode).toBe(202);
    const response = await api('POST', `${keysOf(of.integrationId)}/${extra.key.id}/revoke`, owner.change);
    expect(response.statusCode, response.body).toBe(200);
    const revoked = response.json<KeyBody>();
    expect(revoked).toMatchObject({ id: extra.key.id, status: 'revoked', requests_24h: 1 });
    const refused = await send(of, extra.api_key);
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toMatchObject({ error: 'Invalid API key' });
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
    const again = await api('POST', `${keysOf(of.integrationId)}/${extra.key.id}/revoke`, keyHeaders);
    expect(again.json<KeyBody>().revoked_at).toBe(revoked.revoked_at);
    const records = await audited('key.revoke', extra.key.id, extra.api_key);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ actor: { type: 'user' }, after: { integrationId: of.integrationId } });
  });

  test('callers: distinct senders of the key in the last 7 days, most recent first, with their counts', async () => {
    const of = await sibling();
    const extra = await createKey(of);
    expect((await send(of, of.apiKey, { 'user-agent': 'billing/2.0' })).statusCode).toBe(202);
    const hour = 3_600_000;
    const row = (keyId: string, ip: string, userAgent: string, ago: number) => ({
      id: newId('req'), companyId: tenant.companyId, integrationId: of.integrationId, receivedAt: Date.now() - ago,
      method: 'POST', status: 202, errorCode: null, keyId, ip, userAgent, sizeBytes: 10, durationMs: 1, webhookUuid: null,
    });
    await t.store.commitBatch([], [
      row(of.keyId, '10.0.0.1', 'billing/1.0', 2 * hour),
      row(of.keyId, '10.0.0.1', 'billing/1.0', 30 * hour),
      row(of.keyId, '10.0.0.2', 'cron', 3 * hour),
      row(of.keyId, '10.0.0.3', 'gone', 8 * 24 * hour),
      row(extra.key.id, '10.0.0.9', 'the other key', hour),
    ]);
    const response = await api('GET', `${keysOf(of.integrationId)}/${of.keyId}/callers`, viewer.read);
    expect(response.statusCode, response.body).toBe(200);
    const callers = response.json<{ data: Array<{ ip: string; user_agent: string; requests: number }> }>().data;
    expect(callers.map((c) => [c.ip, c.user_agent, c.requests])).toEqual([
      ['127.0.0.1', 'billing/2.0', 1],
      ['10.0.0.1', 'billing/1.0', 2],
      ['10.0.0.2', 'cron', 1],
    ]);
    const limited = await api('GET', `${keysOf(of.integrationId)}/${of.keyId}/callers?limit=1`, keyHeaders);
    expect(limited.json<{ data: unknown[] }>().data).toHaveLength(1);
    // The 30-hour-old row is a caller of the week but not a request of the last 24 hours.
    expect((await listKeys(of)).get(of.keyId)?.requests_24h).toBe(3);
  });
});

describe('scopes: who may issue a key that reads webhooks (issue 13, finding 6)', () => {
  /** A read of the integration's webhooks with `apiKey`, as a sender would make it. */
  const readWith = (of: { integrationKey: string }, apiKey: string) =>
    t.app.inject({ method: 'GET', url: `/api/webhooks/${of.integrationKey}`, headers: { 'x-api-key': apiKey } });
  const issued = async (response: Awaited<ReturnType<typeof api>>) => {
    expect(response.statusCode, response.body).toBe(201);
    return response.json<{ key: KeyBody; api_key: string }>();
  };

  test('a management key with integrations:manage alone issues write-only keys, by each route: they send, never read', async () => {
    const manageOnly = await managementKey(t, tenant.companyId, ['integrations:manage']);
    const of = await sibling();
    expect((await send(of, of.apiKey)).statusCode).toBe(202);

    const created = await api('POST', '/integrations', manageOnly, { name: 'Made by a manage-only key' });
    expect(created.statusCode, created.body).toBe(201);
    const integration = created.json<{ integration: { id: string; integration_key: string }; api_key: string; key_id: string }>();
    const first = { integrationKey: integration.integration.integration_key, integrationId: integration.integration.id, apiKey: integration.api_key };
    const added = await issued(await api('POST', keysOf(of.integrationId), manageOnly, { name: 'sender' }));
    const rotated = await issued(await api('POST', `${keysOf(of.integrationId)}/rotate`, manageOnly, { grace_seconds: 3600 }));

    for (const [what, target, apiKey] of [
      ['the first key of an integration it created', first, first.apiKey],
      ['a key it added', of, added.api_key],
      ['a key it rotated in', of, rotated.api_key],
    ] as const) {
      expect((await sendWebhook(t.app, target.integrationKey, { apiKey })).statusCode, what).toBe(202);
      const read = await readWith(target, apiKey);
      expect(read.statusCode, what).toBe(403);
      expect(read.json(), what).toMatchObject({ error: 'Insufficient permissions' });
    }
    const listed = await listKeys(of);
    for (const id of [added.key.id, rotated.key.id]) expect(listed.get(id)?.scopes).toEqual(['webhooks:write']);
    expect((await listKeys(first as TestTenant)).get(integration.key_id)?.scopes).toEqual(['webhooks:write']);
    expect(added.key.scopes).toEqual(['webhooks:write']);
  });

  test('asking for webhooks:read without logs:read is a 403 on each route, and nothing is issued', async () => {
    const manageOnly = await managementKey(t, tenant.companyId, ['integrations:manage']);
    const of = await sibling();
    const integrationsBefore = (await t.store.listIntegrations(tenant.companyId, { limit: 200 })).length;
    for (const scopes of [['webhooks:read'], ['webhooks:write', 'webhooks:read']]) {
      for (const [url, payload] of [
        ['/integrations', { name: 'nope', scopes }],
        [keysOf(of.integrationId), { scopes }],
        [`${keysOf(of.integrationId)}/rotate`, { grace_seconds: 0, scopes }],
      ] as const) {
        const response = await api('POST', url, manageOnly, payload);
        expect(response.statusCode, `${url} ${response.body}`).toBe(403);
        expect(response.json()).toMatchObject({ error: 'Insufficient permissions', code: 'insufficient_permissions', field: 'scopes' });
      }
    }
    expect([...(await listKeys(of)).keys()]).toEqual([of.keyId]);
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
    expect((await t.store.listIntegrations(tenant.companyId, { limit: 200 })).length).toBe(integrationsBefore);
  });

  test('a caller with logs:read issues both by default, or write-only when asked; the CLI issues both', async () => {
    const of = await sibling();
    for (const headers of [keyHeaders, owner.change]) {
      const both = await issued(await api('POST', keysOf(of.integrationId), headers, {}));
      expect(both.key.scopes).toEqual(['webhooks:write', 'webhooks:read']);
      expect((await readWith(of, both.api_key)).statusCode).toBe(200);
      const writeOnly = await issued(await api('POST', keysOf(of.integrationId), headers, { scopes: ['webhooks:write'] }));
      expect(writeOnly.key.scopes).toEqual(['webhooks:write']);
      expect((await send(of, writeOnly.api_key)).statusCode).toBe(202);
      expect((await readWith(of, writeOnly.api_key)).statusCode).toBe(403);
      const readOnly = await issued(await api('POST', `${keysOf(of.integrationId)}/rotate`, headers, { scopes: ['webhooks:read'] }));
      expect(readOnly.key.scopes).toEqual(['webhooks:read']);
      expect((await readWith(of, readOnly.api_key)).statusCode).toBe(200);
      expect((await send(of, readOnly.api_key)).statusCode).toBe(403);
    }
    const created = await t.management.createIntegration(tenant.companyId, { name: 'By the CLI' });
    expect((await readWith(created.integration, created.apiKey)).statusCode).toBe(200);
    const rotated = await t.management.rotateIntegrationKey(tenant.companyId, created.integration.id, 0);
    expect((await readWith(created.integration, rotated.apiKey)).statusCode).toBe(200);
  });

  test.each([
    ['an empty list', []],
    ['a management scope', ['logs:read']],
    ['an unknown scope', ['webhooks:delete']],
  ])('scopes with %s are a 400', async (_what, scopes) => {
    const of = await sibling();
    for (const url of [keysOf(of.integrationId), `${keysOf(of.integrationId)}/rotate`, '/integrations']) {
      const response = await api('POST', url, keyHeaders, { name: 'x', scopes });
      expect(response.statusCode, `${url} ${response.body}`).toBe(400);
      expect(response.json()).toMatchObject({ code: 'invalid_request' });
    }
    expect([...(await listKeys(of)).keys()]).toEqual([of.keyId]);
  });
});

/** An error body and nothing else: no key, record or list of another company's. */
const ERROR_FIELDS = ['code', 'error', 'message', 'request_id'];

/** Every route of an integration's keys, aimed at these ids. */
const routes = (integrationId: string, keyId: string) => [
  { method: 'GET' as const, url: keysOf(integrationId), change: false },
  { method: 'POST' as const, url: keysOf(integrationId), change: true, payload: { name: 'x' } },
  { method: 'POST' as const, url: `${keysOf(integrationId)}/rotate`, change: true, payload: { grace_seconds: 0 } },
  { method: 'POST' as const, url: `${keysOf(integrationId)}/${keyId}/revoke`, change: true },
  { method: 'GET' as const, url: `${keysOf(integrationId)}/${keyId}/callers`, change: false },
];

describe('errors', () => {
  test.each([
    ['a name over 200 characters', '', { name: 'x'.repeat(201) }],
    ['an expiry that is not a time', '', { expires_at: 'tomorrow' }],
    ['an expiry in the past', '', { expires_at: '2020-01-01T00:00:00Z' }],
    ['a grace period over 7 days', '/rotate', { grace_seconds: 604_801 }],
    ['a negative grace period', '/rotate', { grace_seconds: -1 }],
    ['a grace period that is not a number', '/rotate', { grace_seconds: 'a day' }],
  ])('POST with %s is a 400 and changes nothing', async (_what, path, payload) => {
    const of = await sibling();
    const response = await api('POST', `${keysOf(of.integrationId)}${path}`, keyHeaders, payload);
    expect(response.statusCode, response.body).toBe(400);
    expect(response.json()).toMatchObject({ error: 'Invalid request', code: 'invalid_request' });
    expect([...(await listKeys(of)).values()].map((k) => k.status)).toEqual(['active']);
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
  });

  test('malformed ids, a bad cursor and a bad limit are 400s', async () => {
    for (const route of routes('int_bad', tenant.keyId)) {
      expect((await api(route.method, route.url, keyHeaders, route.payload)).statusCode).toBe(400);
    }
    for (const route of routes(tenant.integrationId, 'key_bad').slice(3)) {
      expect((await api(route.method, route.url, keyHeaders, route.payload)).statusCode).toBe(400);
    }
    expect((await api('GET', `${keysOf(tenant.integrationId)}?cursor=%%%`, keyHeaders)).statusCode).toBe(400);
    expect((await api('GET', `${keysOf(tenant.integrationId)}/${tenant.keyId}/callers?limit=0`, keyHeaders)).statusCode).toBe(400);
  });

  test('an unknown integration, an unknown key, a sibling’s key and a management key are 404s', async () => {
    for (const route of routes(newId('int'), tenant.keyId)) {
      const response = await api(route.method, route.url, keyHeaders, route.payload);
      expect(response.statusCode, `${route.method} ${route.url}`).toBe(404);
      expect(response.json()).toMatchObject({ error: 'Not found', code: 'not_found' });
    }
    const of = await sibling();
    const managementKeyId = (await t.management.createManagementKey(tenant.companyId, ['logs:read'])).id;
    for (const keyId of [newId('key'), of.keyId, managementKeyId]) {
      for (const route of routes(tenant.integrationId, keyId).slice(3)) {
        expect((await api(route.method, route.url, keyHeaders)).statusCode, `${route.url}`).toBe(404);
      }
    }
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
  });

  test('a deleted integration’s keys are 404s', async () => {
    const of = await sibling();
    await t.management.deleteIntegration(tenant.companyId, of.integrationId);
    for (const route of routes(of.integrationId, of.keyId)) {
      expect((await api(route.method, route.url, keyHeaders, route.payload)).statusCode, `${route.method} ${route.url}`).toBe(404);
    }
  });

  test('an integration key may do nothing here; a viewer and a logs:read key may only read', async () => {
    const of = await sibling();
    const integrationKey = { 'x-api-key': of.apiKey };
    for (const route of routes(of.integrationId, of.keyId)) {
      const refused = [integrationKey, ...(route.change ? [readOnlyKey, viewer.change] : [])];
      for (const headers of refused) {
        const response = await api(route.method, route.url, headers, route.payload);
        expect(response.statusCode, `${route.method} ${route.url}`).toBe(403);
        expect(response.json().error).toBe('Insufficient permissions');
      }
      if (!route.change) {
        for (const headers of [readOnlyKey, viewer.read]) expect((await api(route.method, route.url, headers)).statusCode).toBe(200);
      }
    }
    expect([...(await listKeys(of)).values()].map((k) => k.status)).toEqual(['active']);
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
    expect(await t.store.listAuditLog(tenant.companyId, { limit: 10, targetId: of.integrationId })).toHaveLength(1);
  });

  test('a session change without its CSRF token is refused and revokes nothing', async () => {
    const of = await sibling();
    const response = await api('POST', `${keysOf(of.integrationId)}/${of.keyId}/revoke`, owner.read);
    expect(response.statusCode).toBe(403);
    expect(response.json().code).toBe('csrf_failed');
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
  });
});

describe('security: another company', () => {
  test('its key and session get 404 on every route with this company’s ids, and change nothing', async () => {
    const of = await sibling();
    for (const headers of [other.key, other.owner.change]) {
      for (const route of routes(of.integrationId, of.keyId)) {
        const response = await api(route.method, route.url, headers, route.payload);
        expect(response.statusCode, `${route.method} ${route.url}`).toBe(404);
        expect(Object.keys(response.json()).sort()).toEqual(ERROR_FIELDS);
      }
    }
    expect((await send(of, of.apiKey)).statusCode).toBe(202);
    expect([...(await listKeys(of)).keys()]).toEqual([of.keyId]);
    const records = await t.store.listAuditLog(tenant.companyId, { limit: 10, targetId: of.integrationId });
    expect(records.map((r) => r.action)).toEqual(['integration.create']);
  });

  test('its integration key is a 403 here; its ids are 404s for this company’s key and session', async () => {
    for (const route of routes(tenant.integrationId, tenant.keyId)) {
      expect((await api(route.method, route.url, { 'x-api-key': other.tenant.apiKey }, route.payload)).statusCode).toBe(403);
    }
    const theirs = other.tenant;
    for (const headers of [keyHeaders, owner.change]) {
      for (const route of [...routes(theirs.integrationId, theirs.keyId), ...routes(tenant.integrationId, theirs.keyId).slice(3)]) {
        const response = await api(route.method, route.url, headers, route.payload);
        expect(response.statusCode, `${route.method} ${route.url}`).toBe(404);
        expect(Object.keys(response.json()).sort()).toEqual(ERROR_FIELDS);
      }
    }
    expect((await send(theirs, theirs.apiKey)).statusCode).toBe(202);
  });
});
