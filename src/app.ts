import fastifyCookie from '@fastify/cookie';
import Fastify, {
  LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { Logger } from 'pino';
import { Accounts } from './admin/accounts.js';
import { createMailer } from './admin/mailer.js';
import { Sessions } from './admin/sessions.js';
import { SignIn } from './admin/sign-in.js';
import { SignInGuard } from './admin/sign-in-guard.js';
import { apiV1Routes } from './api/index.js';
import { registerOpenApi } from './api/openapi.js';
import type { Config } from './config.js';
import { DeliveryMarks, ORIGIN_KEY_PURPOSE } from './domain/delivery-loop.js';
import { newTimeOrderedId } from './domain/ids.js';
import type { SecretBox } from './domain/secret-box.js';
import { CompanyHashers } from './domain/value-hash.js';
import { AppError, ERRORS, errorBody, type ErrorCode } from './errors.js';
import { addSecurityHeaders, clientErrorHandler, hardenedServerFactory, securityHeaders } from './http-hardening.js';
import { AddressGuard } from './destinations/address-guard.js';
import { DeliveryDispatcher, type DispatcherOptions } from './destinations/dispatcher.js';
import { DestinationSender } from './destinations/sender.js';
import { AdmissionGate, OVERLOADED } from './intake/admission.js';
import { shedBeforeRouting } from './intake/shed-before-routing.js';
import { AuthFailureLimiter } from './intake/auth-failures.js';
import { Authenticator } from './intake/authenticate.js';
import { FeedBell } from './intake/feed-bell.js';
import { GroupCommitWriter, type GroupCommitOptions } from './intake/group-commit.js';
import { KeyCache } from './intake/key-cache.js';
import { LastUsedTracker } from './intake/last-used.js';
import { RetentionJob } from './ops/retention.js';
import { RateLimiter } from './intake/rate-limit.js';
import { intakeRoutes } from './intake/routes.js';
import { healthRoutes } from './ops/health.js';
import { Metrics } from './telemetry/metrics.js';
import { buildMetricsServer, metricsRoute, observeRequests } from './ops/metrics-http.js';
import { watchParts } from './ops/watched-parts.js';
import { defaultReadLimits, ReadLimits, type ReadLimitOptions } from './intake/read-limits.js';
import { panelRoutes } from './admin/panel.js';
import { Erasures, ErasureRunner, type ErasureRunnerOptions } from './services/erasures.js';
import { Redeliveries, type RedeliveryOptions } from './services/redeliveries.js';
import { SourceVerifier } from './sources/verifier.js';
import type { Store } from './store/store.js';
import { createLogger } from './logger.js';
import { traceRequests } from './ops/trace-requests.js';
import type { Tracing } from './telemetry/tracing.js';
import type { AppInstance, RegisteredRoute } from './app-instance.js';

export type { AppInstance } from './app-instance.js';

export interface AppDeps {
  config: Config;
  store: Store;
  /** Seals the secrets the service reads back (src/secrets.ts opens the configured one). */
  secrets: SecretBox;
  /** Defaults to a pino logger at config.logLevel on stdout. */
  logger?: Logger;
  /** Bounds on reading webhooks (see src/intake/read-limits.ts); tests shorten them. */
  readLimits?: Partial<ReadLimitOptions>;
  /** The delivery workers' settings; tests give a clock, or `start: false` to drive them with runOnce. */
  delivery?: Partial<DispatcherOptions> & { start?: boolean };
  /** Replays' and sends' bounds (src/services/redeliveries.ts); tests give a clock or a smaller budget. */
  redeliveries?: Partial<RedeliveryOptions>;
  /** The erasures' runner (src/services/erasures.ts); tests give a clock and smaller pages, or `start: false` to drive it with runOnce. */
  erasures?: ErasureRunnerOptions & { start?: boolean };
  /** Spans of requests and delivery attempts (src/telemetry/tracing.ts); absent, tracing is off and costs nothing. */
  tracing?: Tracing;
  /** How often the feed's waiting reads ask the store without a ring from this node's commits (FEED_POLL_MS); tests lengthen it. */
  feedPollMs?: number;
}

/**
 * How intake's writes are grouped, by database. SQLite's commit thread writes one group after
 * another on its one connection: with four groups handed to it at once and what has queued
 * spread over them (32 webhooks a group at least), the event loop answers and refills the
 * connections a group at a time, instead of every connection waiting in two large groups
 * while the event loop idles, then all of them at once while the thread idles (+20 % at 64
 * connections: docs/performance-history.md, "Intake against the durable floor"). A deep queue still
 * goes in groups of up to 500. On PostgreSQL each group in flight is a transaction on a
 * connection of its own: two, as large as what has queued.
 */
const GROUP_SHAPES: Record<Store['dialect'], Pick<GroupCommitOptions, 'maxInFlight' | 'minSpread'>> = {
  sqlite: { maxInFlight: 4, minSpread: 32 },
  postgres: { maxInFlight: 2 },
};

/** Builds the whole service without listening: main.ts listens, tests inject. */
export async function buildApp(deps: AppDeps): Promise<AppInstance> {
  const { config, store } = deps;
  const logger = deps.logger ?? createLogger(config.logLevel);
  // One registry per app: a test process builds many apps.
  const metrics = new Metrics();
  // Made before the server, which refuses the hot path's overload before routing. It reads
  // the writer made below; nothing reaches it before buildApp has returned and main listens.
  const admission = new AdmissionGate(config.maxEventLoopLagMs, {
    maxWaitMs: config.maxQueueWaitMs,
    waitMs: (now) => writer.oldestWaitMs(now),
  });
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // Every request to an integration lands in the request log table; stdout gets errors.
    logController: new LogController({ disableRequestLogging: true }),
    // The request log's id (req_…): the same in an error's request_id, the panel, the log
    // lines and the Requests search. Time-ordered, so the log's rows land in order.
    genReqId: () => newTimeOrderedId('req', Date.now()),
    // Header size, timeouts, URL length and the connection cap: see http-hardening.ts.
    serverFactory: hardenedServerFactory(config, shedBeforeRouting(admission, metrics)),
    clientErrorHandler,
    // A URL the router cannot read (bad escape, an overlong segment) is answered like any
    // error, though no hook runs for it.
    frameworkErrors: (error, request, reply) => {
      addSecurityHeaders(request, reply);
      return renderError(toAppError(error, request), request, reply);
    },
    trustProxy: config.trustProxy,
    // Every route is registered with and without a trailing slash being the same address.
    routerOptions: { ignoreTrailingSlash: true },
  }).withTypeProvider<TypeBoxTypeProvider>();

  const guard = new SignInGuard(config.passwordHashCost);
  const sessions = new Sessions(store);
  const mailer = createMailer(config.smtpUrl, config.smtpFrom, logger);
  const signIn = new SignIn(store, sessions, guard, deps.secrets);
  const accountDeps = {
    guard,
    sessions,
    mailer,
    signIn,
    accounts: new Accounts({ store, secrets: deps.secrets, guard, mailer, baseUrl: config.baseUrl, logger }),
  };
  const addressGuard = new AddressGuard(config.destinationAllow);
  // The marks every delivery carries, by which intake knows its own when they come back.
  const deliveryMarks = new DeliveryMarks(deps.secrets.derivedKeys(ORIGIN_KEY_PURPOSE));
  const keyCache = new KeyCache(store);
  await keyCache.start();
  // Rung by the writer's commits, heard by the feed's waiting reads (src/api/webhook-feed.ts).
  const feedBell = new FeedBell(deps.feedPollMs);
  const writer = new GroupCommitWriter(
    store,
    {
      maxQueued: config.writeQueueMax,
      maxQueuedBytes: config.writeQueueMaxBytes,
      ...GROUP_SHAPES[store.dialect],
      // The outbox rows are in the same commit: the dispatcher can claim them at once, and
      // send them from memory without reading the bodies back. Webhooks with no delivery
      // due are not handed over: each would be kept in memory, and each group would start
      // a delivery round that finds nothing to send.
      onDeliveriesDue: (webhooks) => dispatcher.committed(webhooks),
      onWritten: (group) => metrics.groupWritten(group),
      feedBell,
    },
    logger,
  );
  const lastUsed = new LastUsedTracker(store, logger);
  lastUsed.start();
  const retention = new RetentionJob(store, config.retentionIntervalMs, logger);
  retention.start();
  // Each company's keyed hashes: what hashing redactions store, and what erasures search for too.
  const hashers = new CompanyHashers(deps.secrets);
  const erasureRunner = new ErasureRunner(store, deps.secrets, hashers, logger, deps.erasures);
  const dispatcher = new DeliveryDispatcher(store, new DestinationSender({ guard: addressGuard }), deps.secrets, logger, {
    concurrency: config.deliveryConcurrency,
    leaseMarginMs: config.deliveryLeaseMarginMs,
    pollMs: 100,
    disableAfterMs: config.destinationDisableAfterMs,
    // Half of either bound: deliveries wait before intake has to refuse anything.
    underPressure: () => admission.overloaded(performance.now(), 0.5),
    onFirstAttempt: (ms) => metrics.firstAttempt(ms),
    marks: deliveryMarks,
    tracing: deps.tracing,
    ...deps.delivery,
  });

  app.decorateRequest('errorCode', undefined);
  // First of the hooks, so that a request's span covers the others.
  if (deps.tracing) traceRequests(app, deps.tracing);
  // One set of bounds per node, shared by the management API and the integration key's reads.
  app.decorate('readLimits', new ReadLimits({ ...defaultReadLimits(config.databasePoolSize), ...deps.readLimits }));
  app.addHook('onSend', securityHeaders);
  observeRequests(app, metrics);
  app.setErrorHandler((error, request, reply) => renderError(toAppError(error as Error, request), request, reply));
  // U+0000 reaches no route: PostgreSQL's text cannot hold it, so it would be a database
  // error (a 500 or a 503) where the client deserves a 400.
  // A callback hook, not an async one: it runs on every request, intake's included.
  app.addHook('onRequest', (request, _reply, done) => {
    done(NUL_IN_URL.test(request.url) ? new AppError('invalid_request', 'The URL must not contain %00 (NUL).') : undefined);
  });
  const knownRoutes = trackRoutes(app);
  app.decorate('registeredRoutes', { getter: () => knownRoutes.list });
  app.setNotFoundHandler((request, reply) => {
    const allowed = knownRoutes.methodsFor(request.url);
    const error =
      allowed.length > 0
        ? new AppError('method_not_allowed', `${request.method} is not allowed here; use ${allowed.join(', ')}.`, {
            allow: allowed,
          })
        : new AppError('not_found', `No route for ${request.method} ${request.url.split('?', 1)[0]!}.`);
    return renderError(error, request, reply);
  });

  await app.register(fastifyCookie);
  await registerOpenApi(app, config.baseUrl);

  const counters = { unknownIntegrationRequests: 0 };
  const authFailures = new AuthFailureLimiter(config.authFailureLimit, config.authFailureWindowMs);
  app.decorate('dispatcher', dispatcher);
  app.decorate('erasureRunner', erasureRunner);
  app.decorate('writer', writer);
  app.decorate('feedBell', feedBell);
  await app.register(healthRoutes, { store, writer });
  // On a port of its own when one is set, and then not on this one.
  const metricsServer = config.metricsPort === undefined ? undefined : buildMetricsServer(metrics, config, logger as FastifyBaseLogger);
  if (metricsServer === undefined) metricsRoute(app, metrics, config.metricsToken);
  app.decorate('metricsServer', metricsServer);
  await app.register(panelRoutes);
  const authenticator = new Authenticator(
    keyCache,
    config.environment,
    authFailures,
  );
  await app.register(
    async (scope) =>
      apiV1Routes(scope as AppInstance, {
        config,
        store,
        authenticator,
        keyCache,
        lastUsed,
        secrets: deps.secrets,
        addressGuard,
        redeliveries: new Redeliveries(store, {
          perHour: config.redeliveryBudgetPerHour,
          // What an operation reads counts among the node's heavy reads, as a search does.
          boundedRead: (companyId, read) => app.readLimits.read(companyId, read),
          ...deps.redeliveries,
        }),
        erasures: new Erasures(store, deps.secrets, erasureRunner, deps.erasures?.now),
        hashers,
        ...accountDeps,
      }),
    { prefix: '/api/v1' },
  );
  await app.register(async (scope) => {
    // The webhook addresses only, before authentication and before the body is read, so a
    // refusal costs next to nothing; health, metrics, /api/v1 and the panel stay answered.
    // (POSTs that come through the server were asked already, before routing: this asks
    // again for the reads and for requests injected in tests.) A callback hook, not an
    // async one, like the one above. Nothing was authenticated, so no request-log row: the
    // refusal is counted (admission.shedBy, in /metrics).
    scope.addHook('onRequest', (_request, _reply, done) => {
      done(admission.admit() ? undefined : OVERLOADED);
    });
    await intakeRoutes(scope as AppInstance, {
      store,
      authenticator,
      writer,
      rateLimiter: new RateLimiter(),
      lastUsed,
      counters,
      authFailures,
      sources: new SourceVerifier(deps.secrets, config.baseUrl, (provider, reason) => metrics.sourceRefused(provider, reason)),
      deliveryMarks,
      metrics,
      hashers,
    });
  });
  watchParts(metrics, {
    store,
    writer,
    admission,
    authFailures,
    keyCache,
    counters,
    signIn,
    readLimits: app.readLimits,
    retention,
    erasures: erasureRunner,
    dispatcher,
  });

  // Loading the routes and compiling their schemas is one long turn of the loop that is not
  // overload: the gate watches the loop once the app is ready.
  app.addHook('onReady', async () => {
    admission.start();
    if (deps.delivery?.start !== false) dispatcher.start();
    if (deps.erasures?.start !== false) erasureRunner.start();
  });
  app.addHook('onClose', async () => {
    admission.stop();
    keyCache.stop();
    await retention.stop();
    await erasureRunner.stop();
    await writer.drain();
    await dispatcher.stop();
    await lastUsed.stop();
    await metricsServer?.close();
  });
  return app;
}

