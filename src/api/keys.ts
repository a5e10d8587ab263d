import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { DEFAULT_ROTATION_GRACE_SECONDS, INTEGRATION_SCOPES, MAX_ROTATION_GRACE_SECONDS, keyStatus } from '../domain/api-key.js';
import { issuableIntegrationScopes } from '../domain/permissions.js';
import { AppError } from '../errors.js';
import type { KeyDetails } from '../store/store.js';
import { managementFor, principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, Id, NullableTimestamp, Page, PageQuery, Timestamp, iso, pageOf } from './schemas.js';
import { parseTime } from '../domain/time.js';

const DAY_MS = 24 * 60 * 60 * 1000;
/** How far back the callers of a key are looked for: a rotation's longest grace period. */
const CALLERS_WINDOW_MS = 7 * DAY_MS;

/** What every key shows, an integration's or a management key. */
export const KeyCommon = {
  id: Id('key'),
  name: Type.String({ description: 'What the key is for; empty when unnamed.' }),
  prefix: Type.String({ description: 'The start of the key, to recognise it. The whole key is shown only when it is created.' }),
  created_at: Timestamp,
  expires_at: NullableTimestamp,
  revoked_at: NullableTimestamp,
  status: Type.Union([Type.Literal('active'), Type.Literal('expiring'), Type.Literal('expired'), Type.Literal('revoked')], {
    description: 'expiring: stops working within 7 days (as the old keys do during a rotation’s grace period).',
  }),
};

export const IntegrationKeySchema = Type.Object(
  {
    ...KeyCommon,
    scopes: Type.Array(Type.String(), {
      description: 'webhooks:write (send webhooks) and, when issued so, webhooks:read (read them back); for its integration only.',
    }),
    last_used_at: NullableTimestamp,
    last_used_ip: Type.Union([Type.String(), Type.Null()]),
    requests_24h: Type.Integer({ description: 'Requests to the integration’s address with this key in the last 24 hours, refused ones too.' }),
  },
  { $id: 'IntegrationKey' },
);

export const ShownOnce = Type.String({ description: 'The whole key, shown only in this answer: store it now.' });
/** What a new integration key may do, as asked for when it is issued. */
export const IntegrationKeyScopes = Type.Array(Type.Union(INTEGRATION_SCOPES.map((scope) => Type.Literal(scope))), {
  minItems: 1,
  maxItems: 10,
  description:
    'What the key may do: webhooks:write (send) and webhooks:read (read the webhooks back through its address). ' +
    'webhooks:read needs a caller who may read logs (logs:read), else 403. Default: both when the caller may read logs, webhooks:write alone otherwise. ' +
    'A sender needs only webhooks:write.',
});
export const KeyName = Type.String({ maxLength: 200, description: 'What the key is for (who uses it).' });
const IntegrationParams = Type.Object({ integration_id: Id('int') });
const IntegrationKeyParams = Type.Object({ integration_id: Id('int'), key_id: Id('key') });

