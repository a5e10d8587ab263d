import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir, runCliJson, sleep, startServer, type Exited, type ServerProcess } from './processes.js';
import { checkStored, WebhookLoad, type LoadAnswer } from './webhook-load.js';

/**
 * Durability harnesses (contract, "Sending a webhook": "an acknowledged webhook survives
 * kill -9"), for any INTAKE_DATABASE_URL: load the real server with concurrent webhooks,
 * break something at a random moment (the node with SIGKILL, or its database connections),
 * and check that every 202 it gave is stored, byte for byte. Never leaves a process running.
 *
 * Nothing here imports Vitest: the long run (test/crash/long-run.ts, `npm run test:crash`)
 * runs these cycles as a plain Node program.
 */

/** The integration a cycle sends to. */
export interface CrashTenant {
  integrationKey: string;
  apiKey: string;
}

/** The database a cycle's node runs on, and the tenant already in it (else made with the CLI). */
export interface CrashTarget {
  databaseUrl: string;
  tenant?: CrashTenant;
}

/** A closed SQLite database holding one company and one integration, made with the CLI. */
export interface TenantTemplate {
  dbPath: string;
  tenant: CrashTenant;
}

export async function makeSqliteTemplate(): Promise<TenantTemplate> {
  const dbPath = join(makeTempDir('intake-crash-template-'), 'template.db');
  const tenant = await createTenant({ INTAKE_DATABASE_URL: `sqlite:${dbPath}` });
  return { dbPath, tenant };
}

/** A fresh copy of the template's database (saves two CLI runs per cycle). */
export function copyOfTemplate(template: TenantTemplate): CrashTarget {
  const dbPath = join(makeTempDir('intake-crash-'), 'intake.db');
  copyFileSync(template.dbPath, dbPath);
  for (const suffix of ['-wal', '-shm']) {
    if (existsSync(template.dbPath + suffix)) copyFileSync(template.dbPath + suffix, dbPath + suffix);
  }
  return { databaseUrl: `sqlite:${dbPath}`, tenant: template.tenant };
}

async function createTenant(cliEnv: Record<string, string>): Promise<CrashTenant> {
  const company = (await runCliJson(['company', 'create', '--name', 'Crash test'], cliEnv)).json as { id: string };
  const integration = (await runCliJson(['integration', 'create', '--company', company.id, '--name', 'crash'], cliEnv)).json as {
    integration_key: string;
    api_key: string;
  };
  return { integrationKey: integration.integration_key, apiKey: integration.api_key };
}

const SERVER_ENV = { LOG_LEVEL: 'warn' };

export interface CrashCycleOptions {
  /** Where the node runs; a fresh SQLite file with a tenant made by the CLI when absent. */
  target?: CrashTarget;
  /** Concurrent sender loops (each one keep-alive connection, one request at a time). */
  concurrency?: number;
  /** The kill comes only after this many 202s... */
  minAcks?: number;
  /** ...and then after a random delay of up to this many milliseconds. */
  maxKillDelayMs?: number;
  /** Check the raw body of every acknowledged webhook with GET one (else a sample). */
  checkAllBodies?: boolean;
  /** Sample size when not checking all bodies. */
  bodySample?: number;
}

export interface CrashCycleResult {
  acknowledged: number;
  /** uuid → raw body of every 202, for checks beneath the API. */
  acked: ReadonlyMap<string, string>;
  /** Acknowledged uuids missing after the restart. */
  lost: number;
  /** Acknowledged webhooks whose stored raw body, event or data differ from what was sent. */
  corrupted: number;
  /** Raw bodies compared through GET one. */
  bodiesChecked: number;
  /** Webhooks the integration holds after the restart (acknowledged or not). */
  stored: number;
  /** Answers other than 202, by status, before the kill. */
  otherStatuses: Record<string, number>;
  /** Request failures (no answer) before the kill: none are expected. */
  errorsBeforeKill: string[];
  /** Requests still in flight when SIGKILL was sent. */
  inFlightAtKill: number;
  /** Milliseconds of load before the kill. */
  loadMs: number;
  /** Milliseconds from the kill to the restarted server answering /healthz. */
  restartMs: number;
  /** How the restarted server ended on SIGTERM. */
  restartExit: Exited;
  problems: string[];
}

/**
 * One crash cycle: a node on `target`, concurrent senders, SIGKILL at a random moment after
 * `minAcks` 202s, restart on the same database, verify through the restarted node.
 */
