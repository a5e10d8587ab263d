import { sql, type Kysely } from 'kysely';
import type { DialectTypes } from '../dialect-types.js';

/**
 * Destinations: the company's URLs that receive every accepted webhook matching their
 * filters, at least once. A delivery row per (webhook, destination) is the outbox, written
 * in the webhook's own transaction; workers lease due rows, and every attempt is kept.
 *
 * Indexes on `deliveries`, each for one reader: the claim finds which destinations have
 * due work in `deliveries_due` (only pending rows, oldest due first) and reads each one's due
 * rows from `deliveries_open` (only unsettled rows, by destination, state and due time),
 * which also serves backlog counts and the pending/held moves; the in-flight limit counts `deliveries_leased`
 * (only rows being attempted); lists and the retention purge use
 * `deliveries_destination`; a webhook's deliveries `deliveries_webhook`. The partial ones
 * stay as small as the work in progress, whatever the history.
 *
 * The feed (GET /api/v1/webhooks/feed) needs a position in commit order on `webhooks`:
 * DialectTypes.addFeedPosition adds it without rewriting the table (no volatile default on
 * existing rows; webhooks accepted before this migration are not in the feed).
 */
export async function up(db: Kysely<unknown>, types: DialectTypes): Promise<void> {
  await db.schema
    .createTable('destinations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    // JSON: a list of integration ids, or null for every integration.
    .addColumn('integration_ids', 'text')
    .addColumn('event_patterns', 'text', (c) => c.notNull())
    .addColumn('headers_sealed', 'text')
    .addColumn('header_names', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('secret_sealed', 'text', (c) => c.notNull())
    .addColumn('previous_secret_sealed', 'text')
    .addColumn('previous_secret_expires_at', 'bigint')
    .addColumn('timeout_ms', 'integer', (c) => c.notNull())
    .addColumn('rate_per_second', 'integer')
    .addColumn('max_in_flight', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('disabled_reason', 'text')
    .addColumn('status_changed_at', 'bigint', (c) => c.notNull())
    // 1 while deliveries may have to move between pending and held to follow the status.
    .addColumn('needs_reconcile', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failing_since', 'bigint')
    .addColumn('last_success_at', 'bigint')
    // The rate limit's current one-second window, shared by every node through this row.
    .addColumn('rate_window_start', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rate_window_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('deleted_at', 'bigint')
    .execute();
  await db.schema.createIndex('destinations_company').on('destinations').columns(['company_id', 'created_at']).execute();

  await db.schema
    .createTable('deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull())
    .addColumn('destination_id', 'text', (c) => c.notNull())
    .addColumn('webhook_uuid', 'text', (c) => c.notNull())
    .addColumn('webhook_received_at', 'bigint', (c) => c.notNull())
    .addColumn('integration_id', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('series', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'bigint')
    .addColumn('lease_token', 'text')
    .addColumn('last_attempt_at', 'bigint')
    .addColumn('last_status', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // With the destination, so finding which destinations have due work reads the index alone.
  await db.schema
    .createIndex('deliveries_due')
    .on('deliveries')
    .columns(['next_attempt_at', 'destination_id'])
    .where(sql.ref('state'), '=', 'pending')
    .execute();
  // With the due time: one destination's due deliveries in order, at once, however long its backlog.
  await db.schema
    .createIndex('deliveries_open')
    .on('deliveries')
    .columns(['destination_id', 'state', 'next_attempt_at'])
    .where(sql<boolean>`state in ('pending', 'held')`)
    .execute();
  await db.schema
    .createIndex('deliveries_leased')
    .on('deliveries')
    .column('destination_id')
    .where(sql<boolean>`lease_token is not null`)
    .execute();
  await db.schema
    .createIndex('deliveries_destination')
    .on('deliveries')
    .columns(['company_id', 'destination_id', 'created_at'])
    .execute();
  await db.schema.createIndex('deliveries_webhook').on('deliveries').column('webhook_uuid').execute();

  await db.schema
    .createTable('delivery_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('company_id', 'text', (c) => c.notNull())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('destination_id', 'text', (c) => c.notNull())
    .addColumn('series', 'integer', (c) => c.notNull())
    .addColumn('number', 'integer', (c) => c.notNull())
    .addColumn('attempted_at', 'bigint', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('status', 'integer')
    .addColumn('error', 'text')
    .addColumn('response_excerpt', 'text')
    .addColumn('next_attempt_at', 'bigint')
    .execute();
  await db.schema.createIndex('delivery_attempts_delivery').on('delivery_attempts').columns(['delivery_id', 'attempted_at']).execute();
  await db.schema
    .createIndex('delivery_attempts_destination')
    .on('delivery_attempts')
    .columns(['company_id', 'destination_id', 'attempted_at'])
    .execute();

  await types.addFeedPosition(db);
}
