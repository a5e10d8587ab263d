import type { Logger } from 'pino';
import type { SecretBox } from '../domain/secret-box.js';
import type { DeliveryMarks } from '../domain/delivery-loop.js';
import { keptForDelivery } from '../domain/webhook-body.js';
import type { AttemptResult, ClaimedDelivery, PendingWebhook, Store, WebhookBody } from '../store/store.js';
import { nextAttemptAt } from './schedule.js';
import { causeOf, type AttemptCause, type AttemptOutcome, type DestinationSender } from './sender.js';
import { signatureHeaders } from './signing.js';
import type { AttemptTrace, Tracing } from '../telemetry/tracing.js';
import type { DestinationRules } from '../domain/rules/rules.js';
import { DeliveryRules, type Shaped, type Verdict } from './delivery-rules.js';
import { TransformPool, type TransformPoolOptions } from './transform/pool.js';

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
  /** A destination failing this long without a success is disabled. */
  disableAfterMs: number;
  /**
   * The longest the next round waits for the attempts the last one started to end (at most
   * as long as that round took, too); default MAX_WAIT_FOR_ATTEMPTS_MS.
   */
  maxWaitForAttemptsMs?: number;
  /** Results this node writes between two vacuums of the deliveries table; default VACUUM_AFTER_RESULTS. */
  vacuumAfterResults?: number;
  /** The marks of intake's own deliveries (src/domain/delivery-loop.ts), which every request carries. */
  marks: DeliveryMarks;
  /** Whether intake is near one of its bounds: delivery waits, so intake never sheds first. */
  underPressure: () => boolean;
  /** The clock of claims, schedules and signatures (tests move it by hours). */
  now?: () => number;
  /** The schedule's jitter. */
  random?: () => number;
  /**
   * Called as a delivery's first attempt starts (not a retry, not a replay), with the time
   * since its webhook was received, in ms (for /metrics).
   */
  onFirstAttempt?: (sinceReceivedMs: number) => void;
  /** Each attempt's span, and the `traceparent` its request carries; absent when tracing is off. */
  tracing?: Tracing;
  /** The transformation sandbox's bounds (its workers start with the first transformation). */
  transforms?: TransformPoolOptions;
}

/**
 * Bytes of bodies of webhooks this node committed with deliveries due, kept for their first
 * attempt (oldest dropped first): most deliveries are made within milliseconds of their
 * commit, by the node that committed them, and then need no read of the body from the
 * database.
 */
const RECENT_BODY_BYTES = 16 * 1024 * 1024;
/** Results kept for another try at most while the database refuses them. */
const MAX_UNWRITTEN_RESULTS = 10_000;
/** How often deliveries are moved to follow paused, resumed and deleted destinations. */
const RECONCILE_EVERY_MS = 1000;
const RECONCILE_BATCH = 1000;
/** The longest the next round waits for the attempts the last one started (letAttemptsEnd). */
const MAX_WAIT_FOR_ATTEMPTS_MS = 25;
/**
 * Results this node writes between two vacuums of the deliveries table (each leaves two
 * dead row versions, the lease's and the result's), and the least time between them.
 */
const VACUUM_AFTER_RESULTS = 20_000;
const VACUUM_EVERY_MS = 30_000;
/** After a failed round, how long before the next (the database is likely down). */
const RETRY_AFTER_FAILURE_MS = 1000;
const USER_AGENT = 'intake-destinations/1';

