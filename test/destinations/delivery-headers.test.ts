import pino from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { parseCidrList } from '../../src/domain/cidr.js';
import { AddressGuard } from '../../src/destinations/address-guard.js';
import { DeliveryDispatcher } from '../../src/destinations/dispatcher.js';
import { DestinationSender } from '../../src/destinations/sender.js';
import { DeliveryMarks, ORIGIN_KEY_PURPOSE } from '../../src/domain/delivery-loop.js';
import { buildTestApp, sendWebhook, testSecretBox, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey } from '../support/api.js';
import { addDestination } from '../support/deliveries.js';
import { okReceiver, type Receiver } from '../support/receivers.js';

/**
 * What goes out in a delivery's headers, over real HTTP to receivers on loopback, on each
 * database (issue 33): a destination's headers do not follow its URL to another origin; the
 * headers it may have really go out; every event name is sent and comes back exact from the
 * receiver's decoding; an attempt that fails for a reason of ours is a warning with its
 * cause, and every attempt a debug line, neither with a header's value.
 */

const DAY = 24 * 3600 * 1000;

let t: TestApp;
let tenant: TestTenant;
let key: Record<string, string>;
let clock: number;
const receivers: Receiver[] = [];

async function setup() {
  clock = Date.now() + 1000;
  t = await buildTestApp({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' }, { delivery: { start: false, now: () => clock } });
  tenant = await t.newTenant();
  key = await managementKey(t, tenant.companyId);
}

afterEach(async () => {
  await t?.close();
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

async function receiver(): Promise<Receiver> {
  const started = await okReceiver(204);
  receivers.push(started);
  return started;
}

function api(method: 'POST' | 'PATCH', url: string, payload: object) {
  return t.app.inject({ method, url: `/api/v1${url}`, headers: key, payload });
}

async function create(body: object): Promise<string> {
  const response = await api('POST', '/destinations', { name: 'Receiver', rate_per_second: null, ...body });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ destination: { id: string } }>().destination.id;
}

async function send(event: string): Promise<void> {
  const answer = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: JSON.stringify({ event, data: {} }) });
  expect(answer.statusCode, answer.body).toBe(202);
  clock = Math.max(clock, Date.now() + 1);
}

describe("a change of the URL to another origin drops the destination's headers", () => {
  test('changed alone, the URL gets none of the owner’s sealed headers; the same origin keeps them; headers sent with the URL go with it', async () => {
    await setup();
    const [owners, admins, replaced] = [await receiver(), await receiver(), await receiver()];
    const id = await create({ url: owners.url, headers: { Authorization: 'Bearer owner-secret', 'X-Tenant': 'acme' } });

    // Another path on the owner's receiver: the same origin, the headers stay.
    const samePlace = await api('PATCH', `/destinations/${id}`, { url: `${owners.url}/v2` });
    expect(samePlace.json()).toMatchObject({ header_names: ['Authorization', 'X-Tenant'] });
    await send('order.created');
    expect(await t.app.dispatcher.runOnce()).toBe(1);
    expect(owners.received[0]).toMatchObject({ path: '/hook/v2', headers: { authorization: 'Bearer owner-secret', 'x-tenant': 'acme' } });

    // Another port is another origin: what the admin's server gets carries no header of the owner's.
    const moved = await api('PATCH', `/destinations/${id}`, { url: admins.url });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json()).toMatchObject({ url: admins.url, header_names: [] });
    await send('order.created');
    expect(await t.app.dispatcher.runOnce()).toBe(1);
    expect(admins.received).toHaveLength(1);
    expect(admins.received[0]!.headers.authorization).toBeUndefined();
    expect(admins.received[0]!.headers['x-tenant']).toBeUndefined();

    // A URL and headers in one change: the new headers go to the new URL.
    const both = await api('PATCH', `/destinations/${id}`, { url: replaced.url, headers: { Authorization: 'Bearer new-owner' } });
    expect(both.json()).toMatchObject({ header_names: ['Authorization'] });
    await send('order.created');
    expect(await t.app.dispatcher.runOnce()).toBe(1);
    expect(replaced.received[0]!.headers.authorization).toBe('Bearer new-owner');

    const [record] = await t.store.listAuditLog(tenant.companyId, { limit: 10, action: 'destination.update' });
    expect(JSON.stringify(record)).not.toContain('owner-secret');
  });
});

test('the headers a destination may have really go out, as they were set', async () => {
  await setup();
  const target = await receiver();
  // Names a receiver may ask for, end to end or about authentication, near the refused ones.
  const headers = {
    Authorization: 'Bearer token',
    'Proxy-Authorization': 'Basic cHJveHk6cHc=',
    Accept: 'application/json',
    'Accept-Encoding': 'identity',
    Cookie: 'session=abc',
    'Cache-Control': 'no-cache',
    Forwarded: 'for=192.0.2.1',
    'X-Forwarded-For': '192.0.2.1',
    Via: '1.1 relay',
    From: 'ops@example.com',
    'X-Note': 'caf\u00e9 latin-1',
  };
  const id = await create({ url: target.url, headers });
  await send('order.created');
  expect(await t.app.dispatcher.runOnce()).toBe(1);
  // Node's server reads header bytes as Latin-1, as intake's client writes them.
  const received = target.received[0]!.headers;
  for (const [name, value] of Object.entries(headers)) expect(received[name.toLowerCase()], name).toBe(value);
  const [delivery] = await t.store.listDeliveries(tenant.companyId, { destinationId: id, limit: 1 });
  expect(delivery).toMatchObject({ state: 'succeeded' });
});

