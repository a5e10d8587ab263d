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
 * How a group commit writes its webhooks (each with its request's log record), the log rows
 * of requests that stored none and the outbox rows, and a delivery exchange its attempts:
 * the rows written most, a group at a time, inside the caller's transaction (`trx`).
 * Everything else in those transactions is built by Kysely; these are the hot path, and
 * each dialect writes them its cheapest way
 * (sqlite/prepared-group-rows.ts, postgres/prepared-group-rows.ts), in the columns below.
 */
export interface GroupRowWriter {
  insertWebhooks(trx: Kysely<Database>, rows: WebhookRow[]): Promise<void>;
  insertRequestLogs(trx: Kysely<Database>, rows: RequestLogRow[]): Promise<void>;
  insertDeliveries(trx: Kysely<Database>, rows: NewDeliveryRow[]): Promise<void>;
  insertAttempts(trx: Kysely<Database>, rows: AttemptRow[]): Promise<void>;
}

/**
 * The columns each writer fills, in the order its statements take them; a row's absent
 * optional values go as null. The others keep their defaults (on PostgreSQL the webhooks'
 * feed position among them; SQLite's commit writes it: feed_seq).
 */
export const GROUP_ROW_COLUMNS = {
  webhooks: [
    'uuid', 'company_id', 'integration_id', 'event', 'received_at', 'raw_body', 'headers', 'source_ip', 'key_id', 'idempotency_key',
    'payload_format', 'request_id', 'user_agent', 'duration_ms', 'trace_id',
  ],
  request_log: [
    'id', 'company_id', 'integration_id', 'received_at', 'method', 'status', 'error_code', 'key_id', 'ip', 'user_agent', 'size_bytes',
    'duration_ms', 'webhook_uuid', 'error_detail', 'trace_id',
  ],
  deliveries: [
    'id', 'company_id', 'destination_id', 'webhook_uuid', 'webhook_received_at', 'integration_id', 'event', 'state', 'next_attempt_at',
    'created_at', 'updated_at',
  ],
  delivery_attempts: [
    'id', 'company_id', 'delivery_id', 'destination_id', 'series', 'number', 'attempted_at', 'duration_ms', 'status', 'error',
    'response_excerpt', 'next_attempt_at',
  ],
} as const satisfies {
  webhooks: ReadonlyArray<keyof WebhookRow>;
  request_log: ReadonlyArray<keyof RequestLogRow>;
  deliveries: ReadonlyArray<keyof NewDeliveryRow>;
  delivery_attempts: ReadonlyArray<keyof AttemptRow>;
};

export type GroupRowTable = keyof typeof GROUP_ROW_COLUMNS;

/**
 * A row's values in `columns`' order, null for what it leaves out. Measured against naming
 * each value in the call, it costs 0.3–0.7 µs a row (a webhook's commit is 60–80 µs): the
 * price of one column list a table instead of one a dialect.
 */
export function valuesIn(columns: readonly string[], row: object): unknown[] {
  const values = new Array<unknown>(columns.length);
  for (let i = 0; i < columns.length; i++) values[i] = (row as Record<string, unknown>)[columns[i]!] ?? null;
  return values;
}

/** Rows per multi-row INSERT: well under SQLite's 32,766 and PostgreSQL's 65,535 parameters. */
export const INSERT_CHUNK = 500;

/** `items` in slices of `size` (INSERT_CHUNK unless told), in order. */
export function* chunks<T>(items: readonly T[], size = INSERT_CHUNK): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}