/** What a round did: deliveries claimed, their attempts (under way), how long it took. */
interface Round {
  claimed: number;
  attempts: Array<Promise<void>>;
  ms: number;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * One node's delivery worker. Its rounds are exchanges with the outbox
 * (store.exchangeDeliveries): the results of attempts that ended are written and due
 * deliveries claimed in one transaction, one round at a time. A round starts as soon as
 * there is something to do (a commit brought deliveries, an attempt ended) and the previous
 * one is over, so results wait for no timer and a freed slot is taken again at once, while
 * a busy worker still writes many results and claims in each transaction: the same group
 * commit intake uses. Idle, it looks every `pollMs` for retries that came due.
 *
 * It runs beside intake, never in its path: while intake is near a bound (underPressure)
 * rounds only write results and claim nothing, so deliveries are what waits first.
 *
 * At least once: a delivery leaves the outbox only when a result saying so is written. A
 * node that dies mid-attempt leaves its claim to expire and the delivery is attempted
 * again; a result that cannot be written is kept and written later, or the claim expires.
 */
export class DeliveryDispatcher {
  private inFlight = 0;
  private readonly inFlightByCompany = new Map<string, number>();
  private results: AttemptResult[] = [];
  private round: Promise<void> | undefined;
  /** Something happened during the current round: run another when it ends. */
  private again = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private lastReconcile = 0;
  private resultsSinceVacuum = 0;
  private lastVacuum = 0;
  private vacuuming = false;
  private running = false;
  private readonly opened = new Map<string, string>();
  /** Bodies of webhooks committed here, by uuid, oldest first (a Map keeps insertion order). */
  private readonly recent = new Map<string, PendingWebhook>();
  private recentBytes = 0;
  private readonly sends = new Set<Promise<void>>();
  private readonly now: () => number;
  /**
   * Attempts made since start, by outcome, rounds that claimed nothing because intake was
   * busy, and destinations this node disabled (exposed in /metrics).
   */
  readonly counts = { succeeded: 0, failed: 0, retried: 0, shed: 0, disabled: 0, filtered: 0, deduplicated: 0, transformationErrors: 0 };
  private readonly rules: DeliveryRules;
  /** Started by the first transformation: a node whose destinations have none runs no sandbox. */
  private transforms: TransformPool | undefined;

  constructor(
    private readonly store: Store,
    private readonly sender: DestinationSender,
    private readonly secrets: SecretBox,
    private readonly log: Logger,
    private readonly options: DispatcherOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.rules = new DeliveryRules(store, () => this.transformPool());
  }

  /** The node's transformation sandbox, started at first use; the API's "try it" shares it. */
  /** Sandbox workers stopped and replaced so far (a run past the wall-clock bound, a worker that died); 0 before the first transformation. */
  get transformWorkersReplaced(): number {
    return this.transforms?.stats().replaced ?? 0;
  }

  transformPool(): TransformPool {
    return (this.transforms ??= new TransformPool(this.options.transforms));
  }

  /** Delivery requests this node is making now. */
  get inFlightCount(): number {
    return this.inFlight;
  }

  start(): void {
    this.running = true;
    this.nudge();
  }

  /** Webhooks committed here with deliveries due now: their bodies are kept for those deliveries. */
  committed(webhooks: readonly PendingWebhook[]): void {
    // Kept as they are, so nothing is parsed or copied on intake's path; bodiesOf reads
    // what a delivery needs.
    for (const webhook of webhooks) {
      this.recent.set(webhook.uuid, webhook);
      this.recentBytes += keptBytes(webhook);
    }
    for (const [uuid, kept] of this.recent) {
      if (this.recentBytes <= RECENT_BODY_BYTES) break;
      this.recent.delete(uuid);
      this.recentBytes -= keptBytes(kept);
    }
    this.nudge();
  }

  /** There may be work (deliveries committed, an attempt ended): a round now, or right after the current one. */
  nudge(): void {
    if (!this.running) return;
    if (this.round !== undefined) {
      this.again = true;
      return;
    }
    clearTimeout(this.pollTimer);
    this.round = this.runRound(true).then((round) => this.letAttemptsEnd(round)).finally(() => {
      this.round = undefined;
      if (!this.running) return;
      if (this.again) {
        this.again = false;
        this.nudge();
      } else {
        this.pollTimer = setTimeout(() => this.nudge(), this.options.pollMs);
        this.pollTimer.unref();
      }
    });
  }

