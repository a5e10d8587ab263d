import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { afterEach, expect, test } from 'vitest';
import type { DialectTypes } from '../../src/store/dialect-types.js';
import { POSTGRES_TYPES } from '../../src/store/postgres/open-postgres.js';
import { SQLITE_TYPES } from '../../src/store/sqlite/open-sqlite.js';
import { freshDatabase, testDialect } from '../support/databases.js';

/**
 * A delivery worker's exchange commits without waiting for the disk; every other
 * transaction on the same connection, intake's group commits first, still waits for it.
 * On SQLite the level is the connection's, so the test holds an exchange open while an
 * "intake commit" queues for the connection, and reads the level each one ran at.
 */

const dialect = testDialect();
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** One connection, so what a worker transaction sets could only leak to the next one. */
async function oneConnection(): Promise<{ db: Kysely<unknown>; types: DialectTypes; level(db: Kysely<unknown>): Promise<string> }> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'intake-worker-'));
    const file = new Database(join(dir, 'intake.db'));
    file.pragma('journal_mode = WAL');
    file.pragma('synchronous = FULL');
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: file }) });
    cleanups.push(async () => {
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    });
    const names: Record<number, string> = { 0: 'OFF', 1: 'NORMAL', 2: 'FULL', 3: 'EXTRA' };
    return {
      db,
      types: SQLITE_TYPES,
      level: async (on) => names[(await sql<{ synchronous: number }>`pragma synchronous`.execute(on)).rows[0]!.synchronous]!,
    };
  }
  const database = await freshDatabase({ migrate: false });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.databaseUrl, max: 1 }) }) });
  cleanups.push(async () => {
    await db.destroy();
    await database.cleanup();
  });
  return {
    db,
    types: POSTGRES_TYPES,
    level: async (on) => (await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(on)).rows[0]!.synchronous_commit,
  };
}

test(`${dialect}: an exchange commits without waiting for the disk; an intake commit queued behind it waits as before`, async () => {
  const { db, types, level } = await oneConnection();
  const durable = dialect === 'sqlite' ? 'FULL' : 'on';
  const deferred = dialect === 'sqlite' ? 'NORMAL' : 'off';

  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let entered!: () => void;
  const inside = new Promise<void>((resolve) => (entered = resolve));
  const exchange = types.workerTransaction(db, async (trx) => {
    entered();
    const seen = await level(trx);
    await held;
    return seen;
  });
  await inside;
  // The group commit asks for the connection while the exchange holds it.
  const intakeCommit = db.transaction().execute((trx) => level(trx));
  await new Promise((resolve) => setTimeout(resolve, 20));
  release();
  expect(await exchange).toBe(deferred);
  expect(await intakeCommit).toBe(durable);

  // A failed exchange restores the level too.
  await expect(types.workerTransaction(db, async () => Promise.reject(new Error('lost')))).rejects.toThrow('lost');
  expect(await db.transaction().execute((trx) => level(trx))).toBe(durable);
});
