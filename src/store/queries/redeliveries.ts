import { sql, type ExpressionBuilder, type Kysely, type Selectable } from 'kysely';
import { matchesEvent } from '../../domain/event-patterns.js';
import { newTimeOrderedId } from '../../domain/ids.js';
import type { DialectTypes } from '../migrations/index.js';
import { chunks, type GroupRowWriter, type NewDeliveryRow } from '../group-rows.js';
import type { Database, RedeliveryStateTable } from '../schema.js';
import type {
  AuditEvent,
  RedeliveryBudget,
  RedeliveryFinish,
  RedeliveryLease,
  RedeliveryRecord,
  RedeliveryStart,
  RedeliveryStep,
  ReplayFilter,
  ReplayScan,
  SendCandidate,
  SendScan,
  SendSelection,
  SingleReplay,
} from '../store.js';
import { insertAudit } from './audit.js';
import { getDelivery } from './deliveries.js';
import { findLiveDestination } from './destinations.js';

/**
 * Deliveries made again: replays (a new series of attempts) and sends (deliveries of
 * stored webhooks a destination never had). Bounded so that no tenant can turn them
 * against intake or a third party (issue 33):
 *
 * - a bulk operation reads what it will change on the read side (scanReplay, scanSend),
 *   then writes it in steps of a few hundred rows, each a short transaction of its own, so
 *   the group commits of every other company go between them;
 * - one bulk operation per company at a time, across nodes: a lease in the company's
 *   `redelivery_state` row, renewed by each step;
 * - every delivery made again takes a token of the company's budget (RedeliveryBudget),
 *   counted in the same row, under the same lock, in the step's transaction.
 */

const HOUR_MS = 60 * 60 * 1000;
/** How often a step is tried again after PostgreSQL chose it as a deadlock's victim. */
const DEADLOCK_RETRIES = 3;

/** Webhooks one range send reads at most per call (heads only): the rest is `more`. */
export const SEND_SCAN_ROWS = 50_000;

/** What a new series sets: attempts from zero, due now, or held while the destination is not active. */
function newSeries(active: boolean, at: number) {
  return {
    state: active ? 'pending' : 'held',
    attempts: 0,
    series: sql<number>`series + 1`,
    next_attempt_at: active ? at : null,
    // An attempt still in flight reports to nobody.
    lease_token: null,
    series_started_at: at,
    updated_at: at,
  };
}

/**
 * What a bulk replay takes: deliveries held or settled (succeeded, failed), for a new
 * series; or, asked for `pending` ones ("retry now"), those failing and waiting for their
 * next retry: at least one attempt made and none in flight (an attempt under way finishes
 * first: taking it would send twice at once). Never cancelled ones, nor pending ones whose
 * first attempt is still to come.
 */
export function bulkReplayable(state: string | undefined, named = false) {
  return (eb: ExpressionBuilder<Database, 'deliveries'>) => {
    const failingNow = eb.and([eb('state', '=', 'pending'), eb('attempts', '>', 0), eb('lease_token', 'is', null)]);
    const settled = eb('state', 'not in', ['cancelled', 'pending']);
    if (state === 'pending') return failingNow;
    // Deliveries a person picked one by one: what they see failing is taken whether it still retries or gave up.
    if (named && state === undefined) return eb.or([failingNow, settled]);
    return settled;
  };
}

/**
 * Not replayed since `startedBefore`. The first series is not counted, however new: what a
 * repeated replay would send again is what the last replay sent.
 */
function notReplayedSince(startedBefore: number) {
  return sql<boolean>`(series_started_at is null or series_started_at < ${startedBefore})`;
}

type StateRow = Selectable<RedeliveryStateTable>;

/** The company's lease and its tokens counted up to `at`. */
function stateOf(row: StateRow, at: number, budget: RedeliveryBudget) {
  const elapsed = Math.max(0, at - Number(row.budget_counted_at));
  const tokens = Math.min(budget.burst, Number(row.budget_tokens) + (elapsed * budget.perHour) / HOUR_MS);
  return { leaseToken: row.lease_token, leaseExpiresAt: Number(row.lease_expires_at), tokens };
}

