import { setTimeout as sleep } from 'node:timers/promises';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import type { AppInstance } from '../app-instance.js';
import type { Config } from '../config.js';
import { AppError, errorBody } from '../errors.js';
import { clientErrorHandler, hardenedServerFactory, securityHeaders } from '../http-hardening.js';
import { sameSecret } from '../sources/providers/shared.js';
import type { Metrics } from '../telemetry/metrics.js';

/**
 * How /metrics reaches Prometheus: every answer observed (an onResponse hook on the whole
 * app), the route itself behind its optional bearer token and paced, and the server of its
 * own port when INTAKE_METRICS_PORT is set.
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
  const scrapes = new PacedScrapes(() => metrics.text());
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
      const text = await scrapes.next();
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
