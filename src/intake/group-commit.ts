import type { Logger } from 'pino';
import { newTimeOrderedId } from '../domain/ids.js';
import { AppError } from '../errors.js';
import type { CommitOutcome, PendingWebhook, RequestLogEntry, Store } from '../store/store.js';
import type { WrittenGroup } from '../telemetry/metrics.js';
import type { FeedBell } from './feed-bell.js';

export interface GroupCommitOptions {
  /** Webhooks waiting at most; past this, submit() refuses with 503. */
  maxQueued: number;
  /** Raw body bytes waiting at most. */
  maxQueuedBytes: number;
  /** Webhooks in one transaction at most. */
  maxBatch?: number;
  /**
   * Spreads what has queued over the groups that may be in flight, this many webhooks to a
   * group at least (and maxBatch at most). Under light load the groups stay small, so the
   * database and the event loop take turns a little at a time instead of every connection
   * waiting in one or two large groups; a deep queue still goes in large groups, one fsync
   * for many. Absent: each group takes as much as maxBatch allows.
   */
  minSpread?: number;
  /**
   * Groups being written at once at most. Two keep the database busy: the next group is
   * ready when the last one commits instead of being sent only after its answers.
   */
  maxInFlight?: number;
  /** Seconds a refused sender is told to wait. */
  retryAfterSeconds?: number;
  /** Called once a group commits, with those of its webhooks that have deliveries due now. */
  onDeliveriesDue?: (webhooks: PendingWebhook[]) => void;
  /** Called after each transaction of webhooks and log rows, committed or failed (for /metrics). */
  onWritten?: (group: WrittenGroup) => void;
  /** Rung after each commit with its webhooks, so that the feed's waiting reads on this node answer at once. */
  feedBell?: FeedBell;
}

/** Told what became of a webhook in the writer (a traced request records it on its span). */
export interface GroupObserver {
  /** `webhooks` in the group; `waitMs` from this webhook's submit to the group's start. */
  joined(webhooks: number, waitMs: number): void;
  /** It committed with deliveries due, and is handed to onDeliveriesDue right after this. */
  deliveriesDue(webhook: PendingWebhook): void;
}

interface Waiting {
  webhook: PendingWebhook;
  /** performance.now() when it was queued. */
  queuedAt: number;
  observer: GroupObserver | undefined;
  resolve(outcome: CommitOutcome): void;
  reject(error: unknown): void;
}

/** Request-log rows of rejected requests kept at most while the database is slow or failing. */
const MAX_QUEUED_LOGS = 20_000;

/**
 * Group commit: webhooks that arrive while a transaction is being written wait together and
 * go to the database in the next one, and each request is answered only after the
 * transaction that holds it has committed. One fsync serves the whole group, so throughput
 * grows with load while every 202 stays durable. Two groups may be in flight: while one
 * commits, the next is already with the store, so the database never waits for the event
 * loop to hand it work (on PostgreSQL they run on two connections).
 *
 * The queue is bounded in count and bytes: when it is full, submit() throws a 503 at once
 * instead of letting memory grow. A failed transaction fails every request in it with a
 * 503; nothing of it was stored, so the senders' retries are safe.
 *
 * A failed transaction's request-log rows are held and written again, alone, every
 * retryAfterSeconds: the first retry that commits clears `failing` (which /readyz reports),
 * so a node recovers from a full disk or a lost database by itself, also when the balancer
 * has taken it out and no webhook comes to prove the database works again.
 */
export class GroupCommitWriter {
  private queue: Waiting[] = [];
  private queuedBytes = 0;
  private logs: RequestLogEntry[] = [];
  /** Request-log rows of a failed transaction, waiting for the retry timer. */
  private held: RequestLogEntry[] = [];
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDue = false;
  /** Groups sent to the store and not yet committed or failed. */
  private inFlight = 0;
  private scheduled = false;
  private idle: Array<() => void> = [];
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  private readonly retryAfterSeconds: number;
  /** Request-log rows dropped because the database fell behind or failed (exposed for operators). */
  droppedLogs = 0;
  /** Webhooks refused with 503 because the queue was full (exposed in /metrics). */
  refusedFull = 0;
  /** The last transaction failed: readiness reports it until one succeeds (a retry, or new traffic). */
  failing = false;

  constructor(
    private readonly store: Store,
    private readonly options: GroupCommitOptions,
    private readonly log: Logger,
  ) {
    this.maxBatch = options.maxBatch ?? 500;
    this.maxInFlight = options.maxInFlight ?? 2;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
  }

  /** Queues a webhook; resolves with its outcome once committed. Throws 503 when full. */
  submit(webhook: PendingWebhook, observer?: GroupObserver): Promise<CommitOutcome> {
    const size = webhook.rawBody.length;
    if (this.queue.length >= this.options.maxQueued || this.queuedBytes + size > this.options.maxQueuedBytes) {
      this.refusedFull++;
      throw new AppError('service_unavailable', 'The write queue is full; retry later.', {
        retryAfterSeconds: this.retryAfterSeconds,
      });
    }
    return new Promise<CommitOutcome>((resolve, reject) => {
      this.queue.push({ webhook, queuedAt: performance.now(), observer, resolve, reject });
      this.queuedBytes += size;
      this.schedule();
    });
  }

