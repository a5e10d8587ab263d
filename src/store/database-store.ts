/** The database as a whole: its schema, whether it answers, its connections and threads, and retention across companies. */
export interface DatabaseStore {
  readonly dialect: 'sqlite' | 'postgres';

  /** Applies pending migrations; returns the names applied now. */
  migrate(): Promise<string[]>;
  /** Resolves when the database answers a query. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /** The connection pool's state now (for /metrics); undefined where there is none (SQLite). */
  connectionPool(): ConnectionPoolState | undefined;
  /** Seconds each thread of the store's own has been busy (for /metrics): SQLite's commit and read threads; none on PostgreSQL. */
  threadsBusySeconds(): StoreThreadBusy[];

  /**
   * Retention: deletes webhooks and request-log rows older than their company's retention
   * (or their integration's, when shorter), in small batches, and idempotency claims past
   * their window. Safe to run on several
   * nodes at once (each delete finds what the others left).
   */
  purgeExpired(now: number): Promise<PurgeReport>;

  /**
   * After an erasure: on SQLite, the WAL checkpointed into the database file and truncated,
   * so no copy of an erased page is left in it (secure_delete, set on every connection, has
   * already zeroed the freed space); false while a reader kept it from truncating (try again).
   * Nothing to do on PostgreSQL (true): the live table no longer holds the values.
   */
  checkpointAfterErasure(): Promise<boolean>;
}

export interface ConnectionPoolState {
  /** Connections open, idle or in use. */
  total: number;
  idle: number;
  /** Queries waiting for a connection. */
  waiting: number;
  /** The most connections the pool opens (INTAKE_DATABASE_POOL_SIZE). */
  max: number;
}

/** A thread of the store and the seconds it has been busy, as a counter. */
export interface StoreThreadBusy {
  thread: 'sqlite_commit' | 'sqlite_read';
  seconds: number;
}

export interface PurgeReport {
  webhooks: number;
  requestLog: number;
  idempotencyKeys: number;
  /** Deliveries (with their attempts) past their company's retention, or with their integration's expired webhooks. */
  deliveries: number;
  /** Whole time partitions dropped (PostgreSQL), by table name. */
  partitionsDropped: string[];
}
