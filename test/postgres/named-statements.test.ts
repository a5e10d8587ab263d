import { Kysely, sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { newId, newTimeOrderedId, newWebhookUuid } from '../../src/domain/ids.js';
import { IntakePostgresDialect } from '../../src/store/postgres/introspector.js';
import { postgresGroupRows, withNamedStatements } from '../../src/store/postgres/prepared-group-rows.js';
import type { Database } from '../../src/store/schema.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';

/**
 * A group's INSERTs on PostgreSQL are named statements of a few padded sizes: the server
 * parses and plans each once per connection, and holds at most four a table.
 */
let database: TestDatabase;
let pool: pg.Pool;
let db: Kysely<Database>;

beforeEach(async () => {
  database = await freshDatabase({ dialect: 'postgres' });
  // One connection: the prepared statements a session holds are visible to that session only.
  pool = new pg.Pool({ connectionString: database.databaseUrl, max: 1 });
  db = new Kysely<Database>({ dialect: new IntakePostgresDialect({ pool: withNamedStatements(pool) }) });
});
afterEach(async () => {
  await db.destroy();
  await database.cleanup();
});

function requestLogRows(count: number, at: number) {
  return Array.from({ length: count }, (_, i) => ({
    id: newTimeOrderedId('req', at + i),
    company_id: newId('cmp'),
    integration_id: newId('int'),
    received_at: at + i,
    method: 'POST',
    status: 202,
    error_code: null,
    key_id: null,
    ip: '198.51.100.4',
    user_agent: null,
    size_bytes: 10,
    duration_ms: 0.25,
    webhook_uuid: newWebhookUuid(),
    error_detail: null,
  }));
}

test('groups of any size go as named statements of 8, 16, 32 or 64 rows, the padding never stored', async () => {
  let at = Date.now();
  for (const size of [1, 5, 8, 9, 17, 40, 64, 65, 200]) {
    await db.transaction().execute((trx) => postgresGroupRows.insertRequestLogs(trx, requestLogRows(size, at)));
    at += size;
  }
  const [{ count }] = (await sql<{ count: number }>`select count(*)::int as count from request_log`.execute(db)).rows as [{ count: number }];
  expect(count).toBe(1 + 5 + 8 + 9 + 17 + 40 + 64 + 65 + 200);
  const prepared = await sql<{ name: string }>`select name from pg_prepared_statements order by name`.execute(db);
  expect(prepared.rows.map((row) => row.name).sort()).toEqual(
    ['intake_request_log_16', 'intake_request_log_32', 'intake_request_log_64', 'intake_request_log_8'].sort(),
  );
});

test('other queries through the same connection stay unnamed', async () => {
  await sql`select 1`.execute(db);
  await db.selectFrom('request_log').select('id').where('status', '=', 202).execute();
  const prepared = await sql<{ name: string }>`select name from pg_prepared_statements`.execute(db);
  expect(prepared.rows).toEqual([]);
});

test("a delivery exchange's attempts go the same way, their nulls kept", async () => {
  const at = Date.now();
  const rows = Array.from({ length: 11 }, (_, i) => ({
    id: newTimeOrderedId('att', at + i),
    company_id: newId('cmp'),
    delivery_id: newTimeOrderedId('dlv', at),
    destination_id: newId('dst'),
    series: 1,
    number: i + 1,
    attempted_at: at + i,
    duration_ms: 12,
    status: i % 2 === 0 ? 500 : null,
    error: i % 2 === 0 ? null : 'timeout',
    response_excerpt: i % 2 === 0 ? 'oops' : null,
    next_attempt_at: i === 10 ? null : at + 5000,
  }));
  await db.transaction().execute((trx) => postgresGroupRows.insertAttempts(trx, rows));
  const stored = await db.selectFrom('delivery_attempts').selectAll().orderBy('id').execute();
  expect(stored.map((row) => ({ ...row, attempted_at: Number(row.attempted_at), next_attempt_at: row.next_attempt_at === null ? null : Number(row.next_attempt_at) }))).toEqual(rows);
  const prepared = await sql<{ name: string }>`select name from pg_prepared_statements`.execute(db);
  expect(prepared.rows.map((row) => row.name)).toEqual(['intake_delivery_attempts_16']);
});
