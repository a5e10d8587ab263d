import { sql, type Kysely } from 'kysely';

/**
 * Erasure by data subject (issue 40, src/services/erasures.ts). `erasures` holds each
 * request: its criteria (never the value in clear: sealed with INTAKE_SECRETS_KEY while it
 * is needed, dropped when the erasure ends; a masked hint stays for people), where its
 * scan has reached (so a node that takes over goes on from there), its counts, and the
 * lease of the node running it.
 *
 * `webhooks.erasure_id` marks a webhook an erasure replaced by its tombstone: sends and
 * replays leave it out, and the API says so. Nullable without a default: no rewrite of the
 * table, and intake's insert stays as it was.
 *
 * `request_log_webhook` finds the request-log rows that name a webhook (a replayed 200)
 * without reading the company's log: partial, so the refused requests that make most of the
 * log (no webhook) add nothing to it on intake's path.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('erasures')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('state', 'text', (c) => c.notNull())
    /** 1: a preview, which counts and changes nothing until it is confirmed. */
    .addColumn('dry_run', 'integer', (c) => c.notNull())
    .addColumn('value_sealed', 'text')
    .addColumn('value_hint', 'text', (c) => c.notNull())
    .addColumn('criteria', 'text', (c) => c.notNull())
    .addColumn('requested_by_type', 'text', (c) => c.notNull())
    .addColumn('requested_by_id', 'text')
    .addColumn('confirmed_by_type', 'text')
    .addColumn('confirmed_by_id', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('confirmed_at', 'bigint')
    .addColumn('started_at', 'bigint')
    .addColumn('finished_at', 'bigint')
    .addColumn('expires_at', 'bigint')
    .addColumn('cursor_received_at', 'bigint')
    .addColumn('cursor_uuid', 'text')
    .addColumn('scanned', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('webhooks', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('deliveries', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('request_log', 'bigint', (c) => c.notNull().defaultTo(0))
    /** JSON list of up to ten matches (uuid, integration, event, time, where it matched). */
    .addColumn('sample', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('error', 'text')
    .addColumn('lease_token', 'text')
    .addColumn('lease_expires_at', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('erasures_company_created').on('erasures').columns(['company_id', 'created_at']).execute();
  // The job's question, "what is waiting to run", across companies.
  await db.schema.createIndex('erasures_state').on('erasures').columns(['state', 'lease_expires_at']).execute();
  await db.schema.alterTable('webhooks').addColumn('erasure_id', 'text').execute();
  await db.schema
    .createIndex('request_log_webhook')
    .on('request_log')
    .column('webhook_uuid')
    .where(sql.ref('webhook_uuid'), 'is not', null)
    .execute();
}
