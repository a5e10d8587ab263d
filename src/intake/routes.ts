import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Scope } from '../domain/api-key.js';
import { decodeCursor, encodeCursor } from '../domain/cursor.js';
import { newId, newWebhookUuid } from '../domain/ids.js';
import { isJsonContentType, parseWebhookBody, storedDocument } from '../domain/webhook-body.js';
import { AppError } from '../errors.js';
import type { AppInstance } from '../app.js';
import {
  preciseNow,
  STATUS_OF_OUTCOME,
  type IntegrationRoute,
  type PendingLogEntry,
  type RequestLogEntry,
  type Store,
  type WebhookSummary,
} from '../store/store.js';
import type { AuthFailureLimiter } from './auth-failures.js';
import type { Authenticator } from './authenticate.js';
import type { GroupCommitWriter } from './group-commit.js';
import { keptHeaders } from './headers.js';
import type { LastUsedTracker } from './last-used.js';
import type { RateLimiter } from './rate-limit.js';
import { readBody } from './read-body.js';
import { parseOptionalTime } from '../domain/time.js';
import { PAGE_BUDGET_TEXT } from '../api/read-limits.js';

export interface IntakeDeps {
  store: Store;
  authenticator: Authenticator;
  writer: GroupCommitWriter;
  rateLimiter: RateLimiter;
  lastUsed: LastUsedTracker;
  /** Requests to addresses that name no integration: counted, never stored. */
  counters: { unknownIntegrationRequests: number };
  /** The per-address limit on failed authentications, which also says which of its refusals to log. */
  authFailures: AuthFailureLimiter;
}

/** Both shapes of the address, forever (contract, "Sending a webhook"). */
const ADDRESS_PREFIXES = ['/api/webhooks', '/api/webhook'] as const;
const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
const MAX_USER_AGENT_LENGTH = 512;

const Accepted = Type.Object({ uuid: Type.String(), received_at: Type.String() });
const IntegrationParams = Type.Object({ integration_key: Type.String({ maxLength: 200 }) });
const ListQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
  cursor: Type.Optional(Type.String({ maxLength: 200 })),
  event: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  since: Type.Optional(Type.String({ format: 'date-time' })),
  until: Type.Optional(Type.String({ format: 'date-time' })),
});

/** The hot path (POST) and the key-authenticated reads of an integration's webhooks. */
export async function intakeRoutes(app: AppInstance, deps: IntakeDeps): Promise<void> {
  // The body is read by the handler, after authentication and with the integration's own
  // limit: Fastify hands over the raw stream whatever the Content-Type says.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  app.decorateRequest('intake', null);
  app.addHook('onResponse', async (request, reply) => logRequest(deps, request, reply));

  for (const prefix of ADDRESS_PREFIXES) {
    app.post(
      `${prefix}/:integration_key`,
      {
        onRequest: authenticateFor(deps, 'webhooks:write', true),
        schema: {
          tags: ['Intake'],
          summary: 'Send a webhook',
          description:
            'Authenticated by the integration key in X-API-Key. Answers 202 only after the webhook is durably committed. ' +
            'A repeated Idempotency-Key (or webhook-id) within 24 h answers 200 with the original uuid and Idempotent-Replayed: true; ' +
            'the same key with another body is a 422. Errors, in order: 429 for an address that sent too many missing or invalid keys ' +
            '(auth_rate_limited), 401/403 authentication, 403 disabled, 415, 413, 400, 422, 429 over the rate limit, 503. ' +
            'An integration with a rate limit answers with RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset.',
          security: [{ apiKey: [] }],
          params: IntegrationParams,
          response: { 200: Accepted, 202: Accepted },
        },
      },
      (request, reply) => receiveWebhook(deps, request, reply),
    );
    app.get(
      `${prefix}/:integration_key`,
      {
        onRequest: authenticateFor(deps, 'webhooks:read', false),
        schema: {
          tags: ['Intake'],
          summary: "List an integration's webhooks",
          description:
            'With the integration key. Newest first; `since` inclusive, `until` exclusive (ISO-8601). ' +
            `${PAGE_BUDGET_TEXT} ${app.readLimits.describeHeavyReads()}`,
          security: [{ apiKey: [] }],
          params: IntegrationParams,
          querystring: ListQuery,
        },
      },
      async (request) => {
        const { companyId, id: integrationId } = context(request).integration!;
        const query = request.query;
        // The management API's read, bounded in bytes as well as rows.
        const page = await app.readLimits.read(companyId, () =>
          deps.store.listCompanyWebhooks(companyId, {
            integrationId,
            limit: query.limit,
            cursor: query.cursor === undefined ? undefined : decodeCursor(query.cursor),
            event: query.event,
            since: parseOptionalTime(query.since, 'since'),
            until: parseOptionalTime(query.until, 'until'),
          }),
        );
        return { data: page.webhooks.map(listItem), next_cursor: page.next && encodeCursor(page.next) };
      },
    );
    app.get(
      `${prefix}/:integration_key/:uuid`,
      {
        onRequest: authenticateFor(deps, 'webhooks:read', false),
        schema: {
          tags: ['Intake'],
          summary: 'Read one webhook',
          description: 'With the integration key: the webhook with its kept headers and its raw body, byte for byte.',
          security: [{ apiKey: [] }],
          params: Type.Object({ ...IntegrationParams.properties, uuid: Type.String({ maxLength: 64 }) }),
        },
      },
      async (request) => {
        const { companyId, id: integrationId } = context(request).integration!;
        const webhook = await deps.store.getWebhook(companyId, integrationId, request.params.uuid);
        if (!webhook) throw new AppError('not_found', 'No webhook with this uuid in this integration.');
        return {
          ...listItem(webhook),
          headers: webhook.headers,
          raw_body: webhook.rawBody.toString('utf8'),
          source_ip: webhook.sourceIp,
        };
      },
    );
  }
}

