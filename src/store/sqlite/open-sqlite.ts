import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, SqliteDialect, SqliteDriver, sql, type DatabaseConnection, type Driver } from 'kysely';
import type { Database } from '../schema.js';
import { KyselyStore } from '../kysely-store.js';
import type { DialectTypes } from '../migrations/index.js';
import { queryLog, type QueryObserver } from '../query-log.js';
import type { CommitOutcome, KeyUsage, PendingWebhook, PurgeReport, RequestLogEntry } from '../store.js';
import { SqliteCommitThread } from './commit-thread.js';

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

export interface SqliteStoreOptions {
  onQuery?: QueryObserver;
  /** Commit intake batches on a worker thread (the server; see SqliteCommitThread). */
  commitThread?: boolean;
}

/**
 * Opens the embedded store. WAL lets readers (the CLI, list queries) run beside the
 * writer; synchronous=FULL makes every commit reach the disk before the 202 is sent.
 * busy_timeout lets the server, its commit thread and the CLI wait for each other instead
 * of failing.
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): KyselyStore {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const database = new SQLite(path);
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = FULL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  const db = new Kysely<Database>({ dialect: new IntakeSqliteDialect(database), log: queryLog(options.onQuery) });
  // A second connection to an in-memory database would be another database.
  if (options.commitThread && path !== ':memory:') return new ThreadedSqliteStore(db, new SqliteCommitThread(path));
  return new KyselyStore('sqlite', db, SQLITE_TYPES);
}

/** The embedded store with intake's writes (commits, last use, retention) on a thread of their own. */
class ThreadedSqliteStore extends KyselyStore {
  constructor(
    db: Kysely<Database>,
    private readonly commitThread: SqliteCommitThread,
  ) {
    super('sqlite', db, SQLITE_TYPES);
  }

  /** The thread starts once the schema exists, so it is ready before the first webhook. */
  override async migrate(): Promise<string[]> {
    const applied = await super.migrate();
    await this.commitThread.ping();
    return applied;
  }

  /** Readiness covers both connections: webhooks are written on the thread's. */
  override async ping(): Promise<void> {
    await super.ping();
    await this.commitThread.ping();
  }

  override commitBatch(webhooks: PendingWebhook[], logs: RequestLogEntry[]): Promise<CommitOutcome[]> {
    return this.commitThread.commitBatch(webhooks, logs);
  }

  override recordKeyUsage(usages: KeyUsage[]): Promise<void> {
    return this.commitThread.recordKeyUsage(usages);
  }

  override purgeExpired(now: number): Promise<PurgeReport> {
    return this.commitThread.purgeExpired(now);
  }

  override async close(): Promise<void> {
    await this.commitThread.close();
    await super.close();
  }
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
