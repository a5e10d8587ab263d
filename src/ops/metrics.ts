import { setTimeout as sleep } from 'node:timers/promises';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { SignIn } from '../admin/sign-in.js';
import type { ReadLimits } from '../api/read-limits.js';
import type { DeliveryDispatcher } from '../destinations/dispatcher.js';
import type { ErrorCode } from '../errors.js';
import type { AdmissionGate } from '../intake/admission.js';
import type { AuthFailureLimiter } from '../intake/auth-failures.js';
import type { GroupCommitWriter, WrittenGroup } from '../intake/group-commit.js';
import type { KeyCache } from '../intake/key-cache.js';
import type { ProviderType } from '../sources/provider.js';
import type { SourceRefusalReason } from '../sources/verifier.js';
import type { Store } from '../store/store.js';
import type { RetentionJob } from './retention.js';

/**
 * Every metric the service exports, in one place (docs/operations.md lists them).
 *
 * Labels are bounded by construction: route shapes as registered (`/api/v1/integrations/:integration_id`,
 * never a path as sent), methods, status codes, error codes from the closed list in
 * errors.ts, and short fixed words. Never a company, an integration, a key or a destination:
 * those are in the request log, the usage charts and a destination's stats.
 *
 * Two ways in: what happens on a request or a commit is observed as it happens (histograms,
 * and counters of events with labels); what the service's parts already count or hold
 * (queue depth, cache hits, delivery attempts) is read from them when /metrics is scraped,
 * so the hot path pays for a number's increment and nothing more.
 */
export class Metrics {
  readonly registry = new Registry();
  /**
   * Made with the app, not at the first scrape: the process's CPU counter and the event-loop
   * delay monitor count from when they start, so a registry made lazily would leave out all
   * the process did before it was first scraped.
   */
  private readonly process = processRegistry();

