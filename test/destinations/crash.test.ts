import { afterAll, afterEach, expect, test } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { boundProblems, deliveryCrashRun, reportRun } from '../support/delivery-crash.js';
import { cleanupAll, killAll } from '../support/processes.js';

/**
 * Delivery under kill -9 on SQLite (issue 15, Tests: "Crash"): the real server with two
 * destinations on slow loopback receivers, killed while deliveries are in flight and
 * restarted on the same file, three times. Every webhook acknowledged reaches every
 * destination it matches, at least once, and no other; every duplicate is a claim that died
 * with its node, at most INTAKE_DELIVERY_CONCURRENCY per kill. The harness is
 * support/delivery-crash.ts; test/postgres/delivery-crash.test.ts runs it on PostgreSQL.
 */

/** A node gives one company a quarter of it (dispatcher.ts): 8 deliveries of this run's one company in flight. */
const CONCURRENCY = 32;
let database: TestDatabase | undefined;

afterEach(() => killAll());
afterAll(async () => {
  await cleanupAll();
  await database?.cleanup();
});

test('kill -9 while delivering, three times: every acknowledged webhook reaches every matching destination, duplicates bounded', async () => {
  database = await freshDatabase({ dialect: 'sqlite' });
  const result = await deliveryCrashRun({
    database,
    cycles: 3,
    deliveryConcurrency: CONCURRENCY,
    leaseSeconds: 1,
    timeoutMs: 3000,
    minAcksPerCycle: 50,
    senders: 4,
  });
  reportRun('sqlite', result);
  expect(result.problems).toEqual([]);
  expect(boundProblems(result, CONCURRENCY)).toEqual([]);
}, 60_000);
