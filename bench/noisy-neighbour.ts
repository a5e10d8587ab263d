/*
 * `npm run bench:tenants [-- --dist DIR] [--postgres] [--seconds S] [--rate R] [--label L] …`
 *
 * One tenant's intake while another tenant's viewer runs the heaviest reads the API offers.
 * The victim sends small webhooks as an open loop at a fixed rate; the attacker's company
 * holds big webhooks and its viewer opens live tails, loops searches that match nothing and
 * stalls exports; last (issue 36), its destination's transformation loops on every delivery
 * (each run stopped at the sandbox's CPU limit) while it sends webhooks as fast as it can.
 * Phase by phase: the victim's answers and latency, the service's peak memory, and what
 * the attacker's reads got. The same script measures any build (--dist),
 * so the code before a fix and after it run side by side.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import { machineBusyPercent, peakRssMb, resetPeakRss, sleep, startServer, stopServer, type ServerProcess } from './processes.js';
import { guardRss } from './rss-guard.js';
import {
  startLiveTail,
  startSearchLoop,
  startStalledExports,
  type AttackOutcome,
  type RunningAttack,
} from './tenant-attacks.js';
import { formatTable, writeResults, type PhaseResult, type TenantResults } from './tenant-report.js';
import { bigWebhookBody, BIG_WEBHOOK_BYTES, postWebhooks, runIntakeCli, setUpTenants, type Tenants } from './tenant-setup.js';
import { runVictimLoad } from './victim-load.js';

/** `posts`: the attacker's company receives the big webhooks (its live tails then read them). */
type Attack = 'posts' | 'tail' | 'search' | 'exports' | 'smallposts' | 'loops';
const PHASES: Record<string, { title: string; attacks: Attack[] }> = {
  baseline: { title: 'baseline', attacks: [] },
  // A control: what the big webhooks cost by themselves, so the tail's row shows what its reads add.
  posts: { title: 'big webhooks only', attacks: ['posts'] },
  tail: { title: 'live tail', attacks: ['tail', 'posts'] },
  search: { title: 'search', attacks: ['search'] },
  exports: { title: 'stalled exports', attacks: ['exports'] },
  all: { title: 'all at once', attacks: ['tail', 'posts', 'search', 'exports'] },
  // A control for the next: the same small webhooks of the attacker, without its destination.
  smallposts: { title: 'small webhooks only', attacks: ['smallposts'] },
  // Last: its destination stays, and every later webhook of the attacker would loop too.
  loops: { title: 'looping transformation', attacks: ['smallposts', 'loops'] },
};

/** The attacker's transformation: never returns, so each run takes the sandbox's CPU limit. */
const LOOPING_TRANSFORMATION = 'function transform(request) { for (;;) {} }';

/** Longest wait for the service to answer again between phases. */
const SETTLE_MAX_MS = 60_000;
const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const { values: args } = parseArgs({
  options: {
    dist: { type: 'string', default: `${root}/dist` },
    postgres: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '15' },
    rate: { type: 'string', default: '500' },
    streams: { type: 'string', default: '50' },
    'big-webhooks': { type: 'string', default: '20' },
    'loop-webhooks': { type: 'string', default: '3000' },
    stored: { type: 'string', default: '300' },
    searchers: { type: 'string', default: '2' },
    exports: { type: 'string', default: '14' },
    reader: { type: 'string', default: 'viewer' },
    'max-rss-mb': { type: 'string', default: '4096' },
    phases: { type: 'string', default: Object.keys(PHASES).join(',') },
    label: { type: 'string' },
  },
});
const settings = {
  rate: Number(args.rate),
  seconds: Number(args.seconds),
  streams: Number(args.streams),
  bigWebhooks: Number(args['big-webhooks']),
  loopWebhooks: Number(args['loop-webhooks']),
  stored: Number(args.stored),
  searchers: Number(args.searchers),
  exports: Number(args.exports),
  maxRssMb: Number(args['max-rss-mb']),
  // A sender gives up on an answer after this long (GitHub waits 10 s); later is a failure.
  timeoutMs: 10_000,
  maxConnections: 256,
  searchText: 'no-such-text-in-any-webhook',
};
const dist = resolve(args.dist);
const store = args.postgres ? 'postgres' : 'sqlite';
const phases = args.phases.split(',').map((name) => name.trim());
const label = args.label?.replace(/[^a-z0-9-]/gi, '-') ?? null;
const workDir = mkdtempSync(`${tmpdir()}/intake-tenants-`);
const running: ServerProcess[] = [];
let database: BenchDatabase | null = null;

/** Stops what this run started; safe to call twice (normal end, then Ctrl-C or a failure). */
async function cleanUp(): Promise<void> {
  await Promise.all(running.splice(0).map(stopServer));
  await database?.drop();
  database = null;
}

