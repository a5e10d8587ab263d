import { sql, type Kysely } from 'kysely';
import { newTimeOrderedId } from '../../domain/ids.js';
import type { GroupRowWriter } from '../group-rows.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database } from '../schema.js';
import type { AttemptResult, DisabledDestination } from '../store.js';
import { insertAudit } from './audit.js';
import type { LockedDestination } from './delivery-claims.js';

/**
 * Results: each attempt recorded, each delivery settled or rescheduled while it still holds
 * the lease it was claimed with, and each destination's failure streak kept.
 */

const DAY_MS = 24 * 60 * 60 * 1000;

export async function recordResults(
  trx: Kysely<Database>,
  types: DialectTypes,
  groupRows: GroupRowWriter,
  results: readonly AttemptResult[],
  now: number,
  disableAfterMs: number,
  destinations: ReadonlyMap<string, LockedDestination>,
): Promise<DisabledDestination[]> {
  // A delivery another transaction holds is being claimed again (its lease ended) or
  // replayed: this result is no longer its own, and waiting for it could deadlock.
  const ours = new Set(
    (
      await types
        .lockSkippingLocked(
          trx
            .selectFrom('deliveries')
            .select(['id', 'lease_token'])
            .where('id', 'in', results.map((r) => r.deliveryId))
            .orderBy('id'),
          'deliveries',
        )
        .execute()
    ).map((row) => `${row.id} ${row.lease_token}`),
  );
  const mine = results.filter((result) => ours.has(`${result.deliveryId} ${result.leaseToken}`));
  // Settled deliveries in as few statements as their outcomes differ (a busy round settles
  // dozens alike); the time they keep is their group's last attempt (each attempt's own is
  // in its row). A retry has its own due time.
  const settled = new Map<string, AttemptResult[]>();
  for (const result of mine) {
    if (result.outcome === 'retry') {
      await trx
        .updateTable('deliveries')
        .set({ ...lastAttempt([result]), state: 'pending', next_attempt_at: result.attempt.nextAttemptAt, updated_at: now })
        .where('id', '=', result.deliveryId)
        .execute();
      continue;
    }
    if (result.outcome === 'filtered' || result.outcome === 'deduplicated') {
      // Settled by the rules, no attempt made: the claim's count of one is taken back.
      await trx
        .updateTable('deliveries')
        .set({
          state: result.outcome,
          lease_token: null,
          next_attempt_at: null,
          attempts: sql<number>`attempts - 1`,
          rules_version: result.rulesVersion ?? null,
          skipped_by: result.skippedBy ?? null,
          duplicate_of: result.duplicateOf ?? null,
          updated_at: now,
        })
        .where('id', '=', result.deliveryId)
        .execute();
      continue;
    }
    const key = `${result.outcome} ${result.attempt.status} ${result.attempt.error} ${result.rulesVersion ?? ''}`;
    const group = settled.get(key);
    if (group) group.push(result);
    else settled.set(key, [result]);
  }
  for (const group of settled.values()) {
    await trx
      .updateTable('deliveries')
      .set({ ...lastAttempt(group), state: group[0]!.outcome, next_attempt_at: null, updated_at: now })
      .where('id', 'in', group.map((result) => result.deliveryId))
      .execute();
  }
  // Every attempt is recorded, whether or not its delivery is still its own: it was made.
  const made = results.filter((result) => result.outcome !== 'filtered' && result.outcome !== 'deduplicated');
  await groupRows.insertAttempts(
    trx,
    made.map((result) => ({
      id: newTimeOrderedId('att', result.attempt.attemptedAt),
      company_id: result.companyId,
      delivery_id: result.deliveryId,
      destination_id: result.destinationId,
      series: result.attempt.series,
      number: result.attempt.number,
      attempted_at: result.attempt.attemptedAt,
      duration_ms: Math.round(result.attempt.durationMs),
      status: result.attempt.status,
      error: result.attempt.error,
      response_excerpt: result.attempt.responseExcerpt,
      next_attempt_at: result.attempt.nextAttemptAt,
    })),
  );
  return trackHealth(trx, made, now, disableAfterMs, destinations);
}

