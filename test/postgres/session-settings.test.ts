import { sql, type Kysely } from 'kysely';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import type { Database } from '../../src/store/schema.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';

/**
 * Every connection of the store is set up before its first query: commits wait for the WAL
 * flush whatever the server's default, and no statement is JIT-compiled (the server's
 * default here is jit = on, which once cost every delivery claim 16 ms of compiling).
 */
let database: TestDatabase;
let store: Store;

beforeEach(async () => {
  database = await freshDatabase({ dialect: 'postgres' });
  store = openStore(database.databaseUrl, { poolSize: 3 });
});
afterEach(async () => {
  await store.close();
  await database.cleanup();
});

test("each of the store's connections has synchronous_commit on and jit off from its first query", async () => {
  const db = (store as unknown as { db: Kysely<Database> }).db;
  // Three at once, so the pool opens all three connections.
  const sessions = await Promise.all(
    [1, 2, 3].map(() =>
      db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ pid: number; jit: string; synchronous_commit: string }>`
          select pg_backend_pid() as pid, current_setting('jit') as jit, current_setting('synchronous_commit') as synchronous_commit, pg_sleep(0.05)`.execute(trx);
        return rows[0]!;
      }),
    ),
  );
  expect(new Set(sessions.map((session) => session.pid)).size).toBe(3);
  for (const session of sessions) expect({ jit: session.jit, synchronous_commit: session.synchronous_commit }).toEqual({ jit: 'off', synchronous_commit: 'on' });
});
