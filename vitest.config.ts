import { existsSync } from 'node:fs';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { CHROMIUM } from './test/support/chromium-path.js';
import type {} from './test/support/databases.js';
import { TEST_POSTGRES_URL, printable, probePostgres } from './test/support/postgres-server.js';

/**
 * Two projects, as Kysely runs its suite once per dialect: `sqlite` runs everything;
 * `postgres` runs every test that is about storage (the store suite, the routes, the key
 * cache, retention, query plans, metrics, the end-to-end test) again on PostgreSQL, plus the
 * multi-node and crash tests. The
 * PostgreSQL project runs when a server answers at INTAKE_TEST_DATABASE_URL; otherwise one
 * line says it was skipped, and with INTAKE_REQUIRE_POSTGRES=1 (CI) the run fails instead.
 */
const ON_BOTH_DATABASES = [
  'test/store.test.ts',
  'test/key-cache.test.ts',
  'test/retention.test.ts',
  'test/query-plans.test.ts',
  'test/intake-routes.test.ts',
  'test/read-routes.test.ts',
  'test/request-log.test.ts',
  'test/request-log-halves.test.ts',
  'test/tracing-store.test.ts',
  'test/e2e.test.ts',
  'test/metrics.test.ts',
  'test/api/logs.test.ts',
  'test/api/requests-usage.test.ts',
  'test/api/integrations.test.ts',
  'test/api/sources.test.ts',
  'test/api/source-replays.test.ts',
  'test/api/keys.test.ts',
  'test/api/management-keys.test.ts',
  'test/api/cli-logins.test.ts',
  'test/api/auth.test.ts',
  'test/api/account.test.ts',
  'test/api/account-audit.test.ts',
  'test/api/erasures.test.ts',
  'test/api/redaction.test.ts',
  'test/api/invitations.test.ts',
  'test/api/members.test.ts',
  'test/api/contract.test.ts',
  'test/api/setup.test.ts',
  'test/api/webhook-stream.test.ts',
  'test/api/isolation-matrix.test.ts',
  'test/api/destinations.test.ts',
  'test/api/redeliveries.test.ts',
  'test/api/webhook-feed-raw.test.ts',
  'test/intake-fuzz.test.ts',
  'test/intake-fuzz-tcp.test.ts',
  'test/destinations/store.test.ts',
  'test/destinations/redeliveries.test.ts',
  'test/destinations/dispatcher.test.ts',
  'test/destinations/rules.test.ts',
  'test/destinations/dedupe-keys.test.ts',
  'test/destinations/delivery-headers.test.ts',
  'test/destinations/feed-consumer.test.ts',
  'test/destinations/query-plans.test.ts',
  'test/destinations/stale-statistics.test.ts',
  'test/destinations/worker-transaction.test.ts',
];

const postgres = await probePostgres(TEST_POSTGRES_URL);
if (!postgres.ok) {
  const why = `no PostgreSQL answers at ${printable(TEST_POSTGRES_URL)} (${postgres.reason})`;
  if (process.env.INTAKE_REQUIRE_POSTGRES === '1') throw new Error(`INTAKE_REQUIRE_POSTGRES=1 but ${why}`);
  console.log(`PostgreSQL tests SKIPPED: ${why}. Set INTAKE_TEST_DATABASE_URL to run them.`);
}

/**
 * The panel's browser tests need Debian's Chromium (`apt-get install -y chromium`; .ci/run
 * installs it). Without it they are skipped with one line, and INTAKE_REQUIRE_BROWSER=1 (CI)
 * makes that a failure, as for PostgreSQL.
 */
const browser = existsSync(CHROMIUM);
if (!browser) {
  const why = `no Chromium at ${CHROMIUM}; apt-get install -y chromium, or set INTAKE_CHROMIUM`;
  if (process.env.INTAKE_REQUIRE_BROWSER === '1') throw new Error(`INTAKE_REQUIRE_BROWSER=1 but ${why}`);
  console.log(`Browser tests SKIPPED: ${why}.`);
}

/**
 * `npm run test:quick` (INTAKE_TEST_QUICK=1, SQLite only): what a change most likely breaks,
 * in under a minute. The files of the code most changes touch (the domain, the store,
 * intake's routes and reads, the management API, sources, destinations) that run in
 * process: the app built without a port, the store on a file. Left out: whatever spawns the
 * compiled server or CLI (so nothing needs a build first), drives Chromium, kills processes
 * or fills a disk; the suites that mostly wait for real time (the live tail, HTTP timeouts,
 * load shedding); and the PostgreSQL project. `npm test` runs them all.
 */
const QUICK = {
  include: [
    'test/{domain,store,intake-routes,read-routes,request-log,request-log-halves,key-cache,key-material,query-plans,secrets,module-graph}.test.ts',
    'test/api/*.test.ts',
    'test/sources/*.test.ts',
    'test/destinations/*.test.ts',
  ],
  exclude: ['test/api/{account,webhook-stream}.test.ts', 'test/destinations/{crash,feed-consumer}.test.ts'],
};
const quick = process.env.INTAKE_TEST_QUICK === '1';

const sqliteProject: TestProjectInlineConfiguration = {
  extends: true,
  test: {
    name: 'sqlite',
    include: quick ? QUICK.include : ['test/**/*.test.ts', 'src/**/*.test.ts'],
    exclude: ['test/postgres/**', ...(browser ? [] : ['test/browser/**']), ...(quick ? QUICK.exclude : [])],
    provide: { dialect: 'sqlite' },
    globalSetup: ['test/support/sqlite-template-global-setup.ts'],
  },
};

const postgresProject: TestProjectInlineConfiguration = {
  extends: true,
  test: {
    name: 'postgres',
    include: [...ON_BOTH_DATABASES, 'test/postgres/**/*.test.ts'],
    provide: { dialect: 'postgres' },
    globalSetup: ['test/support/postgres-global-setup.ts', 'test/support/sqlite-template-global-setup.ts'],
  },
};

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two files at once on two cores. More would use the idle time (1.3 cores busy on
    // average), but at three and four, tests bound to the event loop's lag or the browser's
    // timing (admission, request-log's flood, the panel's destinations) failed once each in a
    // full run on a loaded machine, and passed alone.
    maxWorkers: 2,
    projects: postgres.ok ? [sqliteProject, postgresProject] : [sqliteProject],
  },
});
