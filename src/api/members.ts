import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { AppError } from '../errors.js';
import type { Member } from '../store/store.js';
import { managementFor, noContent, principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, ErrorResponse, Id, Page, PageQuery, RoleSchema, Timestamp, iso, pageOf } from './schemas.js';

export const MemberSchema = Type.Object(
  {
    user_id: Id('usr'),
    email: Type.String(),
    role: RoleSchema,
    added_at: Timestamp,
    last_owner: Type.Boolean({
      description: 'The only owner: neither removed nor made admin or viewer (409) until another member is an owner.',
    }),
  },
  { $id: 'Member' },
);

const MemberParams = Type.Object({ user_id: Id('usr') });

const ACCESS_NOTE =
  'Membership is checked on every request, so a change of role or a removal holds from the next request of ' +
  "the person's sessions; their sessions themselves go on (a session is a person's, not a company's).";

/**
 * /api/v1/members: who may use the company, with which role. People join by invitation
 * (invitations.ts); owners change roles and remove members; every member reads the list;
 * management keys never reach it (a leaked key cannot let anyone in).
 */
export async function memberRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Members'];

  app.get(
    '/members',
    {
      config: { permission: 'members:read' },
      schema: {
        tags,
        summary: 'List members',
        description: 'Newest first. Any member may read it; management keys may not.',
        querystring: Type.Object(PageQuery),
        response: { 200: Page(MemberSchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const page = await pageOf(
        request.query,
        (query) => deps.store.listMembers(companyId, query),
        (last) => ({ at: last.addedAt, id: last.userId }),
      );
      const owners = await deps.store.countOwners(companyId);
      return { data: page.items.map((member) => presentMember(member, owners)), next_cursor: page.next_cursor };
    },
  );

  app.get(
    '/members/:user_id',
    {
      config: { permission: 'members:read' },
      schema: {
        tags,
        summary: 'Read a member',
        params: MemberParams,
        response: { 200: MemberSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const member = await deps.store.getMember(companyId, request.params.user_id);
      if (!member) throw new AppError('not_found', `No member with id ${request.params.user_id}.`);
      return presentMember(member, await deps.store.countOwners(companyId));
    },
  );

  app.patch(
    '/members/:user_id',
    {
      config: { permission: 'members:manage' },
      schema: {
        tags,
        summary: "Change a member's role",
        description: `Owners only. A company always keeps an owner: demoting the last one is a 409. ${ACCESS_NOTE}`,
        params: MemberParams,
        body: Type.Object({ role: RoleSchema }),
        response: { 200: MemberSchema, ...ERROR_RESPONSES, 409: ErrorResponse },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const member = await managementFor(deps, request).changeMemberRole(companyId, request.params.user_id, request.body.role);
      return presentMember(member, await deps.store.countOwners(companyId));
    },
  );

  app.delete(
    '/members/:user_id',
    {
      config: { permission: 'members:manage' },
      schema: {
        tags,
        summary: 'Remove a member',
        description:
          'Owners only; an owner may remove themselves while another owner remains. Removing the last owner is a 409. ' +
          `The account itself stays (it may belong to other companies). ${ACCESS_NOTE}`,
        params: MemberParams,
        response: { 204: Type.Null(), ...ERROR_RESPONSES, 409: ErrorResponse },
      },
    },
    async (request, reply) => {
      const { companyId } = principalOf(request);
      await managementFor(deps, request).removeMember(companyId, request.params.user_id);
      return noContent(reply);
    },
  );
}

function presentMember(member: Member, owners: number) {
  return {
    user_id: member.userId,
    email: member.email,
    role: member.role,
    added_at: iso(member.addedAt),
    last_owner: member.role === 'owner' && owners <= 1,
  };
}