  /** Stops claiming, lets attempts under way end and writes their results. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.pollTimer);
    // Transformations waiting for their company's share would hold the stop for seconds each.
    this.rules.close();
    await this.round;
    await Promise.all(this.sends);
    await this.runRound(false);
    this.sender.close();
    await this.transforms?.close();
  }

  /**
   * One claim, every claimed attempt made and its result written: what tests drive with a
   * clock of their own (with the dispatcher not started). Returns how many deliveries were attempted.
   */
  async runOnce(): Promise<number> {
    await this.reconcile(true);
    const { claimed } = await this.runRound(true);
    await Promise.all(this.sends);
    await this.runRound(false);
    return claimed;
  }

  /**
   * One exchange: the results gathered so far, and (if `claim`) as many due deliveries as
   * there is room for, their attempts started.
   */
  private async runRound(claim: boolean): Promise<Round> {
    const started = performance.now();
    const results = this.results.splice(0);
    let room = claim ? this.options.concurrency - this.inFlight : 0;
    if (room > 0 && this.options.underPressure()) {
      this.counts.shed++;
      room = 0;
    }
    try {
      await this.reconcile(false);
      const perCompany = this.options.perCompany ?? Math.max(4, Math.floor(this.options.concurrency / 4));
      const { claimed, disabled } = await this.store.exchangeDeliveries(
        results,
        this.now(),
        room > 0
          ? {
              limit: room,
              leaseMs: this.options.leaseMarginMs,
              perCompany: { limit: perCompany, burst: Math.max(perCompany, Math.floor((this.options.concurrency * 3) / 4)), inFlight: this.inFlightByCompany },
            }
          : null,
        this.options.disableAfterMs,
      );
      this.resultsSinceVacuum += results.length;
      this.vacuumWhenDue();
      for (const destination of disabled) this.log.warn(destination, 'destination disabled');
      this.counts.disabled += disabled.length;
      // A full claim may have left more due: look again at once.
      if (claimed.length > 0 && claimed.length === room) this.again = true;
      const attempts = await this.send(claimed);
      return { claimed: claimed.length, attempts, ms: performance.now() - started };
    } catch (error) {
      // Kept for the next round; past the bound the claims expire and are attempted again.
      this.results.unshift(...results.slice(0, Math.max(0, MAX_UNWRITTEN_RESULTS - this.results.length)));
      this.log.error({ err: error, results: results.length }, 'delivery round failed');
      await pause(RETRY_AFTER_FAILURE_MS);
      return { claimed: 0, attempts: [], ms: 0 };
    }
  }

  /**
   * Before the next round, the attempts the last one started get a moment to end (at most
   * as long as that round took, and maxWaitForAttemptsMs), so that their results go in it
   * and their leases are free for its claim. Started at once, the next round would find
   * them still leased, and a destination's `max_in_flight` would be shared by two rounds'
   * claims: with rounds of 30 ms on a loaded PostgreSQL and answers that came within the
   * round, deliveries went out 49 a round on average instead of up to 100. Nudges meanwhile
   * only ask for that round.
   */
  private async letAttemptsEnd({ attempts, ms }: Round): Promise<void> {
    if (attempts.length === 0) return;
    await Promise.race([Promise.all(attempts), pause(Math.min(ms, this.options.maxWaitForAttemptsMs ?? MAX_WAIT_FOR_ATTEMPTS_MS))]);
  }

  /**
   * Starts the claimed attempts, returning them, once the destinations' rules have judged
   * them (those filtered or deduplicated are settled without one); if their bodies, rules
   * or deduplication keys cannot be read, their claims are left to expire and be made again.
   */
  private async send(claimed: readonly ClaimedDelivery[]): Promise<Array<Promise<void>>> {
    let bodies: Map<string, WebhookBody>;
    let verdicts: Map<string, Verdict>;
    try {
      bodies = await this.bodiesOf(claimed);
      const rules = await this.rules.rulesOf(claimed);
      verdicts = await this.rules.judge(claimed, bodies, rules, this.now());
    } catch (error) {
      this.log.error({ err: error, deliveries: claimed.length }, 'delivery bodies or rules could not be read; their claims will expire');
      await pause(RETRY_AFTER_FAILURE_MS);
      return [];
    }
    const attempts: Array<Promise<void>> = [];
    for (const delivery of claimed) {
      const verdict = verdicts.get(delivery.id) ?? { kind: 'send', rules: null };
      if (verdict.kind === 'send') attempts.push(this.startAttempt(delivery, bodies.get(delivery.webhookUuid) ?? null, verdict.rules));
      else this.settleUnsent(delivery, verdict.kind === 'filtered' ? { outcome: 'filtered', skippedBy: verdict.by } : { outcome: 'deduplicated', duplicateOf: verdict.of });
    }
    if (attempts.length < claimed.length) this.nudge();
    return attempts;
  }

