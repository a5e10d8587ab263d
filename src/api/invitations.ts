import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { newId } from '../domain/ids.js';
import { AppError } from '../errors.js';
import { Invitations } from '../services/invitations.js';
import type { Actor, Invitation } from '../store/store.js';
import { describeSession, SessionSchema, startSession, userAgentOf } from './auth.js';
import { noContent, optionalSession, principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, ErrorResponse, Id, Page, PageQuery, RoleSchema, Timestamp, iso, pageOf } from './schemas.js';

export const InvitationSchema = Type.Object(
  {
    id: Id('inv'),
    email: Type.String({ description: 'Only the account with this email can accept.' }),
    role: RoleSchema,
    invited_by: Type.Union([Type.Object({ user_id: Id('usr'), email: Type.String() }), Type.Null()]),
    created_at: Timestamp,
    expires_at: Timestamp,
  },
  { $id: 'Invitation' },
);

const Token = Type.String({ minLength: 1, maxLength: 200, description: 'The `token` of the invitation link.' });

/**
 * /api/v1/invitations: how people join a company. Owners invite and revoke; every member
 * sees the pending ones; the link's holder looks it up and accepts it, with an account of
 * their own (never one another person chose the password of).
 */
export async function invitationRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Members'];
  const invitationsFor = (actor: Actor) =>
    new Invitations(deps.store, { baseUrl: deps.config.baseUrl, mailer: deps.mailer, guard: deps.guard }, actor);

  app.get(
    '/invitations',
    {
      config: { permission: 'members:read' },
      schema: {
        tags,
        summary: 'List pending invitations',
        description: 'Not yet accepted, revoked or expired; newest first. Any member; management keys may not.',
        querystring: Type.Object(PageQuery),
        response: { 200: Page(InvitationSchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const now = Date.now();
      const page = await pageOf(
        request.query,
        (query) => deps.store.listInvitations(companyId, query, now),
        (last) => ({ at: last.createdAt, id: last.id }),
      );
      return { data: page.items.map(presentInvitation), next_cursor: page.next_cursor };
    },
  );

  app.post(
    '/invitations',
    {
      config: { permission: 'members:manage' },
      schema: {
        tags,
        summary: 'Invite someone',
        description:
          'Owners only. The link (`invite_url`) is in this answer only, and is emailed to the person when SMTP is ' +
          'configured (`emailed`); it works once, for 7 days, and only for the account with this email. The answer is the ' +
          'same whether or not the email has an account. A new invitation to the same email replaces a pending one ' +
          '(its link stops working). 409 when the person is already a member, or when 100 invitations are pending.',
        body: Type.Object({ email: Type.String({ minLength: 3, maxLength: 320 }), role: RoleSchema }),
        response: {
          201: Type.Object({
            invitation: InvitationSchema,
            invite_url: Type.String({ description: 'The one-time link: shown this once.' }),
            emailed: Type.Boolean({ description: 'Whether an email with the link went to the person.' }),
          }),
          ...ERROR_RESPONSES,
          409: ErrorResponse,
        },
      },
    },
    async (request, reply) => {
      const { companyId, actor } = principalOf(request);
      const created = await invitationsFor(actor).invite(companyId, request.body);
      return reply
        .code(201)
        .send({ invitation: presentInvitation(created.invitation), invite_url: created.inviteUrl, emailed: created.emailed });
    },
  );

  app.delete(
    '/invitations/:invitation_id',
    {
      config: { permission: 'members:manage' },
      schema: {
        tags,
        summary: 'Revoke an invitation',
        description: 'Owners only. Its link stops working at once. 404 when it is not pending.',
        params: Type.Object({ invitation_id: Id('inv') }),
        response: { 204: Type.Null(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const { companyId, actor } = principalOf(request);
      await invitationsFor(actor).revoke(companyId, request.params.invitation_id);
      return noContent(reply);
    },
  );

  app.post(
    '/invitations/lookup',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'What an invitation link is for',
        description:
          'For the page the link opens: the company, the role, who invited and until when. 403 `invitation_invalid` when ' +
          'the link is wrong, used, revoked or expired. (A POST, so the token is not in a URL.)',
        security: [],
        body: Type.Object({ token: Token }),
        response: {
          200: Type.Object({
            company_name: Type.String(),
            role: RoleSchema,
            email: Type.String(),
            invited_by: Type.Union([Type.String(), Type.Null()], { description: "The inviter's email." }),
            expires_at: Timestamp,
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const invitation = await invitationsFor({ type: 'user', id: null, ip: request.ip }).lookup(request.body.token);
      return {
        company_name: invitation.companyName,
        role: invitation.role,
        email: invitation.email,
        invited_by: invitation.invitedBy?.email ?? null,
        expires_at: iso(invitation.expiresAt),
      };
    },
  );

  app.post(
    '/invitations/accept',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Accept an invitation',
        description:
          'Signed in (session cookie and X-CSRF-Token), without `password`: joins as you; 403 `invitation_wrong_account` ' +
          "when your email is not the invitation's. Signed out, with `password`: makes your account with the invitation's " +
          'email and this password (at least 12 characters), joins, and signs you in; 409 when an account with that email ' +
          'exists already (sign in, then accept). Either way the link is used up.',
        security: [],
        body: Type.Object({
          token: Token,
          password: Type.Optional(Type.String({ maxLength: 1024, description: 'For a new account only.' })),
        }),
        response: { 200: SessionSchema, ...ERROR_RESPONSES, 409: ErrorResponse, 503: ErrorResponse },
      },
    },
    async (request, reply) => {
      const { token, password } = request.body;
      const session = await optionalSession(deps, request);
      if (session) {
        await invitationsFor(actorOf(request, session.userId)).accept(token, { userId: session.userId });
        return describeSession(deps, session.userId, session.csrfToken);
      }
      if (password === undefined) {
        throw new AppError('invalid_request', 'Sign in to accept with your account, or send a password to make a new one.', {
          field: 'password',
        });
      }
      const newUserId = newId('usr');
      const joined = await invitationsFor(actorOf(request, newUserId)).accept(token, { newUserId, password, ip: request.ip });
      return startSession(deps, reply, await deps.sessions.start({ id: joined.userId, email: joined.email }, request.ip, userAgentOf(request)));
    },
  );
}

function actorOf(request: FastifyRequest, userId: string): Actor {
  return { type: 'user', id: userId, ip: request.ip };
}

function presentInvitation(invitation: Invitation) {
  return {
    id: invitation.id,
    email: invitation.email,
    role: invitation.role,
    invited_by: invitation.invitedBy && { user_id: invitation.invitedBy.userId, email: invitation.invitedBy.email },
    created_at: iso(invitation.createdAt),
    expires_at: iso(invitation.expiresAt),
  };
}
