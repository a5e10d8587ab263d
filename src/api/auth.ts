import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { ABSOLUTE_TIMEOUT_MS, SESSION_COOKIE, type SignedIn } from '../admin/sessions.js';
import { setupTokenHash } from '../admin/setup.js';
import { newId } from '../domain/ids.js';
import { Management } from '../services/management.js';
import type { AppInstance } from '../app.js';
import { AppError } from '../errors.js';
import { managementOptions, noContent, principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, ErrorResponse, Id, RoleSchema } from './schemas.js';

const SessionSchema = Type.Object(
  {
    user: Type.Object({ id: Id('usr'), email: Type.String() }),
    companies: Type.Array(
      Type.Object({ id: Id('cmp'), name: Type.String(), role: RoleSchema }),
    ),
    csrf_token: Type.String({ description: 'Send it back as X-CSRF-Token on every request that changes something.' }),
    environment: Type.String({ description: 'development, staging or production.' }),
  },
  { $id: 'Session' },
);

/**
 * /api/v1/auth: panel sign-in. A script signs in the same way: POST the credentials, keep
 * the cookie, send the CSRF token back on changes.
 */
export async function authRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Sessions'];
  const secure = deps.config.baseUrl.startsWith('https://');

  const describe = async (userId: string, email: string, csrfToken: string) => ({
    user: { id: userId, email },
    companies: (await deps.store.listMembershipsOfUser(userId)).map((m) => ({ id: m.companyId, name: m.companyName, role: m.role })),
    csrf_token: csrfToken,
    environment: deps.config.environment,
  });
  const startSession = (reply: FastifyReply, signedIn: SignedIn) => {
    reply.setCookie(SESSION_COOKIE, signedIn.cookieValue, {
      path: '/',
      httpOnly: true,
      // Lax: the cookie goes with top-level navigation to the panel, not with cross-site
      // POSTs; the CSRF token covers the rest.
      sameSite: 'lax',
      secure,
      maxAge: ABSOLUTE_TIMEOUT_MS / 1000,
    });
    return describe(signedIn.user.id, signedIn.user.email, signedIn.session.csrfToken);
  };
  const clearCookie = (reply: FastifyReply) => reply.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'lax', secure });

  app.post(
    '/auth/login',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Sign in',
        description:
          'Starts a session: a new HttpOnly cookie, ending after 12 hours unused or 7 days in all. ' +
          'Failed sign-ins are limited per account and per IP (429). The message never says which of email or password was wrong.',
        security: [],
        body: Type.Object({ email: Type.String({ maxLength: 320 }), password: Type.String({ maxLength: 1024 }) }),
        response: { 200: SessionSchema, ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      const signedIn = await deps.sessions.signIn(request.body.email, request.body.password, request.ip, userAgentOf(request));
      return startSession(reply, signedIn);
    },
  );

  app.post(
    '/auth/setup',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'First-run setup',
        description:
          'Uses the one-time setup link the server printed on its first start (`/admin/setup?token=…`): creates the ' +
          'company and its first owner, and signs them in. A link works once, for 24 hours.',
        security: [],
        body: Type.Object({
          token: Type.String({ minLength: 1, maxLength: 200, description: 'The `token` of the setup link.' }),
          company_name: Type.String({ maxLength: 200 }),
          email: Type.String({ maxLength: 320 }),
          password: Type.String({ maxLength: 1024, description: 'At least 12 characters.' }),
        }),
        response: { 200: SessionSchema, ...ERROR_RESPONSES, 409: ErrorResponse },
      },
    },
    async (request, reply) => {
      const ownerId = newId('usr');
      const management = new Management(deps.store, managementOptions(deps.config), { type: 'user', id: ownerId, ip: request.ip });
      const { owner } = await management.completeSetup(setupTokenHash(request.body.token), {
        companyName: request.body.company_name,
        email: request.body.email,
        password: request.body.password,
        ownerId,
      });
      return startSession(reply, await deps.sessions.start(owner, request.ip, userAgentOf(request)));
    },
  );

  app.get(
    '/auth/session',
    {
      config: { sessionOnly: true },
      schema: {
        tags,
        summary: 'The current session',
        description: 'Who is signed in, their companies and roles, and the CSRF token. Needs a session cookie.',
        security: [{ session: [] }],
        response: { 200: SessionSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const session = sessionOf(request);
      const user = await deps.store.findUserById(session.userId);
      if (!user) throw new AppError('not_signed_in');
      return describe(user.id, user.email, session.csrfToken);
    },
  );

  app.post(
    '/auth/logout',
    {
      config: { sessionOnly: true },
      schema: {
        tags,
        summary: 'Sign out',
        security: [{ session: [] }],
        response: { 204: Type.Null(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      await deps.sessions.signOut(sessionOf(request));
      clearCookie(reply);
      return noContent(reply);
    },
  );

  app.post(
    '/auth/logout-everywhere',
    {
      config: { sessionOnly: true },
      schema: {
        tags,
        summary: 'Sign out on every device',
        description: 'Ends every session of the signed-in user.',
        security: [{ session: [] }],
        response: { 204: Type.Null(), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      await deps.sessions.signOutEverywhere(sessionOf(request).userId);
      clearCookie(reply);
      return noContent(reply);
    },
  );
}

function userAgentOf(request: FastifyRequest): string | null {
  return request.headers['user-agent'] ?? null;
}

function sessionOf(request: FastifyRequest) {
  const { session } = principalOf(request);
  if (!session) throw new Error('a sessionOnly route ran without a session');
  return session;
}