  /** Queues the log row of a request that stored nothing; written with the next group. */
  submitLog(entry: RequestLogEntry): void {
    if (this.logs.length + this.held.length >= MAX_QUEUED_LOGS) {
      this.droppedLogs++;
      return;
    }
    this.logs.push(entry);
    this.schedule();
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Raw body bytes of the webhooks waiting. */
  get bytesQueued(): number {
    return this.queuedBytes;
  }

  /** How long the oldest webhook not yet sent to the store has waited, in ms (0 when none). */
  oldestWaitMs(now = performance.now()): number {
    const oldest = this.queue[0];
    return oldest === undefined ? 0 : now - oldest.queuedAt;
  }

  /**
   * Resolves when everything queued so far has been written and held rows have been tried
   * once more (graceful shutdown); held rows that still fail wait for the next write.
   */
  async drain(): Promise<void> {
    if (this.held.length > 0) {
      this.retryDue = true;
      this.schedule();
    }
    if (this.inFlight > 0 || this.scheduled || this.queue.length > 0 || this.logs.length > 0) {
      await new Promise<void>((resolve) => this.idle.push(resolve));
    }
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate, not a timer: requests already read in this turn of the event loop
    // join the group, and an idle server adds no delay.
    setImmediate(() => {
      this.scheduled = false;
      this.startGroups();
    });
  }

  /**
   * Sends groups while fewer than maxInFlight are being written. Held rows are retried
   * alone, with nothing else in flight, so their outcome says whether the database works.
   */
  private startGroups(): void {
    while (this.inFlight < this.maxInFlight) {
      if (this.retryDue) {
        if (this.inFlight > 0) return;
        this.retryDue = false;
        this.track(this.retryHeld());
        return;
      }
      if (this.queue.length === 0 && this.logs.length === 0) break;
      const group = this.queue.splice(0, this.nextGroupSize());
      const logs = this.logs.splice(0, this.logs.length);
      for (const waiting of group) {
        this.queuedBytes -= waiting.webhook.rawBody.length;
        waiting.observer?.joined(group.length, performance.now() - waiting.queuedAt);
      }
      this.track(this.writeGroup(group, logs));
    }
    if (this.inFlight > 0) return;
    if (this.held.length > 0) this.retryLater();
    for (const resolve of this.idle.splice(0)) resolve();
  }

  private nextGroupSize(): number {
    const { minSpread } = this.options;
    if (minSpread === undefined) return this.maxBatch;
    return Math.min(this.maxBatch, Math.max(minSpread, Math.ceil(this.queue.length / this.maxInFlight)));
  }

  /** Counts a write in flight; when it ends, whatever queued meanwhile is sent at once. */
  private track(write: Promise<void>): void {
    this.inFlight++;
    void write.finally(() => {
      this.inFlight--;
      this.startGroups();
    });
  }

  private retryLater(): void {
    if (this.retryTimer !== undefined) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.retryDue = true;
      this.schedule();
    }, this.retryAfterSeconds * 1000);
    this.retryTimer.unref();
  }

  /**
   * Writes the held rows in a transaction of their own (never with webhooks, so rows that
   * cannot be written can never cost a webhook its commit). Rows that fail while other
   * writes succeed are dropped: the rows are at fault, not the database.
   */
  private async retryHeld(): Promise<void> {
    const rows = this.held.splice(0);
    if (rows.length === 0) return;
    const databaseWasFailing = this.failing;
    try {
      await this.store.commitBatch([], rows);
      this.failing = false;
    } catch (error) {
      if (databaseWasFailing) {
        this.held = rows.concat(this.held);
        return;
      }
      this.droppedLogs += rows.length;
      this.log.error({ err: error, logs: rows.length }, 'request-log rows dropped: they fail while other writes succeed');
    }
  }

  private async writeGroup(group: Waiting[], logs: RequestLogEntry[]): Promise<void> {
    const startedAt = performance.now();
    const written = (committed: boolean) =>
      this.options.onWritten?.({ webhooks: group.length, seconds: (performance.now() - startedAt) / 1000, committed });
    const webhooks = group.map((w) => w.webhook);
    try {
      const outcomes = await this.store.commitBatch(webhooks, logs);
      written(true);
      this.failing = false;
      group.forEach((waiting, i) => waiting.resolve(outcomes[i]!));
      this.options.feedBell?.ringCommitted(webhooks, outcomes);
      const delivering = group.filter((_, i) => isDeliveryDue(outcomes[i]!));
      for (const waiting of delivering) waiting.observer?.deliveriesDue(waiting.webhook);
      if (delivering.length > 0) this.options.onDeliveriesDue?.(delivering.map((waiting) => waiting.webhook));
    } catch (error) {
      written(false);
      this.failing = true;
      this.log.error({ err: error, webhooks: group.length, logs: logs.length }, 'group commit failed');
      const refusal = new AppError('service_unavailable', 'The webhook could not be stored; retry later.', {
        retryAfterSeconds: this.retryAfterSeconds,
      });
      for (const waiting of group) waiting.reject(refusal);
      this.hold(logs);
    }
  }

  /**
   * Keeps a failed transaction's log rows for the retry, each with a new id: a commit whose
   * connection was cut may have been applied after all, and its ids would then fail the
   * retry forever (at worst such a row is written twice).
   */
  private hold(logs: RequestLogEntry[]): void {
    const room = Math.max(0, MAX_QUEUED_LOGS - this.held.length - this.logs.length);
    this.droppedLogs += Math.max(0, logs.length - room);
    for (const entry of logs.slice(0, room)) this.held.push({ ...entry, id: newTimeOrderedId('req', entry.receivedAt) });
  }
}

function isDeliveryDue(outcome: CommitOutcome): boolean {
  return outcome.kind === 'accepted' && outcome.deliveriesDue === true;
}
