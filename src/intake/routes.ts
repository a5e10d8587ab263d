import { redactorOf } from '../domain/redaction.js';
import type { CompanyHashers } from '../domain/value-hash.js';
import { hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Scope } from '../domain/api-key.js';
import { decodeCursor, encodeCursor } from '../domain/cursor.js';
import { newWebhookUuid } from '../domain/ids.js';
import {
  isJsonContentType,
  MAX_EVENT_LENGTH,
  parseProviderBody,
  parseWebhookBody,
  providerBodyKind,
  validEvent,
  webhookData,
} from '../domain/webhook-body.js';
import type { DeliveryMarks } from '../domain/delivery-loop.js';
import type { ParsedBody } from '../domain/source-types.js';
import { providerFor } from '../sources/providers/index.js';
import { SignatureRefused, type SourceVerifier } from '../sources/verifier.js';
import { AppError } from '../errors.js';
import type { AppInstance } from '../app-instance.js';
import {
  preciseNow,
  STATUS_OF_OUTCOME,
  type IntegrationRoute,
  type PayloadFormat,
  type PendingLogEntry,
  type PendingWebhook,
  type RouteSource,
  type RequestLogEntry,
  type Store,
  type WebhookSummary,
} from '../store/store.js';
import type { AuthFailureLimiter } from './auth-failures.js';
import type { Authenticator } from './authenticate.js';
import type { GroupCommitWriter } from './group-commit.js';
import { keptHeaders } from './headers.js';
import { isSourceTest, SOURCE_TEST_HEADER, SOURCE_TEST_STORED } from './source-test-mark.js';
import type { LastUsedTracker } from './last-used.js';
import type { RateLimiter } from './rate-limit.js';
import { readBody } from './read-body.js';
import { parseOptionalTime } from '../domain/time.js';
import { PAGE_BUDGET_TEXT } from './read-limits.js';
import type { Metrics } from '../telemetry/metrics.js';

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
  /** Checks providers' signatures: the second way into an address with a provider source. */
  sources: SourceVerifier;
  /** Recognises intake's own deliveries coming back, and webhooks that have come through too many. */
  deliveryMarks: DeliveryMarks;
  metrics: Pick<Metrics, 'webhookAnswered'>;
  /** Each company's keyed hashes, for integrations that redact by hashing. */
  hashers: CompanyHashers;
}

/** Both shapes of the address, forever (contract, "Sending a webhook"). */
const ADDRESS_PREFIXES = ['/api/webhooks', '/api/webhook'] as const;
const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
const MAX_USER_AGENT_LENGTH = 512;
const MAX_LOGGED_CONTENT_TYPE = 100;

const Accepted = Type.Object({ uuid: Type.String(), received_at: Type.String() });
/** A provider's check of the address, answered rather than stored (Slack's url_verification). */
const Challenge = Type.Object({ challenge: Type.String() });
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
            'An integration with a rate limit answers with RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset. ' +
            "An integration with a provider source (github, stripe…) also takes, without X-API-Key, the provider's own body " +
            "signed as the provider signs it: 401 Invalid signature or Signature expired when it is not (see docs/sources.md).",
          security: [{ apiKey: [] }],
          params: IntegrationParams,
          response: { 200: Type.Union([Accepted, Challenge]), 202: Accepted },
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
  /** No key was sent to an address with a provider source: its signature decides. */
  bySignature: boolean;
  /** Why a signature was refused, in words, for the request log. */
  errorDetail: string | null;
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
        signatureAllowed: scope === 'webhooks:write',
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
      bySignature: result.bySignature,
      errorDetail: null,
    };
    if (result.integration !== undefined) request.trace?.integration(result.integration.companyId, result.integration.id);
    if (result.error) throw result.error;
    // A webhook's POST, before its body is read and before a signature can admit it: a
    // delivery of intake's own verifies as a standard_webhooks source with its secret.
    const loop = scope === 'webhooks:write' ? deps.deliveryMarks.loopOf(request.headers) : undefined;
    if (loop !== undefined) {
      request.intake.errorDetail = loop;
      throw new AppError('delivery_loop', loop);
    }
    if (result.bySignature) {
      // What can be refused before the body is read: a missing header, a stale timestamp.
      refusingSignature(deps, request, () => deps.sources.checkHeaders(source(request), deps.sources.requestOf(request, receivedAt)));
      return;
    }
    deps.lastUsed.record({ companyId: result.integration!.companyId, keyId: result.keyId!, at: receivedAt, ip: request.ip });
  };
}

/** request → body rules in the contract's order → rate limit → group commit → answer. */
async function receiveWebhook(deps: IntakeDeps, request: FastifyRequest, reply: FastifyReply) {
  const ctx = context(request);
  if (ctx.bySignature) return receiveSigned(deps, request, reply);
  if (!isJsonContentType(request.headers['content-type'])) {
    reply.header('connection', 'close');
    throw new AppError('unsupported_media_type');
  }
  const raw = await readWithinLimit(request, reply);
  const idempotencyKey = idempotencyKeyOf(request);
  const payload = parseWebhookBody(raw);
  return commit(deps, request, reply, { raw, event: payload.event, idempotencyKey, keyId: ctx.keyId!, format: 'envelope' });
}