/** What intake knows of a request; set by the authentication hook. */
export interface IntakeContext {
  startedAt: number;
  receivedAt: number;
  integration: IntegrationRoute | undefined;
  keyId: string | null;
  sizeBytes: number | undefined;
  /** The request's log row was committed with its webhook: onResponse must not add one. */
  logged: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    intake: IntakeContext | null;
  }
}

function context(request: FastifyRequest): NonNullable<FastifyRequest['intake']> {
  if (!request.intake) throw new Error('intake route without its authentication hook');
  return request.intake;
}

function authenticateFor(deps: IntakeDeps, scope: Scope, requireEnabled: boolean) {
  return async (request: FastifyRequest): Promise<void> => {
    const startedAt = performance.now();
    const receivedAt = Date.now();
    const header = request.headers['x-api-key'];
    const result = await deps.authenticator
      .authenticate({
        apiKey: Array.isArray(header) ? header[0] : header,
        integrationKey: (request.params as { integration_key: string }).integration_key,
        scope,
        requireEnabled,
        now: receivedAt,
        ip: request.ip,
      })
      .catch((error: unknown) => {
        request.log.error({ err: error }, 'key lookup failed');
        throw new AppError('service_unavailable', 'Keys cannot be checked right now; retry later.', {
          retryAfterSeconds: 1,
        });
      });
    request.intake = {
      startedAt,
      receivedAt,
      integration: result.integration,
      keyId: result.keyId,
      sizeBytes: undefined,
      logged: false,
    };
    if (result.error) throw result.error;
    deps.lastUsed.record({ companyId: result.integration!.companyId, keyId: result.keyId!, at: receivedAt, ip: request.ip });
  };
}

