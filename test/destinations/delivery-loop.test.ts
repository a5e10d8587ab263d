import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { newSigningSecret } from '../../src/destinations/signing.js';
import { DeliveryMarks, MAX_HOPS, ORIGIN_KEY_PURPOSE } from '../../src/domain/delivery-loop.js';
import { newSecretsKey, parseSecretsKeys, SecretBox } from '../../src/domain/secret-box.js';
import type { Delivery } from '../../src/store/store.js';
import { buildTestApp, testSecretBox, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey } from '../support/api.js';
import { addDestination } from '../support/deliveries.js';
import { TEST_SECRETS_KEY } from '../support/processes.js';
import { startReceiver, type Receiver } from '../support/receivers.js';

/**
 * Destinations aimed at intake itself (issue 33, finding 1), with real servers on loopback
 * and their delivery workers running: two destinations that post every webhook back to its
 * own address turned one webhook into 860 in 3 s. Intake now refuses its own deliveries at
 * the webhook address (508, in the attempt log), and a loop through another deployment ends
 * at the hop limit. The address guard is told to allow loopback, as an ordinary public
 * address would be allowed in production.
 */

const ALLOW_LOOPBACK = { INTAKE_DESTINATION_ALLOW: '127.0.0.1/32', INTAKE_BASE_URL: 'https://hooks.example.com' };

const running: TestApp[] = [];
const receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  await Promise.all(running.splice(0).map((node) => node.close()));
});

/** A node listening on loopback, its workers running, with its own secrets key when given. */
async function node(secrets?: SecretBox): Promise<TestApp & { address: string }> {
  const t = await buildTestApp(ALLOW_LOOPBACK, secrets ? { secrets } : {});
  running.push(t);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return Object.assign(t, { address: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}` });
}

/** A destination of `from`'s company posting to `to`'s webhook address with its key, sealed with `box`. */
async function pointAt(from: TestApp, fromTenant: TestTenant, url: string, apiKey: string | undefined, box = testSecretBox(), secret = newSigningSecret()) {
  return addDestination(from.store, fromTenant.companyId, {
    url,
    headersSealed: apiKey === undefined ? null : box.seal(JSON.stringify({ 'X-API-Key': apiKey })),
    headerNames: apiKey === undefined ? [] : ['X-API-Key'],
    secretSealed: box.seal(secret),
    timeoutMs: 5000,
    createdAt: Date.now() - 1000,
  });
}

async function post(address: string, tenant: TestTenant, event = 'order.created'): Promise<void> {
  const answer = await fetch(`${address}/api/webhooks/${tenant.integrationKey}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': tenant.apiKey },
    body: JSON.stringify({ event, data: { id: 1 } }),
  });
  expect(answer.status).toBe(202);
}

async function webhookCount(t: TestApp): Promise<number> {
  const [row] = await t.database.query<{ n: number | string }>('select count(*) as n from webhooks');
  return Number(row!.n);
}

/** The destination's deliveries once every one of them has settled. */
function settled(t: TestApp, companyId: string, destinationId: string): Promise<Delivery[]> {
  return waitFor(async () => {
    const deliveries = await t.store.listDeliveries(companyId, { destinationId, limit: 100 });
    return deliveries.length > 0 && deliveries.every((d) => d.state !== 'pending') ? deliveries : undefined;
  }, `the deliveries of ${destinationId} to settle`, 10_000);
}

