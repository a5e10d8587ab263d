import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { checkRows, copyOfTemplate, crashCycle, makeSqliteTemplate, type CrashCycleResult, type CrashTarget } from '../support/crash.js';
import { TEST_POSTGRES_URL, printable, probePostgres, withClient, withDatabase } from '../support/postgres-server.js';
import { cleanupAll, killAll } from '../support/processes.js';

/**
 * The long crash run (`npm run test:crash`, not part of `npm test`): on SQLite and on
 * PostgreSQL, cycle after cycle, concurrent senders load the real server (`node
 * dist/main.js`), it gets kill -9 at a random moment, restarts on the same database, and
 * every webhook it acknowledged must be there with its exact raw body (support/crash.ts).
 * Prints one line per cycle and the totals per database; exits 1 if anything acknowledged
 * was lost, changed or stored twice, or a cycle could not be checked.
 *
 *   npm run test:crash                          100 cycles on each database
 *   npm run test:crash -- --cycles 20           (or INTAKE_CRASH_CYCLES=20)
 *   npm run test:crash -- --database sqlite     sqlite, postgres or both
 *   npm run test:crash -- --max-minutes 7       stop starting cycles after 7 minutes per database
 *
 * PostgreSQL is the server at INTAKE_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres);
 * the run creates a database of its own there and drops it. When none answers, the
 * PostgreSQL half is skipped with one line (a failure with INTAKE_REQUIRE_POSTGRES=1).
 */

const { values: args } = parseArgs({
  options: {
    cycles: { type: 'string', default: process.env.INTAKE_CRASH_CYCLES ?? '100' },
    database: { type: 'string', default: 'both' },
    'max-minutes': { type: 'string' },
  },
});
const CYCLES = positiveInteger('--cycles', args.cycles!);
const MAX_MS = args['max-minutes'] === undefined ? Infinity : positiveInteger('--max-minutes', args['max-minutes']) * 60_000;
const DATABASES = args.database === 'both' ? (['sqlite', 'postgres'] as const) : [database(args.database!)];

interface Totals {
  database: string;
  cycles: number;
  acknowledged: number;
  lost: number;
  corrupted: number;
  /** PostgreSQL: acknowledged uuids with more than one row. */
  duplicated: number;
  /** Cycles that threw or found a problem beyond the counts (each printed). */
  failedCycles: number;
  wallMs: number;
  /** Why fewer cycles ran than asked, if they did. */
  cutShort?: string;
}

process.once('SIGINT', () => {
  console.log('interrupted: killing the servers');
  void killAll().then(() => process.exit(130));
});

const results: Totals[] = [];
for (const name of DATABASES) {
  if (name === 'sqlite') results.push(await runCycles('sqlite', await sqliteTargets()));
  else {
    const probe = await probePostgres(TEST_POSTGRES_URL);
    if (!probe.ok) {
      const why = `no PostgreSQL answers at ${printable(TEST_POSTGRES_URL)} (${probe.reason})`;
      if (process.env.INTAKE_REQUIRE_POSTGRES === '1') {
        console.log(`INTAKE_REQUIRE_POSTGRES=1 but ${why}`);
        process.exitCode = 1;
      } else console.log(`PostgreSQL crash run SKIPPED: ${why}.`);
      continue;
    }
    const run = await postgresTargets();
    try {
      results.push(await runCycles('postgres', run));
    } finally {
      await run.close();
    }
  }
}
await cleanupAll();

console.log('\ncrash run totals');
for (const totals of results) {
  console.log(
    `${totals.database}: cycles ${totals.cycles}${totals.cutShort ? ` of ${CYCLES} (${totals.cutShort})` : ''}, ` +
      `acknowledged ${totals.acknowledged}, lost ${totals.lost}, corrupted ${totals.corrupted}` +
      `${totals.database === 'postgres' ? `, stored twice ${totals.duplicated}` : ''}, failed cycles ${totals.failedCycles}, ` +
      `wall time ${formatMs(totals.wallMs)}`,
  );
  if (totals.lost + totals.corrupted + totals.duplicated + totals.failedCycles > 0) process.exitCode = 1;
}
if (process.exitCode === 1) console.log('FAILED: see the cycles above.');

/** Where each cycle runs, and what is checked beneath the API after it. */
interface Targets {
  next(cycle: number): Promise<CrashTarget>;
  /** Problems found in the database itself after the cycle, and uuids stored twice. */
  inspect(target: CrashTarget, acked: ReadonlyMap<string, string>): Promise<{ problems: string[]; duplicated: number }>;
  /** Frees what the cycle used. */
  release(target: CrashTarget): Promise<void>;
}