/** The company's row, locked; made (with a full budget) on the company's first use. */
async function lockState(trx: Kysely<Database>, types: DialectTypes, companyId: string, at: number, budget: RedeliveryBudget) {
  const locked = () => types.lockForUpdate(trx.selectFrom('redelivery_state').selectAll().where('company_id', '=', companyId)).executeTakeFirst();
  let row = await locked();
  if (row === undefined) {
    await trx
      .insertInto('redelivery_state')
      .values({ company_id: companyId, lease_token: null, lease_expires_at: 0, budget_tokens: budget.burst, budget_counted_at: at })
      .onConflict((oc) => oc.column('company_id').doNothing())
      .execute();
    row = await locked();
  }
  return stateOf(row!, at, budget);
}

/** Why an operation may not start now: another's live lease, or no token left. */
function startRefusal(state: ReturnType<typeof stateOf>, lease: Omit<RedeliveryLease, 'destinationId'>): RedeliveryStart | undefined {
  if (state.leaseToken !== null && state.leaseToken !== lease.token && state.leaseExpiresAt > lease.at) {
    return { kind: 'busy', retryAfterMs: state.leaseExpiresAt - lease.at };
  }
  if (state.tokens < 1) return { kind: 'no_budget', retryAfterMs: untilOneToken(state.tokens, lease.budget) };
  return undefined;
}

/** How long until the budget holds one token again. */
function untilOneToken(tokens: number, budget: RedeliveryBudget): number {
  return Math.ceil(((1 - tokens) * HOUR_MS) / budget.perHour);
}

async function writeState(
  trx: Kysely<Database>,
  companyId: string,
  state: { tokens: number; at: number; lease?: { token: string | null; expiresAt: number } },
): Promise<void> {
  await trx
    .updateTable('redelivery_state')
    .set({
      budget_tokens: state.tokens,
      budget_counted_at: state.at,
      ...(state.lease && { lease_token: state.lease.token, lease_expires_at: state.lease.expiresAt }),
    })
    .where('company_id', '=', companyId)
    .execute();
}

/** PostgreSQL ended the transaction to break a deadlock: trying again is safe, and almost always succeeds. */
function isDeadlock(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '40P01';
}

async function withDeadlockRetries<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (!isDeadlock(error) || attempt >= DEADLOCK_RETRIES) throw error;
    }
  }
}

export async function replayDelivery(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  deliveryId: string,
  at: number,
  budget: RedeliveryBudget,
  audit: AuditEvent,
): Promise<SingleReplay> {
  return withDeadlockRetries(() =>
    db.transaction().execute(async (trx): Promise<SingleReplay> => {
      const delivery = await getDelivery(trx, companyId, deliveryId);
      if (!delivery) return { kind: 'not_found' };
      const destination = delivery.state === 'cancelled' ? undefined : await findLiveDestination(trx, companyId, delivery.destinationId);
      if (!destination) return { kind: 'cancelled' };
      const state = await lockState(trx, types, companyId, at, budget);
      if (state.tokens < 1) return { kind: 'no_budget', retryAfterMs: untilOneToken(state.tokens, budget) };
      await writeState(trx, companyId, { tokens: state.tokens - 1, at });
      await trx
        .updateTable('deliveries')
        .set(newSeries(destination.status === 'active', at))
        .where('company_id', '=', companyId)
        .where('id', '=', deliveryId)
        .execute();
      await insertAudit(trx, companyId, { ...audit, targetId: deliveryId, after: { series: delivery.series + 1 } });
      return { kind: 'replayed', delivery: (await getDelivery(trx, companyId, deliveryId))! };
    }),
  );
}

/**
 * Takes the company's lease unless a live one is another's; says what the budget allows. A
 * refusal is decided on a plain read first and writes nothing, so a caller looping on its
 * 429s costs a read each, not a transaction (on SQLite a commit on intake's thread).
 */
