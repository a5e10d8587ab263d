import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { SourceInput } from '../../src/sources/settings.js';
import { IDEMPOTENCY_WINDOW_MS, type PendingWebhook } from '../../src/store/store.js';
import { buildTestApp, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { createTenant, webhook, type Owner } from '../support/webhooks.js';

/**
 * Issue 33, over HTTP on a real port as the review found them: a captured signed request
 * sent again with a new delivery id is a replay of the first (200, its uuid, nothing new
 * stored) for every provider whose delivery id is not signed; and Twilio refuses a JSON
 * body the address's bodySHA256 does not cover. Requests are signed by the providers' own
 * code where they publish it (GitHub, Twilio), else by node:crypto as their docs show.
 */

/** The public address the providers sign (Twilio), as a proxy in front would be set up. */
const BASE_URL = 'https://hooks.example.com';
let t: TestApp;
let origin: string;
beforeAll(async () => {
  t = await buildTestApp({ INTAKE_BASE_URL: BASE_URL });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  origin = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(() => t.close());

interface Answer {
  status: number;
  replayed: string | null;
  body: { uuid?: string; error?: string; message?: string };
}

async function post(path: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const response = await fetch(origin + path, { method: 'POST', body, headers });
  return { status: response.status, replayed: response.headers.get('idempotent-replayed'), body: (await response.json()) as Answer['body'] };
}

/** A request as the provider sent it, and the header of its delivery id (which its signature does not cover). */
interface Captured {
  path: string;
  body: string;
  headers: Record<string, string>;
  deliveryHeader: string;
}

interface Case {
  type: string;
  /** The secret to paste, for the providers that issue their own. */
  secret?: string;
  capture(tenant: TestTenant, secret: string, body: string): Promise<Captured> | Captured;
}

const JSON_TYPE = { 'content-type': 'application/json' };
const address = (tenant: TestTenant) => `/api/webhooks/${tenant.integrationKey}`;
const hmacHex = (secret: string, text: string) => createHmac('sha256', secret).update(text).digest('hex');

const CASES: Case[] = [
  {
    type: 'github',
    capture: async (tenant, secret, body) => ({
      path: address(tenant),
      body,
      headers: { ...JSON_TYPE, 'x-github-event': 'issues', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': await signGitHub(secret, body) },
      deliveryHeader: 'x-github-delivery',
    }),
  },
  {
    type: 'shopify',
    secret: `shpss_${randomBytes(16).toString('hex')}`,
    capture: (tenant, secret, body) => ({
      path: address(tenant),
      body,
      headers: {
        ...JSON_TYPE,
        'x-shopify-topic': 'orders/create',
        'x-shopify-webhook-id': randomUUID(),
        'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body).digest('base64'),
      },
      deliveryHeader: 'x-shopify-webhook-id',
    }),
  },
  {
    type: 'twilio',
    secret: randomBytes(16).toString('hex'),
    capture: (tenant, secret, body) => {
      const fields = { MessageSid: `SM${body.length}`, MessageStatus: 'delivered', Body: body };
      return {
        path: address(tenant),
        body: new URLSearchParams(fields).toString(),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'i-twilio-idempotency-token': randomUUID(),
          'x-twilio-signature': twilio.getExpectedTwilioSignature(secret, BASE_URL + address(tenant), fields),
        },
        deliveryHeader: 'i-twilio-idempotency-token',
      };
    },
  },
  {
    type: 'gitlab',
    capture: (tenant, secret, body) => ({
      path: address(tenant),
      body,
      headers: { ...JSON_TYPE, 'x-gitlab-token': secret, 'idempotency-key': randomUUID() },
      deliveryHeader: 'idempotency-key',
    }),
  },
  {
    type: 'basic',
    capture: (tenant, secret, body) => ({
      path: address(tenant),
      body,
      headers: { ...JSON_TYPE, authorization: `Basic ${Buffer.from(`intake:${secret}`).toString('base64')}`, 'idempotency-key': randomUUID() },
      deliveryHeader: 'idempotency-key',
    }),
  },
  {
    type: 'query_token',
    capture: (tenant, secret, body) => ({
      path: `${address(tenant)}?token=${encodeURIComponent(secret)}`,
      body,
      headers: { ...JSON_TYPE, 'idempotency-key': randomUUID() },
      deliveryHeader: 'idempotency-key',
    }),
  },
  {
    type: 'hmac',
    capture: (tenant, secret, body) => ({
      path: address(tenant),
      body,
      headers: { ...JSON_TYPE, 'x-signature': hmacHex(secret, body), 'idempotency-key': randomUUID() },
      deliveryHeader: 'idempotency-key',
    }),
  },
  {
    // A slash command: a form with no delivery id of its own, within Slack's 5 minutes.
    type: 'slack',
    secret: randomBytes(16).toString('hex'),
    capture: (tenant, secret, body) => {
      const form = new URLSearchParams({ command: '/deploy', text: body, team_id: 'T1' }).toString();
      const timestamp = String(Math.floor(Date.now() / 1000));
      return {
        path: address(tenant),
        body: form,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-slack-request-timestamp': timestamp,
          'x-slack-signature': `v0=${hmacHex(secret, `v0:${timestamp}:${form}`)}`,
          'idempotency-key': randomUUID(),
        },
        deliveryHeader: 'idempotency-key',
      };
    },
  },
];

async function storedCount(tenant: TestTenant): Promise<number> {
  return (await t.store.listCompanyWebhooks(tenant.companyId, { integrationId: tenant.integrationId, limit: 200 })).webhooks.length;
}

describe.each(CASES)('$type: a captured request sent again', (provider) => {
  let tenant: TestTenant;
  let secret: string;
  beforeAll(async () => {
    const source: SourceInput = { type: provider.type, ...(provider.secret !== undefined && { secret: provider.secret }) };
    tenant = await t.newTenant({ source });
    secret = tenant.sourceSecret!;
  });

  test('with new delivery ids is a replay of the first: its uuid, Idempotent-Replayed, nothing new stored', async () => {
    const captured = await provider.capture(tenant, secret, JSON.stringify({ event: 'order.paid', id: randomUUID() }));
    const first = await post(captured.path, captured.body, captured.headers);
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const copies = await Promise.all(
      Array.from({ length: 6 }, () => post(captured.path, captured.body, { ...captured.headers, [captured.deliveryHeader]: randomUUID() })),
    );
    for (const copy of copies) {
      expect(copy.status, JSON.stringify(copy.body)).toBe(200);
      expect(copy.replayed).toBe('true');
      expect(copy.body).toEqual(first.body);
    }
    expect(await storedCount(tenant)).toBe(1);
    const log = await waitFor(async () => {
      const rows = (await t.store.listRequestLog(tenant.companyId, tenant.integrationId, 50)).filter((row) => row.status === 200);
      return rows.length === copies.length ? rows : undefined;
    }, 'the replays in the request log');
    expect(log.every((row) => row.webhookUuid === first.body.uuid && row.keyId === tenant.sourceSecretId)).toBe(true);

    // The provider's own redelivery, with the first id, is still a replay; and the next webhook is stored.
    expect(await post(captured.path, captured.body, captured.headers)).toMatchObject({ status: 200, body: first.body });
    const next = await provider.capture(tenant, secret, JSON.stringify({ event: 'order.paid', id: randomUUID() }));
    expect((await post(next.path, next.body, next.headers)).status).toBe(202);
    expect(await storedCount(tenant)).toBe(2);
  });
});

test('github: a delivery id sent again with another body GitHub signed is still 422 Idempotency key reused', async () => {
  const tenant = await t.newTenant({ source: { type: 'github' } });
  const captured = await CASES[0]!.capture(tenant, tenant.sourceSecret!, '{"action":"opened","n":1}');
  expect((await post(captured.path, captured.body, captured.headers)).status).toBe(202);
  const other = '{"action":"opened","n":2}';
  const reused = await post(captured.path, other, { ...captured.headers, 'x-hub-signature-256': await signGitHub(tenant.sourceSecret!, other) });
  expect(reused).toMatchObject({ status: 422, body: { error: 'Idempotency key reused', message: expect.any(String) } });
  expect(await storedCount(tenant)).toBe(1);
});

describe('twilio: a JSON body must carry bodySHA256 in the address', () => {
  let tenant: TestTenant;
  const token = randomBytes(16).toString('hex');
  beforeAll(async () => {
    tenant = await t.newTenant({ source: { type: 'twilio', secret: token } });
  });

  test("a captured form's signature, its fields appended to the query, does not admit a JSON body", async () => {
    // The address set in Twilio has a query, so text appended to it still reaches the integration.
    const path = `${address(tenant)}?site=1`;
    const fields = { AccountSid: 'AC0123', MessageSid: 'SM0123', MessageStatus: 'delivered' };
    const signature = twilio.getExpectedTwilioSignature(token, BASE_URL + path, fields);
    const form = await post(path, new URLSearchParams(fields).toString(), {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': signature,
    });
    expect(form.status).toBe(202);

    const forged = path + Object.entries(fields).sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, value]) => name + value).join('');
    const body = JSON.stringify({ type: 'com.twilio.messaging.message.delivered', forged: true });
    // The address alone matches the signature, which is what the forgery relies on; twilio-node refuses the body.
    expect(twilio.validateRequest(token, signature, BASE_URL + forged, {})).toBe(true);
    expect(twilio.validateRequestWithBody(token, signature, BASE_URL + forged, body)).toBe(false);
    const refused = await post(forged, body, { ...JSON_TYPE, 'x-twilio-signature': signature });
    expect(refused).toMatchObject({ status: 401, body: { error: 'Invalid signature' } });
    expect(refused.body.message).toMatch(/bodySHA256/);
    const logged = await waitFor(
      async () => (await t.store.listRequestLog(tenant.companyId, tenant.integrationId, 50)).find((row) => row.status === 401),
      'the refusal in the request log',
    );
    expect(logged.errorDetail).toBe('the address has no bodySHA256, which Twilio adds for a JSON body');
    expect(await storedCount(tenant)).toBe(1);
  });

  test('a JSON body as Twilio signs it, bodySHA256 in the address, is stored', async () => {
    const body = JSON.stringify({ type: 'com.twilio.messaging.message.delivered', data: { messageSid: 'SM1' } });
    const path = `${address(tenant)}?site=1&bodySHA256=${twilio.getExpectedBodyHash(body)}`;
    const signature = twilio.getExpectedTwilioSignature(token, BASE_URL + path, {});
    expect(twilio.validateRequestWithBody(token, signature, BASE_URL + path, body)).toBe(true);
    expect((await post(path, body, { ...JSON_TYPE, 'x-twilio-signature': signature })).status).toBe(202);
  });
});

