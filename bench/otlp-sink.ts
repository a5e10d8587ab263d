import { createServer } from 'node:http';

/*
 * The collector a traced build exports to: node:http on loopback, in the bench's own
 * process (idle while wrk loads), that reads each OTLP/HTTP export, counts it, its bytes
 * and its spans, and answers 200 `{}` as a collector does. It decodes nothing beyond
 * counting `"spanId":` keys: a real collector runs elsewhere, so its CPU should not be
 * taken from the service's two cores more than the counting costs.
 */

/** What the sink received so far. */
export interface SinkCounts {
  exports: number;
  bytes: number;
  spans: number;
}

export interface OtlpSink {
  /** OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  counts: SinkCounts;
  close(): Promise<void>;
}

const SPAN_KEY = Buffer.from('"spanId":');

function occurrences(haystack: Buffer, needle: Buffer): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) count++;
  return count;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  const counts: SinkCounts = { exports: 0, bytes: 0, spans: 0 };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      counts.exports++;
      counts.bytes += body.length;
      // A span's spanId, and a link's, and a parent's (`parentSpanId` has a capital S): links are rare here.
      counts.spans += occurrences(body, SPAN_KEY);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