export async function beginRedelivery(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  lease: Omit<RedeliveryLease, 'destinationId'>,
): Promise<RedeliveryStart> {
  const seen = await db.selectFrom('redelivery_state').selectAll().where('company_id', '=', companyId).executeTakeFirst();
  const refused = seen && startRefusal(stateOf(seen, lease.at, lease.budget), lease);
  if (refused) return refused;
  return db.transaction().execute(async (trx): Promise<RedeliveryStart> => {
    const state = await lockState(trx, types, companyId, lease.at, lease.budget);
    const refusal = startRefusal(state, lease);
    if (refusal) return refusal;
    await writeState(trx, companyId, { tokens: state.tokens, at: lease.at, lease: { token: lease.token, expiresAt: lease.at + lease.leaseMs } });
    return { kind: 'started', available: Math.floor(state.tokens) };
  });
}

/**
 * One step of a bulk operation: a transaction (tried again when PostgreSQL picks it as a
 * deadlock's victim) that locks the company's state row and checks the operation's lease
 * and destination before `body` runs; what stops the operation otherwise. The lease is
 * renewed by closeStep.
 */
function inStep(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  lease: RedeliveryLease,
  body: (trx: Kysely<Database>, context: { tokens: number; active: boolean }) => Promise<RedeliveryStep>,
): Promise<RedeliveryStep> {
  return withDeadlockRetries(() =>
    db.transaction().execute(async (trx): Promise<RedeliveryStep> => {
      const state = await lockState(trx, types, companyId, lease.at, lease.budget);
      if (state.leaseToken !== lease.token) return { count: 0, stop: 'lease_lost' };
      const destination = await findLiveDestination(trx, companyId, lease.destinationId);
      if (!destination) return { count: 0, stop: 'destination_gone' };
      return body(trx, { tokens: state.tokens, active: destination.status === 'active' });
    }),
  );
}

/** Writes what a step took, renews or frees the lease, and records the operation when it is its last step. */
async function closeStep(
  trx: Kysely<Database>,
  companyId: string,
  lease: RedeliveryLease,
  tokens: number,
  count: number,
  finish: RedeliveryFinish | undefined,
  stop: RedeliveryStep['stop'],
): Promise<RedeliveryStep> {
  // A step that stops the operation early keeps the lease: endRedelivery frees it with the record.
  const ends = finish !== undefined && stop === undefined;
  await writeState(trx, companyId, {
    tokens: tokens - count,
    at: lease.at,
    lease: ends ? { token: null, expiresAt: 0 } : { token: lease.token, expiresAt: lease.at + lease.leaseMs },
  });
  if (stop !== undefined) return { count, stop };
  const total = (finish?.countBefore ?? 0) + count;
  if (finish && total > 0) await insertAudit(trx, companyId, withCount(finish.audit, finish.countKey, total));
  return { count };
}

export async function replayStep(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  lease: RedeliveryLease,
  ids: readonly string[],
  startedBefore: number,
  finish: RedeliveryFinish | undefined,
  /** The replay's `state` filter: `pending` takes the failing ones waiting for a retry (bulkReplayable). */
  state?: string,
  /** The ids were picked one by one (delivery_ids): failing ones are taken with the settled ones. */
  named = false,
): Promise<RedeliveryStep> {
  return inStep(db, types, companyId, lease, async (trx, context) => {
    // Locked in id order, as every other writer of many deliveries locks them: two
    // transactions never hold each other's rows. Whatever changed since the scan (a
    // series begun by a worker or a single replay, a cancellation) is judged again here.
    const qualifying = await types
      .lockForUpdate(
        trx
          .selectFrom('deliveries')
          .select('id')
          .where('company_id', '=', companyId)
          .where('destination_id', '=', lease.destinationId)
          .where('id', 'in', [...ids])
          .where(bulkReplayable(state, named))
          .where(notReplayedSince(startedBefore))
          .orderBy('id'),
      )
      .execute();
    const allowed = Math.min(qualifying.length, Math.floor(context.tokens));
    // Within the budget, the oldest first, as the scan ordered them.
    const qualified = new Set(qualifying.map((row) => row.id));
    const chosen = ids.filter((id) => qualified.has(id)).slice(0, allowed);
    if (chosen.length > 0) await trx.updateTable('deliveries').set(newSeries(context.active, lease.at)).where('id', 'in', chosen).execute();
    const stop = allowed < qualifying.length ? 'no_budget' : undefined;
    return closeStep(trx, companyId, lease, context.tokens, chosen.length, finish, stop);
  });
}

