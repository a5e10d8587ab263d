import { createHash } from 'node:crypto';
import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyRequest } from 'fastify';
import { SESSION_COOKIE } from '../admin/sessions.js';
import type { AppInstance } from '../app.js';
import { fieldWithNul } from '../domain/text.js';
import { AppError } from '../errors.js';
import { auditRoutes } from './audit.js';
import { authRoutes } from './auth.js';
import { companyRoutes } from './company.js';
import { authenticateApi, type ApiDeps } from './context.js';
import { integrationRoutes } from './integrations.js';
import { keyRoutes } from './keys.js';
import { managementKeyRoutes } from './management-keys.js';
import { memberRoutes } from './members.js';
import { requestLogRoutes } from './requests.js';
import { usageRoutes } from './usage.js';
import { webhookStreamRoutes } from './webhook-stream.js';
import { webhookRoutes } from './webhooks.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const REQUESTS_PER_MINUTE = 1200;

/** Who a request counts against: a hash of its key or session, never the secret itself. */
function callerKey(request: FastifyRequest): string {
  const secret = request.headers['x-api-key'] ?? request.cookies[SESSION_COOKIE];
  if (typeof secret !== 'string' || secret === '') return `ip:${request.ip}`;
  return `secret:${createHash('sha256').update(secret).digest('base64url')}`;
}

/** Every route under /api/v1, behind one authentication hook. */
export async function apiV1Routes(app: AppInstance, deps: ApiDeps): Promise<void> {
  // The same limit on every route, per caller (a key, a session, else an address), with
  // the IETF RateLimit-* headers on every answer and 429 + Retry-After past it.
  await app.register(fastifyRateLimit, {
    max: REQUESTS_PER_MINUTE,
    timeWindow: 60_000,
    enableDraftSpec: true,
    keyGenerator: (request) => callerKey(request),
    errorResponseBuilder: (_request, context) =>
      new AppError('rate_limited', `At most ${context.max} API requests a minute; retry later.`, {
        retryAfterSeconds: Math.max(1, Math.ceil(context.ttl / 1000)),
      }),
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
  await integrationRoutes(app, deps);
  // --- keys and management keys ---
  await keyRoutes(app, deps);
  await managementKeyRoutes(app, deps);
  // --- webhooks, request log, usage ---
  await webhookRoutes(app, deps);
  await webhookStreamRoutes(app, deps);
  await requestLogRoutes(app, deps);
  await usageRoutes(app, deps);
  // --- members, company settings, audit log ---
  await memberRoutes(app, deps);
  await companyRoutes(app, deps);
  await auditRoutes(app, deps);
}
