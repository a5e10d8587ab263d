/*
 * `npm run bench:delivery-rounds [-- --postgres]`: what the outbox costs the database, without
 * HTTP: 20,000 webhooks committed in groups of 32 with and without a destination (the
 * outbox rows), then every delivery claimed and settled through the store's exchanges of
 * 64, each statement's time summed by its shape. The store is dist/'s (run `npm run build`
 * first), on a fresh SQLite file or a fresh PostgreSQL database. `--idle-destinations N` adds
 * N active destinations without work, in companies of 50: what each costs a claim that
 * looks for destinations with room and due work.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase } from './bench-database.js';

const { values: args } = parseArgs({ options: { postgres: { type: 'boolean', default: false }, count: { type: 'string', default: '20000' }, 'idle-destinations': { type: 'string', default: '0' } } });
const root = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const dist = (path: string) => import(pathToFileURL(`${root}/dist/${path}`).href);
const { openStore } = await dist('store/open-store.js');
const { newId, newIntegrationKey, newWebhookUuid } = await dist('domain/ids.js');
const { MAX_DESTINATIONS } = await dist('services/destinations.js');
const { NO_RULES } = await dist('domain/rules/rules.js');

const COUNT = Number(args.count);
const IDLE_DESTINATIONS = Number(args['idle-destinations']);
const GROUP = 32;
const ROUND = 64;
const BODY = Buffer.alloc(6947, 'a');

/** Statement time by shape while `tracking`. */
const timings = new Map<string, { ms: number; count: number }>();
let tracking = false;

async function run(withDestination: boolean): Promise<void> {
  const workDir = mkdtempSync(`${tmpdir()}/intake-rounds-`);
  const db = await createBenchDatabase(args.postgres ? 'postgres' : 'sqlite', workDir, `rounds_${withDestination ? 'with' : 'without'}`);
  const store = openStore(db.url, {
    poolSize: 4,
    onQuery: (query: { sql: string; ms: number }) => {
      if (!tracking) return;
      const shape = query.sql.replace(/(\$\d+|\?)(, (\$\d+|\?))+/g, '…').slice(0, 90);
      const entry = timings.get(shape) ?? { ms: 0, count: 0 };
      entry.ms += query.ms;
      entry.count++;
      timings.set(shape, entry);
    },
  });
  await store.migrate();
  const at = Date.now();
  const companyId = newId('cmp');
  const integrationId = newId('int');
  await store.createCompany({ id: companyId, name: 'rounds', retentionDays: 30, createdAt: at });
  await store.createIntegration(
    companyId,
    { id: integrationId, companyId, integrationKey: newIntegrationKey(), name: 'rounds', description: '', enabled: true, bodyLimitBytes: 1 << 20, rateLimitPerMinute: null, createdAt: at, updatedAt: at, source: { type: 'api_key', config: {} } },
    { id: newId('key'), integrationId, scopes: ['webhooks:write'], prefix: 'bench', hash: newId('key'), createdAt: at, expiresAt: null },
  );
  const audit = { actor: { type: 'cli', id: 'bench', ip: null }, action: 'destination.create', targetType: 'destination', targetId: '', at };
  if (withDestination) {
    await store.createDestination(
      companyId,
      { id: newId('dst'), name: 'rounds', url: 'http://127.0.0.1:9/', integrationIds: null, eventPatterns: ['*'], headersSealed: null, headerNames: [], timeoutMs: 15_000, ratePerSecond: null, maxInFlight: ROUND, secretSealed: 'unused', rules: NO_RULES, createdAt: at },
      audit,
      MAX_DESTINATIONS,
    );
  }
  if (withDestination) {
    for (let i = 0; i < IDLE_DESTINATIONS; i++) {
      const idleCompany = `${companyId}_${Math.floor(i / 50)}`;
      if (i % 50 === 0) await store.createCompany({ id: idleCompany, name: 'idle', retentionDays: 30, createdAt: at });
      await store.createDestination(
        idleCompany,
        { id: newId('dst'), name: 'idle', url: 'http://127.0.0.1:9/', integrationIds: null, eventPatterns: ['*'], headersSealed: null, headerNames: [], timeoutMs: 15_000, ratePerSecond: null, maxInFlight: ROUND, secretSealed: 'unused', rules: NO_RULES, createdAt: at },
        audit,
        MAX_DESTINATIONS,
      );
    }
  }
  const webhook = () => {
    const receivedAt = Date.now();
    return {
      uuid: newWebhookUuid(), companyId, integrationId, keyId: 'bench', event: 'push', receivedAt, rawBody: BODY, bodySha256: null,
      headers: '{"content-type":"application/json"}', sourceIp: '127.0.0.1', idempotencyKey: null, payloadFormat: 'envelope',
      log: { id: newId('req'), companyId, integrationId, receivedAt, method: 'POST', keyId: 'bench', ip: '127.0.0.1', userAgent: 'bench', sizeBytes: BODY.length, startedAt: performance.now() },
    };
  };

  let started = performance.now();
  for (let i = 0; i < COUNT; i += GROUP) await store.commitBatch(Array.from({ length: GROUP }, webhook), []);
  const commitUs = ((performance.now() - started) * 1000) / COUNT;
  process.stdout.write(`commit ${withDestination ? 'with' : 'without'} a destination: ${commitUs.toFixed(1)} µs a webhook\n`);

  if (withDestination) {
    tracking = true;
    started = performance.now();
    let results: unknown[] = [];
    let done = 0;
    let rounds = 0;
    for (;;) {
      const now = Date.now() + 1000;
      const { claimed } = await store.exchangeDeliveries(results, now, { limit: ROUND, leaseMs: 30_000 }, Number.MAX_SAFE_INTEGER);
      rounds++;
      done += claimed.length;
      results = claimed.map((c: { id: string; companyId: string; destinationId: string; leaseToken: string; series: number; attempt: number }) => ({
        deliveryId: c.id, companyId: c.companyId, destinationId: c.destinationId, leaseToken: c.leaseToken, outcome: 'succeeded', gone: false,
        attempt: { series: c.series, number: c.attempt, attemptedAt: now, durationMs: 1, status: 204, error: null, responseExcerpt: '', nextAttemptAt: null },
      }));
      if (claimed.length === 0) break;
    }
    const elapsed = performance.now() - started;
    tracking = false;
    process.stdout.write(`exchanges: ${done} deliveries in ${rounds} rounds: ${((elapsed * 1000) / done).toFixed(1)} µs a delivery, ${(elapsed / rounds).toFixed(2)} ms a round\n`);
    for (const [shape, { ms, count }] of [...timings].sort((a, b) => b[1].ms - a[1].ms).slice(0, 12)) {
      process.stdout.write(`  ${((ms * 1000) / done).toFixed(1).padStart(6)} µs a delivery  ${String(count).padStart(5)}×  ${shape}\n`);
    }
  }
  await store.close();
  await db.drop();
  rmSync(workDir, { recursive: true, force: true });
}

await run(false);
await run(true);
