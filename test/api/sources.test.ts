import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import type { WebhookDefinition } from '@octokit/webhooks-examples';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { Management } from '../../src/services/management.js';
import type { SourceInput } from '../../src/sources/settings.js';
import { buildTestApp, freshStore, sendWebhook, testSecretBox, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { ADMISSION_GATE_OFF } from '../support/processes.js';
import { member } from '../support/api.js';

/**
 * Sources through the whole service (route, verification, group commit, reads), with
 * requests signed by the providers' own code: a webhook signed as the provider signs it is
 * stored byte for byte; anything else is refused in the contract's words and logged with
 * its reason in the request log.
 */

const BASE_URL = 'https://hooks.example.com';
const examples = createRequire(import.meta.url)('@octokit/webhooks-examples') as WebhookDefinition[];
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ INTAKE_BASE_URL: BASE_URL });
});
afterAll(() => t.close());

const stripe = new Stripe('sk_test_unused');

async function github(tenant: TestTenant, body: string, headers: Record<string, string> = {}) {
  return sendWebhook(t.app, tenant.integrationKey, {
    body,
    headers: {
      'x-github-event': 'issues',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': await signGitHub(tenant.sourceSecret!, body),
      ...headers,
    },
  });
}

function stripeHeaders(secret: string, body: string, timestamp = Math.floor(Date.now() / 1000)) {
  return { 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp }) };
}

async function requestLog(tenant: TestTenant) {
  return t.store.listRequestLog(tenant.companyId, tenant.integrationId, 50);
}

async function storedWebhook(tenant: TestTenant, uuid: string) {
  const response = await t.app.inject({
    method: 'GET',
    url: `/api/webhooks/${tenant.integrationKey}/${uuid}`,
    headers: { 'x-api-key': tenant.apiKey },
  });
  expect(response.statusCode).toBe(200);
  return response.json() as { event: string; data: unknown; raw_body: string };
}

