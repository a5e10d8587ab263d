import { afterAll, afterEach, expect, test } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { boundProblems, deliveryCrashRun, reportRun } from '../support/delivery-crash.js';
import { cleanupAll, killAll } from '../support/processes.js';

/**
 * Delivery under kill -9 on PostgreSQL (issue 15, Tests: "Crash"): the run of
 * test/destinations/crash.test.ts (support/delivery-crash.ts) on a schema of the run's
 * database, where claims are rows taken FOR UPDATE SKIP LOCKED and a dead node's claims are
 * freed by their lease's end alone.
 */

/** A node gives one company a quarter of it (dispatcher.ts): 8 deliveries of this run's one company in flight. */
const CONCURRENCY = 32;
let database: TestDatabase | undefined;

afterEach(() => killAll());
afterAll(async () => {
  await cleanupAll();
  await database?.cleanup();
});

test('postgres: kill -9 while delivering, three times: every acknowledged webhook reaches each matching destination, duplicates bounded', async () => {
  database = await freshDatabase({ dialect: 'postgres' });
  const result = await deliveryCrashRun({
    database,
    cycles: 3,
    deliveryConcurrency: CONCURRENCY,
    leaseSeconds: 1,
    timeoutMs: 3000,
    minAcksPerCycle: 50,
    senders: 4,
  });
  reportRun('postgres', result);
  expect(result.problems).toEqual([]);
  expect(boundProblems(result, CONCURRENCY)).toEqual([]);
}, 60_000);
