import type { AppInstance } from '../app-instance.js';
import type { RequestTrace, Tracing } from '../telemetry/tracing.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** This request's span; undefined when tracing is off or the route is not traced. */
    trace: RequestTrace | undefined;
  }
}

/** The routes whose requests are traced: the webhook addresses and the management API. */
const TRACED_PREFIXES = ['/api/webhooks/', '/api/webhook/', '/api/v1/'];

/**
 * A span for every request to a webhook address or /api/v1, from its arrival to its answer.
 * Health checks, /metrics, the panel's and the API reference's files and unknown paths get
 * none: they would be most of the spans and tell nothing. Only called when tracing is on;
 * without it no hook is added.
 */
export function traceRequests(app: AppInstance, tracing: Tracing): void {
  app.decorateRequest('trace', undefined);
  // Callback hooks, not async ones: they run on every request, intake's included.
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    if (route !== undefined && TRACED_PREFIXES.some((prefix) => route.startsWith(prefix))) {
      request.trace = tracing.request(request.method, route, request.headers);
    }
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    request.trace?.end(reply.statusCode, request.errorCode);
    done();
  });
  // The sender went away before an answer: no onResponse comes.
  app.addHook('onRequestAbort', (request, done) => {
    request.trace?.end(CLIENT_CLOSED_REQUEST, 'client_closed_request');
    done();
  });
}

/** nginx's status for a request whose client closed the connection before the answer. */
const CLIENT_CLOSED_REQUEST = 499;
