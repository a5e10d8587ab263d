import type { Kysely } from 'kysely';
import type { DialectTypes } from '../migrations/index.js';
import type { GroupRowWriter } from '../group-rows.js';
import type { Database } from '../schema.js';
import type { AttemptResult, ClaimedDelivery, ClaimOptions, DisabledDestination } from '../store.js';
import { claimCandidates, destinationsToClaimFrom, lockDestinations } from './delivery-claims.js';
import { recordResults } from './delivery-results.js';

/**
 * What the delivery workers do to the outbox, written once for both databases
 * (DialectTypes supplies the row locks): an exchange (results recorded, more deliveries
 * claimed, in one transaction), and the moves that make deliveries follow their
 * destination's status.
 */

/**
 * Records a worker's results, then claims more, in one transaction: the leases the results
 * free are counted out of the budgets at once, and a busy worker costs the database one
 * transaction per round. The only lock it waits for is on the destinations concerned, taken
 * in one sorted statement before any other; the deliveries it reports on or takes are locked
 * skipping rows another transaction holds. So two nodes never deadlock. It commits without
 * waiting for the disk (DialectTypes.workerTransaction): a lost exchange repeats attempts.
 */
export async function exchangeDeliveries(
  db: Kysely<Database>,
  types: DialectTypes,
  groupRows: GroupRowWriter,
  results: readonly AttemptResult[],
  now: number,
  claim: ClaimOptions | null,
  disableAfterMs: number,
): Promise<{ claimed: ClaimedDelivery[]; disabled: DisabledDestination[] }> {
  if (results.length === 0 && (claim === null || claim.limit <= 0)) return { claimed: [], disabled: [] };
  return types.workerTransaction(db, async (trx) => {
    const due = claim === null || claim.limit <= 0 ? [] : await destinationsToClaimFrom(trx, now, claim.limit, [...new Set(results.map((r) => r.leaseToken))]);
    if (results.length === 0 && due.length === 0) return { claimed: [], disabled: [] };
    const destinationIds = new Set([...due, ...results.map((r) => r.destinationId)]);
    const destinations = await lockDestinations(trx, types, [...destinationIds]);
    const disabled = results.length === 0 ? [] : await recordResults(trx, types, groupRows, results, now, disableAfterMs, destinations);
    // A destination disabled by these results takes nothing more now.
    for (const { destinationId } of disabled) destinations.set(destinationId, { ...destinations.get(destinationId)!, status: 'disabled' });
    const claimed = due.length === 0 ? [] : await claimCandidates(trx, types, now, claim!, destinations);
    return { claimed, disabled };
  });
}

/**
 * Moves deliveries to follow their destination's status, for destinations marked by a
 * status change or a deletion: active ones' held rows become pending, due now; paused and
 * disabled ones' pending rows not in flight become held; deleted ones' unsettled rows are
 * cancelled. A destination is unmarked once a pass finds nothing left to move for it.
 */
export async function reconcileHeldDeliveries(db: Kysely<Database>, now: number, limit: number): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const marked = await trx
      .selectFrom('destinations')
      .select(['id', 'status', 'deleted_at'])
      .where('needs_reconcile', '=', 1)
      .orderBy('id')
      .limit(100)
      .execute();
    let moved = 0;
    for (const destination of marked) {
      const room = limit - moved;
      if (room <= 0) break;
      const deleted = destination.deleted_at !== null;
      const active = !deleted && destination.status === 'active';
      const from = deleted ? ['pending', 'held'] : active ? ['held'] : ['pending'];
      let select = trx.selectFrom('deliveries').select('id').where('destination_id', '=', destination.id).where('state', 'in', from);
      // A row in flight keeps its state until its attempt reports (or its lease ends).
      if (!deleted) select = select.where('lease_token', 'is', null);
      const rows = await select.limit(room).execute();
      if (rows.length > 0) {
        await trx
          .updateTable('deliveries')
          .set(
            deleted
              ? { state: 'cancelled', next_attempt_at: null, lease_token: null, updated_at: now }
              : active
                ? { state: 'pending', next_attempt_at: now, updated_at: now }
                : { state: 'held', next_attempt_at: null, updated_at: now },
          )
          .where('id', 'in', rows.map((r) => r.id))
          .execute();
        moved += rows.length;
        continue;
      }
      const inFlight = await trx
        .selectFrom('deliveries')
        .select('id')
        .where('destination_id', '=', destination.id)
        .where('lease_token', 'is not', null)
        .limit(1)
        .executeTakeFirst();
      if (!inFlight) await trx.updateTable('destinations').set({ needs_reconcile: 0 }).where('id', '=', destination.id).execute();
    }
    return moved;
  });
}
