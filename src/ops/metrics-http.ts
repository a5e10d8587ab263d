import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import type { AppInstance } from '../app-instance.js';
import type { Config } from '../config.js';
import { AppError, errorBody } from '../errors.js';
import { clientErrorHandler, hardenedServerFactory, securityHeaders } from '../http-hardening.js';
import { sameSecret } from '../sources/providers/shared.js';
import type { Metrics } from './metrics.js';

/**
 * How /metrics reaches Prometheus: every answer observed (an onResponse hook on the whole
 * app), the route itself behind its optional bearer token, and the server of its own port
 * when INTAKE_METRICS_PORT is set.
 */

/** Observes every answer of the app: its duration by route shape and status, and refused credentials. */
export function observeRequests(app: AppInstance, metrics: Metrics): void {
  // A callback hook, not an async one: it runs on every request, intake's included.
  app.addHook('onResponse', (request, reply, done) => {
    metrics.answered(request.routeOptions.url, request.method, reply.statusCode, reply.elapsedTime / 1000, request.errorCode);
    done();
  });
}

/** GET /metrics on `app`: the Prometheus text, behind `token` (Authorization: Bearer) when one is set. */
export function metricsRoute(app: AppInstance, metrics: Metrics, token: string | undefined): void {
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['Operations'],
        summary: 'Prometheus metrics',
        description:
          'Prometheus text format: the process (CPU, memory, heap, GC, event-loop lag, handles) and the service ' +
          '(docs/operations.md lists every metric). With INTAKE_METRICS_TOKEN set, it asks for `Authorization: Bearer <token>` ' +
          '(401 invalid_metrics_token without it); with INTAKE_METRICS_PORT set, it is served on that port only.',
        security: [],
      },
    },
    async (request, reply) => {
      if (token !== undefined && !bearerMatches(request.headers.authorization, token)) {
        reply.header('www-authenticate', 'Bearer realm="metrics"');
        throw new AppError('invalid_metrics_token');
      }
      const text = await metrics.scrape();
      return reply.type(metrics.contentType).header('cache-control', 'no-store').send(text);
    },
  );
}

/**
 * The server of INTAKE_METRICS_PORT: /metrics and nothing else, with the main server's
 * limits and error shape. Not listening yet: serve.ts listens on it beside the app, and
 * the app's close closes it.
 */
export function buildMetricsServer(metrics: Metrics, config: Config, logger: FastifyBaseLogger): AppInstance {
  const server = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    serverFactory: hardenedServerFactory(config),
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();
  server.addHook('onSend', securityHeaders);
  server.setErrorHandler((error, request, reply) => {
    if (error instanceof AppError) return sendError(error, request, reply);
    request.log.error({ err: error }, 'metrics scrape failed');
    return sendError(new AppError('internal_error'), request, reply);
  });
  server.setNotFoundHandler((request, reply) =>
    sendError(new AppError('not_found', 'This port serves GET /metrics only.'), request, reply),
  );
  metricsRoute(server, metrics, config.metricsToken);
  return server;
}

function sendError(error: AppError, request: FastifyRequest, reply: FastifyReply) {
  return reply.code(error.status).type('application/json; charset=utf-8').send(errorBody(error, request.id));
}

/** Whether the Authorization header carries the token, compared as sameSecret does: neither its length nor its bytes show in the time taken. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const sent = header === undefined ? undefined : /^Bearer +(\S+) *$/i.exec(header)?.[1];
  return sameSecret(sent ?? '', token);
}
