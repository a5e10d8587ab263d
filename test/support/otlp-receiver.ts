import { createServer, type IncomingHttpHeaders } from 'node:http';
import { gunzipSync } from 'node:zlib';

/**
 * A real OTLP/HTTP collector on loopback (port 0), as far as traces go: it takes what the
 * service's exporter POSTs to /v1/traces (OTLP JSON, ExportTraceServiceRequest), answers as
 * a collector does (200, an empty ExportTraceServiceResponse), keeps every body as it came,
 * and decodes the spans in it. https://opentelemetry.io/docs/specs/otlp/#otlphttp
 */

export type AttributeValue = string | number | boolean | AttributeValue[];

/** One span as the exporter sent it, its attributes decoded from OTLP's AnyValue. */
export interface ExportedSpan {
  traceId: string;
  spanId: string;
  /** Undefined for a root. */
  parentSpanId: string | undefined;
  name: string;
  kind: 'internal' | 'server' | 'client' | 'producer' | 'consumer' | 'unspecified';
  attributes: Record<string, AttributeValue>;
  links: Array<{ traceId: string; spanId: string; attributes: Record<string, AttributeValue> }>;
  /** 0 unset, 1 ok, 2 error (OTLP's Status.code). */
  statusCode: number;
  /** The resource's attributes (service.name…). */
  resource: Record<string, AttributeValue>;
  scope: string;
}

/** One POST the receiver got. */
export interface ExportRequest {
  path: string;
  headers: IncomingHttpHeaders;
  /** The body as sent, decompressed: what a test searches for text that must not be there. */
  text: string;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:PORT`: OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  requests: ExportRequest[];
  spans: ExportedSpan[];
  /** Every export's body, joined. */
  allText(): string;
  /** Waits (bounded) until `predicate` holds of the spans received; returns them. */
  waitFor(predicate: (spans: ExportedSpan[]) => boolean, timeoutMs?: number): Promise<ExportedSpan[]>;
  close(): Promise<void>;
}

const KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const;

interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}

interface OtlpAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: OtlpAnyValue[] };
}

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpKeyValue[];
  links?: Array<{ traceId: string; spanId: string; attributes?: OtlpKeyValue[] }>;
  status?: { code?: number };
}

interface ExportTraceServiceRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: Array<{ scope?: { name?: string }; spans?: OtlpSpan[] }>;
  }>;
}

function decodeValue(value: OtlpAnyValue): AttributeValue {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  // int64 may come as a JSON string (proto3's JSON mapping) or a number.
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(decodeValue);
  throw new Error(`an OTLP value of no known type: ${JSON.stringify(value)}`);
}

function decodeAttributes(attributes: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((attributes ?? []).map(({ key, value }) => [key, decodeValue(value)]));
}

/** The spans of one ExportTraceServiceRequest. */
export function decodeSpans(request: ExportTraceServiceRequest): ExportedSpan[] {
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const resource = decodeAttributes(resourceSpans.resource?.attributes);
    return (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans) =>
      (scopeSpans.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId === undefined || span.parentSpanId === '' ? undefined : span.parentSpanId,
        name: span.name,
        kind: KINDS[span.kind] ?? 'unspecified',
        attributes: decodeAttributes(span.attributes),
        links: (span.links ?? []).map((link) => ({ traceId: link.traceId, spanId: link.spanId, attributes: decodeAttributes(link.attributes) })),
        statusCode: span.status?.code ?? 0,
        resource,
        scope: scopeSpans.scope?.name ?? '',
      })),
    );
  });
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const requests: ExportRequest[] = [];
  const spans: ExportedSpan[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const raw = Buffer.concat(chunks);
      const text = (request.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
      requests.push({ path: request.url ?? '', headers: request.headers, text });
      if (request.method !== 'POST' || request.url !== '/v1/traces' || !String(request.headers['content-type']).startsWith('application/json')) {
        response.writeHead(404, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      spans.push(...decodeSpans(JSON.parse(text) as ExportTraceServiceRequest));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the OTLP receiver has no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    spans,
    allText: () => requests.map((request) => request.text).join('\n'),
    async waitFor(predicate, timeoutMs = 15_000) {
      const deadline = performance.now() + timeoutMs;
      while (!predicate(spans)) {
        if (performance.now() > deadline) throw new Error(`the spans expected did not come within ${timeoutMs} ms; got: ${spans.map((s) => s.name).join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return spans;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
