import { isJsonContentType } from '../domain/webhook-body.js';
import { dedupeKey, filterInputOf, passesFilter, rulesFromJson, type DestinationRules } from '../domain/rules/rules.js';
import type { FilterInput } from '../domain/rules/filter.js';
import type { ClaimedDelivery, DedupeClaim, Store, WebhookBody } from '../store/store.js';
import type { BatchOutcome, TransformContext, TransformOutcome, TransformRequest, TransformRun } from './transform/pool.js';

/**
 * A destination's rules as the delivery worker applies them (src/domain/rules/rules.ts says
 * what each does): the versions read once and kept, the filter and deduplication judged
 * before any attempt (the keys taken in one store call per round), the transformation run
 * in the sandbox's workers as an attempt starts.
 */

/** What runs transformations: the sandbox's pool (src/destinations/transform/pool.ts). */
export interface Transformer {
  /** One run in a fresh context (a preview). */
  run(code: string, request: TransformRequest, context: TransformContext): Promise<TransformOutcome>;
  /** A batch of one company's runs in its warm contexts, none started past `budgetMs` (those come back null). */
  runMany(owner: string, runs: TransformRun[], budgetMs: number): Promise<BatchOutcome>;
}

/** What the rules decided before an attempt: send it (its rules, if any), or settle it unsent. */
export type Verdict =
  | { kind: 'send'; rules: DestinationRules | null }
  | { kind: 'filtered'; by: 'filter' }
  | { kind: 'deduplicated'; of: string };

/** What an attempt sends once its transformation ran: the request, or nothing, or why not. */
export type Shaped =
  | { kind: 'request'; url: string; body: Buffer; contentType: string; headers: Record<string, string> }
  | { kind: 'dropped' }
  | { kind: 'error'; message: string };

/**
 * Sandbox time one company's transformations may take on a node: a token bucket of
 * SANDBOX_MS_PER_SECOND refilled each second, BURST_MS at most, charged with the CPU time
 * each batch took on its worker's thread. A sandbox worker is a core while it runs, and on a
 * machine of two cores a company whose code loops on every delivery took one from intake's
 * own threads for as long as its backlog lasted (another tenant's intake p99 from 8 ms to
 * 109 ms, `npm run bench:tenants -- --phases loops`). Past its time, a company's
 * transformations wait for the bucket (its deliveries hold that company's share of the
 * worker's slots meanwhile, no one else's); one that would wait more than MAX_WAIT_MS since
 * it came (well within a claim's lease) fails that attempt, retried on its schedule. A
 * quarter of a core, and a quarter of a second of burst: with 500 ms a second, or a second
 * of burst, the looping company's first second raised the other tenant's p99 by half again
 * and more (docs/performance.md, issue 36); a warm run of a small transformation takes
 * about 0.1 ms, so a company makes about 2,000 a second on a node within it.
 */
const SANDBOX_MS_PER_SECOND = 250;
const BURST_MS = 250;
const MAX_WAIT_MS = 10_000;
/** A company's transformations waiting for their turn at most: more than its share of a node's delivery slots, so only a flood meets it. */
const MAX_WAITING = 1000;
/**
 * One batch of a company's at most: a batch is one message each way, and holds its worker
 * for MAX_BATCH_MS at most (and the run under way then): another company waiting for that
 * worker waits no longer.
 */
const MAX_BATCH_RUNS = 64;
const MAX_BATCH_MS = 50;

/** Versions kept at most: each is small, and a version never changes once saved. */
const MAX_CACHED_VERSIONS = 2000;
/** The first 1 KiB of a transformation's error, as the attempt log keeps a response's. */
const MAX_ERROR_BYTES = 1024;

/**
 * Header names a transformation may not set: intake's own (signatures, its marks, the
 * trace) and the connection's, as for a destination's extra headers.
 */
const RESERVED_HEADER = /^(webhook-|x-intake-|content-length$|host$|connection$|keep-alive$|proxy-|te$|trailer$|transfer-encoding$|upgrade$|expect$|traceparent$|tracestate$|user-agent$)/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]{0,4096}$/;

