import type { Kysely } from 'kysely';

/**
 * Deliveries made again, bounded (issue 33): a replay or a send used to be one transaction
 * of up to 50,000 read and 10,000 written rows, as often as a tenant liked, to a URL of its
 * choosing.
 *
 * `redelivery_state` holds one row per company that has replayed or sent: the lease of the
 * bulk operation under way (one per company at a time, across nodes: a node that dies
 * leaves it to expire), and the company's budget of deliveries made again, a token bucket
 * (its tokens and when they were last counted). Budgets are per company, so the row is
 * the company's lock for both; it goes with the company.
 *
 * `deliveries.series_started_at` says when the current series began, so a bulk replay
 * leaves out a delivery it replayed moments ago (null: series 0, never replayed). Nullable
 * without a default: no rewrite of the table, and the outbox insert on intake's path stays
 * as it was.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('redelivery_state')
    .addColumn('company_id', 'text', (c) => c.primaryKey().references('companies.id').onDelete('cascade'))
    .addColumn('lease_token', 'text')
    .addColumn('lease_expires_at', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('budget_tokens', 'double precision', (c) => c.notNull())
    .addColumn('budget_counted_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('deliveries').addColumn('series_started_at', 'bigint').execute();
}
