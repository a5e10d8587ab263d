import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { Actor, AttemptResult, AuditEvent, ClaimedDelivery, NewDestination, Store } from '../../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from '../support/databases.js';
import { TEST_POSTGRES_URL, withClient } from '../support/postgres-server.js';
import { createIntegration, createTenant, webhook, type Owner } from '../support/webhooks.js';
import { addDestination, claimDeliveries, finishAttempts } from '../support/deliveries.js';

/**
 * The outbox and its workers' side of the store, on each database: delivery rows written
 * with their webhooks, claims with leases shared by two nodes, budgets per destination,
 * results applied only under their lease, failure streaks, held deliveries, stats and the
 * feed's order (replays and sends: redeliveries.test.ts).
 */

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const LEASE = { limit: 100, leaseMs: 30_000 };
const DAY = 24 * 3600 * 1000;
const ACTOR: Actor = { type: 'cli', id: 'test', ip: null };

let db: TestDatabase;
let store: Store;
let owner: Owner;

beforeEach(async () => {
  db = await freshDatabase();
  store = db.store;
  owner = await createTenant(store);
});
afterEach(() => db.cleanup());

function audit(action: string, targetId = ''): AuditEvent {
  return { actor: ACTOR, action, targetType: 'destination', targetId, at: T0 };
}

function destination(companyId: string, settings: Partial<NewDestination> = {}): Promise<string> {
  return addDestination(store, companyId, { createdAt: T0, ...settings });
}

async function commit(owners: Array<[Owner, { event?: string; idempotencyKey?: string }?]>, at = T0) {
  const pending = owners.map(([o, options], i) => webhook(o, at + i, options));
  const outcomes = await store.commitBatch(pending, []);
  return pending.map((p, i) => ({ uuid: p.uuid, outcome: outcomes[i]!.kind }));
}

function result(claimed: ClaimedDelivery, outcome: AttemptResult['outcome'], at: number, extra: Partial<AttemptResult['attempt']> = {}): AttemptResult {
  return {
    deliveryId: claimed.id,
    companyId: claimed.companyId,
    destinationId: claimed.destinationId,
    leaseToken: claimed.leaseToken,
    outcome,
    gone: extra.status === 410,
    attempt: {
      series: claimed.series,
      number: claimed.attempt,
      attemptedAt: at,
      durationMs: 12,
      status: outcome === 'succeeded' ? 204 : 500,
      error: outcome === 'succeeded' ? null : 'http_status',
      responseExcerpt: 'ok',
      nextAttemptAt: outcome === 'retry' ? at + 5000 : null,
      ...extra,
    },
  };
}

