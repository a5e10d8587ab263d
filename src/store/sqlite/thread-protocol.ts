import type { Store } from '../store.js';

/**
 * What each SQLite worker thread may run: the store's own methods, by name, so a call on the
 * thread is the same code as on the event loop. The worker refuses any other method, and
 * the threaded store delegates exactly these.
 */
export const THREAD_METHODS = {
  /**
   * The writes intake makes all the time (not the API's rare changes): commits, the delivery
   * workers' claims and results, and the API's replays and sends (each step of one), which would
   * otherwise wait for this thread's lock by sleeping on the event loop. And a ping.
   */
  commit: [
    'commitBatch',
    'recordKeyUsage',
    'purgeExpired',
    'exchangeDeliveries',
    'reconcileHeldDeliveries',
    'claimDedupeKeys',
    'replayDelivery',
    'beginRedelivery',
    'replayStep',
    'sendStep',
    'endRedelivery',
    // Erasures' steps: tombstones written beside intake's commits, one short transaction each.
    'erasureStep',
    'checkpointAfterErasure',
    'ping',
  ],
  /**
   * The reads whose cost grows with what they read: webhooks (bodies), the request log,
   * usage, the audit log, key callers and counts. Sign-in, sessions and key lookups stay on
   * the event loop: they are one indexed row each, and intake waits on them. So does the
   * delivery backlog that /metrics reads: it is bounded (10,000 index entries at most: 0.4
   * ms at the median, 2.5 ms at worst in 50 reads at that bound), and it is read at every
   * scrape, which here would start the read thread and keep it running (20 MB or more of
   * RSS) for as long as Prometheus scrapes, every 15 to 60 s.
   */
  read: [
    // The bodies of claimed deliveries this node does not hold in memory: committed before
    // their claim, so this connection sees them, and read here rather than beside intake's commits.
    'readWebhookBodies',
    'listWebhooks',
    'getWebhook',
    'listRequestLog',
    'listCompanyWebhooks',
    'exportCompanyWebhooks',
    'getCompanyWebhook',
    'listCompanyWebhookHeads',
    'getCompanyWebhookHead',
    'getCompanyWebhookSummaries',
    'listCompanyRequestLog',
    'countUsage',
    'listAuditLog',
    'listKeyCallers',
    'countKeyRequests',
    'listDeliveries',
    'listDeliveryAttempts',
    'destinationStats',
    // What a bulk replay or send will change: read here, then written in short steps on the commit thread.
    'scanReplay',
    'scanSend',
    'readFeed',
    // An erasure's scan of the company's bodies, a page at a time, and a preview's counts.
    'scanErasure',
    'countErasureLinks',
    'ping',
  ],
} as const satisfies Record<string, ReadonlyArray<keyof Store>>;

export type ThreadRole = keyof typeof THREAD_METHODS;
export type ThreadMethod<R extends ThreadRole = ThreadRole> = (typeof THREAD_METHODS)[R][number];

export interface ThreadRequest<M extends ThreadMethod = ThreadMethod> {
  id: number;
  method: M;
  args: Parameters<Store[M]>;
}

export type ThreadReply =
  | { id: number; result: unknown }
  | { id: number; error: { message: string; code: string | undefined } };

/** What a worker is started with. */
export interface ThreadData {
  path: string;
  role: ThreadRole;
}

/**
 * A value ready to post: every Buffer that is a view of a larger ArrayBuffer (Node pools
 * small allocations, drivers slice) is copied to one of its own size, since posting a view
 * copies its whole underlying buffer. With `transfer`, the buffers are listed there to be
 * moved rather than copied (only by a sender that no longer needs them).
 */
export function detachBuffers<T>(value: T, transfer?: ArrayBuffer[]): T {
  return walk(value, (bytes) => {
    const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : ownCopy(bytes);
    if (transfer) transfer.push(whole.buffer as ArrayBuffer);
    return whole;
  }) as T;
}

/** A posted value as it was sent: bytes arrive as plain Uint8Arrays, and the driver and the code expect Buffers. */
export function reviveBuffers<T>(value: T): T {
  return walk(value, (bytes) => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))) as T;
}

/** Buffer.alloc, unlike Buffer.from, never hands out a slice of the shared pool. */
function ownCopy(bytes: Uint8Array): Buffer {
  const copy = Buffer.alloc(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

/**
 * Passes each byte array through `bytes`; an array or plain object is copied only when
 * something inside it changed, anything else is returned as is. Every group commit and
 * every delivery exchange goes through here twice (posted, then revived): rebuilding every
 * object whether or not it held bytes cost 3.5 % of the event loop in a profile of intake
 * with a destination.
 */
function walk(value: unknown, bytes: (value: Uint8Array) => Uint8Array): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Uint8Array) return bytes(value);
  if (Array.isArray(value)) {
    let changed: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const walked = walk(item, bytes);
      if (walked !== item) (changed ??= value.slice())[i] = walked;
    }
    return changed ?? value;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  let changed: Record<string, unknown> | undefined;
  // for…in, not Object.entries: no array of pairs per object (a plain object's keys are its own).
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    const walked = walk(item, bytes);
    if (walked !== item) (changed ??= { ...value })[key] = walked;
  }
  return changed ?? value;
}
