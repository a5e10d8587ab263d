import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect, SqliteDriver, sql, type DatabaseConnection, type Driver } from 'kysely';
import type { Database } from '../schema.js';
import { KyselyStore } from '../kysely-store.js';
import type { DialectTypes } from '../migrations/index.js';
import { queryLog, type QueryObserver } from '../query-log.js';

const SQLITE_TYPES: DialectTypes = {
  binary: 'blob',
  addSerialPrimaryKey: (table, column) => table.addColumn(column, 'integer', (c) => c.primaryKey().autoIncrement()),
  // One file, purged by batched deletes: time needs no place in the key.
  addTimeSeriesKey: (table, _tableName, idColumn) => table.addColumn(idColumn, 'text', (c) => c.primaryKey()),
  afterTimeSeriesTable: async () => {},
  // Nothing to wake: other processes see auth_changes by polling it.
  notifyOnInsert: async () => {},
  // instr, not LIKE: SQLite's LIKE ignores ASCII case.
  binaryContainsText: (column, needle) => sql`instr(cast(${sql.ref(column)} as text), ${needle}) > 0`,
};

/**
 * Opens the embedded store. WAL lets readers (the CLI, list queries) run beside the
 * writer; synchronous=FULL makes every commit reach the disk before the 202 is sent.
 * busy_timeout lets the server and the CLI wait for each other instead of failing.
 */
export function openSqliteStore(path: string, onQuery?: QueryObserver): KyselyStore {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const database = new SQLite(path);
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = FULL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  const db = new Kysely<Database>({ dialect: new IntakeSqliteDialect(database), log: queryLog(onQuery) });
  return new KyselyStore('sqlite', db, SQLITE_TYPES);
}

/**
 * SQLite rolls a transaction back by itself on some errors (SQLITE_FULL and SQLITE_IOERR,
 * a full disk); Kysely's ROLLBACK would then fail with "no transaction is active", and that
 * error would replace the one saying what happened. Only a transaction still open is
 * rolled back.
 */
class IntakeSqliteDialect extends SqliteDialect {
  constructor(private readonly database: SQLite.Database) {
    super({ database });
  }

  override createDriver(): Driver {
    return new IntakeSqliteDriver(this.database);
  }
}

class IntakeSqliteDriver extends SqliteDriver {
  constructor(private readonly database: SQLite.Database) {
    super({ database });
  }

  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.database.inTransaction) await super.rollbackTransaction(connection);
  }
}
