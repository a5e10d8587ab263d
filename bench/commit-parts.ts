/*
 * `npm run bench:commit-parts`: where a webhook's commit spends its time on SQLite, without
 * HTTP (issue 16). Each variant commits the same webhooks (the bench's 7 KB `push` body
 * unless --body-bytes) in groups of 32 on a fresh file in WAL with synchronous=FULL, the
 * service's settings, and reports µs a webhook: the median of --repeats runs, variants
 * alternating so the machine's drift hits them all.
 *
 * - `store.commitBatch`: the service's own path (dist/'s KyselyStore, on this thread).
 * - `prepared, as the store`: the same statements and rows, prepared once with better-sqlite3:
 *   the difference is what building SQL through Kysely costs.
 * - `… without X`: the prepared variant with one part removed (an index, the feed position,
 *   the outbox's lookup), so each part's cost is the difference; `… with the request-log
 *   row of a 202` adds the row each accepted webhook wrote before migration 0010.
 * - `… synchronous=OFF`: no fsync; the difference is the disk's share.
 * - `floor schema`: the bench floor's two tables with one index each.
 *
 * Then the event loop's parts of a request, each alone: JSON.parse of the body, a uuid and an
 * id, and the structured clone of a group that posting it to the commit thread makes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';
import { median } from './closed-loop.js';
import { loadEventBody } from './event-body.js';

const { values: args } = parseArgs({
  options: {
    count: { type: 'string', default: '6400' },
    repeats: { type: 'string', default: '3' },
    'body-bytes': { type: 'string' },
  },
});
const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const dist = (path: string) => import(pathToFileURL(`${root}/dist/${path}`).href);
const { openStore } = await dist('store/open-store.js');
const { newId, newIntegrationKey, newTimeOrderedId, newWebhookUuid } = await dist('domain/ids.js');

const COUNT = Number(args.count);
const REPEATS = Number(args.repeats);
const GROUP = 32;
const BODY = args['body-bytes'] ? Buffer.from(JSON.stringify({ event: 'push', data: { pad: 'a'.repeat(Math.max(0, Number(args['body-bytes']) - 36)) } })) : loadEventBody().bytes;
const HEADERS = JSON.stringify({ 'content-type': 'application/json', 'user-agent': 'GitHub-Hookshot/044aadd', 'x-github-event': 'push' });

interface Tenant {
  companyId: string;
  integrationId: string;
}

/** A fresh SQLite file with the service's schema and one company and integration. */
async function freshDatabase(): Promise<{ path: string; tenant: Tenant; store: any; drop(): void }> {
  const dir = mkdtempSync(`${tmpdir()}/intake-commit-parts-`);
  const path = `${dir}/intake.db`;
  const store = openStore(`sqlite:${path}`, { poolSize: 1 });
  await store.migrate();
  const at = Date.now();
  const tenant = { companyId: newId('cmp'), integrationId: newId('int') };
  await store.createCompany({ id: tenant.companyId, name: 'parts', retentionDays: 30, createdAt: at });
  await store.createIntegration(
    tenant.companyId,
    { id: tenant.integrationId, companyId: tenant.companyId, integrationKey: newIntegrationKey(), name: 'parts', description: '', enabled: true, bodyLimitBytes: 1 << 20, rateLimitPerMinute: null, createdAt: at, updatedAt: at, source: { type: 'api_key', config: {} } },
    { id: newId('key'), integrationId: tenant.integrationId, scopes: ['webhooks:write'], prefix: 'bench', hash: newId('key'), createdAt: at, expiresAt: null },
  );
  return { path, tenant, store, drop: () => rmSync(dir, { recursive: true, force: true }) };
}

function pendingWebhook(tenant: Tenant) {
  const receivedAt = Date.now();
  return {
    uuid: newWebhookUuid(), companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: 'key_bench', event: 'push', receivedAt,
    rawBody: BODY, bodySha256: null, headers: HEADERS, sourceIp: '127.0.0.1', idempotencyKey: null, payloadFormat: 'envelope',
    log: { id: newTimeOrderedId('req', receivedAt), companyId: tenant.companyId, integrationId: tenant.integrationId, receivedAt, method: 'POST', keyId: 'key_bench', ip: '127.0.0.1', userAgent: 'GitHub-Hookshot/044aadd', sizeBytes: BODY.length, startedAt: performance.now() },
  };
}

