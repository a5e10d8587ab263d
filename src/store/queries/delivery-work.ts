import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { newId } from '../../domain/ids.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database } from '../schema.js';
import type {
  AttemptResult,
  ClaimedDelivery,
  ClaimOptions,
  DisabledDestination,
  PayloadFormat,
} from '../store.js';
import { insertAudit } from './audit.js';

/**
 * What the delivery workers do to the outbox: claim due rows with a lease, record attempts
 * and settle or reschedule, and move rows between pending and held as destinations pause
 * and resume. Written once for both databases; DialectTypes supplies the row locks.
 */

/** Candidates read per claim, per delivery wanted: room for destinations that have no budget left. */
const CANDIDATES_PER_CLAIM = 4;
const DAY_MS = 24 * 60 * 60 * 1000;

export async function claimDeliveries(db: Kysely<Database>, types: DialectTypes, now: number, options: ClaimOptions): Promise<ClaimedDelivery[]> {
  if (options.limit <= 0) return [];
  return db.transaction().execute(async (trx) => {
    const candidates = await types
      .lockSkippingLocked(
        trx
          .selectFrom('deliveries as dl')
          .innerJoin('destinations as ds', 'ds.id', 'dl.destination_id')
          .select([
            'dl.id',
            'dl.company_id',
            'dl.destination_id',
            'dl.webhook_uuid',
            'dl.webhook_received_at',
            'dl.integration_id',
            'dl.event',
            'dl.attempts',
            'dl.series',
          ])
          .where('dl.state', '=', 'pending')
          .where('dl.next_attempt_at', '<=', now)
          .where('ds.status', '=', 'active')
          .where('ds.deleted_at', 'is', null)
          .orderBy('dl.next_attempt_at')
          .limit(options.limit * CANDIDATES_PER_CLAIM),
        'dl',
      )
      .execute();
    if (candidates.length === 0) return [];

    // Each destination's row is locked while its budget is spent, so two nodes claiming
    // for it at once take turns and the second counts the first one's leases.
    const destinationIds = [...new Set(candidates.map((c) => c.destination_id))].sort();
    const destinations = await types
      .lockForUpdate(
        trx
          .selectFrom('destinations')
          .select([
            'id',
            'url',
            'timeout_ms',
            'max_in_flight',
            'rate_per_second',
            'rate_window_start',
            'rate_window_count',
            'secret_sealed',
            'previous_secret_sealed',
            'previous_secret_expires_at',
            'headers_sealed',
          ])
          .where('id', 'in', destinationIds)
          .orderBy('id'),
      )
      .execute();
    const inFlight = await trx
      .selectFrom('deliveries')
      .select(['destination_id', (eb) => eb.fn.countAll<number>().as('count')])
      .where('destination_id', 'in', destinationIds)
      .where('lease_token', 'is not', null)
      .where('next_attempt_at', '>', now)
      .groupBy('destination_id')
      .execute();
    const leased = new Map(inFlight.map((row) => [row.destination_id, Number(row.count)]));
    const window = now - (now % 1000);
    const budget = new Map(
      destinations.map((d) => {
        let room = d.max_in_flight - (leased.get(d.id) ?? 0);
        if (d.rate_per_second !== null) {
          const used = Number(d.rate_window_start) === window ? d.rate_window_count : 0;
          room = Math.min(room, d.rate_per_second - used);
        }
        return [d.id, Math.max(0, room)];
      }),
    );

    const chosen: typeof candidates = [];
    const companyShare = new Map(options.perCompany?.inFlight ?? []);
    // Each company's fair share first, then what room is left, up to the burst.
    for (const cap of options.perCompany ? [options.perCompany.limit, options.perCompany.burst] : [Infinity]) {
      for (const candidate of candidates) {
        if (chosen.length >= options.limit) break;
        const room = budget.get(candidate.destination_id) ?? 0;
        const share = companyShare.get(candidate.company_id) ?? 0;
        if (room === 0 || share >= cap || chosen.includes(candidate)) continue;
        budget.set(candidate.destination_id, room - 1);
        companyShare.set(candidate.company_id, share + 1);
        chosen.push(candidate);
      }
    }
    if (chosen.length === 0) return [];

    const token = randomUUID();
    const byId = new Map(destinations.map((d) => [d.id, d]));
    for (const destination of destinations) {
      const ids = chosen.filter((c) => c.destination_id === destination.id).map((c) => c.id);
      if (ids.length === 0) continue;
      await trx
        .updateTable('deliveries')
        .set({
          lease_token: token,
          next_attempt_at: now + destination.timeout_ms + options.leaseMs,
          attempts: sql<number>`attempts + 1`,
          updated_at: now,
        })
        .where('id', 'in', ids)
        .execute();
      if (destination.rate_per_second !== null) {
        const used = Number(destination.rate_window_start) === window ? destination.rate_window_count : 0;
        await trx
          .updateTable('destinations')
          .set({ rate_window_start: window, rate_window_count: used + ids.length })
          .where('id', '=', destination.id)
          .execute();
      }
    }

    const webhooks = await trx
      .selectFrom('webhooks')
      .select(['uuid', 'raw_body', 'headers', 'payload_format'])
      .where('company_id', 'in', [...new Set(chosen.map((c) => c.company_id))])
      .where('uuid', 'in', chosen.map((c) => c.webhook_uuid))
      .where('received_at', 'in', [...new Set(chosen.map((c) => Number(c.webhook_received_at)))])
      .execute();
    const bodies = new Map(webhooks.map((w) => [w.uuid, w]));

    return chosen.map((c): ClaimedDelivery => {
      const destination = byId.get(c.destination_id)!;
      const webhook = bodies.get(c.webhook_uuid);
      const previousLive = destination.previous_secret_expires_at !== null && Number(destination.previous_secret_expires_at) > now;
      return {
        id: c.id,
        companyId: c.company_id,
        destinationId: c.destination_id,
        leaseToken: token,
        series: c.series,
        attempt: c.attempts + 1,
        webhookUuid: c.webhook_uuid,
        integrationId: c.integration_id,
        event: c.event,
        destination: {
          url: destination.url,
          timeoutMs: destination.timeout_ms,
          secretSealed: destination.secret_sealed,
          previousSecretSealed: previousLive ? destination.previous_secret_sealed : null,
          headersSealed: destination.headers_sealed,
        },
        webhook: webhook
          ? {
              rawBody: Buffer.from(webhook.raw_body),
              contentType: contentTypeOf(webhook.headers),
              payloadFormat: webhook.payload_format as PayloadFormat,
            }
          : null,
      };
    });
  });
}

