import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { PROGRESS_SLOT, type TransformRun, type WorkerReply, type WorkerTask } from './protocol.js';
import { failed, type TransformContext, type TransformOutcome, type TransformRequest } from './request.js';
import type { SandboxLimits } from './sandbox.js';

export type { TransformContext, TransformOutcome, TransformRequest } from './request.js';
export type { TransformRun } from './protocol.js';

/**
 * Runs destinations' transformations (sandbox.ts) on worker threads, never on the event
 * loop: each worker runs one task at a time, the rest wait in a bounded queue. A task is one
 * run in a fresh context (`run`, `check`), or a batch of one owner's runs in its warm
 * contexts (`runMany`: deliveries), one message each way for the batch. A task past
 * its bound (built-in calls that outrun the CPU limit's checks, see sandbox.ts) gets its
 * worker terminated; the next task that needs a worker starts a new one (about 60 ms: the
 * thread and QuickJS's module). The bound counts the worker thread's CPU time where Linux
 * gives it (/proc/self/task/ID/schedstat): the workers run at a lower priority than
 * intake's threads, and on a busy machine a run may wait for the CPU far longer than it
 * runs. A thread that gets no CPU at all is stopped after STARVED_FACTOR times the bound.
 * A batch's time, charged to its company (delivery-rules.ts), is that CPU time too.
 *
 * Workers start when the first tasks come and stay; idle, they do not keep the process alive.
 */

export interface TransformPoolOptions {
  /** Worker threads (default: 2, or 1 on a single core). */
  workers?: number;
  /** CPU time a run may take, its code's top level included (default 50 ms). */
  cpuMs?: number;
  /** Memory a run's QuickJS heap may take (default 32 MB). */
  memoryMb?: number;
  /** Tasks waiting for a worker; one more is refused (default 1000). */
  maxQueue?: number;
  /** Time a task may hold a worker before the worker is stopped, its thread's CPU time where there is one (default 4 × cpuMs + 300 ms). */
  wallMs?: number;
  /** Reads a worker thread's CPU time, ms, by its kernel id; null where it cannot (tests freeze it). */
  threadCpuMs?: (threadId: number) => number | null;
}

/** A task whose thread got less CPU than its bound is still stopped once the wall clock passes this many times the bound. */
const STARVED_FACTOR = 20;
/** How long, at least, before a task under its CPU bound is looked at again. */
const RECHECK_MS = 20;

/** `run` or `check` refused: the queue holds maxQueue tasks already. */
export class TransformQueueFull extends Error {
  constructor(maxQueue: number) {
    super(`the transformation queue is full (${maxQueue} waiting): try again later`);
    this.name = 'TransformQueueFull';
  }
}

/** `run` or `check` after `close`, or a task still waiting or running when it came. */
export class TransformPoolClosed extends Error {
  constructor() {
    super('the transformation pool is closed');
    this.name = 'TransformPoolClosed';
  }
}

/** What a batch gave: an outcome per run, null for a run not started (its budget was spent first), and the worker's time on it. */
export interface BatchOutcome {
  outcomes: Array<TransformOutcome | null>;
  usedMs: number;
}

/** The pool's state at a glance, for metrics and tests. */
export interface TransformPoolStats {
  /** Worker threads started and not stopped. */
  workers: number;
  waiting: number;
  /** Workers stopped for a task past the wall-clock bound, or that died. */
  replaced: number;
}

interface Pending {
  task: WorkerTask;
  /** `cpuMs`: the worker thread's CPU time from the task's start to its reply, null where unknown. */
  answer(reply: WorkerReply, cpuMs: number | null): void;
  /** The worker could not answer: the pool says why, as the task's outcome; `finished` is how many of a batch's runs it had finished. */
  lost(message: string, finished: number): void;
  fail(error: Error): void;
}

interface Slot {
  worker: Worker;
  /** The worker's count of its batch's finished runs (protocol.ts). */
  progress: Int32Array;
  ready: boolean;
  /** The worker thread's kernel id, once it is ready (null: not Linux). */
  threadId: number | null;
  running?: Pending;
  timer?: NodeJS.Timeout;
  /** When the running task was posted, on the wall clock and on its thread's CPU clock. */
  startedAt: number;
  cpuAtStart: number | null;
}

/** Worker threads running transformations, one task each at a time, the rest queued. */
export class TransformPool {
  private readonly workers: number;
  private readonly limits: SandboxLimits;
  private readonly maxQueue: number;
  private readonly wallMs: number;
  private readonly threadCpuMs: (threadId: number) => number | null;
  private readonly slots = new Set<Slot>();
  private readonly waiting: Pending[] = [];
  private nextId = 1;
  private replaced = 0;
  private closed = false;

