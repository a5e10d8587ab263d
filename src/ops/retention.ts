import type { Logger } from 'pino';
import type { Store } from '../store/store.js';

/** The first run waits a little, so a node that restarts in a loop does no purge work. */
const FIRST_RUN_DELAY_MS = 10_000;

/**
 * Runs the store's retention purge on a timer. Every node runs it: the purge is a series
 * of small idempotent deletes (and, on PostgreSQL, partition changes taken in turn under a
 * lock), so two nodes purging at once only find less to do.
 */
export class RetentionJob {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Rows deleted and partitions dropped by this node's purges since start (exposed in /metrics). */
  readonly purged = { webhooks: 0, requestLog: 0, idempotencyKeys: 0, deliveries: 0, partitionsDropped: 0 };
  /** This node's purges since start, by how they ended. */
  readonly runs = { completed: 0, failed: 0 };

  constructor(
    private readonly store: Store,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  start(): void {
    const first = Math.min(FIRST_RUN_DELAY_MS, this.intervalMs);
    this.timer = setTimeout(() => this.tick(), first);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One purge now; resolves when it is done (errors are logged, never thrown). */
  async runOnce(): Promise<void> {
    const startedAt = Date.now();
    try {
      const report = await this.store.purgeExpired(startedAt);
      this.runs.completed++;
      this.purged.webhooks += report.webhooks;
      this.purged.requestLog += report.requestLog;
      this.purged.idempotencyKeys += report.idempotencyKeys;
      this.purged.deliveries += report.deliveries;
      this.purged.partitionsDropped += report.partitionsDropped.length;
      const removed = report.webhooks + report.requestLog + report.partitionsDropped.length;
      if (removed > 0) this.log.info({ ...report, durationMs: Date.now() - startedAt }, 'retention purge');
    } catch (error) {
      this.runs.failed++;
      this.log.warn({ err: error }, 'retention purge failed; it runs again at the next interval');
    }
  }

  private tick(): void {
    this.running = this.runOnce().finally(() => {
      this.running = undefined;
      if (this.timer === undefined) return;
      this.timer = setTimeout(() => this.tick(), this.intervalMs);
      this.timer.unref();
    });
  }
}
