/**
 * A SQLite worker thread's body (see store-thread.ts): it opens its own connection to the
 * database file (read-only for the read thread) and runs each call it is sent through the
 * store's own method, so a transaction or a query is the same code as on the event loop;
 * only the thread differs. A method outside its role's list is refused.
 */
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { Store } from '../store.js';
import { openSqliteStore } from './open-sqlite.js';
import { THREAD_METHODS, detachBuffers, reviveBuffers, type ThreadData, type ThreadReply, type ThreadRequest } from './thread-protocol.js';

if (!parentPort) throw new Error('store-worker runs as a worker thread');
const port = parentPort;
const { path, role } = workerData as ThreadData;
const store = openSqliteStore(path, { readOnly: role === 'read' });
if (role === 'read') lowerPriority();
const allowed = new Set<string>(THREAD_METHODS[role]);

// Calls may overlap; Kysely still runs their statements one at a time on its one connection.
port.on('message', (request: ThreadRequest) => {
  run(request).then(
    (result) => {
      // The thread is done with its result: its buffers are moved, not copied.
      const transfer: ArrayBuffer[] = [];
      port.postMessage({ id: request.id, result: detachBuffers(result, transfer) } satisfies ThreadReply, transfer);
    },
    (error: NodeJS.ErrnoException) =>
      port.postMessage({ id: request.id, error: { message: error.message, code: error.code } } satisfies ThreadReply),
  );
});

async function run(request: ThreadRequest): Promise<unknown> {
  if (!allowed.has(request.method)) throw new Error(`the SQLite ${role} thread does not run ${request.method}`);
  const method = store[request.method] as (...args: unknown[]) => Promise<unknown>;
  return method.apply(store, reviveBuffers(request.args));
}

/**
 * The read thread yields the CPU to intake: a viewer's search loop may take what is idle,
 * but not a core the event loop or the commit thread needs. On Linux a nice value is a
 * thread's own (setpriority on pid 0 names the calling thread), so only this thread is
 * lowered. Where the system refuses, reads run at the usual priority: only a bound is lost.
 */
function lowerPriority(): void {
  try {
    setPriority(19);
  } catch {
    // Not allowed here; the concurrency and byte bounds still hold.
  }
}
