import { rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { alternate, runClosedLoop, summarize, type ClosedLoopHooks, type LoadTarget } from './closed-loop.js';
import { BenchDestination, describeLag, measureDeliveries, measureLag, type DeliveryRound } from './delivery.js';
import { loadEventBody, smallEventBody } from './event-body.js';
import { cpuMicroseconds, threadBusySeconds } from './machine-load.js';
import { describeOpenLoop, OPEN_LOOP_WARMUP_SECONDS } from './open-loop.js';
import { startOpenLoopProcess, type OpenLoopProcessOptions } from './open-loop-process.js';
import { startOtlpSink, type OtlpSink } from './otlp-sink.js';
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
 *
 * With `--tracing RATIO` (repeatable), this checkout's build (or `--tracing-root`'s) is
 * loaded once more for each RATIO, with tracing on (OpenTelemetry, `parentbased_traceidratio`
 * at RATIO) exporting to an OTLP sink on loopback (otlp-sink.ts): tracing's cost beside the
 * same build without it, and beside other builds given with `--service-root`.
 *
 * Nothing is written to bench/results unless `--out FILE` asks for the medians and every
 * round as JSON.
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
    tracing: { type: 'string', multiple: true },
    'tracing-root': { type: 'string' },
    out: { type: 'string' },
  },
});
const root = fileURLToPath(new URL('..', import.meta.url));
const serviceRoots = args['service-root'] ?? [root];
const tracingRatios = (args.tracing ?? []).map(Number);
if (!tracingRatios.every((ratio) => ratio >= 0 && ratio <= 1)) throw new Error(`--tracing is a sampling ratio from 0 to 1, not ${args.tracing?.join(', ')}`);
/** Each build given, then for each --tracing ratio this checkout's again, traced at that ratio. */
const services: Array<{ serviceRoot: string; ratio?: number }> = [
  ...serviceRoots.map((serviceRoot) => ({ serviceRoot })),
  ...tracingRatios.map((ratio) => ({ serviceRoot: args['tracing-root'] ?? root, ratio })),
];
const store = args.postgres ? 'postgres' : 'sqlite';
if (args.body !== 'push' && args.body !== 'small') throw new Error(`--body is push or small, not ${args.body}`);
const body = args.body === 'small' ? smallEventBody() : loadEventBody();

/** A build's destination target: the destination, what its closed-loop rounds delivered, and the hooks that measure them. */
interface Delivering {
  target: LoadTarget;
  destination: BenchDestination;
  rounds: DeliveryRound[];
  hooks: ClosedLoopHooks;
}