async function runCycles(name: string, targets: Targets): Promise<Totals> {
  const totals: Totals = { database: name, cycles: 0, acknowledged: 0, lost: 0, corrupted: 0, duplicated: 0, failedCycles: 0, wallMs: 0 };
  const startedAt = performance.now();
  console.log(`\n${name}: ${CYCLES} crash cycles`);
  for (let cycle = 1; cycle <= CYCLES; cycle++) {
    if (performance.now() - startedAt > MAX_MS) {
      totals.cutShort = `stopped after ${formatMs(MAX_MS)}`;
      break;
    }
    // A random moment: after 1 to 400 acknowledgements, then up to a second more.
    const concurrency = [8, 16, 32, 48][Math.floor(Math.random() * 4)]!;
    const minAcks = 1 + Math.floor(Math.random() * 400);
    const target = await targets.next(cycle);
    try {
      const result = await crashCycle({ target, concurrency, minAcks, maxKillDelayMs: 1_000 });
      const beneath = await targets.inspect(target, result.acked);
      const problems = [...result.problems, ...beneath.problems, ...unexpected(result)];
      totals.acknowledged += result.acknowledged;
      totals.lost += result.lost;
      totals.corrupted += result.corrupted;
      totals.duplicated += beneath.duplicated;
      if (problems.length > 0) totals.failedCycles++;
      console.log(
        `${name} cycle ${cycle}: concurrency ${concurrency}, acknowledged ${result.acknowledged}, lost ${result.lost}, ` +
          `corrupted ${result.corrupted}, stored ${result.stored}, in flight at kill ${result.inFlightAtKill}, ` +
          `load ${result.loadMs} ms, restart ${result.restartMs} ms${problems.length > 0 ? `\n  PROBLEMS: ${problems.join('\n  ')}` : ''}`,
      );
    } catch (error) {
      totals.failedCycles++;
      console.log(`${name} cycle ${cycle}: FAILED: ${(error as Error).stack ?? error}`);
      await killAll();
    } finally {
      totals.cycles++;
      await targets.release(target);
    }
  }
  totals.wallMs = performance.now() - startedAt;
  return totals;
}

/** What a cycle must not show besides lost or changed webhooks. */
function unexpected(result: CrashCycleResult): string[] {
  const problems: string[] = [];
  if (result.errorsBeforeKill.length > 0) problems.push(`requests failed before the kill: ${result.errorsBeforeKill.slice(0, 3).join('; ')}`);
  // 503 (write queue full) is the only refusal the contract allows under load here.
  const refusals = Object.keys(result.otherStatuses).filter((status) => status !== '503');
  if (refusals.length > 0) problems.push(`answers other than 202 and 503: ${JSON.stringify(result.otherStatuses)}`);
  if (result.bodiesChecked !== result.acknowledged) problems.push(`${result.bodiesChecked} of ${result.acknowledged} bodies checked`);
  if (result.restartExit.code !== 0) problems.push(`the restarted server did not stop cleanly: ${JSON.stringify(result.restartExit)}`);
  return problems;
}

/** Copies of one template file (company and integration made once with the CLI). */
async function sqliteTargets(): Promise<Targets> {
  const template = await makeSqliteTemplate();
  const pathOf = (target: CrashTarget) => target.databaseUrl.slice('sqlite:'.length);
  return {
    next: async () => copyOfTemplate(template),
    inspect: async (target) => {
      const db = new Database(pathOf(target), { readonly: true });
      try {
        const check = db.pragma('integrity_check', { simple: true });
        return { problems: check === 'ok' ? [] : [`integrity_check: ${String(check)}`], duplicated: 0 };
      } finally {
        db.close();
      }
    },
    release: async (target) => rmSync(dirname(pathOf(target)), { recursive: true, force: true }),
  };
}

/** A schema per cycle in a database of the run's own, dropped at the end. */
async function postgresTargets(): Promise<Targets & { close(): Promise<void> }> {
  const name = `intake_crash_${Date.now()}_${randomBytes(3).toString('hex')}`;
  await withClient(TEST_POSTGRES_URL, (client) => client.query(`create database ${name}`));
  const runUrl = withDatabase(TEST_POSTGRES_URL, name);
  const schemaOf = (target: CrashTarget) => /search_path=(\w+)/.exec(decodeURIComponent(target.databaseUrl))![1]!;
  return {
    next: async (cycle) => {
      const schema = `c${cycle}_${randomBytes(3).toString('hex')}`;
      await withClient(runUrl, (client) => client.query(`create schema ${schema}`));
      const url = new URL(runUrl);
      url.searchParams.set('options', `-c search_path=${schema}`);
      return { databaseUrl: url.toString() };
    },
    inspect: (target, acked) =>
      checkRows((text, params) => withClient(target.databaseUrl, async (client) => (await client.query(text, params)).rows), acked),
    release: async (target) => {
      await withClient(runUrl, (client) => client.query(`drop schema if exists ${schemaOf(target)} cascade`));
    },
    close: async () => {
      await withClient(TEST_POSTGRES_URL, (client) => client.query(`drop database if exists ${name} with (force)`));
    },
  };
}

function positiveInteger(flag: string, value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) {
    console.log(`${flag} must be a positive integer, not ${JSON.stringify(value)}`);
    process.exit(2);
  }
  return parsed;
}

function database(value: string): 'sqlite' | 'postgres' {
  if (value === 'sqlite' || value === 'postgres') return value;
  console.log(`--database must be sqlite, postgres or both, not ${JSON.stringify(value)}`);
  process.exit(2);
}

function formatMs(ms: number): string {
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}