/** The service's own commitBatch. */
async function viaStore(): Promise<number> {
  const db = await freshDatabase();
  try {
    const started = performance.now();
    for (let i = 0; i < COUNT; i += GROUP) await db.store.commitBatch(Array.from({ length: GROUP }, () => pendingWebhook(db.tenant)), []);
    return ((performance.now() - started) * 1000) / COUNT;
  } finally {
    await db.store.close();
    db.drop();
  }
}

interface PreparedOptions {
  dropIndexes?: string[];
  without?: { feed?: boolean; outboxLookup?: boolean };
  /** A request-log row for each 202 beside its webhook, as before migration 0010 (the record is now the webhook row's). */
  requestLogRows?: boolean;
  synchronousOff?: boolean;
  /** wal_autocheckpoint=0: no commit copies the WAL back into the database file (another connection would). */
  noCheckpoints?: boolean;
}

/** The store's statements, prepared once; options take parts away. */
async function prepared(options: PreparedOptions): Promise<number> {
  const db = await freshDatabase();
  await db.store.close();
  const sqlite = new SQLite(db.path);
  try {
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma(`synchronous = ${options.synchronousOff ? 'OFF' : 'FULL'}`);
    if (options.noCheckpoints) sqlite.pragma('wal_autocheckpoint = 0');
    for (const index of options.dropIndexes ?? []) sqlite.exec(`drop index ${index}`);
    const feed = sqlite.prepare('update feed_sequence set next = next + ? where id = 1 returning next - ? as first');
    const destinations = sqlite.prepare('select id, company_id, integration_ids, event_patterns, status from destinations where company_id in (?) and deleted_at is null');
    const webhook = sqlite.prepare(
      'insert into webhooks (uuid, company_id, integration_id, event, received_at, raw_body, headers, source_ip, key_id, idempotency_key, payload_format, request_id, user_agent, duration_ms, feed_seq) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    const log = sqlite.prepare(
      'insert into request_log (id, company_id, integration_id, received_at, method, status, error_code, key_id, ip, user_agent, size_bytes, duration_ms, webhook_uuid, error_detail) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    const commit = sqlite.transaction((group: ReturnType<typeof pendingWebhook>[]) => {
      const first = options.without?.feed ? null : (feed.get(group.length, group.length) as { first: number }).first;
      if (!options.without?.outboxLookup) destinations.all(db.tenant.companyId);
      group.forEach((w, i) => {
        const record = options.requestLogRows ? [null, null, null] : [w.log.id, w.log.userAgent, 1.5];
        webhook.run(w.uuid, w.companyId, w.integrationId, w.event, w.receivedAt, w.rawBody, w.headers, w.sourceIp, w.keyId, w.idempotencyKey, w.payloadFormat, ...record, first === null ? null : first + i);
      });
      if (!options.requestLogRows) return;
      for (const w of group) {
        const l = w.log;
        log.run(l.id, l.companyId, l.integrationId, l.receivedAt, l.method, 202, null, l.keyId, l.ip, l.userAgent, l.sizeBytes, 1.5, w.uuid, null);
      }
    });
    const started = performance.now();
    for (let i = 0; i < COUNT; i += GROUP) commit.immediate(Array.from({ length: GROUP }, () => pendingWebhook(db.tenant)));
    return ((performance.now() - started) * 1000) / COUNT;
  } finally {
    sqlite.close();
    db.drop();
  }
}