export async function sendStep(
  db: Kysely<Database>,
  types: DialectTypes,
  groupRows: GroupRowWriter,
  companyId: string,
  lease: RedeliveryLease,
  webhooks: readonly SendCandidate[],
  finish?: RedeliveryFinish,
): Promise<RedeliveryStep> {
  return inStep(db, types, companyId, lease, async (trx, context) => {
    const rows = await trx
      .selectFrom('deliveries')
      .select('webhook_uuid')
      .where('destination_id', '=', lease.destinationId)
      .where('webhook_uuid', 'in', webhooks.map((webhook) => webhook.uuid))
      .execute();
    const existing = new Set(rows.map((row) => row.webhook_uuid));
    const fresh = webhooks.filter((webhook) => !existing.has(webhook.uuid));
    const chosen = fresh.slice(0, Math.min(fresh.length, Math.floor(context.tokens)));
    // The rows the outbox writes, through its writer: only their time is the send's.
    await groupRows.insertDeliveries(
      trx,
      chosen.map(
        (webhook): NewDeliveryRow => ({
          id: newTimeOrderedId('dlv', lease.at),
          company_id: companyId,
          destination_id: lease.destinationId,
          webhook_uuid: webhook.uuid,
          webhook_received_at: webhook.receivedAt,
          integration_id: webhook.integrationId,
          event: webhook.event,
          state: context.active ? 'pending' : 'held',
          next_attempt_at: context.active ? lease.at : null,
          created_at: lease.at,
          updated_at: lease.at,
        }),
      ),
    );
    const stop = chosen.length < fresh.length ? 'no_budget' : undefined;
    return closeStep(trx, companyId, lease, context.tokens, chosen.length, finish, stop);
  });
}

export async function endRedelivery(db: Kysely<Database>, companyId: string, token: string, record?: RedeliveryRecord): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('redelivery_state')
      .set({ lease_token: null, lease_expires_at: 0 })
      .where('company_id', '=', companyId)
      .where('lease_token', '=', token)
      .execute();
    if (record) await insertAudit(trx, companyId, withCount(record.audit, record.countKey, record.count));
  });
}

/** The operation's record with what it made, under the name its kind uses (`replayed`, `created`). */
function withCount(audit: AuditEvent, key: string, count: number): AuditEvent {
  return { ...audit, after: { ...(audit.after as object | undefined), [key]: count } };
}

/**
 * The deliveries a bulk replay would restart, oldest first: of the first `scanRows` of
 * the destination's deliveries in the range (the index on company, destination and time
 * alone says where that window ends), those not cancelled, not pending and not replayed
 * since `startedBefore`. `nextSince` says where the next call should begin when
 * the window, not the limit, ended the read.
 */
export async function scanReplay(
  db: Kysely<Database>,
  companyId: string,
  filter: ReplayFilter,
  startedBefore: number,
  limit: number,
  scanRows: number,
): Promise<ReplayScan> {
  if (filter.deliveryIds !== undefined) {
    // Named ones: at most 100 by their primary key, no range to bound.
    let named = db
      .selectFrom('deliveries')
      .select(['id', 'created_at'])
      .where('company_id', '=', companyId)
      .where('destination_id', '=', filter.destinationId)
      .where('id', 'in', filter.deliveryIds)
      .where(bulkReplayable(filter.state, true))
      .where(notReplayedSince(startedBefore));
    if (filter.state !== undefined) named = named.where('state', '=', filter.state);
    // One past the limit: `more` when the budget leaves some of them for another call.
    const rows = await named.orderBy('created_at').orderBy('id').limit(limit + 1).execute();
    const items = rows.slice(0, limit).map((row) => ({ id: row.id, createdAt: Number(row.created_at) }));
    return { items, more: rows.length > limit };
  }
  const ofDestination = () => {
    let select = db.selectFrom('deliveries').where('company_id', '=', companyId).where('destination_id', '=', filter.destinationId);
    if (filter.since !== undefined) select = select.where('created_at', '>=', filter.since);
    if (filter.until !== undefined) select = select.where('created_at', '<', filter.until);
    return select;
  };
  const boundaryRow = await ofDestination().select('created_at').orderBy('created_at').orderBy('id').limit(1).offset(scanRows).executeTakeFirst();
  const boundary = boundaryRow === undefined ? undefined : Number(boundaryRow.created_at);
  let select = ofDestination()
    .select(['id', 'created_at'])
    .where(bulkReplayable(filter.state))
    .where(notReplayedSince(startedBefore));
  // The window ends before the boundary's millisecond, unless that is where it starts (then it takes that millisecond whole).
  if (boundary !== undefined) select = boundary === filter.since ? select.where('created_at', '<=', boundary) : select.where('created_at', '<', boundary);
  if (filter.state !== undefined) select = select.where('state', '=', filter.state);
  if (filter.event !== undefined) select = select.where('event', '=', filter.event);
  const rows = await select.orderBy('created_at').orderBy('id').limit(limit + 1).execute();
  const items = rows.slice(0, limit).map((row) => ({ id: row.id, createdAt: Number(row.created_at) }));
  if (rows.length > limit) return { items, more: true, nextSince: Number(rows[limit]!.created_at) };
  if (boundary !== undefined && boundary !== filter.since) return { items, more: true, nextSince: boundary };
  return { items, more: false };
}