describe('the store: signature claims beside idempotency keys', () => {
  const signed = (owner: Owner, at: number, claim: string, body: string, key: string): PendingWebhook => ({
    ...webhook(owner, at, { body, idempotencyKey: key }),
    signatureClaim: claim,
  });

  test("a copy with a new key is a replay, so are the copy's repeats in its group; the copy's key is given back", async () => {
    const owner = await createTenant(t.store);
    const at = Date.now();
    const original = signed(owner, at, 'claim-1', '{"n":1}', 'delivery-1');
    const copy = signed(owner, at + 1, 'claim-1', '{"n":1}', 'delivery-2');
    const copyRepeated = signed(owner, at + 2, 'claim-1', '{"n":1}', 'delivery-2');
    const another = signed(owner, at + 3, 'claim-2', '{"n":2}', 'delivery-3');
    const replayOfOriginal = { kind: 'replayed', uuid: original.uuid, receivedAt: at };
    expect(await t.store.commitBatch([original, copy, copyRepeated, another], [])).toEqual([
      { kind: 'accepted', uuid: original.uuid, receivedAt: at },
      replayOfOriginal,
      replayOfOriginal,
      { kind: 'accepted', uuid: another.uuid, receivedAt: at + 3 },
    ]);
    // The copy stored nothing, so its delivery id names nothing: the next webhook may carry it.
    const next = signed(owner, at + 4, 'claim-3', '{"n":3}', 'delivery-2');
    expect(await t.store.commitBatch([next], [])).toEqual([{ kind: 'accepted', uuid: next.uuid, receivedAt: at + 4 }]);
    expect(await t.store.commitBatch([signed(owner, at + 5, 'claim-1', '{"n":1}', 'delivery-4')], [])).toEqual([replayOfOriginal]);
    // A key with another body is still a conflict, before its signature is looked at.
    expect(await t.store.commitBatch([signed(owner, at + 6, 'claim-9', '{"n":9}', 'delivery-1')], [])).toEqual([{ kind: 'conflict' }]);
    // Past the window, the same signed request is a new webhook, as a key is.
    const later = signed(owner, at + IDEMPOTENCY_WINDOW_MS + 1, 'claim-1', '{"n":1}', 'delivery-5');
    expect(await t.store.commitBatch([later], [])).toEqual([{ kind: 'accepted', uuid: later.uuid, receivedAt: later.receivedAt }]);
  });
});
