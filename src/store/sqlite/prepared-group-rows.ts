import type SQLite from 'better-sqlite3';
import { GROUP_ROW_COLUMNS, valuesIn, type GroupRowTable, type GroupRowWriter } from '../group-rows.js';

/**
 * A group's rows on SQLite (webhooks, request log, outbox, attempts): one prepared
 * single-row INSERT a row, on the store's own connection, inside the transaction the caller
 * holds (better-sqlite3 runs them at once, on the connection Kysely's transaction is using;
 * no other statement can come between).
 *
 * Why not Kysely's multi-row INSERT: SQLite has no round trips to save, and a multi-row
 * statement is new SQL for every group size, which better-sqlite3 parses and plans again at
 * each commit (and Kysely builds first). On the commit thread, the server's limit, that was
 * about half of a webhook's commit (`npm run bench:commit-parts`, docs/performance-history.md).
 */
export function preparedGroupRows(database: SQLite.Database): GroupRowWriter {
  const insert = (table: GroupRowTable, columns: readonly string[]) => {
    // Prepared at first use: the tables exist only once migrations have run.
    let statement: SQLite.Statement | undefined;
    return async (_trx: unknown, rows: readonly object[]) => {
      statement ??= database.prepare(`insert into ${table} (${columns.join(', ')}) values (${columns.map(() => '?').join(', ')})`);
      for (const row of rows) statement.run(valuesIn(columns, row));
    };
  };
  return {
    // The feed position is the commit's to give on SQLite (reserveFeedSeqs).
    insertWebhooks: insert('webhooks', [...GROUP_ROW_COLUMNS.webhooks, 'feed_seq']),
    insertRequestLogs: insert('request_log', GROUP_ROW_COLUMNS.request_log),
    insertDeliveries: insert('deliveries', GROUP_ROW_COLUMNS.deliveries),
    insertAttempts: insert('delivery_attempts', GROUP_ROW_COLUMNS.delivery_attempts),
  };
}
