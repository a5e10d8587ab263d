import { MAX_REDACTION_HEADERS, MAX_REDACTION_PATHS, REDACTED, type Redaction } from '../domain/redaction.js';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { issuableIntegrationScopes } from '../domain/permissions.js';
import { AppError } from '../errors.js';
import { MAX_RETENTION_DAYS, type Integration } from '../store/store.js';
import { managementFor, noContent, principalOf, type ApiDeps } from './context.js';
import { IntegrationKeyScopes } from './keys.js';
import { AwaitingSecret, presentSource, SourceBody, SourceSchema } from './source-schemas.js';
import { ERROR_RESPONSES, Id, NullableInteger, Page, PageQuery, Timestamp, iso, pageOf } from './schemas.js';

const MAX_BODY_LIMIT = 16 * 1024 * 1024;

/** What an integration redacts, as the API takes and shows it (the preview takes it too, unsaved). */
export const RedactionFields = Type.Object(
  {
    paths: Type.Optional(
      Type.Array(Type.String(), {
        description: `JSON paths of the body whose values are replaced by "${REDACTED}" before storing: data.customer.email, data.card.* (any one key), $..phone (any depth); at most ${MAX_REDACTION_PATHS}.`,
      }),
    ),
    headers: Type.Optional(Type.Array(Type.String(), { description: `Header names whose values are replaced before storing; at most ${MAX_REDACTION_HEADERS}.` })),
    mode: Type.Optional(
      Type.Union([Type.Literal('redact'), Type.Literal('hash')], {
        description:
          `redact (the default): each value becomes "${REDACTED}". hash: its keyed hash (hmac-sha256:… with a key of the company's own), ` +
          'so equal values stay equal and an erasure of the value still finds them, without the value being stored.',
      }),
    ),
  },
  { additionalProperties: false },
);

const RedactionSchema = Type.Union([RedactionFields, Type.Null()], {
  description:
    'What is replaced before each webhook is stored (after its signature is checked on the bytes received): the stored body and ' +
    'the deliveries are the body as received less those values. null: nothing.',
});

const RETENTION_DESCRIPTION =
  "Days its webhooks are kept, with their request-log rows, deliveries and attempts: shorter than the company's retention " +
  "(GET /api/v1/company), e.g. 7 for a payments integration where the rest keep 30; longer is a 400. null: the company's. " +
  "Should the company's retention later become shorter, the company's holds: webhooks are kept the shorter of the two.";

