import type { Kysely } from 'kysely';

/**
 * What an integration redacts before storing (issue 40; src/domain/redaction.ts): JSON of
 * `{paths, headers}`, null for nothing. Read with the integration's route, so intake knows
 * it without a query of its own. Nullable without a default: no rewrite of the table.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('integrations').addColumn('redaction', 'text').execute();
}
