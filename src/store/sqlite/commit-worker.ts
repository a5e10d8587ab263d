/**
 * The SQLite commit thread's body (see commit-thread.ts): it opens its own connection to
 * the database file and runs each write it is sent through the store's own method, so the
 * transaction is the same code as on the event loop; only the thread differs.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Store } from '../store.js';
import { openSqliteStore } from './open-sqlite.js';

/** What the thread runs: the writes intake makes all the time (not the API's), and a ping. */
export type ThreadMethod = 'commitBatch' | 'recordKeyUsage' | 'purgeExpired' | 'ping';

export interface ThreadRequest<M extends ThreadMethod = ThreadMethod> {
  id: number;
  method: M;
  args: Parameters<Store[M]>;
}

export type ThreadReply =
  | { id: number; result: Awaited<ReturnType<Store[ThreadMethod]>> }
  | { id: number; error: { message: string; code: string | undefined } };

if (!parentPort) throw new Error('commit-worker runs as a worker thread');
const port = parentPort;
const store = openSqliteStore((workerData as { path: string }).path);

// Calls come one after another; were two to overlap, Kysely would still run their
// transactions one at a time on its one connection.
port.on('message', (request: ThreadRequest) => {
  run(request).then(
    (result) => port.postMessage({ id: request.id, result } satisfies ThreadReply),
    (error: NodeJS.ErrnoException) =>
      port.postMessage({ id: request.id, error: { message: error.message, code: error.code } } satisfies ThreadReply),
  );
});

function run(request: ThreadRequest): ReturnType<Store[ThreadMethod]> {
  switch (request.method) {
    case 'commitBatch': {
      const [webhooks, logs] = (request as ThreadRequest<'commitBatch'>).args;
      // Buffers arrive as plain Uint8Arrays; the driver binds only Buffers as blobs.
      for (const webhook of webhooks) {
        const bytes = webhook.rawBody;
        webhook.rawBody = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }
      return store.commitBatch(webhooks, logs);
    }
    case 'recordKeyUsage':
      return store.recordKeyUsage(...(request as ThreadRequest<'recordKeyUsage'>).args);
    case 'purgeExpired':
      return store.purgeExpired(...(request as ThreadRequest<'purgeExpired'>).args);
    case 'ping':
      return store.ping();
  }
}