/** request → body rules in the contract's order → rate limit → group commit → answer. */
async function receiveWebhook(deps: IntakeDeps, request: FastifyRequest, reply: FastifyReply) {
  const ctx = context(request);
  const integration = ctx.integration!;
  if (!isJsonContentType(request.headers['content-type'])) {
    reply.header('connection', 'close');
    throw new AppError('unsupported_media_type');
  }
  const raw = await readBody(request.body as Readable | undefined, request.headers['content-length'], integration.bodyLimitBytes).catch(
    (error: unknown) => {
      reply.header('connection', 'close');
      throw error;
    },
  );
  ctx.sizeBytes = raw.length;
  const idempotencyKey = idempotencyKeyOf(request);
  const payload = parseWebhookBody(raw);
  if (integration.rateLimitPerMinute !== null) {
    const waitSeconds = deps.rateLimiter.take(integration.id, integration.rateLimitPerMinute);
    // The IETF draft's headers, as /api/v1 sends them: on this answer whatever it is.
    const quota = deps.rateLimiter.quota(integration.id, integration.rateLimitPerMinute);
    reply.headers({
      'ratelimit-limit': integration.rateLimitPerMinute,
      'ratelimit-remaining': quota.remaining,
      'ratelimit-reset': quota.resetSeconds,
    });
    if (waitSeconds > 0) {
      throw new AppError('rate_limited', `This integration accepts ${integration.rateLimitPerMinute} webhooks a minute.`, {
        retryAfterSeconds: waitSeconds,
      });
    }
  }

  const outcome = await deps.writer.submit({
    uuid: newWebhookUuid(),
    companyId: integration.companyId,
    integrationId: integration.id,
    keyId: ctx.keyId!,
    event: payload.event,
    receivedAt: ctx.receivedAt,
    rawBody: raw,
    bodySha256: idempotencyKey === null ? null : createHash('sha256').update(raw).digest('hex'),
    headers: keptHeaders(request.headers),
    sourceIp: request.ip,
    idempotencyKey,
    log: pendingLogEntry(request),
  });
  ctx.logged = true;
  if (outcome.kind === 'conflict') throw new AppError('idempotency_conflict');
  if (outcome.kind === 'replayed') reply.header('idempotent-replayed', 'true');
  return reply
    .code(STATUS_OF_OUTCOME[outcome.kind])
    .send({ uuid: outcome.uuid, received_at: new Date(outcome.receivedAt).toISOString() });
}

function idempotencyKeyOf(request: FastifyRequest): string | null {
  const header = request.headers['idempotency-key'] ?? request.headers['webhook-id'];
  const key = Array.isArray(header) ? header[0] : header;
  if (key === undefined || key === '') return null;
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new AppError('invalid_request', `The idempotency key must be at most ${MAX_IDEMPOTENCY_KEY_LENGTH} characters.`);
  }
  return key;
}

function listItem(webhook: WebhookSummary) {
  const document = storedDocument(webhook.rawBody);
  return {
    uuid: webhook.uuid,
    event: webhook.event,
    data: document.data ?? {},
    received_at: new Date(webhook.receivedAt).toISOString(),
  };
}

/** The request-log row of a webhook on its way to the group commit, which adds its outcome. */
function pendingLogEntry(request: FastifyRequest): PendingLogEntry {
  const ctx = context(request);
  const userAgent = request.headers['user-agent'];
  return {
    id: newId('req'),
    companyId: ctx.integration!.companyId,
    integrationId: ctx.integration!.id,
    receivedAt: ctx.receivedAt,
    method: request.method,
    keyId: ctx.keyId,
    ip: request.ip,
    userAgent: userAgent === undefined ? null : userAgent.slice(0, MAX_USER_AGENT_LENGTH),
    sizeBytes: ctx.sizeBytes ?? (Number(request.headers['content-length']) || 0),
    startedAt: performance.timeOrigin + ctx.startedAt,
  };
}

/** The request-log row of a request answered without storing a webhook. */
function requestLogEntry(request: FastifyRequest, status: number): RequestLogEntry {
  const { startedAt, ...row } = pendingLogEntry(request);
  return {
    ...row,
    status,
    errorCode: request.errorCode ?? null,
    webhookUuid: null,
    durationMs: Math.round((preciseNow() - startedAt) * 1000) / 1000,
  };
}

function logRequest(deps: IntakeDeps, request: FastifyRequest, reply: FastifyReply): void {
  const ctx = request.intake;
  if (!ctx) return;
  if (!ctx.integration) {
    deps.counters.unknownIntegrationRequests++;
    return;
  }
  if (ctx.logged) return;
  // One row per address, integration and window for the per-address limit's refusals; the
  // rest are counted in /metrics, so a flood of them cannot fill the company's log.
  if (request.errorCode === 'auth_rate_limited' && !deps.authFailures.logsRefusal(request.ip, ctx.integration.id)) return;
  deps.writer.submitLog(requestLogEntry(request, reply.statusCode));
}
