import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { AppError } from '../../src/errors.js';
import { Redeliveries, type RedeliveryOptions } from '../../src/services/redeliveries.js';
import type { Actor, Store } from '../../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from '../support/databases.js';
import { addDestination } from '../support/deliveries.js';
import { createTenant, webhook, type Owner } from '../support/webhooks.js';

/**
 * Replays and sends, bounded (issue 33, findings 2, 3 and 6), on each database: one bulk
 * operation per company at a time across nodes, steps of a few hundred rows that let other
 * companies' commits through, a budget per company, and no replay of a series that runs or
 * has just begun.
 */

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const ACTOR: Actor = { type: 'cli', id: 'test', ip: null };
const HOUR = 3600_000;

let db: TestDatabase;
let store: Store;
let owner: Owner;
let now: number;

beforeEach(async () => {
  db = await freshDatabase();
  store = db.store;
  owner = await createTenant(store);
  now = T0;
});
afterEach(async () => {
  vi.restoreAllMocks();
  await db.cleanup();
});

function redeliveries(options: Partial<RedeliveryOptions> = {}, on: Store = store): Redeliveries {
  return new Redeliveries(on, { perHour: 100_000, now: () => now, ...options });
}

/** `count` webhooks of the owner, committed in groups, each with a delivery to `destinationId` settled as `state`. */
async function settledDeliveries(destinationId: string, count: number, state: 'failed' | 'succeeded', who = owner): Promise<string[]> {
  const uuids: string[] = [];
  for (let i = 0; i < count; i += 500) {
    const batch = Array.from({ length: Math.min(500, count - i) }, (_, j) => webhook(who, T0 - HOUR + i + j));
    await store.commitBatch(batch, []);
    uuids.push(...batch.map((w) => w.uuid));
  }
  // Settled as the workers would have left them (their own tests cover how).
  await db.query(`update deliveries set state = '${state}', next_attempt_at = null, attempts = 1 where destination_id = '${destinationId}'`);
  return uuids;
}

async function states(destinationId: string): Promise<Record<string, number>> {
  const rows = await db.query<{ state: string; series: number | string; n: number | string }>(
    `select state, series, count(*) as n from deliveries where destination_id = '${destinationId}' group by state, series order by state, series`,
  );
  return Object.fromEntries(rows.map((r) => [`${r.state}/${r.series}`, Number(r.n)]));
}

async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe('a bulk replay', () => {
  test('leaves out pending deliveries and those whose series began within the cool-down: calling it again sends nothing again', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 20, 'succeeded');
    const service = redeliveries({ cooldownMs: 60_000 });

    expect(await service.replay(owner.companyId, { destinationId: id }, ACTOR)).toEqual({ count: 20, more: false });
    expect(await states(id)).toEqual({ 'pending/1': 20 });
    // Their series runs: nothing to replay, however often it is called.
    now += 1000;
    expect((await service.replay(owner.companyId, { destinationId: id }, ACTOR)).count).toBe(0);
    // Delivered at once (the receiver answered), still within a minute of the replay: nothing again.
    await db.query(`update deliveries set state = 'succeeded', next_attempt_at = null where destination_id = '${id}'`);
    now += 30_000;
    expect((await service.replay(owner.companyId, { destinationId: id }, ACTOR)).count).toBe(0);
    now += 31_000;
    expect((await service.replay(owner.companyId, { destinationId: id }, ACTOR)).count).toBe(20);
    expect(await states(id)).toEqual({ 'pending/2': 20 });
  });

  test('refuses to filter on cancelled deliveries or an unknown state, naming the field (pending is retry now)', async () => {
    const id = await addDestination(store, owner.companyId);
    for (const state of ['cancelled', 'lost'] as const) {
      const error = await refusal(redeliveries().replay(owner.companyId, { destinationId: id, state: state as 'failed' }, ACTOR));
      expect([error.code, error.details.field]).toEqual(['invalid_request', 'state']);
    }
  });

  test('writes in steps of at most the step size, and records the operation once with its total', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 1100, 'failed');
    const steps: number[] = [];
    const step = store.replayStep.bind(store);
    vi.spyOn(store, 'replayStep').mockImplementation((companyId, lease, ids, ...rest) => {
      steps.push(ids.length);
      return step(companyId, lease, ids, ...rest);
    });
    expect(await redeliveries().replay(owner.companyId, { destinationId: id, state: 'failed' }, ACTOR)).toEqual({ count: 1100, more: false });
    expect(steps).toEqual([250, 250, 250, 250, 100]);
    expect(await states(id)).toEqual({ 'pending/1': 1100 });
    const records = await store.listAuditLog(owner.companyId, { limit: 10, action: 'delivery.replay' });
    expect(records.map((r) => r.after)).toEqual([{ destinationId: id, state: 'failed', replayed: 1100 }]);
  });

  test.runIf(testDialect() === 'sqlite')('lets another company’s webhooks commit between its steps (SQLite: one commit thread)', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 2000, 'failed');
    const other = await createTenant(store);
    const order: string[] = [];
    let otherCommit: Promise<unknown> | undefined;
    const step = store.replayStep.bind(store);
    vi.spyOn(store, 'replayStep').mockImplementation((...args) => {
      const written = step(...args);
      // The other company's webhook arrives while the replay's first step is being written.
      otherCommit ??= store.commitBatch([webhook(other, now)], []).then(() => order.push('other company committed'));
      return written;
    });
    await redeliveries().replay(owner.companyId, { destinationId: id }, ACTOR).then(() => order.push('replay done'));
    await otherCommit;
    expect(order).toEqual(['other company committed', 'replay done']);
  });
});