/** /api/v1/integrations/:id/keys: an integration's API keys. */
export async function keyRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Keys'];

  /** The integration's keys as the API shows them, with their requests of the last 24 hours. */
  const present = async (companyId: string, integrationId: string, keys: KeyDetails[]) => {
    const now = Date.now();
    const counts = await deps.store.countKeyRequests(companyId, integrationId, keys.map((k) => k.id), now - DAY_MS);
    return keys.map((key) => ({
      ...presentKeyCommon(key, now),
      last_used_at: iso(key.lastUsedAt),
      last_used_ip: key.lastUsedIp,
      requests_24h: counts.get(key.id) ?? 0,
    }));
  };
  const presentOne = async (companyId: string, integrationId: string, keyId: string) => {
    const key = await deps.store.getKey(companyId, integrationId, keyId);
    if (!key) throw new AppError('not_found', `No key with id ${keyId} in integration ${integrationId}.`);
    return (await present(companyId, integrationId, [key]))[0]!;
  };

  app.get(
    '/integrations/:integration_id/keys',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags,
        summary: 'List an integration’s keys',
        description: 'Newest first, revoked and expired ones too. Never the keys themselves: only their prefix.',
        params: IntegrationParams,
        querystring: Type.Object(PageQuery),
        response: { 200: Page(IntegrationKeySchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const integrationId = request.params.integration_id;
      if (!(await deps.store.getIntegration(companyId, integrationId))) {
        throw new AppError('not_found', `No integration with id ${integrationId}.`);
      }
      const page = await pageOf(
        request.query,
        (query) => deps.store.listKeys(companyId, integrationId, query),
        (last) => ({ at: last.createdAt, id: last.id }),
      );
      return { data: await present(companyId, integrationId, page.items), next_cursor: page.next_cursor };
    },
  );

  app.post(
    '/integrations/:integration_id/keys',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Create another key for an integration',
        description:
          'A key beside the integration’s others (for a second sender, say); they keep working. To replace the keys, rotate instead.',
        params: IntegrationParams,
        body: Type.Object({
          name: Type.Optional(KeyName),
          expires_at: Type.Optional(Type.String({ format: 'date-time', description: 'When the key stops working; never when absent.' })),
          scopes: Type.Optional(IntegrationKeyScopes),
        }),
        response: { 201: Type.Object({ key: IntegrationKeySchema, api_key: ShownOnce }), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      const integrationId = request.params.integration_id;
      const { name, expires_at, scopes } = request.body;
      const created = await managementFor(deps, request).createIntegrationKey(companyId, integrationId, {
        name,
        expiresAt: expires_at === undefined ? null : parseTime(expires_at, 'expires_at'),
        scopes: issuableIntegrationScopes(principalOf(request).permissions, scopes),
      });
      return reply.code(201).send({ key: await presentOne(companyId, integrationId, created.id), api_key: created.apiKey });
    },
  );

  app.post(
    '/integrations/:integration_id/keys/rotate',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Rotate an integration’s keys',
        description:
          'Issues a new key; every other live key of the integration keeps working for the grace period, then stops ' +
          '(on every node within a second). See a key’s callers to find who still sends with an old one.',
        params: IntegrationParams,
        // Null stands for no body at all (Fastify validates an absent body as null).
        body: Type.Union([
          Type.Object({
            grace_seconds: Type.Optional(
              Type.Integer({
                minimum: 0,
                maximum: MAX_ROTATION_GRACE_SECONDS,
                description: `How long the old keys keep working: 0 (stop now) to 604800 (7 days); ${DEFAULT_ROTATION_GRACE_SECONDS} when absent.`,
              }),
            ),
            scopes: Type.Optional(IntegrationKeyScopes),
          }),
          Type.Null(),
        ]),
        response: {
          201: Type.Object({
            key: IntegrationKeySchema,
            api_key: ShownOnce,
            previous_keys_expire_at: Timestamp,
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      const integrationId = request.params.integration_id;
      const grace = request.body?.grace_seconds ?? DEFAULT_ROTATION_GRACE_SECONDS;
      const scopes = issuableIntegrationScopes(principalOf(request).permissions, request.body?.scopes);
      const rotated = await managementFor(deps, request).rotateIntegrationKey(companyId, integrationId, grace, scopes);
      return reply.code(201).send({
        key: await presentOne(companyId, integrationId, rotated.id),
        api_key: rotated.apiKey,
        previous_keys_expire_at: iso(rotated.previousKeyExpiresAt),
      });
    },
  );

  app.post(
    '/integrations/:integration_id/keys/:key_id/revoke',
    {
      config: { permission: 'integrations:manage' },
      schema: {
        tags,
        summary: 'Revoke an integration’s key',
        description: 'The key stops working on every node within a second. Revoking a revoked key changes nothing.',
        params: IntegrationKeyParams,
        response: { 200: IntegrationKeySchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const { integration_id: integrationId, key_id: keyId } = request.params;
      const revoked = await managementFor(deps, request).revokeIntegrationKey(companyId, integrationId, keyId);
      return (await present(companyId, integrationId, [revoked]))[0];
    },
  );

  app.get(
    '/integrations/:integration_id/keys/:key_id/callers',
    {
      // Senders' addresses and user agents come from the request log: reading them is reading logs.
      config: { permission: 'logs:read' },
      schema: {
        tags,
        summary: 'Who uses a key',
        description:
          'The distinct senders (IP and user agent) of requests with this key to the integration’s address in the last 7 days, ' +
          'most recent first: during a rotation’s grace period, who still has to switch to the new key. Not paged: the `limit` most recent. ' +
          'Needs logs:read (it comes from the request log).',
        params: IntegrationKeyParams,
        querystring: Type.Object({ limit: PageQuery.limit }),
        response: {
          200: Type.Object({
            data: Type.Array(
              Type.Object({
                ip: Type.String(),
                user_agent: Type.Union([Type.String(), Type.Null()]),
                last_seen_at: Timestamp,
                requests: Type.Integer({ description: 'Requests from this sender in the window, refused ones too.' }),
              }),
            ),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const { integration_id: integrationId, key_id: keyId } = request.params;
      if (!(await deps.store.getKey(companyId, integrationId, keyId))) {
        throw new AppError('not_found', `No key with id ${keyId} in integration ${integrationId}.`);
      }
      const callers = await deps.store.listKeyCallers(companyId, integrationId, keyId, {
        since: Date.now() - CALLERS_WINDOW_MS,
        limit: request.query.limit,
      });
      return {
        data: callers.map((c) => ({ ip: c.ip, user_agent: c.userAgent, last_seen_at: iso(c.lastSeenAt), requests: c.requests })),
      };
    },
  );

}

/** The fields of KeyCommon, for a key at `now`. */
export function presentKeyCommon(key: KeyDetails, now: number) {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    scopes: key.scopes,
    created_at: iso(key.createdAt),
    expires_at: iso(key.expiresAt),
    revoked_at: iso(key.revokedAt),
    status: keyStatus(key, now),
  };
}
