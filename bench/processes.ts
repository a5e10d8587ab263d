import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { promisify } from 'node:util';

/**
 * The secrets key of this benchmark run, shared by its server, its CLI calls and the
 * destinations it seals itself (PostgreSQL requires one; on SQLite it spares a key file in
 * the temp dir).
 */
export const SECRETS_ENV = { INTAKE_SECRETS_KEY: process.env.INTAKE_SECRETS_KEY ?? randomBytes(32).toString('base64url') };

/** A server the benchmark started, with the log its output goes to. */
export interface ServerProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  logPath: string;
}

/** A port free at this moment (the child binds it a moment later; good enough on loopback). */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port from the probe server');
  return address.port;
}

/**
 * Starts `node script` with env, output to logPath, and resolves once readyPath answers
 * (any status when acceptAnyStatus, else 200). Rejects with the log's tail if the process
 * exits first or takes longer than 30 s.
 */
export async function startServer(
  script: string,
  env: Record<string, string>,
  logPath: string,
  readyPath: string,
  acceptAnyStatus = false,
): Promise<ServerProcess> {
  const port = await freePort();
  const serverEnv = { ...process.env, ...SECRETS_ENV, ...env, PORT: String(port), HOST: '127.0.0.1' };
  return startProcess(process.execPath, [script], serverEnv, { port, logPath, readyPath, acceptAnyStatus });
}

/**
 * Starts `command args` with env, output to logPath, and resolves once
 * `http://127.0.0.1:port/readyPath` answers (any status when acceptAnyStatus, else 2xx).
 * Rejects with the log's tail if the process exits first or takes longer than 30 s.
 */
export async function startProcess(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: { port: number; logPath: string; readyPath: string; acceptAnyStatus: boolean },
): Promise<ServerProcess> {
  const { port, logPath } = ready;
  const log = openSync(logPath, 'a');
  const child = spawn(command, args, { env, stdio: ['ignore', log, log] });
  const server = { child, pid: child.pid ?? 0, port, logPath };
  const name = args[0] === undefined ? command : `${command} ${args[0]}`;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${logTail(logPath)}`);
    try {
      const response = await fetch(`http://127.0.0.1:${port}${ready.readyPath}`);
      if (ready.acceptAnyStatus || response.ok) return server;
    } catch {
      // Not listening yet.
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error(`${name} was not ready after 30 s:\n${logTail(logPath)}`);
}

/** SIGTERM, then the exit code (SIGKILL after 15 s: a drain that long is itself a finding). */
export async function stopServer(server: ServerProcess): Promise<number | null> {
  if (server.child.exitCode !== null) return server.child.exitCode;
  const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), 15_000);
  const code = await exited;
  clearTimeout(timer);
  return code;
}

/** The process's peak resident memory since start or the last resetPeakRss, in MB. */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(status);
  if (!match?.[1]) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Math.round(Number(match[1]) / 1024);
}

/** Starts a new peak, so each phase reports its own (Linux: "5" to clear_refs). */
export function resetPeakRss(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** Runs `node dist/cli/main.js args…` and returns its one JSON object. */
export async function runCli(root: string, databaseUrl: string, args: string[]): Promise<Record<string, string>> {
  const { stdout } = await promisify(execFile)(process.execPath, [`${root}/dist/cli/main.js`, ...args, '--json'], {
    env: { ...process.env, ...SECRETS_ENV, INTAKE_DATABASE_URL: databaseUrl },
  });
  return JSON.parse(stdout) as Record<string, string>;
}

export function logTail(logPath: string, lines = 20): string {
  return readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * How busy the machine's CPUs were over the given interval, in percent: taken before a run
 * starts anything, it shows whether something else was competing for the machine.
 */
export async function machineBusyPercent(intervalMs = 1_000): Promise<number> {
  const sample = () => {
    const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    return { idle, total: fields.reduce((sum, value) => sum + value, 0) };
  };
  const before = sample();
  await sleep(intervalMs);
  const after = sample();
  return Math.round(100 * (1 - (after.idle - before.idle) / Math.max(1, after.total - before.total)));
}

/**
 * Installs Debian's `pkg` when `binary` is missing, so a fresh machine runs the bench as it
 * is (as CI installs Chromium for the browser tests). Needs root, as apt-get does.
 */
export async function ensureDebianPackage(binary: string, pkg: string, neededFor: string): Promise<void> {
  if (existsSync(binary)) return;
  process.stdout.write(`${binary} is missing: apt-get install -y ${pkg}\n`);
  const aptGet = (...args: string[]) =>
    new Promise<number | null>((resolve) => {
      const child = spawn('apt-get', args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
      child.once('error', () => resolve(null));
      child.once('exit', resolve);
    });
  // The package lists of a fresh machine may be empty or stale; a failed update leaves
  // the install to say what is wrong.
  await aptGet('update', '-qq');
  if ((await aptGet('install', '-y', '-qq', pkg)) !== 0 || !existsSync(binary)) {
    throw new Error(`could not install ${pkg} (apt-get install -y ${pkg}, as root); ${neededFor} needs ${binary}`);
  }
}