describe('one bulk operation per company at a time', () => {
  test('across nodes: a second one is refused with a Retry-After while the first runs; other companies are not held up; then it is free', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 300, 'failed');
    const stranger = await createTenant(store);
    const strangerDestination = await addDestination(store, stranger.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(strangerDestination, 5, 'failed', stranger);

    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const step = store.replayStep.bind(store);
    vi.spyOn(store, 'replayStep').mockImplementation(async (...args) => {
      await held;
      return step(...args);
    });
    const first = redeliveries().replay(owner.companyId, { destinationId: id }, ACTOR);
    const otherNode = redeliveries({}, db.openAnother());
    await vi.waitFor(() => expect(store.replayStep).toHaveBeenCalled());

    const busy = await refusal(otherNode.replay(owner.companyId, { destinationId: id }, ACTOR));
    expect(busy.code).toBe('redelivery_busy');
    expect(busy.details.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect((await refusal(otherNode.send(owner.companyId, id, { since: 0 }, ACTOR))).code).toBe('redelivery_busy');
    expect(await otherNode.replay(stranger.companyId, { destinationId: strangerDestination }, ACTOR)).toEqual({ count: 5, more: false });

    release();
    expect((await first).count).toBe(300);
    now += 120_000;
    await db.query(`update deliveries set state = 'failed' where destination_id = '${id}'`);
    expect((await otherNode.replay(owner.companyId, { destinationId: id }, ACTOR)).count).toBe(300);
  });

  test('a lease left by a node that died ends by itself', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 3, 'failed');
    const start = await store.beginRedelivery(owner.companyId, { token: 'dead-node', at: now, leaseMs: 60_000, budget: { perHour: 100, burst: 100 } });
    expect(start.kind).toBe('started');
    expect((await refusal(redeliveries().replay(owner.companyId, { destinationId: id }, ACTOR))).code).toBe('redelivery_busy');
    now += 60_001;
    expect((await redeliveries().replay(owner.companyId, { destinationId: id }, ACTOR)).count).toBe(3);
  });
});

describe('refusals that cost the database nothing', () => {
  test('the node running a company’s operation, or that saw its budget spent, refuses another call without a store call', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 30, 'failed');
    const service = redeliveries({ perHour: 20 });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const step = store.replayStep.bind(store);
    vi.spyOn(store, 'replayStep').mockImplementation(async (...args) => {
      await held;
      return step(...args);
    });
    const begin = vi.spyOn(store, 'beginRedelivery');
    const first = service.replay(owner.companyId, { destinationId: id }, ACTOR);
    await vi.waitFor(() => expect(store.replayStep).toHaveBeenCalled());
    expect((await refusal(service.replay(owner.companyId, { destinationId: id }, ACTOR))).code).toBe('redelivery_busy');
    expect(begin).toHaveBeenCalledTimes(1);
    release();
    expect((await first).count).toBe(20);

    // The database says the budget is spent once; the node remembers until a token is back.
    expect((await refusal(service.replay(owner.companyId, { destinationId: id }, ACTOR))).code).toBe('redelivery_budget_spent');
    expect(begin).toHaveBeenCalledTimes(2);
    const replayOne = vi.spyOn(store, 'replayDelivery');
    const [failed] = await db.query<{ id: string }>(`select id from deliveries where destination_id = '${id}' and state = 'failed' limit 1`);
    const remembered = await refusal(service.replayOne(owner.companyId, failed!.id, ACTOR));
    expect([remembered.code, remembered.details.retryAfterSeconds]).toEqual(['redelivery_budget_spent', 180]);
    expect((await refusal(service.replay(owner.companyId, { destinationId: id }, ACTOR))).code).toBe('redelivery_budget_spent');
    expect([begin.mock.calls.length, replayOne.mock.calls.length]).toEqual([2, 0]);
    now += 180_000;
    expect((await service.replayOne(owner.companyId, failed!.id, ACTOR)).series).toBe(1);
  });

  test('an operation whose read is refused (the node’s bounds on heavy reads) frees the company’s lease', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 3, 'failed');
    const busyReads = redeliveries({
      boundedRead: () => Promise.reject(new AppError('service_unavailable', 'Too many reads of webhooks at once on this node.')),
    });
    expect((await refusal(busyReads.replay(owner.companyId, { destinationId: id }, ACTOR))).code).toBe('service_unavailable');
    expect((await redeliveries().replay(owner.companyId, { destinationId: id }, ACTOR)).count).toBe(3);
  });
});