export class DeliveryRules {
  private readonly versions = new Map<string, DestinationRules>();
  private readonly batches: CompanyBatches;

  constructor(
    private readonly store: Store,
    private readonly transformer: () => Transformer,
  ) {
    this.batches = new CompanyBatches(transformer, {
      perSecondMs: SANDBOX_MS_PER_SECOND,
      burstMs: BURST_MS,
      maxWaitMs: MAX_WAIT_MS,
      maxWaiting: MAX_WAITING,
      maxBatchRuns: MAX_BATCH_RUNS,
      maxBatchMs: MAX_BATCH_MS,
    });
  }

  /** Transformations still waiting for their turn are refused: the node is stopping. */
  close(): void {
    this.batches.close();
  }

  /** The rules of each claimed delivery's destination at its claimed version, read where not kept. */
  async rulesOf(claimed: readonly ClaimedDelivery[]): Promise<Map<string, DestinationRules>> {
    const wanted = new Map<string, { destinationId: string; version: number }>();
    for (const delivery of claimed) {
      const version = delivery.destination.rulesVersion;
      if (version > 0 && !this.versions.has(versionKey(delivery.destinationId, version))) {
        wanted.set(versionKey(delivery.destinationId, version), { destinationId: delivery.destinationId, version });
      }
    }
    if (wanted.size > 0) {
      if (this.versions.size + wanted.size > MAX_CACHED_VERSIONS) this.versions.clear();
      for (const row of await this.store.readDestinationRules([...wanted.values()])) {
        this.versions.set(versionKey(row.destinationId, row.version), rulesFromJson(row.rules));
      }
    }
    const rules = new Map<string, DestinationRules>();
    for (const delivery of claimed) {
      const found = this.versions.get(versionKey(delivery.destinationId, delivery.destination.rulesVersion));
      if (found) rules.set(delivery.id, found);
    }
    return rules;
  }

  /**
   * The filter and deduplication of each claimed delivery whose webhook is still stored. A
   * key is judged on the series' first attempt only (a retry holds it already), and never
   * for a replay: replaying is asking for it again.
   */
  async judge(
    claimed: readonly ClaimedDelivery[],
    bodies: ReadonlyMap<string, WebhookBody>,
    rules: ReadonlyMap<string, DestinationRules>,
    now: number,
  ): Promise<Map<string, Verdict>> {
    const verdicts = new Map<string, Verdict>();
    const keys: DedupeClaim[] = [];
    for (const delivery of claimed) {
      const webhook = bodies.get(delivery.webhookUuid);
      const own = rules.get(delivery.id) ?? null;
      if (own === null || webhook === undefined || (own.filter === null && own.deduplicate === null)) {
        verdicts.set(delivery.id, { kind: 'send', rules: own });
        continue;
      }
      const input = filterInputOf(webhook.rawBody, webhook.payloadFormat, webhook.headersJson);
      if (!passesFilter(own, input)) {
        verdicts.set(delivery.id, { kind: 'filtered', by: 'filter' });
        continue;
      }
      verdicts.set(delivery.id, { kind: 'send', rules: own });
      const key = own.deduplicate && delivery.series === 0 && delivery.attempt === 1 ? dedupeKey(own.deduplicate, input, webhook.rawBody) : null;
      if (key !== null) keys.push({ destinationId: delivery.destinationId, key, deliveryId: delivery.id, expiresAt: now + own.deduplicate!.windowMs });
    }
    if (keys.length > 0) {
      for (const { deliveryId, heldBy } of await this.store.claimDedupeKeys(keys, now)) {
        if (heldBy !== deliveryId) verdicts.set(deliveryId, { kind: 'deduplicated', of: heldBy });
      }
    }
    return verdicts;
  }

