import type { Kysely } from 'kysely';

/**
 * The OpenTelemetry trace of each request, when tracing is on and sampled it (issue 34): its
 * trace id (32 hex digits) beside the request's log record, so an operator goes from a row
 * of the request log to the trace, and back. A stored webhook's row holds its 202's record
 * (migration 0010), so it gets the column too; `request_log` holds every other request.
 *
 * Nullable, no default: neither database rewrites a table, a node of the older version
 * writes beside a newer one (its rows have none), and an untraced request writes a null.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // One column a statement: SQLite's ALTER TABLE adds one at a time.
  await db.schema.alterTable('request_log').addColumn('trace_id', 'text').execute();
  await db.schema.alterTable('webhooks').addColumn('trace_id', 'text').execute();
}
