import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, waitFor, type TestApp } from '../helpers.js';
import { managementKey, member, type SignedIn } from '../support/api.js';

/**
 * /api/v1/integrations: happy paths, each error, and every route with another company's
 * key, session and ids (STYLE: every route has a security test).
 */
let t: TestApp;
let companyId: string;
let keyHeaders: Record<string, string>;
let owner: SignedIn;
let viewer: SignedIn;
let other: { companyId: string; key: Record<string, string>; owner: SignedIn; integrationId: string };

beforeAll(async () => {
  t = await buildTestApp();
  companyId = (await t.management.createCompany('Acme')).id;
  keyHeaders = await managementKey(t, companyId);
  owner = await member(t, companyId, 'owner');
  viewer = await member(t, companyId, 'viewer');
  const otherCompany = (await t.management.createCompany('Other')).id;
  other = {
    companyId: otherCompany,
    key: await managementKey(t, otherCompany),
    owner: await member(t, otherCompany, 'owner'),
    integrationId: (await t.management.createIntegration(otherCompany, { name: 'Theirs' })).integration.id,
  };
});
afterAll(() => t.close());

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, headers: Record<string, string>, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });

async function create(name = 'Stripe', headers = keyHeaders) {
  const response = await api('POST', '/integrations', headers, { name, rate_limit_per_minute: 600 });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ integration: { id: string; integration_key: string }; api_key: string; key_id: string }>();
}

describe('happy paths', () => {
  test('create returns the integration and its key once; the key sends webhooks', async () => {
    const created = await create('Billing');
    expect(created.integration).toMatchObject({ name: 'Billing', enabled: true, rate_limit_per_minute: 600, body_limit_bytes: 1048576 });
    expect(created.api_key).toMatch(/^whk_dev_/);
    expect((await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key })).statusCode).toBe(202);
    const read = await api('GET', `/integrations/${created.integration.id}`, keyHeaders);
    expect(read.statusCode).toBe(200);
    expect(read.body).not.toContain(created.api_key);
  });

  test('list pages newest first by cursor, without gaps or repeats', async () => {
    const fresh = (await t.management.createCompany('Many')).id;
    const headers = await managementKey(t, fresh);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create(`n${i}`, headers)).integration.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await api('GET', `/integrations?limit=2${cursor ? `&cursor=${cursor}` : ''}`, headers);
      expect(page.statusCode).toBe(200);
      const body = page.json<{ data: Array<{ id: string }>; next_cursor: string | null }>();
      seen.push(...body.data.map((i) => i.id));
      cursor = body.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
  });

  test('update changes only what is sent; disabling refuses webhooks at once', async () => {
    const created = await create();
    const patched = await api('PATCH', `/integrations/${created.integration.id}`, owner.change, { description: 'Payments', enabled: false });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ name: 'Stripe', description: 'Payments', enabled: false, rate_limit_per_minute: 600 });
    const refused = await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toBe('Integration disabled');
    const cleared = await api('PATCH', `/integrations/${created.integration.id}`, keyHeaders, { rate_limit_per_minute: null, enabled: true });
    expect(cleared.json()).toMatchObject({ rate_limit_per_minute: null, enabled: true });
  });

  test('a lower body limit applies to the next webhook', async () => {
    const created = await create();
    await api('PATCH', `/integrations/${created.integration.id}`, keyHeaders, { body_limit_bytes: 64 });
    const big = JSON.stringify({ event: 'e', data: { pad: 'x'.repeat(100) } });
    expect((await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key, body: big })).statusCode).toBe(413);
  });

  test('delete makes the address and its key stop working, and the integration a 404', async () => {
    const created = await create();
    expect((await api('DELETE', `/integrations/${created.integration.id}`, owner.change)).statusCode).toBe(204);
    expect((await api('GET', `/integrations/${created.integration.id}`, keyHeaders)).statusCode).toBe(404);
    expect((await api('DELETE', `/integrations/${created.integration.id}`, keyHeaders)).statusCode).toBe(404);
    expect((await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key })).statusCode).toBe(401);
  });

  test('every change is in the audit log, naming who made it', async () => {
    const created = await create('Audited');
    await api('PATCH', `/integrations/${created.integration.id}`, owner.change, { name: 'Renamed' });
    await api('DELETE', `/integrations/${created.integration.id}`, owner.change);
    const records = await t.store.listAuditLog(companyId, { limit: 50, targetId: created.integration.id });
    expect(records.map((r) => [r.action, r.actor.type])).toEqual([
      ['integration.delete', 'user'],
      ['integration.update', 'user'],
      ['integration.create', 'key'],
    ]);
    expect(records[1]).toMatchObject({ before: { name: 'Audited' }, after: { name: 'Renamed' } });
    // The deletion keeps what was deleted, so the log can still name it.
    expect(records[0]).toMatchObject({ before: { id: created.integration.id, name: 'Renamed' } });
    expect(JSON.stringify(records)).not.toContain(created.api_key);
  });

  test('a PATCH of `enabled` alone is audited as enable or disable; with other fields, as an update', async () => {
    const created = await create('Toggled');
    const path = `/integrations/${created.integration.id}`;
    expect((await api('PATCH', path, owner.change, { enabled: false })).statusCode).toBe(200);
    expect((await api('PATCH', path, keyHeaders, { enabled: true })).statusCode).toBe(200);
    expect((await api('PATCH', path, owner.change, { enabled: false, description: 'Paused for the migration' })).statusCode).toBe(200);
    const records = await t.store.listAuditLog(companyId, { limit: 50, targetId: created.integration.id });
    expect(records.map((r) => [r.action, r.actor.type])).toEqual([
      ['integration.update', 'user'],
      ['integration.enable', 'key'],
      ['integration.disable', 'user'],
      ['integration.create', 'key'],
    ]);
    expect(records[2]).toMatchObject({ before: { enabled: true, name: 'Toggled' }, after: { enabled: false, name: 'Toggled' } });
    expect(records[1]).toMatchObject({ before: { enabled: false }, after: { enabled: true } });
    const filtered = await api('GET', '/audit-log?action=integration.disable', owner.read);
    expect(filtered.json<{ data: Array<{ target: { id: string } }> }>().data.map((r) => r.target.id)).toContain(created.integration.id);
  });
});

