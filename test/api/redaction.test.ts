import { randomUUID } from 'node:crypto';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp } from '../helpers.js';
import { member } from '../support/api.js';

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
  expect(integration.redaction).toEqual({ paths: REDACTION.paths, headers: ['x-customer-email'] });
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