describe('github', () => {
  let tenant: TestTenant;
  beforeAll(async () => {
    tenant = await t.newTenant({ source: { type: 'github' } });
  });

  test('intake generates the secret, and a body GitHub signed is stored byte for byte with its event', async () => {
    expect(tenant.sourceSecret).toMatch(/^.{32,}$/);
    const body = JSON.stringify({ action: 'opened', issue: { number: 7, title: 'naïve ✓' } }, null, 2);
    const response = await github(tenant, body);
    expect(response.statusCode).toBe(202);
    const { uuid } = response.json() as { uuid: string };
    const stored = await storedWebhook(tenant, uuid);
    expect(stored.raw_body).toBe(body);
    expect(stored.event).toBe('issues.opened');
    expect(stored.data).toEqual(JSON.parse(body));
    const logged = await waitFor(async () => (await requestLog(tenant)).find((row) => row.webhookUuid === uuid), 'the log row');
    expect(logged.keyId).toBe(tenant.sourceSecretId);
  });

  test('every payload of @octokit/webhooks-examples, sent as GitHub sends it, is stored with its event name', async () => {
    const expected: Array<{ uuid: string; event: string; body: string }> = [];
    // The corpus lists a few examples twice: the same signed bytes again are a replay.
    const sent = new Set<string>();
    for (const definition of examples) {
      for (const example of definition.examples) {
        const body = JSON.stringify(example);
        if (sent.has(body)) continue;
        sent.add(body);
        const response = await sendWebhook(t.app, tenant.integrationKey, {
          body,
          headers: {
            'user-agent': 'GitHub-Hookshot/044aadd',
            'x-github-event': definition.name,
            'x-github-delivery': randomUUID(),
            'x-github-hook-id': '292430182',
            'x-hub-signature': 'sha1=ignored-by-intake',
            'x-hub-signature-256': await signGitHub(tenant.sourceSecret!, body),
          },
        });
        expect(response.statusCode, `${definition.name}: ${response.body}`).toBe(202);
        const action = (example as { action?: unknown }).action;
        expected.push({
          uuid: (response.json() as { uuid: string }).uuid,
          event: typeof action === 'string' ? `${definition.name}.${action}` : definition.name,
          body,
        });
      }
    }
    expect(expected.length).toBeGreaterThan(300);
    for (const sample of [expected[0]!, expected[Math.floor(expected.length / 2)]!, expected.at(-1)!]) {
      const stored = await storedWebhook(tenant, sample.uuid);
      expect(stored).toMatchObject({ event: sample.event, raw_body: sample.body });
    }
    const stored = await t.store.listCompanyWebhooks(tenant.companyId, { integrationId: tenant.integrationId, limit: 200 });
    const events = new Map(expected.map((e) => [e.uuid, e.event]));
    for (const webhook of stored.webhooks) if (events.has(webhook.uuid)) expect(webhook.event).toBe(events.get(webhook.uuid));
  });

  test("GitHub's redelivery of the same delivery is a replay, not a second webhook", async () => {
    const body = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
    const delivery = randomUUID();
    const first = await github(tenant, body, { 'x-github-event': 'ping', 'x-github-delivery': delivery });
    const again = await github(tenant, body, { 'x-github-event': 'ping', 'x-github-delivery': delivery });
    expect(first.statusCode).toBe(202);
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
  });

  test('a flipped byte, a wrong secret and a missing header are refused in the contract words, and logged with the reason', async () => {
    const body = '{"action":"closed","number":1}';
    const signature = await signGitHub(tenant.sourceSecret!, body);
    const flipped = await sendWebhook(t.app, tenant.integrationKey, {
      body: body.replace('closed', 'clised'),
      headers: { 'x-github-event': 'issues', 'x-hub-signature-256': signature },
    });
    const wrongSecret = await sendWebhook(t.app, tenant.integrationKey, {
      body,
      headers: { 'x-github-event': 'issues', 'x-hub-signature-256': await signGitHub('not the secret', body) },
    });
    const missing = await sendWebhook(t.app, tenant.integrationKey, { body, headers: { 'x-github-event': 'issues' } });
    for (const response of [flipped, wrongSecret, missing]) {
      expect(response.statusCode).toBe(401);
      expect(response.json()).toMatchObject({ error: 'Invalid signature', code: 'invalid_signature' });
      expect((response.json() as { message: string }).message).toContain('X-Hub-Signature-256');
    }
    expect((missing.json() as { message: string }).message).toMatch(/missing/i);
    const refused = await waitFor(async () => {
      const rows = (await requestLog(tenant)).filter((row) => row.errorCode === 'invalid_signature');
      return rows.length >= 3 ? rows : undefined;
    }, 'three refusals in the log');
    expect(refused.map((row) => row.errorDetail)).toEqual(expect.arrayContaining([expect.stringMatching(/does not match/), expect.stringMatching(/missing/)]));
    expect(refused.every((row) => row.keyId === null && row.status === 401)).toBe(true);
  });

  test('the API key still works on a provider source, with the envelope rules; a bad key is still the contract 401', async () => {
    const accepted = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
    expect(accepted.statusCode).toBe(202);
    const stored = await storedWebhook(tenant, (accepted.json() as { uuid: string }).uuid);
    expect(stored).toMatchObject({ event: 'test.event', data: { n: 1 } });
    const badKey = await sendWebhook(t.app, tenant.integrationKey, { apiKey: 'whk_dev_nope' });
    expect(badKey.json()).toMatchObject({ error: 'Invalid API key' });
  });

  test('a disabled integration refuses a well-signed webhook with 403, a badly signed one with 401', async () => {
    const other = await t.newTenant({ source: { type: 'github' } });
    await t.management.setIntegrationEnabled(other.companyId, other.integrationId, false);
    await waitFor(async () => {
      const response = await github(other, '{"action":"x"}');
      return response.statusCode === 403 ? response : undefined;
    }, 'the disable to reach the key cache');
    const bad = await sendWebhook(t.app, other.integrationKey, { body: '{}', headers: { 'x-hub-signature-256': 'sha256=00' } });
    expect(bad.statusCode).toBe(401);
  });
});

