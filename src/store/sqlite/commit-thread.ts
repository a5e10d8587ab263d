import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CommitOutcome, PendingWebhook, RequestLogEntry } from '../store.js';
import type { CommitReply, CommitRequest } from './commit-worker.js';

interface InFlight {
  resolve(outcomes: CommitOutcome[]): void;
  reject(error: Error): void;
}

/**
 * Runs the intake's group commits on a worker thread with a connection of its own.
 *
 * better-sqlite3 is synchronous: on the event loop, each batch's inserts and its commit's
 * fsync stop the server from reading, parsing and answering anything else (41 % of the
 * server's time under load, and the wait for the disk on top). On its own thread a batch
 * commits while the next one is read. Each request is still answered only after the
 * commit holding it has returned.
 *
 * Reads and the API's writes stay on the main connection: WAL lets readers run beside the
 * thread, and writers on either side begin IMMEDIATE and wait for each other (busy_timeout).
 *
 * The thread starts with the first batch, so a CLI command never starts one, and keeps the
 * process alive only while a batch is in flight. If it dies, the batches in flight fail
 * (their senders got no 202 and retry) and the next batch starts a new thread.
 */
export class SqliteCommitThread {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly inFlight = new Map<number, InFlight>();

  constructor(private readonly path: string) {}

  commitBatch(webhooks: PendingWebhook[], logs: RequestLogEntry[]): Promise<CommitOutcome[]> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.inFlight.set(id, { resolve, reject });
      worker.ref();
      const request: CommitRequest = { id, webhooks: webhooks.map(withOwnBody), logs };
      worker.postMessage(request);
    });
  }

  /** Stops the thread; batches still in flight fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private start(): Worker {
    const worker = new Worker(workerScript(), { workerData: { path: this.path } });
    worker.unref();
    worker.on('message', (reply: CommitReply) => this.settle(worker, reply));
    worker.on('error', (error) => this.failAll(worker, error));
    worker.on('exit', (code) => this.failAll(worker, new Error(`the SQLite commit thread stopped (exit code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private settle(worker: Worker, reply: CommitReply): void {
    const waiting = this.inFlight.get(reply.id);
    if (!waiting) return;
    this.inFlight.delete(reply.id);
    if (this.inFlight.size === 0) worker.unref();
    if ('outcomes' in reply) waiting.resolve(reply.outcomes);
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