process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));

/** Runs every phase and reports; false when the service did not exit 0 (its log is then kept). */
async function main(): Promise<boolean> {
  checkArguments();
  const busyBeforeStartPercent = await machineBusyPercent();
  database = await createBenchDatabase(store, workDir);
  // The same secrets key for the service and the CLI (required with PostgreSQL since the
  // accounts work; older builds ignore it).
  const env = {
    INTAKE_DATABASE_URL: database.url,
    INTAKE_SECRETS_KEY: process.env.INTAKE_SECRETS_KEY ?? randomBytes(32).toString('hex'),
    // The looping phase's destination is on loopback (nothing is ever sent to it).
    INTAKE_DESTINATION_ALLOW: '127.0.0.1/32',
  };
  const service = await startServer(`${dist}/main.js`, env, `${workDir}/service.log`, '/readyz');
  running.push(service);
  const baseUrl = `http://127.0.0.1:${service.port}`;
  const tenants = await setUpTenants(dist, env, baseUrl, args.reader as 'viewer' | 'key');
  const bigTarget = { ...tenants.attackerIntake, body: bigWebhookBody() };
  const code = codeOf(dist);
  say(`tenants bench on ${store}, ${code.commit} (${dist}); reads as a ${tenants.reader.kind}; work dir ${workDir}`);
  if (tenants.readerNote) say(`  the key instead of the viewer: ${tenants.readerNote}`);

  let bigStored = 0;
  let storedForReads: Record<string, number> = {};
  const results: PhaseResult[] = [];
  for (const name of phases) {
    const phase = PHASES[name] as (typeof PHASES)[string];
    if (phase.attacks.some((attack) => attack === 'search' || attack === 'exports') && bigStored < settings.stored) {
      say(`  storing ${settings.stored - bigStored} big webhooks in the attacker's company for its reads`);
      storedForReads = await postWebhooks(bigTarget, settings.stored - bigStored, 4, Date.now() + 180_000);
      bigStored += storedForReads['202'] ?? 0;
    }
    if (phase.attacks.includes('loops')) {
      const code = `${workDir}/looping-transformation.js`;
      writeFileSync(code, LOOPING_TRANSFORMATION);
      await runIntakeCli(dist, env, [
        'destination', 'create', '--company', tenants.attackerCompanyId, '--name', 'loops', '--url', 'http://127.0.0.1:9/never', '--rate', 'none', '--transform', code,
      ]);
    }
    const settleSeconds = await settle(service, baseUrl);
    // Measured while this run is idle: what else is using the machine just now.
    const machineBusyBeforePercent = await machineBusyPercent();
    say(`  ${phase.title}: ${settings.seconds} s${settleSeconds === null ? ' (the service is still busy)' : ''}`);
    const result = await runPhase(phase.title, phase.attacks, service, baseUrl, tenants, bigTarget);
    bigStored += result.bigWebhooks?.['202'] ?? 0;
    results.push({ ...result, settleSeconds, machineBusyBeforePercent });
    if (!result.serviceAliveAfter) break;
  }

  running.splice(running.indexOf(service), 1);
  const serviceExitCode = await stopServer(service);
  const report: TenantResults = {
    date: new Date().toISOString().slice(0, 10),
    store,
    label,
    code,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, busyBeforeStartPercent },
    settings,
    reader: { kind: tenants.reader.kind, note: tenants.readerNote },
    victimBodyBytes: tenants.victim.body.length,
    bigWebhookBytes: BIG_WEBHOOK_BYTES,
    storedForReads,
    phases: results,
    serviceExitCode,
  };
  const path = writeResults(root, report);
  say(`\n${formatTable(report)}\n\nservice exit code ${serviceExitCode}; written to ${path}`);
  return serviceExitCode === 0;
}

/** The service's count of failed transformations and of sandbox workers it replaced so far (its /metrics). */
async function transformationErrors(baseUrl: string): Promise<{ transformationErrors: number; workersReplaced: number }> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const value = (prefix: string) => {
    const line = text.split('\n').find((l) => l.startsWith(prefix));
    return line === undefined ? -1 : Number(line.split(' ').at(-1));
  };
  return {
    transformationErrors: value('intake_delivery_rule_outcomes_total{outcome="transformation_error"}'),
    workersReplaced: value('intake_transform_workers_replaced_total'),
  };
}

/**
 * The victim's open loop for the phase, with the attacks running from before its first
 * request until its last answer (or until the service passes the RSS cap).
 */
