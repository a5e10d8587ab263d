import { sql, type Kysely, type Selectable } from 'kysely';
import { matchesEvent } from '../../domain/event-patterns.js';
import { newTimeOrderedId } from '../../domain/ids.js';
import type { Database, DeliveriesTable, DeliveryAttemptsTable } from '../schema.js';
import type {
  AttemptErrorClass,
  AuditEvent,
  BulkOutcome,
  Delivery,
  DeliveryAttempt,
  DeliveryQuery,
  DeliveryState,
  ReplayFilter,
  SendOutcome,
  SendSelection,
} from '../store.js';
import { insertAudit } from './audit.js';
import { findLiveDestination } from './destinations.js';

/** A company's deliveries as people read and replay them (the workers' side: delivery-work.ts). */

/** Webhooks one range send reads at most per call (heads only): the rest is `more`. */
const SEND_SCAN_ROWS = 50_000;

export function deliveryOfRow(row: Selectable<DeliveriesTable>): Delivery {
  return {
    id: row.id,
    companyId: row.company_id,
    destinationId: row.destination_id,
    webhookUuid: row.webhook_uuid,
    webhookReceivedAt: Number(row.webhook_received_at),
    integrationId: row.integration_id,
    event: row.event,
    state: row.state as DeliveryState,
    attempts: row.attempts,
    series: row.series,
    nextAttemptAt: row.next_attempt_at === null ? null : Number(row.next_attempt_at),
    lastAttemptAt: row.last_attempt_at === null ? null : Number(row.last_attempt_at),
    lastStatus: row.last_status,
    lastError: row.last_error,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

export function attemptOfRow(row: Selectable<DeliveryAttemptsTable>): DeliveryAttempt {
  return {
    id: row.id,
    deliveryId: row.delivery_id,
    destinationId: row.destination_id,
    series: row.series,
    number: row.number,
    attemptedAt: Number(row.attempted_at),
    durationMs: row.duration_ms,
    status: row.status,
    error: row.error as AttemptErrorClass | null,
    responseExcerpt: row.response_excerpt,
    nextAttemptAt: row.next_attempt_at === null ? null : Number(row.next_attempt_at),
  };
}

/** Newest first, of one destination (its index) or one webhook (its index), filtered. */
export async function listDeliveries(db: Kysely<Database>, companyId: string, query: DeliveryQuery): Promise<Delivery[]> {
  let select = db.selectFrom('deliveries').selectAll().where('company_id', '=', companyId);
  if (query.destinationId !== undefined) select = select.where('destination_id', '=', query.destinationId);
  if (query.webhookUuid !== undefined) select = select.where('webhook_uuid', '=', query.webhookUuid);
  if (query.state !== undefined) select = select.where('state', '=', query.state);
  if (query.event !== undefined) select = select.where('event', '=', query.event);
  if (query.since !== undefined) select = select.where('created_at', '>=', query.since);
  if (query.until !== undefined) select = select.where('created_at', '<', query.until);
  const cursor = query.cursor;
  if (cursor) {
    select = select
      .where('created_at', '<=', cursor.at)
      .where((eb) => eb.or([eb('created_at', '<', cursor.at), eb.and([eb('created_at', '=', cursor.at), eb('id', '<', cursor.id)])]));
  }
  const rows = await select.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  return rows.map(deliveryOfRow);
}

export async function getDelivery(db: Kysely<Database>, companyId: string, deliveryId: string): Promise<Delivery | undefined> {
  const row = await db.selectFrom('deliveries').selectAll().where('company_id', '=', companyId).where('id', '=', deliveryId).executeTakeFirst();
  return row && deliveryOfRow(row);
}

export async function listDeliveryAttempts(db: Kysely<Database>, companyId: string, deliveryId: string, limit: number): Promise<DeliveryAttempt[]> {
  const rows = await db
    .selectFrom('delivery_attempts')
    .selectAll()
    .where('company_id', '=', companyId)
    .where('delivery_id', '=', deliveryId)
    .orderBy('attempted_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map(attemptOfRow);
}

/**
 * What a new series sets: attempts from zero, due now, or held while the destination is
 * not active. The lease token is cleared, so an attempt still in flight reports to nobody.
 */
function newSeries(active: boolean, at: number) {
  return {
    state: active ? 'pending' : 'held',
    attempts: 0,
    series: sql<number>`series + 1`,
    next_attempt_at: active ? at : null,
    lease_token: null,
    updated_at: at,
  };
}

export async function replayDelivery(
  db: Kysely<Database>,
  companyId: string,
  deliveryId: string,
  at: number,
  audit: AuditEvent,
): Promise<Delivery | undefined> {
  return db.transaction().execute(async (trx) => {
    const delivery = await getDelivery(trx, companyId, deliveryId);
    if (!delivery || delivery.state === 'cancelled') return undefined;
    const destination = await findLiveDestination(trx, companyId, delivery.destinationId);
    if (!destination) return undefined;
    await trx
      .updateTable('deliveries')
      .set(newSeries(destination.status === 'active', at))
      .where('company_id', '=', companyId)
      .where('id', '=', deliveryId)
      .execute();
    await insertAudit(trx, companyId, { ...audit, targetId: deliveryId, after: { series: delivery.series + 1 } });
    return getDelivery(trx, companyId, deliveryId);
  });
}

/** A new series for up to `limit` of one destination's deliveries; in-flight ones are left to finish. */
export async function replayDeliveries(
  db: Kysely<Database>,
  companyId: string,
  filter: ReplayFilter,
  at: number,
  limit: number,
  audit: AuditEvent,
): Promise<BulkOutcome> {
  return db.transaction().execute(async (trx) => {
    const destination = await findLiveDestination(trx, companyId, filter.destinationId);
    if (!destination) return { count: 0, more: false };
    let select = trx
      .selectFrom('deliveries')
      .select('id')
      .where('company_id', '=', companyId)
      .where('destination_id', '=', filter.destinationId)
      .where('state', '!=', 'cancelled')
      .where((eb) => eb.or([eb('lease_token', 'is', null), eb('next_attempt_at', '<=', at)]));
    if (filter.state !== undefined) select = select.where('state', '=', filter.state);
    if (filter.event !== undefined) select = select.where('event', '=', filter.event);
    if (filter.since !== undefined) select = select.where('created_at', '>=', filter.since);
    if (filter.until !== undefined) select = select.where('created_at', '<', filter.until);
    const ids = (await select.orderBy('created_at').limit(limit + 1).execute()).map((row) => row.id);
    const chosen = ids.slice(0, limit);
    for (let i = 0; i < chosen.length; i += 500) {
      await trx
        .updateTable('deliveries')
        .set(newSeries(destination.status === 'active', at))
        .where('id', 'in', chosen.slice(i, i + 500))
        .execute();
    }
    if (chosen.length > 0) await insertAudit(trx, companyId, { ...audit, targetId: filter.destinationId, after: { ...filter, replayed: chosen.length } });
    return { count: chosen.length, more: ids.length > limit };
  });
}

/**
 * Deliveries to the destination for stored webhooks that have none to it: named ones
 * whatever the filters, or a range (oldest first) through the destination's filters. A range
 * reads at most SEND_SCAN_ROWS webhook heads per call, never a body.
 */
export async function sendToDestination(
  db: Kysely<Database>,
  companyId: string,
  destinationId: string,
  selection: SendSelection,
  at: number,
  limit: number,
  audit: AuditEvent,
): Promise<SendOutcome> {
  return db.transaction().execute(async (trx) => {
    const destination = await findLiveDestination(trx, companyId, destinationId);
    if (!destination) return { count: 0, skipped: 0, more: false };
    let select = trx
      .selectFrom('webhooks')
      .select(['uuid', 'received_at', 'integration_id', 'event'])
      .where('company_id', '=', companyId);
    if (selection.webhookUuids !== undefined) select = select.where('uuid', 'in', selection.webhookUuids);
    if (selection.since !== undefined) select = select.where('received_at', '>=', selection.since);
    if (selection.until !== undefined) select = select.where('received_at', '<', selection.until);
    if (selection.event !== undefined) select = select.where('event', '=', selection.event);
    if (destination.integrationIds !== null && selection.webhookUuids === undefined) {
      if (destination.integrationIds.length === 0) return { count: 0, skipped: 0, more: false };
      select = select.where('integration_id', 'in', destination.integrationIds);
    }
    const scanned = await select.orderBy('received_at').orderBy('uuid').limit(SEND_SCAN_ROWS + 1).execute();
    const heads = scanned.slice(0, SEND_SCAN_ROWS);
    const matching =
      selection.webhookUuids === undefined ? heads.filter((head) => matchesEvent(destination.eventPatterns, head.event)) : heads;
    const existing = new Set<string>();
    for (let i = 0; i < matching.length; i += 500) {
      const rows = await trx
        .selectFrom('deliveries')
        .select('webhook_uuid')
        .where('destination_id', '=', destinationId)
        .where('webhook_uuid', 'in', matching.slice(i, i + 500).map((head) => head.uuid))
        .execute();
      for (const row of rows) existing.add(row.webhook_uuid);
    }
    const fresh = matching.filter((head) => !existing.has(head.uuid));
    const chosen = fresh.slice(0, limit);
    const active = destination.status === 'active';
    for (let i = 0; i < chosen.length; i += 500) {
      await trx
        .insertInto('deliveries')
        .values(
          chosen.slice(i, i + 500).map((head) => ({
            id: newTimeOrderedId('dlv', at),
            company_id: companyId,
            destination_id: destinationId,
            webhook_uuid: head.uuid,
            webhook_received_at: Number(head.received_at),
            integration_id: head.integration_id,
            event: head.event,
            state: active ? 'pending' : 'held',
            next_attempt_at: active ? at : null,
            lease_token: null,
            last_attempt_at: null,
            last_status: null,
            last_error: null,
            created_at: at,
            updated_at: at,
          })),
        )
        .execute();
    }
    if (chosen.length > 0) await insertAudit(trx, companyId, { ...audit, targetId: destinationId, after: { created: chosen.length } });
    const cut = scanned.length > SEND_SCAN_ROWS;
    return {
      count: chosen.length,
      skipped: matching.length - fresh.length,
      more: fresh.length > limit || cut,
      // Where the next call's range should start when this one stopped reading (the
      // webhooks at that very millisecond are read again, and skipped as sent).
      ...(cut && fresh.length <= limit && { nextSince: Number(heads.at(-1)!.received_at) }),
    };
  });
}
