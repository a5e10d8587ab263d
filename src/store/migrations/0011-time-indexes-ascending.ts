import type { Kysely } from 'kysely';

/**
 * The webhooks' time indexes in ascending order. Both databases read a B-tree backwards as
 * cheaply as forwards, so the newest-first pages use them as before, with no sort
 * (test/query-plans.test.ts). What changes is where a new entry goes.
 *
 * Why: their keys grow (the time, then a uuid v7), and since this release in the order the
 * group commit writes the rows (received_at is stamped as a webhook joins it). In a
 * descending index every new entry lands at the B-tree's left edge, where neither database
 * packs a page full when it splits it: PostgreSQL splits it half and half (200,000
 * time-ordered rows: 35 MB descending, 20 MB ascending), and SQLite's pages stayed half
 * empty too. In the service each of these indexes took 160-171 bytes a webhook with 51 % of
 * its pages unused, and 90-96 bytes with 13 % after this change (docs/performance-history.md,
 * issue 16).
 *
 * Each index keeps its name and columns, so a node of the older version reads it as
 * before. Rebuilding reads the whole table (the bench's 1,000,000 webhooks of 1 KB: 12 s on
 * SQLite); on PostgreSQL, writes to the table wait for it.
 */
/** Each index's columns, by name: the same as in 0001-initial, without `desc`. */
const INDEXES: Record<string, string[]> = {
  webhooks_integration_time: ['integration_id', 'received_at', 'uuid'],
  webhooks_integration_event_time: ['integration_id', 'event', 'received_at', 'uuid'],
  webhooks_company_time: ['company_id', 'received_at', 'uuid'],
};

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const [name, columns] of Object.entries(INDEXES)) {
    await db.schema.dropIndex(name).execute();
    await db.schema.createIndex(name).on('webhooks').columns(columns).execute();
  }
}
