import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { runClosedLoop, summarize, type LoadTarget } from './closed-loop.js';
import { loadEventBody, smallEventBody } from './event-body.js';
import { cpuMicroseconds, threadBusySeconds } from './machine-load.js';
import { peakRssMb, runCli, startServer, stopServer, type ServerProcess } from './processes.js';
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
  },
});
const root = fileURLToPath(new URL('..', import.meta.url));
const serviceRoots = args['service-root'] ?? [root];
const store = args.postgres ? 'postgres' : 'sqlite';
if (args.body !== 'push' && args.body !== 'small') throw new Error(`--body is push or small, not ${args.body}`);
const body = args.body === 'small' ? smallEventBody() : loadEventBody();

const workDir = await mkdtemp(join(tmpdir(), 'intake-in-place-'));
const databases: BenchDatabase[] = [];
const servers: ServerProcess[] = [];
try {
  // Each with its server's process, whose peak RSS the summary reports.
  const targets: Array<LoadTarget & { pid: number }> = [];
  for (const [index, serviceRoot] of serviceRoots.entries()) {
    const database = await createBenchDatabase(store, workDir, `service${index}`);
    databases.push(database);
    const service = await startServer(`${serviceRoot}/dist/main.js`, { INTAKE_DATABASE_URL: database.url }, `${workDir}/service${index}.log`, '/readyz');
    servers.push(service);
    const company = await runCli(serviceRoot, database.url, ['company', 'create', '--name', 'in place']);
    const integration = await runCli(serviceRoot, database.url, ['integration', 'create', '--company', String(company.id), '--name', 'in place']);
    targets.push({
      name: serviceRoots.length === 1 ? 'service' : `service ${index} (${serviceRoot})`,
      pid: service.pid,
      url: `http://127.0.0.1:${service.port}/api/webhooks/${integration.integration_key}`,
      headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
      body: body.bytes,
      cpuMicroseconds: () => cpuMicroseconds([service.pid], args.postgres),
      // Builds before the metric have none: their rounds then show no shares.
      threadBusySeconds: () => threadBusySeconds(`http://127.0.0.1:${service.port}/metrics`).catch(() => ({})),
    });
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
  const rounds = await runClosedLoop(wrk, targets, {
    rounds: Number(args.rounds),
    seconds: Number(args.seconds),
    connections: Number(args.connections),
    warmupSeconds: 3,
  });
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
} finally {
  for (const server of servers) await stopServer(server);
  for (const database of databases) await database.drop();
  // The databases of a few rounds of 7 KB webhooks are gigabytes: never left behind.
  rmSync(workDir, { recursive: true, force: true });
}
