import { createServer, type ServerResponse } from 'node:http';
import { monotonicMs } from './clock.js';

/*
 * The destination the benchmark delivers to: a bare node:http server that reads each
 * request's body and answers 204 at once, noting when the request arrived and its
 * `webhook-id`. Its own process, like the baseline, so neither the load generator's event
 * loop nor the service's delays it.
 *
 * Arrival times are on the machine's monotonic clock (clock.ts), which the generator reads
 * too, so they can be set against the times its 202s came back. `GET /count` and
 * `GET /arrivals?from=N` hand them over.
 */
const port = Number(process.env.PORT ?? 0);
const ids: string[] = [];
const arrivedAt: number[] = [];

const server = createServer((request, response) => {
  if (request.method === 'POST') {
    arrivedAt.push(monotonicMs());
    ids.push(String(request.headers['webhook-id'] ?? ''));
    request.resume();
    request.on('end', () => response.writeHead(204).end());
    return;
  }
  const url = new URL(request.url ?? '/', 'http://receiver');
  if (url.pathname === '/count') return json(response, { count: ids.length });
  if (url.pathname === '/arrivals') {
    const from = Math.max(0, Number(url.searchParams.get('from') ?? 0));
    return json(response, { from, ids: ids.slice(from), arrivedAt: arrivedAt.slice(from) });
  }
  response.writeHead(404).end();
});

function json(response: ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