export async function crashCycle(options: CrashCycleOptions = {}): Promise<CrashCycleResult> {
  const concurrency = options.concurrency ?? 32;
  const minAcks = options.minAcks ?? 200;
  const maxKillDelayMs = options.maxKillDelayMs ?? 1_000;
  const databaseUrl = options.target?.databaseUrl ?? `sqlite:${join(makeTempDir('intake-crash-'), 'intake.db')}`;
  const problems: string[] = [];

  let server: ServerProcess | undefined;
  let restarted: ServerProcess | undefined;
  try {
    server = await startServer({ databaseUrl, env: SERVER_ENV });
    const tenant = options.target?.tenant ?? (await createTenant(server.cliEnv));
    const victim = server;
    const otherStatuses: Record<string, number> = {};
    let killScheduled = false;
    let inFlightAtKill = 0;
    let loadMs = 0;
    let resolveKilled!: () => void;
    const killed = new Promise<void>((done) => (resolveKilled = done));

    const scheduleKill = () => {
      if (killScheduled) return;
      killScheduled = true;
      setTimeout(() => {
        load.stop();
        inFlightAtKill = load.inFlight;
        loadMs = performance.now() - load.startedAt;
        victim.child.kill('SIGKILL');
        resolveKilled();
      }, Math.random() * maxKillDelayMs);
    };
    const load: WebhookLoad = new WebhookLoad({
      concurrency,
      targets: [{ address: server.url(`/api/webhooks/${tenant.integrationKey}`), apiKey: tenant.apiKey }],
      onAnswer: (answer) => {
        if (answer.status === 202 && load.acked.size >= minAcks) scheduleKill();
        if (answer.status !== 202 && !answer.afterStop) otherStatuses[answer.status] = (otherStatuses[answer.status] ?? 0) + 1;
      },
    });

    // If the server died by itself or the senders stopped, nobody would ever schedule the kill.
    await Promise.race([killed, load.done.then(() => scheduleKill())]);
    await killed;
    await load.done;
    await victim.kill();
    if (victim.exitInfo?.signal !== 'SIGKILL') problems.push(`the server was not killed by SIGKILL: ${victim.describe()}`);

    const restartStartedAt = performance.now();
    restarted = await startServer({ databaseUrl, env: SERVER_ENV });
    const restartMs = Math.round(performance.now() - restartStartedAt);
    const check = await checkStored(restarted.baseUrl, tenant, load.acked, {
      bodySample: options.checkAllBodies === false ? (options.bodySample ?? 300) : undefined,
    });
    problems.push(...check.problems);

    const restartExit = await restarted.stop();
    return {
      acknowledged: load.acked.size,
      acked: load.acked,
      lost: check.lost,
      corrupted: check.corrupted,
      bodiesChecked: check.bodiesChecked,
      stored: check.stored,
      otherStatuses,
      errorsBeforeKill: load.failures.filter((failure) => !failure.afterStop).map((failure) => failure.message),
      inFlightAtKill,
      loadMs: Math.round(loadMs),
      restartMs,
      restartExit,
      problems,
    };
  } finally {
    await server?.kill();
    await restarted?.kill();
  }
}

export interface FaultCycleOptions {
  /** Where the node runs (a tenant is made with the CLI when it holds none). */
  target: CrashTarget;
  /**
   * Breaks something beneath the running node (its database connections, its disk; never
   * the node itself); resolves to how many connections or files it broke.
   */
  injectFault(server: ServerProcess): Promise<number>;
  /**
   * Ends the fault. Without it the fault ends by itself (broken connections are replaced).
   * With it the fault holds until the node has refused `refusalsDuringFault` requests and
   * /readyz has answered 503; then the load stops, the fault is ended, and the node must
   * answer /readyz 200 with no traffic at all (a balancer that took it out sends none)
   * before the load resumes.
   */
  endFault?(server: ServerProcess): Promise<void>;
  refusalsDuringFault?: number;
  concurrency?: number;
  /** The first fault comes after this many 202s. */
  minAcks?: number;
  /** Faults are injected again (up to this many rounds) until a request has been refused. */
  maxFaultRounds?: number;
  /** Bound on the node accepting webhooks and /readyz answering 200 again after the fault. */
  recoveryBoundMs?: number;
  /** After recovering, the load goes on until this many more 202s. */
  acksAfterRecovery?: number;
}

