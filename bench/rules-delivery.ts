/*
 * `npm run bench:rules [-- --postgres] [--rounds 3] [--count 10000] [--window 10] [--seconds 8] [--connections 64] [--label L] [--cpu-prof DIR]`:
 * what a destination's rules cost (issue 36's goals: a filter under 5 % of a delivery, a
 * small transformation under 25 %, and intake's own throughput unchanged by either).
 *
 * One intake (dist/, on a fresh SQLite file or PostgreSQL database) and the bench's nginx
 * receiver. One company with a management key, and per variant an integration and a
 * destination made through the API: no rules, a filter every webhook passes, a small
 * transformation (the body reshaped, a header added). The webhook is the bench's 180 B
 * order (event-body.ts), so the filter lets each through and the same number is delivered.
 *
 * - drain: with the variant's destination paused, `--count` webhooks are committed to its
 *   integration (their deliveries held); then it is resumed and its backlog delivered.
 *   Deliveries a second from the first arrival at the receiver to the last; the service's
 *   CPU (and PostgreSQL's) per delivery until the outbox reads empty, or `--window` ends
 *   (what is left then is cancelled: a transformation's backlog waits for its company's
 *   share of the sandbox, src/destinations/delivery-rules.ts, and would take minutes).
 * - intake: wrk's closed loop on the variant's integration with its destination active, so
 *   its deliveries run beside intake: 202s a second, p99, and what was delivered meanwhile.
 *
 * After a warm-up round of each variant that is not counted, each round takes them in turn:
 * the drains in an order rotated by one each round (so over three rounds each variant is
 * first, second and third once, and a machine that slows down during the run hits all
 * alike), the closed loops in closed-loop.ts's order, reversed every other round.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { median, runClosedLoop, summarize, type ClosedLoopRound, type LoadTarget } from './closed-loop.js';
import { claimsShed } from './delivery.js';
import { smallEventBody } from './event-body.js';
import { ConnectionPool } from './http-connections.js';
import { cpuMicroseconds, loadBetween, sampleLoad, threadBusySeconds } from './machine-load.js';
import { freePort, logTail, machineBusyPercent, runCli, SECRETS_ENV, sleep, startProcess, startServer, stopServer, type ServerProcess } from './processes.js';
import { Receiver } from './receiver.js';
import { Wrk } from './wrk.js';

const { values: args } = parseArgs({
  options: {
    postgres: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    count: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '8' },
    // The longest a drain round waits for the outbox to empty; what is left then is cancelled.
    window: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    label: { type: 'string' },
    // The service's CPU profiles (its event loop's and each worker thread's) into this directory, written as it stops.
    'cpu-prof': { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const COUNT = Number(args.count);
const SECONDS = Number(args.seconds);
const CONNECTIONS = Number(args.connections);
const WINDOW_MS = Number(args.window) * 1000;
const store = args.postgres ? 'postgres' : 'sqlite';
/** The backlog is sent on this many connections, as fast as intake answers. */
const BACKLOG_CONNECTIONS = 32;
/** The API's default; the bench measures delivery, so no rate limit. */
const MAX_IN_FLIGHT = 100;
/** Deliveries moved per transaction when the bench reconciles itself (as delivery.ts cancels: SQLite takes 32,766 variables a statement). */
const RECONCILE_BATCH = 10_000;
/** After an intake round, the longest its backlog may take to be delivered before what is left is cancelled. */
const SETTLE_AFTER_LOAD_MS = 5_000;
const TRANSFORM = `function transform(request, context) { request.body = { id: request.body.data.id, kind: context.event }; request.headers['x-kind'] = 'bench'; return request; }`;
const VARIANTS = [
  { name: 'none', rules: null },
  { name: 'filter', rules: { filter: { body: { event: 'order.created', data: { amount: { $gte: 10 } } } } } },
  { name: 'transform', rules: { transformation: { code: TRANSFORM } } },
] as const;
type VariantName = (typeof VARIANTS)[number]['name'];

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const workDir = mkdtempSync(`${tmpdir()}/intake-rules-bench-`);

/** The store methods the bench calls itself (dist/store/open-store.js). */
interface DistStore {
  reconcileHeldDeliveries(now: number, limit: number): Promise<number>;
  destinationStats(
    companyId: string,
    destinationId: string,
    query: { since: number; until: number; bucketMs: number; now: number },
  ): Promise<{ backlog: { pending: number; held: number } }>;
  close(): Promise<void>;
}

