import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyRequest } from 'fastify';
import type { AppInstance } from '../app-instance.js';
import { fieldWithNul } from '../domain/text.js';
import { MAX_NESTING_DEPTH, nestingDepth } from '../domain/webhook-body.js';
import { AppError } from '../errors.js';
import { addressKey } from '../intake/auth-failures.js';
import { accountRoutes } from './account.js';
import { auditRoutes } from './audit.js';
import { authRoutes } from './auth.js';
import { cliLoginRoutes } from './cli-logins.js';
import { companyRoutes } from './company.js';
import { authenticateApi, type ApiDeps } from './context.js';
import { deliveryRoutes } from './deliveries.js';
import { destinationRoutes } from './destinations.js';
import { destinationRulesRoutes } from './destination-rules.js';
import { erasureRoutes } from './erasures.js';
import { integrationRoutes } from './integrations.js';
import { invitationRoutes } from './invitations.js';
import { keyRoutes } from './keys.js';
import { sourceRoutes } from './sources.js';
import { managementKeyRoutes } from './management-keys.js';
import { memberRoutes } from './members.js';
import { redactionPreviewRoutes } from './redaction-preview.js';
import { requestLogRoutes } from './requests.js';
import { usageRoutes } from './usage.js';
import { webhookFeedRoutes } from './webhook-feed.js';
import { webhookStreamRoutes } from './webhook-stream.js';
import { webhookRoutes } from './webhooks.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const REQUESTS_PER_MINUTE = 1200;

/**
 * Who a request counts against: the management key or the person it authenticated as,
 * else its address (an IPv6 one by its /64). Never what the request merely carries: a
 * made-up cookie or key on each request would be a fresh allowance each time.
 */
function callerKey(request: FastifyRequest): string {
  const actor = request.principal?.actor;
  if (actor?.type === 'key' || actor?.type === 'user') return `${actor.type}:${actor.id}`;
  return `ip:${addressKey(request.ip)}`;
}

/** Every route under /api/v1, behind one authentication hook. */
export async function apiV1Routes(app: AppInstance, deps: ApiDeps): Promise<void> {
  // The same limit on every route, per caller (a management key, a person, else an
  // address), with the IETF RateLimit-* headers and 429 + Retry-After past it. It runs
  // after the authentication hook (onRequest), so it knows who the caller is; requests
  // refused there never reach it, and meet the per-address limit on failed authentications.
  await app.register(fastifyRateLimit, {
    max: REQUESTS_PER_MINUTE,
    timeWindow: 60_000,
    hook: 'preParsing',
    enableDraftSpec: true,
    keyGenerator: (request) => callerKey(request),
    errorResponseBuilder: (_request, context) =>
      new AppError('rate_limited', `At most ${context.max} API requests a minute; retry later.`, {
        retryAfterSeconds: Math.max(1, Math.ceil(context.ttl / 1000)),
      }),
  });
  // Fastify's JSON parser (its __proto__ and constructor checks kept) behind intake's depth
  // rule: a deeper body is a 400 before it is parsed, so nothing walking it can overflow.
  const parseJson = app.getDefaultJsonParser(app.initialConfig.onProtoPoisoning ?? 'error', app.initialConfig.onConstructorPoisoning ?? 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body: string, done) => {
    if (nestingDepth(body) > MAX_NESTING_DEPTH) {
      done(new AppError('invalid_json', `The request body nests deeper than ${MAX_NESTING_DEPTH} levels.`), undefined);
      return;
    }
    parseJson(request, body, done);
  });
  app.decorateRequest('principal', null);
  app.addHook('onRequest', authenticateApi(deps));
  // A change made here (a key revoked, an integration disabled) holds on this node before
  // the answer leaves; other nodes hear of it through the store within a second.
  app.addHook('onSend', async (request) => {
    if (!SAFE_METHODS.has(request.method)) deps.keyCache.invalidate();
  });

  // A JSON string may hold U+0000; PostgreSQL's text cannot: a 400 naming the field.
  app.addHook('preValidation', async (request) => {
    const field = fieldWithNul(request.body);
    if (field !== undefined) throw new AppError('invalid_request', `${field} must not contain U+0000 (NUL).`, { field });
  });

  await authRoutes(app, deps);
  await accountRoutes(app, deps);
  await integrationRoutes(app, deps);
  await redactionPreviewRoutes(app, deps);
  // --- keys and management keys ---
  await keyRoutes(app, deps);
  await sourceRoutes(app, deps);
  await managementKeyRoutes(app, deps);
  await cliLoginRoutes(app, deps);
  // --- destinations and their deliveries ---
  await destinationRoutes(app, deps);
  await destinationRulesRoutes(app, deps);
  await deliveryRoutes(app, deps);
  // --- webhooks, request log, usage ---
  await webhookRoutes(app, deps);
  await webhookStreamRoutes(app, deps);
  await webhookFeedRoutes(app, deps);
  await requestLogRoutes(app, deps);
  await usageRoutes(app, deps);
  // --- members, company settings, audit log ---
  await memberRoutes(app, deps);
  await invitationRoutes(app, deps);
  await companyRoutes(app, deps);
  await auditRoutes(app, deps);
  // --- personal data ---
  await erasureRoutes(app, deps);
}