  private readonly requestDuration = new Histogram({
    name: 'intake_http_request_duration_seconds',
    help: 'Time from a request\'s arrival to its answer sent, by method, route shape and status (every route: intake, /api/v1, the panel, operations).',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  private readonly webhookRequests = new Counter({
    name: 'intake_webhook_requests_total',
    help:
      'Requests to the webhook addresses, by method, route shape, status and outcome: accepted (202), replayed (200, Idempotent-Replayed), ' +
      'ok (other 2xx), or the error code answered (invalid_api_key, payload_too_large, service_unavailable, ...).',
    labelNames: ['method', 'route', 'status', 'outcome'] as const,
    registers: [this.registry],
  });

  private readonly webhookBodyBytes = new Histogram({
    name: 'intake_webhook_body_bytes',
    help: 'Size of the bodies read at the webhook addresses (after authentication, within the integration\'s limit), in bytes.',
    buckets: [256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216],
    registers: [this.registry],
  });

  private readonly authFailures = new Counter({
    name: 'intake_auth_failures_total',
    help:
      'Requests refused for their credentials, by area (intake: the webhook addresses; api: /api/v1) and reason (the error code: ' +
      'missing_api_key, invalid_api_key, insufficient_permissions, auth_rate_limited, invalid_signature, signature_expired, not_signed_in, csrf_failed).',
    labelNames: ['area', 'reason'] as const,
    registers: [this.registry],
  });

  private readonly groupSize = new Histogram({
    name: 'intake_group_commit_webhooks',
    help: 'Webhooks in each group commit (transactions holding only request-log rows are not counted here).',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
    registers: [this.registry],
  });

  private readonly commitDuration = new Histogram({
    name: 'intake_group_commit_duration_seconds',
    help: 'Time the store took to write one group commit (webhooks, their request-log rows and deliveries), by outcome (committed, failed).',
    labelNames: ['outcome'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  private readonly sourceRefusals = new Counter({
    name: 'intake_source_verification_failures_total',
    help:
      "Requests a provider source refused, by provider type and reason: invalid_signature, signature_expired, no_live_secret (the source has no " +
      "live signing secret), secrets_unavailable (this node cannot open the source's secrets: check INTAKE_SECRETS_KEY; answered 503).",
    labelNames: ['provider', 'reason'] as const,
    registers: [this.registry],
  });

  private readonly deliveryLag = new Histogram({
    name: 'intake_delivery_lag_seconds',
    help:
      "Time from a webhook's arrival (received_at) to the start of its first attempt at a destination, for first attempts this node makes " +
      '(retries and replays not counted; a paused destination\'s deliveries count the pause).',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });

  /** Label sets, made once each: a request allocates none of its own. */
  private readonly routes = new Map<string | undefined, RouteLabels>();
  private readonly authLabels = new Memo2((area: string, reason: string) => ({ area, reason }));
  private readonly refusalLabels = new Memo2((provider: ProviderType, reason: SourceRefusalReason) => ({ provider, reason }));

  /** The Content-Type of what scrape() returns (Prometheus text format 0.0.4). */
  get contentType(): string {
    return this.registry.contentType;
  }

  private readonly scrapes = new PacedScrapes(() => Registry.merge([this.process, this.registry]).metrics());

  /**
   * The text a scrape gets: the process's metrics, then the service's, made after the call
   * (never older than it), shared by the calls waiting for the same text and paced
   * (PacedScrapes).
   */
  scrape(): Promise<string> {
    return this.scrapes.next();
  }

  /** A request answered, on any route (from the app's onResponse hook). */
  answered(route: string | undefined, method: string, status: number, seconds: number, errorCode: ErrorCode | undefined): void {
    const labels = this.routeLabels(route);
    this.requestDuration.observe(labels.withStatus.get(method, status), seconds);
    if (errorCode !== undefined && labels.area !== undefined && AUTH_FAILURE_CODES.has(errorCode)) {
      this.authFailures.inc(this.authLabels.get(labels.area, errorCode));
    }
  }

  /** A request to a webhook address answered; `bodyBytes` when its body was read. */
  webhookAnswered(route: string | undefined, method: string, status: number, outcome: string, bodyBytes: number | undefined): void {
    this.webhookRequests.inc(this.routeLabels(route).withOutcome(method, status, outcome));
    if (bodyBytes !== undefined) this.webhookBodyBytes.observe(bodyBytes);
  }

  /** One transaction of the group-commit writer. */
  groupWritten(group: WrittenGroup): void {
    if (group.webhooks > 0) this.groupSize.observe(group.webhooks);
    this.commitDuration.observe(group.committed ? COMMITTED : FAILED, group.seconds);
  }

  /** A provider source refused a request. */
  sourceRefused(provider: ProviderType, reason: SourceRefusalReason): void {
    this.sourceRefusals.inc(this.refusalLabels.get(provider, reason));
  }

  /** A delivery's first attempt starts, `ms` after its webhook arrived. */
  firstAttempt(ms: number): void {
    this.deliveryLag.observe(Math.max(0, ms) / 1000);
  }

  /**
   * Registers what is read from the service's parts at each scrape. Called once the app has
   * built them; every metric here reads a number the part keeps anyway.
   */
  watch(parts: WatchedParts): void {
    const registers = [this.registry];
    const { writer, admission, keyCache, dispatcher, retention, signIn } = parts;

    gauge('intake_write_queue_depth', 'Webhooks waiting for their group commit.', () => writer.queued);
    gauge('intake_write_queue_bytes', 'Raw body bytes of the webhooks waiting for their group commit.', () => writer.bytesQueued);
    gauge(
      'intake_write_queue_oldest_seconds',
      'How long the oldest webhook waiting for its group commit has waited (0 when none waits); intake sheds past INTAKE_MAX_QUEUE_WAIT_MS.',
      () => writer.oldestWaitMs() / 1000,
    );
    counter(
      'intake_requests_shed_total',
      'Requests to the webhook addresses refused with 503 by an overload bound: event_loop_lag and queue_wait before authentication ' +
        '(not stored, not in the request log), queue_full after the body was read (in the request log).',
      ['bound'],
      () => [
        [{ bound: 'event_loop_lag' }, admission.shedBy.event_loop_lag],
        [{ bound: 'queue_wait' }, admission.shedBy.queue_wait],
        [{ bound: 'queue_full' }, writer.refusedFull],
      ],
    );
    counter(
      'intake_request_log_dropped_total',
      'Request-log rows of rejected requests dropped while the database fell behind or failed.',
      [],
      () => [[{}, writer.droppedLogs]],
    );
    counter(
      'intake_unknown_integration_requests_total',
      'Requests to webhook addresses that name no integration (not stored, not in any request log).',
      [],
      () => [[{}, parts.counters.unknownIntegrationRequests]],
    );
    counter(
      'intake_auth_rate_limited_unlogged_total',
      'Requests refused with 429 auth_rate_limited beyond the first of their address at an integration in a window (counted, not in the request log).',
      [],
      () => [[{}, parts.authFailures.unloggedRefusals]],
    );
    counter(
      'intake_key_cache_lookups_total',
      'Lookups in the key cache, by kind (key, integration) and result (hit: answered from memory; miss: read from the database).',
      ['kind', 'result'],
      () => [
        [{ kind: 'key', result: 'hit' }, keyCache.lookups.keyHits],
        [{ kind: 'key', result: 'miss' }, keyCache.lookups.keyMisses],
        [{ kind: 'integration', result: 'hit' }, keyCache.lookups.integrationHits],
        [{ kind: 'integration', result: 'miss' }, keyCache.lookups.integrationMisses],
      ],
    );
    counter(
      'intake_key_cache_invalidations_total',
      'Times the key cache forgot everything, by reason: change (the database told of a key or integration change), local (a change made ' +
        'through this node), unverified (the database did not answer its polls for too long), full.',
      ['reason'],
      () => Object.entries(keyCache.invalidations).map(([reason, count]) => [{ reason }, count]),
    );
    counter(
      'intake_sign_in_failures_total',
      'Refused sign-ins to the panel, by reason: invalid_credentials, invalid_two_factor_code, rate_limited (too many failures of the ' +
        'account or address), service_unavailable (password hashing busy).',
      ['reason'],
      () => Object.entries(signIn.failures).map(([reason, count]) => [{ reason }, count]),
    );
    gauge('intake_live_tail_streams', 'Live tails (GET /api/v1/webhooks/stream) open on this node.', () => parts.readLimits.streams.inUse);
    counter(
      'intake_retention_rows_purged_total',
      "Rows this node's retention purges deleted, by table (PostgreSQL drops whole expired day partitions too: intake_retention_partitions_dropped_total).",
      ['table'],
      () => [
        [{ table: 'webhooks' }, retention.purged.webhooks],
        [{ table: 'request_log' }, retention.purged.requestLog],
        [{ table: 'idempotency_keys' }, retention.purged.idempotencyKeys],
        [{ table: 'deliveries' }, retention.purged.deliveries],
      ],
    );
    counter(
      'intake_retention_partitions_dropped_total',
      "Expired day partitions this node's retention purges dropped (PostgreSQL).",
      [],
      () => [[{}, retention.purged.partitionsDropped]],
    );
    counter(
      'intake_retention_runs_total',
      "This node's retention purges, by outcome (completed, failed: logged, and tried again at the next interval).",
      ['outcome'],
      () => [
        [{ outcome: 'completed' }, retention.runs.completed],
        [{ outcome: 'failed' }, retention.runs.failed],
      ],
    );
    counter(
      'intake_delivery_attempts_total',
      'Delivery attempts made by this node, by outcome: succeeded, retry (failed, another attempt scheduled), failed (failed for good).',
      ['outcome'],
      () => [
        [{ outcome: 'succeeded' }, dispatcher.counts.succeeded],
        [{ outcome: 'retry' }, dispatcher.counts.retried],
        [{ outcome: 'failed' }, dispatcher.counts.failed],
      ],
    );
    counter(
      'intake_delivery_claims_shed_total',
      "Rounds in which this node's delivery worker claimed nothing because intake was near one of its bounds.",
      [],
      () => [[{}, dispatcher.counts.shed]],
    );
    counter(
      'intake_destinations_disabled_total',
      'Destinations this node disabled because they failed for INTAKE_DESTINATION_DISABLE_AFTER_HOURS or answered 410.',
      [],
      () => [[{}, dispatcher.counts.disabled]],
    );
    gauge('intake_deliveries_in_flight', 'Delivery requests this node is making now.', () => dispatcher.inFlightCount);
    counter(
      'intake_thread_busy_seconds_total',
      "Seconds each of the node's threads has been busy rather than waiting for work, by thread: event_loop (HTTP, authentication, " +
        "answers, deliveries' requests); on SQLite sqlite_commit (group commits and delivery exchanges, their fsyncs included) and " +
        "sqlite_read (the API's heavy reads). Its rate is the thread's utilisation: the thread near 1 is what limits the node.",
      ['thread'],
      () => [
        [{ thread: 'event_loop' }, performance.eventLoopUtilization().active / 1000],
        ...parts.store.threadsBusySeconds().map(({ thread, seconds }): [{ thread: string }, number] => [{ thread }, seconds]),
      ],
    );

    const backlog = new SharedRead(() => parts.store.deliveryBacklog(Date.now(), DELIVERY_BACKLOG_CAP), STORE_READ_TIMEOUT_MS);
    new Gauge({
      name: 'intake_delivery_backlog',
      help:
        `Deliveries of every company due and waiting for a worker (not being attempted, not held), counted up to ${DELIVERY_BACKLOG_CAP}; ` +
        'the same on every node sharing the database. Absent when the database did not answer within a second.',
      registers,
      async collect() {
        const read = await backlog.get();
        if (read === undefined) this.reset();
        else this.set(read.due);
      },
    });
    new Gauge({
      name: 'intake_delivery_backlog_oldest_seconds',
      help: 'How long the longest-waiting due delivery has waited for a worker (0 when none); absent when the database did not answer within a second.',
      registers,
      async collect() {
        const read = await backlog.get();
        if (read === undefined) this.reset();
        else this.set(read.oldestDueAt === null ? 0 : Math.max(0, Date.now() - read.oldestDueAt) / 1000);
      },
    });

    // PostgreSQL only: SQLite has no pool, and these are then absent.
    if (parts.store.connectionPool() !== undefined) {
      const pool = () => parts.store.connectionPool()!;
      gauge('intake_postgres_pool_connections', "Connections in this node's PostgreSQL pool, idle or in use.", () => pool().total);
      gauge('intake_postgres_pool_idle_connections', "Idle connections in this node's PostgreSQL pool.", () => pool().idle);
      gauge('intake_postgres_pool_waiting_queries', 'Queries waiting for a connection of the pool (all are in use).', () => pool().waiting);
      gauge('intake_postgres_pool_max_connections', 'The most connections the pool opens (INTAKE_DATABASE_POOL_SIZE).', () => pool().max);
    }

    function gauge(name: string, help: string, value: () => number): void {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(value());
        },
      });
    }

    /** A counter whose values a part keeps: set to them at each scrape. */
    function counter<L extends string>(name: string, help: string, labelNames: L[], values: () => Array<[Partial<Record<L, string>>, number]>): void {
      new Counter({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          for (const [labels, value] of values()) this.inc(labels, value);
        },
      });
    }
  }

  private routeLabels(route: string | undefined): RouteLabels {
    let labels = this.routes.get(route);
    if (labels === undefined) {
      labels = new RouteLabels(route);
      this.routes.set(route, labels);
    }
    return labels;
  }
}

/** The parts of the app /metrics reads at each scrape. */
export interface WatchedParts {
  store: Pick<Store, 'connectionPool' | 'deliveryBacklog' | 'threadsBusySeconds'>;
  writer: Pick<GroupCommitWriter, 'queued' | 'bytesQueued' | 'oldestWaitMs' | 'droppedLogs' | 'refusedFull'>;
  admission: Pick<AdmissionGate, 'shedBy'>;
  authFailures: Pick<AuthFailureLimiter, 'unloggedRefusals'>;
  keyCache: Pick<KeyCache, 'lookups' | 'invalidations'>;
  counters: { unknownIntegrationRequests: number };
  signIn: Pick<SignIn, 'failures'>;
  readLimits: Pick<ReadLimits, 'streams'>;
  retention: Pick<RetentionJob, 'purged' | 'runs'>;
  dispatcher: Pick<DeliveryDispatcher, 'counts' | 'inFlightCount'>;
}

/** Error codes that refuse a request for its credentials (intake_auth_failures_total). */
const AUTH_FAILURE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'missing_api_key',
  'invalid_api_key',
  'insufficient_permissions',
  'auth_rate_limited',
  'invalid_signature',
  'signature_expired',
  'not_signed_in',
  'csrf_failed',
]);