test('every accepted event name is delivered, and the receiver decodes x-intake-event to the exact name', async () => {
  await setup();
  const target = await receiver();
  const id = await create({ url: target.url });
  const events = ['order.東京', 'طلب.جديد', 'заказ.создан', 'party.🎉', 'café.créé', 'discount.50%', 'order created', 'a%2Fb', 'tab\there', 'order.created'];
  for (const event of events) await send(event);
  expect(await t.app.dispatcher.runOnce()).toBe(events.length);

  const deliveries = await t.store.listDeliveries(tenant.companyId, { destinationId: id, limit: 50 });
  expect(deliveries.map((d) => [d.event, d.state, d.lastError])).toEqual(expect.arrayContaining(events.map((event) => [event, 'succeeded', null])));
  const sent = target.received.map((request) => String(request.headers['x-intake-event']));
  expect(sent.map((value) => decodeURIComponent(value)).sort()).toEqual([...events].sort());
  // Printable ASCII goes out as it is; the rest as encodeURIComponent writes it.
  expect(sent).toContain('order.created');
  expect(sent).toContain('order.%E6%9D%B1%E4%BA%AC');
  expect(sent).toContain('discount.50%25');
  expect(sent).toContain('order%20created');
  expect(sent).toContain('a%252Fb');
  expect(sent).toContain('tab%09here');
});

describe('the log of attempts', () => {
  /** A worker of the test's own, logging at debug into `lines`. */
  function worker(lines: Array<Record<string, unknown>>) {
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    return new DeliveryDispatcher(t.store, new DestinationSender({ guard: new AddressGuard(parseCidrList('127.0.0.1/32')) }), testSecretBox(), logger, {
      concurrency: 8,
      leaseMarginMs: 30_000,
      pollMs: 100,
      disableAfterMs: DAY,
      underPressure: () => false,
      marks: new DeliveryMarks(testSecretBox().derivedKeys(ORIGIN_KEY_PURPOSE)),
      now: () => clock,
    });
  }

  test('an attempt that fails for a reason of ours is a warning with its delivery and its cause; every attempt a debug line; no header value in either', async () => {
    await setup();
    const target = await receiver();
    const box = testSecretBox();
    // Stored before the headers were checked as they are now: undici refuses Expect, so the request is never made.
    const broken = await addDestination(t.store, tenant.companyId, {
      url: target.url,
      eventPatterns: ['broken.*'],
      headersSealed: box.seal(JSON.stringify({ Expect: 'expect-header-value', Authorization: 'Bearer logged-nowhere' })),
      headerNames: ['Expect', 'Authorization'],
      secretSealed: box.seal('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'),
    });
    const fine = await addDestination(t.store, tenant.companyId, {
      url: target.url,
      eventPatterns: ['fine.*'],
      headersSealed: box.seal(JSON.stringify({ Authorization: 'Bearer logged-nowhere' })),
      headerNames: ['Authorization'],
      secretSealed: box.seal('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'),
    });
    await send('broken.one');
    await send('fine.one');
    const lines: Array<Record<string, unknown>> = [];
    expect(await worker(lines).runOnce()).toBe(2);
    expect(target.received).toHaveLength(1);

    const [failed] = await t.store.listDeliveries(tenant.companyId, { destinationId: broken, limit: 1 });
    expect(failed).toMatchObject({ state: 'pending', lastError: 'other' });
    const warnings = lines.filter((line) => line.level === 40);
    expect(warnings).toEqual([
      expect.objectContaining({
        deliveryId: failed!.id,
        destinationId: broken,
        attempt: 1,
        cause: expect.objectContaining({ type: 'NotSupportedError', message: expect.stringContaining('expect') }),
      }),
    ]);

    const [succeeded] = await t.store.listDeliveries(tenant.companyId, { destinationId: fine, limit: 1 });
    const attempts = lines.filter((line) => line.level === 20 && line.msg === 'delivery attempt');
    expect(attempts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ deliveryId: failed!.id, destinationId: broken, attempt: 1, status: null, error: 'other', durationMs: expect.any(Number) }),
        expect.objectContaining({ deliveryId: succeeded!.id, destinationId: fine, attempt: 1, status: 204, error: null, durationMs: expect.any(Number) }),
      ]),
    );
    expect(attempts).toHaveLength(2);
    const logged = JSON.stringify(lines);
    for (const secret of ['expect-header-value', 'logged-nowhere', 'whsec_', '"data"']) expect(logged).not.toContain(secret);
  });
});
