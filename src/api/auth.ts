import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { newPasswordHash } from '../admin/accounts.js';
import { linkTokenHash } from '../admin/links.js';
import { ABSOLUTE_TIMEOUT_MS, SESSION_COOKIE, type SignedIn } from '../admin/sessions.js';
import { newId } from '../domain/ids.js';
import { Management } from '../services/management.js';
import type { AppInstance } from '../app-instance.js';
import { AppError } from '../errors.js';
import { managementOptions, noContent, principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, ErrorResponse, Id, iso, RoleSchema, Timestamp } from './schemas.js';

export const SessionSchema = Type.Object(
  {
    user: Type.Object({
      id: Id('usr'),
      email: Type.String(),
      two_factor_enabled: Type.Boolean({ description: 'Whether signing in asks for a code from an authenticator app.' }),
    }),
    companies: Type.Array(
      Type.Object({
        id: Id('cmp'),
        name: Type.String(),
        role: RoleSchema,
        requires_two_factor: Type.Boolean({
          description: 'The company requires two-factor sign-in: without it, its routes answer 403 two_factor_setup_required.',
        }),
      }),
    ),
    csrf_token: Type.String({ description: 'Send it back as X-CSRF-Token on every request that changes something.' }),
    environment: Type.String({ description: 'development, staging or production.' }),
  },
  { $id: 'Session' },
);

/** The answer to a right password of an account with two-factor sign-in, before its code. */
const TwoFactorStep = Type.Object(
  {
    two_factor_required: Type.Literal(true),
    message: Type.String(),
  },
  { $id: 'TwoFactorStep', description: 'Send the same body again with `two_factor_code`.' },
);

const Password = (description: string) => Type.String({ maxLength: 1024, description });
const Token = Type.String({ minLength: 1, maxLength: 200, description: 'The `token` of the link.' });

/** Who is signed in, their companies, the CSRF token: the answer of every route that starts or reads a session. */
export async function describeSession(deps: ApiDeps, userId: string, csrfToken: string) {
  const user = await deps.store.findUserById(userId);
  if (!user) throw new AppError('not_signed_in');
  return {
    user: { id: user.id, email: user.email, two_factor_enabled: user.totpSecret !== null },
    companies: (await deps.store.listMembershipsOfUser(userId)).map((m) => ({
      id: m.companyId,
      name: m.companyName,
      role: m.role,
      requires_two_factor: m.requiresTwoFactor,
    })),
    csrf_token: csrfToken,
    environment: deps.config.environment,
  };
}

/** Sets the new session's cookie and answers with the session. */
export function startSession(deps: ApiDeps, reply: FastifyReply, signedIn: SignedIn) {
  reply.setCookie(SESSION_COOKIE, signedIn.cookieValue, {
    path: '/',
    httpOnly: true,
    // Lax: the cookie goes with top-level navigation to the panel, not with cross-site
    // POSTs; the CSRF token covers the rest.
    sameSite: 'lax',
    secure: deps.config.baseUrl.startsWith('https://'),
    maxAge: ABSOLUTE_TIMEOUT_MS / 1000,
  });
  return describeSession(deps, signedIn.user.id, signedIn.session.csrfToken);
}

/**
 * /api/v1/auth: sign-in, first-run setup, the session, sign-out, and the password reset a
 * signed-out person asks for. A script signs in the same way: POST the credentials, keep
 * the cookie, send the CSRF token back on changes.
 */
