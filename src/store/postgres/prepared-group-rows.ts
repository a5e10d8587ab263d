import { CompiledQuery, type Kysely, type PostgresPool, type PostgresPoolClient } from 'kysely';
import type pg from 'pg';
import type { AttemptRow, GroupRowWriter, NewDeliveryRow, RequestLogRow, WebhookRow } from '../group-rows.js';
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
 * own (docs/performance.md).
 *
 * A prepared statement holds server memory on every connection that used it (64 INSERTs of
 * 1 to 64 rows: 6.5 MB a connection), so a group goes in chunks of at most CHUNK rows,
 * each padded with rows of nulls up to the next of a few sizes; the padding is filtered out
 * by the statement (`where` its first column, never null in a real row, `is not null`).
 * Each table has then four texts: 8, 16, 32 and 64 rows.
 */

const CHUNK = 64;
const SIZES = [8, 16, 32, 64] as const;

/** A column and the type its parameter is cast to (a SELECT over VALUES infers none from the table). */
type Column = readonly [name: string, type: 'text' | 'bigint' | 'integer' | 'real' | 'bytea'];

/** The columns a commit writes; the rest take their defaults (the feed position among them). */
const WEBHOOK_COLUMNS: readonly Column[] = [
  ['uuid', 'text'],
  ['company_id', 'text'],
  ['integration_id', 'text'],
  ['event', 'text'],
  ['received_at', 'bigint'],
  ['raw_body', 'bytea'],
  ['headers', 'text'],
  ['source_ip', 'text'],
  ['key_id', 'text'],
  ['idempotency_key', 'text'],
  ['payload_format', 'text'],
];
const REQUEST_LOG_COLUMNS: readonly Column[] = [
  ['id', 'text'],
  ['company_id', 'text'],
  ['integration_id', 'text'],
  ['received_at', 'bigint'],
  ['method', 'text'],
  ['status', 'integer'],
  ['error_code', 'text'],
  ['key_id', 'text'],
  ['ip', 'text'],
  ['user_agent', 'text'],
  ['size_bytes', 'integer'],
  ['duration_ms', 'real'],
  ['webhook_uuid', 'text'],
  ['error_detail', 'text'],
];
const DELIVERY_COLUMNS: readonly Column[] = [
  ['id', 'text'],
  ['company_id', 'text'],
  ['destination_id', 'text'],
  ['webhook_uuid', 'text'],
  ['webhook_received_at', 'bigint'],
  ['integration_id', 'text'],
  ['event', 'text'],
  ['state', 'text'],
  ['next_attempt_at', 'bigint'],
  ['created_at', 'bigint'],
  ['updated_at', 'bigint'],
];

const ATTEMPT_COLUMNS: readonly Column[] = [
  ['id', 'text'],
  ['company_id', 'text'],
  ['delivery_id', 'text'],
  ['destination_id', 'text'],
  ['series', 'integer'],
  ['number', 'integer'],
  ['attempted_at', 'bigint'],
  ['duration_ms', 'integer'],
  ['status', 'integer'],
  ['error', 'text'],
  ['response_excerpt', 'text'],
  ['next_attempt_at', 'bigint'],
];

/** The statements this module names, by their text: what withNamedStatements looks up. */
const NAMES = new Map<string, string>();
/** Each text by its name, written once. */
const TEXTS = new Map<string, string>();

/** The text of a padded INSERT of `size` rows into `table`, named. */
function insertText(table: string, columns: readonly Column[], size: number): string {
  const name = `intake_${table}_${size}`;
  let text = TEXTS.get(name);
  if (text === undefined) {
    text = writeInsert(table, columns, size);
    TEXTS.set(name, text);
    NAMES.set(text, name);
  }
  return text;
}

function writeInsert(table: string, columns: readonly Column[], size: number): string {
  const names = columns.map(([name]) => name).join(', ');
  const width = columns.length;
  const tuples = Array.from(
    { length: size },
    (_, row) => `(${columns.map(([, type], column) => `$${row * width + column + 1}::${type}`).join(', ')})`,
  );
  return `insert into ${table} (${names}) select ${names} from (values ${tuples.join(', ')}) as v (${names}) where v.${columns[0]![0]} is not null`;
}

function paddedSize(rows: number): number {
  return SIZES.find((size) => size >= rows) ?? CHUNK;
}

async function insertRows<R>(
  trx: Kysely<Database>,
  table: string,
  columns: readonly Column[],
  rows: readonly R[],
  valuesOf: (row: R) => unknown[],
): Promise<void> {
  for (let start = 0; start < rows.length; start += CHUNK) {
    const chunk = rows.slice(start, start + CHUNK);
    const size = paddedSize(chunk.length);
    const parameters: unknown[] = chunk.flatMap(valuesOf);
    parameters.length = size * columns.length;
    parameters.fill(null, chunk.length * columns.length);
    await trx.executeQuery(CompiledQuery.raw(insertText(table, columns, size), parameters));
  }
}

export const postgresGroupRows: GroupRowWriter = {
  insertWebhooks: (trx, rows: WebhookRow[]) =>
    insertRows(trx, 'webhooks', WEBHOOK_COLUMNS, rows, (r) => [
      r.uuid, r.company_id, r.integration_id, r.event, r.received_at, r.raw_body, r.headers, r.source_ip, r.key_id,
      r.idempotency_key ?? null, r.payload_format ?? 'envelope',
    ]),
  insertRequestLogs: (trx, rows: RequestLogRow[]) =>
    insertRows(trx, 'request_log', REQUEST_LOG_COLUMNS, rows, (r) => [
      r.id, r.company_id, r.integration_id, r.received_at, r.method, r.status, r.error_code ?? null, r.key_id ?? null, r.ip,
      r.user_agent ?? null, r.size_bytes, r.duration_ms, r.webhook_uuid ?? null, r.error_detail ?? null,
    ]),
  insertDeliveries: (trx, rows: NewDeliveryRow[]) =>
    insertRows(trx, 'deliveries', DELIVERY_COLUMNS, rows, (r) => [
      r.id, r.company_id, r.destination_id, r.webhook_uuid, r.webhook_received_at, r.integration_id, r.event, r.state,
      r.next_attempt_at ?? null, r.created_at, r.updated_at,
    ]),
  insertAttempts: (trx, rows: AttemptRow[]) =>
    insertRows(trx, 'delivery_attempts', ATTEMPT_COLUMNS, rows, (r) => [
      r.id, r.company_id, r.delivery_id, r.destination_id, r.series, r.number, r.attempted_at, r.duration_ms, r.status ?? null,
      r.error ?? null, r.response_excerpt ?? null, r.next_attempt_at ?? null,
    ]),
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
