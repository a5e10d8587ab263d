import { sql, type Kysely } from 'kysely';

const DAY_MS = 24 * 60 * 60 * 1000;
/** Partitions exist this many days ahead, so a late maintenance run never leaves a gap. */
const DAYS_AHEAD = 3;
/** The time-series tables, partitioned by received_at (ms) into one partition per UTC day. */
export const TIME_SERIES_TABLES = ['webhooks', 'request_log'] as const;
/**
 * Held while a node changes partitions, so nodes take turns instead of racing. Keyed by
 * schema, so deployments sharing a database (in separate schemas) do not wait on each other.
 */
const PARTITION_LOCK_KEY = sql`hashtext(current_schema() || '.intake_partitions')`;
/** DDL on a partitioned table waits for its readers; past this it gives up until next run. */
const LOCK_TIMEOUT = '2s';

/** `webhooks_p20261122`: the partition of one UTC day. */
function partitionName(table: string, dayStart: number): string {
  return `${table}_p${new Date(dayStart).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

function dayOfPartition(table: string, name: string): number | undefined {
  const match = new RegExp(`^${table}_p(\\d{4})(\\d{2})(\\d{2})$`).exec(name);
  return match ? Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) : undefined;
}

/**
 * Runs `change` on one connection while holding the partition lock, with a lock timeout so
 * DDL never queues intake behind a long read. Returns undefined when another node holds
 * the lock: it is doing the same work.
 */
async function withPartitionLock<T>(db: Kysely<unknown>, change: (db: Kysely<unknown>) => Promise<T>): Promise<T | undefined> {
  return db.connection().execute(async (connection) => {
    const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${PARTITION_LOCK_KEY}) as locked`.execute(
      connection,
    );
    if (!rows[0]?.locked) return undefined;
    try {
      await sql`set lock_timeout = ${sql.lit(LOCK_TIMEOUT)}`.execute(connection);
      return await change(connection);
    } finally {
      await sql`reset lock_timeout`.execute(connection);
      await sql`select pg_advisory_unlock(${PARTITION_LOCK_KEY})`.execute(connection);
    }
  });
}

/**
 * Creates the day partitions from yesterday to DAYS_AHEAD days ahead that are missing.
 * A day whose rows already sit in the default partition (the clock jumped, or the
 * database was restored) is left there: correct, only not droppable as a whole.
 */
export async function ensurePartitions(db: Kysely<unknown>, now: number): Promise<string[]> {
  const created: string[] = [];
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  await withPartitionLock(db, async (connection) => {
    for (const table of TIME_SERIES_TABLES) {
      const existing = new Set(await partitionsOf(connection, table));
      for (let day = today - DAY_MS; day <= today + DAYS_AHEAD * DAY_MS; day += DAY_MS) {
        const name = partitionName(table, day);
        if (existing.has(name)) continue;
        try {
          await sql`create table ${sql.id(name)} partition of ${sql.id(table)}
            for values from (${sql.lit(day)}) to (${sql.lit(day + DAY_MS)})`.execute(connection);
          created.push(name);
        } catch (error) {
          // 23514: rows of that day are in the default partition already; 42P07: another
          // process made it a moment ago; 55P03: readers held the table past the timeout.
          if (!['23514', '42P07', '55P03'].includes(errorCode(error))) throw error;
        }
      }
    }
  });
  return created;
}

/** Drops the day partitions that end at or before `cutoff`; their rows are past every retention. */
export async function dropPartitionsBefore(db: Kysely<unknown>, cutoff: number): Promise<string[]> {
  const dropped: string[] = [];
  await withPartitionLock(db, async (connection) => {
    for (const table of TIME_SERIES_TABLES) {
      for (const name of await partitionsOf(connection, table)) {
        const day = dayOfPartition(table, name);
        if (day === undefined || day + DAY_MS > cutoff) continue;
        try {
          await sql`drop table if exists ${sql.id(name)}`.execute(connection);
          dropped.push(name);
        } catch (error) {
          // 55P03: readers held the table past the timeout; the next run drops it.
          if (errorCode(error) !== '55P03') throw error;
        }
      }
    }
  });
  return dropped;
}

/** The partitions of `table` in the current schema, by name. */
export async function partitionsOf(db: Kysely<unknown>, table: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    select child.relname as name
    from pg_inherits
    join pg_class child on child.oid = pg_inherits.inhrelid
    where pg_inherits.inhparent = to_regclass(${table})
    order by child.relname`.execute(db);
  return rows.map((row) => row.name);
}

function errorCode(error: unknown): string {
  return String((error as { code?: unknown }).code ?? '');
}