describe('a destination aimed at intake itself', () => {
  test('is refused at the webhook address with 508, shown in the attempt log, and fails at once: one webhook stays one', async () => {
    const a = await node();
    const tenant = await a.newTenant();
    const own = `${a.address}/api/webhooks/${tenant.integrationKey}`;
    const first = await pointAt(a, tenant, own, tenant.apiKey);
    const second = await pointAt(a, tenant, own, tenant.apiKey);

    await post(a.address, tenant);
    for (const destinationId of [first, second]) {
      const [delivery] = await settled(a, tenant.companyId, destinationId);
      expect(delivery).toMatchObject({ state: 'failed', attempts: 1, lastStatus: 508, lastError: 'http_status' });
      const [attempt] = await a.store.listDeliveryAttempts(tenant.companyId, delivery!.id, 10);
      expect(JSON.parse(attempt!.responseExcerpt!)).toMatchObject({ error: 'Loop detected', code: 'delivery_loop', message: expect.stringContaining('own delivery') });
      expect(attempt!.nextAttemptAt).toBeNull();
    }
    expect(await webhookCount(a)).toBe(1);
    const refused = await waitFor(async () => {
      const rows = await a.store.listCompanyRequestLog(tenant.companyId, { limit: 10 });
      const loops = rows.filter((row) => row.errorCode === 'delivery_loop');
      return loops.length === 2 ? loops : undefined;
    }, 'the two refusals in the request log');
    expect(refused.map((row) => [row.status, row.errorDetail?.includes('comes back') || row.errorDetail?.includes('coming back')])).toEqual([
      [508, true],
      [508, true],
    ]);
  });

  test('signed with Standard Webhooks for a standard_webhooks source of the company, without any key, it is refused too', async () => {
    const a = await node();
    const sender = await a.newTenant();
    const secret = newSigningSecret();
    // A source that takes exactly what intake's deliveries carry: their signature, with the destination's own secret.
    const looped = await a.newTenant({ companyId: sender.companyId, source: { type: 'standard_webhooks', secret } });
    const destinationId = await pointAt(a, sender, `${a.address}/api/webhooks/${looped.integrationKey}`, undefined, testSecretBox(), secret);

    await post(a.address, sender);
    const [delivery] = await settled(a, sender.companyId, destinationId);
    expect(delivery).toMatchObject({ state: 'failed', lastStatus: 508 });
    expect(await webhookCount(a)).toBe(1);
  });

  test('through a relay that passes the request on, headers and all, it is recognised as intake’s own', async () => {
    const a = await node();
    const tenant = await a.newTenant();
    const own = `${a.address}/api/webhooks/${tenant.integrationKey}`;
    const relay = await startReceiver((response, request) => {
      const headers = Object.fromEntries(Object.entries(request.headers).filter(([name]) => !['host', 'content-length', 'connection'].includes(name))) as Record<string, string>;
      void fetch(own, { method: 'POST', headers, body: request.body }).then(async (answer) => {
        response.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
      });
    });
    receivers.push(relay);
    const destinationId = await pointAt(a, tenant, relay.url, tenant.apiKey);

    await post(a.address, tenant);
    const [delivery] = await settled(a, tenant.companyId, destinationId);
    expect(delivery).toMatchObject({ state: 'failed', lastStatus: 508 });
    expect(await webhookCount(a)).toBe(1);
  });

  test('is refused when it is created or changed to the service’s own address (INTAKE_BASE_URL)', async () => {
    const a = await node();
    const tenant = await a.newTenant();
    const headers = await managementKey(a, tenant.companyId);
    const create = (url: string) => a.app.inject({ method: 'POST', url: '/api/v1/destinations', headers, payload: { name: 'Loop', url } });
    for (const url of ['https://hooks.example.com/api/webhooks/abc', 'https://hooks.example.com:443/anything?x=1', 'https://HOOKS.example.com/']) {
      const refused = await create(url);
      expect(refused.statusCode, url).toBe(400);
      expect(refused.json()).toMatchObject({ error: 'Invalid request', field: 'url', message: expect.stringContaining("intake's own address") });
    }
    const created = await create(`${a.address}/elsewhere`);
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json<{ destination: { id: string } }>().destination.id;
    const changed = await a.app.inject({ method: 'PATCH', url: `/api/v1/destinations/${id}`, headers, payload: { url: 'https://hooks.example.com/api/webhooks/abc' } });
    expect(changed.statusCode).toBe(400);
  });
});

