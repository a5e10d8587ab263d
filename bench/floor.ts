import { createServer, type ServerResponse } from 'node:http';
import Database from 'better-sqlite3';
import pg from 'pg';
import { v7 as uuidv7 } from 'uuid';

/*
 * The durable floor intake is measured against: the least a receiver must do to answer 202
 * only for what it has stored. Bare node:http reads the body and parses the JSON; requests
 * read while a commit is pending wait together and go in one transaction: a webhook row
 * (uuid, raw body, event, headers as JSON, received_at) and a request-log row (status,
 * received_at, the webhook's uuid) each, every table with one secondary index; each request
 * is answered 202 `{uuid, received_at}` (as intake answers) only after that transaction's
 * COMMIT. No authentication, no tenancy, no bounds, no metrics: what intake does beyond
 * this is what its ratio to the floor prices.
 *
 * FLOOR_DATABASE_URL picks the database: `sqlite:<path>` (better-sqlite3, WAL,
 * synchronous=FULL, prepared statements, on the event loop) or a PostgreSQL URL (one
 * connection, one multi-row INSERT per table per group). Its own process, like the service.
 */
const port = Number(process.env.PORT ?? 0);
const databaseUrl = process.env.FLOOR_DATABASE_URL ?? '';
/** Webhooks in one transaction at most, as intake's writer. */
const MAX_GROUP = 500;

interface Received {
  uuid: string;
  /** The path the request came to: intake's names the integration; the floor looks nothing up. */
  integrationId: string;
  event: string;
  rawBody: Buffer;
  headers: string;
  receivedAt: number;
  response: ServerResponse;
}

interface FloorStore {
  /** Writes one group in one transaction; returns once it has committed. */
  commit(group: Received[]): void | Promise<void>;
  close(): Promise<void>;
}

/**
 * Two tables, one secondary index each (intake's list query's: an integration's newest
 * first); only the types of ids and bytes differ between the databases.
 */
function schema(types: { uuid: string; binary: string; rowId: string }): string {
  return `
    create table webhooks (
      uuid ${types.uuid} primary key, integration_id text not null, event text not null,
      received_at bigint not null, raw_body ${types.binary} not null, headers text not null);
    create index webhooks_integration_time on webhooks (integration_id, received_at);
    create table request_log (
      id ${types.rowId}, integration_id text not null, received_at bigint not null,
      status integer not null, webhook_uuid ${types.uuid});
    create index request_log_integration_time on request_log (integration_id, received_at);`;
}

const WEBHOOK_COLUMNS = 'uuid, integration_id, event, received_at, raw_body, headers';
const webhookRow = (webhook: Received) => [
  webhook.uuid,
  webhook.integrationId,
  webhook.event,
  webhook.receivedAt,
  webhook.rawBody,
  webhook.headers,
];
const LOG_COLUMNS = 'integration_id, received_at, status, webhook_uuid';
const logRow = (webhook: Received) => [webhook.integrationId, webhook.receivedAt, 202, webhook.uuid];

function openSqlite(path: string): FloorStore {
  const database = new Database(path);
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = FULL');
  database.exec(schema({ uuid: 'text', binary: 'blob', rowId: 'integer primary key' }));
  const insertWebhook = database.prepare(`insert into webhooks (${WEBHOOK_COLUMNS}) values (?, ?, ?, ?, ?, ?)`);
  const insertLog = database.prepare(`insert into request_log (${LOG_COLUMNS}) values (?, ?, ?, ?)`);
  const commit = database.transaction((group: Received[]) => {
    for (const webhook of group) {
      insertWebhook.run(webhookRow(webhook));
      insertLog.run(logRow(webhook));
    }
  });
  return {
    commit: (group) => commit(group),
    async close() {
      database.close();
    },
  };
}

async function openPostgres(url: string): Promise<FloorStore> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(schema({ uuid: 'uuid', binary: 'bytea', rowId: 'bigint generated always as identity primary key' }));
  // Named per group size, so PostgreSQL plans each shape once.
  const insert = (table: string, columns: string, rows: unknown[][]) => {
    const width = rows[0]?.length ?? 0;
    const tuples = rows.map((_, row) => `(${Array.from({ length: width }, (_, column) => `$${row * width + column + 1}`).join(', ')})`);
    return client.query({
      name: `${table}_${rows.length}`,
      text: `insert into ${table} (${columns}) values ${tuples.join(', ')}`,
      values: rows.flat(),
    });
  };
  return {
    async commit(group) {
      await client.query('begin');
      try {
        await insert('webhooks', WEBHOOK_COLUMNS, group.map(webhookRow));
        await insert('request_log', LOG_COLUMNS, group.map(logRow));
        await client.query('commit');
      } catch (error) {
        await client.query('rollback');
        throw error;
      }
    },
    close: () => client.end(),
  };
}

const store = databaseUrl.startsWith('sqlite:') ? openSqlite(databaseUrl.slice('sqlite:'.length)) : await openPostgres(databaseUrl);
const waiting: Received[] = [];
let committing = false;
let scheduled = false;

/**
 * Commits the next group once this turn of the event loop has read what arrived (as
 * intake's writer, setImmediate: an idle server adds no delay), unless one is committing:
 * then it goes when that one has.
 */
function schedule(): void {
  if (scheduled || committing) return;
  scheduled = true;
  setImmediate(() => void commitNext());
}

async function commitNext(): Promise<void> {
  scheduled = false;
  const group = waiting.splice(0, MAX_GROUP);
  committing = true;
  let committed = true;
  try {
    await store.commit(group);
  } catch (error) {
    committed = false;
    process.stderr.write(`commit of ${group.length} failed: ${(error as Error).stack ?? error}\n`);
  }
  committing = false;
  for (const webhook of group) {
    if (!committed) {
      webhook.response.writeHead(503).end();
      continue;
    }
    const body = JSON.stringify({ uuid: webhook.uuid, received_at: new Date(webhook.receivedAt).toISOString() });
    webhook.response
      .writeHead(202, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
      .end(body);
  }
  if (waiting.length > 0) schedule();
}

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const rawBody = Buffer.concat(chunks);
    let event: unknown;
    try {
      event = (JSON.parse(rawBody.toString('utf8')) as { event?: unknown }).event;
    } catch {
      event = undefined;
    }
    if (typeof event !== 'string') {
      response.writeHead(400).end();
      return;
    }
    waiting.push({
      uuid: uuidv7(),
      integrationId: request.url ?? '/',
      event,
      rawBody,
      headers: JSON.stringify(request.headers),
      receivedAt: Date.now(),
      response,
    });
    schedule();
  });
});

server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => void store.close().then(() => process.exit(0))));
