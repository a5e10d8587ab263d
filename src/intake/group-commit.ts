import type { Logger } from 'pino';
import { AppError } from '../errors.js';
import type { CommitOutcome, PendingWebhook, RequestLogEntry, Store } from '../store/store.js';

export interface GroupCommitOptions {
  /** Webhooks waiting at most; past this, submit() refuses with 503. */
  maxQueued: number;
  /** Raw body bytes waiting at most. */
  maxQueuedBytes: number;
  /** Webhooks in one transaction at most. */
  maxBatch?: number;
  /** Seconds a refused sender is told to wait. */
  retryAfterSeconds?: number;
}

interface Waiting {
  webhook: PendingWebhook;
  resolve(outcome: CommitOutcome): void;
  reject(error: unknown): void;
}

/** Request-log rows of rejected requests kept at most while the database is slow. */
const MAX_QUEUED_LOGS = 20_000;

/**
 * Group commit: webhooks that arrive while a transaction is being written wait together and
 * go to the database in the next one, and each request is answered only after the
 * transaction that holds it has committed. One fsync serves the whole group, so throughput
 * grows with load while every 202 stays durable.
 *
 * The queue is bounded in count and bytes: when it is full, submit() throws a 503 at once
 * instead of letting memory grow. A failed transaction fails every request in it with a
 * 503; nothing of it was stored, so the senders' retries are safe.
 */
export class GroupCommitWriter {
  private queue: Waiting[] = [];
  private queuedBytes = 0;
  private logs: RequestLogEntry[] = [];
  private writing = false;
  private scheduled = false;
  private idle: Array<() => void> = [];
  private readonly maxBatch: number;
  private readonly retryAfterSeconds: number;
  /** Request-log rows dropped because the database fell behind (exposed for operators). */
  droppedLogs = 0;
  /** The last transaction failed: readiness reports it until one succeeds. */
  failing = false;

  constructor(
    private readonly store: Store,
    private readonly options: GroupCommitOptions,
    private readonly log: Logger,
  ) {
    this.maxBatch = options.maxBatch ?? 500;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
  }

  /** Queues a webhook; resolves with its outcome once committed. Throws 503 when full. */
  submit(webhook: PendingWebhook): Promise<CommitOutcome> {
    const size = webhook.rawBody.length;
    if (this.queue.length >= this.options.maxQueued || this.queuedBytes + size > this.options.maxQueuedBytes) {
      throw new AppError('service_unavailable', 'The write queue is full; retry later.', {
        retryAfterSeconds: this.retryAfterSeconds,
      });
    }
    return new Promise<CommitOutcome>((resolve, reject) => {
      this.queue.push({ webhook, resolve, reject });
      this.queuedBytes += size;
      this.schedule();
    });
  }

  /** Queues the log row of a request that stored nothing; written with the next group. */
  submitLog(entry: RequestLogEntry): void {
    if (this.logs.length >= MAX_QUEUED_LOGS) {
      this.droppedLogs++;
      return;
    }
    this.logs.push(entry);
    this.schedule();
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Resolves when everything queued so far has been written (graceful shutdown). */
  drain(): Promise<void> {
    if (!this.writing && !this.scheduled && this.queue.length === 0 && this.logs.length === 0) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private schedule(): void {
    if (this.writing || this.scheduled) return;
    this.scheduled = true;
    // setImmediate, not a timer: requests already read in this turn of the event loop
    // join the group, and an idle server adds no delay.
    setImmediate(() => void this.writeGroups());
  }

  private async writeGroups(): Promise<void> {
    this.scheduled = false;
    this.writing = true;
    while (this.queue.length > 0 || this.logs.length > 0) {
      const group = this.queue.splice(0, this.maxBatch);
      const logs = this.logs.splice(0, this.logs.length);
      for (const waiting of group) this.queuedBytes -= waiting.webhook.rawBody.length;
      await this.writeGroup(group, logs);
    }
    this.writing = false;
    for (const resolve of this.idle.splice(0)) resolve();
  }

  private async writeGroup(group: Waiting[], logs: RequestLogEntry[]): Promise<void> {
    try {
      const outcomes = await this.store.commitBatch(
        group.map((w) => w.webhook),
        logs,
      );
      this.failing = false;
      group.forEach((waiting, i) => waiting.resolve(outcomes[i]!));
    } catch (error) {
      this.failing = true;
      this.log.error({ err: error, webhooks: group.length, logs: logs.length }, 'group commit failed');
      const refusal = new AppError('service_unavailable', 'The webhook could not be stored; retry later.', {
        retryAfterSeconds: this.retryAfterSeconds,
      });
      for (const waiting of group) waiting.reject(refusal);
      this.droppedLogs += logs.length;
    }
  }
}
