import type { Kysely } from 'kysely';

/**
 * The management API reads a company's whole request log newest first, with the id
 * breaking ties of one millisecond: the company index gets the id, as the per-integration
 * index did in 0002, so that order needs no sort. The retention purge keeps using it under
 * the same name. (Webhooks across a company already have webhooks_company_time.)
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('request_log_company_time').execute();
  await db.schema
    .createIndex('request_log_company_time')
    .on('request_log')
    .columns(['company_id', 'received_at desc', 'id desc'])
    .execute();
}
