import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_URL_SCHEME,
} from '@opentelemetry/semantic-conventions';
import type { Logger } from 'pino';
import type { AttemptSubject, AttemptTrace, AttemptVerdict, RequestTrace, TraceSampler, Tracing, TracingSettings } from './tracing.js';

/**
 * Tracing with the OpenTelemetry SDK: imported by tracing.ts only when it is on.
 *
 * Everything a span records is written here, and only this: route shapes, methods,
 * statuses, error codes and classes, ids (company, integration, webhook, destination,
 * delivery), counts, sizes and times, and a destination's host and port. Never a header's
 * value, a body, a key, a URL's path or query (a destination's path may hold its token,
 * Slack's do). Values are cut to ATTRIBUTE_VALUE_LIMIT characters besides.
 *
 * No global provider and no context manager: spans are made from this module's own
 * provider, parents are passed explicitly, so nothing else in the process (prom-client
 * uses @opentelemetry/api) is changed, and no async hook runs on intake's path.
 */

/** Attribute names of our own, where the semantic conventions have none (or only incubating ones). */
const ATTR = {
  companyId: 'intake.company.id',
  integrationId: 'intake.integration.id',
  webhookUuid: 'intake.webhook.uuid',
  groupWebhooks: 'intake.group_commit.webhooks',
  groupWaitMs: 'intake.group_commit.wait_ms',
  destinationId: 'intake.destination.id',
  deliveryId: 'intake.delivery.id',
  deliverySeries: 'intake.delivery.series',
  deliveryAttempt: 'intake.delivery.attempt',
  deliveryDurationMs: 'intake.delivery.duration_ms',
  // Incubating in the semantic conventions: written out, as their package asks.
  requestBodySize: 'http.request.body.size',
  serviceInstanceId: 'service.instance.id',
} as const;

/** The longest attribute value kept, in characters: every value here is an id, a code or a host. */
const ATTRIBUTE_VALUE_LIMIT = 256;
/** How long shutdown waits for the last export: a collector that does not answer must not hold a deploy. */
const SHUTDOWN_WAIT_MS = 5_000;
/** One warning this often at most while exports fail, with the count of spans lost meanwhile. */
const EXPORT_FAILURE_REPORT_MS = 60_000;
const EXPORT_TIMEOUT_MS = 10_000;

export class OtelTracing implements Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;
  private readonly propagator = new W3CTraceContextPropagator();
  /**
   * The span context of the request that stored each webhook, by the webhook's object as
   * the group commit hands it to the dispatcher: its first attempts, made from memory on
   * this node, continue that trace. Weak: it goes when the dispatcher lets the body go.
   */
  private readonly parents = new WeakMap<object, SpanContext>();

  constructor(settings: TracingSettings, logger: Logger) {
    const exporter = new ReportingExporter(
      new OTLPTraceExporter({ url: settings.tracesUrl, headers: settings.headers, timeoutMillis: EXPORT_TIMEOUT_MS }),
      logger,
    );
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        ...settings.resourceAttributes,
        [ATTR_SERVICE_NAME]: settings.serviceName,
        // Nodes of one deployment are told apart.
        [ATTR.serviceInstanceId]: randomUUID(),
      }),
      sampler: samplerOf(settings.sampler, settings.samplerRatio),
      // Given here, so the SDK reads no OTEL_ variable of its own for them.
      spanLimits: { attributeValueLengthLimit: ATTRIBUTE_VALUE_LIMIT, attributeCountLimit: 32, linkCountLimit: 1, eventCountLimit: 0 },
      spanProcessors: [
        new BatchSpanProcessor(exporter, {
          maxQueueSize: 2048,
          maxExportBatchSize: 512,
          scheduledDelayMillis: 5_000,
          exportTimeoutMillis: EXPORT_TIMEOUT_MS,
        }),
      ],
    });
    this.tracer = this.provider.getTracer('intake');
  }

  request(method: string, route: string, headers: IncomingHttpHeaders): RequestTrace {
    const span = this.tracer.startSpan(`${method} ${route}`, { kind: SpanKind.SERVER, root: true, links: this.senderLinks(headers) }, ROOT_CONTEXT);
    if (span.isRecording()) span.setAttributes({ [ATTR_HTTP_REQUEST_METHOD]: method, [ATTR_HTTP_ROUTE]: route });
    return new OtelRequestTrace(span, this.parents);
  }

  attempt(delivery: AttemptSubject, webhook: object | undefined): AttemptTrace {
    const parent = webhook === undefined ? undefined : this.parents.get(webhook);
    const context = parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent);
    const span = this.tracer.startSpan('POST', { kind: SpanKind.CLIENT }, context);
    if (span.isRecording()) span.setAttributes(attemptAttributes(delivery));
    return new OtelAttemptTrace(span, this.propagator);
  }

  async shutdown(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
      timer.unref();
    });
    await Promise.race([this.provider.shutdown(), waited]);
    clearTimeout(timer);
  }

  /**
   * A sender's `traceparent`, when it is valid, as a link: the sender may keep its own
   * trace of the webhook, and an operator who shares traces with it can follow the link.
   * Never the parent: a parent's sampled flag would let whoever sends requests (anonymous
   * ones included) have all of them traced whatever the ratio, and choose the trace ids
   * intake's spans are filed under. Its `tracestate` is not kept, so nothing of the
   * sender's goes on to the destinations.
   */
  private senderLinks(headers: IncomingHttpHeaders): Link[] | undefined {
    if (headers.traceparent === undefined) return undefined;
    const sent = trace.getSpanContext(this.propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter));
    if (sent === undefined) return undefined;
    return [{ context: { traceId: sent.traceId, spanId: sent.spanId, traceFlags: sent.traceFlags, isRemote: true } }];
  }
}