/** Due deliveries counted at most per scrape: the count reads no more index entries than this. */
const DELIVERY_BACKLOG_CAP = 10_000;
/** A scrape does not wait longer than this for the database; the figures it reads are then absent. */
const STORE_READ_TIMEOUT_MS = 1000;

const COMMITTED = { outcome: 'committed' };
const FAILED = { outcome: 'failed' };

/** Status codes as label values, made once. */
const STATUS_TEXT = Array.from({ length: 600 }, (_, status) => String(status));
function statusText(status: number): string {
  return STATUS_TEXT[status] ?? String(status);
}

/** A route's shape as a label, and where it belongs; label sets by method and status made once. */
class RouteLabels {
  readonly route: string;
  /** For intake_auth_failures_total: the webhook addresses or /api/v1; undefined elsewhere. */
  readonly area: 'intake' | 'api' | undefined;
  readonly withStatus = new Memo2((method: string, status: number) => ({ method, route: this.route, status: statusText(status) }));
  private readonly outcomes = new Memo2<string, number, Map<string, WebhookLabels>>(() => new Map());

  constructor(url: string | undefined) {
    this.route = routeShape(url);
    this.area = url === undefined ? undefined : /^\/api\/webhooks?\//.test(url) ? 'intake' : url.startsWith('/api/v1/') ? 'api' : undefined;
  }