  /** A delivery the rules settle without an attempt: its result, written with the next round's. */
  private settleUnsent(
    delivery: ClaimedDelivery,
    how: { outcome: 'filtered'; skippedBy: 'filter' | 'transformation' } | { outcome: 'deduplicated'; duplicateOf: string },
  ): void {
    this.counts[how.outcome]++;
    this.results.push({
      deliveryId: delivery.id,
      companyId: delivery.companyId,
      destinationId: delivery.destinationId,
      leaseToken: delivery.leaseToken,
      gone: false,
      rulesVersion: delivery.destination.rulesVersion,
      ...how,
      // Not recorded: no attempt was made.
      attempt: { series: delivery.series, number: delivery.attempt, attemptedAt: this.now(), durationMs: 0, status: null, error: null, responseExcerpt: null, nextAttemptAt: null },
    });
  }

  /**
   * Every lease and result leaves dead entries in the indexes claims read, until vacuum
   * removes them; with autovacuum late or off (it is off on the machine the benchmark ran
   * on) each claim walked more of them, and deliveries slowed round after round (1,944 →
   * 1,155 → 1,007 a second). So the node that wrote many results vacuums the table itself,
   * in the background, one vacuum at a time, skipped if another node is at it (PostgreSQL;
   * nothing on SQLite).
   */
  private vacuumWhenDue(): void {
    const now = this.now();
    const after = this.options.vacuumAfterResults ?? VACUUM_AFTER_RESULTS;
    if (this.vacuuming || this.resultsSinceVacuum < after || now - this.lastVacuum < VACUUM_EVERY_MS) return;
    this.vacuuming = true;
    this.resultsSinceVacuum = 0;
    this.lastVacuum = now;
    this.store
      .vacuumDeliveries()
      .catch((error: unknown) => this.log.warn({ err: error }, 'deliveries could not be vacuumed'))
      .finally(() => (this.vacuuming = false));
  }

  private async reconcile(always: boolean): Promise<void> {
    const now = this.now();
    if (!always && now - this.lastReconcile < RECONCILE_EVERY_MS) return;
    this.lastReconcile = now;
    await this.store.reconcileHeldDeliveries(now, RECONCILE_BATCH);
  }

  /** The claimed deliveries' bodies: from memory, else read (a retry, another node's webhook); purged ones absent. */
  private async bodiesOf(claimed: readonly ClaimedDelivery[]): Promise<Map<string, WebhookBody>> {
    const bodies = new Map<string, WebhookBody>();
    const missing = [];
    for (const delivery of claimed) {
      const webhook = this.recent.get(delivery.webhookUuid);
      if (webhook) bodies.set(delivery.webhookUuid, bodyOf(webhook));
      else missing.push({ companyId: delivery.companyId, uuid: delivery.webhookUuid, receivedAt: delivery.webhookReceivedAt });
    }
    if (missing.length > 0) for (const { uuid, ...body } of await this.store.readWebhookBodies(missing)) bodies.set(uuid, body);
    return bodies;
  }

  private startAttempt(delivery: ClaimedDelivery, webhook: WebhookBody | null, rules: DestinationRules | null): Promise<void> {
    this.inFlight++;
    this.countCompany(delivery.companyId, 1);
    const send: Promise<void> = this.attempt(delivery, webhook, rules)
      .catch((error: unknown) => this.log.error({ err: error, deliveryId: delivery.id }, 'delivery attempt failed unexpectedly'))
      .finally(() => {
        this.inFlight--;
        this.countCompany(delivery.companyId, -1);
        this.sends.delete(send);
        // Its result is to be written and its slot may take a delivery already due.
        this.nudge();
      });
    this.sends.add(send);
    return send;
  }