export async function authRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Sessions'];
  const clearCookie = (reply: FastifyReply) =>
    reply.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'lax', secure: deps.config.baseUrl.startsWith('https://') });

  app.post(
    '/auth/login',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Sign in',
        description:
          'Starts a session: a new HttpOnly cookie, ending after 12 hours unused or 7 days in all. The message never says ' +
          'which of email or password was wrong. An account with two-factor sign-in answers a right password without ' +
          '`two_factor_code` with 202 `{"two_factor_required": true, "message": …}` and no session: a step, not an error. ' +
          'Send the same body again with the code (or a recovery code). Attempts ' +
          'are counted before the password is checked: 5 failures per account and 20 per address in 15 minutes, then 429. ' +
          'Passwords are checked a few at a time: 429 when this address has two being checked, 503 when the server is busy ' +
          'with others, both at once and with Retry-After.',
        security: [],
        body: Type.Object({
          email: Type.String({ maxLength: 320 }),
          password: Password('The password.'),
          two_factor_code: Type.Optional(Type.String({ maxLength: 64, description: 'The 6-digit code of the app, or a recovery code.' })),
        }),
        response: { 200: SessionSchema, 202: TwoFactorStep, ...ERROR_RESPONSES, 503: ErrorResponse },
      },
    },
    async (request, reply) => {
      const { email, password, two_factor_code } = request.body;
      const result = await deps.signIn.signIn({ email, password, twoFactorCode: two_factor_code }, request.ip, userAgentOf(request));
      if ('twoFactorRequired' in result) {
        return reply.code(202).send({
          two_factor_required: true,
          message: 'Enter the 6-digit code from your authenticator app, or one of your recovery codes.',
        });
      }
      return startSession(deps, reply, result);
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
          'company and its first owner, and signs them in. A link works for 24 hours, only while nobody has an account, ' +
          'and the first use ends every setup link printed.',
        security: [],
        body: Type.Object({
          token: Token,
          company_name: Type.String({ maxLength: 200 }),
          email: Type.String({ maxLength: 320 }),
          password: Password('At least 12 characters.'),
        }),
        response: { 200: SessionSchema, ...ERROR_RESPONSES, 503: ErrorResponse },
      },
    },
    async (request, reply) => {
      const ownerId = newId('usr');
      const management = new Management(deps.store, managementOptions(deps.config), { type: 'user', id: ownerId, ip: request.ip });
      const { owner } = await management.completeSetup(
        linkTokenHash(request.body.token),
        { companyName: request.body.company_name, email: request.body.email, password: request.body.password, ownerId },
        (password) => newPasswordHash(deps.guard, password, request.ip),
      );
      return startSession(deps, reply, await deps.sessions.start(owner, request.ip, userAgentOf(request)));
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
      return describeSession(deps, session.userId, session.csrfToken);
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

  app.post(
    '/auth/password-reset',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Ask for a password reset link',
        description:
          'Always 202 with the same answer, whether or not the email has an account. With SMTP configured ' +
          '(INTAKE_SMTP_URL), an account with this email is sent a link that works once, for an hour (at most 3 emails ' +
          'an hour per account). Without SMTP nothing is sent: the operator prints a link with ' +
          '`intake user reset-password --email E`. 10 requests an hour per address, then 429.',
        security: [],
        body: Type.Object({ email: Type.String({ maxLength: 320 }) }),
        response: { 202: Type.Object({ message: Type.String() }), ...ERROR_RESPONSES },
      },
    },
    async (request, reply) => {
      deps.accounts.requestPasswordReset(request.body.email, request.ip);
      const message = deps.mailer.enabled
        ? 'If an account has this email, a link to choose a new password is on its way. It works once, for an hour.'
        : 'This installation sends no email: ask its operator for a reset link (intake user reset-password --email …).';
      return reply.code(202).send({ message });
    },
  );

  app.post(
    '/auth/password-reset/check',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Check a reset link',
        description:
          'For the page the link opens (`/admin/reset-password?token=…`): the email of the account whose password it sets, ' +
          'and until when it works. Reading it does not use it up. A wrong, used or expired link is 403 ' +
          '`reset_link_invalid`. (A POST, so the token is not in a URL.)',
        security: [],
        body: Type.Object({ token: Token }),
        response: { 200: Type.Object({ email: Type.String(), expires_at: Timestamp }), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const reset = await deps.accounts.checkPasswordReset(request.body.token);
      return { email: reset.email, expires_at: iso(reset.expiresAt) };
    },
  );

  app.post(
    '/auth/password-reset/complete',
    {
      config: { public: true },
      schema: {
        tags,
        summary: 'Choose a new password with a reset link',
        description:
          'Uses up the link (`/admin/reset-password?token=…`) and sets the password; every session of the account ends, ' +
          'so sign in again (with the two-factor code when it is on: a reset does not turn it off). A wrong, used or ' +
          'expired link is 403 `reset_link_invalid`. In the audit log of each company of the account as ' +
          '`account.password_reset`.',
        security: [],
        body: Type.Object({ token: Token, password: Password('At least 12 characters.') }),
        response: { 204: Type.Null(), ...ERROR_RESPONSES, 503: ErrorResponse },
      },
    },
    async (request, reply) => {
      await deps.accounts.completePasswordReset(request.body.token, request.body.password, request.ip);
      return noContent(reply);
    },
  );
}

export function userAgentOf(request: FastifyRequest): string | null {
  return request.headers['user-agent'] ?? null;
}

/** The session of a sessionOnly route. */
export function sessionOf(request: FastifyRequest) {
  const { session } = principalOf(request);
  if (!session) throw new Error('a sessionOnly route ran without a session');
  return session;
}
