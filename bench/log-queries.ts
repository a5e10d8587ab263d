/*
 * `npm run bench:queries [-- --postgres] [--rows N] [--runs N] [--keep PATH]`
 *
 * The contract's list queries on a large company: seeds one company with `--rows`
 * webhooks (default 1,000,000) over the last 20 days through store.commitBatch, then times
 * each query through the store, `--runs` times after a warm-up, against the targets.
 * SQLite runs on a file in a temp dir, or on `--keep PATH`, which a later run reuses instead
 * of seeding again; `--postgres` on a fresh database at BENCH_POSTGRES_URL (default the
 * local server), dropped at the end. Prints one table and writes bench/results/.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Cursor } from '../src/domain/cursor.js';
import { openStore } from '../src/store/open-store.js';
import type { Store } from '../src/store/store.js';
import type { Owner } from '../test/support/webhooks.js';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { formatTable, measure, type QueryCase, type QueryResult } from './log-queries/measure.js';
import { DAYS, customerId, mulberry32, postgresSizes, preparePartitions, seed, seedRange, vacuumAnalyze, type Fixture } from './log-queries/seed.js';

const PAGE = 50;
const WARMUP = 20;
/** The deep page of the cursor case: the client followed next_cursor 99 times. */
const DEEP_PAGE = 100;
const RANGE_MS = 3 * 60 * 60 * 1000;

const { values: args } = parseArgs({
  options: {
    postgres: { type: 'boolean', default: false },
    rows: { type: 'string', default: '1000000' },
    runs: { type: 'string', default: '200' },
    keep: { type: 'string' },
  },
});
const rows = Number(args.rows);
const runs = Number(args.runs);
const dialect = args.postgres ? 'postgres' : 'sqlite';
const workDir = mkdtempSync(`${tmpdir()}/intake-bench-queries-`);
let database: BenchDatabase | null = null;

/** The seeding a run did, or that it reused from `--keep`. */
interface Seeding {
  reused: boolean;
  seconds: number;
  rowsPerSecond: number;
  batchSize: number;
  vacuumAnalyzeSeconds?: number;
}

async function cleanUp(): Promise<void> {
  await database?.drop();
  database = null;
  rmSync(workDir, { recursive: true, force: true });
}

process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));

async function main(): Promise<void> {
  if (!(Number.isInteger(rows) && rows >= 100_000 && Number.isInteger(runs) && runs > 0)) {
    throw new Error('--rows must be an integer of at least 100000 (page 100 of the smallest integration), --runs a positive integer');
  }
  if (args.keep !== undefined && args.postgres) throw new Error('--keep names a SQLite file; it does not apply to --postgres');
  const loadAverageAtStart = Math.round((loadavg()[0] ?? 0) * 100) / 100;
  database = await createBenchDatabase(dialect, workDir);
  const url = args.keep === undefined ? database.url : `sqlite:${args.keep}`;
  // Read before the store opens: opening makes the file.
  const kept = args.keep === undefined ? undefined : readKept(args.keep);
  const store = openStore(url, { poolSize: 4 });
  try {
    await store.migrate();
    let fixture: Fixture;
    let seeding: Seeding;
    if (kept) {
      ({ fixture, seeding } = kept);
      seeding = { ...seeding, reused: true };
      process.stdout.write(`reusing ${args.keep}: ${fixture.rows.toLocaleString('en')} webhooks seeded before\n`);
    } else {
      const range = seedRange(Date.now());
      if (dialect === 'postgres') await preparePartitions(url, range);
      process.stdout.write(`seeding ${rows.toLocaleString('en')} webhooks on ${dialect}\n`);
      const seeded = await seed(store, rows, range, (line) => process.stdout.write(`${line}\n`));
      fixture = seeded.fixture;
      seeding = { reused: false, ...seeded.report };
      if (dialect === 'postgres') seeding.vacuumAnalyzeSeconds = await vacuumAnalyze(url);
      if (args.keep !== undefined) writeFileSync(keptPath(args.keep), `${JSON.stringify({ fixture, seeding }, null, 2)}\n`);
    }
    const size = dialect === 'postgres' ? await postgresSizes(url) : { databaseMb: fileMb(url.slice('sqlite:'.length)) };

    const results: QueryResult[] = [];
    for (const query of await queryCases(store, fixture)) {
      results.push(await measure(query, runs, WARMUP));
      const last = results.at(-1)!;
      process.stdout.write(`  ${last.name}: p50 ${last.p50} ms, p95 ${last.p95} ms\n`);
    }
    const date = new Date().toISOString().slice(0, 10);
    const title =
      `intake log queries, ${dialect}, ${date}: ${fixture.rows.toLocaleString('en')} webhooks (${fixture.averageBodyBytes} B ` +
      `bodies avg) of 1 company, ${fixture.integrations.length} integrations, ${fixture.events.length} events, ${DAYS} days; ` +
      `seeded at ${seeding.rowsPerSecond.toLocaleString('en')} rows/s${seeding.reused ? ' (reused)' : ''}; ` +
      `${runs} runs each after ${WARMUP}; ${cpus().length} cores, load average ${loadAverageAtStart} at start`;
    const report = {
      date,
      dialect,
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, loadAverageAtStart },
      settings: { rows: fixture.rows, runs, warmup: WARMUP, pageSize: PAGE, deepPage: DEEP_PAGE, rangeHours: RANGE_MS / 3_600_000 },
      fixture: { ...fixture, integrations: fixture.integrations.length },
      seeding,
      size,
      queries: results,
    };
    const path = writeReport(report, `${date}-queries-${dialect}.json`);
    process.stdout.write(`\n${formatTable(title, results)}\n\nwritten to ${path}\n`);
  } finally {
    await store.close();
  }
}