const NUL_IN_URL = /%00|\u0000/;

/** `whk_` and what follows it, as sent or percent-encoded, in any case: where a key starts. */
const KEY_IN_TEXT = /(?:w|%77)(?:h|%68)(?:k|%6b)(?:_|%5f)(?:[a-z0-9_-]|%[0-9a-f]{2})*/gi;
/** Shorter X-API-Key values are not searched for: they could not be keys, and would blank common words. */
const MIN_SENT_KEY_LENGTH = 8;

/**
 * Text an error may repeat (a path, an id, a field name) without any key in it: whatever
 * looks like one, and the X-API-Key this request sent wherever it shows, with or without
 * its prefix. Every error passes here, so no route or error can echo a key.
 */
function withoutKeys(text: string, request: FastifyRequest): string {
  let safe = text.replace(KEY_IN_TEXT, 'whk_…');
  for (const sent of [request.headers['x-api-key'] ?? []].flat()) {
    const withoutPrefix = /^whk_[a-z]+_(.+)$/.exec(sent)?.[1];
    for (const part of [sent, withoutPrefix]) {
      if (part !== undefined && part.length >= MIN_SENT_KEY_LENGTH) safe = safe.replaceAll(part, '…');
    }
  }
  return safe;
}

function renderError(error: AppError, request: FastifyRequest, reply: FastifyReply) {
  request.errorCode = error.code;
  if (error.details.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.details.retryAfterSeconds));
  if (error.details.allow) reply.header('allow', error.details.allow.join(', '));
  const { field } = error.details;
  const shown = new AppError(error.code, withoutKeys(error.message, request), {
    ...error.details,
    ...(field !== undefined && { field: withoutKeys(field, request) }),
  });
  return reply.code(error.status).type('application/json; charset=utf-8').send(errorBody(shown, request.id));
}

