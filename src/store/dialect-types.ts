import type { CreateTableBuilder, Kysely, RawBuilder, SelectQueryBuilder, SqlBool } from 'kysely';
import type { FeedCursor, FeedStart } from './destination-types.js';

/**
 * What differs between dialects in a table definition (and in the one query that needs
 * it); each store supplies its own, so a migration or a query is written once and reads
 * the same for every database.
 */
export interface DialectTypes {
  binary: 'blob' | 'bytea';
  addSerialPrimaryKey<T extends string>(table: CreateTableBuilder<T>, column: string): CreateTableBuilder<T>;
  /**
   * The key column of a table that grows with traffic and is purged by age (webhooks, the
   * request log). SQLite keys it by `idColumn` alone; PostgreSQL partitions it by
   * `timeColumn`, which must then be part of the primary key.
   */
  addTimeSeriesKey<T extends string>(
    table: CreateTableBuilder<T>,
    tableName: string,
    idColumn: string,
    timeColumn: string,
  ): CreateTableBuilder<T>;
  /** Runs after a time-series table exists (PostgreSQL adds its default partition). */
  afterTimeSeriesTable(db: Kysely<unknown>, tableName: string): Promise<void>;
  /**
   * Has a table whose rows are updated as work moves through it vacuumed soon and at full
   * speed (PostgreSQL's per-table autovacuum settings; SQLite has no vacuum to tune).
   */
  vacuumAsQueue(db: Kysely<unknown>, tableName: string): Promise<void>;
  /** Vacuums the table now, unless another session is (PostgreSQL); nothing on SQLite. */
  vacuumNow(db: Kysely<any>, tableName: string): Promise<void>;
  /** Makes every insert into `tableName` wake listeners on `channel` (PostgreSQL NOTIFY). */
  notifyOnInsert(db: Kysely<unknown>, tableName: string, channel: string): Promise<void>;
  /**
   * Whether the UTF-8 text of the binary `column` contains `needle` exactly (case and
   * all; `%` and `_` are plain characters): the payload search of the management API.
   */
  binaryContainsText(column: string, needle: string): RawBuilder<SqlBool>;
  /**
   * The size in bytes of the binary `column`, without reading its bytes: SQLite's
   * `length(blob)` reads the record header, PostgreSQL's `octet_length(bytea)` the TOAST
   * pointer. What lets a page of webhooks stop at a byte budget before loading bodies.
   */
  binaryLength(column: string): RawBuilder<number>;
  /**
   * Rows a delivery worker takes: PostgreSQL locks them and skips rows another node holds
   * (`FOR UPDATE OF <table> SKIP LOCKED`), so nodes claim at once without taking the same
   * row or waiting for each other; SQLite has one writer, whose transaction is the lock.
   */
  lockSkippingLocked<S extends SelectQueryBuilder<any, any, any>>(select: S, table: string): S;
  /**
   * A delivery worker's transaction (an exchange: results and claims), committed without
   * waiting for the disk: SQLite's `synchronous = NORMAL` for it alone, PostgreSQL's
   * `synchronous_commit = off` (SET LOCAL). A crash of the machine can lose the last of
   * these, never half of one, and never one that an intake commit after it made durable
   * (the log is flushed in order). What a lost exchange costs is an attempt made again: a
   * lost claim leaves its deliveries due, a lost result leaves them leased until the lease
   * ends. At least once holds; intake's commits still wait for the disk before every 202.
   */
  workerTransaction<DB, T>(db: Kysely<DB>, body: (trx: Kysely<DB>) => Promise<T>): Promise<T>;
  /** Rows a transaction changes after reading them (`FOR UPDATE` on PostgreSQL; SQLite's writer holds the database). */
  lockForUpdate<S extends SelectQueryBuilder<any, any, any>>(select: S): S;
  /**
   * Adds the feed's position to `webhooks` (migration 0007): SQLite a `feed_seq` that
   * commitBatch assigns from one counter row (its single writer commits in that order);
   * PostgreSQL the id of the inserting transaction (`feed_xid`, xid8) and a sequence number
   * within it, both set by column defaults.
   */
  addFeedPosition(db: Kysely<unknown>): Promise<void>;
  /**
   * The first of `count` consecutive feed positions for a commit's webhooks, reserved in its
   * transaction; null where the database sets them itself (PostgreSQL).
   */
  reserveFeedSeqs(db: Kysely<any>, count: number): Promise<number | null>;
  /**
   * The heads (uuid, time, body size, position) of the company's webhooks after `after`,
   * oldest first; with `withHeaders`, the size counts the stored headers' bytes too.
   * PostgreSQL returns only rows of transactions older than every one still running
   * (`pg_snapshot_xmin`): a transaction that began earlier but commits later can then never
   * land behind a reader's position.
   */
  feedHeads(
    db: Kysely<any>,
    companyId: string,
    query: { after: FeedCursor | null; limit: number; withHeaders?: boolean },
  ): Promise<Array<{ uuid: string; receivedAt: number; sizeBytes: number; position: FeedCursor }>>;
  /** The position a reader without a cursor starts after (see FeedStart). */
  feedStart(db: Kysely<any>, companyId: string, start: FeedStart): Promise<FeedCursor>;
}

/** The channel a node listens on to hear that a key or an integration changed. */
export const AUTH_CHANGES_CHANNEL = 'intake_auth_changes';
