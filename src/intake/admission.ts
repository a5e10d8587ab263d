import { AppError } from '../errors.js';

/** How often the loop's turns are recorded; a turn this old is not yet late. */
const TURN_INTERVAL_MS = 10;

/**
 * Admission control on the event loop's current turn. Under overload the service is
 * CPU-bound long before its write queue fills: requests wait unread in the kernel while each
 * turn of the loop grows to seconds, and senders time out instead of getting a 503. A timer
 * records when the loop last reached its timers phase; a request that arrives when that was
 * more than `maxLagMs` ago is refused before authentication and before its body is read.
 *
 * The signal is instantaneous on purpose: within one long turn that reads thousands of
 * requests, the first ones are let in and the rest are refused cheaply, so the next turn is
 * short again. `@fastify/under-pressure` cannot do this: its event-loop delay is a histogram
 * mean recomputed by a timer every sampleInterval, so during a long blocked turn it still
 * shows the old value and reacts one interval late, and event-loop utilisation is close to 1
 * at the maximum rate as well as at twice it, so it cannot tell the two apart.
 */
export class AdmissionGate {
  private timer: NodeJS.Timeout | undefined;
  private lastTurnAt = 0;
  /** Requests refused since start, by the bound that refused them (exposed in /metrics). */
  readonly shedBy: Record<OverloadBound, number> = { event_loop_lag: 0, queue_wait: 0 };

  constructor(
    /** How long past its interval the loop may go without turning; 0 or less: no bound. */
    private readonly maxLagMs: number,
    /**
     * The second bound, for when the database is the limit and the loop is not: with the
     * SQLite commit thread (or a slow PostgreSQL) the loop stays free and reads requests
     * faster than they commit, so they wait in the write queue instead, and senders time
     * out there. `waitMs` is how long the oldest webhook in the queue has waited.
     */
    private readonly writeQueue?: { maxWaitMs: number; waitMs(now: number): number },
  ) {}

  start(): void {
    if (this.maxLagMs <= 0) return;
    this.lastTurnAt = performance.now();
    this.timer = setInterval(() => {
      this.lastTurnAt = performance.now();
    }, TURN_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * The loop has not turned for longer than its bound (the current turn has run too long),
   * or the oldest webhook waiting for its commit has waited longer than the queue's. With a
   * `share` below 1, whether a share of either bound is reached: work that yields to intake
   * (deliveries) stops there, before intake itself sheds.
   */
  overloaded(now = performance.now(), share = 1): boolean {
    return this.boundReached(now, share) !== undefined;
  }

  /** Whether to take a request now; a refusal is counted in `shedBy`. */
  admit(): boolean {
    const bound = this.boundReached(performance.now(), 1);
    if (bound === undefined) return true;
    this.shedBy[bound]++;
    return false;
  }

  private boundReached(now: number, share: number): OverloadBound | undefined {
    if (this.timer !== undefined && now - this.lastTurnAt - TURN_INTERVAL_MS > this.maxLagMs * share) return 'event_loop_lag';
    const queue = this.writeQueue;
    if (queue !== undefined && queue.maxWaitMs > 0 && queue.waitMs(now) > queue.maxWaitMs * share) return 'queue_wait';
    return undefined;
  }
}

/** The admission gate's two bounds (the third, a full write queue, is the writer's: GroupCommitWriter.refusedFull). */
export type OverloadBound = 'event_loop_lag' | 'queue_wait';

/** The refusal of an overloaded node, wherever it is answered. */
export const OVERLOADED = new AppError('service_unavailable', 'The service is overloaded; retry later.', { retryAfterSeconds: 1 });