describe('stripe', () => {
  const secret = `whsec_${randomBytes(24).toString('hex')}`;
  let tenant: TestTenant;
  beforeAll(async () => {
    tenant = await t.newTenant({ source: { type: 'stripe', secret } });
  });

  test("created before Stripe shows its secret: the address first, signed webhooks refused saying why, then the pasted secret verifies", async () => {
    const company = (await t.management.createCompany('Address first')).id;
    const headers = (await member(t, company, 'owner')).change;
    const created = await t.app.inject({
      method: 'POST',
      url: '/api/v1/integrations',
      headers,
      payload: { name: 'Payments', source: { type: 'stripe' } },
    });
    expect(created.statusCode).toBe(201);
    const answer = created.json() as { integration: { id: string; integration_key: string; webhook_url: string }; awaiting_secret: boolean };
    expect(answer).toMatchObject({ awaiting_secret: true, integration: { webhook_url: expect.stringContaining(answer.integration.integration_key) } });
    expect(answer).not.toHaveProperty('source_secret');
    const id = answer.integration.id;
    const secretsPath = `/api/v1/integrations/${id}/source-secrets`;
    expect((await t.app.inject({ method: 'GET', url: secretsPath, headers })).json()).toEqual({ data: [] });
    const waitingNow = async () => {
      const one = (await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${id}`, headers })).json() as {
        source: { awaiting_secret?: boolean };
      };
      const listed = (await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers })).json() as {
        data: { id: string; source: { awaiting_secret?: boolean } }[];
      };
      expect(listed.data.find((item) => item.id === id)!.source.awaiting_secret).toBe(one.source.awaiting_secret);
      return one.source.awaiting_secret;
    };
    expect(await waitingNow()).toBe(true);

    // Stripe's first event, signed with the secret intake has not been given yet: refused, and the answer says why.
    const pasted = `whsec_${randomBytes(24).toString('hex')}`;
    const send = () => {
      const body = JSON.stringify({ id: `evt_${randomUUID()}`, object: 'event', type: 'checkout.session.completed', data: { object: {} } });
      return sendWebhook(t.app, answer.integration.integration_key, { body, headers: stripeHeaders(pasted, body) });
    };
    const early = await send();
    expect(early.statusCode).toBe(401);
    expect(early.json()).toMatchObject({
      error: 'Invalid signature',
      message: expect.stringMatching(/^This source is waiting for its signing secret: paste the one stripe gives you/),
    });
    const test1 = await t.app.inject({ method: 'POST', url: `/api/v1/integrations/${id}/source-test`, headers });
    expect(test1.statusCode).toBe(409);
    expect(test1.json()).toMatchObject({ error: expect.any(String), message: expect.stringMatching(/waiting for its signing secret/) });

    // Pasted: the secret Stripe signs with verifies at once, and the test goes through.
    const added = await t.app.inject({ method: 'POST', url: secretsPath, headers, payload: { secret: pasted, previous_expires_in_seconds: 0 } });
    expect(added.statusCode).toBe(201);
    expect(added.json()).not.toHaveProperty('source_secret');
    expect(await waitingNow()).toBe(false);
    expect((await send()).statusCode).toBe(202);
    const test2 = await t.app.inject({ method: 'POST', url: `/api/v1/integrations/${id}/source-test`, headers });
    expect(test2.json()).toMatchObject({ status: 202 });

    // Changing to another provider that issues its own secret, without it: waiting again, the old secret ended.
    const changed = await t.app.inject({ method: 'PUT', url: `/api/v1/integrations/${id}/source`, headers, payload: { type: 'shopify' } });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({ awaiting_secret: true, integration: { source: { type: 'shopify' } } });
    expect((await t.app.inject({ method: 'GET', url: secretsPath, headers })).json()).toEqual({ data: [] });
    // The same type again without a secret: still waiting, and said so; with its secret: no longer.
    const same = await t.app.inject({ method: 'PUT', url: `/api/v1/integrations/${id}/source`, headers, payload: { type: 'shopify' } });
    expect(same.json()).toMatchObject({ awaiting_secret: true });
    const given = await t.app.inject({
      method: 'PUT',
      url: `/api/v1/integrations/${id}/source`,
      headers,
      payload: { type: 'shopify', secret: 'shpss_abc123def456ghi789' },
    });
    expect(given.json()).toMatchObject({ awaiting_secret: false, source_secret_id: expect.stringMatching(/^sec_/) });
    // A provider that takes ours still gets one generated; an api_key source says nothing of secrets.
    const github = await t.app.inject({ method: 'PUT', url: `/api/v1/integrations/${id}/source`, headers, payload: { type: 'github' } });
    expect(github.json()).toMatchObject({ awaiting_secret: false, source_secret: expect.any(String) });
    const plain = await t.app.inject({ method: 'PUT', url: `/api/v1/integrations/${id}/source`, headers, payload: { type: 'api_key' } });
    expect(plain.json()).not.toHaveProperty('awaiting_secret');
    expect(plain.json()).not.toHaveProperty('integration.source.awaiting_secret');
    expect(await waitingNow()).toBeUndefined();
    // Rotating still needs the secret pasted where the provider issues it.
    const waiting = await t.management.createIntegration(company, { name: 'Waiting', source: { type: 'stripe' } });
    await expect(t.management.rotateSourceSecret(company, waiting.integration.id, undefined)).rejects.toMatchObject({ code: 'invalid_request' });
  });

  test("Stripe's own test header is accepted; event from type, delivery from id; a retry is a replay", async () => {
    const body = JSON.stringify({ id: `evt_${randomUUID()}`, object: 'event', type: 'payment_intent.succeeded', data: { object: { amount: 2000 } } });
    const first = await sendWebhook(t.app, tenant.integrationKey, { body, headers: stripeHeaders(secret, body) });
    expect(first.statusCode).toBe(202);
    const stored = await storedWebhook(tenant, (first.json() as { uuid: string }).uuid);
    expect(stored.event).toBe('payment_intent.succeeded');
    expect(stored.raw_body).toBe(body);
    // Stripe signs each retry anew, with a new timestamp: the event id makes it the same delivery.
    const retry = await sendWebhook(t.app, tenant.integrationKey, { body, headers: stripeHeaders(secret, body, Math.floor(Date.now() / 1000) - 5) });
    expect(retry.statusCode).toBe(200);
  });

  test('a timestamp outside 300 s is Signature expired, refused before the body is judged', async () => {
    const body = JSON.stringify({ id: 'evt_old', type: 'charge.failed' });
    const old = await sendWebhook(t.app, tenant.integrationKey, { body, headers: stripeHeaders(secret, body, Math.floor(Date.now() / 1000) - 420) });
    expect(old.statusCode).toBe(401);
    expect(old.json()).toMatchObject({ error: 'Signature expired', code: 'signature_expired' });
    const logged = await waitFor(async () => (await requestLog(tenant)).find((row) => row.errorCode === 'signature_expired'), 'the refusal');
    expect(logged.errorDetail).toMatch(/7 minutes old/);
  });

  test('rotation: old and new both verify during the overlap; stopping the old one refuses it', async () => {
    const rotated = `whsec_${randomBytes(24).toString('hex')}`;
    const result = await t.management.rotateSourceSecret(tenant.companyId, tenant.integrationId, rotated, 3600);
    expect(result.secret).toBeUndefined();
    const send = (key: string) => {
      const body = JSON.stringify({ id: `evt_${randomUUID()}`, type: 'invoice.paid' });
      return sendWebhook(t.app, tenant.integrationKey, { body, headers: stripeHeaders(key, body) });
    };
    await waitFor(async () => ((await send(rotated)).statusCode === 202 ? true : undefined), 'the new secret to verify');
    expect((await send(secret)).statusCode).toBe(202);
    const secrets = await t.store.listSourceSecrets(tenant.companyId, tenant.integrationId, Date.now());
    expect(secrets).toHaveLength(2);
    await t.management.endSourceSecret(tenant.companyId, tenant.integrationId, tenant.sourceSecretId!);
    await waitFor(async () => ((await send(secret)).statusCode === 401 ? true : undefined), 'the old secret to stop');
    expect((await send(rotated)).statusCode).toBe(202);
    await expect(t.management.endSourceSecret(tenant.companyId, tenant.integrationId, result.id)).rejects.toMatchObject({ code: 'conflict' });
  });
});

test('slack: the url_verification challenge is answered, not stored', async () => {
  const secret = randomBytes(16).toString('hex');
  const tenant = await t.newTenant({ source: { type: 'slack', secret } });
  const body = JSON.stringify({ token: 'x', challenge: 'chal-123', type: 'url_verification' });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
  const response = await sendWebhook(t.app, tenant.integrationKey, {
    body,
    headers: { 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature },
  });
  expect(response.statusCode).toBe(200);
  expect(response.json()).toEqual({ challenge: 'chal-123' });
  const webhooks = await t.store.listCompanyWebhooks(tenant.companyId, { limit: 10 });
  expect(webhooks.webhooks).toHaveLength(0);
});

test('twilio: a form signed over the public address is stored as sent, data the form as an object', async () => {
  const token = randomBytes(16).toString('hex');
  const tenant = await t.newTenant({ source: { type: 'twilio', secret: token } });
  const fields = { MessageSid: 'SM123', MessageStatus: 'delivered', To: '+15551234567', Body: 'héllo & bye' };
  const body = new URLSearchParams(fields).toString();
  const url = `${BASE_URL}/api/webhooks/${tenant.integrationKey}`;
  const response = await sendWebhook(t.app, tenant.integrationKey, {
    body,
    contentType: 'application/x-www-form-urlencoded',
    headers: { 'x-twilio-signature': twilio.getExpectedTwilioSignature(token, url, fields) },
  });
  expect(response.statusCode).toBe(202);
  const stored = await storedWebhook(tenant, (response.json() as { uuid: string }).uuid);
  expect(stored.raw_body).toBe(body);
  expect(stored.data).toEqual(fields);
  expect(stored.event).toBe('message.delivered');
  const json = await sendWebhook(t.app, tenant.integrationKey, { body: JSON.stringify(fields), headers: { 'x-twilio-signature': 'nope' } });
  expect(json.statusCode).toBe(401);
});

test('standard webhooks: signed by the standardwebhooks library; webhook-id is the delivery', async () => {
  const tenant = await t.newTenant({ source: { type: 'standard_webhooks' } });
  expect(tenant.sourceSecret).toMatch(/^whsec_/);
  const body = JSON.stringify({ type: 'user.created', data: { id: 1 } });
  const id = `msg_${randomUUID()}`;
  const at = new Date();
  const signature = new Webhook(tenant.sourceSecret!).sign(id, at, body);
  const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature };
  const first = await sendWebhook(t.app, tenant.integrationKey, { body, headers });
  expect(first.statusCode).toBe(202);
  expect((await storedWebhook(tenant, (first.json() as { uuid: string }).uuid)).event).toBe('user.created');
  expect((await sendWebhook(t.app, tenant.integrationKey, { body, headers })).statusCode).toBe(200);
});

test("gitlab: the token GitLab sends is checked and never stored with the webhook's headers", async () => {
  const tenant = await t.newTenant({ source: { type: 'gitlab' } });
  const body = JSON.stringify({ object_kind: 'merge_request', object_attributes: { action: 'open' } });
  const refused = await sendWebhook(t.app, tenant.integrationKey, { body, headers: { 'x-gitlab-token': 'not-the-token-at-all' } });
  expect(refused.statusCode).toBe(401);
  const response = await sendWebhook(t.app, tenant.integrationKey, {
    body,
    headers: { 'x-gitlab-token': tenant.sourceSecret!, 'x-gitlab-event': 'Merge Request Hook' },
  });
  expect(response.statusCode).toBe(202);
  const uuid = (response.json() as { uuid: string }).uuid;
  const read = await t.app.inject({
    method: 'GET',
    url: `/api/webhooks/${tenant.integrationKey}/${uuid}`,
    headers: { 'x-api-key': tenant.apiKey },
  });
  expect(read.json()).toMatchObject({ event: 'merge_request.open', headers: { 'x-gitlab-event': 'Merge Request Hook' } });
  expect(read.body).not.toContain(tenant.sourceSecret);
});

test('a provider source refuses a Content-Type its provider does not send with 415, and logs the reason it answered', async () => {
  const tenant = await t.newTenant({ source: { type: 'stripe', secret: `whsec_${randomBytes(24).toString('hex')}` } });
  const response = await sendWebhook(t.app, tenant.integrationKey, {
    body: 'a=1',
    contentType: 'application/x-www-form-urlencoded',
    headers: stripeHeaders(tenant.sourceSecret!, 'a=1'),
  });
  expect(response.statusCode).toBe(415);
  const { message } = response.json() as { message: string };
  expect(message).toBe('A stripe source takes JSON (application/json) bodies.');
  const logged = await waitFor(async () => (await requestLog(tenant)).find((row) => row.status === 415), 'the refusal');
  expect(logged.errorDetail).toBe(message);
});

test('a missing timestamp header is Invalid signature, its reason naming the header (Slack, Standard Webhooks, hmac)', async () => {
  const body = '{"type":"x"}';
  const cases: Array<{ source: SourceInput; headers: Record<string, string>; reason: string }> = [
    { source: { type: 'slack', secret: randomBytes(16).toString('hex') }, headers: { 'x-slack-signature': `v0=${'0'.repeat(64)}` }, reason: 'X-Slack-Request-Timestamp header is missing' },
    {
      source: { type: 'standard_webhooks' },
      headers: { 'webhook-id': 'msg_1', 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` },
      reason: 'webhook-timestamp header is missing',
    },
    {
      source: { type: 'hmac', config: { timestamp_header: 'X-Timestamp' } },
      headers: { 'x-signature': '0'.repeat(64) },
      reason: 'X-Timestamp header is missing',
    },
  ];
  for (const { source, headers, reason } of cases) {
    const tenant = await t.newTenant({ source });
    const response = await sendWebhook(t.app, tenant.integrationKey, { body, headers });
    expect(response.statusCode, source.type).toBe(401);
    // The answer's message is the reason as a sentence, its first letter capitalised.
    expect(response.json()).toMatchObject({ error: 'Invalid signature', message: expect.stringContaining(reason.slice(1)) });
    const logged = await waitFor(async () => (await requestLog(tenant)).find((row) => row.status === 401), 'the refusal');
    expect(logged.errorDetail).toBe(reason);
  }
});

test('refused signatures count against the address like refused keys', async () => {
  const limited = await buildTestApp({ INTAKE_AUTH_FAILURE_LIMIT: '3' });
  try {
    const tenant = await limited.newTenant({ source: { type: 'github' } });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await sendWebhook(limited.app, tenant.integrationKey, { body: '{}', headers: { 'x-hub-signature-256': 'sha256=00' } });
      statuses.push(response.statusCode);
    }
    expect(statuses.slice(0, 3)).toEqual([401, 401, 401]);
    expect(statuses.slice(3)).toEqual([429, 429]);
  } finally {
    await limited.close();
  }
});