const workDir = await mkdtemp(join(tmpdir(), 'intake-in-place-'));
const databases: BenchDatabase[] = [];
const servers: ServerProcess[] = [];
const destinations: BenchDestination[] = [];
let sink: OtlpSink | undefined;
try {
  sink = tracingRatios.length === 0 ? undefined : await startOtlpSink();
  const tracingEnv = (ratio: number | undefined) =>
    sink &&
    ratio !== undefined && {
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: String(ratio),
    };
  // The receiver is on loopback, which destinations may not reach unless allowed.
  const receiver = args.destination ? await Receiver.start(workDir) : null;
  if (receiver) servers.push(receiver.server);
  // Each with its server's process, whose peak RSS the summary reports.
  const targets: Array<LoadTarget & { pid: number }> = [];
  /** Each build's plain target and, with --destination, its destination target with what its rounds delivered. */
  const builds: Array<{ plain: LoadTarget; delivering?: Delivering }> = [];
  for (const [index, { serviceRoot, ratio }] of services.entries()) {
    const database = await createBenchDatabase(store, workDir, `service${index}`);
    databases.push(database);
    const env = { INTAKE_DATABASE_URL: database.url, INTAKE_DESTINATION_ALLOW: '127.0.0.1/32', ...tracingEnv(ratio) };
    const service = await startServer(`${serviceRoot}/dist/main.js`, env, `${workDir}/service${index}.log`, '/readyz');
    servers.push(service);
    const name = services.length === 1 ? 'service' : `service ${index} (${serviceRoot}${ratio === undefined ? '' : `, traced at ${ratio}`})`;
    /** A company with one integration, and the target that sends to it. */
    const companyTarget = async (targetName: string) => {
      const company = await runCli(serviceRoot, database.url, ['company', 'create', '--name', targetName]);
      const integration = await runCli(serviceRoot, database.url, ['integration', 'create', '--company', String(company.id), '--name', targetName]);
      const target: LoadTarget & { pid: number } = {
        name: targetName,
        pid: service.pid,
        url: `http://127.0.0.1:${service.port}/api/webhooks/${integration.integration_key}`,
        headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
        body: body.bytes,
        cpuMicroseconds: () => cpuMicroseconds([service.pid], args.postgres),
        // Builds before the metric have none: their rounds then show no shares.
        threadBusySeconds: () => threadBusySeconds(`http://127.0.0.1:${service.port}/metrics`).catch(() => ({})),
      };
      targets.push(target);
      return { target, companyId: String(company.id), integrationId: String(integration.id) };
    };
    const { target: plain } = await companyTarget(name);
    if (!receiver) {
      builds.push({ plain });
      continue;
    }
    // Another company, since the outbox reads the destinations of the companies in each
    // commit: the plain target's must have none.
    const { target, companyId, integrationId } = await companyTarget(`${name} + destination`);
    const destination = await BenchDestination.create(serviceRoot, database.url, {
      companyId,
      integrationId,
      url: `http://127.0.0.1:${receiver.server.port}/`,
      maxInFlight: Number(args['max-in-flight']),
    });
    destinations.push(destination);
    const rounds: DeliveryRound[] = [];
    builds.push({ plain, delivering: { target, destination, rounds, hooks: measureDeliveries(target, service.port, receiver, destination, rounds) } });
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
  const delivering = builds.flatMap((build) => (build.delivering ? [build.delivering] : []));
  const hooks = delivering.map((each) => each.hooks);
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
  if (sink) {
    const { exports, bytes, spans } = sink.counts;
    process.stdout.write(`OTLP sink: ${exports} exports, ${spans} spans, ${Math.round(bytes / 1024)} KiB\n`);
  }
  if (args.out !== undefined) {
    const summaries = targets.map((target) => {
      const summary = summarize(rounds, target.name);
      return { name: target.name, ...summary, ofFloor: summary.requestsPerSecond / floorRate, peakRssMb: peakRssMb(target.pid) };
    });
    const results = { date: new Date().toISOString(), store, body: { event: body.event, bytes: body.bytes.length }, closedLoop, tracingRatios, sink: sink?.counts, summaries, rounds };
    writeFileSync(args.out, `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(`results written to ${args.out}\n`);
  }
  const lagRate = args['lag-rate'] === undefined ? summarize(rounds, builds[0]?.plain.name ?? '').requestsPerSecond / 2 : Number(args['lag-rate']);
  for (const { plain, delivering: each } of builds) {
    if (!each) continue;
    const delivered = each.rounds.map((round) => round.deliveredToAccepted).sort((a, b) => a - b);
    const ratio = summarize(rounds, each.target.name).requestsPerSecond / summarize(rounds, plain.name).requestsPerSecond;
    process.stdout.write(`${each.target.name}: ${ratio.toFixed(2)} of the service without one; delivered / accepted in its rounds ${delivered.join(', ')}\n`);
  }
  const openLoop: OpenLoopProcessOptions = {
    ratePerSecond: lagRate,
    seconds: Number(args['lag-seconds']),
    warmupSeconds: OPEN_LOOP_WARMUP_SECONDS,
    maxConnections: 256,
    timeoutMs: 10_000,
  };
  for (let openRound = 1; openRound <= Number(args['open-rounds']); openRound++) {
    for (const { plain } of alternate(builds, openRound)) {
      await sleep(2_000);
      const load = await startOpenLoopProcess(plain, openLoop).finished;
      process.stdout.write(`open loop ${openRound}, ${plain.name} at ${Math.round(lagRate)}/s: ${describeOpenLoop(load)}\n`);
    }
  }
  for (let lagRound = 1; receiver && lagRound <= Number(args['lag-rounds']); lagRound++) {
    for (const { target, destination } of alternate(delivering, lagRound)) {
      await sleep(2_000);
      const { load, drain, lag } = await measureLag(receiver, destination, (accepted) => startOpenLoopProcess(target, openLoop, accepted).finished);
      process.stdout.write(
        `lag ${lagRound}, ${target.name} at ${Math.round(lagRate)}/s: intake ${describeOpenLoop(load)}\n` +
          `  ${describeLag(lag)}; ${drain.pendingAtStop} pending at the stop\n`,
      );
    }
  }
} finally {
  await sink?.close();
  for (const destination of destinations) await destination.close();
  for (const server of servers) await stopServer(server);
  for (const database of databases) await database.drop();
  // The databases of a few rounds of 7 KB webhooks are gigabytes: never left behind.
  rmSync(workDir, { recursive: true, force: true });
}