async function runPhase(
  title: string,
  attacks: Attack[],
  service: ServerProcess,
  baseUrl: string,
  tenants: Tenants,
  bigTarget: Tenants['attackerIntake'],
): Promise<Omit<PhaseResult, 'settleSeconds' | 'machineBusyBeforePercent'>> {
  resetPeakRss(service.pid);
  const started: RunningAttack[] = [];
  if (attacks.includes('tail')) started.push(startLiveTail(baseUrl, tenants.reader, settings.streams));
  if (attacks.includes('exports')) started.push(startStalledExports(baseUrl, tenants.reader, settings.exports));
  if (attacks.includes('search')) started.push(startSearchLoop(baseUrl, tenants.reader, settings.searchers, settings.searchText));
  // The big webhooks must arrive after the tails opened, or the tails never see them.
  if (attacks.includes('tail')) await started[0]?.opened;

  let outcomes: Promise<AttackOutcome[]> | null = null;
  const stopAttacks = () => (outcomes ??= Promise.all(started.map((attack) => attack.stop())));
  const guard = guardRss(service.pid, settings.maxRssMb, () => void stopAttacks());
  const phaseEnd = Date.now() + settings.seconds * 1000;
  const victimRun = runVictimLoad(tenants.victim, {
    ratePerSecond: settings.rate,
    seconds: settings.seconds,
    maxConnections: settings.maxConnections,
    timeoutMs: settings.timeoutMs,
  });
  const bigWebhooks = attacks.includes('posts') ? postWebhooks(bigTarget, settings.bigWebhooks, 4, phaseEnd) : null;
  const loopPosts = attacks.includes('smallposts') ? postWebhooks({ ...tenants.attackerIntake, body: tenants.victim.body }, settings.loopWebhooks, 8, phaseEnd) : null;
  const victim = await victimRun;
  const attacker = await stopAttacks();
  if (loopPosts) {
    const statuses = await loopPosts;
    attacker.push({ attack: attacks.includes('loops') ? 'looping transformation' : 'small webhooks', statuses, detail: await transformationErrors(baseUrl) });
  }
  const { capHit } = guard.stop();
  return {
    phase: title,
    victim,
    peakRssMb: peakRssOrZero(service.pid),
    rssCapHit: capHit,
    bigWebhooks: bigWebhooks && (await bigWebhooks),
    attacker,
    serviceAliveAfter: service.child.exitCode === null,
  };
}

/**
 * 1 s of quiet, then the seconds until the service answers /healthz within a second again;
 * null when it does not within SETTLE_MAX_MS (the phase then starts on a busy service, and
 * the table says so).
 */
async function settle(service: ServerProcess, baseUrl: string): Promise<number | null> {
  await sleep(1_000);
  const started = Date.now();
  while (Date.now() - started < SETTLE_MAX_MS && service.child.exitCode === null) {
    const healthy = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) }).then(
      (response) => response.ok,
      () => false,
    );
    if (healthy) return Math.round((Date.now() - started) / 100) / 10;
    await sleep(500);
  }
  return null;
}

function peakRssOrZero(pid: number): number {
  try {
    return peakRssMb(pid);
  } catch {
    return 0;
  }
}

/** Which commit the build came from (read-only git), so a result says "before" or "after" by itself. */
function codeOf(distDir: string): TenantResults['code'] {
  const git = (gitArgs: string[]) =>
    execFileSync('git', ['-C', dirname(distDir), ...gitArgs], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    return { dist: distDir, commit: git(['rev-parse', '--short', 'HEAD']), uncommittedChanges: git(['status', '--porcelain', '--untracked-files=no']) !== '' };
  } catch {
    return { dist: distDir, commit: 'unknown', uncommittedChanges: null };
  }
}

function checkArguments(): void {
  if (!existsSync(`${dist}/main.js`)) throw new Error(`no ${dist}/main.js: build it first (npx tsc -p tsconfig.build.json)`);
  if (args.reader !== 'viewer' && args.reader !== 'key') throw new Error('--reader is viewer or key');
  const unknown = phases.filter((name) => !(name in PHASES));
  if (unknown.length > 0) throw new Error(`unknown phases ${unknown.join(', ')}; known: ${Object.keys(PHASES).join(', ')}`);
  const numbers = Object.entries(settings).filter(([, value]) => typeof value === 'number');
  const bad = numbers.filter(([, value]) => !Number.isFinite(value) || (value as number) <= 0);
  if (bad.length > 0) throw new Error(`not a positive number: ${bad.map(([name]) => name).join(', ')}`);
}

function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

main()
  .then(async (exitedCleanly) => {
    await cleanUp();
    if (exitedCleanly) rmSync(workDir, { recursive: true, force: true });
    else say(`the service's log is kept in ${workDir}`);
  })
  .catch(async (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? error}\nlogs kept in ${workDir}\n`);
    await cleanUp();
    process.exitCode = 1;
  });
