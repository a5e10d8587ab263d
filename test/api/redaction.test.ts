import { randomUUID } from 'node:crypto';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp } from '../helpers.js';
import { managementKey, member } from '../support/api.js';
import { REDACTED } from '../../src/domain/redaction.js';

/**
 * Redaction before storing, through the whole service: an integration's paths and header
 * names are replaced before the webhook is stored, after its signature was checked on the
 * bytes as received; every read (the stored body, data, headers, the feed) has the
 * redacted form, and the rest of the body is the bytes as sent.
 */

let t: TestApp;
let headers: Record<string, string>;
let companyId: string;
beforeAll(async () => {
  t = await buildTestApp();
  companyId = (await t.management.createCompany('Redacting')).id;
  headers = (await member(t, companyId, 'owner')).change;
});
afterAll(() => t.close());

const REDACTION = { paths: ['data.customer.email', '$..phone'], headers: ['X-Customer-Email'] };

async function create(payload: object) {
  const created = await t.app.inject({ method: 'POST', url: '/api/v1/integrations', headers, payload });
  expect(created.statusCode, created.body).toBe(201);
  return created.json() as { integration: { id: string; integration_key: string; redaction: unknown }; api_key: string; source_secret?: string };
}

async function stored(uuid: string) {
  const read = await t.app.inject({ method: 'GET', url: `/api/v1/webhooks/${uuid}`, headers });
  expect(read.statusCode, read.body).toBe(200);
  return read.json() as { raw_body: string; data: unknown; headers: Record<string, string> };
}

test('the named values are replaced before storing; the rest of the body is the bytes as sent', async () => {
  const { integration, api_key } = await create({ name: 'Shop', redaction: REDACTION });
  expect(integration.redaction).toEqual({ paths: REDACTION.paths, headers: ['x-customer-email'], mode: 'redact' });
  const body =
    '{"event":"order.paid",  "data":{"customer":{"email":"ada@example.com","phone":"+15551234567","name":"Ada"},\n "amount": 1.50e3}}';
  const sent = await sendWebhook(t.app, integration.integration_key, {
    apiKey: api_key,
    body,
    headers: { 'x-customer-email': 'ada@example.com', 'x-order': '1001' },
  });
  expect(sent.statusCode, sent.body).toBe(202);
  const webhook = await stored((sent.json() as { uuid: string }).uuid);
  expect(webhook.raw_body).toBe(
    '{"event":"order.paid",  "data":{"customer":{"email":"[redacted]","phone":"[redacted]","name":"Ada"},\n "amount": 1.50e3}}',
  );
  expect(webhook.data).toEqual({ customer: { email: '[redacted]', phone: '[redacted]', name: 'Ada' }, amount: 1500 });
  expect(webhook.headers).toMatchObject({ 'x-customer-email': '[redacted]', 'x-order': '1001' });

  // The feed reads what was stored.
  const feed = await t.app.inject({ method: 'GET', url: '/api/v1/webhooks/feed', headers });
  expect(feed.body).not.toContain('ada@example.com');
  expect(feed.body).not.toContain('+15551234567');

  // Taken off: the next webhook is stored whole; the one before stays redacted.
  const off = await t.app.inject({ method: 'PATCH', url: `/api/v1/integrations/${integration.id}`, headers, payload: { redaction: null } });
  expect(off.json()).toMatchObject({ redaction: null });
  const whole = await sendWebhook(t.app, integration.integration_key, { apiKey: api_key, body });
  await expect.poll(async () => (await stored((whole.json() as { uuid: string }).uuid)).raw_body).toBe(body);
});