/**
 * A provider's own request to an address with a provider source, without a key: its body
 * is read (within the integration's limit) to check the signature that covers it, then
 * taken as the provider sends it. The signature decides before anything else is said.
 */
async function receiveSigned(deps: IntakeDeps, request: FastifyRequest, reply: FastifyReply) {
  const ctx = context(request);
  const integration = ctx.integration!;
  const routeSource = source(request);
  const provider = providerFor(routeSource.type);
  const contentType = request.headers['content-type'];
  const kind = providerBodyKind(contentType);
  if (kind === undefined || !provider.accepts.includes(kind)) {
    reply.header('connection', 'close');
    const message = `A ${routeSource.type} source takes ${provider.accepts.map(describeKind).join(' or ')} bodies.`;
    // The request log says what the answer says, not the API key's "must be JSON".
    ctx.errorDetail = message;
    request.log.debug(
      { integration_id: integration.id, provider: routeSource.type, content_type: contentType?.slice(0, MAX_LOGGED_CONTENT_TYPE) },
      'source refused the content type',
    );
    throw new AppError('unsupported_media_type', message);
  }
  const raw = await readWithinLimit(request, reply);
  const signed = { ...deps.sources.requestOf(request, ctx.receivedAt), rawBody: raw };
  // Parsed once, on demand: Twilio's signature covers the form's fields.
  let parsed: ParsedBody | undefined;
  const body = () => (parsed ??= parseProviderBody(raw, kind));
  const verified = await refusingSignatureAsync(deps, request, () => deps.sources.verify(routeSource, signed, body));
  ctx.keyId = verified.secretId;
  if (!integration.enabled) throw new AppError('integration_disabled');
  const described = provider.describe(signed, body());
  request.log.debug(
    {
      integration_id: integration.id,
      provider: routeSource.type,
      secret_id: verified.secretId,
      // Bounded as they are stored: an unsigned header may be as long as the header limit.
      event: described.event?.slice(0, MAX_EVENT_LENGTH),
      delivery_id: described.deliveryId?.slice(0, MAX_IDEMPOTENCY_KEY_LENGTH),
    },
    'source signature verified',
  );
  // Already JSON: the provider's answer is sent as it made it, whatever its shape.
  if (described.answer !== undefined) return reply.code(200).type('application/json; charset=utf-8').send(JSON.stringify(described.answer));
  return commit(deps, request, reply, {
    raw,
    event: validEvent(truncateEvent(described.event ?? 'unknown')),
    idempotencyKey: described.deliveryId === undefined ? idempotencyKeyOf(request) : checkedIdempotencyKey(described.deliveryId),
    keyId: verified.secretId,
    format: kind,
    signatureClaim: verified.signatureClaim,
  });
}

interface Admitted {
  raw: Buffer;
  event: string;
  idempotencyKey: string | null;
  /** The API key, or the source secret, that admitted it. */
  keyId: string;
  format: PayloadFormat;
  /** A provider's signed request: a copy of it is a replay whatever its delivery id (see SourceVerifier). */
  signatureClaim?: string;
}

/** The rate limit, then the group commit; answers 202, or 200 for a replay. */
async function commit(deps: IntakeDeps, request: FastifyRequest, reply: FastifyReply, webhook: Admitted) {
  const ctx = context(request);
  const integration = ctx.integration!;
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

  const test = isSourceTest(request.headers);
  // After every check of the bytes as received (the signature, the envelope): what the
  // integration redacts never reaches the store, the log or a destination.
  const redactor = redactorOf(integration.redaction, () => deps.hashers.of(integration.companyId));
  const rawBody = redactor === null ? webhook.raw : redactor.body(webhook.raw, webhook.format);
  const pending: PendingWebhook = {
    uuid: newWebhookUuid(),
    companyId: integration.companyId,
    integrationId: integration.id,
    keyId: webhook.keyId,
    event: webhook.event,
    // When its whole body has come and passed every check, not when its request began: the
    // group commit writes webhooks in the order they join it, so (received_at, uuid v7) then
    // grows as the rows are written and the time indexes fill their pages. Stamped at the
    // request's start, a webhook whose body came slowly went in behind later ones and split
    // full pages, which left each of those indexes half empty (docs/performance-history.md).
    receivedAt: Date.now(),
    rawBody,
    // Of the stored body: equal bodies redact alike, and no hash of a redacted value is kept.
    bodySha256: webhook.idempotencyKey === null ? null : hash('sha256', rawBody, 'hex'),
    headers: keptHeaders(request.headers, test ? { [SOURCE_TEST_HEADER]: SOURCE_TEST_STORED } : undefined, redactor),
    sourceIp: request.ip,
    idempotencyKey: webhook.idempotencyKey,
    signatureClaim: webhook.signatureClaim,
    payloadFormat: webhook.format,
    log: pendingLogEntry(request),
    ...(test && { sourceTest: true as const }),
  };
  const outcome = await deps.writer.submit(pending, request.trace);
  ctx.logged = true;
  if (outcome.kind === 'conflict') throw new AppError('idempotency_conflict');
  request.trace?.stored(outcome.uuid);
  if (outcome.kind === 'replayed') reply.header('idempotent-replayed', 'true');
  return reply
    .code(STATUS_OF_OUTCOME[outcome.kind])
    .send({ uuid: outcome.uuid, received_at: new Date(outcome.receivedAt).toISOString() });
}

