import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, afterEach, expect, test } from 'vitest';
import { checkRows, faultCycle, type FaultCycleResult } from '../support/crash.js';
import { TEST_POSTGRES_URL, withClient, withDatabase } from '../support/postgres-server.js';
import { cleanupAll, killAll } from '../support/processes.js';
import { expectNothingLost, expectReadinessFollowedTheFault } from '../support/fault-expectations.js';

/**
 * The database unreachable under a running node (contract, "Sending a webhook": a 202 only
 * after a committed PostgreSQL transaction). Real faults on the test server: the node's
 * database refuses every connection (ALLOW_CONNECTIONS false, every backend terminated),
 * or its backends are terminated again and again. While it lasts intake answers 503 with
 * Retry-After and a JSON body, never 202 for a webhook that was not stored, and /readyz
 * answers 503; once connections are allowed again the node gets ready with no traffic and
 * accepts webhooks, without a restart. Every 202 is then found once, byte for byte.
 *
 * Each test has a database of its own (ALLOW_CONNECTIONS is per database), dropped after.
 */

const databases: string[] = [];

afterEach(() => killAll());
afterAll(async () => {
  await cleanupAll();
  for (const name of databases.splice(0)) {
    await admin((client) => client.query(`drop database if exists ${name} with (force)`));
  }
});

test('connections refused: 503 with Retry-After while the database is unreachable, /readyz 503, ready again by itself', async () => {
  const name = await createDatabase();
  const result = await faultCycle({
    target: { databaseUrl: withDatabase(TEST_POSTGRES_URL, name) },
    injectFault: async () => {
      await admin((client) => client.query(`alter database ${name} allow_connections false`));
      return terminateBackends(name);
    },
    endFault: async () => {
      await admin((client) => client.query(`alter database ${name} allow_connections true`));
    },
  });
  const rows = await checkRows((text, params) => query(name, text, params), result.acked);
  report('connections refused', result, rows.duplicated);
  expectUnreachable(result);
  expect(rows.problems).toEqual([]);
  expect(rows.duplicated).toBe(0);
}, 60_000);

test('backends terminated again and again: 503 with Retry-After meanwhile, /readyz 503, ready again by itself', async () => {
  const name = await createDatabase();
  let terminating: Promise<void> | undefined;
  let stop = false;
  let terminated = 0;
  const result = await faultCycle({
    target: { databaseUrl: withDatabase(TEST_POSTGRES_URL, name) },
    injectFault: async () => {
      terminated += await terminateBackends(name);
      // Every connection the node opens again is cut again, until endFault.
      terminating ??= admin(async (client) => {
        while (!stop) terminated += await terminateBackends(name, client);
      });
      return terminated;
    },
    endFault: async () => {
      stop = true;
      await terminating;
    },
  });
  const rows = await checkRows((text, params) => query(name, text, params), result.acked);
  report(`${terminated} backends terminated`, result, rows.duplicated);
  expectUnreachable(result);
  expect(rows.problems).toEqual([]);
  expect(rows.duplicated).toBe(0);
}, 60_000);

function expectUnreachable(result: FaultCycleResult): void {
  expect(result.connectionsBroken).toBeGreaterThan(0);
  expectNothingLost(result);
  expectReadinessFollowedTheFault(result);
}

function report(name: string, result: FaultCycleResult, duplicated: number): void {
  console.log(
    `database unreachable (${name}): acknowledged ${result.acknowledged}, lost ${result.lost}, corrupted ${result.corrupted}, ` +
      `stored twice ${duplicated}, refused with 503 ${result.refused}, accepted during the fault ${result.acceptedDuringFault}, /readyz during the fault ${JSON.stringify(result.readyzDuringFault)}, ` +
      `ready ${result.recoveryMs} ms after the fault ended (/readyz ${JSON.stringify(result.readyzStatuses)})`,
  );
}

async function createDatabase(): Promise<string> {
  const name = `intake_unreachable_${randomBytes(6).toString('hex')}`;
  await admin((client) => client.query(`create database ${name}`));
  databases.push(name);
  return name;
}

/** Terminates every backend of the database (the node's pool and its LISTEN connection). */
async function terminateBackends(name: string, client?: pg.Client): Promise<number> {
  if (!client) return admin((fresh) => terminateBackends(name, fresh));
  const { rows } = await client.query<{ terminated: boolean }>(
    'select pg_terminate_backend(pid) as terminated from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
    [name],
  );
  return rows.filter((row) => row.terminated).length;
}

/** On the server's maintenance database, which the faults never touch. */
function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  return withClient(TEST_POSTGRES_URL, work);
}

async function query<T>(name: string, text: string, params: unknown[]): Promise<T[]> {
  return withClient(withDatabase(TEST_POSTGRES_URL, name), async (client) => (await client.query(text, params)).rows as T[]);
}
