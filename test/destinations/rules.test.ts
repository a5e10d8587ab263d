import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey } from '../support/api.js';
import { flakyReceiver, okReceiver, receiverSet, type Receiver } from '../support/receivers.js';

/**
 * A destination's rules (issue 36) end to end, on each database: set through /api/v1, applied
 * by the delivery workers against real receivers on loopback, on a clock of the test's own
 * (the delay, the windows and the schedule move with it, never by waiting): what arrives,
 * what is filtered or deduplicated and why, a transformation's request signed as sent, its
 * failures retried, a destination's own retry schedule, versions, and "try it".
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;

type Json = Record<string, any>;

let t: TestApp;
let tenant: TestTenant;
let key: Record<string, string>;
/** The workers' clock: the tests move it. */
let clock: number;
const receivers = receiverSet();
const receiver = (start: Promise<Receiver>) => receivers.add(start);

async function setup() {
  clock = Date.now() + SECOND;
  t = await buildTestApp({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' }, { delivery: { start: false, now: () => clock, random: () => 0.5 } });
  tenant = await t.newTenant();
  key = await managementKey(t, tenant.companyId);
}

afterEach(async () => {
  await t?.close();
  await receivers.closeAll();
});

function api(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) {
  return t.app.inject({ method, url: `/api/v1${url}`, headers: key, ...(payload !== undefined && { payload }) });
}

async function destination(url: string, rules: Json | null): Promise<{ id: string; secret: string; destination: Json }> {
  const response = await api('POST', '/destinations', { name: 'Receiver', url, rate_per_second: null, rules });
  expect(response.statusCode, response.body).toBe(201);
  const created = response.json<{ destination: Json; signing_secret: string }>();
  return { id: created.destination.id, secret: created.signing_secret, destination: created.destination };
}

async function send(data: Json, event = 'order.created'): Promise<string> {
  const answer = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: JSON.stringify({ event, data }) });
  expect(answer.statusCode, answer.body).toBe(202);
  clock = Math.max(clock, Date.now() + 1);
  return answer.json<{ uuid: string }>().uuid;
}

/** Moves the clock to `time` and runs the workers once. */
async function at(time: number): Promise<number> {
  clock = time;
  return t.app.dispatcher.runOnce();
}

async function deliveries(destinationId: string): Promise<Json[]> {
  const response = await api('GET', `/deliveries?destination_id=${destinationId}&limit=100`);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<{ data: Json[] }>().data;
}

async function deliveryOf(destinationId: string, uuid: string): Promise<Json> {
  return (await deliveries(destinationId)).find((d) => d.webhook_uuid === uuid)!;
}

async function attemptsOf(deliveryId: string): Promise<Json[]> {
  const response = await api('GET', `/deliveries/${deliveryId}`);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<{ attempts: Json[] }>().attempts;
}

describe('filter', () => {
  test('only what the filter lets through is sent; the rest is filtered, with no attempt, and counted', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { filter: { body: { data: { livemode: true, amount: { $gte: 100 } } } } });
    const live = await send({ livemode: true, amount: 250 });
    const test_ = await send({ livemode: false, amount: 250 });
    const small = await send({ livemode: true, amount: 5 });

    await at(clock);
    await at(clock + 1);
    expect(target.received).toHaveLength(1);
    expect(JSON.parse(target.received[0]!.body.toString()).data.amount).toBe(250);
    expect(await deliveryOf(id, live)).toMatchObject({ state: 'succeeded', attempts: 1, rules_version: 1 });
    for (const uuid of [test_, small]) {
      const delivery = await deliveryOf(id, uuid);
      expect(delivery).toMatchObject({ state: 'filtered', skipped_by: 'filter', attempts: 0, rules_version: 1, next_attempt_at: null });
      expect(await attemptsOf(delivery.id)).toEqual([]);
    }
    const filtered = await api('GET', `/deliveries?destination_id=${id}&state=filtered`);
    expect(filtered.json<{ data: Json[] }>().data).toHaveLength(2);
  });

  test('a filter that is not valid is refused when saved, naming the bad part, and nothing is stored', async () => {
    await setup();
    for (const [rules, message] of [
      [{ filter: { body: { amount: { $regex: 'x' } } } }, /rules\.filter/],
      [{ filter: { body: { amount: { $gte: { nested: 1 } } } } }, /rules\.filter/],
      [{ filter: { nope: {} } }, /rules\.filter/],
      [{ filtr: {} }, /rules\.filtr is not a rule/],
      [{ retry: { strategy: 'linear', attempts: 51, interval_seconds: 60 } }, /attempts/],
      [{ retry: { strategy: 'linear', attempts: 2, interval_seconds: 1 } }, /interval_seconds/],
      [{ deduplicate: { fields: ['id'], window_seconds: 60 } }, /body\. or headers\./],
      [{ deduplicate: { fields: ['body.id'], window_seconds: 7200 } }, /window_seconds/],
      [{ delay_seconds: 90_000 }, /delay_seconds/],
      [{ transformation: { code: '' } }, /transformation\.code/],
    ] as const) {
      const response = await api('POST', '/destinations', { name: 'Bad', url: 'https://example.invalid/hook', rules });
      expect(response.statusCode, JSON.stringify(rules)).toBe(400);
      expect(response.json()).toMatchObject({ error: expect.any(String), message: expect.stringMatching(message) });
    }
    const list = await api('GET', '/destinations');
    expect(list.json<{ data: Json[] }>().data).toEqual([]);
  });
});