/** The body, within the integration's limit (413 beyond it). */
async function readWithinLimit(request: FastifyRequest, reply: FastifyReply): Promise<Buffer> {
  const ctx = context(request);
  const raw = await readBody(request.body as Readable | undefined, request.headers['content-length'], ctx.integration!.bodyLimitBytes).catch(
    (error: unknown) => {
      reply.header('connection', 'close');
      throw error;
    },
  );
  ctx.sizeBytes = raw.length;
  request.trace?.bodyBytes(raw.length);
  return raw;
}

function source(request: FastifyRequest): RouteSource {
  const routeSource = context(request).integration?.source;
  if (!routeSource) throw new Error('a signed request to an address without a provider source');
  return routeSource;
}

/** Runs a signature check; a refusal counts against the address and keeps its reason for the log. */
function refusingSignature(deps: IntakeDeps, request: FastifyRequest, check: () => void): void {
  try {
    check();
  } catch (error) {
    throw noteRefusal(deps, request, error);
  }
}

async function refusingSignatureAsync<T>(deps: IntakeDeps, request: FastifyRequest, check: () => Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (error) {
    throw noteRefusal(deps, request, error);
  }
}

function noteRefusal(deps: IntakeDeps, request: FastifyRequest, error: unknown): unknown {
  if (error instanceof SignatureRefused) {
    const ctx = context(request);
    ctx.errorDetail = error.refusal.reason;
    deps.authFailures.recordFailure(request.ip);
    // For an operator setting up a source: the reason never holds a secret or the signature sent.
    request.log.debug(
      { integration_id: ctx.integration?.id, provider: ctx.integration?.source?.type, code: error.refusal.code, reason: error.refusal.reason },
      'source signature refused',
    );
  }
  return error;
}

function describeKind(kind: 'json' | 'form'): string {
  return kind === 'json' ? 'JSON (application/json)' : 'form (application/x-www-form-urlencoded)';
}

/** A provider's event name, cut to the contract's 200 characters (code points) rather than refused. */
function truncateEvent(event: string): string {
  return [...event].slice(0, MAX_EVENT_LENGTH).join('');
}

function idempotencyKeyOf(request: FastifyRequest): string | null {
  const header = request.headers['idempotency-key'] ?? request.headers['webhook-id'];
  const key = Array.isArray(header) ? header[0] : header;
  if (key === undefined || key === '') return null;
  return checkedIdempotencyKey(key);
}

function checkedIdempotencyKey(key: string): string {
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new AppError('invalid_request', `The idempotency key must be at most ${MAX_IDEMPOTENCY_KEY_LENGTH} characters.`);
  }
  return key;
}

function listItem(webhook: WebhookSummary) {
  return {
    uuid: webhook.uuid,
    event: webhook.event,
    data: webhookData(webhook.rawBody, webhook.payloadFormat),
    received_at: new Date(webhook.receivedAt).toISOString(),
  };
}

/** The request-log row of a webhook on its way to the group commit, which adds its outcome. */
function pendingLogEntry(request: FastifyRequest): PendingLogEntry {
  const ctx = context(request);
  const userAgent = request.headers['user-agent'];
  return {
    // The request's own id (app.ts's genReqId), which its answer's request_id and the log
    // lines carry: time-ordered, so each commit's rows land at the end of the table's key.
    id: request.id,
    companyId: ctx.integration!.companyId,
    integrationId: ctx.integration!.id,
    receivedAt: ctx.receivedAt,
    method: request.method,
    keyId: ctx.keyId,
    ip: request.ip,
    userAgent: userAgent === undefined ? null : userAgent.slice(0, MAX_USER_AGENT_LENGTH),
    sizeBytes: ctx.sizeBytes ?? (Number(request.headers['content-length']) || 0),
    traceId: request.trace?.sampledTraceId ?? null,
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
    errorDetail: context(request).errorDetail,
    webhookUuid: null,
    durationMs: Math.round((preciseNow() - startedAt) * 1000) / 1000,
  };
}

/** What an answer at a webhook address was, for /metrics: its error code, or what its success means. */
function outcomeOf(request: FastifyRequest, reply: FastifyReply): string {
  if (request.errorCode !== undefined) return request.errorCode;
  if (reply.statusCode === 202) return 'accepted';
  return reply.getHeader('idempotent-replayed') === 'true' ? 'replayed' : 'ok';
}

/** Counts the answer (shed requests too: they have no intake context) and writes its request-log row. */
function logRequest(deps: IntakeDeps, request: FastifyRequest, reply: FastifyReply): void {
  const ctx = request.intake;
  deps.metrics.webhookAnswered(request.routeOptions.url, request.method, reply.statusCode, outcomeOf(request, reply), ctx?.sizeBytes);
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
