import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { runClosedLoop, summarize, type ClosedLoopHooks, type LoadTarget } from './closed-loop.js';
import { AcceptedLog, BenchDestination, lagOf, measureDeliveries, type DeliveryRound } from './delivery.js';
import { loadEventBody, smallEventBody } from './event-body.js';
import { cpuMicroseconds, threadBusySeconds } from './machine-load.js';
import { describeOpenLoop, startOpenLoopProcess } from './open-loop-process.js';
import { peakRssMb, runCli, sleep, startServer, stopServer, type ServerProcess } from './processes.js';
import { Receiver } from './receiver.js';
import { Wrk } from './wrk.js';

/*
 * A quick A/B of builds, closed loop only (`npm run bench:in-place`): one or more builds of
 * the service (`--service-root`, repeatable; this checkout by default), each alone on a
 * database of its own, and the durable floor, loaded in turn by wrk at 64 connections,
 * alternating which goes first, for a few rounds. Each round prints the rate, latencies, CPU
 * a request, the service's threads' busy shares and its peak RSS; the end, each target's
 * medians and its ratio to the floor. 102 s for one build (about 50 s more for each other
 * build), where `npm run bench` takes seven minutes: for deciding whether a change moves
 * the rate, before the whole bench records it.
 *
 * With `--destination`, each build also gets an integration of another company with one
 * destination (every event, `--max-in-flight`, 100 by default) to an nginx receiver, loaded
 * in the same rounds: the receiver's rate and the backlog's drain after each. Then, builds
 * alternating, `--lag-rounds` open loops of `--lag-seconds` at `--lag-rate` a second (half
 * of the first build's median without a destination, by default) to that integration,
 * each with the lag from 202 to the receiver's first request, as `npm run bench` measures
 * it at the end of its run.
 *
 * With `--open-rounds N`, N open loops of `--lag-seconds` at that rate to each build's
 * plain target, builds alternating: the latency at half load without a destination.
 * Nothing is written to bench/results.
 */

const { values: args } = parseArgs({
  options: {
    'service-root': { type: 'string', multiple: true },
    postgres: { type: 'boolean', default: false },
    body: { type: 'string', default: 'push' },
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '8' },
    connections: { type: 'string', default: '64' },
    destination: { type: 'boolean', default: false },
    'max-in-flight': { type: 'string', default: '100' },
    'lag-rate': { type: 'string' },
    'lag-rounds': { type: 'string', default: '2' },
    'lag-seconds': { type: 'string', default: '20' },
    'open-rounds': { type: 'string', default: '0' },
  },
});
/** The open loops' first seconds, measured apart (open-loop.ts: the generator starting). */
const OPEN_LOOP_WARMUP_SECONDS = 2;
/** How long the backlog may take to empty after a load before it is cancelled. */
const DRAIN_MAX_MS = 15_000;
const root = fileURLToPath(new URL('..', import.meta.url));
const serviceRoots = args['service-root'] ?? [root];
const store = args.postgres ? 'postgres' : 'sqlite';
if (args.body !== 'push' && args.body !== 'small') throw new Error(`--body is push or small, not ${args.body}`);
const body = args.body === 'small' ? smallEventBody() : loadEventBody();

