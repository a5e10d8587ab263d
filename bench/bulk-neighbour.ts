/*
 * `npm run bench:bulk [-- --dist DIR] [--postgres] [--seconds S] [--rate R] [--webhooks N] [--flood-webhooks M] [--erasure-webhooks E] [--phases stall,flood,erasure] [--label L]`
 *
 * What one company's replays and sends cost everyone else, and what they can make intake
 * send to a URL of the company's choosing (issue 33, findings 2 and 3). The same script
 * runs any build (--dist), so the code before a change and after it are measured alike.
 *
 * - **stall**: the victim company sends small webhooks as an open loop at a fixed rate,
 *   first alone, then while the attacker company calls the heaviest bulk operations the API
 *   offers, four sends and four bulk replays at once, again and again, over its N stored
 *   webhooks (its destinations paused, so what is measured is the bulk work, not delivery).
 *   The victim's p50 and p99 in each.
 * - **flood**: a third company, M webhooks delivered to a receiver on loopback (nginx), then
 *   one bulk replay a second for 60 s: the requests the receiver got in that minute, with
 *   the destination as made by default and with the highest rate the API allows.
 * - **erasure**: a fourth company stores E webhooks (one in a hundred holding a person's
 *   email), then erases that email (issue 40), and erases again and again (values held
 *   nowhere: each reads every webhook) for as long as the victim sends as in the stall
 *   phase: the victim's p50 and p99 alone and beside them, and how long each erasure took.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBenchDatabase, type BenchDatabase } from './bench-database.js';
import type { LoadTarget } from './closed-loop.js';
import type { OpenLoopResult } from './open-loop.js';
import { machineBusyPercent, sleep, startServer, stopServer, type ServerProcess } from './processes.js';
import { Receiver } from './receiver.js';
import { postWebhooks, runIntakeCli } from './tenant-setup.js';
import { runVictimLoad } from './victim-load.js';

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const { values: args } = parseArgs({
  options: {
    dist: { type: 'string', default: `${root}/dist` },
    postgres: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '20' },
    rate: { type: 'string', default: '200' },
    webhooks: { type: 'string', default: '30000' },
    'flood-webhooks': { type: 'string', default: '20000' },
    'flood-seconds': { type: 'string', default: '60' },
    'erasure-webhooks': { type: 'string', default: '100000' },
    phases: { type: 'string', default: 'stall,flood,erasure' },
    label: { type: 'string' },
  },
});
const settings = {
  rate: Number(args.rate),
  seconds: Number(args.seconds),
  webhooks: Number(args.webhooks),
  floodWebhooks: Number(args['flood-webhooks']),
  floodSeconds: Number(args['flood-seconds']),
  erasureWebhooks: Number(args['erasure-webhooks']),
  timeoutMs: 10_000,
  maxConnections: 256,
  /** Calls of each kind the attacker keeps going at once in the stall phase. */
  bulkCallers: 4,
};
const dist = resolve(args.dist);
const store = args.postgres ? 'postgres' : 'sqlite';
const phases = new Set(args.phases.split(',').map((name) => name.trim()));
const workDir = mkdtempSync(`${tmpdir()}/intake-bulk-`);
const running: ServerProcess[] = [];
let database: BenchDatabase | null = null;
let receiver: Receiver | null = null;

interface Company {
  companyId: string;
  intake: LoadTarget;
  /** Headers of a management key with integrations:manage, logs:read and data:erase. */
  api: Record<string, string>;
}

interface BulkCalls {
  /** Answers by kind and status. */
  statuses: Record<string, number>;
  /** Deliveries the answers said they replayed or created. */
  made: number;
}

