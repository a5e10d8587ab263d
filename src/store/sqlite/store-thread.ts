import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import type { Store } from '../store.js';
import {
  detachBuffers,
  reviveBuffers,
  type ThreadData,
  type ThreadMethod,
  type ThreadReply,
  type ThreadRequest,
  type ThreadRole,
} from './thread-protocol.js';

/**
 * The commit thread's young generation, in MB (V8's default here is 48, as on the event
 * loop). Every group it commits leaves short-lived objects (the posted batch, its rows,
 * Kysely's statements), which the default lets grow to that size before a collection
 * must run. With 4 MB the service's peak RSS under a 64-connection load
 * of 7 KB webhooks fell from 248 to 230 MB (medians of 6), at the same rate
 * (docs/performance-history.md). The read thread keeps the default: its pages of bodies are what
 * young space is for, and idle it holds little.
 */
export const COMMIT_THREAD_YOUNG_GENERATION_MB = 4;

const RESOURCE_LIMITS: Record<ThreadRole, ResourceLimits> = {
  commit: { maxYoungGenerationSizeMb: COMMIT_THREAD_YOUNG_GENERATION_MB },
  read: {},
};

/**
 * How long a thread stays without a call before it stops (undefined: never). The read
 * thread serves the API's heavy reads, which may not come for hours: its isolate, idle, is
 * 20 MB of the service's RSS (peak under a 64-connection load of 7 KB webhooks 193-198 MB
 * without it, 214-220 with it, 5 pairs; docs/performance-history.md). Its next read starts it again,
 * in about 100-200 ms. The commit thread is in use whenever intake is.
 */
export const IDLE_STOP_MS: Record<ThreadRole, number | undefined> = {
  commit: undefined,
  read: 60_000,
};

interface InFlight {
  worker: Worker;
  resolve(result: unknown): void;
  reject(error: Error): void;
}

/**
 * Runs some of the store's methods on a worker thread with a connection of its own: the
 * `commit` thread takes intake's writes, the `read` thread the API's heavy reads (see
 * THREAD_METHODS).
 *
 * better-sqlite3 is synchronous: on the event loop, each batch's inserts, its commit's
 * fsync and every WAL checkpoint, and every read of a page of webhook bodies or a payload
 * search, stop the server from reading, parsing and answering anything else. On their own
 * threads a batch commits and a search scans while intake goes on. WAL lets the read
 * thread's connection (read-only) run beside the writers without waiting for them.
 *
 * All of intake's writes go to the commit thread, not only the commits: a write on the main
 * connection must wait for the thread's lock, and SQLite waits by sleeping (in steps of up
 * to 100 ms), which on the main thread stops the event loop. The API's rare changes stay
 * on the main connection and wait for the lock like any writer (busy_timeout; both sides
 * begin IMMEDIATE).
 *
 * A thread starts with its first call (the server pings the commit thread once migrations
 * have run, so the first webhooks do not wait 100-200 ms for it to load; the read thread
 * waits for its first read, and stops after IDLE_STOP_MS without one) and keeps the process
 * alive only while a call is in flight. If it dies, the calls in flight fail (a sender gets
 * no 202 and retries; a reader gets a 5xx) and the next call starts a new thread.
 */
export class SqliteThread<R extends ThreadRole> {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly inFlight = new Map<number, InFlight>();
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly idleStopMs: number | undefined;
  /** Busy milliseconds of the threads that have stopped (the read thread stops when idle). */
  private busyMsStopped = 0;
  /** The running thread's busy milliseconds when last read: a thread that has exited reads as never busy. */
  private busyMsRead = 0;

  constructor(
    private readonly path: string,
    readonly role: R,
    options: { idleStopMs?: number } = {},
  ) {
    this.idleStopMs = options.idleStopMs ?? IDLE_STOP_MS[role];
  }

  /** Whether the thread is started (a call starts it; IDLE_STOP_MS may stop it). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /**
   * Seconds the thread (every thread this has started, in turn) has been busy: running a
   * call, or waiting inside one for the disk or a lock, rather than waiting for a call. V8's
   * event-loop utilisation of the thread. Its rate says how close the thread is to being
   * what limits the node (/metrics, intake_thread_busy_seconds_total).
   */
  busySeconds(): number {
    if (this.worker) this.busyMsRead = Math.max(this.busyMsRead, this.worker.performance.eventLoopUtilization().active);
    return (this.busyMsStopped + this.busyMsRead) / 1000;
  }

  /** Runs the store's `method` on the thread and resolves with its result. */
  call<M extends ThreadMethod<R>>(method: M, ...args: Parameters<Store[M]>): Promise<Awaited<ReturnType<Store[M]>>> {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.inFlight.set(id, { worker, resolve: resolve as (result: unknown) => void, reject });
      worker.ref();
      // The caller keeps its arguments (a batch is answered after its commit): copied, not moved.
      const request: ThreadRequest<M> = { id, method, args: detachBuffers(args) };
      worker.postMessage(request);
    });
  }

  /** Stops the thread; calls still in flight fail. */
  async close(): Promise<void> {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const worker = this.worker;
    if (worker) this.retire(worker);
    await worker?.terminate();
  }

  private start(): Worker {
    const workerData: ThreadData = { path: this.path, role: this.role };
    const worker = new Worker(workerScript(), { workerData, resourceLimits: RESOURCE_LIMITS[this.role] });
    worker.unref();
    worker.on('message', (reply: ThreadReply) => this.settle(worker, reply));
    worker.on('error', (error) => this.failAll(worker, error));
    worker.on('exit', (code) => this.failAll(worker, new Error(`the SQLite ${this.role} thread stopped (exit code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private settle(worker: Worker, reply: ThreadReply): void {
    const waiting = this.inFlight.get(reply.id);
    if (!waiting) return;
    this.inFlight.delete(reply.id);
    if (![...this.inFlight.values()].some((call) => call.worker === worker)) {
      worker.unref();
      this.stopWhenIdle(worker);
    }
    if ('result' in reply) waiting.resolve(reviveBuffers(reply.result));
    else waiting.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
  }

  /** Stops `worker` once it has had no call for idleStopMs; a call before then keeps it. */
  private stopWhenIdle(worker: Worker): void {
    if (this.idleStopMs === undefined || this.worker !== worker) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.worker !== worker || this.inFlight.size > 0) return;
      this.retire(worker);
      void worker.terminate();
    }, this.idleStopMs);
    this.idleTimer.unref();
  }

  /**
   * Forgets the current thread and keeps its busy time, read before it is stopped. One that
   * died has exited and reads as never busy: it keeps what was last read of it, so the
   * total never falls.
   */
  private retire(worker: Worker): void {
    this.busyMsStopped += Math.max(this.busyMsRead, worker.performance.eventLoopUtilization().active);
    this.busyMsRead = 0;
    this.worker = undefined;
  }

  /** The calls on a thread that stopped fail; a thread started since keeps its own. */
  private failAll(worker: Worker, error: Error): void {
    if (this.worker === worker) this.retire(worker);
    for (const [id, call] of this.inFlight) {
      if (call.worker !== worker) continue;
      this.inFlight.delete(id);
      call.reject(error);
    }
  }
}

/**
 * Compiled, the worker sits beside this file. Run from the TypeScript sources (vitest), it
 * is taken from the build in dist/, which `npm test` makes first.
 */
function workerScript(): URL {
  const beside = new URL('./store-worker.js', import.meta.url);
  if (existsSync(fileURLToPath(beside))) return beside;
  return new URL('../../../dist/store/sqlite/store-worker.js', import.meta.url);
}