export const IntegrationSchema = Type.Object(
  {
    id: Id('int'),
    name: Type.String(),
    description: Type.String(),
    enabled: Type.Boolean({ description: 'A disabled integration refuses webhooks (403) but its log stays readable.' }),
    integration_key: Type.String({ description: 'The public last segment of the webhook address.' }),
    webhook_url: Type.String({ description: `The address to send webhooks to (also under /api/webhook/).` }),
    body_limit_bytes: Type.Integer(),
    rate_limit_per_minute: Type.Union([Type.Integer(), Type.Null()], { description: 'null: no limit.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
    last_webhook_at: Type.Union([Timestamp, Type.Null()], { description: 'When it last took a webhook; null: never (or all purged).' }),
    source: SourceSchema,
    redaction: RedactionSchema,
    retention_days: Type.Union([Type.Integer(), Type.Null()], { description: RETENTION_DESCRIPTION }),
  },
  { $id: 'Integration' },
);

const Editable = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.String({ maxLength: 2000 }),
  body_limit_bytes: Type.Integer({ minimum: 1, maximum: MAX_BODY_LIMIT }),
  rate_limit_per_minute: NullableInteger({ minimum: 1, maximum: 1_000_000, description: 'Requests per minute; null: no limit.' }),
  redaction: RedactionSchema,
  retention_days: NullableInteger({ minimum: 1, maximum: MAX_RETENTION_DAYS, description: RETENTION_DESCRIPTION }),
};

const IntegrationParams = Type.Object({ integration_id: Id('int') });

/** /api/v1/integrations: the company's integrations. */
export async function integrationRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Integrations'];
  /** Integrations as the API shows them, with when each last took a webhook and which wait for a secret (one query each for all). */
  const present = async (companyId: string, list: Integration[]) => {
    const ids = list.map((i) => i.id);
    const [last, awaiting] = await Promise.all([
      deps.store.lastWebhookTimes(companyId, ids),
      deps.store.awaitingSecret(companyId, ids, Date.now()),
    ]);
    return list.map((integration) => presentIntegration(deps, integration, last.get(integration.id) ?? null, awaiting.has(integration.id)));
  };

  app.get(
    '/integrations',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags,
        summary: 'List integrations',
        description: 'Newest first.',
        querystring: Type.Object(PageQuery),
        response: { 200: Page(IntegrationSchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const page = await pageOf(
        request.query,
        (query) => deps.store.listIntegrations(companyId, query),
        (last) => ({ at: last.createdAt, id: last.id }),
      );
      return { data: await present(companyId, page.items), next_cursor: page.next_cursor };
    },
  );

  app.post(
    '/integrations',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Create an integration',
        description: 'Returns the integration and its first API key, with `scopes` as asked (see the keys). The key is shown only in this answer.',
        body: Type.Object({
          name: Editable.name,
          description: Type.Optional(Editable.description),
          enabled: Type.Optional(Type.Boolean({ default: true, description: 'false: created disabled, refusing webhooks until enabled.' })),
          body_limit_bytes: Type.Optional(Editable.body_limit_bytes),
          rate_limit_per_minute: Type.Optional(Editable.rate_limit_per_minute),
          redaction: Type.Optional(Editable.redaction),
          retention_days: Type.Optional(Editable.retention_days),
          scopes: Type.Optional(IntegrationKeyScopes),
          source: Type.Optional(SourceBody),
        }),
        response: {
          201: Type.Object({
            integration: IntegrationSchema,
            api_key: Type.String({ description: 'Shown once: store it now.' }),
            key_id: Id('key'),
            source_secret_id: Type.Optional(Id('sec')),
            source_secret: Type.Optional(Type.String({ description: 'Shown once, when intake generated the signing secret: give it to the sender now.' })),
            awaiting_secret: Type.Optional(AwaitingSecret),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request, reply) => {
      const { companyId, permissions } = principalOf(request);
      const body = request.body;
      const created = await managementFor(deps, request).createIntegration(companyId, {
        name: body.name,
        description: body.description,
        enabled: body.enabled,
        bodyLimitBytes: body.body_limit_bytes,
        rateLimitPerMinute: body.rate_limit_per_minute,
        keyScopes: issuableIntegrationScopes(permissions, body.scopes),
        source: body.source,
        redaction: body.redaction,
        retentionDays: body.retention_days,
      });
      return reply.code(201).send({
        integration: presentIntegration(deps, created.integration, null, created.awaitingSecret),
        api_key: created.apiKey,
        key_id: created.keyId,
        ...(created.sourceSecretId !== undefined && { source_secret_id: created.sourceSecretId }),
        ...(created.sourceSecret !== undefined && { source_secret: created.sourceSecret }),
        ...(created.integration.source.type !== 'api_key' && { awaiting_secret: created.awaitingSecret }),
      });
    },
  );

  app.get(
    '/integrations/:integration_id',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags,
        summary: 'Read an integration',
        params: IntegrationParams,
        response: { 200: IntegrationSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const integration = await deps.store.getIntegration(companyId, request.params.integration_id);
      if (!integration) throw new AppError('not_found', `No integration with id ${request.params.integration_id}.`);
      return (await present(companyId, [integration]))[0];
    },
  );

  app.patch(
    '/integrations/:integration_id',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Update an integration',
        description: 'Changes only the fields sent. Disabling takes effect on every node within a second.',
        params: IntegrationParams,
        body: Type.Partial(Type.Object({ ...Editable, enabled: Type.Boolean() }), { minProperties: 1 }),
        response: { 200: IntegrationSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const body = request.body;
      const updated = await managementFor(deps, request).updateIntegration(companyId, request.params.integration_id, {
        ...(body.name !== undefined && { name: body.name }),
        ...(body.description !== undefined && { description: body.description }),
        ...(body.enabled !== undefined && { enabled: body.enabled }),
        ...(body.body_limit_bytes !== undefined && { bodyLimitBytes: body.body_limit_bytes }),
        ...(body.rate_limit_per_minute !== undefined && { rateLimitPerMinute: body.rate_limit_per_minute }),
        ...(body.redaction !== undefined && { redaction: body.redaction as Redaction | null }),
        ...(body.retention_days !== undefined && { retentionDays: body.retention_days }),
      });
      return (await present(companyId, [updated]))[0];
    },
  );

  app.delete(
    '/integrations/:integration_id',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Delete an integration',
        description: 'Its address and keys stop working on every node within a second. Its webhooks leave with retention.',
        params: IntegrationParams,
        response: { 204: Type.Null(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      await managementFor(deps, request).deleteIntegration(companyId, request.params.integration_id);
      return noContent(reply);
    },
  );
}

export function presentIntegration(deps: ApiDeps, integration: Integration, lastWebhookAt: number | null, awaitingSecret: boolean) {
  return {
    id: integration.id,
    name: integration.name,
    description: integration.description,
    enabled: integration.enabled,
    integration_key: integration.integrationKey,
    webhook_url: `${deps.config.baseUrl}/api/webhooks/${integration.integrationKey}`,
    body_limit_bytes: integration.bodyLimitBytes,
    rate_limit_per_minute: integration.rateLimitPerMinute,
    created_at: iso(integration.createdAt),
    updated_at: iso(integration.updatedAt),
    last_webhook_at: iso(lastWebhookAt),
    source: presentSource(integration.source, awaitingSecret),
    redaction: integration.redaction && { ...integration.redaction, mode: integration.redaction.mode ?? 'redact' },
    retention_days: integration.retentionDays,
  };
}