  constructor(options: TransformPoolOptions = {}) {
    this.workers = options.workers ?? Math.min(2, availableParallelism());
    const cpuMs = options.cpuMs ?? 50;
    this.limits = { cpuMs, memoryMb: options.memoryMb ?? 32 };
    this.maxQueue = options.maxQueue ?? 1000;
    this.wallMs = options.wallMs ?? cpuMs * 4 + 300;
    this.threadCpuMs = options.threadCpuMs ?? schedstatCpuMs;
  }

  /**
   * Runs `code`'s transform on the request. Whatever the code does is an outcome; rejects
   * only when the task cannot run: TransformQueueFull, TransformPoolClosed, or a worker that
   * fails to start.
   */
  run(code: string, request: TransformRequest, context: TransformContext): Promise<TransformOutcome> {
    return new Promise((resolve, reject) =>
      this.submit({
        task: { kind: 'run', id: this.nextId++, code, request, context },
        answer: (reply) => resolve(reply.kind === 'outcome' ? reply.outcome : failed('the worker answered out of turn')),
        lost: (message) => resolve(failed(message)),
        fail: reject,
      }),
    );
  }

  /**
   * Runs a batch of `owner`'s transformations (a company's) in its warm contexts, one after
   * another on one worker, starting none once `budgetMs` has passed (the first always
   * starts). Whatever the code does is an outcome; rejects as `run` does.
   */
  runMany(owner: string, runs: TransformRun[], budgetMs: number): Promise<BatchOutcome> {
    return new Promise((resolve, reject) =>
      this.submit({
        task: { kind: 'runs', id: this.nextId++, owner, runs, budgetMs },
        answer: (reply, cpuMs) =>
          resolve(
            reply.kind === 'outcomes'
              ? { outcomes: reply.outcomes, usedMs: cpuMs ?? reply.usedMs }
              : { outcomes: runs.map(() => failed('the worker answered out of turn')), usedMs: 0 },
          ),
        // The runs it had finished are lost with it, but sent nothing: they are run again.
        lost: (message, finished) =>
          resolve({ outcomes: runs.map((_, index) => (index === finished ? failed(message) : null)), usedMs: budgetMs + this.wallMs }),
        fail: reject,
      }),
    );
  }

  /**
   * Null when `code` compiles and defines a function (see sandbox.ts for the convention),
   * else what is wrong, with its line when there is one. Its top level runs, within the limits.
   */
  check(code: string): Promise<string | null> {
    return new Promise((resolve, reject) =>
      this.submit({
        task: { kind: 'check', id: this.nextId++, code },
        answer: (reply) => resolve(reply.kind === 'checked' ? reply.problem : 'the worker answered out of turn'),
        lost: resolve,
        fail: reject,
      }),
    );
  }

  /** How many workers run, how many tasks wait, how many workers were replaced. */
  stats(): TransformPoolStats {
    return { workers: this.slots.size, waiting: this.waiting.length, replaced: this.replaced };
  }

  /** Refuses what waits, stops what runs (it is refused too) and the workers. */
  async close(): Promise<void> {
    this.closed = true;
    for (const pending of this.waiting.splice(0)) pending.fail(new TransformPoolClosed());
    const stopping = [...this.slots].map((slot) => {
      this.slots.delete(slot);
      clearTimeout(slot.timer);
      slot.running?.fail(new TransformPoolClosed());
      return slot.worker.terminate();
    });
    await Promise.all(stopping);
  }

  private submit(pending: Pending): void {
    if (this.closed) return pending.fail(new TransformPoolClosed());
    if (this.waiting.length >= this.maxQueue) return pending.fail(new TransformQueueFull(this.maxQueue));
    this.waiting.push(pending);
    this.pump();
  }

  /** Gives waiting tasks to idle workers, and starts workers while tasks wait for them and fewer than `workers` run. */
  private pump(): void {
    for (const slot of this.slots) {
      if (this.waiting.length === 0) break;
      if (slot.ready && slot.running === undefined) this.start(slot, this.waiting.shift()!);
    }
    const starting = [...this.slots].filter((slot) => !slot.ready).length;
    for (let wanted = this.waiting.length - starting; wanted > 0 && this.slots.size < this.workers; wanted--) this.spawn();
  }

  private start(slot: Slot, pending: Pending): void {
    slot.running = pending;
    Atomics.store(slot.progress, PROGRESS_SLOT, 0);
    slot.worker.ref();
    slot.startedAt = performance.now();
    slot.cpuAtStart = slot.threadId === null ? null : this.threadCpuMs(slot.threadId);
    slot.worker.postMessage(pending.task);
    // A batch starts no run past its budget, and each run is bounded as a single one is.
    const boundMs = pending.task.kind === 'runs' ? pending.task.budgetMs + this.wallMs : this.wallMs;
    slot.timer = setTimeout(() => this.overran(slot, boundMs), boundMs);
  }