describe('errors', () => {
  test.each([
    ['no name', { description: 'x' }],
    ['an empty name', { name: '' }],
    ['a body limit over 16 MiB', { name: 'x', body_limit_bytes: 17 * 1024 * 1024 }],
    ['a rate limit of 0', { name: 'x', rate_limit_per_minute: 0 }],
  ])('create with %s is a 400 naming the problem', async (_name, payload) => {
    const response = await api('POST', '/integrations', keyHeaders, payload);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error: 'Invalid request', code: 'invalid_request' });
  });

  test('an empty update, a malformed id and a bad cursor are 400s; an unknown id a 404', async () => {
    const created = await create();
    expect((await api('PATCH', `/integrations/${created.integration.id}`, keyHeaders, {})).statusCode).toBe(400);
    expect((await api('GET', '/integrations/not-an-id', keyHeaders)).statusCode).toBe(400);
    expect((await api('GET', '/integrations?cursor=%%%', keyHeaders)).statusCode).toBe(400);
    expect((await api('GET', '/integrations/int_0000000000000000000000', keyHeaders)).statusCode).toBe(404);
  });

  test('without credentials: 401 with the contract body; a revoked management key: 401', async () => {
    const none = await api('GET', '/integrations', {});
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ error: 'Missing API key', message: 'API key is required in the X-API-Key header.' });
    const key = await t.management.createManagementKey(companyId, ['integrations:manage']);
    await t.management.revokeKey(companyId, key.id);
    const revoked = await api('GET', '/integrations', { 'x-api-key': key.apiKey });
    expect(revoked.statusCode).toBe(401);
    expect(revoked.json().error).toBe('Invalid API key');
  });

  test('an integration key, a key without the scope and a viewer cannot change anything', async () => {
    const created = await create();
    const integrationKey = { 'x-api-key': created.api_key };
    const readOnlyKey = await managementKey(t, companyId, ['logs:read']);
    for (const headers of [integrationKey, readOnlyKey, viewer.change]) {
      const response = await api('POST', '/integrations', headers, { name: 'nope' });
      expect(response.statusCode).toBe(403);
      expect(response.json().error).toBe('Insufficient permissions');
    }
    expect((await api('GET', '/integrations', integrationKey)).statusCode).toBe(403);
    expect((await api('GET', '/integrations', readOnlyKey)).statusCode).toBe(200);
    expect((await api('GET', '/integrations', viewer.read)).statusCode).toBe(200);
    expect((await api('PATCH', `/integrations/${created.integration.id}`, viewer.change, { enabled: false })).statusCode).toBe(403);
    expect((await api('DELETE', `/integrations/${created.integration.id}`, viewer.change)).statusCode).toBe(403);
  });

  test('a session change without its CSRF token is refused and changes nothing', async () => {
    const created = await create();
    const response = await api('PATCH', `/integrations/${created.integration.id}`, owner.read, { enabled: false });
    expect(response.statusCode).toBe(403);
    expect(response.json().code).toBe('csrf_failed');
    const wrong = await api('PATCH', `/integrations/${created.integration.id}`, { ...owner.read, 'x-csrf-token': 'x'.repeat(43) }, { enabled: false });
    expect(wrong.statusCode).toBe(403);
    expect((await api('GET', `/integrations/${created.integration.id}`, keyHeaders)).json().enabled).toBe(true);
  });
});

