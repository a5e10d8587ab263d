import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../helpers.js';
import { makeTempDir, runCliJson, startServer, type Exited, type ServerProcess } from './processes.js';
import { checkStored, WebhookLoad, type LoadAnswer } from './webhook-load.js';

/**
 * Durability harnesses (contract, "Sending a webhook": "an acknowledged webhook survives
 * kill -9"), for any INTAKE_DATABASE_URL: load the real server with concurrent webhooks,
 * break something at a random moment (the node with SIGKILL, or its database connections),
 * and check that every 202 it gave is stored, byte for byte. Never leaves a process running.
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
   * Breaks the database side under the running node (never the node itself); resolves to
   * how many of its connections it broke.
   */
  injectFault(server: ServerProcess): Promise<number>;
  concurrency?: number;
  /** The first fault comes after this many 202s. */
  minAcks?: number;
  /** Faults are injected again (up to this many rounds) until a request has been refused. */
  maxFaultRounds?: number;
  /** Bound on the node accepting webhooks and /readyz answering 200 again after the last fault. */
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
  /** Fault rounds injected, and connections they broke. */
  faultRounds: number;
  connectionsBroken: number;
  /** 503 answers with Retry-After and a JSON error body. */
  refused: number;
  /** Answers other than 202 or such a 503 (each described): none are allowed. */
  badAnswers: string[];
  /** Requests without an answer: none are expected, the node never goes away. */
  failures: string[];
  /** Statuses /readyz gave while recovering, by status. */
  readyzStatuses: Record<string, number>;
  /** Milliseconds from the last fault to a 202 sent after it with /readyz at 200. */
  recoveryMs: number;
  /** Answers other than 202 to requests sent after the node had recovered. */
  refusedAfterRecovery: number;
  /** How the node ended on SIGTERM. */
  exit: Exited;
  problems: string[];
}

/**
 * One database-fault cycle: a node on `target` under load; after `minAcks` 202s its
 * database connections are broken (injectFault), again until a request has been refused.
 * Every answer must be a 202 or a 503 with Retry-After and a JSON error body; the node must
 * come back by itself (202s and /readyz 200 within recoveryBoundMs); then every 202 is
 * checked through the same node, which is never restarted.
 */
export async function faultCycle(options: FaultCycleOptions): Promise<FaultCycleResult> {
  const concurrency = options.concurrency ?? 16;
  const minAcks = options.minAcks ?? 100;
  const maxFaultRounds = options.maxFaultRounds ?? 20;
  const recoveryBoundMs = options.recoveryBoundMs ?? 5_000;
  const acksAfterRecovery = options.acksAfterRecovery ?? 100;
  const problems: string[] = [];

  let server: ServerProcess | undefined;
  try {
    server = await startServer({ databaseUrl: options.target.databaseUrl, env: SERVER_ENV });
    const node = server;
    const tenant = options.target.tenant ?? (await createTenant(server.cliEnv));
    let refused = 0;
    const badAnswers: string[] = [];
    let lastFaultAt = Infinity;
    let recoveredAt = Infinity;
    let acceptedAfterFault = false;
    let refusedAfterRecovery = 0;
    let acksAtRecovery = 0;

    const onAnswer = (answer: LoadAnswer) => {
      if (answer.status === 202) {
        if (answer.sentAt > lastFaultAt) acceptedAfterFault = true;
        return;
      }
      if (answer.sentAt > recoveredAt) refusedAfterRecovery++;
      const problem = refusalProblem(answer);
      if (problem === undefined) refused++;
      else if (badAnswers.length < 10) badAnswers.push(problem);
    };
    const load = new WebhookLoad({
      concurrency,
      targets: [{ address: server.url(`/api/webhooks/${tenant.integrationKey}`), apiKey: tenant.apiKey }],
      onAnswer,
    });

    try {
      await waitFor(async () => (load.acked.size >= minAcks ? true : undefined), `${minAcks} acknowledgements before the fault`, 20_000);
      let faultRounds = 0;
      let connectionsBroken = 0;
      while (faultRounds < maxFaultRounds && refused === 0) {
        faultRounds++;
        if (!node.running) throw new Error(`the node exited under the database fault; ${node.describe()}`);
        connectionsBroken += await options.injectFault(node);
        lastFaultAt = performance.now();
        await waitFor(async () => (refused > 0 || performance.now() - lastFaultAt > 200 ? true : undefined), 'a refusal');
      }

      const readyzStatuses: Record<string, number> = {};
      await waitFor(
        async () => {
          const status = await readyz(node);
          readyzStatuses[status] = (readyzStatuses[status] ?? 0) + 1;
          return acceptedAfterFault && status === 200 ? true : undefined;
        },
        'the node to accept webhooks and be ready again',
        recoveryBoundMs,
      ).catch((error: Error) => {
        const state = { acceptedAfterFault, refused, badAnswers, failures: load.failures.slice(0, 5), readyzStatuses };
        throw new Error(`${error.message}; ${JSON.stringify(state)}; ${node.describe()}`);
      });
      recoveredAt = performance.now();
      const recoveryMs = Math.round(recoveredAt - lastFaultAt);
      acksAtRecovery = load.acked.size;
      await waitFor(
        async () => (load.acked.size >= acksAtRecovery + acksAfterRecovery ? true : undefined),
        `${acksAfterRecovery} acknowledgements after recovering`,
        10_000,
      );
      load.stop();
      await load.done;

      const check = await checkStored(node.baseUrl, tenant, load.acked);
      problems.push(...check.problems);
      const exit = await node.stop();
      return {
        acknowledged: load.acked.size,
        acked: load.acked,
        lost: check.lost,
        corrupted: check.corrupted,
        bodiesChecked: check.bodiesChecked,
        stored: check.stored,
        faultRounds,
        connectionsBroken,
        refused,
        badAnswers,
        failures: load.failures.map((failure) => failure.message),
        readyzStatuses,
        recoveryMs,
        refusedAfterRecovery,
        exit,
        problems,
      };
    } finally {
      load.stop();
      await load.done;
    }
  } finally {
    await server?.kill();
  }
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

async function readyz(server: ServerProcess): Promise<number> {
  try {
    const response = await fetch(server.url('/readyz'), { signal: AbortSignal.timeout(2_000) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}