/** Fastify's own errors, by code, in the contract's terms. */
const FASTIFY_ERRORS: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_request',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_BAD_URL: 'invalid_request',
  FST_ERR_MAX_PARAM_LENGTH: 'invalid_request',
  FST_ERR_ASYNC_CONSTRAINT: 'invalid_request',
};

/** Fastify's messages for these repeat the whole URL as sent; ours say what is wrong with it. */
const URL_ERROR_MESSAGES: Record<string, string> = {
  FST_ERR_BAD_URL: 'The URL is not valid: it holds a malformed percent-escape.',
  FST_ERR_MAX_PARAM_LENGTH: 'A segment of the URL is longer than the limit.',
};

/**
 * Every error becomes an AppError: ours pass through, Fastify's and validation errors are
 * named, and anything else is logged with its stack and shown as a bare 500.
 */
function toAppError(error: FastifyError | AppError | Error, request: FastifyRequest): AppError {
  if (error instanceof AppError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    return new AppError('invalid_request', `Invalid ${fastifyError.validationContext ?? 'request'}: ${fastifyError.message}`);
  }
  const named = fastifyError.code ? FASTIFY_ERRORS[fastifyError.code] : undefined;
  if (named) return new AppError(named, URL_ERROR_MESSAGES[fastifyError.code] ?? (fastifyError.message || ERRORS[named].message));
  const status = fastifyError.statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    return new AppError('invalid_request', fastifyError.message || ERRORS.invalid_request.message);
  }
  request.log.error({ err: error }, 'unhandled error');
  return new AppError('internal_error');
}

/** Remembers every route's path and methods, to tell a wrong method (405) from no route (404). */
function trackRoutes(app: AppInstance) {
  const router = FindMyWay({ ignoreTrailingSlash: true });
  const methodsByPath = new Map<string, Set<string>>();
  const list: RegisteredRoute[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      list.push({ method, url: route.url, hidden: route.schema?.hide === true });
      const methods = methodsByPath.get(route.url) ?? new Set<string>();
      if (methods.size === 0) {
        methodsByPath.set(route.url, methods);
        router.on('GET', route.url, () => undefined, { path: route.url });
      }
      methods.add(method);
    }
  });
  return {
    list: list as readonly RegisteredRoute[],
    methodsFor(url: string): string[] {
      const found = router.find('GET' as HTTPMethod, url.split('?', 1)[0]!);
      const path = (found?.store as { path?: string } | undefined)?.path;
      return path ? [...(methodsByPath.get(path) ?? [])].sort() : [];
    },
  };
}