  withOutcome(method: string, status: number, outcome: string): WebhookLabels {
    const byOutcome = this.outcomes.get(method, status);
    let labels = byOutcome.get(outcome);
    if (labels === undefined) {
      labels = { method, route: this.route, status: statusText(status), outcome };
      byOutcome.set(outcome, labels);
    }
    return labels;
  }
}

type WebhookLabels = { method: string; route: string; status: string; outcome: string };

/** Values made once per pair of keys and found again without allocating. */
class Memo2<A, B, V> {
  private readonly byFirst = new Map<A, Map<B, V>>();

  constructor(private readonly make: (a: A, b: B) => V) {}

  get(a: A, b: B): V {
    let bySecond = this.byFirst.get(a);
    if (bySecond === undefined) {
      bySecond = new Map();
      this.byFirst.set(a, bySecond);
    }
    let value = bySecond.get(b);
    if (value === undefined) {
      value = this.make(a, b);
      bySecond.set(b, value);
    }
    return value;
  }
}

/**
 * The label of a registered route: its shape as registered. The panel's files (one route
 * each, named by their content's hash) are one shape, so a deploy adds no series; a
 * request no route matched is `(unmatched)`, never its path.
 */
function routeShape(url: string | undefined): string {
  if (url === undefined) return '(unmatched)';
  if (url === '/admin' || url.startsWith('/admin/')) return '/admin/*';
  if (url.startsWith('/api/docs/')) return '/api/docs/*';
  return url;
}