/** What a delivery keeps of its latest attempt; its lease ends with it. */
function lastAttempt(group: readonly AttemptResult[]) {
  const { attempt } = group[0]!;
  return {
    lease_token: null,
    last_attempt_at: Math.max(...group.map((result) => result.attempt.attemptedAt)),
    last_status: attempt.status,
    last_error: attempt.error,
    rules_version: group[0]!.rulesVersion ?? null,
    // A delivery replayed after the rules had skipped it is no longer skipped.
    skipped_by: null,
    duplicate_of: null,
  };
}

/** How stale a destination's `last_success_at` may be: it is rewritten when it advances by this much. */
const LAST_SUCCESS_RESOLUTION_MS = 1000;

/**
 * Each destination's failure streak: a success ends it, a failure starts it if none runs.
 * A streak older than `disableAfterMs`, or a 410 Gone, disables the destination (its
 * deliveries are then held), with an audit record by the system.
 */
async function trackHealth(
  trx: Kysely<Database>,
  results: readonly AttemptResult[],
  now: number,
  disableAfterMs: number,
  destinations: ReadonlyMap<string, LockedDestination>,
): Promise<DisabledDestination[]> {
  const byDestination = new Map<string, AttemptResult[]>();
  for (const result of results) {
    const group = byDestination.get(result.destinationId);
    if (group) group.push(result);
    else byDestination.set(result.destinationId, [result]);
  }
  const disabled: DisabledDestination[] = [];
  for (const id of [...byDestination.keys()].sort()) {
    const row = destinations.get(id);
    if (!row) continue;
    const attempts = byDestination.get(id)!.sort((a, b) => a.attempt.attemptedAt - b.attempt.attemptedAt);
    let failingSince = row.failing_since === null ? null : Number(row.failing_since);
    let lastSuccessAt = row.last_success_at === null ? null : Number(row.last_success_at);
    let gone: AttemptResult | undefined;
    for (const result of attempts) {
      if (result.outcome === 'succeeded') {
        failingSince = null;
        lastSuccessAt = Math.max(lastSuccessAt ?? 0, result.attempt.attemptedAt);
      } else {
        failingSince ??= result.attempt.attemptedAt;
        if (result.gone) gone = result;
      }
    }
    let reason: string | null = null;
    if (row.status === 'active' && row.deleted_at === null) {
      if (gone) reason = `The destination answered 410 Gone at ${new Date(gone.attempt.attemptedAt).toISOString()}.`;
      else if (failingSince !== null && now - failingSince >= disableAfterMs) {
        reason = `No delivery succeeded for ${formatSpan(now - failingSince)} (failing since ${new Date(failingSince).toISOString()}).`;
      }
    }
    const storedSuccess = row.last_success_at === null ? null : Number(row.last_success_at);
    // A busy destination succeeds in every round: its last success is kept to the second,
    // so its row is written about once a second, not once a round. On PostgreSQL every
    // write leaves a dead version until vacuum, and each round's claim reads the table.
    if (storedSuccess !== null && lastSuccessAt !== null && lastSuccessAt - storedSuccess < LAST_SUCCESS_RESOLUTION_MS) lastSuccessAt = storedSuccess;
    const unchanged = failingSince === (row.failing_since === null ? null : Number(row.failing_since)) && lastSuccessAt === storedSuccess;
    if (unchanged && reason === null) continue;
    await trx
      .updateTable('destinations')
      .set({
        failing_since: failingSince,
        last_success_at: lastSuccessAt,
        ...(reason !== null && { status: 'disabled', disabled_reason: reason, status_changed_at: now, needs_reconcile: 1, updated_at: now }),
      })
      .where('id', '=', id)
      .execute();
    if (reason !== null) {
      disabled.push({ companyId: row.company_id, destinationId: id, reason });
      await insertAudit(trx, row.company_id, {
        actor: { type: 'system', id: null, ip: null },
        action: 'destination.disable',
        targetType: 'destination',
        targetId: id,
        at: now,
        before: { status: 'active' },
        after: { status: 'disabled', reason },
      });
    }
  }
  return disabled;
}

function formatSpan(ms: number): string {
  const days = ms / DAY_MS;
  return days >= 1 ? `${Math.floor(days * 10) / 10} days` : `${Math.round(ms / 3_600_000)} hours`;
}
