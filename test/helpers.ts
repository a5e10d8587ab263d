import { pino } from 'pino';
import { vi } from 'vitest';
import { buildApp, type AppDeps, type AppInstance } from '../src/app.js';
import { loadConfig, type Config } from '../src/config.js';
import { Management } from '../src/services/management.js';
import type { SourceInput } from '../src/sources/settings.js';
import type { Store } from '../src/store/store.js';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { scrape } from './support/metrics.js';
import { ADMISSION_GATE_OFF, TEST_PASSWORD_HASH_COST, TEST_SECRETS_KEY } from './support/processes.js';
import { parseSecretsKeys, SecretBox } from '../src/domain/secret-box.js';

/** The box sealing secrets in tests, with the key every test process shares. */
export function testSecretBox(): SecretBox {
  return new SecretBox(parseSecretsKeys(TEST_SECRETS_KEY));
}

/** A migrated database of the test's own, on the project's dialect (see support/databases.ts). */
export function freshStore(): Promise<TestDatabase> {
  return freshDatabase();
}

export interface TestTenant {
  companyId: string;
  integrationId: string;
  integrationKey: string;
  apiKey: string;
  keyId: string;
  /** The source's signing secret: the one given, or the one intake generated. */
  sourceSecret?: string;
  sourceSecretId?: string;
}

export interface TestApp {
  app: AppInstance;
  store: Store;
  database: TestDatabase;
  config: Config;
  management: Management;
  /** An integration and its key, in a new company unless `companyId` names one; with `source`, its signing secret too. */
  newTenant(options?: { companyId?: string; bodyLimitBytes?: number; rateLimitPerMinute?: number; source?: SourceInput }): Promise<TestTenant>;
  close(): Promise<void>;
}

/**
 * The whole app on a fresh database of the project's dialect, without a port (use app.inject);
 * `readLimits` shortens bounds for a test, `delivery` sets the delivery workers (a clock, or
 * `start: false` to drive them with app.dispatcher.runOnce()), `secrets` another deployment's key
 * (its management still seals with the test key: give such an app no provider sources).
 */
export async function buildTestApp(
  env: Record<string, string> = {},
  options: Pick<AppDeps, 'readLimits' | 'delivery' | 'redeliveries' | 'erasures'> & { secrets?: SecretBox } = {},
): Promise<TestApp> {
  const database = await freshStore();
  const { store, cleanup } = database;
  const config = loadConfig({ LOG_LEVEL: 'silent', ...ADMISSION_GATE_OFF, INTAKE_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST, ...env });
  const app = await buildApp({ config, store, logger: pino({ level: 'silent' }), ...options, secrets: options.secrets ?? testSecretBox() });
  const management = new Management(
    store,
    {
      environment: config.environment,
      baseUrl: config.baseUrl,
      defaultBodyLimit: config.defaultBodyLimit,
      secrets: testSecretBox(),
      passwordHashCost: config.passwordHashCost,
    },
    { type: 'cli', id: 'test', ip: null },
  );
  return {
    app,
    store,
    database,
    config,
    management,
    async newTenant({ companyId, ...limits } = {}) {
      const company = companyId ?? (await management.createCompany('Test company')).id;
      const created = await management.createIntegration(company, { name: 'Test integration', ...limits });
      return {
        companyId: company,
        integrationId: created.integration.id,
        integrationKey: created.integration.integrationKey,
        apiKey: created.apiKey,
        keyId: created.keyId,
        sourceSecret: created.sourceSecret ?? limits.source?.secret,
        sourceSecretId: created.sourceSecretId,
      };
    },
    async close() {
      await app.close();
      await cleanup();
    },
  };
}

/** POST a webhook through app.inject. */
export function sendWebhook(
  app: AppInstance,
  integrationKey: string,
  options: { apiKey?: string; body?: string | Buffer; contentType?: string; headers?: Record<string, string>; path?: string } = {},
) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.apiKey !== undefined) headers['x-api-key'] = options.apiKey;
  if (options.contentType !== undefined) headers['content-type'] = options.contentType;
  else headers['content-type'] = 'application/json';
  return app.inject({
    method: 'POST',
    url: `${options.path ?? '/api/webhooks'}/${integrationKey}`,
    headers,
    payload: options.body ?? '{"event":"test.event","data":{"n":1}}',
  });
}

/**
 * Calls `probe` until it returns something other than undefined, then returns it; fails after
 * `timeoutMs`. For effects the service promises to make soon (request-log rows written by the
 * group-commit writer, a revocation reaching the key cache), never a fixed sleep.
 */
export async function waitFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Makes every group commit of `store` wait until the returned function is called, as a
 * stalled database does; the commits then go on as usual. Undone by vi.restoreAllMocks().
 */
export function stallCommits(store: Store): () => void {
  let release: () => void = () => {};
  const stalled = new Promise<void>((resolve) => (release = resolve));
  stalls.add(release);
  const commit = store.commitBatch.bind(store);
  vi.spyOn(store, 'commitBatch').mockImplementation(async (webhooks, logs) => {
    await stalled;
    return commit(webhooks, logs);
  });
  return release;
}

const stalls = new Set<() => void>();

/**
 * Releases every commit stallCommits still holds: for a test's cleanup, so that a test
 * that failed before its own release does not leave the app's close waiting forever.
 */
export function releaseStalledCommits(): void {
  for (const release of stalls) release();
  stalls.clear();
}

/**
 * With the store's commits stalled (stallCommits), sends webhooks one at a time until one
 * waits in the writer's queue: every group the writer may hand the store at once is then
 * with it, whatever the database's group shape. Returns the answers still to come, the last
 * of them queued. Each send is followed until it has reached the writer (a new stalled
 * commit, or the queue) before the next goes, so no timing decides where a webhook lands.
 */
export async function fillGroupsInFlight<T>(t: Pick<TestApp, 'app' | 'store'>, send: () => Promise<T>): Promise<Array<Promise<T>>> {
  const commits = vi.mocked(t.store.commitBatch).mock.calls;
  const sent: Array<Promise<T>> = [];
  for (let i = 0; i < 20; i++) {
    const handed = commits.length;
    sent.push(send());
    const queued = await waitFor(async () => {
      if (commits.length > handed) return false;
      if ((await queueDepth(t.app)) === 0) return undefined;
      // A webhook just submitted waits for the writer's next turn (a setImmediate) even when
      // a group could take it: it is queued for good only if it is still there after that.
      await new Promise((resolve) => setImmediate(resolve));
      return (await queueDepth(t.app)) >= 1 ? true : undefined;
    }, 'the webhook sent to reach the writer (are commits stalled?)');
    if (queued) return sent;
  }
  throw new Error(`${sent.length} webhooks sent, and none waits in the writer's queue: are commits stalled?`);
}

async function queueDepth(app: AppInstance): Promise<number> {
  return (await scrape(app)).value('intake_write_queue_depth');
}

/** Holds the event loop in one turn, as a burst of requests does under overload. */
export function blockLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: no timer can run
  }
}
