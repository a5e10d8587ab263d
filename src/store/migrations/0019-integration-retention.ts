import type { Kysely } from 'kysely';

/**
 * Retention per integration (issue 40): `integrations.retention_days`, days its webhooks
 * are kept when that is shorter than its company's (a payments integration keeping 7 days
 * where the rest keep 30); null: the company's. Nullable without a default: no rewrite of
 * the table.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('integrations').addColumn('retention_days', 'integer').execute();
}