/** The Content-Type the webhook arrived with (kept headers are lower-cased JSON). */
function contentTypeOf(headers: string): string {
  const value = (JSON.parse(headers) as Record<string, string>)['content-type'];
  return value === undefined || value === '' ? 'application/json' : value;
}

export async function finishAttempts(
  db: Kysely<Database>,
  types: DialectTypes,
  results: readonly AttemptResult[],
  now: number,
  disableAfterMs: number,
): Promise<DisabledDestination[]> {
  if (results.length === 0) return [];
  // The same order in every transaction that locks these rows: two nodes finishing at once wait, never deadlock.
  const sorted = [...results].sort((a, b) => (a.deliveryId < b.deliveryId ? -1 : a.deliveryId > b.deliveryId ? 1 : 0));
  return db.transaction().execute(async (trx) => {
    for (const result of sorted) {
      const { attempt } = result;
      await trx
        .updateTable('deliveries')
        .set({
          state: result.outcome === 'retry' ? 'pending' : result.outcome,
          next_attempt_at: result.outcome === 'retry' ? attempt.nextAttemptAt : null,
          lease_token: null,
          last_attempt_at: attempt.attemptedAt,
          last_status: attempt.status,
          last_error: attempt.error,
          updated_at: now,
        })
        .where('id', '=', result.deliveryId)
        .where('lease_token', '=', result.leaseToken)
        .execute();
    }
    await trx
      .insertInto('delivery_attempts')
      .values(
        sorted.map((result) => ({
          id: newId('att'),
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
      )
      .execute();
    return trackHealth(trx, types, sorted, now, disableAfterMs);
  });
}

/**
 * Each destination's failure streak: a success ends it, a failure starts it if none runs.
 * A streak older than `disableAfterMs`, or a 410 Gone, disables the destination (its
 * deliveries are then held), with an audit record by the system.
 */
async function trackHealth(
  trx: Kysely<Database>,
  types: DialectTypes,
  results: readonly AttemptResult[],
  now: number,
  disableAfterMs: number,
): Promise<DisabledDestination[]> {
  const byDestination = new Map<string, AttemptResult[]>();
  for (const result of results) byDestination.set(result.destinationId, [...(byDestination.get(result.destinationId) ?? []), result]);
  const ids = [...byDestination.keys()].sort();
  const rows = await types
    .lockForUpdate(
      trx
        .selectFrom('destinations')
        .select(['id', 'company_id', 'status', 'failing_since', 'last_success_at', 'deleted_at'])
        .where('id', 'in', ids)
        .orderBy('id'),
    )
    .execute();
  const disabled: DisabledDestination[] = [];
  for (const row of rows) {
    const attempts = byDestination.get(row.id)!.sort((a, b) => a.attempt.attemptedAt - b.attempt.attemptedAt);
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
    await trx
      .updateTable('destinations')
      .set({
        failing_since: failingSince,
        last_success_at: lastSuccessAt,
        ...(reason !== null && { status: 'disabled', disabled_reason: reason, status_changed_at: now, needs_reconcile: 1, updated_at: now }),
      })
      .where('id', '=', row.id)
      .execute();
    if (reason !== null) {
      disabled.push({ companyId: row.company_id, destinationId: row.id, reason });
      await insertAudit(trx, row.company_id, {
        actor: { type: 'system', id: null, ip: null },
        action: 'destination.disable',
        targetType: 'destination',
        targetId: row.id,
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