const workDir = await mkdtemp(join(tmpdir(), 'intake-in-place-'));
const databases: BenchDatabase[] = [];
const servers: ServerProcess[] = [];
const destinations: BenchDestination[] = [];
try {
  // The receiver is on loopback, which destinations may not reach unless allowed.
  const receiver = args.destination ? await Receiver.start(workDir) : null;
  if (receiver) servers.push(receiver.server);
  // Each with its server's process, whose peak RSS the summary reports.
  const targets: Array<LoadTarget & { pid: number }> = [];
  /** Each build's destination target, with what its rounds delivered. */
  const delivering: Array<{ target: LoadTarget; destination: BenchDestination; port: number; rounds: DeliveryRound[] }> = [];
  for (const [index, serviceRoot] of serviceRoots.entries()) {
    const database = await createBenchDatabase(store, workDir, `service${index}`);
    databases.push(database);
    const env = { INTAKE_DATABASE_URL: database.url, INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' };
    const service = await startServer(`${serviceRoot}/dist/main.js`, env, `${workDir}/service${index}.log`, '/readyz');
    servers.push(service);
    const name = serviceRoots.length === 1 ? 'service' : `service ${index} (${serviceRoot})`;
    const target = async (companyName: string): Promise<LoadTarget & { pid: number; companyId: string; integrationId: string }> => {
      const company = await runCli(serviceRoot, database.url, ['company', 'create', '--name', companyName]);
      const integration = await runCli(serviceRoot, database.url, ['integration', 'create', '--company', String(company.id), '--name', companyName]);
      return {
        name,
        pid: service.pid,
        companyId: String(company.id),
        integrationId: String(integration.id),
        url: `http://127.0.0.1:${service.port}/api/webhooks/${integration.integration_key}`,
        headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
        body: body.bytes,
        cpuMicroseconds: () => cpuMicroseconds([service.pid], args.postgres),
        // Builds before the metric have none: their rounds then show no shares.
        threadBusySeconds: () => threadBusySeconds(`http://127.0.0.1:${service.port}/metrics`).catch(() => ({})),
      };
    };
    targets.push(await target('in place'));
    if (receiver) {
      // Another company, since the outbox reads the destinations of the companies in each
      // commit: the plain target's must have none.
      const withDestination = { ...(await target('in place, delivering')), name: `${name} + destination` };
      const destination = await BenchDestination.create(serviceRoot, database.url, {
        companyId: withDestination.companyId,
        integrationId: withDestination.integrationId,
        url: `http://127.0.0.1:${receiver.server.port}/`,
        maxInFlight: Number(args['max-in-flight']),
      });
      destinations.push(destination);
      targets.push(withDestination);
      delivering.push({ target: withDestination, destination, port: service.port, rounds: [] });
    }
  }
  const floorDatabase = await createBenchDatabase(store, workDir, 'floor');
  databases.push(floorDatabase);
  const floor = await startServer(`${root}/dist-bench/floor.js`, { FLOOR_DATABASE_URL: floorDatabase.url }, `${workDir}/floor.log`, '/', true);
  servers.push(floor);
  targets.push({
    name: 'floor',
    pid: floor.pid,
    url: `http://127.0.0.1:${floor.port}/api/webhooks/in-place`,
    headers: { 'content-type': 'application/json' },
    body: body.bytes,
    cpuMicroseconds: () => cpuMicroseconds([floor.pid], args.postgres),
  });

  process.stdout.write(`in place on ${store}, ${body.bytes.length} B ${body.event} event, ${args.connections} connections\n`);
  const wrk = await Wrk.prepare(workDir, 10);
  const hooks = receiver
    ? delivering.map(({ target, destination, port, rounds }) => measureDeliveries(target, port, receiver, destination, rounds, DRAIN_MAX_MS))
    : [];
  const everyHook: ClosedLoopHooks = {
    beforeFire: async (target, round) => {
      for (const hook of hooks) await hook.beforeFire?.(target, round);
    },
    afterFire: async (target, round, result) => {
      for (const hook of hooks) await hook.afterFire?.(target, round, result);
    },
  };
  const closedLoop = { rounds: Number(args.rounds), seconds: Number(args.seconds), connections: Number(args.connections), warmupSeconds: 3 };
  const rounds = await runClosedLoop(wrk, targets, closedLoop, everyHook);
  const floorRate = summarize(rounds, 'floor').requestsPerSecond;
  for (const target of targets) {
    const summary = summarize(rounds, target.name);
    const rates = rounds.filter((round) => round.target === target.name).map((round) => round.requestsPerSecond);
    process.stdout.write(
      `${target.name}: median of ${rates.length} rounds ${Math.round(summary.requestsPerSecond)} req/s (${(summary.requestsPerSecond / floorRate).toFixed(2)} of the floor; ` +
        `rounds ${Math.min(...rates)}-${Math.max(...rates)}), p50 ${summary.p50.toFixed(1)} ms, p99 ${summary.p99.toFixed(1)} ms, ` +
        `${summary.cpuPerRequestUs} µs of CPU a request, peak RSS since start ${peakRssMb(target.pid)} MB\n`,
    );
  }
  const lagRate = args['lag-rate'] === undefined ? summarize(rounds, targets[0]?.name ?? '').requestsPerSecond / 2 : Number(args['lag-rate']);
  for (const { target, rounds: deliveryRounds } of delivering) {
    const plain = summarize(rounds, target.name.replace(/ \+ destination$/, '')).requestsPerSecond;
    const withDestination = summarize(rounds, target.name).requestsPerSecond;
    const delivered = deliveryRounds.map((round) => round.deliveredToAccepted).sort((a, b) => a - b);
    process.stdout.write(
      `${target.name}: ${(withDestination / plain).toFixed(2)} of the service without one; delivered / accepted in its rounds ${delivered.join(', ')}\n`,
    );
  }
  const plainTargets = targets.filter((target) => target.name !== 'floor' && !target.name.endsWith(' + destination'));
  for (let openRound = 1; openRound <= Number(args['open-rounds']); openRound++) {
    for (const target of openRound % 2 === 1 ? plainTargets : [...plainTargets].reverse()) {
      await sleep(2_000);
      const load = await startOpenLoopProcess(target, {
        ratePerSecond: lagRate,
        seconds: Number(args['lag-seconds']),
        warmupSeconds: OPEN_LOOP_WARMUP_SECONDS,
        maxConnections: 256,
        timeoutMs: 10_000,
      }).finished;
      process.stdout.write(`open loop ${openRound}, ${target.name} at ${Math.round(lagRate)}/s: ${describeOpenLoop(load)}\n`);
    }
  }
  for (let lagRound = 1; receiver && lagRound <= Number(args['lag-rounds']); lagRound++) {
    for (const { target, destination } of lagRound % 2 === 1 ? delivering : [...delivering].reverse()) {
      await sleep(2_000);
      const accepted = new AcceptedLog();
      const arrivalsFrom = receiver.count();
      const load = await startOpenLoopProcess(
        target,
        { ratePerSecond: lagRate, seconds: Number(args['lag-seconds']), warmupSeconds: OPEN_LOOP_WARMUP_SECONDS, maxConnections: 256, timeoutMs: 10_000 },
        accepted,
      ).finished;
      const drain = await destination.drain(DRAIN_MAX_MS);
      const lag = lagOf(accepted, receiver.arrivals(arrivalsFrom));
      process.stdout.write(
        `lag ${lagRound}, ${target.name} at ${Math.round(lagRate)}/s: intake ${describeOpenLoop(load)}\n  ${lag.delivered} of ${lag.accepted} delivered ` +
          `(${lag.duplicates} twice), lag p50 ${lag.lagMs.p50} ms, p99 ${lag.lagMs.p99} ms; ${drain.pendingAtStop} pending at the stop\n` +
          `  lag p99 by second: ${lag.bySecond.map((second) => Math.round(second.p99)).join(' ')} ms\n`,
      );
    }
  }
} finally {
  for (const destination of destinations) await destination.close();
  for (const server of servers) await stopServer(server);
  for (const database of databases) await database.drop();
  // The databases of a few rounds of 7 KB webhooks are gigabytes: never left behind.
  rmSync(workDir, { recursive: true, force: true });
}
