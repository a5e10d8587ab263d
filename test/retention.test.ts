import { afterEach, describe, expect, test } from 'vitest';
import { openStore } from '../src/store/open-store.js';
import { DEFAULT_RETENTION_DAYS, requestLogOf, type ClaimedDelivery, type PendingWebhook, type RequestLogEntry, type Store } from '../src/store/store.js';
import { buildTestApp, waitFor } from './helpers.js';
import { freshDatabase, testDialect, type TestDatabase } from './support/databases.js';
import { addDestination, claimDeliveries, finishAttempts } from './support/deliveries.js';
import { DAY_MS, createCompany, createIntegration, createTenant, logRow, webhook, type Owner } from './support/webhooks.js';

const HOUR_MS = 60 * 60 * 1000;

/** Every webhook uuid of the owner's integration, sorted. */
async function webhookUuids(store: Store, owner: Owner): Promise<string[]> {
  const rows = await store.listWebhooks(owner.companyId, owner.integrationId, { limit: 100_000 });
  return rows.map((w) => w.uuid).sort();
}

/** Every request-log id of the owner's integration, sorted. */
async function logIds(store: Store, owner: Owner): Promise<string[]> {
  const rows = await store.listRequestLog(owner.companyId, owner.integrationId, 100_000);
  return rows.map((r) => r.id).sort();
}

/** The request-log rows commitBatch writes for these webhooks (each is accepted: no idempotency keys). */
function acceptedLogs(webhooks: PendingWebhook[]): RequestLogEntry[] {
  return webhooks.map((w) => requestLogOf(w.log, { kind: 'accepted', uuid: w.uuid, receivedAt: w.receivedAt }));
}

function sorted(values: string[]): string[] {
  return [...values].sort();
}

/** A succeeded attempt of each claimed delivery, made at `at`. */
async function attemptAll(store: Store, claimed: ClaimedDelivery[], at: number): Promise<void> {
  await finishAttempts(
    store,
    claimed.map((delivery) => ({
      deliveryId: delivery.id,
      companyId: delivery.companyId,
      destinationId: delivery.destinationId,
      leaseToken: delivery.leaseToken,
      outcome: 'succeeded' as const,
      gone: false,
      attempt: {
        series: delivery.series,
        number: delivery.attempt,
        attemptedAt: at,
        durationMs: 5,
        status: 204,
        error: null,
        responseExcerpt: 'ok',
        nextAttemptAt: null,
      },
    })),
    at,
    DAY_MS,
  );
}