test("a provider's signature is checked on the bytes received, then the body is stored redacted", async () => {
  const { integration, source_secret } = await create({ name: 'Repo', source: { type: 'github' }, redaction: { paths: ['$..email'] } });
  const body = JSON.stringify({ action: 'opened', sender: { login: 'ada', email: 'ada@example.com' } });
  const sent = await sendWebhook(t.app, integration.integration_key, {
    body,
    headers: { 'x-github-event': 'issues', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': await signGitHub(source_secret!, body) },
  });
  expect(sent.statusCode, sent.body).toBe(202);
  expect((await stored((sent.json() as { uuid: string }).uuid)).raw_body).toBe(body.replace('"ada@example.com"', '"[redacted]"'));
});

test('a bad path or header name is a 400 naming redaction, and changes nothing', async () => {
  const { integration } = await create({ name: 'Plain' });
  expect(integration.redaction).toBeNull();
  for (const redaction of [{ paths: ['a..b'] }, { headers: ['not a header'] }, { paths: Array.from({ length: 21 }, (_, i) => `p${i}`) }]) {
    const refused = await t.app.inject({ method: 'PATCH', url: `/api/v1/integrations/${integration.id}`, headers, payload: { redaction } });
    expect(refused.statusCode, JSON.stringify(redaction)).toBe(400);
    expect(refused.json()).toMatchObject({ error: expect.any(String), field: 'redaction', message: expect.any(String) });
  }
  const read = await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${integration.id}`, headers });
  expect(read.json()).toMatchObject({ redaction: null });
  const created = await t.app.inject({ method: 'POST', url: '/api/v1/integrations', headers, payload: { name: 'Bad', redaction: { paths: ['$..'] } } });
  expect(created.statusCode).toBe(400);
  expect(created.json()).toMatchObject({ field: 'redaction' });
});

test.each(['github', 'gitlab', 'stripe', 'shopify', 'slack', 'standard_webhooks', 'twilio', 'hmac', 'basic', 'query_token'])(
  "%s: the provider's sample, signed as the provider signs it, is verified on the bytes received and stored redacted",
  async (type) => {
    // `$..*` names every value: a check made after redaction could not pass.
    // Secrets the provider issues are given (Stripe's whsec_, Twilio's auth token…); intake makes the others.
    const secrets: Record<string, string> = {
      stripe: 'whsec_redactiontest0123456789',
      shopify: 'redaction-test-secret-0123456789',
      slack: '0123456789abcdefABCDEF0123456789',
      twilio: '0123456789abcdef0123456789abcdef',
    };
    const given = secrets[type] === undefined ? {} : { secret: secrets[type] };
    const { integration } = await create({ name: `Signed by ${type}`, source: { type, ...given }, redaction: { paths: ['$..*'] } });
    const tested = await t.app.inject({ method: 'POST', url: `/api/v1/integrations/${integration.id}/source-test`, headers, payload: {} });
    expect(tested.statusCode, tested.body).toBe(200);
    const { status, answer } = tested.json() as { status: number; answer: { uuid: string } };
    expect(status, JSON.stringify(answer)).toBe(202);
    const webhook = await stored(answer.uuid);
    expect(webhook.raw_body).toMatch(/\[redacted\]|%5Bredacted%5D/);
    const values = Object.values(webhook.data as Record<string, unknown>);
    expect(values.length).toBeGreaterThan(0);
    expect(values.every((value) => value === REDACTED)).toBe(true);
  },
);

describe('a preview of a redaction on a stored webhook', () => {
  const BODY = '{"event":"order.paid","data":{"customer":{"email":"ada@example.com","phone":"+15551234567","name":"Ada"}}}';
  const OLDER_BODY = '{"event":"order.created","data":{"customer":{"email":"bob@example.com"}}}';
  let integration: { id: string; integration_key: string };
  let older: string;
  let newest: string;
  const preview = (payload: object, as = headers, id = integration.id) =>
    t.app.inject({ method: 'POST', url: `/api/v1/integrations/${id}/redaction/preview`, headers: as, payload });

  beforeAll(async () => {
    // Stored with the phone redacted already, by the integration's own redaction.
    const created = await create({ name: 'Previewed', redaction: { paths: ['$..phone'] } });
    integration = created.integration;
    const send = async (body: string) => {
      const sent = await sendWebhook(t.app, integration.integration_key, { apiKey: created.api_key, body, headers: { 'x-customer-email': 'ada@example.com' } });
      expect(sent.statusCode, sent.body).toBe(202);
      return (sent.json() as { uuid: string }).uuid;
    };
    older = await send(OLDER_BODY);
    newest = await send(BODY);
  });

  test("the newest webhook as the redaction given would store it; the stored one and the integration's redaction unchanged", async () => {
    const answer = await preview({ redaction: { paths: ['data.customer.email', '$..phone'], headers: ['X-Customer-Email'] } });
    expect(answer.statusCode, answer.body).toBe(200);
    const shown = answer.json() as { webhook_uuid: string; received_at: string; raw_body: string; headers: Record<string, string>; replaced: unknown; changed: boolean };
    expect(shown).toMatchObject({
      webhook_uuid: newest,
      received_at: expect.any(String),
      raw_body: '{"event":"order.paid","data":{"customer":{"email":"[redacted]","phone":"[redacted]","name":"Ada"}}}',
      // The phone counts though it was stored redacted already.
      replaced: { body_values: 2, headers: ['x-customer-email'] },
      changed: true,
    });
    expect(shown.headers['x-customer-email']).toBe(REDACTED);
    expect(answer.body).not.toContain('ada@example.com');

    const stored = await t.app.inject({ method: 'GET', url: `/api/v1/webhooks/${newest}`, headers });
    expect(stored.json()).toMatchObject({
      raw_body: BODY.replace('"+15551234567"', '"[redacted]"'),
      headers: { 'x-customer-email': 'ada@example.com' },
    });
    const read = await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${integration.id}`, headers });
    expect(read.json()).toMatchObject({ redaction: { paths: ['$..phone'], headers: [], mode: 'redact' } });
    const audit = await t.store.listAuditLog(companyId, { limit: 200 });
    expect(audit.filter((record) => record.targetId === integration.id).map((record) => record.action)).toEqual(['integration.create']);
  });

  test('a webhook named by uuid; hash mode shows the hashes intake would store; the redaction as stored changes nothing', async () => {
    const named = await preview({ redaction: { paths: ['$..email'], mode: 'hash' }, webhook_uuid: older });
    expect(named.statusCode, named.body).toBe(200);
    const body = JSON.parse(named.json<{ raw_body: string }>().raw_body) as { data: { customer: { email: string } } };
    expect(body.data.customer.email).toMatch(/^hmac-sha256:[0-9a-f]{32}$/);
    expect(named.json()).toMatchObject({ webhook_uuid: older, changed: true });

    // The same value, stored by an integration of the company that hashes it, is the same hash.
    const hashing = await create({ name: 'Hashing', redaction: { paths: ['$..email'], mode: 'hash' } });
    const sent = await sendWebhook(t.app, hashing.integration.integration_key, { apiKey: hashing.api_key, body: OLDER_BODY });
    expect(JSON.parse((await stored((sent.json() as { uuid: string }).uuid)).raw_body)).toEqual(body);

    const asStored = await preview({ redaction: { paths: ['$..phone'] } });
    expect(asStored.json()).toMatchObject({ replaced: { body_values: 1, headers: [] }, changed: false });
  });

  test('a viewer and a logs:read key may preview; a key with integrations:manage alone may not (it reads a payload)', async () => {
    const payload = { redaction: { paths: ['data.customer.name'] } };
    const viewer = await member(t, companyId, 'viewer');
    const asViewer = await preview(payload, viewer.change);
    expect(asViewer.statusCode, asViewer.body).toBe(200);
    expect(asViewer.json<{ raw_body: string }>().raw_body).toContain('"name":"[redacted]"');
    expect((await preview(payload, await managementKey(t, companyId, ['logs:read']))).statusCode).toBe(200);
    const manageOnly = await preview(payload, await managementKey(t, companyId, ['integrations:manage']));
    expect(manageOnly.statusCode).toBe(403);
    expect(manageOnly.body).not.toContain('Ada');
  });

  test('a redaction that cannot be read is a 400 naming redaction; no webhook yet, or one of another integration, a 404', async () => {
    for (const redaction of [{ paths: ['a..b'] }, { headers: ['not a header'] }, { paths: Array.from({ length: 21 }, (_, i) => `p${i}`) }]) {
      const refused = await preview({ redaction });
      expect(refused.statusCode, JSON.stringify(redaction)).toBe(400);
      expect(refused.json()).toMatchObject({ field: 'redaction', message: expect.any(String) });
    }
    expect((await preview({ redaction: { paths: ['a..b'] } })).json<{ message: string }>().message).toContain('"a..b" is not a path');
    expect((await preview({ redaction: { mode: 'encrypt' } })).statusCode).toBe(400);

    const empty = (await create({ name: 'Quiet' })).integration;
    const none = await preview({ redaction: { paths: ['$..email'] } }, headers, empty.id);
    expect(none.statusCode).toBe(404);
    expect(none.json<{ message: string }>().message).toContain('has received no webhook');
    const elsewhere = await preview({ redaction: { paths: ['$..email'] }, webhook_uuid: newest }, headers, empty.id);
    expect(elsewhere.statusCode).toBe(404);
    expect(elsewhere.body).not.toContain('example.com');
  });

  test('a body over 1 MiB is not scanned for a preview: a 413 that says which to name instead', async () => {
    const { integration: large, api_key } = await create({ name: 'Large', body_limit_bytes: 4 * 1024 * 1024 });
    const body = JSON.stringify({ event: 'export.ready', data: { email: 'ada@example.com', rows: 'x'.repeat(1024 * 1024) } });
    const sent = await sendWebhook(t.app, large.integration_key, { apiKey: api_key, body });
    expect(sent.statusCode, sent.body).toBe(202);
    const refused = await preview({ redaction: { paths: ['$..email'] } }, headers, large.id);
    expect(refused.statusCode).toBe(413);
    expect(refused.json()).toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('webhook_uuid') });
    expect(refused.body).not.toContain('ada@example.com');
  });
});
