import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';

/**
 * OpenTelemetry traces, off unless an OTLP endpoint is configured (docs/operations.md,
 * "Traces"). This module is what the rest of the service sees of them: the settings and
 * the interfaces its code calls. It loads nothing of OpenTelemetry:
 * the SDK is imported (otel-tracing.ts) only when tracing is on, so a node without it pays
 * for an optional call that finds nothing (`request.trace?.…`, `tracing?.…`) and no more
 * (trace-requests.ts adds the hooks on the app only when it is on).
 *
 * What a span records is chosen in otel-tracing.ts alone, attribute by attribute, from ids,
 * codes and numbers: never a header's value, a body, a key, a URL's path or query.
 */

/** The standard samplers (OTEL_TRACES_SAMPLER); the ratio ones take OTEL_TRACES_SAMPLER_ARG. */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** What tracing needs of the configuration (src/config.ts reads the OTEL_ variables). */
export interface TracingSettings {
  /** Where spans are POSTed, as OTLP/HTTP JSON. */
  tracesUrl: string;
  /** Sent with every export (a collector's credentials): never logged. */
  headers: Record<string, string>;
  sampler: TraceSampler;
  /** The share of traces kept by the ratio samplers, 0 to 1. */
  samplerRatio: number;
  serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES, and the environment as `deployment.environment.name`. */
  resourceAttributes: Record<string, string>;
}

/** The span of one request to a webhook address or /api/v1, as intake's code adds to it. */
export interface RequestTrace {
  /** The trace's id when it is sampled (exported): what the request log keeps; null otherwise. */
  readonly sampledTraceId: string | null;
  /** The integration the address named, once authentication found it (refused or not). */
  integration(companyId: string, integrationId: string): void;
  /** The body's size, once it was read. */
  bodyBytes(bytes: number): void;
  /** The group commit the webhook went in: its webhooks, and how long this one waited to be sent to the store. */
  joined(webhooks: number, waitMs: number): void;
  /**
   * The webhook this request stored, committed with deliveries due: their first attempts,
   * made from memory on this node, become this span's children.
   */
  deliveriesDue(webhook: object): void;
  /** The webhook's uuid once committed (the original's, for a replay). */
  stored(uuid: string): void;
  /** Ends the span with the answer; a second call does nothing. */
  end(status: number, errorCode: string | undefined): void;
}

/** What a delivery attempt's span records of the delivery (a ClaimedDelivery has these). */
export interface AttemptSubject {
  id: string;
  companyId: string;
  integrationId: string;
  destinationId: string;
  webhookUuid: string;
  series: number;
  attempt: number;
  destination: { url: string };
}

/** How an attempt ended (an AttemptOutcome has these). */
export interface AttemptVerdict {
  ok: boolean;
  status: number | null;
  /** The attempt's error class (`timeout`, `http_status`…), null when it succeeded. */
  error: string | null;
  durationMs: number;
}

/** The span of one delivery attempt. */
export interface AttemptTrace {
  /** `traceparent` (and `tracestate`) naming this attempt's span, for the request it makes (W3C Trace Context). */
  propagation(): Record<string, string>;
  end(verdict: AttemptVerdict): void;
}

/** Tracing, when it is on. */
export interface Tracing {
  /**
   * The span of a request (a root of intake's own: a sender's `traceparent` is a link,
   * never the parent, so no sender decides what is sampled nor picks a trace id).
   */
  request(method: string, route: string, headers: IncomingHttpHeaders): RequestTrace;
  /** A delivery attempt's span; the child of its webhook's request span when `webhook` is the one that request carried. */
  attempt(delivery: AttemptSubject, webhook: object | undefined): AttemptTrace;
  /** Exports what is still queued (waiting a bounded time for the collector) and stops. */
  shutdown(): Promise<void>;
}

/** Tracing as the settings ask: undefined, with nothing of OpenTelemetry loaded, when they are absent. */
export async function openTracing(settings: TracingSettings | undefined, logger: Logger): Promise<Tracing | undefined> {
  if (settings === undefined) return undefined;
  const { OtelTracing } = await import('./otel-tracing.js');
  const tracing = new OtelTracing(settings, logger);
  // The origin alone: a URL's user and password, or a token in its query, stay out of the log.
  logger.info({ collector: new URL(settings.tracesUrl).origin, sampler: settings.sampler, ratio: settings.samplerRatio }, 'tracing on: spans exported over OTLP/HTTP');
  return tracing;
}
