import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { MAX_ROTATION_GRACE_SECONDS } from '../domain/api-key.js';
import { AppError } from '../errors.js';
import { sourceTestHeader } from '../intake/source-test-mark.js';
import { PROVIDERS, providerFor } from '../sources/providers/index.js';
import { DEFAULT_SECRET_OVERLAP_SECONDS } from '../services/management.js';
import { managementFor, noContent, principalOf, type ApiDeps } from './context.js';
import { IntegrationSchema, presentIntegration } from './integrations.js';
import { AwaitingSecret, SourceBody, SourceTypeSchema } from './source-schemas.js';
import { ERROR_RESPONSES, Id, NullableTimestamp, Timestamp, iso } from './schemas.js';

const SecretSchema = Type.Object({ id: Id('sec'), created_at: Timestamp, expires_at: NullableTimestamp });
const GeneratedSecret = Type.String({ description: 'Shown only in this answer, and only when intake generated it: give it to the sender now.' });
const IntegrationParams = Type.Object({ integration_id: Id('int') });

/** /api/v1/sources and an integration's source: its type, its signing secrets, a signed test. */
export async function sourceRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Sources'];

  app.get(
    '/sources',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags,
        summary: 'List the source types',
        description: 'What each provider type expects: its signature header, the bodies it sends, whether intake generates its secret.',
        response: {
          200: Type.Object({
            data: Type.Array(
              Type.Object({
                type: SourceTypeSchema,
                signature_header: Type.Union([Type.String(), Type.Null()]),
                accepts: Type.Array(Type.String()),
                generates_secret: Type.Boolean(),
              }),
            ),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async () => ({
      data: [
        { type: 'api_key' as const, signature_header: 'X-API-Key', accepts: ['json'], generates_secret: true },
        ...Object.values(PROVIDERS).map((provider) => ({
          type: provider.type,
          signature_header: provider.signatureHeader({}),
          accepts: [...provider.accepts],
          generates_secret: provider.generatesSecret,
        })),
      ],
    }),
  );

  app.put(
    '/integrations/:integration_id/source',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: "Set an integration's source",
        description:
          'A new provider type, or a secret sent, replaces the signing secrets at once; the same type with other settings keeps them. ' +
          'A provider that issues its own secret (Stripe, Shopify, Slack, Twilio) may be chosen without it: the source waits for it ' +
          '(awaiting_secret) and refuses signed requests until it is added with POST …/source-secrets. ' +
          'The API key keeps working whatever the type. Takes effect on every node within a second.',
        params: IntegrationParams,
        body: SourceBody,
        response: {
          200: Type.Object({
            integration: IntegrationSchema,
            source_secret_id: Type.Optional(Id('sec')),
            source_secret: Type.Optional(GeneratedSecret),
            awaiting_secret: Type.Optional(AwaitingSecret),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const changed = await managementFor(deps, request).setSource(companyId, request.params.integration_id, request.body);
      deps.keyCache.invalidate();
      const last = await deps.store.lastWebhookTimes(companyId, [changed.integration.id]);
      return {
        integration: presentIntegration(deps, changed.integration, last.get(changed.integration.id) ?? null, changed.awaitingSecret),
        ...(changed.sourceSecretId !== undefined && { source_secret_id: changed.sourceSecretId }),
        ...(changed.sourceSecret !== undefined && { source_secret: changed.sourceSecret }),
        ...(changed.integration.source.type !== 'api_key' && { awaiting_secret: changed.awaitingSecret }),
      };
    },
  );

  app.get(
    '/integrations/:integration_id/source-secrets',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags,
        summary: "List a source's live signing secrets",
        description: 'Never their values. Several are live only while one is rotated (expires_at is when the old one stops).',
        params: IntegrationParams,
        response: { 200: Type.Object({ data: Type.Array(SecretSchema) }), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const integrationId = request.params.integration_id;
      if (!(await deps.store.getIntegration(companyId, integrationId))) throw new AppError('not_found', `No integration with id ${integrationId}.`);
      const secrets = await deps.store.listSourceSecrets(companyId, integrationId, Date.now());
      return { data: secrets.map((s) => ({ id: s.id, created_at: iso(s.createdAt), expires_at: iso(s.expiresAt) })) };
    },
  );

  app.post(
    '/integrations/:integration_id/source-secrets',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: "Rotate a source's signing secret",
        description:
          'Adds a secret (pasted, or generated where the sender takes ours): the first one of a source waiting for its secret, or a new one; ' +
          'the previous ones keep verifying for previous_expires_in_seconds ' +
          '(0 to 7 days, default 24 h), so the sender can move over without a refused webhook.',
        params: IntegrationParams,
        body: Type.Object(
          {
            secret: SourceBody.properties.secret,
            previous_expires_in_seconds: Type.Optional(
              Type.Integer({ minimum: 0, maximum: MAX_ROTATION_GRACE_SECONDS, default: DEFAULT_SECRET_OVERLAP_SECONDS }),
            ),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({
            id: Id('sec'),
            created_at: Timestamp,
            source_secret: Type.Optional(GeneratedSecret),
            previous_secrets_expire_at: Timestamp,
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      const body = request.body;
      const rotated = await managementFor(deps, request).rotateSourceSecret(
        companyId,
        request.params.integration_id,
        body.secret,
        body.previous_expires_in_seconds,
      );
      deps.keyCache.invalidate();
      return reply.code(201).send({
        id: rotated.id,
        created_at: iso(rotated.createdAt),
        ...(rotated.secret !== undefined && { source_secret: rotated.secret }),
        previous_secrets_expire_at: iso(rotated.previousSecretsExpireAt),
      });
    },
  );

  app.delete(
    '/integrations/:integration_id/source-secrets/:secret_id',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Stop a signing secret now',
        description: "Ends a rotation's overlap early. The source's only live secret cannot be stopped (409): rotate first.",
        params: Type.Object({ integration_id: Id('int'), secret_id: Id('sec') }),
        response: { 204: Type.Null(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      await managementFor(deps, request).endSourceSecret(companyId, request.params.integration_id, request.params.secret_id);
      deps.keyCache.invalidate();
      return noContent(reply);
    },
  );

  app.post(
    '/integrations/:integration_id/source-test',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Send a signed test webhook',
        description:
          "Signs a sample event with the source's newest secret exactly as the provider would, and sends it to the integration's " +
          'address: it goes through verification and the request log like any webhook, and answers what the address answered. ' +
          'The webhook is stored marked as a test (its headers carry `intake-test: source-test`) and is delivered to no destination.',
        params: IntegrationParams,
        response: {
          200: Type.Object({
            status: Type.Integer(),
            answer: Type.Unknown({ description: "The address's JSON answer (the 202's uuid, or the error)." }),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const integration = await deps.store.getIntegration(companyId, request.params.integration_id);
      if (!integration) throw new AppError('not_found', `No integration with id ${request.params.integration_id}.`);
      if (integration.source.type === 'api_key') {
        throw new AppError('conflict', 'This integration takes its API key only: there is no provider signature to test.');
      }
      deps.keyCache.invalidate();
      const route = await deps.keyCache.findIntegration(integration.integrationKey);
      const newest = route?.source?.secrets.find((secret) => secret.expiresAt === null || secret.expiresAt > Date.now());
      if (!route?.source || !newest) {
        throw new AppError('conflict', 'This source is waiting for its signing secret: add it (POST …/source-secrets), then send a test.');
      }
      const path = `/api/webhooks/${integration.integrationKey}`;
      const provider = providerFor(route.source.type);
      const sample = provider.sample(deps.secrets.open(newest.sealed), route.source.config, `${deps.config.baseUrl}${path}`, Date.now());
      const answer = await app.inject({
        method: 'POST',
        url: path + sample.query,
        // The host its provider would name (not light-my-request's localhost:80), and the mark
        // that makes it a test: stored and shown as one, delivered nowhere.
        headers: { ...sample.headers, host: new URL(deps.config.baseUrl).host, 'user-agent': 'intake-source-test', ...sourceTestHeader() },
        payload: sample.body,
      });
      const parsed = parsedOrText(answer.body);
      const uuid = typeof parsed === 'object' && parsed !== null && 'uuid' in parsed ? String(parsed.uuid) : undefined;
      await managementFor(deps, request).recordSourceTest(companyId, integration.id, { status: answer.statusCode, uuid });
      return { status: answer.statusCode, answer: parsed };
    },
  );
}

function parsedOrText(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}
