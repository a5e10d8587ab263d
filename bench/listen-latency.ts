/*
 * `npm run bench:listen [-- --postgres] [--rounds 3] [--seconds 10] [--label L]`: how long a webhook
 * takes from intake's 202 to the developer's local handler through `intake listen`, at 10
 * and at 500 webhooks a second (issue 37's goal: p50 under 100 ms on loopback, with the long
 * poll woken by the commit rather than by a timer).
 *
 * One intake (dist/, on a fresh SQLite file or PostgreSQL database), one `intake listen`
 * child process, the local handler it forwards to (the bench's nginx receiver, a process of
 * its own as a developer's app is) and an open-loop sender in this process. The lag is
 * measured as the destinations' is (delivery.ts's lagOf): from each 202 reaching the sender
 * to the same webhook's first request reaching the receiver, both on the wall clock to the
 * millisecond, matched by uuid (the 202's `uuid`, the forward's `intake-webhook-id`). Each
 * round runs every rate twice, without the listener and with it, so the 202's own latency
 * beside a listener is measured next to intake without one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { smallEventBody } from './event-body.js';
import { median } from './closed-loop.js';
import { AcceptedLog, lagOf, type LagResult } from './delivery.js';
import { startOpenLoop, type OpenLoopResult } from './open-loop.js';
import { Receiver } from './receiver.js';
import { logTail, machineBusyPercent, runCli, SECRETS_ENV, sleep, startServer, stopServer, type ServerProcess } from './processes.js';

const { values: args } = parseArgs({
  options: {
    postgres: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    label: { type: 'string' },
  },
});
const RATES = [10, 500];
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
/** How long after its load the last forwards may still arrive before they count as missing. */
const ARRIVAL_WAIT_MS = 30_000;
const root = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const workDir = mkdtempSync(`${tmpdir()}/intake-listen-bench-`);

/** The lines `intake listen` always prints on stderr; the others (a reconnection, a refusal) are findings. */
const ROUTINE_LINE = /^(listening to |Ctrl-C stops|stopped; )/;

/** `intake listen --json --from-now`, resolved once it follows the feed. */
async function startListener(service: ServerProcess, key: string, receiver: Receiver): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [`${root}/dist/cli/main.js`, 'listen', '--url', `http://127.0.0.1:${service.port}`, '--key', key, '--forward-to', `http://127.0.0.1:${receiver.server.port}/webhooks`, '--from-now', '--json'],
    { env: { ...process.env, ...SECRETS_ENV, INTAKE_CONFIG_DIR: `${workDir}/config` }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    for (const line of chunk.split('\n')) if (line !== '' && !ROUTINE_LINE.test(line)) process.stderr.write(`  intake listen: ${line}\n`);
  });
  const deadline = Date.now() + 30_000;
  while (!/^listening to /m.test(stderr)) {
    if (child.exitCode !== null) throw new Error(`intake listen exited with ${child.exitCode}:\n${stderr}`);
    if (Date.now() > deadline) throw new Error(`intake listen did not start within 30 s:\n${stderr}`);
    await sleep(50);
  }
  return child;
}

interface Phase {
  rate: number;
  listening: boolean;
  /** The 202s: intake's own latency, from the time each request was due. */
  accepted: OpenLoopResult['latencyMs'];
  statuses: Record<string, number>;
  /** From each 202 to the local handler's first receipt of the same webhook; null without a listener. */
  forward: LagResult | null;
}

async function runPhase(target: { url: string; headers: Record<string, string>; body: Buffer }, rate: number, receiver: Receiver | null): Promise<Phase> {
  const acceptedLog = new AcceptedLog();
  const seenBefore = receiver?.count() ?? 0;
  const run = startOpenLoop(
    { name: 'intake', ...target },
    { ratePerSecond: rate, seconds: SECONDS, warmupSeconds: 1, maxConnections: 64, timeoutMs: 10_000, onAnswer: acceptedLog.onAnswer },
  );
  const result = await run.finished;
  const phase = { rate, listening: receiver !== null, accepted: result.latencyMs, statuses: result.statuses };
  if (receiver === null) return { ...phase, forward: null };
  // The warm-up's webhooks are forwarded too, but only the measured ones' 202s are logged.
  const deadline = Date.now() + ARRIVAL_WAIT_MS;
  let forward = lagOf(acceptedLog, receiver.arrivals(seenBefore));
  while (forward.delivered < forward.accepted && Date.now() < deadline) {
    await sleep(200);
    forward = lagOf(acceptedLog, receiver.arrivals(seenBefore));
  }
  return { ...phase, forward };
}