  /**
   * What the attempt sends: the webhook as it arrived, or as the transformation reshaped it
   * (its body, headers it adds, a path and query on the destination's URL).
   */
  async shape(delivery: ClaimedDelivery, webhook: WebhookBody, rules: DestinationRules | null): Promise<Shaped> {
    if (rules?.transformation == null) {
      return { kind: 'request', url: delivery.destination.url, body: webhook.rawBody, contentType: webhook.contentType, headers: {} };
    }
    const input = filterInputOf(webhook.rawBody, webhook.payloadFormat, webhook.headersJson);
    let outcome: TransformOutcome;
    const code = rules.transformation.code;
    try {
      outcome = await this.batches.run(delivery.companyId, {
        code,
        request: transformRequestOf(input),
        context: {
          webhookId: delivery.webhookUuid,
          event: delivery.event,
          integrationId: delivery.integrationId,
          receivedAt: new Date(delivery.webhookReceivedAt).toISOString(),
          attempt: delivery.attempt,
        },
      });
    } catch (error) {
      // The sandbox could not take it (its queue full, a worker that did not start, the
      // company's sandbox time spent): a failed attempt like a transformation's own error,
      // retried on the schedule.
      return { kind: 'error', message: `The transformation could not run: ${(error as Error).message}.` };
    }
    if (outcome.kind === 'dropped') return { kind: 'dropped' };
    if (outcome.kind === 'error') return { kind: 'error', message: truncate(outcome.message) };
    return requestOf(delivery.destination.url, webhook, input, outcome.request);
  }
}

/** A company's sandbox time and batches, as CompanyBatches counts them. */
export interface TimeBudget {
  perSecondMs: number;
  burstMs: number;
  /** The longest a run waits, from when it came; one that would wait longer is refused. */
  maxWaitMs: number;
  /** Runs of a company waiting at most. */
  maxWaiting: number;
  maxBatchRuns: number;
  maxBatchMs: number;
}

interface Waiting {
  run: TransformRun;
  since: number;
  resolve(outcome: TransformOutcome): void;
  reject(error: Error): void;
}

interface CompanyQueue {
  waiting: Waiting[];
  /** A batch of this company's is out (or it sleeps for its bucket). */
  busy: boolean;
  tokensMs: number;
  at: number;
}

/**
 * Each company's transformations, gathered into batches: one batch of a company's at a
 * time (so one company holds one sandbox worker at most, and another company's always find
 * the other), each what waited when the last came back, up to maxBatchRuns, with the
 * company's sandbox time as its budget, up to maxBatchMs. What a batch did not start waits
 * at the head for the next. The time a batch took is charged to its company's bucket; an
 * empty bucket makes the company's next batch wait for it (on `now`'s clock).
 */
export class CompanyBatches {
  private readonly companies = new Map<string, CompanyQueue>();
  private closed = false;
  private wake!: () => void;
  /** Settles when close() is called: what every wait races. */
  private readonly closing = new Promise<void>((resolve) => (this.wake = resolve));