  private countCompany(companyId: string, change: number): void {
    const count = (this.inFlightByCompany.get(companyId) ?? 0) + change;
    if (count === 0) this.inFlightByCompany.delete(companyId);
    else this.inFlightByCompany.set(companyId, count);
  }

  private async attempt(delivery: ClaimedDelivery, webhook: WebhookBody | null, rules: DestinationRules | null): Promise<void> {
    // A rated destination's slot (RATE_HORIZON_MS ahead at most); its lease covers the wait.
    const wait = delivery.sendAt - this.now();
    if (wait > 0) await pause(wait);
    const attemptedAt = this.now();
    if (delivery.series === 0 && delivery.attempt === 1) this.options.onFirstAttempt?.(attemptedAt - delivery.webhookReceivedAt);
    // The child of its webhook's request span when this node committed the webhook and still holds it.
    const trace = this.options.tracing?.attempt(delivery, this.recent.get(delivery.webhookUuid));
    let outcome: AttemptOutcome = { ok: false, status: null, error: 'other', durationMs: 0, responseExcerpt: null, retryAfterMs: null };
    try {
      const shaped: Shaped | null = webhook && (await this.rules.shape(delivery, webhook, rules));
      if (shaped?.kind === 'dropped') {
        trace?.end({ ...outcome, error: null });
        this.settleUnsent(delivery, { outcome: 'filtered', skippedBy: 'transformation' });
        return;
      }
      if (shaped?.kind === 'error') {
        this.counts.transformationErrors++;
        outcome = { ...outcome, error: 'transformation_error', responseExcerpt: shaped.message, durationMs: this.now() - attemptedAt };
      } else if (shaped && webhook) {
        outcome = await this.sender.send({
          url: shaped.url,
          headers: this.headersOf(delivery, webhook, shaped, attemptedAt, trace),
          body: shaped.body,
          timeoutMs: delivery.destination.timeoutMs,
        });
      }
    } catch (error) {
      // Ours, not the receiver's (a secret this node cannot open): a failed attempt like
      // any, so the delivery goes on through its schedule; logged below with its cause.
      outcome = { ...outcome, cause: causeOf(error) };
    }
    this.logAttempt(delivery, outcome, webhook === null);
    trace?.end(webhook === null ? { ...outcome, error: 'webhook_purged' } : outcome);
    const finishedAt = this.now();
    const next =
      outcome.ok || webhook === null
        ? null
        : nextAttemptAt({
            attempt: delivery.attempt,
            now: finishedAt,
            status: outcome.status,
            retryAfterMs: outcome.retryAfterMs,
            random: this.options.random,
            policy: rules?.retry ?? null,
            startedAt: delivery.seriesStartedAt,
          });
    const result: AttemptResult['outcome'] = outcome.ok ? 'succeeded' : next === null ? 'failed' : 'retry';
    this.counts[result === 'retry' ? 'retried' : result]++;
    this.results.push({
      deliveryId: delivery.id,
      companyId: delivery.companyId,
      destinationId: delivery.destinationId,
      leaseToken: delivery.leaseToken,
      outcome: result,
      gone: outcome.status === 410,
      ...(delivery.destination.rulesVersion > 0 && { rulesVersion: delivery.destination.rulesVersion }),
      attempt: {
        series: delivery.series,
        number: delivery.attempt,
        attemptedAt,
        durationMs: outcome.durationMs,
        status: outcome.status,
        // The webhook was purged by retention before this attempt: nothing could be sent.
        error: webhook === null ? 'webhook_purged' : outcome.error,
        responseExcerpt: outcome.responseExcerpt,
        nextAttemptAt: next,
      },
    });
  }

