import { spawnSync } from 'node:child_process';
import Database from 'better-sqlite3';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { openStore } from '../src/store/open-store.js';
import { openSqliteStore } from '../src/store/sqlite/open-sqlite.js';
import { COMMIT_THREAD_YOUNG_GENERATION_MB, SqliteThread } from '../src/store/sqlite/store-thread.js';
import type { Store } from '../src/store/store.js';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { sleep } from './support/processes.js';
import { DAY_MS, createTenant, webhook, type Owner } from './support/webhooks.js';

// The server commits SQLite batches on a worker thread and runs the API's heavy reads on
// another (src/store/sqlite/store-thread.ts); the store suite runs both on the event loop.
// These tests hold the threads to the same results, and check what only a thread can get
// wrong.
describe('SQLite commit thread', () => {
  let database: TestDatabase;
  let threaded: Store;
  let onMainConnection: Array<{ sql: string }>;
  let owner: Owner;

  beforeEach(async () => {
    database = await freshDatabase({ dialect: 'sqlite' });
    onMainConnection = [];
    threaded = openStore(database.databaseUrl, {
      poolSize: 1,
      sqliteThreads: true,
      onQuery: (query) => onMainConnection.push(query),
    });
    owner = await createTenant(database.store);
  });

  afterEach(async () => {
    await threaded.close();
    await database.cleanup();
  });

  test('a batch commits on the thread, not on the main connection, and is read back from it', async () => {
    const batch = [webhook(owner, Date.now()), webhook(owner, Date.now(), { event: 'invoice.failed' })];
    const outcomes = await threaded.commitBatch(batch, []);

    expect(outcomes).toEqual(batch.map((w) => ({ kind: 'accepted', uuid: w.uuid, receivedAt: w.receivedAt })));
    expect(onMainConnection.filter((q) => /insert into "webhooks"/.test(q.sql))).toEqual([]);
    const stored = await threaded.listWebhooks(owner.companyId, owner.integrationId, { limit: 10 });
    expect(stored.map((w) => w.uuid).sort()).toEqual(batch.map((w) => w.uuid).sort());
    // Bodies cross the thread boundary byte for byte, also those sliced from a pooled buffer.
    const original = new Map(batch.map((w) => [w.uuid, w.rawBody.toString('hex')]));
    for (const w of stored) expect(w.rawBody.toString('hex')).toBe(original.get(w.uuid));
    const logs = await threaded.listRequestLog(owner.companyId, owner.integrationId, 10);
    expect(logs.map((l) => [l.status, l.webhookUuid]).sort()).toEqual(batch.map((w) => [202, w.uuid]).sort());
    for (const l of logs) expect(l.durationMs).toBeGreaterThanOrEqual(0);
  });

  test('idempotency is decided in the thread: a replay answers the first uuid, another body conflicts', async () => {
    const first = webhook(owner, Date.now(), { idempotencyKey: 'evt_1', body: '{"event":"a","data":{"n":1}}' });
    const again = webhook(owner, Date.now(), { idempotencyKey: 'evt_1', body: '{"event":"a","data":{"n":1}}' });
    const changed = webhook(owner, Date.now(), { idempotencyKey: 'evt_1', body: '{"event":"a","data":{"n":2}}' });

    await threaded.commitBatch([first], []);
    const [replayed, conflict] = await threaded.commitBatch([again, changed], []);

    expect(replayed).toEqual({ kind: 'replayed', uuid: first.uuid, receivedAt: first.receivedAt });
    expect(conflict).toEqual({ kind: 'conflict' });
    const logs = await threaded.listRequestLog(owner.companyId, owner.integrationId, 10);
    expect(logs.map((l) => [l.status, l.errorCode]).sort()).toEqual([
      [200, null],
      [202, null],
      [422, 'idempotency_conflict'],
    ]);
  });

  test('the write-behind of last use and the retention purge run on the thread too', async () => {
    const usedAt = Date.now();
    await threaded.recordKeyUsage([{ companyId: owner.companyId, keyId: owner.keyId, at: usedAt, ip: '192.0.2.7' }]);
    const [key] = await threaded.listApiKeys(owner.companyId, owner.integrationId);
    expect(key).toMatchObject({ lastUsedAt: usedAt });

    const old = webhook(owner, Date.now() - 40 * DAY_MS);
    await threaded.commitBatch([old], []);
    const report = await threaded.purgeExpired(Date.now());
    expect(report.webhooks).toBe(1);
    expect(await threaded.getWebhook(owner.companyId, owner.integrationId, old.uuid)).toBeUndefined();

    // Only reads ran on the main connection: a write there would stop the event loop while
    // it waits for the thread's lock.
    expect(onMainConnection.filter((q) => /^(insert|update|delete)/i.test(q.sql))).toEqual([]);
  });

  test('a batch the database refuses fails with its error code, and the thread goes on', async () => {
    const first = webhook(owner, Date.now());
    await threaded.commitBatch([first], []);
    // The same uuid again: the primary key refuses it.
    await expect(threaded.commitBatch([first], [])).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });

    const next = webhook(owner, Date.now());
    await expect(threaded.commitBatch([next], [])).resolves.toEqual([
      { kind: 'accepted', uuid: next.uuid, receivedAt: next.receivedAt },
    ]);
  });

  test('a commit waits for another connection\'s write transaction instead of failing', async () => {
    // Another writer (the main connection, the CLI) holds the write lock for a while, then
    // commits: the thread's connection waits for it (busy_timeout), it does not fail the batch.
    const other = new Database(database.databaseUrl.slice('sqlite:'.length));
    other.pragma('busy_timeout = 5000');
    other.exec('begin immediate');
    other.prepare('insert into auth_changes (changed_at) values (?)').run(Date.now());
    const keyed = [0, 1].map((n) => webhook(owner, Date.now(), { idempotencyKey: `evt_${n}` }));
    const committing = threaded.commitBatch(keyed, []);
    await sleep(200);
    other.exec('commit');
    other.close();

    await expect(committing).resolves.toEqual(keyed.map((w) => ({ kind: 'accepted', uuid: w.uuid, receivedAt: w.receivedAt })));
  });

  test('the heavy reads run on the read thread: none of their queries on the main connection', async () => {
    const now = Date.now();
    const batch = [webhook(owner, now - 2, { body: '{"event":"a","data":{"needle":1}}' }), webhook(owner, now - 1), webhook(owner, now)];
    await threaded.commitBatch(batch, []);
    const newestFirst = [...batch].reverse();
    const { companyId, integrationId, keyId } = owner;
    onMainConnection.length = 0;

    const page = await threaded.listCompanyWebhooks(companyId, { limit: 2 });
    expect(page.webhooks.map((w) => w.uuid)).toEqual(newestFirst.slice(0, 2).map((w) => w.uuid));
    // Bodies come back as Buffers, byte for byte, also those small enough to have shared a pool.
    expect(Buffer.isBuffer(page.webhooks[0]!.rawBody)).toBe(true);
    expect(page.webhooks[0]!.rawBody.equals(batch[2]!.rawBody)).toBe(true);
    expect((await threaded.listCompanyWebhooks(companyId, { limit: 10, text: 'needle' })).webhooks.map((w) => w.uuid)).toEqual([batch[0]!.uuid]);
    const exported = await threaded.exportCompanyWebhooks(companyId, { limit: 10, cursor: page.next! });
    expect(exported.webhooks.map((w) => [w.uuid, w.sourceIp])).toEqual([[batch[0]!.uuid, batch[0]!.sourceIp]]);
    const heads = await threaded.listCompanyWebhookHeads(companyId, { since: now - 2, limit: 10 });
    expect(heads).toEqual(newestFirst.map((w) => ({ uuid: w.uuid, receivedAt: w.receivedAt, sizeBytes: w.rawBody.length })));
    expect(await threaded.getCompanyWebhookHead(companyId, batch[1]!.uuid)).toEqual(heads[1]);
    expect((await threaded.getCompanyWebhookSummaries(companyId, heads)).map((w) => w.rawBody.toString())).toEqual(
      newestFirst.map((w) => w.rawBody.toString()),
    );
    expect((await threaded.getCompanyWebhook(companyId, batch[0]!.uuid))?.headers).toEqual({ 'content-type': 'application/json' });
    expect(await threaded.listWebhooks(companyId, integrationId, { limit: 10 })).toHaveLength(3);
    expect((await threaded.getWebhook(companyId, integrationId, batch[0]!.uuid))?.uuid).toBe(batch[0]!.uuid);
    expect(await threaded.listRequestLog(companyId, integrationId, 10)).toHaveLength(3);
    expect(await threaded.listCompanyRequestLog(companyId, { limit: 10 })).toHaveLength(3);
    expect(await threaded.countUsage(companyId, { bucketMs: DAY_MS, since: now - DAY_MS, until: now + 1 })).not.toEqual([]);
    expect(await threaded.countKeyRequests(companyId, integrationId, [keyId], now - DAY_MS)).toBeInstanceOf(Map);
    expect(await threaded.listKeyCallers(companyId, integrationId, keyId, { since: now - DAY_MS, limit: 10 })).not.toEqual([]);
    expect(await threaded.listAuditLog(companyId, { limit: 10 })).toEqual(await database.store.listAuditLog(companyId, { limit: 10 }));

    expect(onMainConnection.filter((q) => /from "(webhooks|request_log|audit_log)"/.test(q.sql))).toEqual([]);
  });

  test('the read thread cannot write, nor run what is not a read', async () => {
    const path = database.databaseUrl.slice('sqlite:'.length);
    const reader = new SqliteThread(path, 'read');
    const call = reader.call.bind(reader) as (method: string, ...args: unknown[]) => Promise<unknown>;
    try {
      await expect(call('commitBatch', [webhook(owner, Date.now())], [])).rejects.toThrow(/does not run commitBatch/);
    } finally {
      await reader.close();
    }
    // Its connection refuses writes, whatever code would ask.
    const readOnly = openSqliteStore(path, { readOnly: true });
    try {
      await expect(readOnly.commitBatch([webhook(owner, Date.now())], [])).rejects.toMatchObject({ code: 'SQLITE_READONLY' });
    } finally {
      await readOnly.close();
    }
  });

  test('a read thread that dies is started again by the next read', async () => {
    const first = webhook(owner, Date.now());
    await threaded.commitBatch([first], []);
    expect((await threaded.listCompanyWebhooks(owner.companyId, { limit: 10 })).webhooks).toHaveLength(1);
    // Stands in for a crash (out of memory, a native fault): the thread stops under the store.
    const reader = (threaded as unknown as { readThread: { worker: Worker | undefined } }).readThread;
    const dead = reader.worker!;
    await dead.terminate();

    const again = await threaded.listCompanyWebhooks(owner.companyId, { limit: 10 });
    expect(again.webhooks.map((w) => w.uuid)).toEqual([first.uuid]);
    expect(reader.worker).toBeDefined();
    expect(reader.worker!.threadId).not.toBe(dead.threadId);
    // Writes never depended on it.
    const next = webhook(owner, Date.now());
    await expect(threaded.commitBatch([next], [])).resolves.toEqual([{ kind: 'accepted', uuid: next.uuid, receivedAt: next.receivedAt }]);
  });

  test("the read thread starts with the first heavy read: not with the schema, nor for readiness or /metrics' backlog", async () => {
    const threads = threaded as unknown as Record<'commitThread' | 'readThread', SqliteThread<'commit' | 'read'>>;
    await threaded.migrate();
    await threaded.ping();
    expect(threads.commitThread.running).toBe(true);
    expect(threads.readThread.running).toBe(false);
    // Every scrape reads it: on the read thread, Prometheus would keep the thread running for good.
    await expect(threaded.deliveryBacklog(Date.now(), 10_000)).resolves.toEqual({ due: 0, oldestDueAt: null });
    expect(threads.readThread.running).toBe(false);

    await threaded.commitBatch([webhook(owner, Date.now())], []);
    expect(threads.readThread.running).toBe(false);
    expect((await threaded.listCompanyWebhooks(owner.companyId, { limit: 10 })).webhooks).toHaveLength(1);
    expect(threads.readThread.running).toBe(true);
  });

  test('an idle read thread stops, and the next read starts another; a call in time keeps it', async () => {
    const path = database.databaseUrl.slice('sqlite:'.length);
    const reader = new SqliteThread(path, 'read', { idleStopMs: 150 });
    try {
      await reader.call('ping');
      const first = (reader as unknown as { worker: Worker }).worker;
      // Calls closer together than the idle time keep the same thread.
      for (let i = 0; i < 4; i++) {
        await sleep(60);
        await reader.call('ping');
      }
      expect((reader as unknown as { worker: Worker }).worker).toBe(first);
      await sleep(400);
      expect(reader.running).toBe(false);

      const read = reader.call('listCompanyWebhooks', owner.companyId, { limit: 10 });
      await expect(read).resolves.toMatchObject({ webhooks: [] });
      expect((reader as unknown as { worker: Worker }).worker.threadId).not.toBe(first.threadId);
    } finally {
      await reader.close();
    }
  });

  test("each thread's busy time counts its calls, the time they wait inside included, and never falls", async () => {
    const busy = (thread: string) => threaded.threadsBusySeconds().find((entry) => entry.thread === thread)!.seconds;
    expect(threaded.threadsBusySeconds()).toEqual([
      { thread: 'sqlite_commit', seconds: 0 },
      { thread: 'sqlite_read', seconds: 0 },
    ]);

    // A commit that waits 300 ms for another connection's write lock is busy all that time, as
    // one waiting for its fsync is: the thread can take no other call meanwhile.
    await threaded.commitBatch([webhook(owner, Date.now())], []);
    const beforeWait = busy('sqlite_commit');
    const other = new Database(database.databaseUrl.slice('sqlite:'.length));
    other.exec('begin immediate');
    const committing = threaded.commitBatch([webhook(owner, Date.now())], []);
    // The 300 ms count from when the thread is inside the call: on a loaded machine the
    // call may take a while to reach it (its busy time grows live while it waits).
    while (busy('sqlite_commit') - beforeWait < 0.02) await sleep(5);
    await sleep(300);
    other.exec('commit');
    other.close();
    await committing;
    expect(busy('sqlite_commit') - beforeWait).toBeGreaterThanOrEqual(0.25);
    expect(busy('sqlite_read')).toBe(0);

    await threaded.listCompanyWebhooks(owner.companyId, { limit: 10 });
    const read = busy('sqlite_read');
    expect(read).toBeGreaterThan(0);
    // A read thread that dies keeps what it was busy; the next one adds to it.
    const reader = (threaded as unknown as { readThread: { worker: Worker } }).readThread;
    await reader.worker.terminate();
    expect(busy('sqlite_read')).toBe(read);
    await threaded.listCompanyWebhooks(owner.companyId, { limit: 10 });
    expect(busy('sqlite_read')).toBeGreaterThan(read);
  });

  test('an idle read thread that stops keeps its busy time in the count', async () => {
    const reader = new SqliteThread(database.databaseUrl.slice('sqlite:'.length), 'read', { idleStopMs: 100 });
    try {
      await reader.call('listCompanyWebhooks', owner.companyId, { limit: 10 });
      const first = reader.busySeconds();
      expect(first).toBeGreaterThan(0);
      await sleep(300);
      expect(reader.running).toBe(false);
      // Read as it stopped: what it did after the first reading (answering, turning) counts too.
      const stopped = reader.busySeconds();
      expect(stopped).toBeGreaterThanOrEqual(first);
      await sleep(50);
      expect(reader.busySeconds()).toBe(stopped);
      await reader.call('ping');
      expect(reader.busySeconds()).toBeGreaterThan(stopped);
    } finally {
      await reader.close();
    }
  });

  test('the commit thread runs with a small young generation, the read thread with V8\'s default', async () => {
    await threaded.commitBatch([webhook(owner, Date.now())], []);
    await threaded.listCompanyWebhooks(owner.companyId, { limit: 10 });
    const threads = threaded as unknown as Record<'commitThread' | 'readThread', { worker: Worker | undefined }>;
    const commitLimits = threads.commitThread.worker!.resourceLimits!;
    const readLimits = threads.readThread.worker!.resourceLimits!;

    expect(commitLimits.maxYoungGenerationSizeMb).toBe(COMMIT_THREAD_YOUNG_GENERATION_MB);
    expect(readLimits.maxYoungGenerationSizeMb).toBeGreaterThan(COMMIT_THREAD_YOUNG_GENERATION_MB);
  });

  test('the thread does not keep a process alive once its batches are done', () => {
    const openStoreJs = fileURLToPath(new URL('../dist/store/open-store.js', import.meta.url));
    const script = `
      const { openStore } = await import(${JSON.stringify(openStoreJs)});
      const store = openStore(${JSON.stringify(database.databaseUrl)}, { poolSize: 1, sqliteThreads: true });
      const owner = ${JSON.stringify(owner)};
      const body = Buffer.from('{"event":"e","data":{}}');
      const log = { id: 'req_alive', ...owner, receivedAt: Date.now(), method: 'POST',
        ip: '127.0.0.1', userAgent: null, sizeBytes: body.length, startedAt: Date.now() };
      const [outcome] = await store.commitBatch([{ uuid: '00000000-0000-4000-8000-000000000001', ...owner, event: 'e',
        receivedAt: Date.now(), rawBody: body, bodySha256: null, headers: '{}', sourceIp: '127.0.0.1',
        idempotencyKey: null, log }], []);
      console.log(outcome.kind);
    `;
    // No close(): the process must still end by itself when its work is done.
    const scriptFile = join(mkdtempSync(join(tmpdir(), 'intake-thread-')), 'commit-once.mjs');
    writeFileSync(scriptFile, script);
    const run = spawnSync(process.execPath, [scriptFile], { encoding: 'utf8', timeout: 20_000 });

    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('accepted');
    expect(run.signal).toBeNull();
    expect(run.status).toBe(0);
  });
});