/** A variant's integration and destination, and the closed loop's target on it. */
interface Variant {
  name: VariantName;
  rules: (typeof VARIANTS)[number]['rules'];
  integrationId: string;
  destinationId: string;
  target: LoadTarget;
}

interface DrainRound {
  round: number;
  variant: VariantName;
  /** Intake's 202s a second while the backlog was sent (the destination paused). */
  committedPerSecond: number;
  delivered: number;
  duplicates: number;
  /** From the first arrival at the receiver to the last. */
  deliveredPerSecond: number;
  /** First arrivals in each second from the first: a burst, a steady pace, a stall. */
  bySecond: number[];
  /** From the resume to the outbox empty (results written), or to the window's end. */
  seconds: number;
  /** Whether the outbox was empty within the window; if not, `left` deliveries were cancelled. */
  complete: boolean;
  left: number;
  /** Attempts whose transformation failed or could not run (retried on the schedule). */
  transformationErrors: number;
  cpuPerDeliveryUs: number;
  eventLoopBusy: number;
}

interface IntakeRound {
  round: number;
  variant: VariantName;
  acceptedPerSecond: number;
  /** Requests the receiver got a second while the load lasted. */
  deliveredPerSecond: number;
  claimsShed: number;
  transformationErrors: number;
  pendingAtStop: number;
  /** Seconds until the outbox was empty after the stop; null: not within SETTLE_AFTER_LOAD_MS, the rest cancelled. */
  settledSeconds: number | null;
}