/** The bench floor's schema: two tables, one index each, the same rows. */
async function floorSchema(): Promise<number> {
  const dir = mkdtempSync(`${tmpdir()}/intake-commit-floor-`);
  const sqlite = new SQLite(`${dir}/floor.db`);
  try {
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = FULL');
    sqlite.exec(`
      create table webhooks (uuid text primary key, integration_id text not null, event text not null, received_at integer not null, raw_body blob not null, headers text not null);
      create index webhooks_integration_time on webhooks (integration_id, received_at);
      create table request_log (id integer primary key, integration_id text not null, received_at integer not null, status integer not null, webhook_uuid text);
      create index request_log_integration_time on request_log (integration_id, received_at);`);
    const webhook = sqlite.prepare('insert into webhooks values (?, ?, ?, ?, ?, ?)');
    const log = sqlite.prepare('insert into request_log (integration_id, received_at, status, webhook_uuid) values (?, ?, ?, ?)');
    const tenant = { companyId: 'cmp_floor', integrationId: 'int_floor' };
    const commit = sqlite.transaction((group: ReturnType<typeof pendingWebhook>[]) => {
      for (const w of group) webhook.run(w.uuid, w.integrationId, w.event, w.receivedAt, w.rawBody, w.headers);
      for (const w of group) log.run(w.integrationId, w.receivedAt, 202, w.uuid);
    });
    const started = performance.now();
    for (let i = 0; i < COUNT; i += GROUP) commit.immediate(Array.from({ length: GROUP }, () => pendingWebhook(tenant)));
    return ((performance.now() - started) * 1000) / COUNT;
  } finally {
    sqlite.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** µs a call of `work`, over enough calls to take about 200 ms. */
function microseconds(work: () => unknown): number {
  let calls = 0;
  const started = performance.now();
  while (performance.now() - started < 200) {
    for (let i = 0; i < 100; i++) work();
    calls += 100;
  }
  return ((performance.now() - started) * 1000) / calls;
}

const probe = await freshDatabase();
const schemaReader = new SQLite(probe.path, { readonly: true });
const indexes = (schemaReader.prepare("select name from sqlite_master where type = 'index' and tbl_name = 'webhooks' and name not like 'sqlite_autoindex%'").all() as Array<{ name: string }>).map((row) => row.name);
schemaReader.close();
await probe.store.close();
probe.drop();

const variants: Array<[string, () => Promise<number>]> = [
  ['store.commitBatch (Kysely)', viaStore],
  ['prepared, as the store', () => prepared({})],
  ...indexes.map((index): [string, () => Promise<number>] => [`  without index ${index}`, () => prepared({ dropIndexes: [index] })]),
  ['  without the feed position', () => prepared({ without: { feed: true } })],
  ['  without the outbox lookup', () => prepared({ without: { outboxLookup: true } })],
  [`  without all of those (${indexes.length} indexes, feed, lookup)`, () => prepared({ dropIndexes: indexes, without: { feed: true, outboxLookup: true } })],
  ['  synchronous=OFF (no fsync)', () => prepared({ synchronousOff: true })],
  ['  wal_autocheckpoint=0 (checkpoints left to another connection)', () => prepared({ noCheckpoints: true })],
  ['  with the request-log row of a 202 (before migration 0010)', () => prepared({ requestLogRows: true })],
  ['floor schema, prepared', floorSchema],
];

process.stdout.write(`${COUNT} webhooks of ${BODY.length} bytes in groups of ${GROUP}, ${REPEATS} repeats, SQLite WAL synchronous=FULL\n`);
const results = new Map<string, number[]>(variants.map(([name]) => [name, []]));
for (let repeat = 0; repeat < REPEATS; repeat++) {
  const order = repeat % 2 === 0 ? variants : [...variants].reverse();
  for (const [name, run] of order) results.get(name)!.push(await run());
}
const reference = median(results.get('prepared, as the store')!);
for (const [name, values] of results) {
  const us = median(values);
  const delta = name.startsWith('  ') ? `  (${us - reference >= 0 ? '+' : ''}${(us - reference).toFixed(1)})` : '';
  process.stdout.write(`${us.toFixed(1).padStart(7)} µs a webhook${delta.padEnd(10)}  ${name}   [${values.map((v) => v.toFixed(0)).join(', ')}]\n`);
}

const tenant = { companyId: 'cmp_x', integrationId: 'int_x' };
const group = Array.from({ length: GROUP }, () => pendingWebhook(tenant));
const text = BODY.toString('utf8');
process.stdout.write('\nThe event loop\'s parts of one webhook:\n');
process.stdout.write(`${microseconds(() => JSON.parse(text)).toFixed(2).padStart(7)} µs  JSON.parse of the body\n`);
process.stdout.write(`${microseconds(() => BODY.toString('utf8')).toFixed(2).padStart(7)} µs  the body's bytes to a string\n`);
process.stdout.write(`${microseconds(() => newWebhookUuid()).toFixed(2).padStart(7)} µs  a webhook uuid (v7)\n`);
process.stdout.write(`${microseconds(() => newTimeOrderedId('req', Date.now())).toFixed(2).padStart(7)} µs  a request-log id\n`);
process.stdout.write(`${(microseconds(() => structuredClone(group)) / GROUP).toFixed(2).padStart(7)} µs  its share of a group's structured clone (posting it to the commit thread)\n`);