describe('deduplicate', () => {
  test('a repeat of the same body.data.id within the window is deduplicated, linked to the first; after it, sent again', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { deduplicate: { fields: ['body.data.id'], window_seconds: 60 } });
    const first = await send({ id: 'ord_1', n: 1 });
    await at(clock);
    const again = await send({ id: 'ord_1', n: 2 });
    const other = await send({ id: 'ord_2', n: 3 });
    await at(clock + 10 * SECOND);

    expect(target.received.map((r) => JSON.parse(r.body.toString()).data.n)).toEqual([1, 3]);
    const firstDelivery = await deliveryOf(id, first);
    expect(await deliveryOf(id, again)).toMatchObject({ state: 'deduplicated', duplicate_of: firstDelivery.id, attempts: 0 });
    expect(await deliveryOf(id, other)).toMatchObject({ state: 'succeeded' });

    // Past the window, the same id is a new delivery.
    clock += 61 * SECOND;
    const later = await send({ id: 'ord_1', n: 4 });
    await at(clock);
    expect(await deliveryOf(id, later)).toMatchObject({ state: 'succeeded' });
    expect(target.received).toHaveLength(3);
  });

  test('a retry keeps its key: the first delivery failing and retried is never taken for its own duplicate', async () => {
    await setup();
    const target = await receiver(flakyReceiver(1));
    const { id } = await destination(target.url, { deduplicate: { fields: null, window_seconds: 3600 } });
    const uuid = await send({ id: 'same' });
    await at(clock);
    await at(clock + 6 * SECOND);
    expect(await deliveryOf(id, uuid)).toMatchObject({ state: 'succeeded', attempts: 2 });
  });
});

describe('delay and retry', () => {
  test('a delay holds the first attempt until that long after the webhook arrived', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { delay_seconds: 30 });
    const uuid = await send({ id: 1 });
    const arrived = (await deliveryOf(id, uuid)).created_at;
    expect(await at(clock)).toBe(0);
    expect(await at(Date.parse(arrived) + 29 * SECOND)).toBe(0);
    expect(await at(Date.parse(arrived) + 30 * SECOND)).toBe(1);
    expect(target.received).toHaveLength(1);
  });

  test('a linear schedule of two attempts a minute apart reaches the dead letter after the second', async () => {
    await setup();
    const target = await receiver(flakyReceiver(100));
    const { id } = await destination(target.url, { retry: { strategy: 'linear', attempts: 2, interval_seconds: 60 } });
    const uuid = await send({ id: 1 });
    expect(await at(clock)).toBe(1);
    const start = clock;
    expect(await at(start + 59 * SECOND)).toBe(0);
    expect(await at(start + 60 * SECOND)).toBe(1);
    const delivery = await deliveryOf(id, uuid);
    expect(delivery).toMatchObject({ state: 'failed', attempts: 2 });
    const attempts = await attemptsOf(delivery.id);
    expect(attempts[1]).toMatchObject({ number: 1, next_attempt_at: new Date(start + 60 * SECOND).toISOString() });
    expect(attempts[0]).toMatchObject({ number: 2, next_attempt_at: null });
  });
});