describe('a loop through another deployment', () => {
  test(`ends when the webhook has come through more than ${MAX_HOPS} intake deliveries`, async () => {
    const boxB = new SecretBox(parseSecretsKeys(newSecretsKey()));
    const a = await node();
    const b = await node(boxB);
    const onA = await a.newTenant();
    const onB = await b.newTenant();
    // A forwards to B, B forwards back to A: each recognises only its own deliveries.
    await pointAt(a, onA, `${b.address}/api/webhooks/${onB.integrationKey}`, onB.apiKey);
    const back = await pointAt(b, onB, `${a.address}/api/webhooks/${onA.integrationKey}`, onA.apiKey, boxB);

    await post(a.address, onA);
    // A: the webhook (0 hops) and B's delivery of A's (2 hops); B: A's deliveries (1 and 3 hops). B's next, with 4, is refused.
    const refused = await waitFor(async () => {
      const deliveries = await b.store.listDeliveries(onB.companyId, { destinationId: back, limit: 100 });
      return deliveries.find((d) => d.lastStatus === 508);
    }, 'the delivery past the hop limit to be refused', 10_000);
    expect(refused.state).toBe('failed');
    const [attempt] = await b.store.listDeliveryAttempts(onB.companyId, refused.id, 1);
    expect(attempt!.responseExcerpt).toContain(`${MAX_HOPS + 1} intake deliveries`);
    expect([await webhookCount(a), await webhookCount(b)]).toEqual([2, 2]);
    const hops = await b.database.query<{ headers: string }>('select headers from webhooks');
    expect(hops.map((row) => JSON.parse(row.headers)['x-intake-hops']).sort()).toEqual(['1', '3']);
  });
});

describe('the marks of a delivery', () => {
  const box = testSecretBox();
  const marks = new DeliveryMarks(box.derivedKeys(ORIGIN_KEY_PURPOSE));

  test('only this deployment makes an origin it recognises; anyone may send the headers and be taken', () => {
    const mark = marks.mark('dlv_0123456789abcdefghijkl', 0);
    expect(mark['x-intake-hops']).toBe('1');
    expect(marks.loopOf({ 'x-intake-delivery-id': 'dlv_0123456789abcdefghijkl', ...mark })).toContain('own delivery');
    // Another delivery's id, a changed tag, another deployment's mark, a mark without its id: not ours.
    expect(marks.loopOf({ 'x-intake-delivery-id': 'dlv_0123456789abcdefghijkm', ...mark })).toBeUndefined();
    expect(marks.loopOf({ 'x-intake-delivery-id': 'dlv_0123456789abcdefghijkl', 'x-intake-origin': `${mark['x-intake-origin']!.slice(0, -1)}A` })).toBeUndefined();
    const other = new DeliveryMarks(new SecretBox(parseSecretsKeys(newSecretsKey())).derivedKeys(ORIGIN_KEY_PURPOSE));
    expect(marks.loopOf({ 'x-intake-delivery-id': 'dlv_x', ...other.mark('dlv_x', 0) })).toBeUndefined();
    expect(marks.loopOf({ 'x-intake-origin': mark['x-intake-origin'] })).toBeUndefined();
  });

  test('a rotated secrets key still recognises the deliveries marked before the rotation', () => {
    const before = marks.mark('dlv_rotated', 0);
    const rotated = new DeliveryMarks(new SecretBox([...parseSecretsKeys(newSecretsKey()), ...parseSecretsKeys(TEST_SECRETS_KEY)]).derivedKeys(ORIGIN_KEY_PURPOSE));
    expect(rotated.loopOf({ 'x-intake-delivery-id': 'dlv_rotated', ...before })).toContain('own delivery');
  });

  test(`a webhook that has come through more than ${MAX_HOPS} deliveries is refused; a count that is not one counts as none`, () => {
    expect(marks.loopOf({ 'x-intake-hops': String(MAX_HOPS) })).toBeUndefined();
    expect(marks.loopOf({ 'x-intake-hops': String(MAX_HOPS + 1) })).toContain(`${MAX_HOPS + 1} intake deliveries`);
    for (const junk of ['-5', 'many', '1e9', '']) expect(marks.loopOf({ 'x-intake-hops': junk })).toBeUndefined();
  });
});