describe('the outbox', () => {
  test('each accepted webhook gets a delivery per destination it matches, in its own commit; a replay gets none', async () => {
    const other = await createIntegration(store, owner.companyId);
    const everything = await destination(owner.companyId);
    const orders = await destination(owner.companyId, { eventPatterns: ['order.*'] });
    const onlyOther = await destination(owner.companyId, { integrationIds: [other.integrationId] });
    const stranger = await createTenant(store);
    await destination(stranger.companyId);

    const [paid, created, fromOther] = await commit([[owner, { event: 'invoice.paid', idempotencyKey: 'k1' }], [owner, { event: 'order.created' }], [other, { event: 'order.created.v2' }]]);
    const deliveries = await db.query<{ destination_id: string; webhook_uuid: string; state: string }>(
      'select destination_id, webhook_uuid, state from deliveries',
    );
    const pairs = deliveries.map((d) => `${d.destination_id}:${d.webhook_uuid}`).sort();
    expect(pairs).toEqual(
      [
        `${everything}:${paid!.uuid}`,
        `${everything}:${created!.uuid}`,
        `${everything}:${fromOther!.uuid}`,
        `${orders}:${created!.uuid}`,
        `${orders}:${fromOther!.uuid}`,
        `${onlyOther}:${fromOther!.uuid}`,
      ].sort(),
    );
    expect(new Set(deliveries.map((d) => d.state))).toEqual(new Set(['pending']));

    const again = await store.commitBatch([{ ...webhook(owner, T0 + 10, { event: 'invoice.paid', idempotencyKey: 'k1' }), rawBody: Buffer.from(JSON.stringify({ event: 'invoice.paid', data: { at: T0 } })) }], []);
    expect(again[0]!.kind).not.toBe('accepted');
    expect(await db.query('select id from deliveries')).toHaveLength(6);
  });

  test('a paused destination gets its deliveries held, and they become pending when it is resumed', async () => {
    const id = await destination(owner.companyId);
    await store.updateDestination(owner.companyId, id, { status: 'paused' }, T0, audit('destination.pause', id));
    await commit([[owner], [owner]]);
    expect((await db.query<{ state: string }>('select state from deliveries')).map((r) => r.state)).toEqual(['held', 'held']);
    expect(await claimDeliveries(store, T0 + 1000, LEASE)).toEqual([]);

    await store.updateDestination(owner.companyId, id, { status: 'active' }, T0 + 2000, audit('destination.resume', id));
    expect(await store.reconcileHeldDeliveries(T0 + 2000, 1000)).toBe(2);
    expect(await store.reconcileHeldDeliveries(T0 + 2000, 1000)).toBe(0);
    expect(await claimDeliveries(store, T0 + 2000, LEASE)).toHaveLength(2);
  });

  test("a commit's outcomes say which webhooks have a delivery due now: not those no destination wants, nor those held", async () => {
    const paused = await createTenant(store);
    const heldId = await destination(paused.companyId);
    await store.updateDestination(paused.companyId, heldId, { status: 'paused' }, T0, audit('destination.pause', heldId));
    await destination(owner.companyId, { eventPatterns: ['order.*'] });
    const without = await createTenant(store);

    const pending = [webhook(owner, T0, { event: 'order.created' }), webhook(owner, T0 + 1, { event: 'invoice.paid' }), webhook(paused, T0 + 2), webhook(without, T0 + 3)];
    const outcomes = await store.commitBatch(pending, []);
    expect(outcomes.map((o) => o.kind)).toEqual(['accepted', 'accepted', 'accepted', 'accepted']);
    expect(outcomes.map((o) => o.kind === 'accepted' && o.deliveriesDue === true)).toEqual([true, false, false, false]);
  });
});