describe(`retention purge (${testDialect()})`, () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function fresh(): Promise<TestDatabase> {
    const database = await freshDatabase();
    cleanups.push(() => database.cleanup());
    return database;
  }

  test("each company's rows older than its own retention go; newer rows and other companies' stay", async () => {
    const { store } = await fresh();
    const now = Date.now();
    const retentions = [7, DEFAULT_RETENTION_DAYS, 90];
    const ages = [0, 1, 7, 8, 30, 31, 90, 91, 400].map((days) => days * DAY_MS);
    const expected = [];
    let purgedWebhooks = 0;
    let purgedLogs = 0;
    for (const retentionDays of retentions) {
      const owner = await createTenant(store, retentionDays);
      const limit = retentionDays * DAY_MS;
      // Exactly at the retention is kept; a millisecond older is not.
      const times = [...ages, limit, limit + 1].map((age) => now - age);
      const webhooks = times.map((at) => webhook(owner, at));
      const rejected = times.map((at) => logRow(owner, at));
      await store.commitBatch(webhooks, rejected);
      const logs = [...acceptedLogs(webhooks), ...rejected];
      const keptWebhooks = webhooks.filter((w) => now - w.receivedAt <= limit);
      const keptLogs = logs.filter((r) => now - r.receivedAt <= limit);
      purgedWebhooks += webhooks.length - keptWebhooks.length;
      // The report counts request_log's rows: an accepted webhook's record goes with its row.
      purgedLogs += rejected.filter((r) => now - r.receivedAt > limit).length;
      expect(await webhookUuids(store, owner)).toEqual(sorted(webhooks.map((w) => w.uuid)));
      expected.push({ owner, webhooks: sorted(keptWebhooks.map((w) => w.uuid)), logs: sorted(keptLogs.map((r) => r.id)) });
    }

    const report = await store.purgeExpired(now);
    expect(report).toMatchObject({ webhooks: purgedWebhooks, requestLog: purgedLogs });
    for (const { owner, webhooks, logs } of expected) {
      expect(await webhookUuids(store, owner)).toEqual(webhooks);
      expect(await logIds(store, owner)).toEqual(logs);
    }
    // Nothing left to do on a second run.
    expect(await store.purgeExpired(now)).toMatchObject({ webhooks: 0, requestLog: 0 });
  });

  test("an integration keeping fewer days loses its older webhooks, log rows, deliveries and attempts; the company's others keep theirs", async () => {
    const database = await fresh();
    const { store } = database;
    const now = Date.now();
    const companyId = await createCompany(store, 30, now - 60 * DAY_MS);
    await addDestination(store, companyId, { createdAt: now - 60 * DAY_MS, maxInFlight: 1000 });
    const payments = await createIntegration(store, companyId, now - 60 * DAY_MS, 7);
    const others = await createIntegration(store, companyId, now - 60 * DAY_MS);
    // Shortened by an update, as the API does it.
    const updated = await createIntegration(store, companyId, now - 60 * DAY_MS);
    await store.updateIntegration(companyId, updated.integrationId, { retentionDays: 10 }, now - DAY_MS);
    // Longer than the company's (the API refuses it; the company shortened below it later): the company's holds.
    const longer = await createIntegration(store, companyId, now - 60 * DAY_MS, 90);
    // Another company keeping 7 days, whose rows this purge counts as before.
    const stranger = await createTenant(store, 7);

    const ages = [0, 1, 6, 8, 10, 11, 20, 29, 31, 45].map((days) => days * DAY_MS);
    const cases = [
      { owner: payments, keptDays: 7 },
      { owner: others, keptDays: 30 },
      { owner: updated, keptDays: 10 },
      { owner: longer, keptDays: 30 },
      { owner: stranger, keptDays: 7 },
    ];
    const expected = [];
    let purgedWebhooks = 0;
    let purgedLogs = 0;
    for (const { owner, keptDays } of cases) {
      const limit = keptDays * DAY_MS;
      // Exactly at the retention is kept; a millisecond older is not.
      const times = [...ages, limit, limit + 1].map((age) => now - age);
      const webhooks = times.map((at) => webhook(owner, at));
      const rejected = times.map((at) => logRow(owner, at));
      await store.commitBatch(webhooks, rejected);
      const logs = [...acceptedLogs(webhooks), ...rejected];
      const keptWebhooks = webhooks.filter((w) => now - w.receivedAt <= limit);
      purgedWebhooks += webhooks.length - keptWebhooks.length;
      purgedLogs += rejected.filter((r) => now - r.receivedAt > limit).length;
      expected.push({
        owner,
        webhooks: sorted(keptWebhooks.map((w) => w.uuid)),
        logs: sorted(logs.filter((r) => now - r.receivedAt <= limit).map((r) => r.id)),
      });
    }
    // Every webhook of the company went to its destination, today: attempts newer than any retention.
    const claimed = await claimDeliveries(store, now, { limit: 1000, leaseMs: 30_000 });
    expect(claimed).toHaveLength(4 * (ages.length + 2));
    await attemptAll(store, claimed, now);

    const report = await store.purgeExpired(now);
    // The company's own rows of 31 and 45 days went too, each counted once.
    expect(report).toMatchObject({ webhooks: purgedWebhooks, requestLog: purgedLogs });
    for (const { owner, webhooks, logs } of expected) {
      expect(await webhookUuids(store, owner)).toEqual(webhooks);
      expect(await logIds(store, owner)).toEqual(logs);
    }
    const keptUuids = new Set(expected.flatMap((e) => e.webhooks));
    const kept = claimed.filter((d) => keptUuids.has(d.webhookUuid));
    const deliveries = await database.query<{ id: string }>('select id from deliveries');
    expect(sorted(deliveries.map((d) => d.id))).toEqual(sorted(kept.map((d) => d.id)));
    expect(report.deliveries).toBe(claimed.length - kept.length);
    // An integration's delivery goes with its attempts, whatever their age (the company's
    // purge takes attempts by their own time: today's stay until their day comes).
    const shorter = new Set([payments.integrationId, updated.integrationId]);
    const attempted = new Set((await database.query<{ delivery_id: string }>('select delivery_id from delivery_attempts')).map((a) => a.delivery_id));
    const ofShorter = claimed.filter((d) => shorter.has(d.integrationId));
    expect(sorted(ofShorter.filter((d) => attempted.has(d.id)).map((d) => d.id))).toEqual(
      sorted(ofShorter.filter((d) => keptUuids.has(d.webhookUuid)).map((d) => d.id)),
    );

    expect(await store.purgeExpired(now)).toMatchObject({ webhooks: 0, requestLog: 0, deliveries: 0 });
    // Back to the company's: the next purge keeps what the company keeps.
    await store.updateIntegration(companyId, payments.integrationId, { retentionDays: null }, now);
    const older = webhook(payments, now - 20 * DAY_MS);
    await store.commitBatch([older], []);
    expect(await store.purgeExpired(now)).toMatchObject({ webhooks: 0 });
    expect(await webhookUuids(store, payments)).toContain(older.uuid);
  });

  test("an integration's purge takes more than one batch, in several short deletes", async () => {
    const { databaseUrl, store } = await fresh();
    const now = Date.now();
    const companyId = await createCompany(store, 30);
    await addDestination(store, companyId, { createdAt: now - 10 * DAY_MS });
    const payments = await createIntegration(store, companyId, now - 10 * DAY_MS, 7);
    const expired = Array.from({ length: 2500 }, (_, i) => webhook(payments, now - 8 * DAY_MS - i * 1000));
    const kept = Array.from({ length: 10 }, (_, i) => webhook(payments, now - i * HOUR_MS));
    await store.commitBatch([...expired, ...kept], expired.map((w) => logRow(payments, w.receivedAt)));

    const deletes: string[] = [];
    const observed = openStore(databaseUrl, {
      poolSize: 1,
      onQuery: ({ sql }) => /^delete from "(webhooks|deliveries)"/.test(sql) && deletes.push(sql),
    });
    try {
      expect(await observed.purgeExpired(now)).toMatchObject({ webhooks: 2500, requestLog: 2500, deliveries: 2500 });
    } finally {
      await observed.close();
    }
    expect(deletes.filter((sql) => sql.startsWith('delete from "webhooks"')).length).toBeGreaterThan(1);
    expect(deletes.filter((sql) => sql.startsWith('delete from "deliveries"')).length).toBeGreaterThan(1);
    expect(await webhookUuids(store, payments)).toEqual(sorted(kept.map((w) => w.uuid)));
  });

  test('one purge removes more than one batch of expired rows', async () => {
    const { databaseUrl, store } = await fresh();
    const now = Date.now();
    const owner = await createTenant(store, 30);
    const expired = Array.from({ length: 2500 }, (_, i) => webhook(owner, now - 31 * DAY_MS - i * 1000));
    const kept = Array.from({ length: 10 }, (_, i) => webhook(owner, now - i * HOUR_MS));
    await store.commitBatch([...expired, ...kept], expired.map((w) => logRow(owner, w.receivedAt)));

    const deletes: string[] = [];
    const observed = openStore(databaseUrl, {
      poolSize: 1,
      onQuery: ({ sql }) => sql.startsWith('delete from "webhooks"') && deletes.push(sql),
    });
    try {
      expect(await observed.purgeExpired(now)).toMatchObject({ webhooks: 2500, requestLog: 2500 });
    } finally {
      await observed.close();
    }
    // Batched: several short deletes rather than one long one.
    expect(deletes.length).toBeGreaterThan(1);
    expect(await webhookUuids(store, owner)).toEqual(sorted(kept.map((w) => w.uuid)));
    expect(await logIds(store, owner)).toHaveLength(kept.length);
  });

  test('idempotency claims older than 24 hours are deleted; a repeat of such a key is a new webhook', async () => {
    const database = await fresh();
    const { store } = database;
    const now = Date.now();
    const owner = await createTenant(store, 30);
    const old = webhook(owner, now - 25 * HOUR_MS, { idempotencyKey: 'old-key', body: '{"event":"a"}' });
    const recent = webhook(owner, now - HOUR_MS, { idempotencyKey: 'recent-key', body: '{"event":"b"}' });
    await store.commitBatch([old, recent], []);
    const claims = async () =>
      (await database.query<{ key: string }>('select idempotency_key as key from idempotency_keys order by 1')).map(
        (row) => row.key,
      );
    expect(await claims()).toEqual(['old-key', 'recent-key']);

    expect(await store.purgeExpired(now)).toMatchObject({ idempotencyKeys: 1, webhooks: 0 });
    expect(await claims()).toEqual(['recent-key']);

    const repeatOld = webhook(owner, now, { idempotencyKey: 'old-key', body: '{"event":"a"}' });
    const repeatRecent = webhook(owner, now, { idempotencyKey: 'recent-key', body: '{"event":"b"}' });
    expect(await store.commitBatch([repeatOld, repeatRecent], [])).toEqual([
      { kind: 'accepted', uuid: repeatOld.uuid, receivedAt: now },
      { kind: 'replayed', uuid: recent.uuid, receivedAt: recent.receivedAt },
    ]);
    // The webhooks themselves are well inside the company's retention.
    expect(await webhookUuids(store, owner)).toEqual(sorted([old.uuid, recent.uuid, repeatOld.uuid]));
  });

  test('auth_changes: old rows go, but the newest stays, so latestAuthChange never goes backwards', async () => {
    const database = await fresh();
    const { store } = database;
    const now = Date.now();
    const companyId = await createCompany(store, 30, now - 3 * HOUR_MS);
    // Adds a change at now − 3 h.
    const owner = await createIntegration(store, companyId, now - 3 * HOUR_MS);
    // Revoking records a change at the time given, even when the key is revoked already.
    await store.revokeApiKey(companyId, owner.keyId, now - 2 * HOUR_MS);
    await store.revokeApiKey(companyId, owner.keyId, now - 10 * 60 * 1000);
    // The newest change carries an old time (another node's clock behind).
    await store.revokeApiKey(companyId, owner.keyId, now - 2 * HOUR_MS);
    const changes = async () =>
      (await database.query<{ changed_at: number | string }>('select changed_at from auth_changes order by id')).map(
        (row) => now - Number(row.changed_at),
      );
    expect(await changes()).toEqual([3 * HOUR_MS, 2 * HOUR_MS, 10 * 60 * 1000, 2 * HOUR_MS]);
    const latest = await store.latestAuthChange();
    expect(latest).toBeGreaterThan(0);

    await store.purgeExpired(now);
    expect(await changes()).toEqual([10 * 60 * 1000, 2 * HOUR_MS]);
    expect(await store.latestAuthChange()).toBe(latest);

    // Hours later, with nothing new, only the newest is left, and still the latest.
    await store.purgeExpired(now + 5 * HOUR_MS);
    expect(await changes()).toEqual([2 * HOUR_MS]);
    expect(await store.latestAuthChange()).toBe(latest);
  });

  test('two stores purging the same database at once both succeed and delete exactly the expired rows', async () => {
    const database = await fresh();
    const { store } = database;
    const other = database.openAnother();
    const now = Date.now();
    const kept: Array<{ owner: Owner; uuids: string[] }> = [];
    for (const retention of [30, 7]) {
      const owner = await createTenant(store, retention);
      const expired = Array.from({ length: 1500 }, (_, i) =>
        webhook(owner, now - (retention + 1) * DAY_MS - i * 1000, { idempotencyKey: `k${i}` }),
      );
      const recent = Array.from({ length: 20 }, (_, i) => webhook(owner, now - i * HOUR_MS));
      await store.commitBatch([...expired, ...recent], expired.map((w) => logRow(owner, w.receivedAt)));
      kept.push({ owner, uuids: sorted(recent.map((w) => w.uuid)) });
    }

    const reports = await Promise.all([store.purgeExpired(now), other.purgeExpired(now)]);
    const total = (key: 'webhooks' | 'requestLog' | 'idempotencyKeys') => reports[0][key] + reports[1][key];
    expect(total('webhooks')).toBe(3000);
    expect(total('requestLog')).toBe(3000);
    expect(total('idempotencyKeys')).toBe(3000);
    for (const { owner, uuids } of kept) {
      expect(await webhookUuids(store, owner)).toEqual(uuids);
      expect(await logIds(store, owner)).toHaveLength(uuids.length);
    }
  });

  test('the app purges on its own, at the configured interval', async () => {
    const testApp = await buildTestApp({ INTAKE_RETENTION_INTERVAL_SECONDS: '1' });
    cleanups.push(() => testApp.close());
    const { store } = testApp;
    const tenant = await testApp.newTenant();
    const owner: Owner = { companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: tenant.keyId };
    const now = Date.now();
    const recent = webhook(owner, now - HOUR_MS);
    const gone = async (expired: PendingWebhook) =>
      (await store.getWebhook(owner.companyId, owner.integrationId, expired.uuid)) === undefined || undefined;

    const first = webhook(owner, now - 31 * DAY_MS);
    await store.commitBatch([first, recent], []);
    await waitFor(() => gone(first), 'the first retention run', 10_000);

    // And again at the next interval.
    const second = webhook(owner, now - 40 * DAY_MS);
    await store.commitBatch([second], []);
    await waitFor(() => gone(second), 'the next retention run', 10_000);
    expect(await webhookUuids(store, owner)).toEqual([recent.uuid]);
  });
});
