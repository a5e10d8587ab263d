import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { MANAGEMENT_SCOPES } from '../domain/api-key.js';
import type { KeyDetails } from '../store/store.js';
import { managementFor, principalOf, type ApiDeps } from './context.js';
import { KeyCommon, KeyName, ShownOnce, presentKeyCommon } from './keys.js';
import { ERROR_RESPONSES, Id, NullableTimestamp, Page, PageQuery, iso, pageOf } from './schemas.js';

export const ManagementKeySchema = Type.Object(
  {
    ...KeyCommon,
    scopes: Type.Array(Type.String(), { description: 'integrations:manage and/or logs:read, for the whole company.' }),
    last_used_at: NullableTimestamp,
    last_used_ip: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'ManagementKey' },
);

const OWNERS_ONLY =
  'Owners only (permission members:manage): a management key gives API access to the whole company, so who holds one ' +
  'is decided like who is a member. No management key can call this, so a leaked key cannot mint another or revoke the others.';

/** /api/v1/management-keys: the company's keys for this API. */
export async function managementKeyRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Management keys'];
  const present = (key: KeyDetails) => ({
    ...presentKeyCommon(key, Date.now()),
    last_used_at: iso(key.lastUsedAt),
    last_used_ip: key.lastUsedIp,
  });

  app.get(
    '/management-keys',
    {
      config: { permission: 'members:manage' },
      schema: {
        tags,
        summary: 'List management keys',
        description: `Newest first, revoked ones too; only their prefix. ${OWNERS_ONLY}`,
        querystring: Type.Object(PageQuery),
        response: { 200: Page(ManagementKeySchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const page = await pageOf(
        request.query,
        (query) => deps.store.listKeys(companyId, null, query),
        (last) => ({ at: last.createdAt, id: last.id }),
      );
      return { data: page.items.map(present), next_cursor: page.next_cursor };
    },
  );

  app.post(
    '/management-keys',
    {
      config: { permission: 'members:manage' },
      schema: {
        tags,
        summary: 'Create a management key',
        description: `A key for scripts calling this API for the company (X-API-Key). ${OWNERS_ONLY}`,
        body: Type.Object({
          name: Type.Optional(KeyName),
          scopes: Type.Array(Type.Union(MANAGEMENT_SCOPES.map((s) => Type.Literal(s))), {
            minItems: 1,
            description: 'integrations:manage (integrations and their keys) and/or logs:read (webhooks, request log, usage).',
          }),
        }),
        response: { 201: Type.Object({ key: ManagementKeySchema, api_key: ShownOnce }), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      const created = await managementFor(deps, request).createManagementKey(companyId, request.body.scopes, request.body.name);
      const key = await deps.store.getKey(companyId, null, created.id);
      if (!key) throw new Error('a management key just created is not found');
      return reply.code(201).send({ key: present(key), api_key: created.apiKey });
    },
  );

  app.post(
    '/management-keys/:key_id/revoke',
    {
      config: { permission: 'members:manage' },
      schema: {
        tags,
        summary: 'Revoke a management key',
        description: `The key stops working on every node within a second. ${OWNERS_ONLY}`,
        params: Type.Object({ key_id: Id('key') }),
        response: { 200: ManagementKeySchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      return present(await managementFor(deps, request).revokeManagementKey(companyId, request.params.key_id));
    },
  );
}
