import { afterEach, describe, expect, test } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { DAY_MS, createTenant, logRow, webhook, type Owner } from '../support/webhooks.js';
import type { PendingWebhook, RequestLogEntry } from '../../src/store/store.js';
import { MIGRATION_NAMES } from '../../src/store/migrations/index.js';

/**
 * PostgreSQL keeps webhooks and the request log in one partition per UTC day, plus a
 * default partition for anything outside the prepared days; retention drops whole days
 * that no company keeps any more.
 */

const TABLES = ['webhooks', 'request_log'] as const;
type Table = (typeof TABLES)[number];
const HOUR_MS = 60 * 60 * 1000;

function dayStart(at: number): number {
  return Math.floor(at / DAY_MS) * DAY_MS;
}

/** `webhooks_p20261122`: the name the store gives a day's partition. */
function partitionName(table: Table, day: number): string {
  return `${table}_p${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

interface Partition {
  name: string;
  bound: string;
}

/** The partitions of `table` in the test's schema and the range each holds, by name. */
async function partitionsOf(database: TestDatabase, table: Table): Promise<Partition[]> {
  return database.query<Partition>(
    `select child.relname as name, pg_get_expr(child.relpartbound, child.oid) as bound
     from pg_inherits
     join pg_class parent on parent.oid = pg_inherits.inhparent
     join pg_class child on child.oid = pg_inherits.inhrelid
     where parent.relname = $1 and parent.relnamespace = current_schema()::regnamespace
     order by child.relname`,
    [table],
  );
}

/** The day partition of `table` for the UTC day starting at `day`, as the store makes it. */
function dayPartition(table: Table, day: number): Partition {
  return { name: partitionName(table, day), bound: `FOR VALUES FROM ('${day}') TO ('${day + DAY_MS}')` };
}

/** What migrate prepares when run at `now`: yesterday to three days ahead, and the default. */
function preparedAt(table: Table, now: number): Partition[] {
  const today = dayStart(now);
  const days = [-1, 0, 1, 2, 3].map((offset) => dayPartition(table, today + offset * DAY_MS));
  return [...days, { name: `${table}_default`, bound: 'DEFAULT' }].sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** Makes the day partition of both tables for an old day, as an operator or an older node would have. */
async function createDayPartitions(database: TestDatabase, day: number): Promise<void> {
  for (const table of TABLES) {
    await database.query(
      `create table ${partitionName(table, day)} partition of ${table} for values from (${day}) to (${day + DAY_MS})`,
    );
  }
}

/**
 * A refused request at the same moment as the webhook: its row is request_log's (the
 * webhook's own record is in the webhook's row), under the id of the webhook's record.
 */
function refusalBeside(webhook: PendingWebhook): RequestLogEntry {
  return { ...logRow(webhook, webhook.receivedAt), id: webhook.log.id };
}

/** Which partition holds the webhook, and which holds the request-log row of the refusal beside it. */
async function whereIs(database: TestDatabase, webhook: PendingWebhook): Promise<{ webhook?: string; log?: string }> {
  const [webhookRow] = await database.query<{ partition: string }>(
    'select tableoid::regclass::text as partition from webhooks where uuid = $1',
    [webhook.uuid],
  );
  const [refusalRow] = await database.query<{ partition: string }>(
    'select tableoid::regclass::text as partition from request_log where id = $1',
    [webhook.log.id],
  );
  return { webhook: webhookRow?.partition, log: refusalRow?.partition };
}

async function webhookUuids(store: Store, owner: Owner): Promise<string[]> {
  const rows = await store.listWebhooks(owner.companyId, owner.integrationId, { limit: 1000 });
  return rows.map((w) => w.uuid).sort();
}

describe('PostgreSQL day partitions', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function fresh(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
    const database = await freshDatabase(options);
    cleanups.push(() => database.cleanup());
    return database;
  }

  test('migrate prepares day partitions from yesterday to three days ahead, and a default', async () => {
    const before = Date.now();
    const database = await fresh();
    const after = Date.now();
    for (const table of TABLES) {
      // Both times give the same days, unless midnight passed while migrating.
      expect([preparedAt(table, before), preparedAt(table, after)]).toContainEqual(await partitionsOf(database, table));
    }

    const owner = await createTenant(database.store, 30);
    const at = Date.now();
    const current = webhook(owner, at);
    const tomorrow = webhook(owner, at + DAY_MS);
    await database.store.commitBatch([current, tomorrow], [refusalBeside(current)]);
    const today = dayStart(at);
    expect(await whereIs(database, current)).toEqual({
      webhook: partitionName('webhooks', today),
      log: partitionName('request_log', today),
    });
    expect((await whereIs(database, tomorrow)).webhook).toBe(partitionName('webhooks', today + DAY_MS));
  });

  test('a webhook far outside the prepared days lands in the default partition, reads back, and is purged', async () => {
    const database = await fresh();
    const { store } = database;
    const owner = await createTenant(store, 30);
    const ancient = webhook(owner, Date.UTC(2000, 0, 1, 12), { body: '{"event":"y2k","data":{}}' });
    const future = webhook(owner, Date.UTC(2100, 0, 1, 12));
    await store.commitBatch([ancient, future], [ancient, future].map(refusalBeside));
    expect(await whereIs(database, ancient)).toEqual({ webhook: 'webhooks_default', log: 'request_log_default' });
    expect(await whereIs(database, future)).toEqual({ webhook: 'webhooks_default', log: 'request_log_default' });

    const read = await store.getWebhook(owner.companyId, owner.integrationId, ancient.uuid);
    expect(read?.rawBody.toString()).toBe('{"event":"y2k","data":{}}');
    expect(read?.receivedAt).toBe(ancient.receivedAt);
    expect(await webhookUuids(store, owner)).toEqual([ancient.uuid, future.uuid].sort());
    const log = await store.listRequestLog(owner.companyId, owner.integrationId, 10);
    expect(log.filter((r) => r.status === 202).map((r) => r.webhookUuid).sort()).toEqual([ancient.uuid, future.uuid].sort());
    expect(log.filter((r) => r.status === 401)).toHaveLength(2);

    const report = await store.purgeExpired(Date.now());
    expect(report).toMatchObject({ webhooks: 1, requestLog: 1, partitionsDropped: [] });
    expect(await webhookUuids(store, owner)).toEqual([future.uuid]);
    expect(await whereIs(database, ancient)).toEqual({});
    for (const table of TABLES) {
      expect((await partitionsOf(database, table)).map((p) => p.name)).toContain(`${table}_default`);
    }
  });

  /**
   * Two companies keeping 30 and 60 days, and day partitions 100, 61, 60 and 45 days old:
   * the first two ended before anyone's retention, the others still hold rows someone keeps.
   */
  async function oldDays(database: TestDatabase, now: number) {
    const { store } = database;
    const today = dayStart(now);
    const days = { d100: today - 100 * DAY_MS, d61: today - 61 * DAY_MS, d60: today - 60 * DAY_MS, d45: today - 45 * DAY_MS };
    for (const day of Object.values(days)) await createDayPartitions(database, day);
    const short = await createTenant(store, 30);
    const long = await createTenant(store, 60);
    const rows = {
      inDropped: [webhook(long, days.d100 + HOUR_MS), webhook(long, days.d61 + HOUR_MS)],
      // Day d60 straddles the long retention's cutoff: one row a millisecond past it, one inside.
      pastLongRetention: webhook(long, now - 60 * DAY_MS - 1),
      insideLongRetention: webhook(long, now - 60 * DAY_MS + 1),
      longOn45: webhook(long, days.d45 + HOUR_MS),
      shortOn45: webhook(short, days.d45 + 2 * HOUR_MS),
      shortRecent: webhook(short, now - HOUR_MS),
    };
    const all = [...rows.inDropped, rows.pastLongRetention, rows.insideLongRetention, rows.longOn45, rows.shortOn45, rows.shortRecent];
    await store.commitBatch(all, all.map(refusalBeside));
    // Each old row is in its own day's partition, not in the default.
    for (const row of all.filter((w) => w !== rows.shortRecent)) {
      const day = dayStart(row.receivedAt);
      expect(await whereIs(database, row)).toEqual({
        webhook: partitionName('webhooks', day),
        log: partitionName('request_log', day),
      });
    }
    const dropped = TABLES.flatMap((table) => [partitionName(table, days.d100), partitionName(table, days.d61)]).sort();
    const kept = TABLES.flatMap((table) => [partitionName(table, days.d60), partitionName(table, days.d45)]);
    return { short, long, rows, dropped, kept, droppedDays: [days.d100, days.d61] };
  }

  async function partitionNames(database: TestDatabase): Promise<string[]> {
    const names = [];
    for (const table of TABLES) names.push(...(await partitionsOf(database, table)).map((p) => p.name));
    return names;
  }

  test('purgeExpired drops the day partitions past the longest retention, and only those', async () => {
    const database = await fresh();
    const { store } = database;
    const now = Date.now();
    const { short, long, rows, dropped, kept } = await oldDays(database, now);

    const report = await store.purgeExpired(now);
    expect([...report.partitionsDropped].sort()).toEqual(dropped);
    // The rest went row by row: the long-retention row just past its cutoff and the
    // short-retention row of day 45. The dropped days' rows were not deleted one by one first.
    expect(report).toMatchObject({ webhooks: 2, requestLog: 2 });

    const names = await partitionNames(database);
    for (const name of dropped) expect(names).not.toContain(name);
    for (const name of kept) expect(names).toContain(name);
    expect(await webhookUuids(store, long)).toEqual([rows.insideLongRetention.uuid, rows.longOn45.uuid].sort());
    expect(await webhookUuids(store, short)).toEqual([rows.shortRecent.uuid]);

    // Nothing more to drop on the next run.
    expect(await store.purgeExpired(now)).toMatchObject({ partitionsDropped: [], webhooks: 0, requestLog: 0 });
  });

  test('two stores purging and migrating at once do not fail, and no day is dropped twice', async () => {
    const database = await fresh();
    const other = database.openAnother();
    const now = Date.now();
    const { short, long, rows, dropped, kept, droppedDays } = await oldDays(database, now);

    // A few rounds, the expired days made again each time: the stores interleave differently.
    for (let round = 0; round < 5; round++) {
      if (round > 0) for (const day of droppedDays) await createDayPartitions(database, day);
      const [first, second] = await Promise.all([
        database.store.purgeExpired(now),
        other.purgeExpired(now),
        database.store.migrate(),
        other.migrate(),
      ]);
      // One store drops while the other skips; a drop that met the other's delete past the
      // lock timeout is left for the next run (its rows went one by one meanwhile).
      const droppedAtOnce = [...first.partitionsDropped, ...second.partitionsDropped];
      expect(new Set(droppedAtOnce).size).toBe(droppedAtOnce.length);
      const next = await database.store.purgeExpired(now);
      expect([...droppedAtOnce, ...next.partitionsDropped].sort()).toEqual(dropped);
    }

    const names = await partitionNames(database);
    for (const name of kept) expect(names).toContain(name);
    expect(await webhookUuids(database.store, long)).toEqual([rows.insideLongRetention.uuid, rows.longOn45.uuid].sort());
    expect(await webhookUuids(database.store, short)).toEqual([rows.shortRecent.uuid]);
  });

  test('two stores migrating a new database at once: one applies the migration, both end with the partitions', async () => {
    const before = Date.now();
    const database = await fresh({ migrate: false });
    const other = database.openAnother();
    const applied = await Promise.all([database.store.migrate(), other.migrate()]);
    const after = Date.now();
    expect(applied.flat()).toEqual(MIGRATION_NAMES);
    for (const table of TABLES) {
      expect([preparedAt(table, before), preparedAt(table, after)]).toContainEqual(await partitionsOf(database, table));
    }
  });
});
