import { createHash } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { CLI_LOGIN_LIFETIME_MS, CLI_LOGINS_PER_ADDRESS, MAX_PENDING_CLI_LOGINS } from '../../src/api/cli-logins.js';
import { hashApiKey, issueApiKey } from '../../src/domain/api-key.js';
import { newUserCode } from '../../src/domain/cli-login-codes.js';
import { newSequencedId } from '../../src/domain/ids.js';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member, type SignedIn } from '../support/api.js';

/**
 * /api/v1/cli-logins: `intake login`'s device flow through the real API. A terminal asks,
 * polls, a signed-in member approves (or denies) in the panel, the next poll gets a logs:read
 * management key once; the key reads the feed, is listed among the management keys, and
 * stops at its revocation. Expiry and the poll interval are driven by a fake clock (Date),
 * never by waiting.
 */
type Headers = Record<string, string>;
interface Started {
  device_code: string;
  user_code: string;
  verification_url: string;
  expires_at: string;
  interval: number;
}
interface Issued {
  api_key: string;
  key_id: string;
  company_id: string;
  company_name: string;
  name: string;
}

let t: TestApp;
let tenant: TestTenant;
let owner: SignedIn & { userId: string };
let viewer: SignedIn & { userId: string };
let outsider: SignedIn & { userId: string; companyId: string };

beforeAll(async () => {
  t = await buildTestApp();
  tenant = await t.newTenant();
  owner = await member(t, tenant.companyId, 'owner');
  viewer = await member(t, tenant.companyId, 'viewer');
  const theirs = await t.newTenant();
  outsider = { ...(await member(t, theirs.companyId, 'owner')), companyId: theirs.companyId };
});
afterEach(() => vi.useRealTimers());
afterAll(() => t.close());

/** Each terminal from an address of its own, so the per-address limit is met only where a test means it. */
let addresses = 0;
const nextAddress = () => `10.91.${(++addresses >> 8) & 255}.${addresses & 255}`;

const api = (method: 'GET' | 'POST' | 'DELETE', url: string, headers: Headers = {}, payload?: object, remoteAddress = '127.0.0.1') =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, remoteAddress, ...(payload && { payload }) });

async function start(name = 'intake login: laptop', remoteAddress = nextAddress()): Promise<Started> {
  const response = await api('POST', '/cli-logins', {}, { name }, remoteAddress);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<Started>();
}

const poll = (login: Started) => api('POST', '/cli-logins/token', {}, { device_code: login.device_code }, nextAddress());
const approve = (login: Started, as: SignedIn, companyId = tenant.companyId) =>
  api('POST', `/cli-logins/${login.user_code}/approve`, as.change, { company_id: companyId });

/** The clock the routes read, moved by hand. */
function fakeClock() {
  vi.useFakeTimers({ toFake: ['Date'] });
  return { advance: (ms: number) => vi.setSystemTime(Date.now() + ms) };
}

function expectError(response: { statusCode: number; json(): unknown; body: string }, status: number, code: string) {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.json()).toMatchObject({ code, error: expect.any(String), message: expect.any(String) });
}

