import type { Logger } from 'pino';
import type { SecretBox } from '../domain/secret-box.js';
import type { AttemptResult, ClaimedDelivery, Store } from '../store/store.js';
import { nextAttemptAt } from './schedule.js';
import type { AttemptOutcome, DestinationSender } from './sender.js';
import { signatureHeaders } from './signing.js';

export interface DispatcherOptions {
  /** Requests in flight on this node at most, across destinations. */
  concurrency: number;
  /**
   * Of those, one company's fair share (default a quarter, 4 at least); it may use up to
   * three quarters when no other company's deliveries are waiting.
   */
  perCompany?: number;
  /** How long a claim outlives its destination's timeout: a node that dies frees its claims then. */
  leaseMarginMs: number;
  /** How often to look for due deliveries when nothing woke the dispatcher sooner. */
  pollMs: number;
  /** How long results wait to be written together. */
  flushMs: number;
  /** A destination failing this long without a success is disabled. */
  disableAfterMs: number;
  /** Whether intake is near one of its bounds: delivery waits, so intake never sheds first. */
  underPressure: () => boolean;
  /** The clock of claims, schedules and signatures (tests move it by hours). */
  now?: () => number;
  /** The schedule's jitter. */
  random?: () => number;
}

/** Results kept for another try at most while the database refuses them. */
const MAX_UNWRITTEN_RESULTS = 10_000;
/** How often deliveries are moved to follow paused, resumed and deleted destinations. */
const RECONCILE_EVERY_MS = 1000;
const RECONCILE_BATCH = 1000;
const USER_AGENT = 'intake-destinations/1';

/**
 * One node's delivery worker: claims due deliveries from the outbox (store.claimDeliveries,
 * shared safely by every node), sends each as a signed POST, and writes the results in
 * batches (store.finishAttempts). It runs beside intake, never in its path: a claim is a
 * transaction of its own, and while intake is near a bound (underPressure) no new claim is
 * made, so deliveries are what waits first.
 *
 * At least once: a delivery leaves the outbox only when a result saying so is written. A
 * node that dies mid-attempt leaves its claim to expire and the delivery is attempted
 * again; a result that cannot be written is kept and written later, or the claim expires.
 */
export class DeliveryDispatcher {
  private inFlight = 0;
  private readonly inFlightByCompany = new Map<string, number>();
  private results: AttemptResult[] = [];
  private pollTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private claiming: Promise<void> | undefined;
  private flushing: Promise<void> | undefined;
  private lastReconcile = 0;
  private running = false;
  private readonly opened = new Map<string, string>();
  private readonly sends = new Set<Promise<void>>();
  private readonly now: () => number;
  /** Attempts made since start, by outcome (exposed in /metrics). */
  readonly counts = { succeeded: 0, failed: 0, retried: 0, shed: 0 };

