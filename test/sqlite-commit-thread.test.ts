import { spawnSync } from 'node:child_process';
import Database from 'better-sqlite3';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { openStore } from '../src/store/open-store.js';
import type { Store } from '../src/store/store.js';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { DAY_MS, createTenant, webhook, type Owner } from './support/webhooks.js';

// The server commits SQLite batches on a worker thread (src/store/sqlite/commit-thread.ts);
// the store suite runs commitBatch on the event loop. These tests hold the thread to the
// same results, and check what only the thread can get wrong.
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
      sqliteCommitThread: true,
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
    await new Promise((resolve) => setTimeout(resolve, 200));
    other.exec('commit');
    other.close();

    await expect(committing).resolves.toEqual(keyed.map((w) => ({ kind: 'accepted', uuid: w.uuid, receivedAt: w.receivedAt })));
  });

  test('the thread does not keep a process alive once its batches are done', () => {
    const openStoreJs = fileURLToPath(new URL('../dist/store/open-store.js', import.meta.url));
    const script = `
      const { openStore } = await import(${JSON.stringify(openStoreJs)});
      const store = openStore(${JSON.stringify(database.databaseUrl)}, { poolSize: 1, sqliteCommitThread: true });
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
