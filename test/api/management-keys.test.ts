import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { hashApiKey } from '../../src/domain/api-key.js';
import { newId } from '../../src/domain/ids.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member, type SignedIn } from '../support/api.js';

/**
 * /api/v1/management-keys: owners only (members:manage). Happy paths, each error, and
 * every route with another company's key, session and ids; a revoked management key must
 * really stop working, and every change must leave an audit record without the key.
 */
type Headers = Record<string, string>;
interface ManagementKeyBody {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  status: string;
  revoked_at: string | null;
}

let t: TestApp;
let tenant: TestTenant;
let owner: SignedIn;
let admin: SignedIn;
let viewer: SignedIn;
let fullKey: Headers;
let other: { tenant: TestTenant; owner: SignedIn; key: { id: string; apiKey: string } };

beforeAll(async () => {
  t = await buildTestApp();
  tenant = await t.newTenant();
  owner = await member(t, tenant.companyId, 'owner');
  admin = await member(t, tenant.companyId, 'admin');
  viewer = await member(t, tenant.companyId, 'viewer');
  fullKey = await managementKey(t, tenant.companyId, ['integrations:manage', 'logs:read']);
  const theirs = await t.newTenant();
  other = {
    tenant: theirs,
    owner: await member(t, theirs.companyId, 'owner'),
    key: await t.management.createManagementKey(theirs.companyId, ['integrations:manage']),
  };
});
afterAll(() => t.close());

const api = (method: 'GET' | 'POST', url: string, headers: Headers, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });

async function create(payload: object = { scopes: ['logs:read'] }) {
  const response = await api('POST', '/management-keys', owner.change, payload);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ key: ManagementKeyBody; api_key: string }>();
}

async function listed(headers: Headers = owner.read): Promise<ManagementKeyBody[]> {
  const response = await api('GET', '/management-keys?limit=200', headers);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<{ data: ManagementKeyBody[] }>().data;
}

/** Every management-key route, aimed at this key id. */
const routes = (keyId: string) => [
  { method: 'GET' as const, url: '/management-keys' },
  { method: 'POST' as const, url: '/management-keys', payload: { scopes: ['logs:read'] } },
  { method: 'POST' as const, url: `/management-keys/${keyId}/revoke` },
];

describe('happy paths', () => {
  test('create returns the key once; it can do what its scopes allow, and nothing else', async () => {
    const created = await create({ name: 'CI reports', scopes: ['logs:read', 'logs:read'] });
    expect(created.api_key).toMatch(/^whk_dev_/);
    expect(created.api_key.startsWith(created.key.prefix)).toBe(true);
    expect(created.key).toMatchObject({ name: 'CI reports', scopes: ['logs:read'], status: 'active', revoked_at: null });
    const headers = { 'x-api-key': created.api_key };
    expect((await api('GET', '/integrations', headers)).statusCode).toBe(200);
    expect((await api('POST', '/integrations', headers, { name: 'nope' })).statusCode).toBe(403);
    const records = await t.store.listAuditLog(tenant.companyId, { limit: 10, action: 'management_key.create', targetId: created.key.id });
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ actor: { type: 'user' }, after: { name: 'CI reports', scopes: ['logs:read'] } });
    expect(JSON.stringify(records)).not.toContain(created.api_key);
    expect(JSON.stringify(records)).not.toContain(hashApiKey(created.api_key));
  });

  test('the list shows management keys only, newest first, never the keys', async () => {
    const first = await create({ name: 'one', scopes: ['integrations:manage'] });
    const second = await create({ name: 'two', scopes: ['logs:read'] });
    const response = await api('GET', '/management-keys?limit=200', owner.read);
    expect(response.body).not.toContain(first.api_key);
    expect(response.body).not.toContain(second.api_key);
    const ids = (await listed()).map((k) => k.id);
    expect(ids.indexOf(second.key.id)).toBeLessThan(ids.indexOf(first.key.id));
    expect(ids).not.toContain(tenant.keyId);
    const page = await api('GET', '/management-keys?limit=1', owner.read);
    const body = page.json<{ data: ManagementKeyBody[]; next_cursor: string }>();
    expect(body.data).toHaveLength(1);
    const next = await api('GET', `/management-keys?limit=1&cursor=${body.next_cursor}`, owner.read);
    expect(next.json<{ data: ManagementKeyBody[] }>().data[0]!.id).not.toBe(body.data[0]!.id);
  });

  test('revoke: the key gets 401 at once; revoking again changes nothing', async () => {
    const created = await create({ scopes: ['integrations:manage'] });
    const headers = { 'x-api-key': created.api_key };
    expect((await api('GET', '/integrations', headers)).statusCode).toBe(200);
    const response = await api('POST', `/management-keys/${created.key.id}/revoke`, owner.change);
    expect(response.statusCode, response.body).toBe(200);
    const revoked = response.json<ManagementKeyBody>();
    expect(revoked).toMatchObject({ id: created.key.id, status: 'revoked' });
    const refused = await api('GET', '/integrations', headers);
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toMatchObject({ error: 'Invalid API key' });
    const again = await api('POST', `/management-keys/${created.key.id}/revoke`, owner.change);
    expect(again.json<ManagementKeyBody>().revoked_at).toBe(revoked.revoked_at);
    expect((await listed()).find((k) => k.id === created.key.id)?.status).toBe('revoked');
    const records = await t.store.listAuditLog(tenant.companyId, { limit: 10, action: 'management_key.revoke', targetId: created.key.id });
    expect(records).toHaveLength(1);
    expect(JSON.stringify(records)).not.toContain(created.api_key);
  });
});