  constructor(
    private readonly store: Store,
    private readonly sender: DestinationSender,
    private readonly secrets: SecretBox,
    private readonly log: Logger,
    private readonly options: DispatcherOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** Delivery requests this node is making now. */
  get inFlightCount(): number {
    return this.inFlight;
  }

  start(): void {
    this.running = true;
    this.schedule(0);
  }

  /** Deliveries were just committed: look for them now rather than at the next poll. */
  nudge(): void {
    if (this.running && this.claiming === undefined) this.schedule(0);
  }

  /** Stops claiming, lets attempts under way end and writes their results. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.pollTimer);
    await this.claiming;
    await Promise.all(this.sends);
    await this.flush();
    this.sender.close();
  }

  /**
   * One claim, every claimed attempt made and its result written: what tests drive with a
   * clock of their own. Returns how many deliveries were attempted.
   */
  async runOnce(): Promise<number> {
    await this.reconcile(true);
    const claimed = await this.claim();
    await Promise.all(this.sends);
    await this.flush();
    return claimed;
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(() => void this.tick(), delayMs);
    this.pollTimer.unref();
  }

  private async tick(): Promise<void> {
    if (!this.running || this.claiming !== undefined) return;
    let claimed = 0;
    let room = 0;
    this.claiming = (async () => {
      await this.reconcile(false);
      room = this.options.concurrency - this.inFlight;
      if (room > 0 && this.options.underPressure()) {
        this.counts.shed++;
        room = 0;
      }
      if (room > 0) claimed = await this.claim(room);
    })()
      .catch((error: unknown) => this.log.error({ err: error }, 'claiming deliveries failed'))
      .finally(() => {
        this.claiming = undefined;
      });
    await this.claiming;
    if (!this.running) return;
    // A full claim means more may be due at once; otherwise wait for the poll or a nudge.
    this.schedule(claimed > 0 && claimed === room ? 0 : this.options.pollMs);
  }

  private async reconcile(always: boolean): Promise<void> {
    const now = this.now();
    if (!always && now - this.lastReconcile < RECONCILE_EVERY_MS) return;
    this.lastReconcile = now;
    await this.store.reconcileHeldDeliveries(now, RECONCILE_BATCH);
  }

  private async claim(limit = this.options.concurrency - this.inFlight): Promise<number> {
    if (limit <= 0) return 0;
    const perCompany = this.options.perCompany ?? Math.max(4, Math.floor(this.options.concurrency / 4));
    const claimed = await this.store.claimDeliveries(this.now(), {
      limit,
      leaseMs: this.options.leaseMarginMs,
      perCompany: { limit: perCompany, burst: Math.max(perCompany, Math.floor((this.options.concurrency * 3) / 4)), inFlight: this.inFlightByCompany },
    });
    for (const delivery of claimed) {
      this.inFlight++;
      this.countCompany(delivery.companyId, 1);
      const send: Promise<void> = this.attempt(delivery)
        .catch((error: unknown) => this.log.error({ err: error, deliveryId: delivery.id }, 'delivery attempt failed unexpectedly'))
        .finally(() => {
          this.inFlight--;
          this.countCompany(delivery.companyId, -1);
          this.sends.delete(send);
          // A freed slot may take a delivery that is already due.
          if (this.running) this.nudge();
        });
      this.sends.add(send);
    }
    return claimed.length;
  }

  private countCompany(companyId: string, change: number): void {
    const count = (this.inFlightByCompany.get(companyId) ?? 0) + change;
    if (count === 0) this.inFlightByCompany.delete(companyId);
    else this.inFlightByCompany.set(companyId, count);
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const attemptedAt = this.now();
    const outcome: AttemptOutcome = delivery.webhook
      ? await this.sender.send({
          url: delivery.destination.url,
          headers: this.headersOf(delivery, attemptedAt),
          body: delivery.webhook.rawBody,
          timeoutMs: delivery.destination.timeoutMs,
        })
      : { ok: false, status: null, error: 'other', durationMs: 0, responseExcerpt: null, retryAfterMs: null };
    const finishedAt = this.now();
    const next = outcome.ok
      ? null
      : delivery.webhook === null
        ? null
        : nextAttemptAt({ attempt: delivery.attempt, now: finishedAt, status: outcome.status, retryAfterMs: outcome.retryAfterMs, random: this.options.random });
    const result: AttemptResult['outcome'] = outcome.ok ? 'succeeded' : next === null ? 'failed' : 'retry';
    this.counts[result === 'retry' ? 'retried' : result]++;
    this.results.push({
      deliveryId: delivery.id,
      companyId: delivery.companyId,
      destinationId: delivery.destinationId,
      leaseToken: delivery.leaseToken,
      outcome: result,
      gone: outcome.status === 410,
      attempt: {
        series: delivery.series,
        number: delivery.attempt,
        attemptedAt,
        durationMs: outcome.durationMs,
        status: outcome.status,
        // The webhook was purged by retention before this attempt: nothing could be sent.
        error: delivery.webhook === null ? 'webhook_purged' : outcome.error,
        responseExcerpt: outcome.responseExcerpt,
        nextAttemptAt: next,
      },
    });
    this.scheduleFlush();
  }

  /** The Standard Webhooks headers, ours, and the destination's own (opened only here). */
  private headersOf(delivery: ClaimedDelivery, attemptedAt: number): Record<string, string> {
    const { destination, webhook } = delivery;
    const secrets = [destination.secretSealed, destination.previousSecretSealed].filter((s): s is string => s !== null).map((s) => this.open(s));
    const extra = destination.headersSealed === null ? {} : (JSON.parse(this.open(destination.headersSealed)) as Record<string, string>);
    return {
      ...extra,
      'content-type': webhook!.contentType,
      'user-agent': USER_AGENT,
      'x-intake-event': delivery.event,
      'x-intake-integration-id': delivery.integrationId,
      'x-intake-delivery-id': delivery.id,
      'x-intake-attempt': String(delivery.attempt),
      ...signatureHeaders({ webhookId: delivery.webhookUuid, timestampSeconds: Math.floor(attemptedAt / 1000), body: webhook!.rawBody, secrets }),
    };
  }

  /** Secrets and header sets by their sealed form: a rotation or an edit seals anew, so an entry never goes stale. */
  private open(sealed: string): string {
    let value = this.opened.get(sealed);
    if (value === undefined) {
      value = this.secrets.open(sealed);
      if (this.opened.size >= 10_000) this.opened.clear();
      this.opened.set(sealed, value);
    }
    return value;
  }

  private scheduleFlush(): void {
    if (this.flushTimer !== undefined) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      void this.flush();
    }, this.options.flushMs);
    this.flushTimer.unref();
  }

  /** Writes the results gathered so far in one transaction; on failure keeps them for the next. */
  private async flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    await this.flushing;
    if (this.results.length === 0) return;
    const batch = this.results.splice(0);
    this.flushing = (async () => {
      try {
        const disabled = await this.store.finishAttempts(batch, this.now(), this.options.disableAfterMs);
        for (const destination of disabled) this.log.warn(destination, 'destination disabled');
      } catch (error) {
        // Kept for the next flush; past the bound the claims expire and are attempted again.
        const room = Math.max(0, MAX_UNWRITTEN_RESULTS - this.results.length);
        this.results.unshift(...batch.slice(0, room));
        this.log.error({ err: error, results: batch.length }, 'delivery results could not be written; retrying');
        if (this.running) this.scheduleFlush();
      }
    })();
    await this.flushing;
    this.flushing = undefined;
  }
}