  constructor(
    private readonly transformer: () => Transformer,
    private readonly budget: TimeBudget,
    private readonly now: () => number = () => performance.now(),
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref()),
  ) {}

  /** The run's outcome; rejects when it cannot run (the node stopping, the company's queue full or its share spent, the pool refusing). */
  run(companyId: string, run: TransformRun): Promise<TransformOutcome> {
    if (this.closed) return Promise.reject(new Error('the node is stopping'));
    let company = this.companies.get(companyId);
    if (!company) this.companies.set(companyId, (company = { waiting: [], busy: false, tokensMs: this.budget.burstMs, at: this.now() }));
    if (company.waiting.length >= this.budget.maxWaiting) {
      return Promise.reject(new Error(`${this.budget.maxWaiting} of this company's transformations are waiting already; try later`));
    }
    const queue = company;
    return new Promise((resolve, reject) => {
      queue.waiting.push({ run, since: this.now(), resolve, reject });
      if (!queue.busy) void this.serve(companyId, queue);
    });
  }

  /** Every run waiting (for its batch or its company's time) is refused, and every later one. */
  close(): void {
    this.closed = true;
    this.wake();
    for (const company of this.companies.values()) this.refuse(company.waiting.splice(0), new Error('the node is stopping'));
  }

  /** The company's batches, one after another while runs wait. */
  private async serve(companyId: string, company: CompanyQueue): Promise<void> {
    company.busy = true;
    try {
      while (company.waiting.length > 0 && !this.closed) {
        const wait = this.waitFor(company);
        if (wait > 0) {
          const start = this.now() + wait;
          const late = company.waiting.filter((waiting) => start - waiting.since > this.budget.maxWaitMs);
          if (late.length > 0) {
            company.waiting = company.waiting.filter((waiting) => !late.includes(waiting));
            this.refuse(late, new Error(`this company's transformations used their share of the sandbox (${this.budget.perSecondMs} ms a second); try later`));
            continue;
          }
          await Promise.race([this.sleep(wait), this.closing]);
          continue;
        }
        const batch = company.waiting.splice(0, this.budget.maxBatchRuns);
        let done: BatchOutcome;
        try {
          done = await this.transformer().runMany(
            companyId,
            batch.map((waiting) => waiting.run),
            Math.min(company.tokensMs, this.budget.maxBatchMs),
          );
        } catch (error) {
          this.refuse(batch, error as Error);
          continue;
        }
        this.refill(company);
        company.tokensMs -= done.usedMs;
        const notStarted = batch.filter((_, index) => done.outcomes[index] == null);
        batch.forEach((waiting, index) => {
          const outcome = done.outcomes[index];
          if (outcome != null) waiting.resolve(outcome);
        });
        company.waiting.unshift(...notStarted);
      }
    } finally {
      company.busy = false;
      if (this.closed) this.refuse(company.waiting.splice(0), new Error('the node is stopping'));
      this.refill(company);
      if (company.waiting.length === 0 && company.tokensMs >= this.budget.burstMs) this.companies.delete(companyId);
    }
  }

  private refuse(runs: Waiting[], error: Error): void {
    for (const waiting of runs) waiting.reject(error);
  }

  /** How long until the company's bucket is above zero again (0: now). */
  private waitFor(company: CompanyQueue): number {
    this.refill(company);
    return company.tokensMs > 0 ? 0 : Math.ceil((-company.tokensMs * 1000) / this.budget.perSecondMs) + 1;
  }

  private refill(company: CompanyQueue): void {
    const now = this.now();
    company.tokensMs = Math.min(this.budget.burstMs, company.tokensMs + ((now - company.at) * this.budget.perSecondMs) / 1000);
    company.at = now;
  }
}

function versionKey(destinationId: string, version: number): string {
  return `${destinationId} ${version}`;
}

/** What a transformation is given: the request as it arrived. */
export function transformRequestOf(input: FilterInput): TransformRequest {
  return { body: input.body, headers: { ...input.headers }, path: '', query: {} };
}

/**
 * The request a transformation returned, made sendable: the body as JSON (a string as it
 * is when the type is not JSON), the headers it set or changed beside the sender's (intake forwards none of those by
 * itself), and its path and query on the destination's URL (its origin never changes).
 */