async function main(): Promise<void> {
  database = await createBenchDatabase(store, workDir);
  const env = {
    INTAKE_DATABASE_URL: database.url,
    INTAKE_SECRETS_KEY: process.env.INTAKE_SECRETS_KEY ?? randomBytes(32).toString('hex'),
    INTAKE_DESTINATION_ALLOW: '127.0.0.1/32',
  };
  const service = await startServer(`${dist}/main.js`, env, `${workDir}/service.log`, '/readyz');
  running.push(service);
  const base = `http://127.0.0.1:${service.port}`;
  receiver = await Receiver.start(workDir);
  const receiverUrl = `http://127.0.0.1:${receiver.server.port}/`;
  say(`bulk bench on ${store}, build ${dist}; work dir ${workDir}`);
  const report: Record<string, unknown> = {
    date: new Date().toISOString().slice(0, 10),
    store,
    label: args.label ?? null,
    dist,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, busyBeforePercent: await machineBusyPercent() },
    settings,
  };

  if (phases.has('stall')) {
    const victim = await company(env, base, 'victim');
    victim.intake.body = Buffer.from(JSON.stringify({ event: 'order.created', data: { id: 'ord_1', amount: 1200, currency: 'eur' } }));
    const attacker = await company(env, base, 'attacker');
    const replayed = await destination(base, attacker, receiverUrl, { name: 'replayed' });
    say(`  storing ${settings.webhooks} webhooks in the attacker's company`);
    await pause(base, attacker, replayed);
    const stored = await postWebhooks(attacker.intake, settings.webhooks, 8, Date.now() + 600_000);
    const sentTo: string[] = [];
    for (let i = 0; i < settings.bulkCallers; i++) {
      const id = await destination(base, attacker, receiverUrl, { name: `sent ${i}` });
      await pause(base, attacker, id);
      sentTo.push(id);
    }
    await sleep(2_000);
    say(`  victim alone: ${settings.rate}/s for ${settings.seconds} s`);
    const alone = await victimLoad(victim);
    say(`  victim beside ${settings.bulkCallers} sends and ${settings.bulkCallers} bulk replays, again and again`);
    const stop = { now: false };
    const attack = bulkAttack(base, attacker, replayed, sentTo, stop);
    const beside = await victimLoad(victim);
    stop.now = true;
    const calls = await attack;
    report.stall = { stored, alone: summary(alone), beside: summary(beside), attackerCalls: calls };
    say(formatStall(alone, beside, calls));
  }

  if (phases.has('flood')) {
    const flood: Record<string, unknown> = {};
    for (const variant of ['default', 'fastest'] as const) {
      const attacker = await company(env, base, `flood ${variant}`);
      const settingsOf = variant === 'default' ? {} : { rate_per_second: 10_000, max_in_flight: 1000 };
      const id = await destination(base, attacker, receiverUrl, { name: `flood ${variant}`, ...settingsOf });
      say(`  flood (${variant} destination): ${settings.floodWebhooks} webhooks delivered first`);
      const before = receiver.count();
      await postWebhooks(attacker.intake, settings.floodWebhooks, 8, Date.now() + 600_000);
      await waitFor(() => receiver!.count() - before >= settings.floodWebhooks, 600_000);
      await sleep(1_000);
      const start = receiver.count();
      const calls = await replayEverySecond(base, attacker, id, settings.floodSeconds);
      const received = receiver.count() - start;
      flood[variant] = { settings: settingsOf, receivedInWindow: received, seconds: settings.floodSeconds, replayCalls: calls };
      say(`    ${received} requests reached the URL in ${settings.floodSeconds} s; replay answers ${describe(calls.statuses)}, ${calls.made} replayed`);
      await pause(base, attacker, id);
      // What was replayed and not sent yet is held: the next variant's minute is its own.
      await sleep(3_000);
    }
    report.flood = flood;
  }

  if (phases.has('erasure')) {
    const victim = await company(env, base, 'erasure victim');
    victim.intake.body = Buffer.from(JSON.stringify({ event: 'order.created', data: { id: 'ord_1', amount: 1200, currency: 'eur' } }));
    const owner = await company(env, base, 'erasing');
    const person = 'jane.doe.bench@example.com';
    const holding = Math.max(1, Math.round(settings.erasureWebhooks / 100));
    say(`  storing ${settings.erasureWebhooks} webhooks in the erasing company, ${holding} of them holding the email`);
    const deadline = Date.now() + 1_800_000;
    const stored = await postWebhooks(owner.intake, settings.erasureWebhooks - holding, 8, deadline);
    const personal = { ...owner.intake, body: Buffer.from(JSON.stringify({ event: 'customer.updated', data: { customer: { email: person, name: 'Jane Doe' }, note: 'x'.repeat(400) } })) };
    const storedPersonal = await postWebhooks(personal, holding, 8, deadline);
    await sleep(2_000);
    say(`  victim alone: ${settings.rate}/s for ${settings.seconds} s`);
    const alone = await victimLoad(victim);
    say('  victim beside erasures, one after the other: the email first, then values held nowhere (each reads every webhook)');
    const stop = { now: false };
    const runs = (async () => {
      const done: Array<{ state: unknown; counts: unknown; scanned: unknown; tookMs: number }> = [];
      for (let i = 0; !stop.now; i++) {
        const started = Date.now();
        const created = await api(base, owner, 'POST', '/erasures', { value: i === 0 ? person : `nobody-${i}@example.com` });
        if (created.status !== 202) throw new Error(`erasure not made: ${created.status} ${JSON.stringify(created.body)}`);
        for (;;) {
          const read = await api(base, owner, 'GET', `/erasures/${String(created.body.id)}`);
          if (['completed', 'failed'].includes(String(read.body.state))) {
            done.push({ state: read.body.state, counts: read.body.counts, scanned: read.body.scanned, tookMs: Date.now() - started });
            break;
          }
          await sleep(100);
        }
      }
      return done;
    })();
    const beside = await victimLoad(victim);
    stop.now = true;
    const erasures = await runs;
    const took = erasures.map((run) => run.tookMs).sort((x, y) => x - y);
    report.erasure = { stored, storedPersonal, alone: summary(alone), beside: summary(beside), erasures, medianTookMs: took[Math.floor(took.length / 2)] ?? null };
    say(
      [
        formatStall(alone, beside, { statuses: {}, made: 0 }).split('\n').slice(0, 2).join('\n'),
        `    ${erasures.length} erasures of ${settings.erasureWebhooks} webhooks, median ${((took[Math.floor(took.length / 2)] ?? 0) / 1000).toFixed(1)} s each; the first: ${JSON.stringify(erasures[0]?.counts)}`,
      ].join('\n'),
    );
  }

  running.splice(running.indexOf(service), 1);
  report.serviceExitCode = await stopServer(service);
  const directory = `${root}/bench/results`;
  mkdirSync(directory, { recursive: true });
  const path = `${directory}/${report.date}-bulk-${store}${args.label ? `-${args.label.replace(/[^a-z0-9-]/gi, '-')}` : ''}.json`;
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
  say(`written to ${path}`);
}