describe('errors', () => {
  test.each([
    ['no scopes', {}],
    ['an empty list of scopes', { scopes: [] }],
    ['an integration key’s scope', { scopes: ['webhooks:write'] }],
    ['a scope nobody has', { scopes: ['members:manage'] }],
    ['a name over 200 characters', { name: 'x'.repeat(201), scopes: ['logs:read'] }],
  ])('create with %s is a 400 and creates nothing', async (_what, payload) => {
    const before = (await listed()).length;
    const response = await api('POST', '/management-keys', owner.change, payload);
    expect(response.statusCode, response.body).toBe(400);
    expect(response.json()).toMatchObject({ error: 'Invalid request', code: 'invalid_request' });
    expect(await listed()).toHaveLength(before);
  });

  test('a malformed id is a 400; an unknown id and an integration key’s id are 404s', async () => {
    expect((await api('POST', '/management-keys/key_bad/revoke', owner.change)).statusCode).toBe(400);
    expect((await api('GET', '/management-keys?cursor=%%%', owner.read)).statusCode).toBe(400);
    for (const keyId of [newId('key'), tenant.keyId]) {
      const response = await api('POST', `/management-keys/${keyId}/revoke`, owner.change);
      expect(response.statusCode).toBe(404);
      expect(response.json()).toMatchObject({ error: 'Not found', code: 'not_found' });
    }
    expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey })).statusCode).toBe(202);
  });

  test('only owners: an admin, a viewer, any management key and an integration key get 403', async () => {
    const target = await create();
    const refused = [admin.change, viewer.change, fullKey, { 'x-api-key': tenant.apiKey }];
    for (const headers of refused) {
      for (const route of routes(target.key.id)) {
        const response = await api(route.method, route.url, headers, route.payload);
        expect(response.statusCode, `${route.method} ${route.url}`).toBe(403);
        expect(response.json().error).toBe('Insufficient permissions');
      }
    }
    expect((await api('GET', '/integrations', { 'x-api-key': target.api_key })).statusCode).toBe(200);
    const records = await t.store.listAuditLog(tenant.companyId, { limit: 10, targetId: target.key.id });
    expect(records.map((r) => r.action)).toEqual(['management_key.create']);
  });
});

describe('security: another company', () => {
  test('its owner sees none of these keys and gets 404 revoking one; the key keeps working', async () => {
    const mine = await create({ scopes: ['integrations:manage'] });
    const theirList = await api('GET', '/management-keys?limit=200', other.owner.read);
    expect(theirList.statusCode).toBe(200);
    expect(theirList.body).not.toContain(mine.key.id);
    expect(theirList.body).toContain(other.key.id);
    const response = await api('POST', `/management-keys/${mine.key.id}/revoke`, other.owner.change);
    expect(response.statusCode).toBe(404);
    expect((await api('GET', '/integrations', { 'x-api-key': mine.api_key })).statusCode).toBe(200);
  });

  test('its management key and integration key get 403; its key ids are 404s here', async () => {
    const mine = await create();
    for (const apiKey of [other.key.apiKey, other.tenant.apiKey]) {
      for (const route of routes(mine.key.id)) {
        expect((await api(route.method, route.url, { 'x-api-key': apiKey }, route.payload)).statusCode).toBe(403);
      }
    }
    expect((await api('GET', '/integrations', { 'x-api-key': mine.api_key })).statusCode).toBe(200);
    expect((await listed()).map((k) => k.id)).not.toContain(other.key.id);
    expect((await api('POST', `/management-keys/${other.key.id}/revoke`, owner.change)).statusCode).toBe(404);
    expect((await api('GET', '/integrations', { 'x-api-key': other.key.apiKey })).statusCode).toBe(200);
  });
});


describe('last use', () => {
  test("a management key's calls to this API show as its last use (time and IP)", async () => {
    const created = await create({ scopes: ['logs:read'] });
    expect((await listed()).find((k) => k.id === created.key.id)).toMatchObject({ last_used_at: null, last_used_ip: null });
    const call = await t.app.inject({
      method: 'GET',
      url: '/api/v1/requests',
      headers: { 'x-api-key': created.api_key },
      remoteAddress: '198.51.100.23',
    });
    expect(call.statusCode).toBe(200);
    // Written behind, once a second.
    const used = await waitFor(async () => {
      const key = (await listed()).find((k) => k.id === created.key.id) as ManagementKeyBody & { last_used_ip: string | null };
      return key.last_used_ip === null ? undefined : key;
    }, 'the last use to be written');
    expect(used).toMatchObject({ last_used_ip: '198.51.100.23' });
  });
});
