import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { AttemptResult, ClaimedDelivery } from '../../src/store/store.js';
import { buildTestApp, sendWebhook, testSecretBox, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey, member } from '../support/api.js';
import { claimDeliveries, finishAttempts } from '../support/deliveries.js';

/**
 * Destinations and their deliveries through /api/v1: settings checked field by field, the
 * signing secret and header values shown once and sealed, the address guard at creation,
 * pause, resume, rotation, replays and sends with the delivery rows they make, stats, and
 * the feed. The delivery workers do not run here (`start: false`): rows stay as the store
 * made them, and a test that needs attempts makes them as a worker would, through the store.
 */

let t: TestApp;
let tenant: TestTenant;
let key: Record<string, string>;
beforeAll(async () => {
  t = await buildTestApp({}, { delivery: { start: false } });
  tenant = await t.newTenant();
  key = await managementKey(t, tenant.companyId);
});
afterAll(() => t?.close());

type Json = Record<string, any>;

function api(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, headers: Record<string, string> = key, app = t) {
  return app.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload !== undefined && { payload }) });
}

let made = 0;
async function createDestination(body: Json = {}, headers = key, app = t): Promise<{ destination: Json; signing_secret: string }> {
  const response = await api('POST', '/destinations', { name: `Orders ${++made}`, url: `https://orders-${made}.example.invalid/hooks`, ...body }, headers, app);
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

/** A webhook through the intake route, as a sender sends it; its uuid. */
async function sendEvent(event: string, to: TestTenant = tenant, app = t): Promise<string> {
  const response = await sendWebhook(app.app, to.integrationKey, { apiKey: to.apiKey, body: JSON.stringify({ event, data: { event } }) });
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ uuid: string }>().uuid;
}

async function deliveriesOf(query: string, headers = key): Promise<Json[]> {
  const response = await api('GET', `/deliveries?${query}&limit=200`, undefined, headers);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<{ data: Json[] }>().data;
}

/** Claims what is due, as a worker would, and reports each claim with `outcome` (attempts of `durationMs`). */
async function attemptAll(outcome: AttemptResult['outcome'], durationMs = 20, app = t): Promise<ClaimedDelivery[]> {
  const now = Date.now();
  const claimed = await claimDeliveries(app.store, now, { limit: 1000, leaseMs: 30_000 });
  const ok = outcome === 'succeeded';
  await finishAttempts(app.store, 
    claimed.map((claim) => ({
      deliveryId: claim.id,
      companyId: claim.companyId,
      destinationId: claim.destinationId,
      leaseToken: claim.leaseToken,
      outcome,
      gone: false,
      attempt: {
        series: claim.series,
        number: claim.attempt,
        attemptedAt: now,
        durationMs,
        status: ok ? 204 : 500,
        error: ok ? null : 'http_status',
        responseExcerpt: ok ? '' : 'boom',
        nextAttemptAt: outcome === 'retry' ? now + 5000 : null,
      },
    })),
    now,
    365 * 24 * 3600 * 1000,
  );
  return claimed;
}

async function auditActions(companyId = tenant.companyId, app = t): Promise<Json[]> {
  const response = await api('GET', '/audit-log?limit=200', undefined, await managementKey(app, companyId, ['logs:read']), app);
  return response.json<{ data: Json[] }>().data;
}

