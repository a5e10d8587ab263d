/*
 * `npm run bench [-- --postgres] [--rounds N] [--seconds S] [--connections C] [--max-in-flight N] [--label L] [--body push|small] [--service-root DIR] [--lag-rate R]`
 *
 * One intake node (`node dist/main.js`) on a fresh database, and beside it a durable floor
 * (floor.ts: node:http, group commit of two rows a webhook, on a fresh database of the same
 * kind) and a bare node:http baseline, under the same load on this machine: closed-loop
 * rounds (wrk) for the maximum, a curve over concurrency for the floor and intake, an open
 * loop at half of intake's maximum for latency, then twice it for shedding and recovery.
 * A fourth process, a receiver (nginx), is the destination of one integration: the closed loop
 * also loads that integration (intake with delivery against intake without), and a second
 * open loop at half the maximum measures the lag from each 202 to its delivery.
 * Prints the measures as ratios to the floor and against their targets, and writes
 * bench/results/.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { median, runClosedLoop, runConcurrencyCurve, summarize, type LoadTarget } from './closed-loop.js';
import { BenchDestination, claimsShed, describeLag, DRAIN_MAX_MS, measureDeliveries, measureLag, type DeliveryRound } from './delivery.js';
import { loadEventBody, smallEventBody } from './event-body.js';
import { cpuMicroseconds, loadBetween, sampleLoad, threadBusySeconds } from './machine-load.js';
import { describeOpenLoop, OPEN_LOOP_WARMUP_SECONDS } from './open-loop.js';
import { startOpenLoopProcess } from './open-loop-process.js';
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
import { Receiver } from './receiver.js';
import { formatTable, overloadShares, writeResults, type BenchResults } from './report.js';
import { SignedRequests } from './signed-requests.js';
import { Wrk } from './wrk.js';

/** What the redacting target's integration replaces before storing: five paths of the push (the small body has none of them). */
const REDACTION_PATHS = ['data.pusher.email', 'data.head_commit.author.email', 'data.head_commit.committer.email', '$..email', '$..phone'];

/** Signed requests made for each run of the github target: more than the fastest run sends (10 s at 4,000/s). */
const SIGNED_REQUESTS_PER_RUN = 80_000;
const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const { values: args } = parseArgs({
  options: {
    postgres: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    // The destination's requests in flight at most: 100 is what the API gives by default.
    'max-in-flight': { type: 'string', default: '100' },
    // Added to the result's file name, so a run does not replace the day's committed one.
    label: { type: 'string' },
    // `small`: a 180-byte event instead of GitHub's 7 KB push, where per-request work, not bytes, dominates.
    body: { type: 'string', default: 'push' },
    // Another checkout's build to run as the service (and its CLI), e.g. the code before a
    // change, built in a git worktree: the same harness, floor and baseline measure both.
    'service-root': { type: 'string' },
    // The lag phase's rate, per second, instead of half of this run's maximum: two builds
    // whose maxima differ are then asked for the same deliveries.
    'lag-rate': { type: 'string' },
  },
});
const serviceRoot = args['service-root'] ?? root;
if (args.body !== 'push' && args.body !== 'small') throw new Error(`--body is push or small, not ${args.body}`);
const settings = {
  generator: 'wrk -t1',
  rounds: Number(args.rounds),
  seconds: Number(args.seconds),
  connections: Number(args.connections),
  warmupSeconds: 3,
  // One short round per target and level: where each saturates, not its precise maximum.
  curveConnections: [16, 64, 256, 1024],
  curveSeconds: Math.max(1, Math.round(Number(args.seconds) / 2)),
};
const store = args.postgres ? 'postgres' : 'sqlite';
// Senders give up on an answer after this long (GitHub waits 10 s); later is a failure.
const SENDER_TIMEOUT_MS = 10_000;
// Independent senders do not share a small pool: enough connections that the service's own
// bound (its write queue of 10,000 by default), not the generator, decides what is shed.
const OVERLOAD_CONNECTIONS = 10_000;
const destinationMaxInFlight = Number(args['max-in-flight']);
const fixedLagRate = args['lag-rate'] === undefined ? undefined : Number(args['lag-rate']);
if (fixedLagRate !== undefined && !(fixedLagRate > 0)) throw new Error(`--lag-rate is a rate per second, not ${args['lag-rate']}`);
const workDir = mkdtempSync(`${tmpdir()}/intake-bench-`);
const running: ServerProcess[] = [];
const databases: BenchDatabase[] = [];
let destination: BenchDestination | null = null;