describe('the whole flow', () => {
  test('create, pending, slow_down, approve, the key once; it reads the feed, is listed, and revoking it ends its access', async () => {
    const clock = fakeClock();
    const started = await start('intake login: build-box', '10.90.0.7');
    expect(started.device_code.length).toBeGreaterThanOrEqual(43);
    expect(started.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(started.verification_url).toBe(`${t.config.baseUrl}/admin/cli-login?code=${started.user_code}`);
    expect(Date.parse(started.expires_at) - Date.now()).toBe(CLI_LOGIN_LIFETIME_MS);
    expect(started.interval).toBe(2);
    // Only the hash of the device code is kept.
    const stored = await t.store.findCliLoginByUserCode(started.user_code.replace('-', ''), Date.now());
    expect(stored?.deviceCodeHash).toBe(createHash('sha256').update(started.device_code).digest('hex'));
    expect(JSON.stringify(stored)).not.toContain(started.device_code);

    expectError(await poll(started), 400, 'authorization_pending');
    expectError(await poll(started), 400, 'slow_down');
    clock.advance(2000);
    expectError(await poll(started), 400, 'authorization_pending');

    const shown = await api('GET', `/cli-logins/${started.user_code.toLowerCase().replace('-', '')}`, owner.read);
    expect(shown.statusCode, shown.body).toBe(200);
    expect(shown.json()).toEqual({
      user_code: started.user_code,
      name: 'intake login: build-box',
      requested_ip: '10.90.0.7',
      created_at: new Date(Date.parse(started.expires_at) - CLI_LOGIN_LIFETIME_MS).toISOString(),
      expires_at: started.expires_at,
      state: 'pending',
    });

    const approved = await approve(started, owner);
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json()).toMatchObject({ state: 'approved' });
    expectError(await approve(started, owner), 409, 'conflict');

    clock.advance(2000);
    const issued = await poll(started);
    expect(issued.statusCode, issued.body).toBe(200);
    const key = issued.json<Issued>();
    expect(key).toEqual({
      api_key: expect.stringMatching(/^whk_dev_/),
      key_id: expect.stringMatching(/^key_/),
      company_id: tenant.companyId,
      company_name: 'Test company',
      name: 'intake login: build-box',
    });
    expect((await t.store.findCliLoginByUserCode(started.user_code.replace('-', ''), Date.now()))?.state).toBe('issued');
    clock.advance(2000);
    expectError(await poll(started), 400, 'expired_token');

    // What it may do: read logs, nothing else.
    const headers = { 'x-api-key': key.api_key };
    await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
    // wait: on PostgreSQL a commit is in the feed once every older transaction of the database has ended.
    const feed = await api('GET', '/webhooks/feed?wait=5', headers);
    expect(feed.statusCode, feed.body).toBe(200);
    expect(feed.json<{ data: unknown[] }>().data.length).toBeGreaterThan(0);
    expect((await api('POST', '/integrations', headers, { name: 'nope' })).statusCode).toBe(403);

    // Listed among the company's management keys, as made by the person who approved.
    const listed = await api('GET', '/management-keys?limit=200', owner.read);
    expect(listed.body).not.toContain(key.api_key);
    expect(listed.json<{ data: Array<{ id: string }> }>().data.find((k) => k.id === key.key_id)).toMatchObject({
      name: 'intake login: build-box',
      scopes: ['logs:read'],
      status: 'active',
    });
    const records = await t.store.listAuditLog(tenant.companyId, { limit: 10, action: 'management_key.create', targetId: key.key_id });
    expect(records).toHaveLength(1);
    expect(records[0]!.actor).toEqual({ type: 'user', id: owner.userId, ip: '127.0.0.1' });
    expect(JSON.stringify(records)).not.toContain(key.api_key);
    expect(JSON.stringify(records)).not.toContain(hashApiKey(key.api_key));

    const revoked = await api('POST', `/management-keys/${key.key_id}/revoke`, owner.change);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expectError(await api('GET', '/webhooks/feed', headers), 401, 'invalid_api_key');
  });

  test('deny: the terminal is told, nothing is issued, and the decision stands', async () => {
    const started = await start();
    const denied = await api('POST', `/cli-logins/${started.user_code}/deny`, viewer.change);
    expect(denied.statusCode, denied.body).toBe(200);
    expect(denied.json()).toMatchObject({ state: 'denied' });
    expectError(await poll(started), 403, 'access_denied');
    expectError(await approve(started, owner), 409, 'conflict');
    expect((await t.store.listKeys(tenant.companyId, null, { limit: 200 })).filter((k) => k.name === 'intake login: laptop')).toEqual([]);
  });

  test('intake logout: the key revokes itself (DELETE /cli-logins/current); a session cannot use that route', async () => {
    const started = await start('intake login: to revoke');
    expect((await approve(started, viewer)).statusCode).toBe(200);
    const key = (await poll(started)).json<Issued>();
    const headers = { 'x-api-key': key.api_key };
    expect((await api('GET', '/webhooks/feed', headers)).statusCode).toBe(200);
    expectError(await api('DELETE', '/cli-logins/current', owner.change), 400, 'invalid_request');
    expectError(await api('DELETE', '/cli-logins/current'), 401, 'missing_api_key');
    expect((await api('DELETE', '/cli-logins/current', headers)).statusCode).toBe(204);
    expectError(await api('GET', '/webhooks/feed', headers), 401, 'invalid_api_key');
    const records = await t.store.listAuditLog(tenant.companyId, { limit: 10, action: 'management_key.revoke', targetId: key.key_id });
    expect(records[0]?.actor).toMatchObject({ type: 'key', id: key.key_id });
  });
});

describe('who may approve', () => {
  test('a viewer may (the key reads nothing a viewer cannot); a user who is not a member of the company may not', async () => {
    const started = await start();
    // Another company's owner, naming this company: not found, and the login still waits.
    expectError(await approve(started, outsider), 404, 'not_found');
    expect((await api('GET', `/cli-logins/${started.user_code}`, owner.read)).json()).toMatchObject({ state: 'pending' });
    expect((await approve(started, viewer)).statusCode).toBe(200);
    expect((await t.store.findCliLoginByUserCode(started.user_code.replace('-', ''), Date.now()))?.companyId).toBe(tenant.companyId);
  });

  test('the panel routes take a session with its CSRF token, never a key or nobody', async () => {
    const started = await start();
    const key = await managementKey(t, tenant.companyId);
    expectError(await api('GET', `/cli-logins/${started.user_code}`, key), 403, 'insufficient_permissions');
    expectError(await api('POST', `/cli-logins/${started.user_code}/approve`, key, { company_id: tenant.companyId }), 403, 'insufficient_permissions');
    expectError(await api('POST', `/cli-logins/${started.user_code}/deny`, {}, {}), 401, 'missing_api_key');
    expectError(await api('POST', `/cli-logins/${started.user_code}/approve`, owner.read, { company_id: tenant.companyId }), 403, 'csrf_failed');
    expectError(await api('GET', '/cli-logins/BCDF-GHJK', owner.read), 404, 'not_found');
    expect((await api('GET', `/cli-logins/${started.user_code}`, owner.read)).json()).toMatchObject({ state: 'pending' });
  });

  test('an approval is acted on only while its author is still a member who reads logs', async () => {
    const leaving = await member(t, tenant.companyId, 'viewer');
    const started = await start();
    expect((await approve(started, leaving)).statusCode).toBe(200);
    await t.management.removeMember(tenant.companyId, leaving.userId);
    expectError(await poll(started), 403, 'access_denied');
  });
});

