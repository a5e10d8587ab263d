/*
 * `npm run bench [-- --postgres] [--rounds N] [--seconds S] [--connections C]`
 *
 * One intake node (`node dist/main.js`) on a fresh database, and beside it a bare node:http
 * baseline, under the same load on this machine: closed-loop rounds for the maximum, an
 * open loop at half of it for latency, then twice the maximum for shedding and recovery.
 * Prints one table of measures against their targets and writes bench/results/.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { runClosedLoop, summarize, type LoadTarget } from './closed-loop.js';
import { loadEventBody } from './event-body.js';
import { startOpenLoop } from './open-loop.js';
import { runOverload } from './overload.js';
import {
  machineBusyPercent,
  peakRssMb,
  resetPeakRss,
  runCli,
  sleep,
  startServer,
  stopServer,
  type ServerProcess,
} from './processes.js';
import { formatTable, writeResults, type BenchResults } from './report.js';

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const { values: args } = parseArgs({
  options: {
    postgres: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
  },
});
const settings = {
  rounds: Number(args.rounds),
  seconds: Number(args.seconds),
  connections: Number(args.connections),
  warmupSeconds: 3,
};
const store = args.postgres ? 'postgres' : 'sqlite';
// Senders give up on an answer after this long (GitHub waits 10 s); later is a failure.
const SENDER_TIMEOUT_MS = 10_000;
// Independent senders do not share a small pool: enough connections that the service's own
// bound (its write queue of 10,000 by default), not the generator, decides what is shed.
const OVERLOAD_CONNECTIONS = 10_000;
const workDir = mkdtempSync(`${tmpdir()}/intake-bench-`);
const running: ServerProcess[] = [];
let database: BenchDatabase | null = null;

/** Stops what this run started; safe to call twice (normal end, then Ctrl-C or a failure). */
async function cleanUp(): Promise<void> {
  await Promise.all(running.splice(0).map(stopServer));
  await database?.drop();
  database = null;
}

process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));

async function main(): Promise<void> {
  const busyBeforeStartPercent = await machineBusyPercent();
  const body = loadEventBody();
  database = await createBenchDatabase(store, workDir);
  const serviceEnv = { INTAKE_DATABASE_URL: database.url };
  const service = await startServer(`${root}/dist/main.js`, serviceEnv, `${workDir}/service.log`, '/readyz');
  running.push(service);
  const baseline = await startServer(`${root}/dist-bench/baseline.js`, {}, `${workDir}/baseline.log`, '/', true);
  running.push(baseline);

  const company = await runCli(root, database.url, ['company', 'create', '--name', 'bench']);
  const integration = await runCli(root, database.url, [
    ...['integration', 'create', '--company', String(company.id), '--name', 'bench'],
  ]);
  const headers = { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) };
  // The same push, as GitHub sends it to a github source: its own body, signed. No
  // X-GitHub-Delivery, so neither target pays for an idempotency claim: the difference is
  // the signature's check (opening the secret, one HMAC over the body) and the provider's rules.
  const githubSecret = randomBytes(32).toString('hex');
  const githubSource = await runCli(root, database.url, [
    ...['integration', 'create', '--company', String(company.id), '--name', 'bench github'],
    ...['--source', 'github', '--secret', githubSecret],
  ]);
  const githubBody = body.providerBytes;
  const githubTarget: LoadTarget = {
    name: 'github source',
    url: `http://127.0.0.1:${service.port}/api/webhooks/${githubSource.integration_key}`,
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-hub-signature-256': `sha256=${createHmac('sha256', githubSecret).update(githubBody).digest('hex')}`,
    },
    body: githubBody,
  };
  const serviceTarget: LoadTarget = {
    name: 'service',
    url: `http://127.0.0.1:${service.port}/api/webhooks/${integration.integration_key}`,
    headers,
    body: body.bytes,
  };
  const baselineTarget: LoadTarget = {
    name: 'baseline',
    url: `http://127.0.0.1:${baseline.port}/`,
    headers,
    body: body.bytes,
  };
  process.stdout.write(`intake bench on ${store}, ${body.bytes.length} B ${body.event} event; work dir ${workDir}\n`);

  resetPeakRss(service.pid);
  resetPeakRss(baseline.pid);
  const rounds = await runClosedLoop([serviceTarget, baselineTarget, githubTarget], settings);
  const servicePeakRssMb = peakRssMb(service.pid);
  const baselinePeakRssMb = peakRssMb(baseline.pid);
  const serviceSummary = summarize(rounds, 'service');
  const baselineSummary = summarize(rounds, 'baseline');
  const githubSummary = summarize(rounds, 'github source');
  const maxRate = serviceSummary.requestsPerSecond;

  await sleep(2_000);
  process.stdout.write(`  open loop at ${Math.round(maxRate / 2)}/s for ${settings.seconds * 2} s\n`);
  const openLoop = await startOpenLoop(serviceTarget, {
    ratePerSecond: maxRate / 2,
    seconds: settings.seconds * 2,
    maxConnections: 256,
    timeoutMs: SENDER_TIMEOUT_MS,
  }).finished;

  await sleep(2_000);
  process.stdout.write(`  overload at ${Math.round(maxRate * 2)}/s for ${settings.seconds} s, then recovery\n`);
  resetPeakRss(service.pid);
  const overload = await runOverload(serviceTarget, {
    ratePerSecond: maxRate * 2,
    seconds: settings.seconds,
    maxConnections: OVERLOAD_CONNECTIONS,
    timeoutMs: SENDER_TIMEOUT_MS,
  });
  const overloadPeakRssMb = peakRssMb(service.pid);
  const aliveAfter = service.child.exitCode === null && (await fetch(`http://127.0.0.1:${service.port}/healthz`)).ok;

  running.splice(running.indexOf(service), 1);
  const serviceExitCode = await stopServer(service);
  const results: BenchResults = {
    date: new Date().toISOString().slice(0, 10),
    store,
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      node: process.version,
      busyBeforeStartPercent,
    },
    body: { source: body.source, event: body.event, bytes: body.bytes.length },
    settings,
    closedLoop: {
      rounds,
      service: serviceSummary,
      baseline: baselineSummary,
      serviceToBaseline: Math.round((maxRate / baselineSummary.requestsPerSecond) * 100) / 100,
      githubSource: githubSummary,
      githubSourceToService: Math.round((githubSummary.requestsPerSecond / maxRate) * 100) / 100,
      servicePeakRssMb,
      baselinePeakRssMb,
    },
    openLoop,
    overload: { ...overload, peakRssMb: overloadPeakRssMb, aliveAfter },
    serviceExitCode,
  };
  const path = writeResults(root, results);
  process.stdout.write(`\n${formatTable(results)}\n\nwritten to ${path}\n`);
}

main()
  .then(async () => {
    await cleanUp();
    rmSync(workDir, { recursive: true, force: true });
  })
  .catch(async (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? error}\nlogs kept in ${workDir}\n`);
    await cleanUp();
    process.exitCode = 1;
  });