/** Stops what this run started; safe to call twice (normal end, then Ctrl-C or a failure). */
async function cleanUp(): Promise<void> {
  await destination?.close();
  destination = null;
  await Promise.all(running.splice(0).map(stopServer));
  await Promise.all(databases.splice(0).map((database) => database.drop()));
}

process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));

async function main(): Promise<void> {
  const busyBeforeStartPercent = await machineBusyPercent();
  const loadAtStart = sampleLoad([], store === 'postgres');
  const body = args.body === 'small' ? smallEventBody() : loadEventBody();
  const wrk = await Wrk.prepare(workDir, SENDER_TIMEOUT_MS / 1000);
  const database = await createBenchDatabase(store, workDir);
  databases.push(database);
  const deliveringDatabase = await createBenchDatabase(store, workDir, 'delivering');
  databases.push(deliveringDatabase);
  const floorDatabase = await createBenchDatabase(store, workDir, 'floor');
  databases.push(floorDatabase);
  const service = await startServer(`${serviceRoot}/dist/main.js`, { INTAKE_DATABASE_URL: database.url }, `${workDir}/service.log`, '/readyz');
  running.push(service);
  // Intake with a destination runs in a process of its own, on a database of its own: what
  // delivering leaves in memory (kept bodies, the read thread, connections) would otherwise
  // be counted in intake's own peak RSS, and its outbox in intake's database. The receiver
  // is on loopback, which destinations may not reach unless allowed.
  const deliveringEnv = { INTAKE_DATABASE_URL: deliveringDatabase.url, INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' };
  const deliveringService = await startServer(`${serviceRoot}/dist/main.js`, deliveringEnv, `${workDir}/delivering.log`, '/readyz');
  running.push(deliveringService);
  const floorEnv = { FLOOR_DATABASE_URL: floorDatabase.url };
  const floor = await startServer(`${root}/dist-bench/floor.js`, floorEnv, `${workDir}/floor.log`, '/', true);
  running.push(floor);
  const baseline = await startServer(`${root}/dist-bench/baseline.js`, {}, `${workDir}/baseline.log`, '/', true);
  running.push(baseline);
  const receiver = await Receiver.start(workDir);
  running.push(receiver.server);

  const company = await runCli(serviceRoot, database.url, ['company', 'create', '--name', 'bench']);
  const integration = await runCli(serviceRoot, database.url, [
    ...['integration', 'create', '--company', String(company.id), '--name', 'bench'],
  ]);
  const headers = { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) };
  // The same webhooks to an integration that redacts five paths before storing (issue 40):
  // three named from the root and two at any depth, so every body is scanned whole.
  const redacting = await runCli(serviceRoot, database.url, [
    ...['integration', 'create', '--company', String(company.id), '--name', 'bench redacting'],
    ...['--redaction', JSON.stringify({ paths: REDACTION_PATHS })],
  ]);
  // The same push, as GitHub sends it to a github source: its own body, signed. No
  // X-GitHub-Delivery, so neither target pays for an idempotency claim: the difference is
  // the signature's check (opening the secret, one HMAC over the body) and the provider's rules.
  const githubSecret = randomBytes(32).toString('hex');
  const githubSource = await runCli(serviceRoot, database.url, [
    ...['integration', 'create', '--company', String(company.id), '--name', 'bench github'],
    ...['--source', 'github', '--secret', githubSecret],
  ]);
  const githubBody = body.providerBytes;
  // CPU per request: the server's process, and on PostgreSQL the database server's, which
  // does part of the work for the service and the floor (the baseline stores nothing).
  const withPostgres = store === 'postgres';
  const serviceCpu = () => cpuMicroseconds([service.pid], withPostgres);
  const serviceThreads = () => threadBusySeconds(`http://127.0.0.1:${service.port}/metrics`);
  const githubTarget: LoadTarget = {
    name: 'github source',
    url: `http://127.0.0.1:${service.port}/api/webhooks/${githubSource.integration_key}`,
    headers: { 'content-type': 'application/json', 'x-github-event': 'push' },
    body: githubBody,
    // Each request a push of its own: a copy of a signed request is a replay (issue 33).
    signed: { requests: new SignedRequests('x-hub-signature-256', githubSecret, githubBody), perRun: SIGNED_REQUESTS_PER_RUN },
    cpuMicroseconds: serviceCpu,
    threadBusySeconds: serviceThreads,
  };
  // Intake with one destination: an integration of a company of the delivering process.
  const deliveringCompany = await runCli(serviceRoot, deliveringDatabase.url, ['company', 'create', '--name', 'bench destinations']);
  const delivering = await runCli(serviceRoot, deliveringDatabase.url, [
    ...['integration', 'create', '--company', String(deliveringCompany.id), '--name', 'bench destination'],
  ]);
  destination = await BenchDestination.create(serviceRoot, deliveringDatabase.url, {
    companyId: String(deliveringCompany.id),
    integrationId: String(delivering.id),
    url: `http://127.0.0.1:${receiver.server.port}/`,
    maxInFlight: destinationMaxInFlight,
  });
  const benchDestination = destination;
  const destinationTarget: LoadTarget = {
    name: 'service + destination',
    url: `http://127.0.0.1:${deliveringService.port}/api/webhooks/${delivering.integration_key}`,
    headers: { 'content-type': 'application/json', 'x-api-key': String(delivering.api_key) },
    body: body.bytes,
    // Intake and the deliveries made during the round; the receiver's own CPU is not counted.
    cpuMicroseconds: () => cpuMicroseconds([deliveringService.pid], withPostgres),
    threadBusySeconds: () => threadBusySeconds(`http://127.0.0.1:${deliveringService.port}/metrics`),
  };
  const serviceTarget: LoadTarget = {
    name: 'service',
    url: `http://127.0.0.1:${service.port}/api/webhooks/${integration.integration_key}`,
    headers,
    body: body.bytes,
    cpuMicroseconds: serviceCpu,
    threadBusySeconds: serviceThreads,
  };
  const redactingTarget: LoadTarget = {
    name: 'service + redaction',
    url: `http://127.0.0.1:${service.port}/api/webhooks/${redacting.integration_key}`,
    headers: { 'content-type': 'application/json', 'x-api-key': String(redacting.api_key) },
    body: body.bytes,
    cpuMicroseconds: serviceCpu,
    threadBusySeconds: serviceThreads,
  };
  // The service's path, so that the request line is the same length on every target.
  const floorTarget: LoadTarget = {
    name: 'floor',
    url: `http://127.0.0.1:${floor.port}/api/webhooks/${integration.integration_key}`,
    headers,
    body: body.bytes,
    cpuMicroseconds: () => cpuMicroseconds([floor.pid], withPostgres),
  };
  const baselineTarget: LoadTarget = {
    name: 'baseline',
    url: `http://127.0.0.1:${baseline.port}/`,
    headers,
    body: body.bytes,
    cpuMicroseconds: () => cpuMicroseconds([baseline.pid], false),
  };
  process.stdout.write(`intake bench on ${store}, ${body.bytes.length} B ${body.event} event; work dir ${workDir}\n`);

  for (const server of [service, deliveringService, floor, baseline]) resetPeakRss(server.pid);
  const deliveryRounds: DeliveryRound[] = [];
  const deliveryHooks = measureDeliveries(destinationTarget, deliveringService.port, receiver, benchDestination, deliveryRounds);
  const closedLoopTargets = [floorTarget, serviceTarget, destinationTarget, baselineTarget, githubTarget, redactingTarget];
  const rounds = await runClosedLoop(wrk, closedLoopTargets, settings, deliveryHooks);
  const servicePeakRssMb = peakRssMb(service.pid);
  const deliveringPeakRssMb = peakRssMb(deliveringService.pid);
  const floorPeakRssMb = peakRssMb(floor.pid);
  const baselinePeakRssMb = peakRssMb(baseline.pid);
  const serviceSummary = summarize(rounds, 'service');
  const floorSummary = summarize(rounds, 'floor');
  const baselineSummary = summarize(rounds, 'baseline');
  const githubSummary = summarize(rounds, 'github source');
  const redactingSummary = summarize(rounds, redactingTarget.name);
  const destinationSummary = summarize(rounds, destinationTarget.name);
  const maxRate = serviceSummary.requestsPerSecond;
  const toFloor = (requestsPerSecond: number) => Math.round((requestsPerSecond / floorSummary.requestsPerSecond) * 100) / 100;

  await sleep(2_000);
  process.stdout.write(`  concurrency curve: ${settings.curveConnections.join(', ')} connections, ${settings.curveSeconds} s each\n`);
  const curve = await runConcurrencyCurve(wrk, [floorTarget, serviceTarget], settings.curveConnections, settings.curveSeconds);
  // Many senders of webhooks open a connection for each one. Node 20 accepts one connection
  // per turn of its event loop (libuv#3696; strace in docs/performance-history.md, 2026-11-29), so
  // this rate is how short each server keeps its turns, not how fast it handles a request
  // on an open connection.
  process.stdout.write(`  a new connection for each request (Connection: close), ${settings.connections} connections, ${settings.curveSeconds} s each\n`);
  const closing = (target: LoadTarget): LoadTarget => ({ ...target, headers: { ...target.headers, connection: 'close' } });
  const newConnectionEach = await runConcurrencyCurve(wrk, [closing(floorTarget), closing(serviceTarget)], [settings.connections], settings.curveSeconds);

  await sleep(2_000);
  process.stdout.write(`  open loop at ${Math.round(maxRate / 2)}/s for ${settings.seconds * 2} s after ${OPEN_LOOP_WARMUP_SECONDS} s of warm-up\n`);
  const halfLoad = {
    ratePerSecond: maxRate / 2,
    seconds: settings.seconds * 2,
    warmupSeconds: OPEN_LOOP_WARMUP_SECONDS,
    maxConnections: 256,
    timeoutMs: SENDER_TIMEOUT_MS,
  };
  const openLoop = await startOpenLoopProcess(serviceTarget, halfLoad).finished;
  process.stdout.write(`    ${describeOpenLoop(openLoop)}\n`);
  // The floor at the same rate: what the disk and the machine leave of the 10 ms goal.
  await sleep(2_000);
  process.stdout.write(`  the same open loop to the floor\n`);
  const floorOpenLoop = await startOpenLoopProcess(floorTarget, halfLoad).finished;
  process.stdout.write(`    ${describeOpenLoop(floorOpenLoop)}\n`);

  await sleep(2_000);
  const lagRate = fixedLagRate ?? maxRate / 2;
  process.stdout.write(
    `  open loop at ${Math.round(lagRate)}/s for ${settings.seconds * 2} s after ${OPEN_LOOP_WARMUP_SECONDS} s of warm-up to the destination's integration\n`,
  );
  const shedBeforeLag = await claimsShed(deliveringService.port);
  const { load: lagLoad, drain: lagDrain, lag } = await measureLag(receiver, benchDestination, (accepted) =>
    startOpenLoopProcess(
      destinationTarget,
      { ratePerSecond: lagRate, seconds: settings.seconds * 2, warmupSeconds: OPEN_LOOP_WARMUP_SECONDS, maxConnections: 256, timeoutMs: SENDER_TIMEOUT_MS },
      accepted,
    ).finished,
  );
  // Read after the drain, which runs without intake's load: claims are shed only under it.
  const lagClaimsShed = (await claimsShed(deliveringService.port)) - shedBeforeLag;
  process.stdout.write(`    ${describeOpenLoop(lagLoad)}\n    ${describeLag(lag)}\n`);

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
  const during = loadBetween(loadAtStart, sampleLoad([service.pid, deliveringService.pid, floor.pid, baseline.pid, receiver.server.pid], store === 'postgres'));

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
      busyDuringPercent: during.busyPercent,
      othersDuringPercent: during.othersPercent,
    },
    body: { source: body.source, event: body.event, bytes: body.bytes.length },
    settings,
    closedLoop: {
      rounds,
      floor: floorSummary,
      service: serviceSummary,
      baseline: baselineSummary,
      serviceToFloor: toFloor(maxRate),
      baselineToFloor: toFloor(baselineSummary.requestsPerSecond),
      serviceToBaseline: Math.round((maxRate / baselineSummary.requestsPerSecond) * 100) / 100,
      githubSource: githubSummary,
      githubSourceToService: Math.round((githubSummary.requestsPerSecond / maxRate) * 100) / 100,
      redacting: redactingSummary,
      redactingToService: Math.round((redactingSummary.requestsPerSecond / maxRate) * 100) / 100,
      servicePeakRssMb,
      floorPeakRssMb,
      baselinePeakRssMb,
    },
    curve,
    newConnectionEach,
    openLoop,
    floorOpenLoop,
    destinations: {
      maxInFlight: destinationMaxInFlight,
      drainMaxSeconds: DRAIN_MAX_MS / 1000,
      closedLoop: destinationSummary,
      toService: Math.round((destinationSummary.requestsPerSecond / maxRate) * 100) / 100,
      rounds: deliveryRounds,
      deliveredPerSecond: median(deliveryRounds.map((round) => round.deliveredPerSecond)),
      deliveredToAccepted: median(deliveryRounds.map((round) => round.deliveredToAccepted)),
      maxPendingAtStop: Math.max(...deliveryRounds.map((round) => round.pendingAtStop)),
      slowestDrainSeconds: deliveryRounds.some((round) => round.drainedSeconds === null)
        ? null
        : Math.max(...deliveryRounds.map((round) => round.drainedSeconds ?? 0)),
      lagLoad,
      lag: { ...lag, drain: lagDrain, claimsShed: lagClaimsShed },
      receivedTotal: receiver.count(),
      peakRssMb: deliveringPeakRssMb,
    },
    overload: { ...overload, shares: overloadShares(overload), peakRssMb: overloadPeakRssMb, aliveAfter },
    serviceExitCode,
  };
  const path = writeResults(root, results, args.label);
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