/**
 * The stored webhooks a send would make deliveries of: named ones whatever the filters, or
 * a range (oldest first) through the destination's filters, reading at most
 * SEND_SCAN_ROWS webhook heads, never a body; those that already have a delivery to the
 * destination are counted as skipped.
 */
export async function scanSend(
  db: Kysely<Database>,
  companyId: string,
  destinationId: string,
  selection: SendSelection,
  limit: number,
): Promise<SendScan> {
  const destination = await findLiveDestination(db, companyId, destinationId);
  if (!destination) return { fresh: [], skipped: 0, more: false };
  // An erased webhook is a tombstone: there is nothing to send.
  let select = db
    .selectFrom('webhooks')
    .select(['uuid', 'received_at', 'integration_id', 'event'])
    .where('company_id', '=', companyId)
    .where('erasure_id', 'is', null);
  if (selection.webhookUuids !== undefined) select = select.where('uuid', 'in', selection.webhookUuids);
  if (selection.since !== undefined) select = select.where('received_at', '>=', selection.since);
  if (selection.until !== undefined) select = select.where('received_at', '<', selection.until);
  if (selection.event !== undefined) select = select.where('event', '=', selection.event);
  if (destination.integrationIds !== null && selection.webhookUuids === undefined) {
    if (destination.integrationIds.length === 0) return { fresh: [], skipped: 0, more: false };
    select = select.where('integration_id', 'in', destination.integrationIds);
  }
  const scanned = await select.orderBy('received_at').orderBy('uuid').limit(SEND_SCAN_ROWS + 1).execute();
  const heads = scanned.slice(0, SEND_SCAN_ROWS);
  const matching = selection.webhookUuids === undefined ? heads.filter((head) => matchesEvent(destination.eventPatterns, head.event)) : heads;
  const existing = new Set<string>();
  for (const chunk of chunks(matching)) {
    const rows = await db
      .selectFrom('deliveries')
      .select('webhook_uuid')
      .where('destination_id', '=', destinationId)
      .where('webhook_uuid', 'in', chunk.map((head) => head.uuid))
      .execute();
    for (const row of rows) existing.add(row.webhook_uuid);
  }
  const fresh = matching.filter((head) => !existing.has(head.uuid));
  const cut = scanned.length > SEND_SCAN_ROWS;
  return {
    fresh: fresh.slice(0, limit).map((head) => ({
      uuid: head.uuid,
      receivedAt: Number(head.received_at),
      integrationId: head.integration_id,
      event: head.event,
    })),
    skipped: matching.length - fresh.length,
    more: fresh.length > limit || cut,
    // Where the next call's range should start when this one stopped reading (the
    // webhooks at that very millisecond are read again, and skipped as sent).
    ...(cut && fresh.length <= limit && { nextSince: Number(heads.at(-1)!.received_at) }),
  };
}