describe('transformation', () => {
  const reshape = `function transform(request, context) {
    request.body = { order: request.body.data.id, total: request.body.data.amount * 100, event: context.event };
    request.headers['x-billing'] = 'yes';
    request.path = '/billing';
    return request;
  }`;

  test('what is sent is what the transformation returned, signed over the transformed body, with the version it used', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id, secret } = await destination(target.url, { transformation: { code: reshape } });
    const uuid = await send({ id: 'ord_9', amount: 12 });
    await at(clock);

    const [request] = target.received;
    expect(request!.path).toBe('/hook/billing');
    expect(request!.headers['x-billing']).toBe('yes');
    expect(request!.headers['content-type']).toBe('application/json');
    const sent = new Webhook(secret).verify(request!.body.toString(), request!.headers as Record<string, string>);
    expect(sent).toEqual({ order: 'ord_9', total: 1200, event: 'order.created' });
    expect(await deliveryOf(id, uuid)).toMatchObject({ state: 'succeeded', rules_version: 1 });
    // Stored as received, whatever was sent.
    const stored = await api('GET', `/webhooks/${uuid}`);
    expect(stored.json()).toMatchObject({ data: { id: 'ord_9', amount: 12 } });
  });

  test('returning nothing drops the delivery: filtered by the transformation, no attempt', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { transformation: { code: 'function transform(request) { if (request.body.data.skip) return; return request; }' } });
    const skipped = await send({ skip: true });
    const kept = await send({ skip: false });
    await at(clock);
    expect(target.received).toHaveLength(1);
    expect(await deliveryOf(id, skipped)).toMatchObject({ state: 'filtered', skipped_by: 'transformation', attempts: 0 });
    expect(await deliveryOf(id, kept)).toMatchObject({ state: 'succeeded' });
  });

  test('a transformation that throws fails the attempt with transformation_error and its message, and is retried', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { transformation: { code: 'function transform(request) {\n  throw new Error("no total for " + request.body.event);\n}' } });
    const uuid = await send({ id: 1 });
    await at(clock);
    expect(target.received).toHaveLength(0);
    const delivery = await deliveryOf(id, uuid);
    expect(delivery).toMatchObject({ state: 'pending', last_error: 'transformation_error' });
    const [attempt] = await attemptsOf(delivery.id);
    expect(attempt).toMatchObject({ error: 'transformation_error', status: null });
    expect(attempt!.response_excerpt).toContain('no total for order.created');
    expect(attempt!.next_attempt_at).not.toBeNull();
  });

  test('a transformation that loops for ever is stopped by its CPU limit, and the next delivery is made', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const looping = await destination(target.url, { transformation: { code: 'function transform(request) { for (;;) {} }' } });
    const plain = await destination(target.url, null);
    const uuid = await send({ id: 1 });
    await at(clock);
    const [attempt] = await attemptsOf((await deliveryOf(looping.id, uuid)).id);
    expect(attempt).toMatchObject({ error: 'transformation_error' });
    expect(await deliveryOf(plain.id, uuid)).toMatchObject({ state: 'succeeded' });
  });
});

describe('versions and replays', () => {
  test('every save of the rules is a new version in the audit log; a replay applies the rules as they are then', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { filter: { body: { data: { ok: true } } } });
    const uuid = await send({ ok: false });
    await at(clock);
    const filtered = await deliveryOf(id, uuid);
    expect(filtered).toMatchObject({ state: 'filtered', rules_version: 1 });

    const changed = await api('PATCH', `/destinations/${id}`, { rules: { filter: null, delay_seconds: 0 } });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json().rules).toMatchObject({ version: 2, filter: null });
    const audit = await api('GET', '/audit-log?action=destination.update');
    const records = audit.json<{ data: Json[] }>().data;
    expect(records[0]).toMatchObject({ target: { type: 'destination', id }, before: { rulesVersion: 1, rules: { filter: { body: { data: { ok: true } } } } }, after: { rulesVersion: 2, rules: { filter: null } } });

    const replay = await api('POST', `/deliveries/${filtered.id}/replay`);
    expect(replay.statusCode, replay.body).toBeLessThan(300);
    await at(clock + SECOND);
    expect(target.received).toHaveLength(1);
    expect(await deliveryOf(id, uuid)).toMatchObject({ state: 'succeeded', rules_version: 2, skipped_by: null });
  });
});