export interface FaultCycleResult {
  acknowledged: number;
  acked: ReadonlyMap<string, string>;
  lost: number;
  corrupted: number;
  bodiesChecked: number;
  stored: number;
  /** Fault rounds injected, and connections (or files) they broke. */
  faultRounds: number;
  connectionsBroken: number;
  /** 503 answers with Retry-After and a JSON error body. */
  refused: number;
  /** Answers other than 202 or such a 503 (each described): none are allowed. */
  badAnswers: string[];
  /** Requests without an answer: none are expected, the node never goes away. */
  failures: string[];
  /** With endFault: statuses /readyz gave while the fault held, by status. */
  readyzDuringFault: Record<string, number>;
  /** 202s to requests sent after the first fault was in place and before its end (stored all the same). */
  acceptedDuringFault: number;
  /** Statuses /readyz gave while recovering, by status. */
  readyzStatuses: Record<string, number>;
  /** Milliseconds from the (end of the) fault to a 202 sent after it with /readyz at 200. */
  recoveryMs: number;
  /** Answers other than 202 to requests sent after the node had recovered. */
  refusedAfterRecovery: number;
  /** How the node ended on SIGTERM. */
  exit: Exited;
  /** What the node wrote to stdout (JSON log lines). */
  serverLog: string;
  problems: string[];
}

/**
 * One fault cycle: a node on `target` under load; after `minAcks` 202s something beneath
 * it breaks (injectFault), again until a request has been refused, and holds until
 * endFault when one is given. Every answer must be a 202 or a 503 with Retry-After and a
 * JSON error body; the node must come back by itself (202s and /readyz 200 within
 * recoveryBoundMs); then every 202 is checked through the same node, which is never
 * restarted.
 */