async function main(): Promise<void> {
  const busyBeforeStartPercent = await machineBusyPercent();
  const database: BenchDatabase = await createBenchDatabase(args.postgres ? 'postgres' : 'sqlite', workDir, 'listen');
  const stopping: ServerProcess[] = [];
  const service = await startServer(`${root}/dist/main.js`, { INTAKE_DATABASE_URL: database.url }, `${workDir}/service.log`, '/readyz');
  let listener: ChildProcess | undefined;
  try {
    const company = await runCli(root, database.url, ['company', 'create', '--name', 'listen bench']);
    const integration = await runCli(root, database.url, ['integration', 'create', '--company', String(company.id), '--name', 'local']);
    const key = await runCli(root, database.url, ['key', 'create', '--company', String(company.id), '--scope', 'logs:read']);
    const body = smallEventBody();
    const target = {
      url: `http://127.0.0.1:${service.port}/api/webhooks/${String(integration.integration_key)}`,
      headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
      body: body.bytes,
    };
    const receiver = await Receiver.start(workDir, 'intake-webhook-id');
    stopping.push(receiver.server);
    const phases: Phase[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const rate of RATES) {
        const without = await runPhase(target, rate, null);
        listener = await startListener(service, String(key.api_key), receiver);
        const withListener = await runPhase(target, rate, receiver);
        listener.kill('SIGINT');
        await new Promise((resolve) => listener!.once('exit', resolve));
        listener = undefined;
        phases.push(without, withListener);
        const forward = withListener.forward!;
        process.stdout.write(
          `round ${round}, ${rate}/s: 202 → local request p50 ${forward.lagMs.p50}, p99 ${forward.lagMs.p99}, max ${forward.lagMs.max} ms ` +
            `(${forward.delivered} of ${forward.accepted} forwarded, ${forward.duplicates} twice); ` +
            `the 202 itself p50/p99 ${without.accepted.p50}/${without.accepted.p99} ms without a listener, ${withListener.accepted.p50}/${withListener.accepted.p99} with\n`,
        );
      }
    }
    const summary = RATES.map((rate) => {
      const withListener = phases.filter((phase) => phase.rate === rate && phase.listening);
      const without = phases.filter((phase) => phase.rate === rate && !phase.listening);
      return {
        rate,
        forwardP50Ms: median(withListener.map((phase) => phase.forward!.lagMs.p50)),
        forwardP99Ms: median(withListener.map((phase) => phase.forward!.lagMs.p99)),
        missing: withListener.reduce((sum, phase) => sum + phase.forward!.accepted - phase.forward!.delivered, 0),
        acceptedP50Ms: { without: median(without.map((phase) => phase.accepted.p50)), with: median(withListener.map((phase) => phase.accepted.p50)) },
        acceptedP99Ms: { without: median(without.map((phase) => phase.accepted.p99)), with: median(withListener.map((phase) => phase.accepted.p99)) },
      };
    });
    for (const line of summary) {
      process.stdout.write(
        `${line.rate}/s, median of ${ROUNDS}: 202 → local request p50 ${line.forwardP50Ms} ms, p99 ${line.forwardP99Ms} ms, ${line.missing} missing; ` +
          `202 p50 ${line.acceptedP50Ms.without} → ${line.acceptedP50Ms.with} ms, p99 ${line.acceptedP99Ms.without} → ${line.acceptedP99Ms.with} ms with a listener\n`,
      );
    }
    const store = args.postgres ? 'postgres' : 'sqlite';
    const date = new Date().toISOString().slice(0, 10);
    const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, busyBeforeStartPercent };
    const report = { date, store, label: args.label ?? null, seconds: SECONDS, rounds: ROUNDS, machine, summary, phases };
    const directory = `${root}/bench/results`;
    mkdirSync(directory, { recursive: true });
    const path = `${directory}/${date}-listen-${store}${args.label ? `-${args.label.replace(/[^a-z0-9-]/gi, '-')}` : ''}.json`;
    writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`written to ${path}\n`);
  } catch (error) {
    process.stderr.write(`${String(error)}\nservice log:\n${logTail(service.logPath)}\n`);
    process.exitCode = 1;
  } finally {
    listener?.kill('SIGKILL');
    for (const server of [service, ...stopping]) await stopServer(server);
    await database.drop();
    rmSync(workDir, { recursive: true, force: true });
  }
  process.exit();
}

await main();