describe('the management API', () => {
  test('creates, shows, changes and tests a source without ever showing a secret again', async () => {
    const company = (await t.management.createCompany('Sources API')).id;
    const headers = (await member(t, company, 'owner')).change;
    const created = await t.app.inject({
      method: 'POST',
      url: '/api/v1/integrations',
      headers,
      payload: { name: 'GitHub', source: { type: 'github' } },
    });
    expect(created.statusCode).toBe(201);
    const answer = created.json() as { integration: { id: string; source: unknown }; source_secret: string; source_secret_id: string };
    expect(answer.integration.source).toEqual({ type: 'github', config: {}, signature_header: 'X-Hub-Signature-256', awaiting_secret: false });
    expect(answer.source_secret).toBeTruthy();
    const id = answer.integration.id;

    const test1 = await t.app.inject({ method: 'POST', url: `/api/v1/integrations/${id}/source-test`, headers });
    expect(test1.json()).toMatchObject({ status: 202, answer: { uuid: expect.any(String) } });

    const read = await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${id}`, headers });
    const secrets = await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${id}/source-secrets`, headers });
    expect(secrets.json()).toEqual({ data: [{ id: answer.source_secret_id, created_at: expect.any(String), expires_at: null }] });
    for (const response of [read, secrets]) expect(response.body).not.toContain(answer.source_secret);

    const changed = await t.app.inject({
      method: 'PUT',
      url: `/api/v1/integrations/${id}/source`,
      headers,
      payload: { type: 'hmac', config: { header: 'X-Signature', prefix: 'sha256=' } },
    });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({
      integration: { source: { type: 'hmac', config: { header: 'X-Signature', prefix: 'sha256=', algorithm: 'sha256' } } },
      source_secret: expect.any(String),
    });
    const test2 = await t.app.inject({ method: 'POST', url: `/api/v1/integrations/${id}/source-test`, headers });
    expect(test2.json()).toMatchObject({ status: 202 });
    const audit = await t.app.inject({ method: 'GET', url: '/api/v1/audit-log', headers });
    expect(audit.body).toContain('integration.source');
    // The record names the secret that replaced the old ones (never its value).
    expect(audit.body).toContain((changed.json() as { source_secret_id: string }).source_secret_id);
    expect(audit.body).not.toContain(answer.source_secret);
    expect(audit.body).not.toContain((changed.json() as { source_secret: string }).source_secret);
  });

  test('refuses an unknown type and a bad hmac setting, naming the field', async () => {
    const company = (await t.management.createCompany('Sources API')).id;
    const headers = (await member(t, company, 'owner')).change;
    const unknown = await t.app.inject({ method: 'POST', url: '/api/v1/integrations', headers, payload: { name: 'x', source: { type: 'paypal' } } });
    expect(unknown.statusCode).toBe(400);
    const badHeader = await t.app.inject({
      method: 'POST',
      url: '/api/v1/integrations',
      headers,
      payload: { name: 'x', source: { type: 'hmac', config: { header: 'bad header:' } } },
    });
    expect(badHeader.statusCode).toBe(400);
    expect(badHeader.json()).toMatchObject({ field: 'source_config' });
  });

  test('a secret over 1,000 characters is a 400 naming the field, wherever a secret is sent', async () => {
    const company = (await t.management.createCompany('Sources API')).id;
    const headers = (await member(t, company, 'owner')).change;
    const long = `whsec_${'a'.repeat(1000)}`;
    const created = await t.app.inject({ method: 'POST', url: '/api/v1/integrations', headers, payload: { name: 'x', source: { type: 'stripe', secret: long } } });
    const id = (
      (await t.app.inject({ method: 'POST', url: '/api/v1/integrations', headers, payload: { name: 'y', source: { type: 'github' } } })).json() as {
        integration: { id: string };
      }
    ).integration.id;
    const changed = await t.app.inject({ method: 'PUT', url: `/api/v1/integrations/${id}/source`, headers, payload: { type: 'stripe', secret: long } });
    const rotated = await t.app.inject({ method: 'POST', url: `/api/v1/integrations/${id}/source-secrets`, headers, payload: { secret: long } });
    for (const response of [created, changed, rotated]) {
      expect(response.statusCode, response.body).toBe(400);
      expect(response.json()).toMatchObject({ error: expect.any(String), field: 'secret', message: 'The secret must be at most 1000 characters.' });
      expect(response.body).not.toContain(long);
    }
  });
});

