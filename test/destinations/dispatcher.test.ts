import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { newSigningSecret } from '../../src/destinations/signing.js';
import type { DispatcherOptions } from '../../src/destinations/dispatcher.js';
import type { NewDestination } from '../../src/store/store.js';
import { buildTestApp, sendWebhook, testSecretBox, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { webhook } from '../support/webhooks.js';
import { flakyReceiver, goneReceiver, hangUpReceiver, okReceiver, silentReceiver, startReceiver, tooManyReceiver, type Receiver } from '../support/receivers.js';
import { addDestination } from '../support/deliveries.js';

/**
 * The delivery workers against real receivers on loopback, on each database: what arrives
 * (the raw bytes, the Standard Webhooks signature that the `standardwebhooks` package
 * verifies, our headers), and the schedule, driven by a clock of the test's own rather than
 * by waiting hours: each attempt happens when it is due and not before, Retry-After is
 * honoured, the last failure is the dead letter, a 410 or five days of failure disable the
 * destination. Addresses refused at creation are refused again at the attempt.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

let t: TestApp;
let tenant: TestTenant;
let clock: number;
const receivers: Receiver[] = [];

/**
 * The app with its delivery workers stopped (the test drives them, or starts them) on a
 * clock that starts now; `delivery` overrides the workers' options.
 */
async function setup(env: Record<string, string> = { INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' }, delivery: Partial<DispatcherOptions> = {}) {
  clock = Date.now() + SECOND;
  // random() = 0.5: a jitter factor of exactly 1, so each delay is the schedule's own.
  t = await buildTestApp(env, { delivery: { start: false, now: () => clock, random: () => 0.5, ...delivery } });
  tenant = await t.newTenant();
}

afterEach(async () => {
  await t?.close();
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

async function receiver(start: Promise<Receiver>): Promise<Receiver> {
  const started = await start;
  receivers.push(started);
  return started;
}

/** A destination made in the store (the API's checks are its own tests'), with its secret. */
async function destination(url: string, settings: Partial<NewDestination> = {}) {
  const secret = newSigningSecret();
  const box = testSecretBox();
  const id = await addDestination(t.store, tenant.companyId, {
    name: 'Receiver',
    url,
    headersSealed: box.seal(JSON.stringify({ Authorization: 'Bearer receiver-token' })),
    headerNames: ['Authorization'],
    timeoutMs: 2000,
    secretSealed: box.seal(secret),
    ...settings,
  });
  return { id, secret };
}

async function send(body = '{"event":"order.created","data":{"id":42,"note":"caf\u00e9"}}') {
  const answer = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body });
  expect(answer.statusCode).toBe(202);
  // The webhook was received on the real clock: ours never runs behind it.
  clock = Math.max(clock, Date.now() + 1);
  return answer.json<{ uuid: string }>().uuid;
}

async function onlyDelivery(destinationId: string) {
  const [delivery] = await t.store.listDeliveries(tenant.companyId, { destinationId, limit: 10 });
  return delivery!;
}

/** Moves the clock to `at` and runs the workers once; how many attempts they made. */
async function at(time: number): Promise<number> {
  clock = time;
  return t.app.dispatcher.runOnce();
}

describe('what a destination receives', () => {
  test('the raw body byte for byte, signed as Standard Webhooks signs, with our headers and its own', async () => {
    await setup();
    const target = await receiver(okReceiver(204));
    const { id, secret } = await destination(target.url);
    const body = '{"event":"order.created","data":{"id":42,"note":"caf\u00e9"},"extra":  [1, 2]}';
    const uuid = await send(body);

    expect(await at(clock)).toBe(1);
    const [request] = target.received;
    expect(request!.body.equals(Buffer.from(body))).toBe(true);
    expect(request!.headers).toMatchObject({
      'content-type': 'application/json',
      'webhook-id': uuid,
      'webhook-timestamp': String(Math.floor(clock / 1000)),
      'x-intake-event': 'order.created',
      'x-intake-integration-id': tenant.integrationId,
      'x-intake-attempt': '1',
      authorization: 'Bearer receiver-token',
    });
    // The receiver's side, with the reference library (its clock is real; ours ran a second ahead).
    const verified = new Webhook(secret).verify(request!.body.toString(), request!.headers as Record<string, string>);
    expect(verified).toEqual(JSON.parse(body));
    expect(() => new Webhook(newSigningSecret()).verify(request!.body.toString(), request!.headers as Record<string, string>)).toThrow();

    const delivery = await onlyDelivery(id);
    expect(delivery).toMatchObject({ state: 'succeeded', attempts: 1, lastStatus: 204, lastError: null, nextAttemptAt: null });
    const [attempt] = await t.store.listDeliveryAttempts(tenant.companyId, delivery.id, 10);
    expect(attempt).toMatchObject({ number: 1, status: 204, error: null, attemptedAt: clock, nextAttemptAt: null });
  });
});

describe('the schedule', () => {
  test('a failing receiver is tried again after 5 s, 5 min and 30 min, never earlier, until it answers 2xx', async () => {
    await setup();
    const target = await receiver(flakyReceiver(3));
    const { id } = await destination(target.url);
    await send();
    const start = clock;

    expect(await at(start)).toBe(1);
    expect(await at(start + 5 * SECOND - 1)).toBe(0);
    expect(await at(start + 5 * SECOND)).toBe(1);
    expect(await at(start + 5 * SECOND + 5 * MINUTE - 1)).toBe(0);
    expect(await at(start + 5 * SECOND + 5 * MINUTE)).toBe(1);
    expect(await at(start + 5 * SECOND + 35 * MINUTE)).toBe(1);
    expect(target.received).toHaveLength(4);

    const delivery = await onlyDelivery(id);
    expect(delivery).toMatchObject({ state: 'succeeded', attempts: 4 });
    const attempts = (await t.store.listDeliveryAttempts(tenant.companyId, delivery.id, 10)).reverse();
    expect(attempts.map((a) => [a.number, a.status, a.error, a.nextAttemptAt === null ? null : a.nextAttemptAt - a.attemptedAt])).toEqual([
      [1, 500, 'http_status', 5 * SECOND],
      [2, 500, 'http_status', 5 * MINUTE],
      [3, 500, 'http_status', 30 * MINUTE],
      [4, 200, null, null],
    ]);
    expect(attempts[0]!.responseExcerpt).toBe('not yet');
  });

  test('after the eighth failure the delivery is failed, the dead letter, and nothing more is sent', async () => {
    await setup();
    const target = await receiver(flakyReceiver(100));
    const { id } = await destination(target.url);
    await send();
    const delays = [0, 5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];
    let time = clock;
    for (const delay of delays) {
      time += delay;
      expect(await at(time)).toBe(1);
    }
    expect(await at(time + 30 * HOUR)).toBe(0);
    expect(target.received).toHaveLength(8);
    expect(await onlyDelivery(id)).toMatchObject({ state: 'failed', attempts: 8, nextAttemptAt: null, lastStatus: 500 });
  });

  test("a 429's Retry-After is waited for, longer than the schedule's 5 s", async () => {
    await setup();
    const target = await receiver(tooManyReceiver('120'));
    const { id } = await destination(target.url);
    await send();
    await at(clock);
    const delivery = await onlyDelivery(id);
    expect(delivery.lastStatus).toBe(429);
    expect(delivery.nextAttemptAt! - delivery.lastAttemptAt!).toBeGreaterThanOrEqual(120 * SECOND);
    expect(await at(clock + 119 * SECOND)).toBe(0);
  });

  test('no answer within the timeout, and a connection closed without an answer, are failed attempts of their kind', async () => {
    await setup();
    const silent = await receiver(silentReceiver());
    const hangUp = await receiver(hangUpReceiver());
    const slow = await destination(silent.url, { timeoutMs: 1000 });
    const closed = await destination(hangUp.url);
    await send();
    expect(await at(clock)).toBe(2);
    expect(await onlyDelivery(slow.id)).toMatchObject({ state: 'pending', lastError: 'timeout', lastStatus: null });
    expect(await onlyDelivery(closed.id)).toMatchObject({ state: 'pending', lastError: 'connection_reset' });
  });
});

describe('disabling', () => {
  test('410 Gone disables the destination at once: its deliveries are held, with an audit record by the system', async () => {
    await setup();
    const target = await receiver(goneReceiver());
    const { id } = await destination(target.url);
    await send();
    await at(clock);
    const disabled = (await t.store.getDestination(tenant.companyId, id))!;
    expect(disabled).toMatchObject({ status: 'disabled', disabledReason: expect.stringMatching(/410 Gone/) });
    await send();
    expect(await at(clock + HOUR)).toBe(0);
    const states = (await t.store.listDeliveries(tenant.companyId, { destinationId: id, limit: 10 })).map((d) => d.state);
    expect(states.sort()).toEqual(['held', 'held']);
    const [record] = await t.store.listAuditLog(tenant.companyId, { limit: 5, action: 'destination.disable' });
    expect(record).toMatchObject({ targetId: id, actor: { type: 'system' } });
  });

  test('failing with no success for the configured span disables it; a success in between starts the span again', async () => {
    await setup({ INTAKE_DESTINATION_ALLOW: '127.0.0.1/32', INTAKE_DESTINATION_DISABLE_AFTER_HOURS: '3' });
    let failing = true;
    const target = await receiver(startReceiver((response) => response.writeHead(failing ? 503 : 200).end()));
    const { id } = await destination(target.url);
    await send();
    const start = clock;
    await at(start);
    await at(start + 5 * SECOND);
    await at(start + 5 * SECOND + 5 * MINUTE);
    failing = false;
    await send();
    await at(start + 2 * HOUR);
    failing = true;
    await send();
    await at(start + 2 * HOUR + SECOND);
    // 3 hours after the first failure, but only one since the success: still active.
    await at(start + 3 * HOUR + 10 * SECOND);
    expect((await t.store.getDestination(tenant.companyId, id))!.status).toBe('active');
    await at(start + 5 * HOUR + 2 * SECOND);
    expect((await t.store.getDestination(tenant.companyId, id))!).toMatchObject({ status: 'disabled', failingSince: start + 2 * HOUR + SECOND });
  });
});

test('an address refused at creation is refused at the attempt too: nothing reaches it', async () => {
  await setup({});
  const target = await receiver(okReceiver());
  const byAddress = await destination(target.url);
  const byName = await destination(target.url.replace('127.0.0.1', 'localhost'));
  await send();
  expect(await at(clock)).toBe(2);
  expect(target.received).toEqual([]);
  expect(await onlyDelivery(byAddress.id)).toMatchObject({ state: 'pending', lastError: 'blocked_address' });
  expect(await onlyDelivery(byName.id)).toMatchObject({ state: 'pending', lastError: 'blocked_address' });
});

test('a webhook purged before its delivery could be sent ends the delivery as failed, webhook_purged, without a request', async () => {
  await setup();
  const target = await receiver(okReceiver());
  const { id } = await destination(target.url);
  // Committed by another node (straight to the store): this one has no copy of its body.
  const pending = webhook({ companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: tenant.keyId }, Date.now());
  await t.store.commitBatch([pending], []);
  clock = Math.max(clock, Date.now() + 1);
  await t.database.query(`delete from webhooks where uuid = ${t.database.dialect === 'postgres' ? '$1' : '?'}`, [pending.uuid]);
  expect(await at(clock)).toBe(1);
  expect(target.received).toEqual([]);
  expect(await onlyDelivery(id)).toMatchObject({ state: 'failed', lastError: 'webhook_purged', nextAttemptAt: null });
});

test('while intake is near one of its bounds, no delivery is claimed: deliveries wait, webhooks are not refused for them', async () => {
  let pressure = true;
  await setup(undefined, { underPressure: () => pressure });
  const target = await receiver(okReceiver());
  const { id } = await destination(target.url);
  await send();
  expect(await at(clock)).toBe(0);
  expect(t.app.dispatcher.counts.shed).toBeGreaterThan(0);
  expect(target.received).toEqual([]);
  pressure = false;
  expect(await at(clock)).toBe(1);
  expect(await onlyDelivery(id)).toMatchObject({ state: 'succeeded' });
});

test("a round's attempts that end quickly are written in the next round, whose claim has the destination's whole max_in_flight again", async () => {
  // Workers running on their own, a database slow to answer (every exchange 100 ms), a
  // receiver that answers at once: 30 deliveries to a destination taking 10 at a time.
  await setup(undefined, { maxWaitForAttemptsMs: 5000 });
  const target = await receiver(okReceiver());
  await destination(target.url, { maxInFlight: 10 });
  for (let i = 0; i < 30; i++) await send();
  const rounds: Array<{ results: number; claimed: number }> = [];
  const exchange = t.store.exchangeDeliveries.bind(t.store);
  vi.spyOn(t.store, 'exchangeDeliveries').mockImplementation(async (...args) => {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const answer = await exchange(...args);
    rounds.push({ results: args[0].length, claimed: answer.claimed.length });
    return answer;
  });

  t.app.dispatcher.start();
  await waitFor(async () => (rounds.filter((round) => round.results > 0).reduce((sum, round) => sum + round.results, 0) === 30 ? true : undefined), 'every result written', 10_000);
  const working = rounds.filter((round) => round.results > 0 || round.claimed > 0);
  // Started at once after a claim, each round found the last one's attempts still leased:
  // claims of 10, then 1 and 9 and so on, the destination's room shared by two rounds.
  expect(working).toEqual([
    { results: 0, claimed: 10 },
    { results: 10, claimed: 10 },
    { results: 10, claimed: 10 },
    { results: 10, claimed: 0 },
  ]);
  expect(target.received).toHaveLength(30);
});

test('a node that wrote enough results vacuums the deliveries table itself, in the background, once per interval', async () => {
  await setup(undefined, { vacuumAfterResults: 3 });
  const target = await receiver(okReceiver());
  await destination(target.url);
  const vacuums = vi.spyOn(t.store, 'vacuumDeliveries');
  await send();
  await send();
  expect(await at(clock)).toBe(2);
  expect(vacuums).not.toHaveBeenCalled();
  await send();
  expect(await at(clock)).toBe(1);
  expect(vacuums).toHaveBeenCalledTimes(1);
  await vacuums.mock.results[0]!.value;
  if (t.database.dialect === 'postgres') {
    const [stats] = await t.database.query<{ vacuums: string }>(
      "select vacuum_count as vacuums from pg_stat_user_tables where relname = 'deliveries' and schemaname = current_schema()",
    );
    expect(Number(stats!.vacuums)).toBeGreaterThanOrEqual(1);
  }
  // Not again within the interval, however many results.
  for (let i = 0; i < 4; i++) await send();
  clock += 10 * SECOND;
  expect(await at(clock)).toBe(4);
  expect(vacuums).toHaveBeenCalledTimes(1);
  clock += 30 * SECOND;
  await send();
  expect(await at(clock)).toBe(1);
  expect(vacuums).toHaveBeenCalledTimes(2);
});
