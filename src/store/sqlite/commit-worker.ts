/**
 * The SQLite commit thread's body (see commit-thread.ts): it opens its own connection to
 * the database file and runs each batch it is sent through the store's own commitBatch, so
 * the transaction is the same code as on the event loop; only the thread differs.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { CommitOutcome, PendingWebhook, RequestLogEntry } from '../store.js';
import { openSqliteStore } from './open-sqlite.js';

export interface CommitRequest {
  id: number;
  webhooks: PendingWebhook[];
  logs: RequestLogEntry[];
}

export type CommitReply =
  | { id: number; outcomes: CommitOutcome[] }
  | { id: number; error: { message: string; code: string | undefined } };

if (!parentPort) throw new Error('commit-worker runs as a worker thread');
const port = parentPort;
const store = openSqliteStore((workerData as { path: string }).path);

// Batches come one at a time (the group-commit writer waits for each); were two to come,
// Kysely would still run their transactions one after the other on its one connection.
port.on('message', (request: CommitRequest) => {
  // Buffers arrive as plain Uint8Arrays; the driver binds only Buffers as blobs.
  for (const webhook of request.webhooks) {
    const bytes = webhook.rawBody;
    webhook.rawBody = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  store.commitBatch(request.webhooks, request.logs).then(
    (outcomes) => port.postMessage({ id: request.id, outcomes } satisfies CommitReply),
    (error: NodeJS.ErrnoException) =>
      port.postMessage({ id: request.id, error: { message: error.message, code: error.code } } satisfies CommitReply),
  );
});
