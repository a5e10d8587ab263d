import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The service as its users run it: the compiled server (`node dist/main.js`, what `npm start`
 * runs) and the compiled CLI (`node dist/cli/main.js`), as child processes on loopback only.
 *
 * Every process started here is tracked until it exits; `killAll()` (call it in afterEach or
 * afterAll) SIGKILLs whatever is left, and an exit handler does the same if the test worker
 * itself goes away, so no test leaves a server behind even when it fails.
 */

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const SERVER_ENTRY = join(ROOT, 'dist', 'main.js');
export const CLI_ENTRY = join(ROOT, 'dist', 'cli', 'main.js');
export const LOOPBACK = '127.0.0.1';

const live = new Set<ChildProcess>();
const tempDirs = new Set<string>();

process.once('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** SIGKILLs every child process still running and waits for each to be reaped. */
export async function killAll(): Promise<void> {
  await Promise.all(
    [...live].map(
      (child) =>
        new Promise<void>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) {
            live.delete(child);
            return done();
          }
          child.once('exit', () => done());
          child.kill('SIGKILL');
        }),
    ),
  );
  live.clear();
}

/** How many tracked children are still running (tests can assert it is 0). */
export function liveProcessCount(): number {
  return [...live].filter((c) => c.exitCode === null && c.signalCode === null).length;
}

/** A new temporary folder, removed by removeTempDirs(). */
export function makeTempDir(prefix = 'intake-e2e-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/** Kill every process, then remove every temporary folder: the afterAll of a process suite. */
export async function cleanupAll(): Promise<void> {
  await killAll();
  removeTempDirs();
}

/** A port that was free a moment ago on the loopback address. */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, LOOPBACK, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        return reject(new Error('no port from listen(0)'));
      }
      server.close(() => resolvePort(address.port));
    });
  });
}

/**
 * The one secrets key of every test process (PostgreSQL requires one, and every node and
 * CLI run of a test must share it); SQLite runs would make their own without it.
 */
export const TEST_SECRETS_KEY = 'dGVzdC1zZWNyZXRzLWtleS0zMi1ieXRlcy1sb25nISE';

/**
 * scrypt's cost in every test process: the lowest (2^10, 2 ms a hash) instead of the
 * production 2^17 (0.4 s and 128 MiB a hash): the suite's sign-ins, sign-ups and password
 * changes spent minutes there. The hash carries its parameters, so nothing else changes.
 * The tests about the production cost set it back (test/password-cost.test.ts,
 * sign-in-flood.test.ts, log-secrets.test.ts).
 */
export const TEST_PASSWORD_HASH_COST = '10';

/**
 * The inherited environment without anything that configures the service, so the outer
 * shell cannot change what a test runs; callers add exactly what they mean (the test
 * secrets key and password-hash cost aside).
 */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = { INTAKE_SECRETS_KEY: TEST_SECRETS_KEY, INTAKE_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST };
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    // OTEL_*: a collector of the outer shell's must not get the tests' spans (test/tracing.test.ts sets its own).
    if (name.startsWith('INTAKE_') || name.startsWith('OTEL_') || name === 'PORT' || name === 'HOST' || name === 'LOG_LEVEL') continue;
    env[name] = value;
  }
  return env;
}

export interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
}

