import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { sessionOf } from './auth.js';
import { noContent, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, ErrorResponse, Id, Timestamp, iso } from './schemas.js';

const Password = (description: string) => Type.String({ maxLength: 1024, description });
const RecoveryCodes = Type.Object({
  recovery_codes: Type.Array(Type.String(), {
    description: 'Ten one-time codes, each good for one sign-in without the app. Shown this once: keep them somewhere safe.',
  }),
});
const CHANGE_RESPONSES = { ...ERROR_RESPONSES, 409: ErrorResponse, 503: ErrorResponse };

/**
 * /api/v1/account: the signed-in person's own account (a session only, never a key):
 * password and two-factor sign-in. Not a company's: each change goes into the audit log of
 * every company the person belongs to (`account.*`, by and of the user).
 */
export async function accountRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Account'];
  const config = { sessionOnly: true } as const;
  const security = [{ session: [] }];

  app.get(
    '/account',
    {
      config,
      schema: {
        tags,
        summary: 'Your account',
        security,
        response: {
          200: Type.Object({
            id: Id('usr'),
            email: Type.String(),
            two_factor_enabled: Type.Boolean(),
            recovery_codes_left: Type.Integer({ description: 'Unused recovery codes (0 while two-factor is off).' }),
            created_at: Timestamp,
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      const account = await deps.accounts.describe(sessionOf(request).userId);
      return {
        id: account.id,
        email: account.email,
        two_factor_enabled: account.twoFactorEnabled,
        recovery_codes_left: account.recoveryCodesLeft,
        created_at: iso(account.createdAt),
      };
    },
  );

  app.post(
    '/account/password',
    {
      config,
      schema: {
        tags,
        summary: 'Change your password',
        description:
          'Needs the current password (a wrong one counts as a failed sign-in). Every other session of the account ends; ' +
          'this one goes on. In the audit log of each of your companies as `account.password_change`.',
        security,
        body: Type.Object({ current_password: Password('Your password now.'), new_password: Password('At least 12 characters.') }),
        response: { 204: Type.Null(), ...CHANGE_RESPONSES },
      },
    },
    async (request, reply) => {
      const session = sessionOf(request);
      await deps.accounts.changePassword(
        session.userId,
        { currentPassword: request.body.current_password, newPassword: request.body.new_password },
        request.ip,
        session.idHash,
      );
      return noContent(reply);
    },
  );

  app.post(
    '/account/two-factor/setup',
    {
      config,
      schema: {
        tags,
        summary: 'Start two-factor setup',
        description:
          'A new TOTP secret for an authenticator app (scan `otpauth_uri` as a QR code, or type `secret`). Nothing changes ' +
          'until POST /account/two-factor/enable gets a code from it; calling this again starts over. 409 when it is on already.',
        security,
        response: {
          200: Type.Object({ secret: Type.String({ description: 'Base32.' }), otpauth_uri: Type.String() }),
          ...CHANGE_RESPONSES,
        },
      },
    },
    async (request) => {
      const started = await deps.accounts.startTwoFactor(sessionOf(request).userId);
      return { secret: started.secret, otpauth_uri: started.otpauthUri };
    },
  );

  app.post(
    '/account/two-factor/enable',
    {
      config,
      schema: {
        tags,
        summary: 'Turn two-factor sign-in on',
        description:
          'With a current code of the secret from setup. Answers the recovery codes, once. Every other session of the ' +
          'account ends (they did not pass the second factor). In the audit log of each of your companies as ' +
          '`account.two_factor_enable`.',
        security,
        body: Type.Object({ code: Type.String({ maxLength: 16, description: 'The 6 digits the app shows.' }) }),
        response: { 200: RecoveryCodes, ...CHANGE_RESPONSES },
      },
    },
    async (request) => {
      const session = sessionOf(request);
      return { recovery_codes: await deps.accounts.enableTwoFactor(session.userId, request.body.code, session.idHash, request.ip) };
    },
  );

  app.post(
    '/account/two-factor/disable',
    {
      config,
      schema: {
        tags,
        summary: 'Turn two-factor sign-in off',
        description:
          'Needs the password. 409 while a company of yours requires two-factor sign-in. In the audit log of each of your ' +
          'companies as `account.two_factor_disable`.',
        security,
        body: Type.Object({ password: Password('Your password.') }),
        response: { 204: Type.Null(), ...CHANGE_RESPONSES },
      },
    },
    async (request, reply) => {
      await deps.accounts.disableTwoFactor(sessionOf(request).userId, request.body.password, request.ip);
      return noContent(reply);
    },
  );

  app.post(
    '/account/two-factor/recovery-codes',
    {
      config,
      schema: {
        tags,
        summary: 'New recovery codes',
        description:
          'Needs the password. The old codes stop working. 409 when two-factor sign-in is off. In the audit log of each of ' +
          'your companies as `account.recovery_codes_renew`.',
        security,
        body: Type.Object({ password: Password('Your password.') }),
        response: { 200: RecoveryCodes, ...CHANGE_RESPONSES },
      },
    },
    async (request) => ({
      recovery_codes: await deps.accounts.renewRecoveryCodes(sessionOf(request).userId, request.body.password, request.ip),
    }),
  );
}