describe('security: another company', () => {
  test("its key and session see none of this company's integrations, and its ids are 404s here", async () => {
    const mine = await create('Mine');
    for (const headers of [other.key, other.owner.read]) {
      const list = await api('GET', '/integrations', headers);
      expect(list.statusCode).toBe(200);
      expect(list.body).not.toContain(mine.integration.id);
      expect((await api('GET', `/integrations/${mine.integration.id}`, headers)).statusCode).toBe(404);
    }
    for (const headers of [other.key, other.owner.change]) {
      expect((await api('PATCH', `/integrations/${mine.integration.id}`, headers, { enabled: false })).statusCode).toBe(404);
      expect((await api('DELETE', `/integrations/${mine.integration.id}`, headers)).statusCode).toBe(404);
    }
    for (const headers of [keyHeaders, owner.change]) {
      expect((await api('GET', `/integrations/${other.integrationId}`, headers)).statusCode).toBe(404);
      expect((await api('PATCH', `/integrations/${other.integrationId}`, headers, { name: 'x' })).statusCode).toBe(404);
    }
    const still = await api('GET', `/integrations/${mine.integration.id}`, keyHeaders);
    expect(still.json()).toMatchObject({ name: 'Mine', enabled: true });
  });

  test('a session cannot pick a company it does not belong to', async () => {
    const response = await api('GET', '/integrations', { ...owner.read, 'x-company-id': other.companyId });
    expect(response.statusCode).toBe(404);
    const mine = await api('GET', '/integrations', { ...owner.read, 'x-company-id': companyId });
    expect(mine.statusCode).toBe(200);
  });

  test('a change through the API holds on this node before the answer returns', async () => {
    const created = await create();
    await waitFor(async () => ((await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key })).statusCode === 202 ? true : undefined), 'a first 202');
    await api('PATCH', `/integrations/${created.integration.id}`, keyHeaders, { enabled: false });
    expect((await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key })).statusCode).toBe(403);
  });
});

test('each integration says when it last took a webhook, in the list and alone', async () => {
  const quiet = await create('Quiet');
  const busy = await create('Busy');
  expect((await api('GET', `/integrations/${busy.integration.id}`, keyHeaders)).json().last_webhook_at).toBeNull();
  const first = await sendWebhook(t.app, busy.integration.integration_key, { apiKey: busy.api_key });
  const second = await sendWebhook(t.app, busy.integration.integration_key, { apiKey: busy.api_key });
  expect([first.statusCode, second.statusCode]).toEqual([202, 202]);
  const newest = second.json<{ received_at: string }>().received_at;

  const list = (await api('GET', '/integrations?limit=200', keyHeaders)).json<{ data: Array<{ id: string; last_webhook_at: string | null }> }>();
  expect(list.data.find((i) => i.id === busy.integration.id)?.last_webhook_at).toBe(newest);
  expect(list.data.find((i) => i.id === quiet.integration.id)?.last_webhook_at).toBeNull();
  expect((await api('GET', `/integrations/${busy.integration.id}`, keyHeaders)).json().last_webhook_at).toBe(newest);
});