describe('claims', () => {
  test('two nodes never claim the same delivery; an expired lease is claimed again and its late result no longer applies', async () => {
    await destination(owner.companyId, { maxInFlight: 1000 });
    await commit(Array.from({ length: 40 }, () => [owner] as [Owner]));
    const other = db.openAnother();
    // At once on PostgreSQL; on SQLite (one node) two connections of one thread would only wait for each other.
    const claims = [() => claimDeliveries(store, T0 + 100, { limit: 25, leaseMs: 30_000 }), () => claimDeliveries(other, T0 + 100, { limit: 25, leaseMs: 30_000 })];
    const [mine, theirs]: ClaimedDelivery[][] =
      testDialect() === 'postgres' ? await Promise.all(claims.map((claim) => claim())) : [await claims[0]!(), await claims[1]!()];
    const ids = [...mine!, ...theirs!].map((c) => c.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toHaveLength(40);
    const [body] = await store.readWebhookBodies([{ companyId: owner.companyId, uuid: mine![0]!.webhookUuid, receivedAt: mine![0]!.webhookReceivedAt }]);
    expect(body!.rawBody.toString()).toContain('invoice.paid');
    expect(body!.contentType).toBe('application/json');
    expect(mine![0]!.attempt).toBe(1);

    // Nothing is due while the leases run (timeout 15 s + 30 s).
    expect(await claimDeliveries(store, T0 + 40_000, LEASE)).toEqual([]);
    const reclaimed = await claimDeliveries(other, T0 + 46_000, LEASE);
    expect(reclaimed).toHaveLength(40);
    expect(reclaimed.find((c) => c.id === mine![0]!.id)!.attempt).toBe(2);

    // The first node reports late: its attempt is recorded, the delivery is the new lease's.
    await finishAttempts(store, [result(mine![0]!, 'succeeded', T0 + 47_000)], T0 + 47_000, 5 * DAY);
    const delivery = await store.getDelivery(owner.companyId, mine![0]!.id);
    expect(delivery!.state).toBe('pending');
    expect(await store.listDeliveryAttempts(owner.companyId, mine![0]!.id, 10)).toHaveLength(1);

    await finishAttempts(other, [result(reclaimed.find((c) => c.id === mine![0]!.id)!, 'succeeded', T0 + 47_000)], T0 + 47_000, 5 * DAY);
    expect((await store.getDelivery(owner.companyId, mine![0]!.id))!.state).toBe('succeeded');
  });

  test("a destination's requests in flight and rate per second hold across nodes", async () => {
    await destination(owner.companyId, { maxInFlight: 3 });
    const limited = await destination(owner.companyId, { maxInFlight: 100, ratePerSecond: 4, eventPatterns: ['rated.*'] });
    await commit(Array.from({ length: 10 }, () => [owner, { event: 'x' }] as [Owner, { event: string }]));
    await commit(Array.from({ length: 10 }, () => [owner, { event: 'rated.one' }] as [Owner, { event: string }]));
    const other = db.openAnother();
    const first = await claimDeliveries(store, T0 + 100, LEASE);
    const second = await claimDeliveries(other, T0 + 200, LEASE);
    const byDestination = (claims: ClaimedDelivery[], id: string) => claims.filter((c) => c.destinationId === id).length;
    const slotsOf = (claims: ClaimedDelivery[]) => claims.filter((c) => c.destinationId === limited).map((c) => c.sendAt);
    // The first destination (3 in flight) also gets the rated events: 3 at most in flight.
    expect(first.length + second.length - byDestination([...first, ...second], limited)).toBe(3);
    // The rated one: a slot every 250 ms, given out 250 ms ahead; the other node goes on from the row.
    expect(slotsOf(first)).toEqual([T0 + 100, T0 + 350]);
    expect(slotsOf(second)).toEqual([]);
    expect(slotsOf(await claimDeliveries(other, T0 + 400, LEASE))).toEqual([T0 + 600]);
    expect(slotsOf(await claimDeliveries(store, T0 + 1100, LEASE))).toEqual([T0 + 1100, T0 + 1350]);
  });

  // Counted per calendar second, 4 a second let 8 requests through within 150 ms around a second's edge.
  test.each([4, 3, 7])('a rate of %i a second: no second ever holds more sends, and in the long run the rate is reached', async (rate) => {
    const rated = await destination(owner.companyId, { maxInFlight: 100, ratePerSecond: rate });
    await commit(Array.from({ length: 100 }, () => [owner] as [Owner]), T0 - 10_000);
    const nodes = [store, db.openAnother()];
    const sends: number[] = [];
    let reported: AttemptResult[] = [];
    // Two nodes' rounds, 97 ms apart (a worker's idle poll is 100 ms), each reporting the last one's sends.
    for (let at = T0, round = 0; at < T0 + 12_000; at += 97, round++) {
      const { claimed } = await nodes[round % 2]!.exchangeDeliveries(reported, at, LEASE, 5 * DAY);
      const mine = claimed.filter((c) => c.destinationId === rated);
      // A claim's slots; without them a claim's requests go out when it is made.
      sends.push(...mine.map((c) => c.sendAt ?? at));
      reported = mine.map((c) => result(c, 'succeeded', c.sendAt ?? at));
    }
    sends.sort((a, b) => a - b);
    const crowded = sends.findIndex((sent, i) => i + rate < sends.length && sends[i + rate]! - sent < 1000);
    expect(crowded, `${rate + 1} sends within a second from ${crowded}: ${sends.slice(crowded, crowded + rate + 1).map((t) => t - T0)}`).toBe(-1);
    expect(sends.filter((sent) => sent < T0 + 12_000)).toHaveLength(12 * rate);
  });
});

test("a node's fair share per company: one company's backlog leaves room for another's, and a lone company may burst", async () => {
  const other = await createTenant(store);
  await destination(owner.companyId, { maxInFlight: 100 });
  await destination(other.companyId, { maxInFlight: 100 });
  await commit(Array.from({ length: 10 }, () => [owner] as [Owner]));
  await commit([[other], [other]], T0 + 50);
  const share = { limit: 3, burst: 4, inFlight: new Map([[owner.companyId, 1]]) };
  const claimed = await claimDeliveries(store, T0 + 100, { limit: 5, leaseMs: 30_000, perCompany: share });
  const count = (companyId: string) => claimed.filter((c) => c.companyId === companyId).length;
  // Shares first (2 more for the owner, 2 for the other), then the room left, up to the burst.
  expect([count(owner.companyId), count(other.companyId)]).toEqual([3, 2]);
  // Alone, a company goes up to its burst and no further.
  const alone = await claimDeliveries(store, T0 + 100, { limit: 10, leaseMs: 30_000, perCompany: { ...share, inFlight: new Map([[owner.companyId, 3]]) } });
  expect(alone.map((c) => c.companyId)).toEqual([owner.companyId]);
});

describe('what a claim looks at', () => {
  test("a destination with no room, however old and large its backlog, holds back no other destination's deliveries", async () => {
    const stalled = await destination(owner.companyId, { maxInFlight: 1 });
    const rated = await destination(owner.companyId, { maxInFlight: 100, ratePerSecond: 1, eventPatterns: ['rated.*'] });
    // 1,100 deliveries for the stalled destination and 50 for the rated one, older than anyone else's.
    await commit(Array.from({ length: 1100 }, () => [owner, { event: 'x' }] as [Owner, { event: string }]));
    await commit(Array.from({ length: 50 }, () => [owner, { event: 'rated.x' }] as [Owner, { event: string }]), T0 + 2000);
    const first = await claimDeliveries(store, T0 + 10_000, LEASE);
    expect(first.filter((c) => c.destinationId === stalled)).toHaveLength(1);
    expect(first.filter((c) => c.destinationId === rated)).toHaveLength(1);

    // Another company's deliveries, due later than the whole backlog, go out at once, in the same second.
    const other = await createTenant(store);
    const theirs = await destination(other.companyId);
    await commit(Array.from({ length: 5 }, () => [other] as [Owner]), T0 + 5000);
    const next = await claimDeliveries(store, T0 + 10_100, LEASE);
    expect(next.map((c) => c.destinationId)).toEqual(Array(5).fill(theirs));
  });

  test("a worker's results free its destination's room for the claim of the same exchange", async () => {
    const id = await destination(owner.companyId, { maxInFlight: 2 });
    await commit(Array.from({ length: 4 }, () => [owner] as [Owner]));
    const first = await claimDeliveries(store, T0 + 100, LEASE);
    expect(first).toHaveLength(2);
    const { claimed } = await store.exchangeDeliveries(first.map((c) => result(c, 'succeeded', T0 + 200)), T0 + 200, LEASE, 5 * DAY);
    expect(claimed.map((c) => c.destinationId)).toEqual([id, id]);
    expect(new Set([...first, ...claimed].map((c) => c.id)).size).toBe(4);
  });

  test("a destination's last success is kept to the second: a busy destination's row is not written every round", async () => {
    const id = await destination(owner.companyId, { maxInFlight: 1 });
    await commit(Array.from({ length: 3 }, () => [owner] as [Owner]));
    const succeed = async (at: number) => {
      const [claimed] = await claimDeliveries(store, at, LEASE);
      await finishAttempts(store, [result(claimed!, 'succeeded', at)], at, 5 * DAY);
      return (await store.getDestination(owner.companyId, id))!.lastSuccessAt;
    };
    expect(await succeed(T0 + 1000)).toBe(T0 + 1000);
    expect(await succeed(T0 + 1400)).toBe(T0 + 1000);
    expect(await succeed(T0 + 2500)).toBe(T0 + 2500);
  });

  test("one company's many destinations, all waiting longer, do not fill a claim: each company's oldest destination comes first", async () => {
    for (let i = 0; i < 12; i++) await destination(owner.companyId, { maxInFlight: 100 });
    await commit(Array.from({ length: 40 }, () => [owner] as [Owner]));
    const other = await createTenant(store);
    const theirs = await destination(other.companyId);
    await commit([[other], [other]], T0 + 5000);
    // Limit 4: before this, the claim read the 16 oldest due rows, all the owner's, and the other company waited.
    const claimed = await claimDeliveries(store, T0 + 10_000, { limit: 4, leaseMs: 30_000, perCompany: { limit: 2, burst: 3, inFlight: new Map() } });
    expect(claimed.filter((c) => c.destinationId === theirs)).toHaveLength(2);
    expect(claimed.filter((c) => c.companyId === owner.companyId)).toHaveLength(2);
  });
});

describe('results', () => {
  test('a retry is due at its time, a success settles, the last failure is the dead letter', async () => {
    await destination(owner.companyId);
    await commit([[owner]]);
    const [first] = await claimDeliveries(store, T0, LEASE);
    await finishAttempts(store, [result(first!, 'retry', T0 + 10)], T0 + 10, 5 * DAY);
    expect(await claimDeliveries(store, T0 + 5000, LEASE)).toEqual([]);
    const [second] = await claimDeliveries(store, T0 + 5010, LEASE);
    expect(second!.attempt).toBe(2);
    await finishAttempts(store, [result(second!, 'failed', T0 + 5020)], T0 + 5020, 5 * DAY);
    const delivery = (await store.getDelivery(owner.companyId, first!.id))!;
    expect(delivery).toMatchObject({ state: 'failed', attempts: 2, nextAttemptAt: null, lastStatus: 500, lastError: 'http_status' });
    const attempts = await store.listDeliveryAttempts(owner.companyId, first!.id, 10);
    expect(attempts.map((a) => [a.number, a.nextAttemptAt])).toEqual([
      [2, null],
      [1, T0 + 5010],
    ]);
  });

  test('failing without a success for the chosen span disables the destination, as a 410 does at once, with an audit record', async () => {
    const failing = await destination(owner.companyId);
    await commit([[owner]]);
    const [first] = await claimDeliveries(store, T0, LEASE);
    await finishAttempts(store, [result(first!, 'retry', T0)], T0, DAY);
    const [second] = await claimDeliveries(store, T0 + DAY, LEASE);
    const disabled = await finishAttempts(store, [result(second!, 'retry', T0 + DAY)], T0 + DAY, DAY);
    expect(disabled).toEqual([{ companyId: owner.companyId, destinationId: failing, reason: expect.stringContaining('failing since') }]);
    expect((await store.getDestination(owner.companyId, failing))!).toMatchObject({ status: 'disabled', failingSince: T0 });
    expect(await claimDeliveries(store, T0 + 2 * DAY, LEASE)).toEqual([]);
    expect(await store.reconcileHeldDeliveries(T0 + 2 * DAY, 100)).toBe(1);

    const gone = await destination(owner.companyId);
    await commit([[owner]], T0 + 3 * DAY);
    const claimed = (await claimDeliveries(store, T0 + 3 * DAY, LEASE)).filter((c) => c.destinationId === gone);
    await finishAttempts(store, [result(claimed[0]!, 'retry', T0 + 3 * DAY, { status: 410 })], T0 + 3 * DAY, 5 * DAY);
    expect((await store.getDestination(owner.companyId, gone))!.disabledReason).toMatch(/410 Gone/);
    const records = await store.listAuditLog(owner.companyId, { limit: 50, action: 'destination.disable' });
    expect(records.map((r) => [r.targetId, r.actor.type])).toEqual(
      expect.arrayContaining([
        [failing, 'system'],
        [gone, 'system'],
      ]),
    );
  });
});

test('stats count attempts, their latency and the backlog', async () => {
  const id = await destination(owner.companyId);
  await commit([[owner], [owner], [owner], [owner]]);
  const claimed = await claimDeliveries(store, T0 + 100, { limit: 3, leaseMs: 30_000 });
  await finishAttempts(store, 
    claimed.map((c, i) => result(c, i === 2 ? 'retry' : 'succeeded', T0 + 1000 * i, { durationMs: 10 * (i + 1) })),
    T0 + 3000,
    5 * DAY,
  );
  const stats = await store.destinationStats(owner.companyId, id, { since: T0 - 3600_000, until: T0 + 3600_000, bucketMs: 3600_000, now: T0 + 3000 });
  expect(stats).toMatchObject({ attempts: 3, succeeded: 2, failed: 1, latencyMs: { p50: 20, p90: 30, p99: 30 }, truncated: false });
  expect(stats.backlog).toEqual({ pending: 2, held: 0, inFlight: 0, oldestDueAt: T0 + 3 });
  expect(stats.buckets).toEqual([{ start: T0, succeeded: 2, failed: 1, p50Ms: 20, p99Ms: 30 }]);
});

test("every company's backlog: due deliveries waiting and those whose lease expired, not those in flight or due later", async () => {
  await destination(owner.companyId);
  const other = await createTenant(store);
  await destination(other.companyId);
  await commit([[owner], [owner], [owner]]);
  await commit([[other]], T0 + 10);
  await commit([[other]], T0 + 60_000);
  expect(await store.deliveryBacklog(T0 + 100, 1000)).toEqual({ due: 4, oldestDueAt: T0 });
  expect(await store.deliveryBacklog(T0 + 100, 2)).toEqual({ due: 2, oldestDueAt: T0 });

  // Three in flight: not counted until their lease ends (timeout 15 s + lease 30 s).
  expect(await claimDeliveries(store, T0 + 100, { limit: 3, leaseMs: 30_000 })).toHaveLength(3);
  expect(await store.deliveryBacklog(T0 + 200, 1000)).toEqual({ due: 1, oldestDueAt: T0 + 10 });
  expect(await claimDeliveries(store, T0 + 200, { limit: 1, leaseMs: 30_000 })).toHaveLength(1);
  expect(await store.deliveryBacklog(T0 + 300, 1000)).toEqual({ due: 0, oldestDueAt: null });
  // Their node died: once the leases have ended they are due again.
  expect(await store.deliveryBacklog(T0 + 100 + 45_000, 1000)).toEqual({ due: 3, oldestDueAt: T0 + 100 + 45_000 });
  expect(await store.deliveryBacklog(T0 + 60_000, 1000)).toEqual({ due: 5, oldestDueAt: T0 + 100 + 45_000 });
  expect(await store.deliveryBacklog(T0 + 60_000, 4)).toEqual({ due: 4, oldestDueAt: T0 + 100 + 45_000 });
});

test("retention removes deliveries and attempts past the company's retention, and keeps the rest", async () => {
  const id = await destination(owner.companyId);
  await commit([[owner]], T0);
  await commit([[owner]], T0 + 40 * DAY);
  const [old] = await claimDeliveries(store, T0 + 10, LEASE);
  await finishAttempts(store, [result(old!, 'succeeded', T0 + 10)], T0 + 10, 5 * DAY);
  const report = await store.purgeExpired(T0 + 45 * DAY);
  expect(report.deliveries).toBe(1);
  const left = await store.listDeliveries(owner.companyId, { destinationId: id, limit: 10 });
  expect(left.map((d) => d.createdAt)).toEqual([T0 + 40 * DAY]);
  expect(await db.query('select id from delivery_attempts')).toEqual([]);
});

test("stats of another company's destination count nothing of it (a row of another company is not found)", async () => {
  const id = await destination(owner.companyId);
  await commit([[owner], [owner]]);
  const range = { since: T0 - 1000, until: T0 + 1000, bucketMs: 60_000, now: T0 + 10 };
  expect((await store.destinationStats(owner.companyId, id, range)).backlog.pending).toBe(2);
  const stranger = await createTenant(store);
  expect((await store.destinationStats(stranger.companyId, id, range)).backlog).toEqual({ pending: 0, held: 0, inFlight: 0, oldestDueAt: null });
});

describe('the feed', () => {
  // On PostgreSQL, a database of its own: other test files' transactions in the run's
  // database would hold the feed back (as they should), and these reads do not wait.
  beforeEach(async () => {
    if (testDialect() !== 'postgres') return;
    await db.cleanup();
    db = await freshDatabase({ ownDatabase: true });
    store = db.store;
    owner = await createTenant(store);
  });

  test('gives each webhook once, oldest first, resumable from a position, per company', async () => {
    const stranger = await createTenant(store);
    const first = await commit([[owner], [stranger], [owner]]);
    const second = await commit([[owner]], T0 + 1000);
    const page = await store.readFeed(owner.companyId, { after: null, limit: 2 });
    expect(page.map((w) => w.uuid)).toEqual([first[0]!.uuid, first[2]!.uuid]);
    const rest = await store.readFeed(owner.companyId, { after: page[1]!.position, limit: 10 });
    expect(rest.map((w) => w.uuid)).toEqual([second[0]!.uuid]);
    expect(await store.readFeed(owner.companyId, { after: rest[0]!.position, limit: 10 })).toEqual([]);
  });

  test.runIf(testDialect() === 'postgres')('on PostgreSQL, a transaction still open hides what committed after it began, until it ends', async () => {
    await withClient(db.databaseUrl, async (client) => {
      await client.query('begin');
      // Takes a transaction id now, as a commit in progress on another node would have.
      await client.query('select pg_current_xact_id()');
      const later = await commit([[owner]]);
      expect(await store.readFeed(owner.companyId, { after: null, limit: 10 })).toEqual([]);
      await client.query('commit');
      expect((await store.readFeed(owner.companyId, { after: null, limit: 10 })).map((w) => w.uuid)).toEqual([later[0]!.uuid]);
    });
  });

  test.runIf(testDialect() === 'postgres')("on PostgreSQL, a long transaction in another database of the server holds no company's feed back", async () => {
    // The server's maintenance database: another application's, as far as this one can tell.
    await withClient(TEST_POSTGRES_URL, async (client) => {
      await client.query('begin');
      await client.query('select pg_current_xact_id()');
      const later = await commit([[owner]]);
      expect((await store.readFeed(owner.companyId, { after: null, limit: 10 })).map((w) => w.uuid)).toEqual([later[0]!.uuid]);
      await client.query('rollback');
    });
  });
});