function track(child: ChildProcess): Promise<Exited> {
  live.add(child);
  return new Promise((resolveExit) => {
    // 'close' (not 'exit'): stdout and stderr are fully read by then.
    child.once('close', (code, signal) => {
      live.delete(child);
      resolveExit({ code, signal });
    });
    child.once('error', () => {
      live.delete(child);
      resolveExit({ code: null, signal: null });
    });
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<'timeout'>((done) => {
      timer = setTimeout(() => done('timeout'), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export interface RunResult extends Exited {
  stdout: string;
  stderr: string;
  /** performance.now() when the process had exited and its output was read. */
  endedAt: number;
  durationMs: number;
}

/** Runs `node ENTRY ARGS…` to completion (SIGKILL after timeoutMs) and returns its output. */
export async function runNode(
  entry: string,
  args: string[],
  env: Record<string, string>,
  options: { timeoutMs?: number; cwd?: string } = {},
): Promise<RunResult> {
  const startedAt = performance.now();
  const child = spawn(process.execPath, [entry, ...args], {
    cwd: options.cwd ?? ROOT,
    env: { ...baseEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = track(child);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const result = await withTimeout(exited, timeoutMs);
  if (result === 'timeout') {
    child.kill('SIGKILL');
    await exited;
    throw new Error(`node ${entry} ${args.join(' ')} did not exit within ${timeoutMs} ms; stderr: ${stderr.slice(-2000)}`);
  }
  const endedAt = performance.now();
  return { ...result, stdout, stderr, endedAt, durationMs: endedAt - startedAt };
}

/** Runs the CLI (`intake ARGS…`) with this environment. */
export function runCli(args: string[], env: Record<string, string>, options: { timeoutMs?: number } = {}): Promise<RunResult> {
  return runNode(CLI_ENTRY, args, env, options);
}

/**
 * Runs a CLI command that must succeed with --json: exit 0 and exactly one JSON object on
 * one line of stdout. Returns the object (and the run, for timing).
 */
export async function runCliJson<T extends Record<string, unknown> = Record<string, unknown>>(
  args: string[],
  env: Record<string, string>,
): Promise<{ json: T; run: RunResult }> {
  const run = await runCli(args.includes('--json') ? args : [...args, '--json'], env);
  const describe = () => `intake ${args.join(' ')} → exit ${run.code}${run.signal ? ` (${run.signal})` : ''}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;
  if (run.code !== 0) throw new Error(`CLI failed: ${describe()}`);
  const lines = run.stdout.split('\n').filter((line) => line !== '');
  if (lines.length !== 1 || !run.stdout.endsWith('\n')) throw new Error(`CLI --json must print exactly one line: ${describe()}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(lines[0]!);
  } catch {
    throw new Error(`CLI --json printed something that is not JSON: ${describe()}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`CLI --json must print a JSON object: ${describe()}`);
  }
  return { json: parsed as T, run };
}

export interface StartOptions {
  /** INTAKE_DATABASE_URL to run on (`sqlite:PATH` or `postgres://…`); wins over dbPath. */
  databaseUrl?: string;
  /** SQLite file to use; a fresh one in a new temporary folder when neither is given. */
  dbPath?: string;
  /** Extra variables (LOG_LEVEL, INTAKE_ENV…); they win over the defaults set here. */
  env?: Record<string, string>;
  /** Bound on waiting for GET /healthz. */
  readyTimeoutMs?: number;
  /** The port to listen on (a restart keeps its address); a free one when absent. */
  port?: number;
}

/** A running `node dist/main.js`, with its output captured. */
export class ServerProcess {
  stdout = '';
  stderr = '';
  exitInfo: Exited | undefined;
  readonly exited: Promise<Exited>;

  constructor(
    readonly child: ChildProcess,
    readonly port: number,
    /** The INTAKE_DATABASE_URL it runs on; restart on the same database with it. */
    readonly databaseUrl: string,
    /** The variables the CLI needs to work on the same database and print the same addresses. */
    readonly cliEnv: Record<string, string>,
  ) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.exited = track(child).then((info) => (this.exitInfo = info));
  }

  /** The SQLite file it runs on; undefined on PostgreSQL. */
  get dbPath(): string | undefined {
    return this.databaseUrl.startsWith('sqlite:') ? this.databaseUrl.slice('sqlite:'.length) : undefined;
  }

  get baseUrl(): string {
    return `http://${LOOPBACK}:${this.port}`;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  url(path: string): string {
    return `${this.baseUrl}${path}`;
  }

  stdoutLines(): string[] {
    return this.stdout.split('\n').filter((line) => line !== '');
  }

  /** Waits (bounded) until stdout matches; returns the match. */
  async waitForStdout(pattern: RegExp, timeoutMs = 5_000): Promise<RegExpMatchArray> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const match = this.stdout.match(pattern);
      if (match) return match;
      if (!this.running) throw new Error(`server exited before printing ${pattern}; ${this.describe()}`);
      if (performance.now() > deadline) throw new Error(`server did not print ${pattern} within ${timeoutMs} ms; ${this.describe()}`);
      await sleep(25);
    }
  }

  /** Waits until GET /healthz answers 200, the process exits, or the bound passes. */
  async waitUntilHealthy(timeoutMs = 15_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`server exited before answering /healthz; ${this.describe()}`);
      try {
        const response = await fetch(this.url('/healthz'), { signal: AbortSignal.timeout(1_000) });
        await response.arrayBuffer();
        if (response.status === 200) return;
      } catch {
        // not listening yet
      }
      if (performance.now() > deadline) throw new Error(`server not healthy within ${timeoutMs} ms; ${this.describe()}`);
      await sleep(50);
    }
  }

  /**
   * SIGTERM, then wait for the exit. Past the bound it is SIGKILLed and this throws: a
   * server that does not stop on SIGTERM is a failure, not something to wait out.
   */
  async stop(timeoutMs = 15_000): Promise<Exited> {
    if (!this.running) return this.exitInfo!;
    this.child.kill('SIGTERM');
    const result = await withTimeout(this.exited, timeoutMs);
    if (result === 'timeout') {
      this.child.kill('SIGKILL');
      await this.exited;
      throw new Error(`server did not exit within ${timeoutMs} ms of SIGTERM; ${this.describe()}`);
    }
    return result;
  }

  /** kill -9, and wait until it is gone. */
  async kill(): Promise<Exited> {
    if (!this.running) return this.exitInfo!;
    this.child.kill('SIGKILL');
    return this.exited;
  }

  describe(): string {
    const exit = this.exitInfo ? `exit ${this.exitInfo.code}${this.exitInfo.signal ? ` (${this.exitInfo.signal})` : ''}` : 'running';
    return `${exit}; stdout: ${this.stdout.slice(-2000)}; stderr: ${this.stderr.slice(-2000)}`;
  }
}

/** The variables a server on this port and SQLite file runs with. */
export function serverEnv(port: number, dbPath: string, extra: Record<string, string> = {}): Record<string, string> {
  return serverEnvFor(port, `sqlite:${dbPath}`, extra);
}

/**
 * The admission gate is off unless a test turns it on (test/admission.test.ts): a test
 * process stalled on a busy machine looks like overload to it, and a spurious 503 would
 * fail tests that allow none. Servers started here and apps built by buildTestApp both
 * use it.
 */
export const ADMISSION_GATE_OFF = { INTAKE_MAX_EVENT_LOOP_LAG_MS: '0', INTAKE_MAX_QUEUE_WAIT_MS: '0' } as const;

/** The variables a server on this port and database (any INTAKE_DATABASE_URL) runs with. */
export function serverEnvFor(port: number, databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: String(port),
    HOST: LOOPBACK,
    INTAKE_DATABASE_URL: databaseUrl,
    INTAKE_BASE_URL: `http://${LOOPBACK}:${port}`,
    ...ADMISSION_GATE_OFF,
    ...extra,
  };
}

/**
 * Starts `node dist/main.js` on a free loopback port and waits until /healthz answers.
 * Retries on another port if the chosen one was taken in the meantime.
 */
export async function startServer(options: StartOptions = {}): Promise<ServerProcess> {
  const databaseUrl = options.databaseUrl ?? `sqlite:${options.dbPath ?? join(makeTempDir(), 'intake.db')}`;
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort());
    const env = serverEnvFor(port, databaseUrl, options.env);
    const child = spawn(process.execPath, [SERVER_ENTRY], {
      cwd: ROOT,
      env: { ...baseEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const server = new ServerProcess(child, port, databaseUrl, {
      INTAKE_DATABASE_URL: env.INTAKE_DATABASE_URL!,
      INTAKE_BASE_URL: env.INTAKE_BASE_URL!,
      ...(options.env?.INTAKE_ENV ? { INTAKE_ENV: options.env.INTAKE_ENV } : {}),
      // The CLI hashes the passwords it sets as the server would.
      ...(options.env?.INTAKE_PASSWORD_HASH_COST !== undefined ? { INTAKE_PASSWORD_HASH_COST: options.env.INTAKE_PASSWORD_HASH_COST } : {}),
    });
    try {
      await server.waitUntilHealthy(options.readyTimeoutMs);
      return server;
    } catch (error) {
      await server.kill();
      if (attempt < 3 && options.port === undefined && /EADDRINUSE/.test(server.stderr + server.stdout)) continue;
      throw error;
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Runs `task` over `items` with at most `concurrency` at a time. */
export async function mapConcurrent<T, R>(items: readonly T[], concurrency: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await task(items[index]!);
      }
    }),
  );
  return results;
}

export interface ListedWebhook {
  uuid: string;
  event: string;
  data: unknown;
  received_at: string;
}

/**
 * Every webhook of an integration through GET /api/webhooks/KEY, following next_cursor
 * with limit=200. Throws on any non-200 page or on a uuid listed twice.
 */
export async function listAllWebhooks(baseUrl: string, integrationKey: string, apiKey: string): Promise<ListedWebhook[]> {
  const all: ListedWebhook[] = [];
  const seen = new Set<string>();
  let cursor: string | null = null;
  for (let page = 0; ; page++) {
    if (page > 100_000) throw new Error('pagination does not end');
    const query = new URLSearchParams({ limit: '200' });
    if (cursor !== null) query.set('cursor', cursor);
    const response = await fetch(`${baseUrl}/api/webhooks/${integrationKey}?${query}`, {
      headers: { 'x-api-key': apiKey },
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`list page ${page} answered ${response.status}: ${text}`);
    const body = JSON.parse(text) as { data: ListedWebhook[]; next_cursor: string | null };
    if (!Array.isArray(body.data) || body.data.length > 200) throw new Error(`list page ${page} is malformed: ${text.slice(0, 500)}`);
    for (const item of body.data) {
      if (seen.has(item.uuid)) throw new Error(`uuid ${item.uuid} listed twice`);
      seen.add(item.uuid);
      all.push(item);
    }
    if (body.next_cursor === null) return all;
    if (typeof body.next_cursor !== 'string' || body.data.length === 0) throw new Error(`bad next_cursor on page ${page}: ${text.slice(0, 500)}`);
    cursor = body.next_cursor;
  }
}