describe('try it', () => {
  test('the rules on a stored webhook or a pasted one show what would be sent, or why not, and send nothing', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { filter: { body: { data: { livemode: true } } } });
    const uuid = await send({ livemode: false, id: 'ord_1' });

    const refused = await api('POST', `/destinations/${id}/rules/try`, { webhook_uuid: uuid });
    expect(refused.statusCode, refused.body).toBe(200);
    expect(refused.json()).toMatchObject({ rules_version: 1, would_send: false, filter: { passed: false }, request: null, reason: expect.stringMatching(/filter/) });

    const unsaved = await api('POST', `/destinations/${id}/rules/try`, {
      webhook: { body: { event: 'order.created', data: { livemode: true, id: 'ord_2' } } },
      rules: { filter: { body: { data: { livemode: true } } }, transformation: { code: 'function transform(r) { r.body = { id: r.body.data.id }; return r; }' } },
    });
    expect(unsaved.statusCode, unsaved.body).toBe(200);
    expect(unsaved.json()).toMatchObject({ rules_version: null, would_send: true, filter: { passed: true }, transformation: { outcome: 'request' } });
    expect(JSON.parse(unsaved.json().request.body)).toEqual({ id: 'ord_2' });

    const broken = await api('POST', `/destinations/${id}/rules/try`, {
      webhook_uuid: uuid,
      rules: { transformation: { code: 'function transform(r) {\n  return r.body.nothing.here;\n}' } },
    });
    expect(broken.json()).toMatchObject({ would_send: false, transformation: { outcome: 'error', message: expect.stringMatching(/line 2|:2/) } });

    expect(target.received).toHaveLength(0);
    expect(await deliveryOf(id, uuid)).toMatchObject({ state: 'pending', attempts: 0 });
  });

  test("another company's webhook or destination is not found", async () => {
    await setup();
    const other = await t.newTenant();
    const otherKey = await managementKey(t, other.companyId);
    const { id } = await destination('https://example.invalid/hook', null);
    const uuid = await send({ id: 1 });
    const wrongDestination = await t.app.inject({ method: 'POST', url: `/api/v1/destinations/${id}/rules/try`, headers: otherKey, payload: { webhook: { body: {} } } });
    expect(wrongDestination.statusCode).toBe(404);
    const response = await t.app.inject({ method: 'POST', url: '/api/v1/destinations', headers: otherKey, payload: { name: 'x', url: 'https://example.invalid/x' } });
    const theirs = response.json().destination.id;
    const wrongWebhook = await t.app.inject({ method: 'POST', url: `/api/v1/destinations/${theirs}/rules/try`, headers: otherKey, payload: { webhook_uuid: uuid } });
    expect(wrongWebhook.statusCode).toBe(404);
  });
});

describe('saving', () => {
  test('a transformation that does not compile, or defines no transform, is refused with its line; nothing is saved', async () => {
    await setup();
    const { id } = await destination('https://example.invalid/hook', null);
    for (const code of ['function transform(request) {\n  return request.\n}', 'const x = 1;']) {
      const refused = await api('PATCH', `/destinations/${id}`, { rules: { transformation: { code } } });
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json()).toMatchObject({ field: 'rules.transformation.code', message: expect.stringMatching(/^rules\.transformation\.code: /) });
    }
    expect((await api('GET', `/destinations/${id}`)).json().rules).toMatchObject({ version: 0, transformation: null });
  });

  test('the same rules saved again make no new version', async () => {
    await setup();
    const rules = { filter: { body: { a: 1 } }, deduplicate: { fields: ['body.id'], window_seconds: 60 } };
    const { id } = await destination('https://example.invalid/hook', rules);
    const again = await api('PATCH', `/destinations/${id}`, { rules });
    expect(again.json().rules.version).toBe(1);
    const cleared = await api('PATCH', `/destinations/${id}`, { rules: null });
    expect(cleared.json().rules.version).toBe(2);
    expect((await api('PATCH', `/destinations/${id}`, { rules: {} })).json().rules.version).toBe(2);
  });

  test('a JSON string body stays JSON: returned unchanged, "hello" goes out quoted', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id } = await destination(target.url, { transformation: { code: 'function transform(r) { r.body = "hello"; return r; }' } });
    await send({ id: 1 });
    await at(clock);
    expect(target.received[0]!.body.toString()).toBe('"hello"');
    expect(target.received[0]!.headers['content-type']).toBe('application/json');
    expect((await deliveries(id))[0]).toMatchObject({ state: 'succeeded' });
  });
});
