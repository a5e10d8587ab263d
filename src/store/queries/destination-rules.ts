import { sql, type Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { DedupeClaim } from '../store.js';

/**
 * What the delivery workers read and write of destinations' rules: saved versions (never
 * changed once written, so a worker keeps those it read), and deduplication keys.
 */

/** The stored JSON of each version asked for that exists. */
export async function readDestinationRules(
  db: Kysely<Database>,
  refs: ReadonlyArray<{ destinationId: string; version: number }>,
): Promise<Array<{ destinationId: string; version: number; rules: string }>> {
  if (refs.length === 0) return [];
  const rows = await db
    .selectFrom('destination_rules')
    .select(['destination_id', 'version', 'rules'])
    .where((eb) => eb.or(refs.map((ref) => eb.and([eb('destination_id', '=', ref.destinationId), eb('version', '=', ref.version)]))))
    .execute();
  return rows.map((row) => ({ destinationId: row.destination_id, version: row.version, rules: row.rules }));
}

/** Expired keys removed per claim call at most: the table stays about as large as the windows hold. */
const SWEEP_BATCH = 500;

/**
 * Each key taken by one upsert: inserted, or taken over when the holder's window has
 * ended, else left to its holder. The same statement on SQLite (3.35 and later) and
 * PostgreSQL; on PostgreSQL the row lock of ON CONFLICT makes two nodes' upserts of one key
 * wait for each other, so exactly one delivery holds it.
 */
export async function claimDedupeKeys(db: Kysely<Database>, claims: readonly DedupeClaim[], now: number): Promise<Array<{ deliveryId: string; heldBy: string }>> {
  if (claims.length === 0) return [];
  return db.transaction().execute(async (trx) => {
    const held: Array<{ deliveryId: string; heldBy: string }> = [];
    for (const claim of claims) {
      await trx
        .insertInto('delivery_dedupe_keys')
        .values({ destination_id: claim.destinationId, key: claim.key, delivery_id: claim.deliveryId, expires_at: claim.expiresAt })
        .onConflict((oc) =>
          oc
            .columns(['destination_id', 'key'])
            .doUpdateSet({ delivery_id: claim.deliveryId, expires_at: claim.expiresAt })
            .where(sql.ref('delivery_dedupe_keys.expires_at'), '<=', now),
        )
        .execute();
      const row = await trx
        .selectFrom('delivery_dedupe_keys')
        .select('delivery_id')
        .where('destination_id', '=', claim.destinationId)
        .where('key', '=', claim.key)
        .executeTakeFirstOrThrow();
      held.push({ deliveryId: claim.deliveryId, heldBy: row.delivery_id });
    }
    // Row values in IN: the same on both databases (SQLite's DELETE has no LIMIT by default).
    await sql`delete from delivery_dedupe_keys where (destination_id, key) in (
      select destination_id, key from delivery_dedupe_keys where expires_at <= ${now} order by expires_at limit ${SWEEP_BATCH})`.execute(trx);
    return held;
  });
}