test('an integration can be created disabled: it refuses webhooks until enabled', async () => {
  const response = await api('POST', '/integrations', keyHeaders, { name: 'Not yet', enabled: false });
  expect(response.statusCode).toBe(201);
  const created = response.json<{ integration: { id: string; enabled: boolean; integration_key: string }; api_key: string }>();
  expect(created.integration.enabled).toBe(false);
  expect((await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key })).statusCode).toBe(403);
  expect((await api('PATCH', `/integrations/${created.integration.id}`, keyHeaders, { enabled: true })).statusCode).toBe(200);
  await waitFor(
    async () => ((await sendWebhook(t.app, created.integration.integration_key, { apiKey: created.api_key })).statusCode === 202 ? true : undefined),
    'the enabled integration to accept webhooks',
  );
});

test("retention_days: set, shown, reset by null; longer than the company's is a 400 that changes nothing", async () => {
  type Shown = { id: string; retention_days: number | null };
  const made = await api('POST', '/integrations', keyHeaders, { name: 'Payments', retention_days: 7 });
  expect(made.statusCode, made.body).toBe(201);
  const payments = made.json<{ integration: Shown }>().integration;
  expect(payments.retention_days).toBe(7);
  const path = `/integrations/${payments.id}`;
  expect((await api('GET', path, keyHeaders)).json()).toMatchObject({ retention_days: 7 });
  const list = (await api('GET', '/integrations?limit=200', keyHeaders)).json<{ data: Shown[] }>();
  expect(list.data.find((i) => i.id === payments.id)?.retention_days).toBe(7);
  expect((await create('Follows')).integration).toMatchObject({ retention_days: null });

  // The company keeps 30 days: 31 is refused in words naming it, and nothing changes.
  const longer = await api('PATCH', path, owner.change, { retention_days: 31, name: 'Renamed' });
  expect(longer.statusCode).toBe(400);
  expect(longer.json()).toMatchObject({ code: 'invalid_request', field: 'retention_days', message: expect.stringContaining('30 days') });
  expect((await api('GET', path, keyHeaders)).json()).toMatchObject({ name: 'Payments', retention_days: 7 });
  const refused = await api('POST', '/integrations', keyHeaders, { name: 'Too long', retention_days: 31 });
  expect(refused.statusCode).toBe(400);
  expect(refused.json()).toMatchObject({ code: 'invalid_request', field: 'retention_days' });
  const names = (await api('GET', '/integrations?limit=200', keyHeaders)).json<{ data: Array<{ name: string }> }>().data.map((i) => i.name);
  expect(names).not.toContain('Too long');
  // Out of the API's bounds, or not a whole number: refused before the company is asked.
  for (const retention_days of [0, 3651, 2.5, 'a week']) {
    const bad = await api('PATCH', path, keyHeaders, { retention_days });
    expect(bad.statusCode, JSON.stringify(retention_days)).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_request' });
  }

  expect((await api('PATCH', path, keyHeaders, { retention_days: 30 })).json()).toMatchObject({ retention_days: 30 });
  const reset = await api('PATCH', path, owner.change, { retention_days: null });
  expect(reset.statusCode, reset.body).toBe(200);
  expect(reset.json()).toMatchObject({ retention_days: null });
  expect((await api('GET', path, keyHeaders)).json()).toMatchObject({ retention_days: null });

  const records = await t.store.listAuditLog(companyId, { limit: 50, targetId: payments.id });
  expect(records.map((r) => r.action)).toEqual(['integration.update', 'integration.update', 'integration.create']);
  expect(records[0]).toMatchObject({ actor: { type: 'user' }, before: { retentionDays: 30 }, after: { retentionDays: null } });
  expect(records[2]).toMatchObject({ after: { retentionDays: 7 } });
});

test("a company that shortens its retention below an integration's keeps it shown; the company's holds", async () => {
  const shortening = (await t.management.createCompany('Shortening')).id;
  const headers = await managementKey(t, shortening);
  const boss = await member(t, shortening, 'owner');
  const made = await api('POST', '/integrations', headers, { name: 'Payments', retention_days: 20 });
  const id = made.json<{ integration: { id: string } }>().integration.id;
  expect((await api('PATCH', '/company', boss.change, { retention_days: 10 })).statusCode).toBe(200);
  // What it was set to stays; the purge keeps the shorter (test/retention.test.ts).
  expect((await api('GET', `/integrations/${id}`, headers)).json()).toMatchObject({ retention_days: 20 });
  const again = await api('PATCH', `/integrations/${id}`, headers, { retention_days: 20 });
  expect(again.statusCode).toBe(400);
  expect(again.json().message).toContain('10 days');
});
