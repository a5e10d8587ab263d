import { spawn, type ChildProcess } from 'node:child_process';
import { CLI_ENTRY, ROOT, baseEnv, sleep, type Exited } from './processes.js';

/**
 * `intake listen` as a developer runs it: a child process whose stdout lines (with --json,
 * one object each) and stderr lines the test reads while it runs.
 */
export class ListenProcess {
  stdout = '';
  stderr = '';
  exitInfo: Exited | undefined;
  readonly exited: Promise<Exited>;
  readonly #child: ChildProcess;

  constructor(args: string[], env: Record<string, string>) {
    this.#child = spawn(process.execPath, [CLI_ENTRY, 'listen', ...args], {
      cwd: ROOT,
      env: { ...baseEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.stdout += chunk));
    this.#child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.exited = new Promise((done) => this.#child.once('close', (code, signal) => done((this.exitInfo = { code, signal }))));
  }

  /** The --json lines printed so far, one object per forwarded webhook. */
  forwarded(): ForwardLine[] {
    return this.stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as ForwardLine);
  }

  stderrLines(): string[] {
    return this.stderr.split('\n').filter((line) => line !== '');
  }

  /** Waits (bounded) until `done` holds over what was printed. */
  async waitFor(what: string, done: () => boolean, timeoutMs = 15_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!done()) {
      if (this.exitInfo) throw new Error(`intake listen exited (${JSON.stringify(this.exitInfo)}) before ${what}; ${this.describe()}`);
      if (performance.now() > deadline) throw new Error(`intake listen: no ${what} within ${timeoutMs} ms; ${this.describe()}`);
      await sleep(20);
    }
  }

  /** Waits until it is following the feed (it says so on stderr). */
  ready(): Promise<void> {
    return this.waitFor('listening line', () => /^listening to /m.test(this.stderr));
  }

  /** Ctrl-C: it finishes the forward in progress, saves its cursor and exits 0. */
  async interrupt(): Promise<Exited> {
    if (!this.exitInfo) this.#child.kill('SIGINT');
    return this.exited;
  }

  async kill(): Promise<Exited> {
    if (!this.exitInfo) this.#child.kill('SIGKILL');
    return this.exited;
  }

  describe(): string {
    return `stdout: ${this.stdout.slice(-1500)}\nstderr: ${this.stderr.slice(-1500)}`;
  }
}

export interface ForwardLine {
  time: string;
  uuid: string;
  integration_id: string;
  integration: string;
  event: string;
  url: string;
  status: number | null;
  ok: boolean;
  duration_ms: number;
  answer?: string;
  error?: string;
  resent?: boolean;
  skipped?: string;
}
