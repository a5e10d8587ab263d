import type { Kysely, Selectable } from 'kysely';
import type { Database, DeliveriesTable, DeliveryAttemptsTable } from '../schema.js';
import type { AttemptErrorClass, Delivery, DeliveryAttempt, DeliveryQuery, DeliveryState, SkippedBy } from '../store.js';

/** A company's deliveries as people read them (the workers' side: delivery-work.ts; replays and sends: redeliveries.ts). */

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
    rulesVersion: row.rules_version ?? null,
    skippedBy: (row.skipped_by ?? null) as SkippedBy | null,
    duplicateOf: row.duplicate_of ?? null,
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
