import { sql, type Kysely } from 'kysely';

/**
 * Replaces `deliveries_due` (pending rows by due time) with `deliveries_waiting` (pending
 * rows not leased, by due time), which only the backlog metric reads.
 *
 * A claim reads one destination's pending rows at a time, from `deliveries_open`. But any
 * index of all pending rows by due time can serve those reads too, in due-time order with
 * the destination as a filter, and both planners took it whenever the statistics made one
 * destination look like most rows: a destination with a large backlog, exactly when the
 * walk through its rows costs most, for every other destination, on every claim. A query
 * must state `lease_token is null` to use the new index, and no per-destination read does.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('deliveries_due').execute();
  await db.schema
    .createIndex('deliveries_waiting')
    .on('deliveries')
    .column('next_attempt_at')
    .where(sql<boolean>`state = 'pending' and lease_token is null`)
    .execute();
}
