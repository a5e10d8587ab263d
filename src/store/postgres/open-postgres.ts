import { Kysely, sql } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import { KyselyStore } from '../kysely-store.js';
import { AUTH_CHANGES_CHANNEL, type DialectTypes } from '../migrations/index.js';
import type { Database } from '../schema.js';
import { queryLog, type QueryObserver } from '../query-log.js';
import type { ConnectionPoolState, PurgeReport } from '../store.js';
import { AuthChangeListener } from './auth-listener.js';
import { IntakePostgresDialect } from './introspector.js';
import { postgresGroupRows, withNamedStatements } from './prepared-group-rows.js';
import { postgresFeed } from './feed.js';
import { dropPartitionsBefore, ensurePartitions } from './partitions.js';

export const POSTGRES_TYPES: DialectTypes = {
  binary: 'bytea',
  addSerialPrimaryKey: (table, column) => table.addColumn(column, 'bigserial', (c) => c.primaryKey()),
  // A partitioned table's primary key must hold the partition column.
  addTimeSeriesKey: (table, tableName, idColumn, timeColumn) =>
    table
      .addColumn(idColumn, 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint(`${tableName}_pkey`, [idColumn, timeColumn] as never)
      .modifyEnd(sql`partition by range (${sql.ref(timeColumn)})`),
  // Rows outside every day partition (a clock far off) land here instead of failing.
  afterTimeSeriesTable: async (db, tableName) => {
    await sql`create table ${sql.id(`${tableName}_default`)} partition of ${sql.id(tableName)} default`.execute(db);
  },
  // Vacuumed once 1 % of the rows (and at least 1,000) are dead, without the cost-based
  // pauses: what queue tables are given, since every read of the work to do walks the dead
  // index entries of rows already done until vacuum removes them.
  vacuumAsQueue: async (db, tableName) => {
    await sql`alter table ${sql.id(tableName)} set (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02)`.execute(db);
  },
  // Outside any transaction (VACUUM cannot run in one), on a connection of the pool.
  vacuumNow: async (db, tableName) => {
    await sql`vacuum (skip_locked) ${sql.id(tableName)}`.execute(db);
  },
  // A trigger, so every writer (this server, another node, the CLI, a hand-written fix)
  // wakes the listeners; NOTIFY is delivered when the transaction commits.
  notifyOnInsert: async (db, tableName, channel) => {
    const fn = `${tableName}_notify`;
    await sql`create function ${sql.id(fn)}() returns trigger language plpgsql as $$
      begin perform pg_notify(${sql.lit(channel)}, ''); return null; end $$`.execute(db);
    await sql`create trigger ${sql.id(fn)} after insert on ${sql.id(tableName)}
      for each statement execute function ${sql.id(fn)}()`.execute(db);
  },
  // A bytea cast to text is its hex escape; convert_from decodes it (intake refused any
  // body that is not valid UTF-8).
  binaryContainsText: (column, needle) => sql`strpos(convert_from(${sql.ref(column)}, 'UTF8'), ${needle}) > 0`,
  binaryLength: (column) => sql<number>`octet_length(${sql.ref(column)})`,
  lockSkippingLocked: (select, table) => select.forUpdate(table).skipLocked() as typeof select,
  lockForUpdate: (select) => select.forUpdate() as typeof select,
  workerTransaction: (db, body) =>
    db.transaction().execute(async (trx) => {
      await sql`set local synchronous_commit = off`.execute(trx);
      return body(trx);
    }),
  ...postgresFeed,
};

export interface PostgresOptions {
  /** Connections in the pool at most. */
  poolSize: number;
  log?: Logger;
  onQuery?: QueryObserver;
}

/**
 * The store on PostgreSQL, shared by several nodes. Times and counts come back as bigint;
 * they are whole milliseconds far below 2^53, so they are read as numbers. Every commit
 * waits for the WAL flush (synchronous_commit=on) before a webhook is acknowledged.
 */
export function openPostgresStore(url: string, options: PostgresOptions): PostgresStore {
  const types = new pg.TypeOverrides();
  types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
  // A database that cannot be reached fails a connect within 5 s (pg waits forever by
  // default), so intake answers 503 instead of holding requests; keep-alive notices a
  // peer that vanished without closing the connection.
  const connection: pg.ClientConfig = {
    connectionString: url,
    application_name: 'intake',
    types,
    connectionTimeoutMillis: 5000,
    keepAlive: true,
  };
  const pool = new pg.Pool({ ...connection, max: options.poolSize, idleTimeoutMillis: 30_000 });
  const warn = (message: string) => (error: Error & { code?: string }) =>
    options.log?.warn({ error: error.message, code: error.code }, message);
  pool.on('connect', (client) => {
    // pg raises a backend's error on the client itself when no query is running to fail
    // with it, also on a checked-out client between two statements of a transaction, where
    // the pool has taken its own listener off. Unheard, that error ends the process; heard,
    // the next statement fails (503) and the pool drops the connection when it comes back.
    client.on('error', warn('a PostgreSQL connection failed'));
    // Queued before any query of ours on this connection (one query: pg warns about a
    // second one queued while the first runs). No JIT compilation: it pays off for long
    // analytical queries, and intake's are short and bounded. It fires on a plan's
    // estimated cost, not its real one: the delivery claim's estimate passed
    // jit_above_cost as the outbox grew, and from then on every claim spent 16 ms
    // compiling itself (EXPLAIN ANALYZE: 36 ms in all), and delivery fell behind intake.
    void client.query('set synchronous_commit = on; set jit = off').catch(() => {});
  });
  // A pooled connection that dies while idle (restart, terminated backend) is dropped and
  // replaced on next use; without this handler it would crash the process.
  pool.on('error', warn('a pooled PostgreSQL connection failed'));
  const db = new Kysely<Database>({ dialect: new IntakePostgresDialect({ pool: withNamedStatements(pool) }), log: queryLog(options.onQuery) });
  return new PostgresStore(db, new AuthChangeListener(connection, AUTH_CHANGES_CHANNEL, options.log), pool, options.poolSize);
}

export class PostgresStore extends KyselyStore {
  constructor(
    db: Kysely<Database>,
    private readonly listener: AuthChangeListener,
    private readonly pool: pg.Pool,
    private readonly poolSize: number,
  ) {
    super('postgres', db, POSTGRES_TYPES, postgresGroupRows);
  }

  override connectionPool(): ConnectionPoolState {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount, max: this.poolSize };
  }

  /** Migrates, then makes sure today's partitions exist before the first webhook. */
  override async migrate(): Promise<string[]> {
    const applied = await super.migrate();
    await ensurePartitions(this.db as Kysely<unknown>, Date.now());
    return applied;
  }

  override subscribeAuthChanges(listener: () => void): () => void {
    return this.listener.subscribe(listener);
  }

  /** Creates the coming days' partitions, then purges (dropping whole expired days first). */
  override async purgeExpired(now: number): Promise<PurgeReport> {
    await ensurePartitions(this.db as Kysely<unknown>, now);
    return super.purgeExpired(now);
  }

  override async close(): Promise<void> {
    await this.listener.stop();
    await super.close();
  }

  protected override async migrationTableSchema(): Promise<string> {
    // Kysely looks for its migration table in every schema unless told which one.
    const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(this.db);
    return rows[0]!.schema;
  }

  protected override async dropPartitionsBefore(cutoff: number): Promise<string[]> {
    return dropPartitionsBefore(this.db as Kysely<unknown>, cutoff);
  }
}
