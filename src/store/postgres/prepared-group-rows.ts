import { CompiledQuery, type Kysely, type PostgresPool, type PostgresPoolClient } from 'kysely';
import type pg from 'pg';
import { GROUP_ROW_COLUMNS, valuesIn, type GroupRowTable, type GroupRowWriter } from '../group-rows.js';
import type { Database } from '../schema.js';

/**
 * A group's rows on PostgreSQL (webhooks, request log, outbox, attempts) through named prepared
 * statements: PostgreSQL parses and plans each INSERT text once per connection instead of
 * at every commit.
 *
 * Why: a multi-row INSERT is new SQL for every group size, which an unnamed statement makes
 * the server parse and plan again each time. The bench's PostgreSQL floor, run with and
 * without naming its statements (3 alternating pairs, 7 KB bodies, 64 connections), spent
 * 79–83 against 111–121 µs of the server's CPU a webhook and 81–90 against 96–100 µs of its
 * own (docs/performance-history.md).
 *
 * A prepared statement holds server memory on every connection that used it (64 INSERTs of
 * 1 to 64 rows: 6.5 MB a connection), so a group goes in chunks of at most CHUNK rows,
 * each padded with rows of nulls up to the next of a few sizes; the padding is filtered out
 * by the statement (`where` its first column, never null in a real row, `is not null`).
 * Each table has then four texts: 8, 16, 32 and 64 rows.
 */

const CHUNK = 64;
const SIZES = [8, 16, 32, 64] as const;

/**
 * The type each parameter is cast to, where it is not text: a SELECT over VALUES infers
 * none from the table it inserts into.
 */
const NOT_TEXT: Record<GroupRowTable, Record<string, 'bigint' | 'integer' | 'real' | 'bytea'>> = {
  webhooks: { received_at: 'bigint', raw_body: 'bytea', duration_ms: 'real' },
  request_log: { received_at: 'bigint', status: 'integer', size_bytes: 'integer', duration_ms: 'real' },
  deliveries: { webhook_received_at: 'bigint', next_attempt_at: 'bigint', created_at: 'bigint', updated_at: 'bigint' },
  delivery_attempts: { series: 'integer', number: 'integer', attempted_at: 'bigint', duration_ms: 'integer', status: 'integer', next_attempt_at: 'bigint' },
};

/** The statements this module names, by their text: what withNamedStatements looks up. */
const NAMES = new Map<string, string>();
/** Each text by its name, written once. */
const TEXTS = new Map<string, string>();

/** The text of a padded INSERT of `size` rows into `table`, named. */
function insertText(table: GroupRowTable, size: number): string {
  const name = `intake_${table}_${size}`;
  let text = TEXTS.get(name);
  if (text === undefined) {
    text = writeInsert(table, size);
    TEXTS.set(name, text);
    NAMES.set(text, name);
  }
  return text;
}

function writeInsert(table: GroupRowTable, size: number): string {
  const columns = GROUP_ROW_COLUMNS[table];
  const names = columns.join(', ');
  const casts = columns.map((column) => NOT_TEXT[table][column] ?? 'text');
  const tuples = Array.from(
    { length: size },
    (_, row) => `(${casts.map((type, column) => `$${row * columns.length + column + 1}::${type}`).join(', ')})`,
  );
  return `insert into ${table} (${names}) select ${names} from (values ${tuples.join(', ')}) as v (${names}) where v.${columns[0]} is not null`;
}

/** Writes `rows` into `table` in chunks of CHUNK, each padded with null rows to one of SIZES. */
function insertRows(table: GroupRowTable) {
  const columns = GROUP_ROW_COLUMNS[table];
  return async (trx: Kysely<Database>, rows: readonly object[]): Promise<void> => {
    for (let start = 0; start < rows.length; start += CHUNK) {
      const chunk = rows.slice(start, start + CHUNK);
      const size = SIZES.find((candidate) => candidate >= chunk.length)!;
      const parameters = chunk.flatMap((row) => valuesIn(columns, row));
      parameters.length = size * columns.length;
      parameters.fill(null, chunk.length * columns.length);
      await trx.executeQuery(CompiledQuery.raw(insertText(table, size), parameters));
    }
  };
}

export const postgresGroupRows: GroupRowWriter = {
  insertWebhooks: insertRows('webhooks'),
  insertRequestLogs: insertRows('request_log'),
  insertDeliveries: insertRows('deliveries'),
  insertAttempts: insertRows('delivery_attempts'),
};

/**
 * The pool as Kysely sees it, its clients sending the texts this module wrote as named
 * statements (pg parses a name once per connection, then only binds and executes it);
 * every other query goes as it did, unnamed.
 */
export function withNamedStatements(pool: pg.Pool): PostgresPool {
  // One wrapper a client: Kysely keeps its connection object per client it is handed.
  const wrapped = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => ({
    query: ((text: unknown, values?: unknown[]) => {
      const name = typeof text === 'string' ? NAMES.get(text) : undefined;
      if (name === undefined) return (client.query as (...args: unknown[]) => unknown)(text, values);
      return client.query({ name, text: text as string, values });
    }) as PostgresPoolClient['query'],
    release: () => client.release(),
  });
  return {
    async connect() {
      const client = await pool.connect();
      let facade = wrapped.get(client);
      if (facade === undefined) {
        facade = wrap(client);
        wrapped.set(client, facade);
      }
      return facade;
    },
    end: () => pool.end(),
  };
}