class OtelRequestTrace implements RequestTrace {
  readonly sampledTraceId: string | null;
  private readonly recording: boolean;
  private ended = false;

  constructor(
    private readonly span: Span,
    private readonly parents: WeakMap<object, SpanContext>,
  ) {
    const context = span.spanContext();
    this.sampledTraceId = (context.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED ? context.traceId : null;
    this.recording = span.isRecording();
  }

  integration(companyId: string, integrationId: string): void {
    if (this.recording) this.span.setAttributes({ [ATTR.companyId]: companyId, [ATTR.integrationId]: integrationId });
  }

  bodyBytes(bytes: number): void {
    if (this.recording) this.span.setAttribute(ATTR.requestBodySize, bytes);
  }

  joined(webhooks: number, waitMs: number): void {
    if (this.recording) this.span.setAttributes({ [ATTR.groupWebhooks]: webhooks, [ATTR.groupWaitMs]: roundMs(waitMs) });
  }

  deliveriesDue(webhook: object): void {
    // Unsampled too: its attempts are then unsampled as well, one trace whatever the sampler.
    // Only these: an entry for every webhook cost 0.6 % of the event loop at 10 % sampling.
    this.parents.set(webhook, this.span.spanContext());
  }

  stored(uuid: string): void {
    if (this.recording) this.span.setAttribute(ATTR.webhookUuid, uuid);
  }

  end(status: number, errorCode: string | undefined): void {
    if (this.ended) return;
    this.ended = true;
    if (this.recording) {
      this.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      // The code from the closed list in src/errors.ts, for refusals too.
      if (errorCode !== undefined) this.span.setAttribute(ATTR_ERROR_TYPE, errorCode);
      // A server span is in error for a 5xx only (semantic conventions): a 4xx is the client's.
      if (status >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}

class OtelAttemptTrace implements AttemptTrace {
  constructor(
    private readonly span: Span,
    private readonly propagator: W3CTraceContextPropagator,
  ) {}

  propagation(): Record<string, string> {
    const carrier: Record<string, string> = {};
    this.propagator.inject(trace.setSpan(ROOT_CONTEXT, this.span), carrier, defaultTextMapSetter);
    return carrier;
  }

  end(verdict: AttemptVerdict): void {
    if (this.span.isRecording()) {
      if (verdict.status !== null) this.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, verdict.status);
      if (verdict.error !== null) this.span.setAttribute(ATTR_ERROR_TYPE, verdict.error);
      this.span.setAttribute(ATTR.deliveryDurationMs, roundMs(verdict.durationMs));
      if (!verdict.ok) this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}

/** A delivery attempt's attributes: the destination's host and port, never its path or query. */
function attemptAttributes(delivery: AttemptSubject): Attributes {
  const attributes: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: 'POST',
    [ATTR.companyId]: delivery.companyId,
    [ATTR.integrationId]: delivery.integrationId,
    [ATTR.webhookUuid]: delivery.webhookUuid,
    [ATTR.destinationId]: delivery.destinationId,
    [ATTR.deliveryId]: delivery.id,
    [ATTR.deliverySeries]: delivery.series,
    [ATTR.deliveryAttempt]: delivery.attempt,
  };
  if (delivery.attempt > 1) attributes[ATTR_HTTP_REQUEST_RESEND_COUNT] = delivery.attempt - 1;
  const url = URL.parse(delivery.destination.url);
  if (url !== null) {
    const scheme = url.protocol.replace(/:$/, '');
    attributes[ATTR_URL_SCHEME] = scheme;
    attributes[ATTR_SERVER_ADDRESS] = url.hostname;
    attributes[ATTR_SERVER_PORT] = url.port === '' ? (scheme === 'https' ? 443 : 80) : Number(url.port);
  }
  return attributes;
}

function samplerOf(name: TraceSampler, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/** Milliseconds to the microsecond, as the request log keeps them. */
function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * The OTLP exporter, with its failures logged: at most one warning a minute, with the spans
 * lost since the last one. Only the error's message: a collector's answer may repeat what
 * it was sent, and the export's headers are credentials.
 */
class ReportingExporter implements SpanExporter {
  private lostSinceReport = 0;
  private lastReportAt = -Infinity;

  constructor(
    private readonly inner: SpanExporter,
    private readonly logger: Logger,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.report(spans.length, result.error);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }

  private report(lost: number, error: Error | undefined): void {
    this.lostSinceReport += lost;
    const now = performance.now();
    if (now - this.lastReportAt < EXPORT_FAILURE_REPORT_MS) return;
    this.lastReportAt = now;
    this.logger.warn({ spansLost: this.lostSinceReport, cause: error?.message.slice(0, 200) }, 'trace export failed');
    this.lostSinceReport = 0;
  }
}