describe('the redelivery budget', () => {
  test('bounds what a company makes again, single replays and sends included, and refills by the hour', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    const uuids = await settledDeliveries(id, 50, 'failed');
    const service = redeliveries({ perHour: 30 });

    const first = await service.replay(owner.companyId, { destinationId: id }, ACTOR);
    expect(first).toMatchObject({ count: 30, more: true, nextSince: expect.any(Number) });
    const spent = await refusal(service.replay(owner.companyId, { destinationId: id }, ACTOR));
    // One token comes back every 2 minutes at 30 an hour.
    expect([spent.code, spent.details.retryAfterSeconds]).toEqual(['redelivery_budget_spent', 120]);
    const [failed] = await db.query<{ id: string }>(`select id from deliveries where destination_id = '${id}' and state = 'failed' limit 1`);
    expect((await refusal(service.replayOne(owner.companyId, failed!.id, ACTOR))).code).toBe('redelivery_budget_spent');
    const late = await addDestination(store, owner.companyId);
    expect((await refusal(service.send(owner.companyId, late, { webhookUuids: [uuids[0]!] }, ACTOR))).code).toBe('redelivery_budget_spent');

    now += 2 * 60_000;
    expect((await service.replayOne(owner.companyId, failed!.id, ACTOR)).series).toBe(1);
    now += HOUR;
    expect(await service.replay(owner.companyId, { destinationId: id, state: 'failed' }, ACTOR)).toEqual({ count: 19, more: false });
    expect(await service.send(owner.companyId, late, { since: 0 }, ACTOR)).toMatchObject({ count: 11, skipped: 0, more: true });
  });

  test('named deliveries past the budget: as many as it allows, and `more` says the rest are left', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 5, 'failed');
    const ids = (await db.query<{ id: string }>(`select id from deliveries where destination_id = '${id}' order by id`)).map((row) => row.id);
    const service = redeliveries({ perHour: 3 });
    expect(await service.replay(owner.companyId, { destinationId: id, deliveryIds: ids }, ACTOR)).toEqual({ count: 3, more: true });
    now += HOUR;
    expect(await service.replay(owner.companyId, { destinationId: id, deliveryIds: ids }, ACTOR)).toEqual({ count: 2, more: false });
    expect(await states(id)).toEqual({ 'pending/1': 5 });
  });

  test('is per company: one company that spent its budget leaves another’s whole', async () => {
    const id = await addDestination(store, owner.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(id, 10, 'failed');
    const stranger = await createTenant(store);
    const theirs = await addDestination(store, stranger.companyId, { createdAt: T0 - 2 * HOUR });
    await settledDeliveries(theirs, 10, 'failed', stranger);
    const service = redeliveries({ perHour: 10 });
    expect((await service.replay(owner.companyId, { destinationId: id }, ACTOR)).count).toBe(10);
    expect((await refusal(service.replay(owner.companyId, { destinationId: id }, ACTOR))).code).toBe('redelivery_budget_spent');
    expect((await service.replay(stranger.companyId, { destinationId: theirs }, ACTOR)).count).toBe(10);
  });
});

describe('a send', () => {
  test('makes deliveries of stored webhooks once each, through the destination’s filters, in steps', async () => {
    const webhooks = [webhook(owner, T0 - 3, { event: 'order.created' }), webhook(owner, T0 - 2, { event: 'invoice.paid' }), webhook(owner, T0 - 1, { event: 'order.paid' })];
    await store.commitBatch(webhooks, []);
    const id = await addDestination(store, owner.companyId, { eventPatterns: ['order.*'] });
    const service = redeliveries({ stepRows: 1 });
    expect(await service.send(owner.companyId, id, { since: T0 - 10, until: T0 + 10 }, ACTOR)).toEqual({ count: 2, skipped: 0, more: false });
    expect(await service.send(owner.companyId, id, { since: T0 - 10, until: T0 + 10 }, ACTOR)).toEqual({ count: 0, skipped: 2, more: false });
    expect(await service.send(owner.companyId, id, { webhookUuids: [webhooks[1]!.uuid] }, ACTOR)).toEqual({ count: 1, skipped: 0, more: false });
    const records = await store.listAuditLog(owner.companyId, { limit: 10, action: 'destination.send' });
    expect(records.map((r) => r.after)).toEqual([{ created: 1 }, { created: 2 }]);

    const stranger = await createTenant(store);
    const error = await refusal(service.send(stranger.companyId, id, { webhookUuids: [webhooks[0]!.uuid] }, ACTOR));
    expect(error.code).toBe('not_found');
  });
});
