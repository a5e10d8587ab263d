import type { Insertable, Kysely } from 'kysely';
import type { Database, DeliveriesTable, DeliveryAttemptsTable, RequestLogTable, WebhooksTable } from './schema.js';

export type WebhookRow = Insertable<WebhooksTable>;
export type RequestLogRow = Insertable<RequestLogTable>;
/** An outbox row as a commit writes it: not yet attempted, so no lease, attempt or result. */
export type NewDeliveryRow = Pick<
  Insertable<DeliveriesTable>,
  'id' | 'company_id' | 'destination_id' | 'webhook_uuid' | 'webhook_received_at' | 'integration_id' | 'event' | 'state' | 'next_attempt_at' | 'created_at' | 'updated_at'
>;

export type AttemptRow = Insertable<DeliveryAttemptsTable>;

/**
 * How a group commit writes its webhooks, their request-log rows and their outbox rows, and
 * a delivery exchange its attempts: the rows written most, a group at a time, inside the
 * caller's transaction (`trx`). Everything else in those transactions is built by Kysely;
 * these are the hot path, and each dialect writes them its cheapest way.
 */
export interface GroupRowWriter {
  insertWebhooks(trx: Kysely<Database>, rows: WebhookRow[]): Promise<void>;
  insertRequestLogs(trx: Kysely<Database>, rows: RequestLogRow[]): Promise<void>;
  insertDeliveries(trx: Kysely<Database>, rows: NewDeliveryRow[]): Promise<void>;
  insertAttempts(trx: Kysely<Database>, rows: AttemptRow[]): Promise<void>;
}

/** Rows per multi-row INSERT: well under SQLite's 32,766 and PostgreSQL's 65,535 parameters. */
export const INSERT_CHUNK = 500;

export function* chunks<T>(items: readonly T[]): Generator<T[]> {
  for (let i = 0; i < items.length; i += INSERT_CHUNK) yield items.slice(i, i + INSERT_CHUNK);
}

/**
 * Multi-row INSERTs built by Kysely: on PostgreSQL one round trip a table for a whole group,
 * which is what costs there.
 */
export const multiRowInserts: GroupRowWriter = {
  async insertWebhooks(trx, rows) {
    for (const chunk of chunks(rows)) await trx.insertInto('webhooks').values(chunk).execute();
  },
  async insertRequestLogs(trx, rows) {
    for (const chunk of chunks(rows)) await trx.insertInto('request_log').values(chunk).execute();
  },
  async insertDeliveries(trx, rows) {
    for (const chunk of chunks(rows)) await trx.insertInto('deliveries').values(chunk).execute();
  },
  async insertAttempts(trx, rows) {
    for (const chunk of chunks(rows)) await trx.insertInto('delivery_attempts').values(chunk).execute();
  },
};
