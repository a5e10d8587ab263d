import type SQLite from 'better-sqlite3';
import type { AttemptRow, GroupRowWriter, NewDeliveryRow, RequestLogRow, WebhookRow } from '../group-rows.js';

/**
 * A group's rows on SQLite (webhooks, request log, outbox, attempts): one prepared single-row INSERT
 * a row, on the store's own connection, inside the transaction commitBatch holds
 * (better-sqlite3 runs them at once, on the connection Kysely's transaction is using; no
 * other statement can come between).
 *
 * Why not Kysely's multi-row INSERT: SQLite has no round trips to save, and a multi-row
 * statement is new SQL for every group size, which better-sqlite3 parses and plans again at
 * each commit (and Kysely builds first). On the commit thread, the server's limit, that was
 * about half of a webhook's commit (`npm run bench:commit-parts`, docs/performance.md).
 */
export function preparedGroupRows(database: SQLite.Database): GroupRowWriter {
  // Prepared at first use: the tables exist only once migrations have run.
  let statements:
    | { webhook: SQLite.Statement; requestLog: SQLite.Statement; delivery: SQLite.Statement; attempt: SQLite.Statement }
    | undefined;
  const prepared = () =>
    (statements ??= {
      webhook: database.prepare(
        'insert into webhooks (uuid, company_id, integration_id, event, received_at, raw_body, headers, source_ip, key_id, idempotency_key, payload_format, feed_seq) ' +
          'values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      requestLog: database.prepare(
        'insert into request_log (id, company_id, integration_id, received_at, method, status, error_code, key_id, ip, user_agent, size_bytes, duration_ms, webhook_uuid, error_detail) ' +
          'values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      delivery: database.prepare(
        'insert into deliveries (id, company_id, destination_id, webhook_uuid, webhook_received_at, integration_id, event, state, next_attempt_at, created_at, updated_at) ' +
          'values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      attempt: database.prepare(
        'insert into delivery_attempts (id, company_id, delivery_id, destination_id, series, number, attempted_at, duration_ms, status, error, response_excerpt, next_attempt_at) ' +
          'values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
    });

  return {
    async insertWebhooks(_trx, rows: WebhookRow[]) {
      const { webhook } = prepared();
      for (const r of rows) {
        webhook.run(
          r.uuid, r.company_id, r.integration_id, r.event, r.received_at, r.raw_body, r.headers, r.source_ip, r.key_id,
          r.idempotency_key ?? null, r.payload_format ?? 'envelope', r.feed_seq ?? null,
        );
      }
    },
    async insertRequestLogs(_trx, rows: RequestLogRow[]) {
      const { requestLog } = prepared();
      for (const r of rows) {
        requestLog.run(
          r.id, r.company_id, r.integration_id, r.received_at, r.method, r.status, r.error_code ?? null, r.key_id ?? null, r.ip,
          r.user_agent ?? null, r.size_bytes, r.duration_ms, r.webhook_uuid ?? null, r.error_detail ?? null,
        );
      }
    },
    async insertDeliveries(_trx, rows: NewDeliveryRow[]) {
      const { delivery } = prepared();
      for (const r of rows) {
        delivery.run(
          r.id, r.company_id, r.destination_id, r.webhook_uuid, r.webhook_received_at, r.integration_id, r.event, r.state,
          r.next_attempt_at ?? null, r.created_at, r.updated_at,
        );
      }
    },
    async insertAttempts(_trx, rows: AttemptRow[]) {
      const { attempt } = prepared();
      for (const r of rows) {
        attempt.run(
          r.id, r.company_id, r.delivery_id, r.destination_id, r.series, r.number, r.attempted_at, r.duration_ms, r.status ?? null,
          r.error ?? null, r.response_excerpt ?? null, r.next_attempt_at ?? null,
        );
      }
    },
  };
}