/** A company, an integration and a management key, made with the CLI as an operator would. */
async function company(env: Record<string, string>, base: string, name: string): Promise<Company> {
  const cli = (cliArgs: string[]) => runIntakeCli(dist, env, cliArgs);
  const created = await cli(['company', 'create', '--name', name]);
  const integration = await cli(['integration', 'create', '--company', String(created.id), '--name', 'bench']);
  const key = await cli(['key', 'create', '--company', String(created.id), '--scope', 'integrations:manage,logs:read,data:erase']);
  return {
    companyId: String(created.id),
    intake: {
      name,
      url: `${base}/api/webhooks/${integration.integration_key}`,
      headers: { 'content-type': 'application/json', 'x-api-key': String(integration.api_key) },
      body: Buffer.from(JSON.stringify({ event: 'order.created', data: { id: 'ord_2', note: 'x'.repeat(400) } })),
    },
    api: { 'content-type': 'application/json', 'x-api-key': String(key.api_key) },
  };
}

async function api(base: string, who: Company, method: string, path: string, body?: object) {
  const response = await fetch(`${base}/api/v1${path}`, { method, headers: who.api, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

async function destination(base: string, who: Company, url: string, extra: Record<string, unknown>): Promise<string> {
  const created = await api(base, who, 'POST', '/destinations', { url, ...extra });
  if (created.status !== 201) throw new Error(`destination not made: ${created.status} ${JSON.stringify(created.body)}`);
  return (created.body.destination as { id: string }).id;
}

async function pause(base: string, who: Company, id: string): Promise<void> {
  const paused = await api(base, who, 'POST', `/destinations/${id}/pause`, {});
  if (paused.status !== 200) throw new Error(`destination not paused: ${paused.status}`);
}

/**
 * The attacker's callers: half send its stored webhooks to destinations made after them,
 * half replay every delivery of the first, each calling again as soon as it has its answer
 * (100 ms after a refusal, a client that retries fast rather than a busy loop).
 */
async function bulkAttack(base: string, who: Company, replayed: string, sentTo: string[], stop: { now: boolean }): Promise<BulkCalls> {
  const calls: BulkCalls = { statuses: {}, made: 0 };
  const loop = async (kind: string, call: () => ReturnType<typeof api>) => {
    while (!stop.now) {
      const answer = await call().catch(() => ({ status: 0, body: {} as Record<string, unknown> }));
      const key = `${kind} ${answer.status || 'error'}`;
      calls.statuses[key] = (calls.statuses[key] ?? 0) + 1;
      calls.made += Number(answer.body.replayed ?? answer.body.created ?? 0);
      if (answer.status !== 200) await sleep(100);
    }
  };
  await Promise.all([
    ...sentTo.map((id) => loop('send', () => api(base, who, 'POST', `/destinations/${id}/send`, { since: new Date(0).toISOString() }))),
    ...sentTo.map(() => loop('replay', () => api(base, who, 'POST', '/deliveries/replay', { destination_id: replayed }))),
  ]);
  return calls;
}

/** One bulk replay of every delivery of the destination each second, for `seconds`. */
async function replayEverySecond(base: string, who: Company, id: string, seconds: number): Promise<BulkCalls> {
  const calls: BulkCalls = { statuses: {}, made: 0 };
  const started = Date.now();
  const pending: Array<Promise<void>> = [];
  for (let i = 0; i < seconds; i++) {
    await sleep(Math.max(0, started + i * 1000 - Date.now()));
    pending.push(
      api(base, who, 'POST', '/deliveries/replay', { destination_id: id }).then((answer) => {
        calls.statuses[answer.status] = (calls.statuses[answer.status] ?? 0) + 1;
        calls.made += Number(answer.body.replayed ?? 0);
      }),
    );
  }
  await sleep(Math.max(0, started + seconds * 1000 - Date.now()));
  await Promise.all(pending);
  return calls;
}

function victimLoad(victim: Company): Promise<OpenLoopResult> {
  return runVictimLoad(victim.intake, {
    ratePerSecond: settings.rate,
    seconds: settings.seconds,
    maxConnections: settings.maxConnections,
    timeoutMs: settings.timeoutMs,
  });
}

function summary(result: OpenLoopResult) {
  return { statuses: result.statuses, latencyMs: result.latencyMs, generatorLagMs: result.generatorLagMs, abandoned: result.abandoned };
}

function formatStall(alone: OpenLoopResult, beside: OpenLoopResult, calls: BulkCalls): string {
  const row = (name: string, r: OpenLoopResult) =>
    `    ${name.padEnd(22)} p50 ${r.latencyMs.p50.toFixed(1).padStart(8)} ms   p99 ${r.latencyMs.p99.toFixed(1).padStart(8)} ms   max ${r.latencyMs.max.toFixed(0).padStart(6)} ms   ${describe(r.statuses)}`;
  return [row('victim alone', alone), row('victim beside the bulk', beside), `    attacker's calls: ${describe(calls.statuses)}; ${calls.made} deliveries made again`].join('\n');
}

async function waitFor(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the deliveries');
    await sleep(200);
  }
}

function describe(counts: Record<string, number>): string {
  return Object.entries(counts)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, count]) => `${key}: ${count}`)
    .join(', ');
}

function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

async function cleanUp(): Promise<void> {
  await Promise.all(running.splice(0).map(stopServer));
  if (receiver) await stopServer(receiver.server);
  receiver = null;
  await database?.drop();
  database = null;
}

process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));
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