/**
 * The queries of the contract and of the management API, each run as a client would send
 * it: one integration after another (their traffic differs), every event, windows all over
 * the 20 days, another customer's id for every search.
 */
async function queryCases(store: Store, fixture: Fixture): Promise<QueryCase[]> {
  const { companyId, integrations, events } = fixture;
  const owner = (i: number) => integrations[i % integrations.length]!;
  const deepCursors: Cursor[] = [];
  for (const integration of integrations) deepCursors.push(await cursorOfPage(store, integration, DEEP_PAGE));
  const random = mulberry32(7);
  const windows = Array.from({ length: runs + WARMUP }, () => {
    const since = Math.floor(fixture.from + random() * (fixture.to - fixture.from - RANGE_MS));
    return { since, until: since + RANGE_MS };
  });
  const list = async (i: number, query: Parameters<Store['listWebhooks']>[2]) =>
    (await store.listWebhooks(companyId, owner(i).integrationId, query)).length;
  const rarest = events.at(-1)!;
  return [
    { name: 'newest page (one integration)', targetMs: 5, run: (i) => list(i, { limit: PAGE }) },
    {
      name: `page ${DEEP_PAGE} by cursor`,
      targetMs: 20,
      run: (i) => list(i, { limit: PAGE, cursor: deepCursors[i % integrations.length]! }),
    },
    {
      name: 'by event, newest page',
      targetMs: 20,
      run: (i) => list(i, { limit: PAGE, event: events[Math.floor(i / integrations.length) % events.length]! }),
    },
    { name: 'time range (3 h), first page', targetMs: 20, run: (i) => list(i, { limit: PAGE, ...windows[i]! }) },
    {
      name: 'company-wide newest page',
      run: async () => (await store.listCompanyWebhooks(companyId, { limit: PAGE })).webhooks.length,
    },
    {
      name: `company-wide, rarest event (${rarest})`,
      run: async () => (await store.listCompanyWebhooks(companyId, { limit: PAGE, event: rarest })).webhooks.length,
    },
    // The request log (an accepted webhook's record is in its webhook's row since migration
    // 0010; the seed's requests are all accepted).
    {
      name: 'request log, company-wide newest page',
      run: async () => (await store.listCompanyRequestLog(companyId, { limit: PAGE })).length,
    },
    {
      name: 'request log, newest page (one integration)',
      run: async (i) => (await store.listCompanyRequestLog(companyId, { limit: PAGE, integrationId: owner(i).integrationId })).length,
    },
    {
      name: 'usage of 3 h, by minute',
      run: async (i) => (await store.countUsage(companyId, { bucketMs: 60_000, ...windows[i]! })).length,
    },
    {
      name: 'payload search (customer id)',
      run: async (i) =>
        (await store.listCompanyWebhooks(companyId, { limit: PAGE, text: customerId((i * 7919) % fixture.customers) })).webhooks.length,
    },
  ];
}

/** The cursor a client holds after reading `page - 1` pages of the integration, newest first. */
async function cursorOfPage(store: Store, owner: Owner, page: number): Promise<Cursor> {
  let cursor: Cursor | undefined;
  for (let read = 1; read < page; read++) {
    const last = (await store.listWebhooks(owner.companyId, owner.integrationId, { limit: PAGE, cursor })).at(-1);
    if (!last) throw new Error(`integration ${owner.integrationId} has fewer than ${page} pages`);
    cursor = { receivedAt: last.receivedAt, uuid: last.uuid };
  }
  return cursor!;
}

/** `--keep PATH` keeps what it seeded beside the file, so a later run can aim at it. */
function keptPath(path: string): string {
  return `${path}.fixture.json`;
}

function readKept(path: string): { fixture: Fixture; seeding: Seeding } | undefined {
  const saved = existsSync(keptPath(path)) ? (JSON.parse(readFileSync(keptPath(path), 'utf8')) as { fixture: Fixture; seeding: Seeding }) : undefined;
  if (saved?.fixture.rows === rows) return saved;
  if (existsSync(path)) {
    throw new Error(`${path} exists but was not seeded by this benchmark with ${rows} rows; remove it or pass its --rows`);
  }
  return undefined;
}

function fileMb(path: string): number {
  const bytes = [path, `${path}-wal`].reduce((sum, file) => sum + (existsSync(file) ? statSync(file).size : 0), 0);
  return Math.round(bytes / 2 ** 20);
}

/** Writes the report into bench/results/ of the checkout this script runs from. */
function writeReport(report: object, name: string): string {
  let root = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(`${root}/package.json`) && root !== dirname(root)) root = dirname(root);
  mkdirSync(`${root}/bench/results`, { recursive: true });
  const path = `${root}/bench/results/${name}`;
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
  return path;
}

main()
  .then(cleanUp)
  .catch(async (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? error}\n`);
    await cleanUp();
    process.exitCode = 1;
  });
