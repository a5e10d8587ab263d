import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CommitOutcome, KeyUsage, PendingWebhook, PurgeReport, RequestLogEntry, Store } from '../store.js';
import type { ThreadMethod, ThreadReply, ThreadRequest } from './commit-worker.js';

interface InFlight {
  resolve(result: unknown): void;
  reject(error: Error): void;
}

/**
 * Runs the intake's writes on a worker thread with a connection of its own: the group
 * commits, the write-behind of keys' last use and the retention purge.
 *
 * better-sqlite3 is synchronous: on the event loop, each batch's inserts, its commit's
 * fsync and every WAL checkpoint stop the server from reading, parsing and answering
 * anything else. On its own thread a batch commits while the next one is read. Each
 * request is still answered only after the commit holding it has returned.
 *
 * All of intake's writes go there, not only the commits: a write on the main connection
 * must wait for the thread's lock, and SQLite waits by sleeping (in steps of up to 100 ms),
 * which on the main thread stops the event loop. Reads stay on the main connection (WAL
 * lets them run beside the thread), as do the API's own rare changes, which wait for the
 * lock like any writer (busy_timeout; both sides begin IMMEDIATE).
 *
 * The thread starts with the first call (the server pings it once migrations have run, so
 * the first webhooks do not wait 100-200 ms for it to load) and keeps the process alive
 * only while a call is in flight. If it dies, the writes in flight fail
 * (their senders got no 202 and retry) and the next write starts a new thread.
 */
export class SqliteCommitThread {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly inFlight = new Map<number, InFlight>();

  constructor(private readonly path: string) {}

  commitBatch(webhooks: PendingWebhook[], logs: RequestLogEntry[]): Promise<CommitOutcome[]> {
    return this.send('commitBatch', [webhooks.map(withOwnBody), logs]) as Promise<CommitOutcome[]>;
  }

  recordKeyUsage(usages: KeyUsage[]): Promise<void> {
    return this.send('recordKeyUsage', [usages]) as Promise<void>;
  }

  purgeExpired(now: number): Promise<PurgeReport> {
    return this.send('purgeExpired', [now]) as Promise<PurgeReport>;
  }

  /** Resolves when the thread's connection answers a query (starting the thread if need be). */
  ping(): Promise<void> {
    return this.send('ping', []) as Promise<void>;
  }

  private send<M extends ThreadMethod>(method: M, args: Parameters<Store[M]>): Promise<unknown> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.inFlight.set(id, { resolve, reject });
      worker.ref();
      const request: ThreadRequest<M> = { id, method, args };
      worker.postMessage(request);
    });
  }

  /** Stops the thread; writes still in flight fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private start(): Worker {
    const worker = new Worker(workerScript(), { workerData: { path: this.path } });
    worker.unref();
    worker.on('message', (reply: ThreadReply) => this.settle(worker, reply));
    worker.on('error', (error) => this.failAll(worker, error));
    worker.on('exit', (code) => this.failAll(worker, new Error(`the SQLite commit thread stopped (exit code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private settle(worker: Worker, reply: ThreadReply): void {
    const waiting = this.inFlight.get(reply.id);
    if (!waiting) return;
    this.inFlight.delete(reply.id);
    if (this.inFlight.size === 0) worker.unref();
    if ('result' in reply) waiting.resolve(reply.result);
    else waiting.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
  }

  private failAll(worker: Worker, error: Error): void {
    if (this.worker === worker) this.worker = undefined;
    for (const waiting of this.inFlight.values()) waiting.reject(error);
    this.inFlight.clear();
  }
}

/**
 * A body that is a slice of a larger buffer (Node pools small allocations) is copied first:
 * posting a view copies its whole underlying buffer.
 */
function withOwnBody(webhook: PendingWebhook): PendingWebhook {
  const body = webhook.rawBody;
  if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength) return webhook;
  const copy = Buffer.alloc(body.byteLength);
  body.copy(copy);
  return { ...webhook, rawBody: copy };
}

/**
 * Compiled, the worker sits beside this file. Run from the TypeScript sources (vitest), it
 * is taken from the build in dist/, which `npm test` makes first.
 */
function workerScript(): URL {
  const beside = new URL('./commit-worker.js', import.meta.url);
  if (existsSync(fileURLToPath(beside))) return beside;
  return new URL('../../../dist/store/sqlite/commit-worker.js', import.meta.url);
}
