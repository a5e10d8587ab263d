import type { Insertable, Kysely } from 'kysely';
import type { Database, RequestLogTable, WebhooksTable } from './schema.js';

export type WebhookRow = Insertable<WebhooksTable>;
export type RequestLogRow = Insertable<RequestLogTable>;

/**
 * How a group commit writes its webhooks and their request-log rows: the rows intake writes
 * most, inside commitBatch's transaction (`trx`). Everything else in that transaction is
 * built by Kysely; these two are the hot path, and each dialect writes them its cheapest way.
 */
export interface GroupRowWriter {
  insertWebhooks(trx: Kysely<Database>, rows: WebhookRow[]): Promise<void>;
  insertRequestLogs(trx: Kysely<Database>, rows: RequestLogRow[]): Promise<void>;
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
};
