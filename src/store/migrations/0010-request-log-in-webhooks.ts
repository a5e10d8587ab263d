import type { Kysely } from 'kysely';

/**
 * A webhook's row carries its request's log record (the 202 that stored it): the record's id,
 * the user agent and the time to answer. The rest of the record is already in the row (the
 * key, the IP, the size, the time), and its status is always 202. Requests that store no
 * webhook (refusals, replays, conflicts, reads) stay in `request_log`.
 *
 * Why: every accepted webhook wrote a second row, to a table of its own with its key and two
 * indexes: four more B-trees in every group commit, on the thread that limits intake. Left
 * out, intake on SQLite took 11 % less CPU a webhook (246 -> 218 µs) and did 7 % more a
 * second (medians of 5 alternating pairs, docs/performance-history.md).
 *
 * Webhooks stored before this migration have their record in `request_log` and no
 * `request_id`: readers take a webhook's record only where `request_id` is set, so nothing is
 * read twice, also from a node of the older version writing beside a newer one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // One column a statement: SQLite's ALTER TABLE adds one at a time. Nullable, no default:
  // neither database rewrites the table.
  await db.schema.alterTable('webhooks').addColumn('request_id', 'text').execute();
  await db.schema.alterTable('webhooks').addColumn('user_agent', 'text').execute();
  await db.schema.alterTable('webhooks').addColumn('duration_ms', 'real').execute();
}
