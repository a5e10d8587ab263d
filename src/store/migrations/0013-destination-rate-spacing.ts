import type { Kysely } from 'kysely';

/**
 * A destination's `rate_per_second` as a spacing of 1/rate between its requests instead of
 * a count per calendar second (issue 33): counted per second, a destination at 4 a second
 * received 8 requests within 150 ms around a second's edge, twice its rate.
 *
 * `rate_next_send_at_us` is when its next request may go out, in microseconds since the
 * epoch: 1/rate in whole milliseconds would round 3 a second to 333 ms (4 in a second) or
 * 334 (a long-run rate under the one set), and the rates go to 10,000 a second. A constant
 * default: no rewrite of the table on either database.
 *
 * `rate_window_start` and `rate_window_count` stay: a node of the older version reads and
 * writes them until it is upgraded (both limits hold meanwhile, the stricter wins).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('destinations')
    .addColumn('rate_next_send_at_us', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
}
