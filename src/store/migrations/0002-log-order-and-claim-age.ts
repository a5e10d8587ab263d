import type { Kysely } from 'kysely';

/**
 * The request log is read newest first with its id breaking ties of the same millisecond;
 * with the id in the index that order needs no sort. Idempotency claims are purged by age,
 * which without an index on created_at scanned the whole table once per batch.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('request_log_integration_time').execute();
  await db.schema
    .createIndex('request_log_integration_time')
    .on('request_log')
    .columns(['integration_id', 'received_at desc', 'id desc'])
    .execute();
  await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').columns(['created_at']).execute();
}