  /**
   * An attempt that failed for no class the attempt log can name (`other`: the request
   * could not be made, undici refused it, the answer could not be parsed) is a warning with
   * its cause, which only the log keeps; every attempt is a debug line. Never a header's
   * value nor a body: the cause is an error's type, code and message alone.
   */
  private logAttempt(delivery: ClaimedDelivery, outcome: AttemptOutcome, purged: boolean): void {
    const error = purged ? 'webhook_purged' : outcome.error;
    const fields = { deliveryId: delivery.id, destinationId: delivery.destinationId, series: delivery.series, attempt: delivery.attempt };
    if (error === 'other') {
      const cause: AttemptCause = outcome.cause ?? { type: 'Unknown', message: 'no cause was given' };
      this.log.warn({ ...fields, cause }, 'delivery attempt failed with error class other');
    }
    if (this.log.isLevelEnabled('debug')) {
      this.log.debug({ ...fields, status: outcome.status, error, durationMs: Math.round(outcome.durationMs) }, 'delivery attempt');
    }
  }

  /**
   * The Standard Webhooks headers over the body sent (transformed or not), ours (the
   * attempt's traceparent among them), the destination's own (opened only here) and those
   * its transformation set.
   */
  private headersOf(
    delivery: ClaimedDelivery,
    webhook: WebhookBody,
    shaped: Extract<Shaped, { kind: 'request' }>,
    attemptedAt: number,
    trace: AttemptTrace | undefined,
  ): Record<string, string> {
    const { destination } = delivery;
    const secrets = [destination.secretSealed, destination.previousSecretSealed].filter((s): s is string => s !== null).map((s) => this.open(s));
    const extra = destination.headersSealed === null ? {} : headersOfJson(this.open(destination.headersSealed));
    return {
      ...extra,
      ...shaped.headers,
      'content-type': shaped.contentType,
      'user-agent': USER_AGENT,
      'x-intake-event': eventHeader(delivery.event),
      'x-intake-integration-id': delivery.integrationId,
      'x-intake-delivery-id': delivery.id,
      'x-intake-attempt': String(delivery.attempt),
      // x-intake-origin and x-intake-hops: how intake knows its own deliveries when they come back.
      ...this.options.marks.mark(delivery.id, webhook.hops),
      // After the destination's own headers, which may not name it anyway (destination-headers.ts).
      ...trace?.propagation(),
      ...signatureHeaders({ webhookId: delivery.webhookUuid, timestampSeconds: Math.floor(attemptedAt / 1000), body: shaped.body, secrets }),
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
}

/**
 * What a kept webhook costs the bound: its body and headers, and its objects (about 512
 * bytes), so a flood of tiny webhooks is bounded in count as well.
 */
function keptBytes(webhook: PendingWebhook): number {
  return webhook.rawBody.length + webhook.headers.length + 512;
}

/**
 * The event name as `x-intake-event` carries it. A header holds bytes 0x20-0x7e and Latin-1
 * at most, so an event of other scripts (`order.東京`) made every attempt fail; now each
 * UTF-8 byte outside printable ASCII (0x21-0x7e), `%` and the space are percent-encoded as
 * encodeURIComponent would, so that an ASCII name goes out as it is and
 * `decodeURIComponent` on the receiver's side always gives the exact name back.
 */
function eventHeader(event: string): string {
  if (PLAIN_EVENT.test(event)) return event;
  let value = '';
  for (const byte of Buffer.from(event, 'utf8')) {
    value += byte > 0x20 && byte < 0x7f && byte !== PERCENT ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return value;
}

const PLAIN_EVENT = /^[\x21-\x24\x26-\x7e]*$/;
const PERCENT = 0x25;

/**
 * The destination's headers, opened. Not JSON.parse's own error when they do not parse:
 * its message quotes the text, the headers' values.
 */
function headersOfJson(opened: string): Record<string, string> {
  try {
    return JSON.parse(opened) as Record<string, string>;
  } catch {
    throw new Error("the destination's sealed headers do not open to a JSON object");
  }
}

/** What a delivery sends of a webhook committed here: its body, as it arrived. */
function bodyOf(webhook: PendingWebhook): WebhookBody {
  return { rawBody: webhook.rawBody, headersJson: webhook.headers, ...keptForDelivery(webhook.headers), payloadFormat: webhook.payloadFormat ?? 'envelope' };
}