export async function faultCycle(options: FaultCycleOptions): Promise<FaultCycleResult> {
  const concurrency = options.concurrency ?? 16;
  const minAcks = options.minAcks ?? 100;
  const maxFaultRounds = options.maxFaultRounds ?? 20;
  const recoveryBoundMs = options.recoveryBoundMs ?? 5_000;
  const acksAfterRecovery = options.acksAfterRecovery ?? 100;
  const refusalsDuringFault = options.refusalsDuringFault ?? 100;
  const problems: string[] = [];

  let server: ServerProcess | undefined;
  const loads: WebhookLoad[] = [];
  try {
    server = await startServer({ databaseUrl: options.target.databaseUrl, env: SERVER_ENV });
    const node = server;
    const tenant = options.target.tenant ?? (await createTenant(server.cliEnv));
    let refused = 0;
    const badAnswers: string[] = [];
    let firstFaultAt = Infinity;
    let lastFaultAt = Infinity;
    let recoveredAt = Infinity;
    let acceptedAfterFault = false;
    let acceptedDuringFault = 0;
    let faultEndedAt = Infinity;
    let refusedAfterRecovery = 0;

    const onAnswer = (answer: LoadAnswer) => {
      if (answer.status === 202) {
        if (answer.sentAt > lastFaultAt) acceptedAfterFault = true;
        if (answer.sentAt > firstFaultAt && answer.sentAt < faultEndedAt) acceptedDuringFault++;
        return;
      }
      if (answer.sentAt > recoveredAt) refusedAfterRecovery++;
      const problem = refusalProblem(answer);
      if (problem === undefined) refused++;
      else if (badAnswers.length < 10) badAnswers.push(problem);
    };
    const startLoad = () => {
      const load = new WebhookLoad({
        concurrency,
        targets: [{ address: node.url(`/api/webhooks/${tenant.integrationKey}`), apiKey: tenant.apiKey }],
        onAnswer,
      });
      loads.push(load);
      return load;
    };
    const acknowledged = () => loads.reduce((sum, load) => sum + load.acked.size, 0);
    const state = (readyz: Record<string, number>) =>
      JSON.stringify({ acceptedAfterFault, refused, badAnswers, failures: loads.flatMap((load) => load.failures).slice(0, 5), readyz });

    let load = startLoad();
    await until(() => load.acked.size >= minAcks, `${minAcks} acknowledgements before the fault`, 20_000);
    let faultRounds = 0;
    let connectionsBroken = 0;
    while (faultRounds < maxFaultRounds && refused === 0) {
      faultRounds++;
      if (!node.running) throw new Error(`the node exited under the fault; ${node.describe()}`);
      connectionsBroken += await options.injectFault(node);
      lastFaultAt = performance.now();
      firstFaultAt = Math.min(firstFaultAt, lastFaultAt);
      await until(() => refused > 0 || performance.now() - lastFaultAt > 200, 'a refusal');
    }

    const readyzDuringFault: Record<string, number> = {};
    if (options.endFault) {
      await until(
        async () => {
          count(readyzDuringFault, await readyz(node));
          return refused >= refusalsDuringFault && readyzDuringFault[503] !== undefined;
        },
        `${refusalsDuringFault} refusals and /readyz answering 503 while the fault holds`,
        15_000,
      ).catch((error: Error) => {
        throw new Error(`${error.message}; ${state(readyzDuringFault)}; ${node.describe()}`);
      });
      load.stop();
      await load.done;
      faultEndedAt = performance.now();
      await options.endFault(node);
      lastFaultAt = performance.now();
    }

    const readyzStatuses: Record<string, number> = {};
    await until(
      async () => {
        const status = await readyz(node);
        count(readyzStatuses, status);
        return status === 200 && (options.endFault !== undefined || acceptedAfterFault);
      },
      options.endFault ? 'the node to be ready again with no traffic' : 'the node to accept webhooks and be ready again',
      recoveryBoundMs,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; ${state(readyzStatuses)}; ${node.describe()}`);
    });
    recoveredAt = performance.now();
    if (options.endFault) load = startLoad();
    const acksAtRecovery = acknowledged();
    await until(() => acknowledged() >= acksAtRecovery + acksAfterRecovery, `${acksAfterRecovery} acknowledgements after recovering`, 10_000);
    const recoveryMs = Math.round(recoveredAt - lastFaultAt);
    load.stop();
    await load.done;

    const acked = new Map(loads.flatMap((each) => [...each.acked]));
    const check = await checkStored(node.baseUrl, tenant, acked);
    problems.push(...check.problems);
    const exit = await node.stop();
    return {
      acknowledged: acked.size,
      acked,
      lost: check.lost,
      corrupted: check.corrupted,
      bodiesChecked: check.bodiesChecked,
      stored: check.stored,
      faultRounds,
      connectionsBroken,
      refused,
      badAnswers,
      failures: loads.flatMap((each) => each.failures.map((failure) => failure.message)),
      readyzDuringFault,
      acceptedDuringFault,
      readyzStatuses,
      recoveryMs,
      refusedAfterRecovery,
      exit,
      serverLog: node.stdout,
      problems,
    };
  } finally {
    for (const load of loads) load.stop();
    await Promise.all(loads.map((load) => load.done));
    await server?.kill();
  }
}

/**
 * Beneath the API, on PostgreSQL (`query` runs SQL on the node's database): each
 * acknowledged uuid is one row of `webhooks` with the exact bytes sent. Returns the problems found and how many uuids have
 * more than one row.
 */
export async function checkRows(
  query: (text: string, params: unknown[]) => Promise<Array<{ uuid: string; raw_body: Buffer }>>,
  acked: ReadonlyMap<string, string>,
): Promise<{ problems: string[]; duplicated: number }> {
  const rows = await query('select uuid, raw_body from webhooks where uuid = any($1::text[])', [[...acked.keys()]]);
  const seen = new Map<string, number>();
  const problems: string[] = [];
  for (const row of rows) {
    seen.set(row.uuid, (seen.get(row.uuid) ?? 0) + 1);
    if (row.raw_body.toString('utf8') !== acked.get(row.uuid) && problems.length < 5) {
      problems.push(`${row.uuid}: the raw_body column differs from the bytes sent`);
    }
  }
  const duplicated = [...seen.values()].filter((times) => times > 1).length;
  const missing = [...acked.keys()].filter((uuid) => !seen.has(uuid));
  if (missing.length > 0) problems.push(`${missing.length} acknowledged uuids have no row, e.g. ${missing[0]}`);
  return { problems, duplicated };
}

/** Undefined for a proper refusal (503, Retry-After, JSON error body); else what is wrong. */
function refusalProblem(answer: LoadAnswer): string | undefined {
  const describe = `${answer.status} (retry-after ${answer.headers.get('retry-after')}): ${answer.text.slice(0, 200)}`;
  if (answer.status !== 503) return describe;
  if (!/^\d+$/.test(answer.headers.get('retry-after') ?? '')) return describe;
  if (!/^application\/json/.test(answer.headers.get('content-type') ?? '')) return describe;
  try {
    const body = JSON.parse(answer.text) as { error?: unknown; message?: unknown };
    if (typeof body.error !== 'string' || typeof body.message !== 'string') return describe;
  } catch {
    return describe;
  }
  return undefined;
}

/** /readyz's status; 0 when it does not answer within 2 s. */
async function readyz(server: ServerProcess): Promise<number> {
  try {
    const response = await fetch(server.url('/readyz'), { signal: AbortSignal.timeout(2_000) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

function count(statuses: Record<string, number>, status: number): void {
  statuses[status] = (statuses[status] ?? 0) + 1;
}

/** Polls until `probe` holds; throws past the bound (helpers.ts's waitFor needs Vitest). */
async function until(probe: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await probe())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}
