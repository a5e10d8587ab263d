import type { Kysely } from 'kysely';

/**
 * Sources: an integration may also take webhooks signed the way a provider signs them
 * (GitHub, Stripe…). Its type and settings live on the integration; its signing secrets,
 * which must be read back to verify, in a table of their own, sealed with
 * INTAKE_SECRETS_KEY, several at once while one is rotated. A webhook remembers the shape
 * of its body (the API key's `{event, data}` envelope, or a provider's own JSON or form),
 * so its `data` reads the same whatever the integration becomes later; a refused request's
 * log row says in words what was wrong with its signature.
 *
 * Every new column has a constant default: neither SQLite nor PostgreSQL rewrites a table
 * for it, so this migration is instant on a log of any size.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('integrations').addColumn('source_type', 'text', (c) => c.notNull().defaultTo('api_key')).execute();
  await db.schema.alterTable('integrations').addColumn('source_config', 'text', (c) => c.notNull().defaultTo('{}')).execute();

  await db.schema
    .createTable('source_secrets')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('integration_id', 'text', (c) => c.notNull().references('integrations.id').onDelete('cascade'))
    .addColumn('sealed', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .execute();
  await db.schema.createIndex('source_secrets_integration').on('source_secrets').columns(['integration_id', 'created_at']).execute();

  await db.schema.alterTable('webhooks').addColumn('payload_format', 'text', (c) => c.notNull().defaultTo('envelope')).execute();
  await db.schema.alterTable('request_log').addColumn('error_detail', 'text').execute();
}