describe('expiry', () => {
  test('after 10 minutes a waiting sign-in is gone: the poll gets expired_token, the panel not_found', async () => {
    const clock = fakeClock();
    const started = await start();
    clock.advance(CLI_LOGIN_LIFETIME_MS - 1);
    expect((await api('GET', `/cli-logins/${started.user_code}`, owner.read)).statusCode).toBe(200);
    clock.advance(1);
    expectError(await poll(started), 400, 'expired_token');
    expectError(await api('GET', `/cli-logins/${started.user_code}`, owner.read), 404, 'not_found');
    expectError(await approve(started, owner), 404, 'not_found');
  });

  test('an approval not collected within the 10 minutes issues nothing', async () => {
    const clock = fakeClock();
    const started = await start('intake login: never collected');
    expect((await approve(started, owner)).statusCode).toBe(200);
    clock.advance(CLI_LOGIN_LIFETIME_MS);
    expectError(await poll(started), 400, 'expired_token');
    expect((await t.store.listKeys(tenant.companyId, null, { limit: 200 })).filter((k) => k.name === 'intake login: never collected')).toEqual([]);
  });

  test('an unknown device code is expired_token too', async () => {
    expectError(await api('POST', '/cli-logins/token', {}, { device_code: 'made-up' }, nextAddress()), 400, 'expired_token');
  });
});

describe('the key is issued once', () => {
  test('of two issues of one approved login at once, one writes the key and the other nothing', async () => {
    const started = await start();
    expect((await approve(started, owner)).statusCode).toBe(200);
    const login = (await t.store.findCliLoginByUserCode(started.user_code.replace('-', ''), Date.now()))!;
    const attempt = () => {
      const key = issueApiKey('development');
      const id = newSequencedId('key', Date.now());
      const audit = { actor: { type: 'user' as const, id: owner.userId, ip: null }, action: 'management_key.create', targetType: 'key', targetId: id, at: Date.now() };
      const row = { id, integrationId: null, scopes: ['logs:read' as const], prefix: key.prefix, hash: key.hash, createdAt: Date.now(), expiresAt: null, name: 'race' };
      return t.store.issueCliLoginKey(tenant.companyId, login.deviceCodeHash, row, audit, Date.now());
    };
    const outcomes = await Promise.all([attempt(), attempt()]);
    expect(outcomes.sort()).toEqual([false, true]);
    expect((await t.store.listKeys(tenant.companyId, null, { limit: 200 })).filter((k) => k.name === 'race')).toHaveLength(1);
  });
});

describe('an anonymous flood is bounded', () => {
  test(`${CLI_LOGINS_PER_ADDRESS} sign-ins per address, then 429 with Retry-After`, async () => {
    const address = '10.90.1.1';
    for (let i = 0; i < CLI_LOGINS_PER_ADDRESS; i++) await start(`flood ${i}`, address);
    const refused = await api('POST', '/cli-logins', {}, { name: 'one more' }, address);
    expectError(refused, 429, 'rate_limited');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // Another address is not held back by this one.
    await start('elsewhere', '10.90.1.2');
  });

  test(`at most ${MAX_PENDING_CLI_LOGINS} waiting at once, from any number of addresses; expired ones make room`, async () => {
    const clock = fakeClock();
    const now = Date.now();
    // Filled through the store, as a flood from many addresses would fill it.
    let full = false;
    for (let i = 0; i <= MAX_PENDING_CLI_LOGINS && !full; i++) {
      const userCode = newUserCode();
      const created = await t.store.createCliLogin(
        { deviceCodeHash: `flood-${userCode}`, userCode, name: 'flood', requestedIp: '10.92.0.1', createdAt: now, expiresAt: now + CLI_LOGIN_LIFETIME_MS },
        MAX_PENDING_CLI_LOGINS,
      );
      full = created.outcome === 'full';
    }
    expect(full).toBe(true);
    const refused = await api('POST', '/cli-logins', {}, { name: 'one too many' }, nextAddress());
    expectError(refused, 429, 'rate_limited');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(CLI_LOGIN_LIFETIME_MS / 1000);
    clock.advance(CLI_LOGIN_LIFETIME_MS);
    await start('after the flood');
  }, 120_000);
});