export function requestOf(destinationUrl: string, webhook: WebhookBody, input: FilterInput, request: TransformRequest): Shaped {
  const headers: Record<string, string> = {};
  for (const [rawName, value] of Object.entries(request.headers)) {
    const name = rawName.toLowerCase();
    if (input.headers[name] === value) continue;
    if (!HEADER_NAME.test(name) || !HEADER_VALUE.test(value)) return { kind: 'error', message: `The transformation returned a header intake cannot send: ${JSON.stringify(rawName).slice(0, 120)}.` };
    if (RESERVED_HEADER.test(name)) return { kind: 'error', message: `The transformation may not set ${name}: intake sets it.` };
    headers[name] = value;
  }
  // A string is sent as it is only where the type is not JSON (a form, a text body): in a
  // JSON body, "hello" is the JSON string, and goes out quoted.
  const contentType = headers['content-type'] ?? (typeof request.body === 'string' && !isJsonContentType(webhook.contentType) ? webhook.contentType : 'application/json');
  const textBody = typeof request.body === 'string' && !isJsonContentType(contentType);
  const body = Buffer.from(textBody ? (request.body as string) : JSON.stringify(request.body ?? null), 'utf8');
  delete headers['content-type'];
  const url = new URL(destinationUrl);
  if (request.path !== '') url.pathname = `${url.pathname.replace(/\/$/, '')}${request.path}`;
  for (const [name, value] of Object.entries(request.query)) url.searchParams.set(name, value);
  return { kind: 'request', url: url.toString(), body, contentType, headers };
}

function truncate(message: string): string {
  const bytes = Buffer.from(message, 'utf8');
  return bytes.length <= MAX_ERROR_BYTES ? message : bytes.subarray(0, MAX_ERROR_BYTES).toString('utf8').replace(/\uFFFD$/, '');
}

/** What a destination's rules would do with one webhook, as "try it" shows it. */
export interface RulesPreview {
  /** Null without a filter. */
  filter: { passed: boolean } | null;
  /** The deduplication key (SHA-256, hex); null without deduplication, or when the webhook has none of the fields. */
  dedupeKey: string | null;
  /** Null without a transformation. */
  transformation: { outcome: 'request' | 'dropped' | 'error'; message: string | null } | null;
  /** What would be sent, unless the filter refused it or the transformation dropped it or failed. */
  request: { url: string; contentType: string; headers: Record<string, string>; body: Buffer } | null;
}

/** The webhook a preview judges: a stored one, or one pasted in. */
export interface PreviewWebhook {
  rawBody: Buffer;
  payloadFormat: WebhookBody['payloadFormat'];
  headersJson: string;
  contentType: string;
  uuid: string;
  event: string;
  integrationId: string;
  receivedAt: number;
}

/**
 * The rules applied to one webhook without sending anything nor taking a deduplication key:
 * the filter, the key, the transformation and the request that would go out.
 */
export async function previewRules(rules: DestinationRules, destinationUrl: string, webhook: PreviewWebhook, transformer: () => Transformer): Promise<RulesPreview> {
  const input = filterInputOf(webhook.rawBody, webhook.payloadFormat, webhook.headersJson);
  const filter = rules.filter === null ? null : { passed: passesFilter(rules, input) };
  const key = rules.deduplicate === null ? null : dedupeKey(rules.deduplicate, input, webhook.rawBody);
  const preview: RulesPreview = { filter, dedupeKey: key, transformation: null, request: null };
  if (filter?.passed === false) return preview;
  if (rules.transformation === null) {
    preview.request = { url: destinationUrl, contentType: webhook.contentType, headers: {}, body: webhook.rawBody };
    return preview;
  }
  const outcome = await transformer().run(rules.transformation.code, transformRequestOf(input), {
    webhookId: webhook.uuid,
    event: webhook.event,
    integrationId: webhook.integrationId,
    receivedAt: new Date(webhook.receivedAt).toISOString(),
    attempt: 1,
  });
  if (outcome.kind === 'dropped') return { ...preview, transformation: { outcome: 'dropped', message: null } };
  if (outcome.kind === 'error') return { ...preview, transformation: { outcome: 'error', message: truncate(outcome.message) } };
  const shaped = requestOf(destinationUrl, { ...webhook, hops: 0 }, input, outcome.request);
  if (shaped.kind === 'error') return { ...preview, transformation: { outcome: 'error', message: shaped.message } };
  if (shaped.kind !== 'request') return { ...preview, transformation: { outcome: 'dropped', message: null } };
  return { ...preview, transformation: { outcome: 'request', message: null }, request: { url: shaped.url, contentType: shaped.contentType, headers: shaped.headers, body: shaped.body } };
}
