import type { Kysely } from 'kysely';

/**
 * A destination's rules (issue 36): a filter, a transformation, deduplication, a delay and
 * its own retry schedule, evaluated by the delivery worker, never by intake's commit.
 *
 * - `destination_rules` keeps every saved set, by version: a save is a new version (the
 *   transformation's code with it), so a delivery can say which rules it went out under and
 *   the audit log can name them. The destination's `rules_version` is the current one (0:
 *   none). Workers read a version once and keep it: the row of a version never changes.
 * - `delay_ms` is on the destination itself: the outbox sets a delivery's first due time
 *   inside the webhook's commit and reads it there with the rest of the destination's row.
 * - A delivery records the version it used (`rules_version`), why it was not sent when the
 *   rules said not to (`skipped_by`: filter, transformation), and for a duplicate the
 *   delivery it repeats (`duplicate_of`).
 * - `delivery_dedupe_keys`: one row per (destination, key) within its window, taken by one
 *   upsert so that two nodes deciding at once agree on which delivery is the first.
 *
 * Constant defaults: no rewrite of the large tables on either database.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('destinations').addColumn('rules_version', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('destinations').addColumn('delay_ms', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema
    .createTable('destination_rules')
    .addColumn('destination_id', 'text', (c) => c.notNull().references('destinations.id').onDelete('cascade'))
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('company_id', 'text', (c) => c.notNull().references('companies.id').onDelete('cascade'))
    // JSON: filter, transformation (its code), deduplicate, delay, retry (src/domain/rules/rules.ts).
    .addColumn('rules', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('destination_rules_pk', ['destination_id', 'version'])
    .execute();
  await db.schema.alterTable('deliveries').addColumn('rules_version', 'integer').execute();
  await db.schema.alterTable('deliveries').addColumn('skipped_by', 'text').execute();
  await db.schema.alterTable('deliveries').addColumn('duplicate_of', 'text').execute();
  await db.schema
    .createTable('delivery_dedupe_keys')
    .addColumn('destination_id', 'text', (c) => c.notNull())
    // The SHA-256 of the chosen fields' values, hex.
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('delivery_dedupe_keys_pk', ['destination_id', 'key'])
    .execute();
  // The sweep of expired keys.
  await db.schema.createIndex('delivery_dedupe_keys_expiry').on('delivery_dedupe_keys').columns(['expires_at']).execute();
}