test('at LOG_LEVEL=debug, a signature refused or verified is logged with the integration, the provider and the reason; never a secret, a signature or a body', async () => {
  const lines: string[] = [];
  const database = await freshStore();
  const config = loadConfig({ LOG_LEVEL: 'debug', ...ADMISSION_GATE_OFF });
  const logger = createLogger('debug', { write: (line: string) => void lines.push(line) });
  const app = await buildApp({ config, store: database.store, logger, secrets: testSecretBox() });
  try {
    const management = new Management(database.store, { ...config, secrets: testSecretBox() }, { type: 'cli', id: 'test', ip: null });
    const company = (await management.createCompany('Debugging')).id;
    const created = await management.createIntegration(company, { name: 'GitHub', source: { type: 'github' } });
    const secret = created.sourceSecret!;
    const body = '{"action":"opened","note":"a body that must stay out of the log"}';
    const wrong = await signGitHub('not the secret at all', body);
    const right = await signGitHub(secret, body);
    const send = (signature: string, contentType = 'application/json') =>
      sendWebhook(app, created.integration.integrationKey, { body, contentType, headers: { 'x-github-event': 'issues', 'x-hub-signature-256': signature } });
    expect((await send(wrong)).statusCode).toBe(401);
    expect((await send(right)).statusCode).toBe(202);
    expect((await send(right, 'text/plain')).statusCode).toBe(415);

    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const debug = (msg: string) => entries.find((entry) => entry.msg === msg && entry.level === 20);
    const source = { integration_id: created.integration.id, provider: 'github' };
    expect(debug('source signature refused')).toMatchObject({ ...source, code: 'invalid_signature', reason: 'signature does not match the secret' });
    expect(debug('source signature verified')).toMatchObject({ ...source, secret_id: created.sourceSecretId, event: 'issues.opened' });
    expect(debug('source refused the content type')).toMatchObject({ ...source, content_type: 'text/plain' });
    const written = lines.join('');
    for (const hidden of [secret, wrong, right, wrong.slice('sha256='.length), right.slice('sha256='.length), 'a body that must stay out of the log']) {
      expect(written).not.toContain(hidden);
    }
  } finally {
    await app.close();
    await database.cleanup();
  }
});

test('secrets are absent in plain text from the database files and the WAL', async (context) => {
  if (t.store.dialect !== 'sqlite') context.skip();
  const secret = `whsec_${randomBytes(24).toString('hex')}`;
  const tenant = await t.newTenant({ source: { type: 'stripe', secret } });
  const body = JSON.stringify({ id: 'evt_plain', type: 'x' });
  expect((await sendWebhook(t.app, tenant.integrationKey, { body, headers: stripeHeaders(secret, body) })).statusCode).toBe(202);
  const directory = dirname(t.database.databaseUrl.slice('sqlite:'.length));
  const files = readdirSync(directory).filter((name) => name.includes('.db'));
  expect(files.length).toBeGreaterThan(0);
  for (const name of files) {
    const bytes = readFileSync(join(directory, name));
    expect(bytes.includes(Buffer.from(secret)), name).toBe(false);
    expect(bytes.includes(Buffer.from(secret.slice(6))), name).toBe(false);
  }
});
