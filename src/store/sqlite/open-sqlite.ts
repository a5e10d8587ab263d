import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, SqliteDialect, SqliteDriver, sql, type DatabaseConnection, type Driver } from 'kysely';
import type { Database } from '../schema.js';
import { KyselyStore } from '../kysely-store.js';
import type { DialectTypes } from '../migrations/index.js';
import { queryLog, type QueryObserver } from '../query-log.js';
import { sqliteFeed } from './feed.js';
import { preparedGroupRows } from './prepared-group-rows.js';
import { SqliteThread } from './store-thread.js';
import { ThreadedSqliteStore } from './threaded-store.js';

export const SQLITE_TYPES: DialectTypes = {
  binary: 'blob',
  addSerialPrimaryKey: (table, column) => table.addColumn(column, 'integer', (c) => c.primaryKey().autoIncrement()),
  // One file, purged by batched deletes: time needs no place in the key.
  addTimeSeriesKey: (table, _tableName, idColumn) => table.addColumn(idColumn, 'text', (c) => c.primaryKey()),
  afterTimeSeriesTable: async () => {},
  // Deleted and updated pages are reused in place; nothing to schedule.
  vacuumAsQueue: async () => {},
  vacuumNow: async () => {},
  // Nothing to wake: other processes see auth_changes by polling it.
  notifyOnInsert: async () => {},
  // instr, not LIKE: SQLite's LIKE ignores ASCII case.
  binaryContainsText: (column, needle) => sql`instr(cast(${sql.ref(column)} as text), ${needle}) > 0`,
  binaryLength: (column) => sql<number>`length(${sql.ref(column)})`,
  // One writer at a time: the transaction (begun IMMEDIATE) is the lock.
  lockSkippingLocked: (select) => select,
  lockForUpdate: (select) => select,
  // The level cannot change inside a transaction, and is the connection's: set and reset
  // while this one connection is held, so no intake commit can run at NORMAL between.
  workerTransaction: (db, body) =>
    db.connection().execute(async (connection) => {
      await sql`pragma synchronous = NORMAL`.execute(connection);
      try {
        return await connection.transaction().execute(body);
      } finally {
        await sql`pragma synchronous = FULL`.execute(connection);
      }
    }),
  ...sqliteFeed,
};

export interface SqliteStoreOptions {
  onQuery?: QueryObserver;
  /**
   * Run intake's writes and the API's heavy reads on worker threads of their own (the
   * server; see SqliteThread and THREAD_METHODS).
   */
  threads?: boolean;
  /** A connection that refuses to write (`query_only`): the read thread's. */
  readOnly?: boolean;
}

/**
 * Opens the embedded store. WAL lets readers (the read thread, the CLI) run beside the
 * writer; synchronous=FULL makes every commit reach the disk before the 202 is sent.
 * busy_timeout lets the server, its threads and the CLI wait for each other instead of
 * failing. secure_delete zeroes what is deleted or overwritten.
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): KyselyStore {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const database = new SQLite(path);
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = FULL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  // Freed space is zeroed, so a value an erasure removed is not left in a page's free space
  // or on the freelist (issue 40; docs/personal-data.md).
  database.pragma('secure_delete = ON');
  if (options.readOnly) database.pragma('query_only = ON');
  const db = new Kysely<Database>({ dialect: new IntakeSqliteDialect(database), log: queryLog(options.onQuery) });
  // A second connection to an in-memory database would be another database.
  const groupRows = preparedGroupRows(database);
  if (options.threads && path !== ':memory:') {
    return new ThreadedSqliteStore(db, SQLITE_TYPES, groupRows, new SqliteThread(path, 'commit'), new SqliteThread(path, 'read'));
  }
  return new KyselyStore('sqlite', db, SQLITE_TYPES, groupRows);
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
    super({ database: withStatementCache(database) });
  }

  /**
   * IMMEDIATE takes the write lock at BEGIN, waiting for it on busy_timeout. A deferred
   * transaction that read before its first write would fail at once (SQLITE_BUSY_SNAPSHOT)
   * if another connection (the commit thread, the CLI) committed in between: waiting cannot
   * help it. Today every transaction here writes first; this keeps a new one from
   * failing under load only.
   */
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.database.inTransaction) await super.rollbackTransaction(connection);
  }
}

/** Statements kept per connection at most; the least recently used one goes first. */
const MAX_CACHED_STATEMENTS = 500;

/**
 * The connection as Kysely's SQLite driver sees it, with its statements kept: the driver
 * prepares every query anew, and a profile of the commit thread under load (intake with a
 * destination) showed `prepare` at 8 % of its busy time, for the same few texts each
 * round. A statement SQLite has to recompile after a schema change does so by itself; one
 * still being iterated (`busy`) is not shared, a fresh one is prepared for the caller.
 */
export function withStatementCache(database: SQLite.Database): SQLite.Database {
  const statements = new Map<string, SQLite.Statement>();
  const prepare = (source: string): SQLite.Statement => {
    let statement = statements.get(source);
    if (statement !== undefined) {
      if (statement.busy) return database.prepare(source);
      statements.delete(source);
    } else {
      statement = database.prepare(source);
      if (statements.size >= MAX_CACHED_STATEMENTS) statements.delete(statements.keys().next().value!);
    }
    statements.set(source, statement);
    return statement;
  };
  return new Proxy(database, {
    get: (target, property) => (property === 'prepare' ? prepare : Reflect.get(target, property, target)),
  });
}
