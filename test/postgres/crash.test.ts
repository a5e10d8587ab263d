import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { afterAll, afterEach, expect, test } from 'vitest';
import { checkRows as checkRowsOf, crashCycle, faultCycle, type CrashTarget } from '../support/crash.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { operator } from '../support/operator.js';
import { cleanupAll, killAll, type ServerProcess } from '../support/processes.js';

/**
 * Durability on PostgreSQL (contract, "Sending a webhook": a 202 is sent only after a
 * committed PostgreSQL transaction): the SQLite crash cycles (support/crash.ts) against a
 * schema of the run's database, and a cycle where the node's database connections are
 * terminated under load. Every 202 must be stored exactly once with its raw body; the
 * refusals in between must be 503s the sender can retry.
 */

const CYCLES = 3;
const totals = { acknowledged: 0, lost: 0, corrupted: 0, duplicated: 0 };
const databases: TestDatabase[] = [];

async function database(): Promise<TestDatabase> {
  const fresh = await freshDatabase({ dialect: 'postgres' });
  databases.push(fresh);
  return fresh;
}

/**
 * The node's database and the company and integration it sends to, made in the store before
 * the node starts (support/operator.ts: what the CLI's two runs would make).
 */
async function targetOn(db: TestDatabase): Promise<CrashTarget> {
  const { management } = operator(db.store);
  const company = await management.createCompany('Crash test');
  const created = await management.createIntegration(company.id, { name: 'crash' });
  return { databaseUrl: db.databaseUrl, tenant: { integrationKey: created.integration.integrationKey, apiKey: created.apiKey } };
}

/** Each acknowledged uuid is one row with the exact bytes sent (support/crash.ts). */
function checkRows(db: TestDatabase, acked: ReadonlyMap<string, string>) {
  return checkRowsOf((text, params) => db.query(text, params), acked);
}

afterEach(() => killAll());
afterAll(async () => {
  console.log(
    `postgres crash totals over ${CYCLES} kill -9 cycles and 1 database-fault cycle: acknowledged ${totals.acknowledged}, ` +
      `lost ${totals.lost}, corrupted ${totals.corrupted}, stored twice ${totals.duplicated}`,
  );
  await cleanupAll();
  for (const fresh of databases.splice(0)) await fresh.cleanup();
});

for (let cycle = 1; cycle <= CYCLES; cycle++) {
  test(`postgres crash cycle ${cycle}: every webhook acknowledged before kill -9 is stored once, byte for byte`, async () => {
    const db = await database();
    const result = await crashCycle({ target: await targetOn(db), concurrency: 24 });
    const rows = await checkRows(db, result.acked);
    totals.acknowledged += result.acknowledged;
    totals.lost += result.lost;
    totals.corrupted += result.corrupted;
    totals.duplicated += rows.duplicated;
    console.log(
      `postgres crash cycle ${cycle}: acknowledged ${result.acknowledged}, lost ${result.lost}, corrupted ${result.corrupted}, ` +
        `stored twice ${rows.duplicated}, stored ${result.stored}, bodies checked ${result.bodiesChecked}, ` +
        `in flight at kill ${result.inFlightAtKill}, load ${result.loadMs} ms, restart ${result.restartMs} ms, ` +
        `other statuses ${JSON.stringify(result.otherStatuses)}`,
    );

    expect(result.problems).toEqual([]);
    expect(rows.problems).toEqual([]);
    expect(result.errorsBeforeKill).toEqual([]);
    expect(result.acknowledged).toBeGreaterThanOrEqual(200);
    expect(result.lost).toBe(0);
    expect(result.corrupted).toBe(0);
    expect(rows.duplicated).toBe(0);
    expect(result.bodiesChecked).toBe(result.acknowledged);
    expect(result.stored).toBeGreaterThanOrEqual(result.acknowledged);
    // 503 (write queue full) is the only refusal the contract allows under load here.
    expect(Object.keys(result.otherStatuses).filter((status) => status !== '503')).toEqual([]);
    expect(result.restartExit).toEqual({ code: 0, signal: null });
  }, 40_000);
}

test('postgres database fault: with its backends terminated mid-load, the node answers 202 or 503 and recovers by itself', async () => {
  const db = await database();
  const result = await faultCycle({
    target: await targetOn(db),
    concurrency: 16,
    injectFault: (server) => terminateBackendsOf(db, server),
  });
  const rows = await checkRows(db, result.acked);
  totals.acknowledged += result.acknowledged;
  totals.lost += result.lost;
  totals.corrupted += result.corrupted;
  totals.duplicated += rows.duplicated;
  console.log(
    `postgres fault cycle: ${result.faultRounds} rounds terminated ${result.connectionsBroken} backends; ` +
      `acknowledged ${result.acknowledged}, lost ${result.lost}, corrupted ${result.corrupted}, stored twice ${rows.duplicated}, ` +
      `stored ${result.stored}, refused with 503 ${result.refused}, recovered ${result.recoveryMs} ms after the last fault, ` +
      `/readyz while recovering ${JSON.stringify(result.readyzStatuses)}`,
  );

  expect(result.connectionsBroken).toBeGreaterThan(0);
  // The fault was felt: at least one request was refused (else nothing here was tested).
  expect(result.refused).toBeGreaterThan(0);
  expect(result.badAnswers).toEqual([]);
  expect(result.failures).toEqual([]);
  expect(result.refusedAfterRecovery).toBe(0);
  expect(result.problems).toEqual([]);
  expect(rows.problems).toEqual([]);
  expect(result.lost).toBe(0);
  expect(result.corrupted).toBe(0);
  expect(rows.duplicated).toBe(0);
  expect(result.bodiesChecked).toBe(result.acknowledged);
  expect(result.exit).toEqual({ code: 0, signal: null });
}, 40_000);

/**
 * Terminates the PostgreSQL backends of one node: those named 'intake' (the store's
 * application_name) in this database whose client port is one of the node's sockets. The
 * port filter matters: every test file of the run shares this database, and their stores
 * are named 'intake' too.
 */
async function terminateBackendsOf(db: TestDatabase, server: ServerProcess): Promise<number> {
  const ports = tcpPortsOf(server.child.pid!, Number(new URL(db.databaseUrl).port || 5432));
  if (ports.length === 0) return 0;
  const rows = await db.query<{ terminated: boolean }>(
    `select pg_terminate_backend(pid) as terminated from pg_stat_activity
     where application_name = 'intake' and datname = current_database() and client_port = any($1::int[])`,
    [ports],
  );
  return rows.filter((row) => row.terminated).length;
}

/** Local ports of the process's TCP connections to `remotePort` (Linux /proc). */
function tcpPortsOf(pid: number, remotePort: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (socket) inodes.add(socket[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || !inodes.has(fields[9]!)) continue;
      const port = (address: string) => parseInt(address.slice(address.lastIndexOf(':') + 1), 16);
      if (port(fields[2]!) === remotePort) ports.push(port(fields[1]!));
    }
  }
  return ports;
}