/**
 * The least time between the end of one scrape's text and the start of the next: making it
 * takes about 1.4 ms of the event loop (prom-client's formatting, the event-loop delay
 * histogram's statistics, the delivery backlog's read), 25 times a /readyz, and /metrics
 * asks for no credentials unless INTAKE_METRICS_TOKEN is set. Unpaced, wrk on 8 connections
 * scraped 560-710 times a second and the service took 1.25 cores, intake's event loop
 * with them; paced, a flood gets at most 20 texts a second, and the same one took 0.19.
 */
const SCRAPE_REST_MS = 50;

/**
 * Scrapes made one at a time, SCRAPE_REST_MS apart. A call waits for the next text to be
 * made, never takes one already under way (begun before the call, it could miss what the
 * caller did just before asking), and every call waiting meanwhile gets the same text: a
 * flood waits, the event loop does not pay for it. A lone scraper, as Prometheus is, waits
 * for nothing.
 */
class PacedScrapes {
  /** The text not yet begun, that calls made now will get. */
  private waiting: Promise<string> | undefined;
  /** The text being made, settled once it is; then when the next may begin. */
  private underWay: Promise<void> = Promise.resolve();
  private restUntil = 0;

  constructor(private readonly make: () => Promise<string>) {}

  next(): Promise<string> {
    this.waiting ??= this.makeNext();
    return this.waiting;
  }

  private async makeNext(): Promise<string> {
    await this.underWay;
    const rest = this.restUntil - performance.now();
    if (rest > 0) await sleep(rest);
    // Calls from now on wait for the text after this one.
    this.waiting = undefined;
    const text = this.make();
    this.underWay = text.then(
      () => this.rest(),
      () => this.rest(),
    );
    return text;
  }

  private rest(): void {
    this.restUntil = performance.now() + SCRAPE_REST_MS;
  }
}

/** One read shared by the metrics a scrape collects at once, bounded in time; undefined when it failed or took too long. */
class SharedRead<T> {
  private pending: Promise<T | undefined> | undefined;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly timeoutMs: number,
  ) {}

  get(): Promise<T | undefined> {
    this.pending ??= this.readOnce().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  private async readOnce(): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.timeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([this.read().catch(() => undefined), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

let sharedProcessRegistry: Registry | undefined;

/**
 * The process's own metrics (CPU, memory, heap, GC, event-loop lag, handles), in a registry
 * of their own made once per process. They describe the process, not an app; and
 * collectDefaultMetrics starts an event-loop delay monitor and a GC observer that nothing
 * stops, so one set per app (tests build many) would pile them up. Never prom-client's
 * global registry: another library's metrics could land there.
 */
function processRegistry(): Registry {
  if (sharedProcessRegistry === undefined) {
    sharedProcessRegistry = new Registry();
    collectDefaultMetrics({ register: sharedProcessRegistry });
  }
  return sharedProcessRegistry;
}