describe('create, read, change, delete', () => {
  test('a destination with its defaults; its secret is shown once, never in a read, a change or the audit log', async () => {
    const created = await createDestination({ name: '  Billing sink  ', headers: { Authorization: 'Bearer s3cr3t-header-value' } });
    expect(created.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.signing_secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    const id = created.destination.id as string;
    expect(created.destination).toMatchObject({
      id: expect.stringMatching(/^dst_[A-Za-z0-9]{22}$/),
      name: 'Billing sink',
      integration_ids: null,
      event_patterns: ['*'],
      header_names: ['Authorization'],
      timeout_ms: 15_000,
      rate_per_second: 100,
      max_in_flight: 100,
      status: 'active',
      disabled_reason: null,
      disabled_at: null,
      failing_since: null,
      last_success_at: null,
      previous_secret_expires_at: null,
    });
    expect(Date.parse(created.destination.created_at)).toBeGreaterThan(Date.now() - 60_000);

    // The destination itself, as an integration's GET answers; so do PATCH, pause and resume.
    const read = await api('GET', `/destinations/${id}`);
    expect(read.json()).toEqual(created.destination);
    const list = await api('GET', '/destinations?limit=200');
    expect(list.json<{ data: Json[] }>().data.map((d) => d.id)).toContain(id);
    const changed = await api('PATCH', `/destinations/${id}`, { timeout_ms: 5000 });
    expect(changed.statusCode).toBe(200);

    const secrets = [created.signing_secret, created.signing_secret.slice('whsec_'.length), 's3cr3t-header-value'];
    const audit = await auditActions();
    for (const text of [read.body, list.body, changed.body, JSON.stringify(audit)]) {
      for (const secret of secrets) expect(text).not.toContain(secret);
    }
    expect(audit.filter((r) => r.target.id === id).map((r) => r.action).sort()).toEqual(['destination.create', 'destination.update']);
    // Stored sealed: the rows hold neither the secret nor the header's value...
    const rows = await t.database.query('select * from destinations');
    for (const secret of secrets) expect(JSON.stringify(rows)).not.toContain(secret);
    // ...and they open to what was shown, where a worker opens them.
    await sendEvent('sealed.check');
    const claim = (await claimDeliveries(t.store, Date.now(), { limit: 1000, leaseMs: 1 })).find((c) => c.destinationId === id)!;
    const box = testSecretBox();
    expect(box.open(claim.destination.secretSealed)).toBe(created.signing_secret);
    expect(JSON.parse(box.open(claim.destination.headersSealed!))).toEqual({ Authorization: 'Bearer s3cr3t-header-value' });
  });

  test('every field can be set, and a change replaces the headers as a whole', async () => {
    const other = await t.newTenant({ companyId: tenant.companyId });
    const { destination } = await createDestination({
      integration_ids: [tenant.integrationId, other.integrationId, tenant.integrationId],
      event_patterns: ['order.*', '*.failed'],
      headers: { 'X-One': '1', 'X-Two': '2' },
      timeout_ms: 1000,
      rate_per_second: 50,
      max_in_flight: 1000,
    });
    expect(destination).toMatchObject({
      integration_ids: [tenant.integrationId, other.integrationId],
      event_patterns: ['order.*', '*.failed'],
      header_names: ['X-One', 'X-Two'],
      timeout_ms: 1000,
      rate_per_second: 50,
      max_in_flight: 1000,
    });
    const changed = await api('PATCH', `/destinations/${destination.id}`, {
      name: 'Renamed',
      url: 'https://renamed.example.invalid/in',
      integration_ids: null,
      headers: { 'X-Three': '3' },
      rate_per_second: null,
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toMatchObject({
      name: 'Renamed',
      url: 'https://renamed.example.invalid/in',
      integration_ids: null,
      header_names: ['X-Three'],
      rate_per_second: null,
      event_patterns: ['order.*', '*.failed'],
    });
    const cleared = await api('PATCH', `/destinations/${destination.id}`, { headers: {} });
    expect(cleared.json()).toMatchObject({ header_names: [] });
    expect((await api('PATCH', `/destinations/${destination.id}`, {})).statusCode).toBe(400);
    // Absent, the rate is the default; null, asked for, is no limit.
    expect((await createDestination({ rate_per_second: null })).destination.rate_per_second).toBeNull();
  });

  test('delete: 204, then 404 everywhere, gone from the list; its deliveries are cancelled', async () => {
    const { destination } = await createDestination();
    const uuid = await sendEvent('order.deleted');
    const deleted = await api('DELETE', `/destinations/${destination.id}`);
    expect(deleted.statusCode).toBe(204);
    for (const [method, url] of [
      ['GET', `/destinations/${destination.id}`],
      ['PATCH', `/destinations/${destination.id}`],
      ['DELETE', `/destinations/${destination.id}`],
      ['POST', `/destinations/${destination.id}/pause`],
      ['POST', `/destinations/${destination.id}/secret/rotate`],
      ['GET', `/destinations/${destination.id}/stats`],
    ] as const) {
      const response = await api(method, url, method === 'PATCH' ? { name: 'x' } : undefined);
      expect(response.statusCode, `${method} ${url}`).toBe(404);
    }
    const list = await api('GET', '/destinations?limit=200');
    expect(list.json<{ data: Json[] }>().data.map((d) => d.id)).not.toContain(destination.id);
    await t.store.reconcileHeldDeliveries(Date.now(), 10_000);
    const [delivery] = await deliveriesOf(`webhook_uuid=${uuid}&destination_id=${destination.id}`);
    expect(delivery).toMatchObject({ state: 'cancelled' });
    const replay = await api('POST', `/deliveries/${delivery!.id}/replay`);
    expect(replay.statusCode).toBe(409);
  });
});

describe('validation names the field; nothing is stored', () => {
  const cases: Array<[string, Json, string]> = [
    ['an empty name', { name: '   ' }, 'name'],
    ['a name too long', { name: 'n'.repeat(201) }, 'name'],
    ['a URL that is no URL', { url: 'not a url' }, 'url'],
    ['an ftp URL', { url: 'ftp://files.example.invalid/' }, 'url'],
    ['a URL with a password', { url: 'https://user:pw@example.invalid/' }, 'url'],
    ['a URL too long', { url: `https://example.invalid/${'a'.repeat(2048)}` }, 'url'],
    ['no event pattern', { event_patterns: [] }, 'event_patterns'],
    ['an empty event pattern', { event_patterns: ['order.*', ''] }, 'event_patterns'],
    ['an integration of another company', { integration_ids: ['int_0000000000000000000000'] }, 'integration_ids'],
    ['no integration', { integration_ids: [] }, 'integration_ids'],
    ['101 integrations', { integration_ids: Array.from({ length: 101 }, () => 'int_0000000000000000000000') }, 'integration_ids'],
    ['a header intake sets (Host)', { headers: { Host: 'evil.example' } }, 'headers'],
    ['a header intake sets (Content-Type)', { headers: { 'content-type': 'text/plain' } }, 'headers'],
    ['a header intake sets (webhook-signature)', { headers: { 'Webhook-Signature': 'v1,forged' } }, 'headers'],
    ['a header intake sets (x-intake-event)', { headers: { 'X-Intake-Event': 'forged' } }, 'headers'],
    ['a header intake sets (User-Agent)', { headers: { 'User-Agent': 'forged/1' } }, 'headers'],
    // content-* is the body's, which is the webhook's own: every one of them, not only type and length.
    ...['Content-Encoding', 'Content-MD5', 'Content-Length', 'content-language'].map(
      (name): [string, Json, string] => [`a content header (${name})`, { headers: { [name]: 'x' } }, 'headers'],
    ),
    // The connection's and the framing's: undici refuses some, the rest would break the request.
    ...['Expect', 'Upgrade', 'Keep-Alive', 'TE', 'Trailer', 'Proxy-Connection', 'Transfer-Encoding', 'Connection', 'host', 'HTTP2-Settings'].map(
      (name): [string, Json, string] => [`a header of the connection (${name})`, { headers: { [name]: 'x' } }, 'headers'],
    ),
    ['a header name with a space', { headers: { 'Bad Name': 'x' } }, 'headers'],
    ['a header name of 101 characters', { headers: { [`X-${'a'.repeat(99)}`]: 'x' } }, 'headers'],
    ['a header value with CR LF', { headers: { 'X-Injected': 'a\r\nSet-Cookie: x=1' } }, 'headers'],
    ['a header value with a NUL', { headers: { 'X-Nul': 'a\u0000b' } }, 'headers'],
    ['a header value beyond Latin-1', { headers: { 'X-Emoji': 'ok ✓' } }, 'headers'],
    ['a header value of 4097 characters', { headers: { 'X-Long': 'v'.repeat(4097) } }, 'headers'],
    ['the same header twice', { headers: { 'X-Same': '1', 'x-same': '2' } }, 'headers'],
    ['21 headers', { headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])) }, 'headers'],
    ['a timeout under 1 s', { timeout_ms: 999 }, 'timeout_ms'],
    ['a timeout over 60 s', { timeout_ms: 60_001 }, 'timeout_ms'],
    ['a rate of 0', { rate_per_second: 0 }, 'rate_per_second'],
    ['a rate over 10000', { rate_per_second: 10_001 }, 'rate_per_second'],
    ['0 in flight', { max_in_flight: 0 }, 'max_in_flight'],
    ['1001 in flight', { max_in_flight: 1001 }, 'max_in_flight'],
  ];

  test.each(cases)('%s', async (_what, body, field) => {
    const before = (await t.store.listDestinations(tenant.companyId, { limit: 1000 })).length;
    const response = await api('POST', '/destinations', { name: 'Refused', url: 'https://refused.example.invalid/', ...body });
    expect(response.statusCode, response.body).toBe(400);
    const error = response.json<Json>();
    // Our own checks name it in `field`; the schema's, in the message (body/timeout_ms …).
    expect(error.field === field || String(error.message).includes(field), response.body).toBe(true);
    expect((await t.store.listDestinations(tenant.companyId, { limit: 1000 })).length).toBe(before);
  });

  test('a change is checked the same way, and a refused change changes nothing', async () => {
    const { destination } = await createDestination({ headers: { 'X-Keep': 'kept' } });
    for (const [body, field] of [
      [{ url: 'http://127.0.0.1:8080/', name: 'Not this' }, 'url'],
      [{ headers: { Connection: 'close' }, name: 'Nor this' }, 'headers'],
      [{ integration_ids: ['int_0000000000000000000000'] }, 'integration_ids'],
      [{ max_in_flight: 0 }, 'max_in_flight'],
    ] as const) {
      const response = await api('PATCH', `/destinations/${destination.id}`, body);
      expect(response.statusCode, response.body).toBe(400);
      expect(response.json<Json>().field === field || String(response.json<Json>().message).includes(field)).toBe(true);
    }
    expect((await api('GET', `/destinations/${destination.id}`)).json()).toEqual(destination);
  });

  test('120 creates at once make exactly 50 destinations: the count is taken under the company\'s lock', async () => {
    // URLs of IP literals (allowed here): nothing to resolve, so the creates meet in the store.
    const allowing = await buildTestApp({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' }, { delivery: { start: false } });
    try {
      const company = await allowing.newTenant();
      const headers = await managementKey(allowing, company.companyId);
      const answers = await Promise.all(
        Array.from({ length: 120 }, (_, i) => api('POST', '/destinations', { name: `Parallel ${i}`, url: `http://127.0.0.1:9/${i}` }, headers, allowing)),
      );
      const statuses = answers.map((answer) => answer.statusCode);
      expect(statuses.filter((status) => status === 201)).toHaveLength(50);
      expect(statuses.filter((status) => status === 409)).toHaveLength(70);
      for (const refused of answers.filter((answer) => answer.statusCode === 409)) {
        expect(refused.json()).toMatchObject({ error: 'Conflict', code: 'conflict', message: 'A company has at most 50 destinations; delete one first.' });
      }
      expect(await allowing.store.listDestinations(company.companyId, { limit: 200 })).toHaveLength(50);
      const audit = await allowing.store.listAuditLog(company.companyId, { limit: 200, action: 'destination.create' });
      expect(audit).toHaveLength(50);
    } finally {
      await allowing.close();
    }
  });

  test('a company has at most 50 destinations (each is matched inside every commit of its webhooks)', async () => {
    const crowded = await t.newTenant();
    const crowdedKey = await managementKey(t, crowded.companyId);
    const existing = (await api('GET', '/destinations?limit=100', undefined, crowdedKey)).json<Json>().data.length;
    for (let i = existing; i < 50; i++) await createDestination({}, crowdedKey);
    const refused = await api('POST', '/destinations', { name: 'One more', url: 'https://more.example.invalid/' }, crowdedKey);
    expect(refused.statusCode).toBe(409);
    expect(refused.json<Json>().message).toMatch(/at most 50 destinations/);
  });
});

describe('server-side request forgery is refused at creation', () => {
  const refused = ['http://127.0.0.1:8080/hooks', 'http://localhost:3000/', 'http://[::ffff:127.0.0.1]/', 'http://169.254.169.254/latest/meta-data/', 'https://10.0.0.7/'];

  test.each(refused)('%s: 400 naming url, without an allow list', async (url) => {
    const response = await api('POST', '/destinations', { name: 'Internal', url });
    expect(response.statusCode, response.body).toBe(400);
    expect(response.json()).toMatchObject({ code: 'invalid_request', field: 'url' });
  });

  test('127.0.0.1 is accepted when INTAKE_DESTINATION_ALLOW lists it, and nothing else is', async () => {
    const allowing = await buildTestApp({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' }, { delivery: { start: false } });
    try {
      const company = await allowing.newTenant();
      const headers = await managementKey(allowing, company.companyId);
      const created = await createDestination({ url: 'http://127.0.0.1:9/receiver' }, headers, allowing);
      expect(created.destination.url).toBe('http://127.0.0.1:9/receiver');
      const metadata = await api('POST', '/destinations', { name: 'x', url: 'http://169.254.169.254/' }, headers, allowing);
      expect(metadata.json()).toMatchObject({ field: 'url' });
      const other = await api('POST', '/destinations', { name: 'x', url: 'http://127.0.0.2/' }, headers, allowing);
      expect(other.json()).toMatchObject({ field: 'url' });
    } finally {
      await allowing.close();
    }
  });
});

describe('who may', () => {
  test("a key with integrations:manage alone manages destinations but cannot choose where payloads go; a viewer changes nothing", async () => {
    const manageOnly = await managementKey(t, tenant.companyId, ['integrations:manage']);
    const refusedCreate = await api('POST', '/destinations', { name: 'Exfiltrate', url: 'https://exfil.example.invalid/' }, manageOnly);
    expect(refusedCreate.statusCode).toBe(403);
    expect(refusedCreate.json()).toMatchObject({ error: 'Insufficient permissions', message: expect.stringContaining('logs:read') });
    const { destination } = await createDestination();
    expect((await api('PATCH', `/destinations/${destination.id}`, { url: 'https://exfil.example.invalid/' }, manageOnly)).statusCode).toBe(403);
    expect((await api('PATCH', `/destinations/${destination.id}`, { event_patterns: ['*'] }, manageOnly)).statusCode).toBe(403);
    // Rules choose which webhooks go and in what shape.
    expect((await api('PATCH', `/destinations/${destination.id}`, { rules: { filter: { body: {} } } }, manageOnly)).statusCode).toBe(403);
    expect((await api('POST', `/destinations/${destination.id}/rules/try`, { webhook: { body: {} } }, manageOnly)).statusCode).toBe(403);
    expect((await api('POST', `/destinations/${destination.id}/send`, { since: new Date(0).toISOString() }, manageOnly)).statusCode).toBe(403);
    const renamed = await api('PATCH', `/destinations/${destination.id}`, { name: 'Renamed by a manage key', timeout_ms: 2000 }, manageOnly);
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect((await api('POST', `/destinations/${destination.id}/pause`, undefined, manageOnly)).statusCode).toBe(200);

    const viewer = await member(t, tenant.companyId, 'viewer');
    expect((await api('GET', `/destinations/${destination.id}`, undefined, viewer.read)).statusCode).toBe(200);
    const viewerCreate = await api('POST', '/destinations', { name: 'No', url: 'https://no.example.invalid/' }, viewer.change);
    expect(viewerCreate.statusCode).toBe(403);
    expect((await api('POST', `/destinations/${destination.id}/resume`, undefined, viewer.change)).statusCode).toBe(403);
  });
});

describe('pause, resume, rotate', () => {
  test('paused: new deliveries are held; resumed: active again; both audited', async () => {
    const { destination } = await createDestination({ event_patterns: ['pause.*'] });
    const paused = await api('POST', `/destinations/${destination.id}/pause`);
    expect(paused.statusCode).toBe(200);
    expect(paused.json()).toEqual({ ...destination, status: 'paused', updated_at: expect.any(String) });
    const uuid = await sendEvent('pause.test');
    const [held] = await deliveriesOf(`destination_id=${destination.id}`);
    expect(held).toMatchObject({ webhook_uuid: uuid, state: 'held', next_attempt_at: null });
    const resumed = await api('POST', `/destinations/${destination.id}/resume`);
    expect(resumed.json()).toMatchObject({ id: destination.id, status: 'active' });
    const actions = (await auditActions()).filter((r) => r.target.id === destination.id).map((r) => r.action);
    expect(actions).toEqual(expect.arrayContaining(['destination.pause', 'destination.resume']));
  });

  test('rotation: a new secret once; the previous one signs until previous_secret_expires_at; bounds checked', async () => {
    const created = await createDestination();
    const id = created.destination.id;
    const before = Date.now();
    const rotated = await api('POST', `/destinations/${id}/secret/rotate`, { previous_expires_in_seconds: 3600 });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const body = rotated.json<{ signing_secret: string; previous_secret_expires_at: string }>();
    expect(body.signing_secret).toMatch(/^whsec_/);
    expect(body.signing_secret).not.toBe(created.signing_secret);
    const expires = Date.parse(body.previous_secret_expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(expires).toBeLessThan(Date.now() + 3_600_000 + 1000);
    const read = await api('GET', `/destinations/${id}`);
    expect(read.json()).toMatchObject({ previous_secret_expires_at: body.previous_secret_expires_at });
    expect(read.body).not.toContain(body.signing_secret);
    expect(JSON.stringify(await auditActions())).not.toContain(body.signing_secret.slice(6));

    const byDefault = await api('POST', `/destinations/${id}/secret/rotate`);
    expect(Date.parse(byDefault.json<Json>().previous_secret_expires_at)).toBeGreaterThan(Date.now() + 86_400_000 - 60_000);
    for (const seconds of [-1, 604_801]) {
      const refused = await api('POST', `/destinations/${id}/secret/rotate`, { previous_expires_in_seconds: seconds });
      expect(refused.statusCode).toBe(400);
      expect(refused.body).toContain('previous_expires_in_seconds');
    }

    // The worker signs with both while the overlap lasts: the sealed pair opens to the last two shown.
    await sendEvent('rotation.check');
    const claim = (await claimDeliveries(t.store, Date.now(), { limit: 1000, leaseMs: 1 })).find((c) => c.destinationId === id)!;
    const box = testSecretBox();
    expect(box.open(claim.destination.secretSealed)).toBe(byDefault.json<Json>().signing_secret);
    expect(box.open(claim.destination.previousSecretSealed!)).toBe(body.signing_secret);
  });
});

describe('deliveries: lists, replays and sends', () => {
  let app: TestApp;
  let company: TestTenant;
  let headers: Record<string, string>;
  beforeAll(async () => {
    // An app of its own: these tests claim every due delivery of the database, as a worker would.
    app = await buildTestApp({}, { delivery: { start: false } });
    company = await app.newTenant();
    headers = await managementKey(app, company.companyId);
  });
  afterAll(() => app?.close());

  const call = (method: 'GET' | 'POST', url: string, payload?: object) => api(method, url, payload, headers, app);
  const list = async (query: string) => (await call('GET', `/deliveries?${query}&limit=200`)).json<{ data: Json[] }>().data;

  test('a webhook makes a delivery per matching destination; lists by destination or by webhook, with filters', async () => {
    const orders = (await createDestination({ event_patterns: ['order.*'] }, headers, app)).destination;
    const all = (await createDestination({}, headers, app)).destination;
    const order = await sendEvent('order.created', company, app);
    const user = await sendEvent('user.created', company, app);

    const ofOrders = await list(`destination_id=${orders.id}`);
    expect(ofOrders.map((d) => d.webhook_uuid)).toEqual([order]);
    expect(ofOrders[0]).toMatchObject({
      id: expect.stringMatching(/^dlv_/),
      destination_id: orders.id,
      integration_id: company.integrationId,
      event: 'order.created',
      state: 'pending',
      attempts: 0,
      series: 0,
      last_attempt_at: null,
      last_status: null,
      last_error: null,
    });
    expect((await list(`destination_id=${all.id}`)).map((d) => d.webhook_uuid)).toEqual([user, order]);
    expect((await list(`webhook_uuid=${order}`)).map((d) => d.destination_id).sort()).toEqual([orders.id, all.id].sort());
    expect((await list(`destination_id=${all.id}&event=user.created`)).map((d) => d.webhook_uuid)).toEqual([user]);
    expect(await list(`destination_id=${all.id}&state=failed`)).toEqual([]);

    const paged = await call('GET', `/deliveries?destination_id=${all.id}&limit=1`);
    const next = paged.json<{ next_cursor: string }>().next_cursor;
    expect(next).toEqual(expect.any(String));
    const second = await call('GET', `/deliveries?destination_id=${all.id}&limit=1&cursor=${next}`);
    expect(second.json<{ data: Json[] }>().data.map((d) => d.webhook_uuid)).toEqual([order]);

    const neither = await call('GET', '/deliveries');
    expect(neither.statusCode).toBe(400);
    expect(neither.json()).toMatchObject({ field: 'destination_id' });
  });

  test('a failed delivery replayed starts series 1; its attempts stay readable, newest first', async () => {
    const { destination } = await createDestination({ event_patterns: ['replay.one'] }, headers, app);
    await sendEvent('replay.one', company, app);
    await attemptAll('failed', 20, app);
    const [failed] = await list(`destination_id=${destination.id}`);
    expect(failed).toMatchObject({ state: 'failed', attempts: 1, series: 0, last_status: 500, last_error: 'http_status' });

    const detail = await call('GET', `/deliveries/${failed!.id}`);
    expect(detail.statusCode).toBe(200);
    expect(detail.json()).toMatchObject({
      delivery: { id: failed!.id },
      attempts: [{ id: expect.stringMatching(/^att_/), series: 0, number: 1, status: 500, error: 'http_status', response_excerpt: 'boom', duration_ms: 20, next_attempt_at: null }],
    });

    const replayed = await call('POST', `/deliveries/${failed!.id}/replay`);
    expect(replayed.statusCode, replayed.body).toBe(200);
    expect(replayed.json()).toMatchObject({ delivery: { id: failed!.id, state: 'pending', attempts: 0, series: 1 } });
    await attemptAll('succeeded', 7, app);
    const after = (await call('GET', `/deliveries/${failed!.id}`)).json<{ delivery: Json; attempts: Json[] }>();
    expect(after.delivery).toMatchObject({ state: 'succeeded', series: 1, attempts: 1 });
    expect(after.attempts.map((a) => [a.series, a.number])).toEqual([[1, 1], [0, 1]]);
    expect((await call('GET', '/deliveries/dlv_0000000000000000000000')).statusCode).toBe(404);
  });

  test('bulk replay: only the filtered ones of the destination; `more` past the call', async () => {
    const { destination } = await createDestination({ event_patterns: ['bulk.*'] }, headers, app);
    for (const event of ['bulk.a', 'bulk.b', 'bulk.a']) await sendEvent(event, company, app);
    await attemptAll('failed', 20, app);
    const replayA = await call('POST', '/deliveries/replay', { destination_id: destination.id, state: 'failed', event: 'bulk.a' });
    expect(replayA.json()).toEqual({ replayed: 2, more: false });
    const states = (await list(`destination_id=${destination.id}`)).map((d) => [d.event, d.state, d.series]);
    expect(states.sort()).toEqual([['bulk.a', 'pending', 1], ['bulk.a', 'pending', 1], ['bulk.b', 'failed', 0]]);
    // The two just replayed are pending, in their new series: a bulk replay leaves them to it.
    const rest = await call('POST', '/deliveries/replay', { destination_id: destination.id });
    expect(rest.json()).toEqual({ replayed: 1, more: false });
    const missing = await call('POST', '/deliveries/replay', { destination_id: 'dst_0000000000000000000000' });
    expect(missing.statusCode).toBe(404);
    const badState = await call('POST', '/deliveries/replay', { destination_id: destination.id, state: 'lost' });
    expect(badState.statusCode).toBe(400);
  });

  test('send: stored webhooks to a destination made after them, named or by range, each once', async () => {
    const first = await sendEvent('send.match', company, app);
    const second = await sendEvent('send.other', company, app);
    const third = await sendEvent('send.match', company, app);
    const { destination } = await createDestination({ event_patterns: ['send.match'] }, headers, app);
    expect(await list(`destination_id=${destination.id}`)).toEqual([]);

    const named = await call('POST', `/destinations/${destination.id}/send`, { webhook_uuids: [second] });
    expect(named.statusCode, named.body).toBe(200);
    expect(named.json()).toEqual({ created: 1, skipped: 0, more: false });
    const since = new Date(Date.now() - 60_000).toISOString();
    const range = await call('POST', `/destinations/${destination.id}/send`, { since });
    // The range goes through the destination's patterns: second is not one of them.
    expect(range.json()).toEqual({ created: 2, skipped: 0, more: false });
    const again = await call('POST', `/destinations/${destination.id}/send`, { since });
    expect(again.json()).toEqual({ created: 0, skipped: 2, more: false });
    const rows = await list(`destination_id=${destination.id}`);
    expect(rows.map((d) => d.webhook_uuid).sort()).toEqual([first, second, third].sort());
    expect(rows.every((d) => d.state === 'pending' && d.series === 0)).toBe(true);

    for (const [body, field] of [
      [{}, 'since'],
      [{ webhook_uuids: [first], since }, 'webhook_uuids'],
      [{ webhook_uuids: [] }, 'webhook_uuids'],
      [{ webhook_uuids: Array.from({ length: 101 }, () => first) }, 'webhook_uuids'],
      [{ since: 'yesterday' }, 'since'],
    ] as const) {
      const refused = await call('POST', `/destinations/${destination.id}/send`, body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(400);
      expect(refused.json<Json>().field === field || refused.body.includes(field)).toBe(true);
    }
    expect((await call('POST', '/destinations/dst_0000000000000000000000/send', { since })).statusCode).toBe(404);
    const actions = (await auditActions(company.companyId, app)).map((r) => r.action);
    expect(actions).toEqual(expect.arrayContaining(['destination.send', 'delivery.replay']));
  });

  test('retry now (state pending): the failing deliveries waiting for a retry start again now; one never attempted, or settled, is left', async () => {
    const { destination } = await createDestination({ event_patterns: ['retrying.*'] });
    const failing = [await sendEvent('retrying.one'), await sendEvent('retrying.two')];
    await attemptAll('retry', 30);
    const waiting = await sendEvent('retrying.fresh');
    const before = await deliveriesOf(`destination_id=${destination.id}`);
    const byUuid = (rows: Json[], uuid: string) => rows.find((row) => row.webhook_uuid === uuid)!;
    for (const uuid of failing) {
      expect(byUuid(before, uuid)).toMatchObject({ state: 'pending', attempts: 1, series: 0 });
      expect(Date.parse(byUuid(before, uuid).next_attempt_at)).toBeGreaterThan(Date.now());
    }

    // Said beforehand, changing nothing.
    const preview = await api('POST', '/deliveries/replay', { destination_id: destination.id, state: 'pending', dry_run: true });
    expect(preview.json()).toEqual({ replayed: 0, would_replay: 2, more: false });
    expect(await deliveriesOf(`destination_id=${destination.id}`)).toEqual(before);

    const retried = await api('POST', '/deliveries/replay', { destination_id: destination.id, state: 'pending' });
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.json()).toMatchObject({ replayed: 2, more: false });
    const after = await deliveriesOf(`destination_id=${destination.id}`);
    for (const uuid of failing) {
      expect(byUuid(after, uuid)).toMatchObject({ state: 'pending', attempts: 0, series: 1 });
      expect(Date.parse(byUuid(after, uuid).next_attempt_at)).toBeLessThanOrEqual(Date.now());
    }
    expect(byUuid(after, waiting)).toMatchObject({ series: 0, attempts: 0 });
    // At once again: nothing twice (the replay's cooldown).
    expect((await api('POST', '/deliveries/replay', { destination_id: destination.id, state: 'pending' })).json()).toMatchObject({ replayed: 0 });
  });

  test('named deliveries (delivery_ids): the failing one retried now and the failed one replayed; a fresh one, another destination\'s, left', async () => {
    const { destination } = await createDestination({ event_patterns: ['picked.*'] });
    const other = (await createDestination({ event_patterns: ['picked.*'] })).destination;
    const dead = await sendEvent('picked.dead');
    await attemptAll('failed', 30);
    const failing = await sendEvent('picked.failing');
    await attemptAll('retry', 30);
    const fresh = await sendEvent('picked.fresh');
    const rows = await deliveriesOf(`destination_id=${destination.id}`);
    const idOf = (uuid: string, of = rows) => of.find((row) => row.webhook_uuid === uuid)!.id as string;
    expect(rows.find((row) => row.webhook_uuid === dead)).toMatchObject({ state: 'failed' });
    expect(rows.find((row) => row.webhook_uuid === failing)).toMatchObject({ state: 'pending', attempts: 1 });
    const othersRow = idOf(dead, await deliveriesOf(`destination_id=${other.id}`));
    const named = [idOf(dead), idOf(failing), idOf(fresh), othersRow];

    const preview = await api('POST', '/deliveries/replay', { destination_id: destination.id, delivery_ids: named, dry_run: true });
    expect(preview.json()).toEqual({ replayed: 0, would_replay: 2, more: false });
    const replayed = await api('POST', '/deliveries/replay', { destination_id: destination.id, delivery_ids: named });
    expect(replayed.statusCode, replayed.body).toBe(200);
    expect(replayed.json()).toMatchObject({ replayed: 2, more: false });
    const after = await deliveriesOf(`destination_id=${destination.id}`);
    for (const uuid of [dead, failing]) expect(after.find((row) => row.webhook_uuid === uuid)).toMatchObject({ state: 'pending', attempts: 0, series: 1 });
    expect(after.find((row) => row.webhook_uuid === fresh)).toMatchObject({ series: 0 });
    expect((await deliveriesOf(`destination_id=${other.id}`)).find((row) => row.id === othersRow)).toMatchObject({ series: 0 });
    // At once again: nothing twice (the replays' cooldown).
    expect((await api('POST', '/deliveries/replay', { destination_id: destination.id, delivery_ids: named })).json()).toMatchObject({ replayed: 0 });

    // Named or a range, not both; 1 to 100 ids of deliveries.
    for (const body of [
      { delivery_ids: [idOf(dead)], since: new Date(0).toISOString() },
      { delivery_ids: [] },
      { delivery_ids: Array.from({ length: 101 }, () => idOf(dead)) },
      { delivery_ids: ['not-an-id'] },
    ]) {
      const refused = await api('POST', '/deliveries/replay', { destination_id: destination.id, ...body });
      expect(refused.statusCode, JSON.stringify(body)).toBe(400);
      expect(refused.json()).toMatchObject({ error: expect.any(String), field: 'delivery_ids', message: expect.stringMatching(/delivery_ids/) });
    }
  });

  test("a source's test is stored marked as one, with the host intake is reached at, and delivered nowhere; a sender's mark is not kept", async () => {
    const { destination } = await createDestination({ event_patterns: ['*'] });
    const created = await api('POST', '/integrations', { name: 'GitHub, tested', source: { type: 'github' } });
    expect(created.statusCode, created.body).toBe(201);
    const sent = await api('POST', `/integrations/${created.json<Json>().integration.id}/source-test`);
    expect(sent.json<Json>()).toMatchObject({ status: 202, answer: { uuid: expect.any(String) } });
    const uuid = sent.json<Json>().answer.uuid as string;
    const stored = (await api('GET', `/webhooks/${uuid}`)).json<Json>();
    expect(stored.headers).toMatchObject({ 'intake-test': 'source-test', host: new URL(t.config.baseUrl).host, 'user-agent': 'intake-source-test' });

    // A sender that marks its own webhook: the mark is dropped, and the webhook is delivered.
    const forged = await sendWebhook(t.app, tenant.integrationKey, {
      apiKey: tenant.apiKey,
      body: JSON.stringify({ event: 'forged.test', data: {} }),
      headers: { 'intake-test': 'source-test' },
    });
    expect(forged.statusCode).toBe(202);
    const forgedUuid = forged.json<{ uuid: string }>().uuid;
    expect((await api('GET', `/webhooks/${forgedUuid}`)).json<Json>().headers).not.toHaveProperty('intake-test');
    const deliveries = (await deliveriesOf(`destination_id=${destination.id}`)).map((delivery) => delivery.webhook_uuid);
    expect(deliveries).toContain(forgedUuid);
    expect(deliveries).not.toContain(uuid);
  });

  test("stats: buckets start on the clock's minutes and hours, whatever the range's start", async () => {
    const { destination } = await createDestination({ event_patterns: ['aligned.*'] }, headers, app);
    await sendEvent('aligned.one', company, app);
    const before = Date.now();
    await attemptAll('succeeded', 10, app);
    const after = Date.now();
    // An hour (one-minute buckets) starting 30.5 s past a minute: a bucket counted from the
    // range's start would be labelled a minute before the attempts it holds.
    const since = Math.floor((before - 3_600_000) / 60_000) * 60_000 + 30_500;
    const stats = await call('GET', `/destinations/${destination.id}/stats?since=${new Date(since).toISOString()}&until=${new Date(after + 60_000).toISOString()}`);
    const body = stats.json<Json>();
    expect(body.bucket_seconds).toBe(60);
    expect(body.buckets).toHaveLength(1);
    const start = Date.parse(body.buckets[0].start);
    expect(start % 60_000).toBe(0);
    expect(start).toBeGreaterThanOrEqual(Math.floor(before / 60_000) * 60_000);
    expect(start).toBeLessThanOrEqual(Math.floor(after / 60_000) * 60_000);
  });

  test('stats: outcomes, latency percentiles, buckets and backlog; ranges checked', async () => {
    const { destination } = await createDestination({ event_patterns: ['stats.*'] }, headers, app);
    for (let i = 0; i < 3; i++) await sendEvent('stats.ok', company, app);
    await attemptAll('succeeded', 10, app);
    await sendEvent('stats.bad', company, app);
    await attemptAll('retry', 40, app);
    await sendEvent('stats.waiting', company, app);

    const stats = await call('GET', `/destinations/${destination.id}/stats`);
    expect(stats.statusCode, stats.body).toBe(200);
    const body = stats.json<Json>();
    expect(body).toMatchObject({
      bucket_seconds: 900,
      attempts: 4,
      succeeded: 3,
      failed: 1,
      success_rate: 0.75,
      latency_ms: { p50: 10, p90: 40, p99: 40 },
      backlog: { pending: 2, held: 0, in_flight: 0 },
      truncated: false,
    });
    expect(Date.parse(body.until) - Date.parse(body.since)).toBe(86_400_000);
    expect(body.buckets.reduce((sum: number, b: Json) => sum + b.succeeded + b.failed, 0)).toBe(4);
    expect(Date.parse(body.backlog.oldest_due_at)).toBeLessThanOrEqual(Date.now());

    const week = await call('GET', `/destinations/${destination.id}/stats?since=${new Date(Date.now() - 7 * 86_400_000).toISOString()}`);
    expect(week.json()).toMatchObject({ bucket_seconds: 3 * 3600 });
    const tooLong = await call('GET', `/destinations/${destination.id}/stats?since=${new Date(Date.now() - 32 * 86_400_000).toISOString()}`);
    expect(tooLong.json()).toMatchObject({ field: 'since' });
    const backwards = await call('GET', `/destinations/${destination.id}/stats?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z`);
    expect(backwards.json()).toMatchObject({ field: 'until' });
  });
});

describe('the feed', () => {
  let feedTenant: TestTenant;
  let reader: Record<string, string>;
  beforeAll(async () => {
    feedTenant = await t.newTenant();
    reader = await managementKey(t, feedTenant.companyId, ['logs:read']);
  });
  const feed = async (query: string, headers = reader) => {
    const response = await api('GET', `/webhooks/feed${query}`, undefined, headers);
    expect(response.statusCode, response.body).toBe(200);
    return response.json<{ data: Json[]; next_cursor: string }>();
  };
  /**
   * The cursor past everything the feed holds now. On PostgreSQL the feed shows a webhook
   * once every transaction older than its own has ended, in the whole cluster (other test
   * files migrate their schemas meanwhile): a read that must see everything waits for it.
   */
  const drainedCursor = async (from?: string) => {
    let cursor = from;
    for (;;) {
      const page = await feed(`?limit=500&wait=1${cursor === undefined ? '' : `&after=${cursor}`}`);
      if (page.data.length === 0) return page.next_cursor;
      cursor = page.next_cursor;
    }
  };

  test('oldest first, resumable from its cursor, each webhook once; the cursor comes back when nothing came', async () => {
    const empty = await feed('');
    expect(empty.data).toEqual([]);
    expect(empty.next_cursor).toEqual(expect.any(String));
    const sent: string[] = [];
    for (let i = 0; i < 5; i++) sent.push(await sendEvent(`feed.${i}`, feedTenant));

    const seen: Json[] = [];
    let cursor = empty.next_cursor;
    while (seen.length < sent.length) {
      const page = await feed(`?after=${cursor}&limit=2&wait=5`);
      expect(page.data.length).toBeGreaterThan(0);
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data);
      cursor = page.next_cursor;
    }
    const after = await feed(`?after=${cursor}`);
    expect(after).toEqual({ data: [], next_cursor: cursor });
    expect(seen.map((item) => item.uuid)).toEqual(sent);
    expect(seen[0]).toEqual({
      uuid: sent[0],
      integration_id: feedTenant.integrationId,
      event: 'feed.0',
      data: { event: 'feed.0' },
      received_at: expect.any(String),
    });
    // Without a cursor it starts at the oldest again.
    expect((await feed('?limit=500')).data.map((item) => item.uuid)).toEqual(sent);
    const more = await sendEvent('feed.5', feedTenant);
    expect((await feed(`?after=${cursor}&wait=5`)).data.map((item) => item.uuid)).toEqual([more]);
  });

  test('integration_id leaves the others out of data but passes them', async () => {
    const other = await t.newTenant({ companyId: feedTenant.companyId });
    const start = await drainedCursor();
    const mine = await sendEvent('filtered.mine', other);
    await sendEvent('filtered.theirs', feedTenant);
    const page = await feed(`?after=${start}&integration_id=${other.integrationId}&wait=5`);
    expect(page.data.map((item) => item.uuid)).toEqual([mine]);
    const rest = await feed(`?after=${await drainedCursor(page.next_cursor)}&integration_id=${other.integrationId}`);
    expect(rest.data).toEqual([]);
  });

  test('a bad cursor is a 400 naming after', async () => {
    for (const after of ['nope', Buffer.from('1.x').toString('base64url'), Buffer.from(`${'9'.repeat(20)}.1`).toString('base64url')]) {
      const response = await api('GET', `/webhooks/feed?after=${after}`, undefined, reader);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toMatchObject({ code: 'invalid_request', field: 'after' });
    }
    expect((await api('GET', '/webhooks/feed?wait=31', undefined, reader)).statusCode).toBe(400);
    expect((await api('GET', '/webhooks/feed?limit=501', undefined, reader)).statusCode).toBe(400);
  });

  test('wait: answers as soon as a webhook arrives; with none, after the wait with the same cursor', async () => {
    const cursor = await drainedCursor();
    const started = Date.now();
    const waiting = feed(`?after=${cursor}&wait=20`);
    await sleep(600);
    const uuid = await sendEvent('feed.awaited', feedTenant);
    const answer = await waiting;
    expect(answer.data.map((item) => item.uuid)).toEqual([uuid]);
    expect(Date.now() - started).toBeLessThan(5_000);

    const quietStart = Date.now();
    const quiet = await feed(`?after=${answer.next_cursor}&wait=1`);
    expect(quiet).toEqual({ data: [], next_cursor: answer.next_cursor });
    expect(Date.now() - quietStart).toBeGreaterThanOrEqual(950);
    expect(t.app.readLimits.longPolls.inUse).toBe(0);
  });

  test('a waiting read ends with a 401 once its key is revoked', async () => {
    const revocable = await t.management.createManagementKey(feedTenant.companyId, ['logs:read']);
    const headers = { 'x-api-key': revocable.apiKey };
    const cursor = await drainedCursor();
    const started = Date.now();
    const waiting = api('GET', `/webhooks/feed?after=${cursor}&wait=20`, undefined, headers);
    await sleep(300);
    await t.management.revokeKey(feedTenant.companyId, revocable.id);
    const answer = await waiting;
    expect(answer.statusCode).toBe(401);
    expect(Date.now() - started).toBeLessThan(8_000);
  });

  test('a client that leaves frees its place at once; the caps refuse past them', async () => {
    const small = await buildTestApp({}, { delivery: { start: false }, readLimits: { longPolls: { perCaller: 1, perCompany: 5, perNode: 5 } } });
    try {
      const base = await small.app.listen({ host: '127.0.0.1', port: 0 });
      const owner = await small.newTenant();
      const headers = await managementKey(small, owner.companyId, ['logs:read']);
      const abort = new AbortController();
      const leaving = fetch(`${base}/api/v1/webhooks/feed?wait=30`, { headers, signal: abort.signal }).catch(() => 'aborted');
      await waitFor(async () => (small.app.readLimits.longPolls.inUse === 1 ? true : undefined), 'the read to wait');
      const second = await fetch(`${base}/api/v1/webhooks/feed?wait=30`, { headers });
      expect(second.status).toBe(429);
      expect(second.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(await second.json()).toMatchObject({ message: expect.stringContaining('per key or user') });
      abort.abort();
      expect(await leaving).toBe('aborted');
      await waitFor(async () => (small.app.readLimits.longPolls.inUse === 0 ? true : undefined), 'the place to be freed', 2_000);
    } finally {
      await small.close();
    }
  });
});
