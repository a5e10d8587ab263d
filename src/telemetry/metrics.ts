import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { ProviderType, SourceRefusalReason } from '../domain/source-types.js';
import type { ErrorCode } from '../errors.js';

/**
 * The service's metric registry (docs/operations.md lists every metric): on the ground
 * floor, so that every layer can write to it without importing the layers above.
 *
 * Labels are bounded by construction: route shapes as registered (`/api/v1/integrations/:integration_id`,
 * never a path as sent), methods, status codes, error codes from the closed list in
 * errors.ts, and short fixed words. Never a company, an integration, a key or a destination:
 * those are in the request log, the usage charts and a destination's stats.
 *
 * Two ways in: what happens on a request or a commit is observed as it happens (histograms,
 * and counters of events with labels, defined here); what the service's parts already count
 * or hold (queue depth, cache hits, delivery attempts) is read from them when /metrics is
 * scraped (src/ops/watched-parts.ts, which knows the parts), so the hot path pays for a
 * number's increment and nothing more.
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

  /** The Content-Type of what text() returns (Prometheus text format 0.0.4). */
  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * Every metric as Prometheus text, made now: the process's, then the service's. The
   * scrape route paces the calls (src/ops/metrics-http.ts).
   */
  text(): Promise<string> {
    return Registry.merge([this.process, this.registry]).metrics();
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

  private routeLabels(route: string | undefined): RouteLabels {
    let labels = this.routes.get(route);
    if (labels === undefined) {
      labels = new RouteLabels(route);
      this.routes.set(route, labels);
    }
    return labels;
  }
}

/** One transaction of the group-commit writer, as /metrics sees it. */
export interface WrittenGroup {
  /** Webhooks in it (0: request-log rows alone). */
  webhooks: number;
  seconds: number;
  committed: boolean;
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