  /** The running task's CPU time so far, null where the thread's clock cannot be read. */
  private cpuSinceStart(slot: Slot): number | null {
    if (slot.threadId === null || slot.cpuAtStart === null) return null;
    const now = this.threadCpuMs(slot.threadId);
    return now === null ? null : Math.max(0, now - slot.cpuAtStart);
  }

  private spawn(): void {
    const progress = new SharedArrayBuffer(4);
    const worker = new Worker(workerScript(), {
      workerData: { ...this.limits, progress },
      // The worker's own heap holds a run's request and result, both at most about the
      // sandbox's memory; QuickJS's heap is in the module's memory, outside this bound.
      resourceLimits: { maxOldGenerationSizeMb: 64 + 4 * this.limits.memoryMb, stackSizeMb: 4 },
    });
    const slot: Slot = { worker, progress: new Int32Array(progress), ready: false, threadId: null, startedAt: 0, cpuAtStart: null };
    this.slots.add(slot);
    worker.on('message', (reply: WorkerReply) => this.settle(slot, reply));
    // The code names the cause (ERR_WORKER_OUT_OF_MEMORY, say) without the service's own text.
    worker.on('error', (error: NodeJS.ErrnoException) => this.gone(slot, error.code ?? error.name));
    worker.on('exit', (code) => this.gone(slot, `exit code ${code}`));
  }

  private settle(slot: Slot, reply: WorkerReply): void {
    if (reply.kind === 'ready') {
      slot.ready = true;
      slot.threadId = reply.threadId;
    } else if (slot.running?.task.id === reply.id) {
      clearTimeout(slot.timer);
      const done = slot.running;
      slot.running = undefined;
      done.answer(reply, this.cpuSinceStart(slot));
    }
    this.pump();
    if (slot.running === undefined) slot.worker.unref();
  }

  /**
   * The task's bound has passed on the wall clock: its worker is stopped if its thread used
   * that much CPU (or its CPU time cannot be read), or if it waited STARVED_FACTOR times
   * that long; else it is looked at again when it could have used the rest.
   */
  private overran(slot: Slot, boundMs: number): void {
    const pending = slot.running;
    if (pending === undefined || !this.slots.has(slot)) return;
    const cpuMs = this.cpuSinceStart(slot);
    const waitedMs = performance.now() - slot.startedAt;
    const starved = waitedMs >= boundMs * STARVED_FACTOR;
    if (cpuMs !== null && cpuMs < boundMs && !starved) {
      const recheckMs = Math.max(RECHECK_MS, Math.min(boundMs - cpuMs, boundMs * STARVED_FACTOR - waitedMs));
      slot.timer = setTimeout(() => this.overran(slot, boundMs), recheckMs);
      return;
    }
    this.slots.delete(slot);
    this.replaced++;
    const finished = Atomics.load(slot.progress, PROGRESS_SLOT);
    void slot.worker.terminate();
    const why = cpuMs === null ? `${boundMs} ms (wall clock)` : starved && cpuMs < boundMs ? `${Math.round(waitedMs)} ms (wall clock) with little CPU` : `${boundMs} ms of CPU time`;
    pending.lost(`the transform ran for more than ${why} and was stopped`, finished);
    this.pump();
  }

  /**
   * A worker that died: its task's outcome says so. One that died before it was ready will
   * not start again soon (a missing build, a module that fails to load): what waits is refused.
   */
  private gone(slot: Slot, why: string): void {
    if (!this.slots.delete(slot)) return;
    clearTimeout(slot.timer);
    this.replaced++;
    if (slot.running !== undefined) slot.running.lost(`the sandbox's worker stopped (${why})`, Atomics.load(slot.progress, PROGRESS_SLOT));
    if (!slot.ready) {
      const error = new Error(`a transformation worker failed to start (${why})`);
      for (const pending of this.waiting.splice(0)) pending.fail(error);
    }
    this.pump();
  }
}

/**
 * Compiled, the worker sits beside this file. Run from the TypeScript sources (vitest), it
 * is taken from the build in dist/, which `npm test` makes first.
 */
function workerScript(): URL {
  const beside = new URL('./worker.js', import.meta.url);
  if (existsSync(fileURLToPath(beside))) return beside;
  return new URL('../../../dist/destinations/transform/worker.js', import.meta.url);
}

/**
 * A thread's CPU time, ms, from /proc/self/task/ID/schedstat (its first field, in
 * nanoseconds: the scheduler's own count, brought up to date at least every tick); null
 * where there is none.
 */
function schedstatCpuMs(threadId: number): number | null {
  try {
    const nanoseconds = Number(readFileSync(`/proc/self/task/${threadId}/schedstat`, 'latin1').split(' ')[0]);
    return Number.isFinite(nanoseconds) ? nanoseconds / 1e6 : null;
  } catch {
    return null;
  }
}