async function main(): Promise<void> {
  // Read as the run starts, just after `npm run build` made dist/ from it.
  const build = buildOf();
  const busyBeforeStartPercent = await machineBusyPercent();
  const loadAtStart = sampleLoad([], store === 'postgres');
  const wrk = await Wrk.prepare(workDir, 10);
  const database: BenchDatabase = await createBenchDatabase(store, workDir, 'rules');
  const running: ServerProcess[] = [];
  let service: ServerProcess | undefined;
  let benchStore: DistStore | undefined;
  try {
    const env = { INTAKE_DATABASE_URL: database.url, INTAKE_DESTINATION_ALLOW: '127.0.0.1/32' };
    service = await startService(env);
    const receiver = await Receiver.start(workDir);
    running.push(receiver.server);
    const { openStore } = (await import(pathToFileURL(`${root}/dist/store/open-store.js`).href)) as {
      openStore(url: string, options: { poolSize: number }): DistStore;
    };
    benchStore = openStore(database.url, { poolSize: 2 });
    const base = `http://127.0.0.1:${service.port}`;
    const company = await runCli(root, database.url, ['company', 'create', '--name', 'rules bench']);
    const companyId = String(company.id);
    const key = await runCli(root, database.url, ['key', 'create', '--company', companyId, '--scope', 'integrations:manage,logs:read']);
    const api = async (method: string, path: string, body?: unknown): Promise<any> => {
      const response = await fetch(`${base}/api/v1${path}`, {
        method,
        headers: { 'x-api-key': String(key.api_key), ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
      return text === '' ? null : JSON.parse(text);
    };
    const body = smallEventBody();
    const serviceCpu = () => cpuMicroseconds([service!.pid], store === 'postgres');
    const eventLoopBusy = async () => (await threadBusySeconds(`${base}/metrics`)).event_loop ?? 0;

    const createDestination = async (variant: Pick<Variant, 'name' | 'rules' | 'integrationId'>): Promise<string> => {
      const created = await api('POST', '/destinations', {
        name: `rules bench ${variant.name}`,
        url: `http://127.0.0.1:${receiver.server.port}/`,
        integration_ids: [variant.integrationId],
        rate_per_second: null,
        max_in_flight: MAX_IN_FLIGHT,
        ...(variant.rules !== null && { rules: variant.rules }),
      });
      return String(created.destination.id);
    };
    const variants: Variant[] = [];
    for (const { name, rules } of VARIANTS) {
      const integration = await runCli(root, database.url, ['integration', 'create', '--company', companyId, '--name', `rules ${name}`]);
      const integrationId = String(integration.id);
      const destinationId = await createDestination({ name, rules, integrationId });
      const target: LoadTarget = {
        name,
        url: `${base}/api/webhooks/${String(integration.integration_key)}`,
        headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
        body: body.bytes,
        cpuMicroseconds: serviceCpu,
        threadBusySeconds: () => threadBusySeconds(`${base}/metrics`),
      };
      variants.push({ name, rules, integrationId, destinationId, target });
      // What each variant sends, asked of the service itself: the filter passes, the transformation reshapes.
      const tried = await api('POST', `/destinations/${destinationId}/rules/try`, { webhook: { body: JSON.parse(body.bytes.toString('utf8')), event: body.event } });
      if (!tried.would_send) throw new Error(`the ${name} variant would not send the bench's webhook: ${tried.reason}`);
      process.stdout.write(`  ${name}: sends ${tried.request.body} with ${JSON.stringify(tried.request.headers)}\n`);
    }

    const backlogOf = async (variant: Variant) => {
      const now = Date.now();
      const { backlog } = await benchStore!.destinationStats(companyId, variant.destinationId, { since: now, until: now, bucketMs: 1000, now });
      return backlog.pending + backlog.held;
    };
    /**
     * Waits for the outbox to empty, at most `maxMs`: the seconds it took, or null and what
     * was left, cancelled with a new destination in its place (so that no later round
     * delivers it, and the next starts on an empty outbox).
     */
    const settle = async (variant: Variant, maxMs: number): Promise<{ seconds: number | null; left: number }> => {
      const started = performance.now();
      let left = await backlogOf(variant);
      while (left > 0 && performance.now() - started < maxMs) {
        await sleep(100);
        left = await backlogOf(variant);
      }
      if (left === 0) return { seconds: (performance.now() - started) / 1000, left };
      await api('DELETE', `/destinations/${variant.destinationId}`);
      while ((await benchStore!.reconcileHeldDeliveries(Date.now(), RECONCILE_BATCH)) > 0);
      variant.destinationId = await createDestination(variant);
      return { seconds: null, left };
    };
    /** The service's intake_delivery_rule_outcomes_total, by outcome. */
    const ruleOutcomes = async (): Promise<Record<string, number>> => {
      const metrics = await (await fetch(`${base}/metrics`)).text();
      const found = metrics.matchAll(/^intake_delivery_rule_outcomes_total\{outcome="(\w+)"\} (\d+)$/gm);
      return Object.fromEntries([...found].map(([, outcome, count]) => [outcome, Number(count)]));
    };
    const outcomesSince = async (before: Record<string, number>) => {
      const now = await ruleOutcomes();
      const since = (outcome: string) => (now[outcome] ?? 0) - (before[outcome] ?? 0);
      return { skipped: since('filtered') + since('deduplicated'), transformationErrors: since('transformation_error') };
    };

    /** One backlog: sent with the destination paused, then delivered with it resumed. */
    const drainRound = async (variant: Variant, round: number, count: number, windowMs: number): Promise<DrainRound> => {
      await api('POST', `/destinations/${variant.destinationId}/pause`);
      const sent = await sendBacklog(variant.target, count);
      await sleep(1000);
      const from = receiver.count();
      const [cpuBefore, busyBefore, outcomesBefore] = [serviceCpu(), await eventLoopBusy(), await ruleOutcomes()];
      const resumedAt = performance.now();
      await api('POST', `/destinations/${variant.destinationId}/resume`);
      // The worker moves a resumed destination's held deliveries 1,000 a second: all at once
      // here, so that the drain measures delivery, not that pace.
      while ((await benchStore!.reconcileHeldDeliveries(Date.now(), RECONCILE_BATCH)) > 0);
      const settled = await settle(variant, windowMs);
      const seconds = settled.seconds ?? windowMs / 1000;
      const [cpuAfter, busyAfter] = [serviceCpu(), await eventLoopBusy()];
      const outcomes = await outcomesSince(outcomesBefore);
      // The filter passes every webhook: one filtered (or deduplicated) would change what is compared.
      if (outcomes.skipped > 0) throw new Error(`${variant.name}: ${outcomes.skipped} deliveries filtered or deduplicated`);
      const arrived = arrivalsOf(receiver.arrivals(from), sent.uuids);
      const result: DrainRound = {
        round,
        variant: variant.name,
        committedPerSecond: Math.round(sent.perSecond),
        delivered: arrived.delivered,
        duplicates: arrived.duplicates,
        deliveredPerSecond: Math.round((arrived.delivered - 1) / ((arrived.lastAt - arrived.firstAt) / 1000)),
        bySecond: arrived.bySecond,
        seconds: round2(seconds),
        complete: settled.seconds !== null,
        left: settled.left,
        transformationErrors: outcomes.transformationErrors,
        cpuPerDeliveryUs: Math.round((cpuAfter - cpuBefore) / Math.max(1, arrived.delivered)),
        eventLoopBusy: round2((busyAfter - busyBefore) / seconds),
      };
      if (result.complete && arrived.delivered < count) throw new Error(`${variant.name}: ${count - arrived.delivered} of ${count} webhooks never reached the receiver`);
      const ending = result.complete ? `empty ${result.seconds} s after the resume` : `${result.left} left after ${result.seconds} s, cancelled`;
      process.stdout.write(
        `  drain round ${round} ${variant.name}: ${result.deliveredPerSecond} deliveries/s, ${result.cpuPerDeliveryUs} µs of CPU each, ` +
          `event loop ${result.eventLoopBusy.toFixed(2)} busy, ${result.transformationErrors} transformation errors ` +
          `(${result.delivered} delivered, committed at ${result.committedPerSecond}/s; ${ending})\n`,
      );
      return result;
    };

    process.stdout.write(`rules bench on ${store}: ${COUNT} webhooks a backlog, ${ROUNDS} rounds; work dir ${workDir}\n`);
    for (const variant of variants) await drainRound(variant, 0, Math.max(500, Math.round(COUNT / 10)), Math.min(WINDOW_MS, 5_000));
    const drains: DrainRound[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const variant of rotated(variants, round - 1)) drains.push(await drainRound(variant, round, COUNT, WINDOW_MS));
    }

    process.stdout.write(`  intake: wrk, ${CONNECTIONS} connections, ${SECONDS} s a round, each variant's destination delivering\n`);
    const intake: IntakeRound[] = [];
    let before = { count: 0, shed: 0, at: 0, outcomes: {} as Record<string, number> };
    const closedLoop = await runClosedLoop(
      wrk,
      variants.map((variant) => variant.target),
      { rounds: ROUNDS, seconds: SECONDS, connections: CONNECTIONS, warmupSeconds: 3 },
      {
        async beforeFire() {
          before = { count: receiver.count(), shed: await claimsShed(service!.port), at: performance.now(), outcomes: await ruleOutcomes() };
        },
        async afterFire(target, round, result) {
          const seconds = (performance.now() - before.at) / 1000;
          const deliveredPerSecond = Math.round((receiver.count() - before.count) / seconds);
          const shed = (await claimsShed(service!.port)) - before.shed;
          const variant = variants.find((candidate) => candidate.target === target)!;
          const pendingAtStop = await backlogOf(variant);
          const settled = await settle(variant, SETTLE_AFTER_LOAD_MS);
          const { transformationErrors } = await outcomesSince(before.outcomes);
          const ending = settled.seconds === null ? `${settled.left} left after ${SETTLE_AFTER_LOAD_MS / 1000} s, cancelled` : `empty after ${settled.seconds.toFixed(1)} s`;
          process.stdout.write(
            `    receiver ${deliveredPerSecond}/s, claims shed ${shed}, ${transformationErrors} transformation errors, ${pendingAtStop} pending at the stop, ${ending}\n`,
          );
          if (result === null) return;
          const settledSeconds = settled.seconds === null ? null : round2(settled.seconds);
          intake.push({ round, variant: variant.name, acceptedPerSecond: result.requestsPerSecond, deliveredPerSecond, claimsShed: shed, transformationErrors, pendingAtStop, settledSeconds });
        },
      },
    );
    const during = loadBetween(loadAtStart, sampleLoad([service.pid, receiver.server.pid], store === 'postgres'));

    const report = summaryOf(drains, closedLoop, intake);
    process.stdout.write(`\n${report.lines.join('\n')}\n`);
    running.push(service);
    const serviceExitCode = await stopServer(service);
    service = undefined;
    const date = new Date().toISOString().slice(0, 10);
    const results = {
      date,
      store,
      label: args.label ?? null,
      build,
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, busyBeforeStartPercent, ...during },
      settings: { rounds: ROUNDS, count: COUNT, seconds: SECONDS, windowSeconds: WINDOW_MS / 1000, settleAfterLoadSeconds: SETTLE_AFTER_LOAD_MS / 1000, connections: CONNECTIONS, backlogConnections: BACKLOG_CONNECTIONS, maxInFlight: MAX_IN_FLIGHT, bodyBytes: body.bytes.length },
      variants: VARIANTS,
      drain: { ...report.drain, rounds: drains },
      intake: { ...report.intake, rounds: closedLoop, deliveries: intake },
      serviceExitCode,
    };
    const directory = `${root}/bench/results`;
    mkdirSync(directory, { recursive: true });
    const path = `${directory}/${date}-rules-${store}${args.label ? `-${args.label.replace(/[^a-z0-9-]/gi, '-')}` : ''}.json`;
    writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(`written to ${path}\n`);
    rmSync(workDir, { recursive: true, force: true });
  } catch (error) {
    process.stderr.write(`rules bench failed: ${(error as Error).stack ?? String(error)}\n`);
    if (service) process.stderr.write(`service log:\n${logTail(service.logPath)}\nlogs kept in ${workDir}\n`);
    process.exitCode = 1;
  } finally {
    await benchStore?.close();
    for (const server of [...(service ? [service] : []), ...running]) await stopServer(server);
    await database.drop();
  }
  process.exit();
}

/** The commit this checkout is at, and whether src/ had uncommitted changes (others edit it meanwhile; dist/ is built from it). */
function buildOf(): { commit: string; uncommittedChangesInSrc: boolean } {
  const git = (gitArgs: string[]) => execFileSync('git', gitArgs, { cwd: root, encoding: 'utf8' }).trim();
  return { commit: git(['rev-parse', '--short', 'HEAD']), uncommittedChangesInSrc: git(['status', '--porcelain', '--untracked-files=no', 'src']) !== '' };
}

/** `node dist/main.js`, as processes.ts's startServer starts it, with --cpu-prof when asked. */
async function startService(env: Record<string, string>): Promise<ServerProcess> {
  if (args['cpu-prof'] === undefined) return startServer(`${root}/dist/main.js`, env, `${workDir}/service.log`, '/readyz');
  const port = await freePort();
  const profiling = ['--cpu-prof', `--cpu-prof-dir=${args['cpu-prof']}`, `${root}/dist/main.js`];
  const serviceEnv = { ...process.env, ...SECRETS_ENV, ...env, PORT: String(port), HOST: '127.0.0.1' };
  return startProcess(process.execPath, profiling, serviceEnv, { port, logPath: `${workDir}/service.log`, readyPath: '/readyz', acceptAnyStatus: false });
}

/** `count` webhooks to the target, `BACKLOG_CONNECTIONS` at a time: their uuids, every one answered 202. */
async function sendBacklog(target: LoadTarget, count: number): Promise<{ uuids: string[]; perSecond: number }> {
  const url = new URL(target.url);
  const pool = new ConnectionPool(url.hostname, Number(url.port), BACKLOG_CONNECTIONS, { method: 'POST', path: url.pathname, headers: target.headers, body: target.body });
  const uuids: string[] = [];
  const refused: string[] = [];
  const started = performance.now();
  await new Promise<void>((resolve) => {
    let left = count;
    for (let n = 0; n < count; n++) {
      pool.send(
        () => {},
        (answer) => {
          if ('error' in answer || answer.status !== 202) refused.push('error' in answer ? answer.error : String(answer.status));
          else uuids.push((JSON.parse(answer.body.toString('utf8')) as { uuid: string }).uuid);
          if (--left === 0) resolve();
        },
      );
    }
  });
  const seconds = (performance.now() - started) / 1000;
  pool.destroy();
  if (refused.length > 0) throw new Error(`${refused.length} of the backlog's webhooks were not accepted (first: ${refused[0]})`);
  return { uuids, perSecond: count / seconds };
}

/** The backlog's webhooks as the receiver saw them: how many arrived, twice, and the first and last arrival. */
function arrivalsOf(arrivals: { ids: string[]; arrivedAt: number[] }, uuids: readonly string[]) {
  const wanted = new Set(uuids);
  const seen = new Set<string>();
  let duplicates = 0;
  const firsts: number[] = [];
  arrivals.ids.forEach((id, index) => {
    if (!wanted.has(id)) return;
    if (seen.has(id)) duplicates++;
    else firsts.push(arrivals.arrivedAt[index] ?? Number.NaN);
    seen.add(id);
  });
  const firstAt = Math.min(...firsts);
  const lastAt = Math.max(...firsts);
  const bySecond: number[] = Array.from({ length: Math.floor((lastAt - firstAt) / 1000) + 1 }, () => 0);
  for (const at of firsts) bySecond[Math.floor((at - firstAt) / 1000)]!++;
  return { delivered: seen.size, duplicates, firstAt, lastAt, bySecond };
}

/** Medians by variant, each variant's ratio to none (of the medians, and the median of each round's), and the lines that print them. */
function summaryOf(drains: DrainRound[], closedLoop: ClosedLoopRound[], intake: IntakeRound[]) {
  const names = VARIANTS.map((variant) => variant.name);
  const by = <T extends { variant: VariantName }>(rows: T[], name: VariantName) => rows.filter((row) => row.variant === name);
  const perRound = <T extends { round: number; variant: VariantName }>(rows: T[], name: VariantName, value: (row: T) => number) =>
    median(by(rows, name).map((row) => value(row) / value(rows.find((other) => other.round === row.round && other.variant === 'none')!)));
  const drain = Object.fromEntries(
    names.map((name) => {
      const mine = by(drains, name);
      const deliveredPerSecond = median(mine.map((row) => row.deliveredPerSecond));
      const none = median(by(drains, 'none').map((row) => row.deliveredPerSecond));
      return [
        name,
        {
          deliveredPerSecond,
          cpuPerDeliveryUs: median(mine.map((row) => row.cpuPerDeliveryUs)),
          eventLoopBusy: median(mine.map((row) => row.eventLoopBusy)),
          committedPerSecond: median(mine.map((row) => row.committedPerSecond)),
          transformationErrors: median(mine.map((row) => row.transformationErrors)),
          completeRounds: mine.filter((row) => row.complete).length,
          toNone: round2(deliveredPerSecond / none),
          toNoneByRound: round2(perRound(drains, name, (row) => row.deliveredPerSecond)),
          cpuToNone: round2(perRound(drains, name, (row) => row.cpuPerDeliveryUs)),
        },
      ];
    }),
  );
  const intakeSummary = Object.fromEntries(
    names.map((name) => {
      const own = summarize(closedLoop, name);
      const none = summarize(closedLoop, 'none');
      const rows = closedLoop.map((row) => ({ ...row, variant: row.target as VariantName }));
      return [
        name,
        {
          ...own,
          deliveredPerSecond: median(by(intake, name).map((row) => row.deliveredPerSecond)),
          transformationErrors: median(by(intake, name).map((row) => row.transformationErrors)),
          toNone: round2(own.requestsPerSecond / none.requestsPerSecond),
          toNoneByRound: round2(perRound(rows, name, (row) => row.requestsPerSecond)),
          p99ToNone: round2(own.p99 / none.p99),
        },
      ];
    }),
  );
  const goal = (name: VariantName, floor: number) => `${drain[name]!.toNone >= floor ? 'meets' : 'misses'} ≥ ${floor}`;
  const lines = [
    `median of ${ROUNDS} rounds, ${store}:`,
    ...names.map((name) => {
      const d = drain[name]!;
      const i = intakeSummary[name]!;
      const target = name === 'filter' ? `, goal ${goal(name, 0.95)}` : name === 'transform' ? `, goal ${goal(name, 0.75)}` : '';
      return (
        `  ${name.padEnd(9)} drain ${d.deliveredPerSecond}/s (${d.toNone} of none, by round ${d.toNoneByRound}${target}), ${d.cpuPerDeliveryUs} µs CPU a delivery (${d.cpuToNone}), ` +
        `${d.completeRounds} of ${ROUNDS} emptied in ${WINDOW_MS / 1000} s, ${d.transformationErrors} transformation errors; ` +
        `intake ${i.requestsPerSecond} 202/s (${i.toNone}), p99 ${i.p99} ms (${i.p99ToNone}), delivering ${i.deliveredPerSecond}/s meanwhile`
      );
    }),
  ];
  return { drain, intake: intakeSummary, lines };
}

/** The items starting at the `by`-th, wrapping round. */
function rotated<T>(items: readonly T[], by: number): T[] {
  const at = by % items.length;
  return [...items.slice(at), ...items.slice(0, at)];
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

await main();
