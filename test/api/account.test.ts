import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { passwordResetLink } from '../../src/admin/accounts.js';
import { buildTestApp, testSecretBox, type TestApp } from '../helpers.js';
import { tokenOf, totpCode } from '../support/accounts.js';
import { PASSWORD, member, signIn, type SignedIn } from '../support/api.js';
import { runCliJson } from '../support/processes.js';

/**
 * The account's holder, and nobody else, decides its password and its second factor:
 * change (other sessions end), reset by a one-time link, TOTP two-factor sign-in with
 * recovery codes, and a company that requires it.
 */
let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, headers: Record<string, string> = {}, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });

async function person(role: 'owner' | 'admin' | 'viewer' = 'owner') {
  const companyId = (await t.management.createCompany('Accounts')).id;
  const signedIn = await member(t, companyId, role);
  const email = (await api('GET', '/account', signedIn.read)).json().email as string;
  return { companyId, email, ...signedIn };
}

/** Turns two-factor sign-in on for the signed-in person; the secret and the recovery codes. */
async function withTwoFactor(session: SignedIn) {
  const setup = await api('POST', '/account/two-factor/setup', session.change);
  expect(setup.statusCode, setup.body).toBe(200);
  const { secret, otpauth_uri } = setup.json<{ secret: string; otpauth_uri: string }>();
  expect(otpauth_uri).toMatch(/^otpauth:\/\/totp\/intake:.+\?.*secret=/);
  const enabled = await api('POST', '/account/two-factor/enable', session.change, { code: totpCode(secret) });
  expect(enabled.statusCode, enabled.body).toBe(200);
  return { secret, recoveryCodes: enabled.json<{ recovery_codes: string[] }>().recovery_codes };
}

const signInWith = (email: string, body: object = {}) =>
  api('POST', '/auth/login', {}, { email, password: PASSWORD, ...body });

describe('password change', () => {
  test('needs the current password; the old one stops working and every other session ends, this one goes on', async () => {
    const me = await person();
    const elsewhere = await signIn(t.app, me.email);
    const wrong = await api('POST', '/account/password', me.change, { current_password: 'not my password', new_password: 'a new passphrase here' });
    expect(wrong.statusCode).toBe(401);
    expect((await api('POST', '/account/password', me.change, { current_password: PASSWORD, new_password: 'short' })).json().field).toBe('new_password');
    const changed = await api('POST', '/account/password', me.change, { current_password: PASSWORD, new_password: 'a new passphrase here' });
    expect(changed.statusCode, changed.body).toBe(204);
    expect((await api('GET', '/auth/session', me.read)).statusCode).toBe(200);
    expect((await api('GET', '/auth/session', elsewhere.read)).statusCode).toBe(401);
    expect((await signInWith(me.email)).statusCode).toBe(401);
    await signIn(t.app, me.email, 'a new passphrase here');
  });

  test('a session cannot be used to guess the password: wrong current passwords count as failed sign-ins', async () => {
    const me = await person();
    for (let i = 0; i < 5; i++) {
      const response = await api('POST', '/account/password', me.change, { current_password: `guess ${i} guess`, new_password: 'whatever it may be' });
      expect(response.statusCode).toBe(401);
    }
    const throttled = await api('POST', '/account/password', me.change, { current_password: PASSWORD, new_password: 'whatever it may be' });
    expect(throttled.statusCode).toBe(429);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('password reset', () => {
  test('a link works once, for an hour, ends every session, and is kept only as a hash', async () => {
    const me = await person();
    const link = await passwordResetLink(t.store, t.config.baseUrl, (await t.store.findUserByEmail(me.email))!.id);
    expect(link).toMatch(new RegExp(`^${t.config.baseUrl}/admin/reset-password\\?token=[\\w-]{43}$`));
    const token = tokenOf(link);
    const rows = await t.database.query<{ token_hash: string }>('select token_hash from password_resets');
    expect(rows.map((r) => r.token_hash).join()).not.toContain(token);
    expect((await api('POST', '/auth/password-reset/complete', {}, { token, password: 'short' })).json().field).toBe('password');
    const reset = await api('POST', '/auth/password-reset/complete', {}, { token, password: 'chosen by the holder' });
    expect(reset.statusCode, reset.body).toBe(204);
    expect((await api('GET', '/auth/session', me.read)).statusCode).toBe(401);
    await signIn(t.app, me.email, 'chosen by the holder');
    const again = await api('POST', '/auth/password-reset/complete', {}, { token, password: 'chosen by someone else' });
    expect(again.statusCode).toBe(403);
    expect(again.json()).toMatchObject({ code: 'reset_link_invalid', error: 'Reset link not valid' });

    const late = tokenOf(await passwordResetLink(t.store, t.config.baseUrl, (await t.store.findUserByEmail(me.email))!.id, Date.now() - 60 * 60 * 1000 - 1));
    expect((await api('POST', '/auth/password-reset/complete', {}, { token: late, password: 'too late for this' })).statusCode).toBe(403);
    await signIn(t.app, me.email, 'chosen by the holder');
  });

  test('the page checks its link when it opens: the email for a usable link, without using it up; 403 for a used, expired or wrong one', async () => {
    const me = await person();
    const token = tokenOf(await passwordResetLink(t.store, t.config.baseUrl, (await t.store.findUserByEmail(me.email))!.id));
    const check = () => api('POST', '/auth/password-reset/check', {}, { token });
    for (let i = 0; i < 2; i++) {
      const checked = await check();
      expect(checked.statusCode, checked.body).toBe(200);
      expect(checked.json()).toEqual({ email: me.email, expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    }
    expect((await api('GET', '/auth/session', me.read)).statusCode).toBe(200);
    expect((await api('POST', '/auth/password-reset/complete', {}, { token, password: 'chosen after a check' })).statusCode).toBe(204);

    const late = tokenOf(await passwordResetLink(t.store, t.config.baseUrl, (await t.store.findUserByEmail(me.email))!.id, Date.now() - 60 * 60 * 1000 - 1));
    for (const refused of [await check(), await api('POST', '/auth/password-reset/check', {}, { token: late }), await api('POST', '/auth/password-reset/check', {}, { token: 'made-up' })]) {
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toMatchObject({ error: 'Reset link not valid', message: expect.any(String), code: 'reset_link_invalid' });
    }
    expect(Number((await check()).headers['ratelimit-remaining'])).toBeGreaterThanOrEqual(0);
  });

  test('the operator prints a link with the CLI: intake user reset-password --email', async () => {
    const me = await person();
    const { json: printed } = await runCliJson<{ reset_url: string }>(['user', 'reset-password', '--email', me.email.toUpperCase()], {
      INTAKE_DATABASE_URL: t.database.databaseUrl,
      INTAKE_BASE_URL: t.config.baseUrl,
    });
    const reset = await api('POST', '/auth/password-reset/complete', {}, { token: tokenOf(printed.reset_url), password: 'from the operator link' });
    expect(reset.statusCode, reset.body).toBe(204);
    await signIn(t.app, me.email, 'from the operator link');
  });

  test('asking for a link answers the same for any email, and without SMTP makes no link at all', async () => {
    const me = await person();
    const before = await t.database.query('select token_hash from password_resets');
    const known = await api('POST', '/auth/password-reset', {}, { email: me.email });
    const unknown = await api('POST', '/auth/password-reset', {}, { email: 'nobody-at-all@example.com' });
    expect(known.statusCode).toBe(202);
    expect(known.body).toBe(unknown.body);
    expect(known.json().message).toContain('intake user reset-password');
    expect(await t.database.query('select token_hash from password_resets')).toHaveLength(before.length);
  });
});

describe('two-factor sign-in', () => {
  test('setup, then sign-in asks for a code; a code and a recovery code each work once', async () => {
    const me = await person();
    const elsewhere = await signIn(t.app, me.email);
    const wrongCode = await api('POST', '/account/two-factor/setup', me.change);
    const badEnable = await api('POST', '/account/two-factor/enable', me.change, { code: '000000' === totpCode(wrongCode.json().secret) ? '111111' : '000000' });
    expect(badEnable.statusCode).toBe(401);
    const { secret, recoveryCodes } = await withTwoFactor(me);
    expect(recoveryCodes).toHaveLength(10);
    expect(new Set(recoveryCodes).size).toBe(10);
    // Sessions that never passed the second factor end; this one goes on.
    expect((await api('GET', '/auth/session', elsewhere.read)).statusCode).toBe(401);
    expect((await api('GET', '/auth/session', me.read)).json().user.two_factor_enabled).toBe(true);
    expect((await api('GET', '/account', me.read)).json()).toMatchObject({ two_factor_enabled: true, recovery_codes_left: 10 });

    const withoutCode = await signInWith(me.email);
    // A step, not an error: 202 and no session (a browser's console shows no failed request).
    expect(withoutCode.statusCode).toBe(202);
    expect(withoutCode.json()).toEqual({ two_factor_required: true, message: expect.stringContaining('code') });
    expect(withoutCode.headers['set-cookie']).toBeUndefined();
    expect((await signInWith(me.email, { two_factor_code: '12345' })).json().code).toBe('invalid_two_factor_code');
    // The code of the enable step was used: the next step's code signs in, once.
    const next = totpCode(secret, Date.now() + 30_000);
    expect((await signInWith(me.email, { two_factor_code: next })).statusCode).toBe(200);
    expect((await signInWith(me.email, { two_factor_code: next })).json().code).toBe('invalid_two_factor_code');
    const recovery = recoveryCodes[0]!;
    expect((await signInWith(me.email, { two_factor_code: recovery.toUpperCase() })).statusCode).toBe(200);
    expect((await signInWith(me.email, { two_factor_code: recovery })).json().code).toBe('invalid_two_factor_code');
    expect((await api('GET', '/account', me.read)).json().recovery_codes_left).toBe(9);
    // A wrong password with a right code is still a wrong password.
    expect((await api('POST', '/auth/login', {}, { email: me.email, password: 'not the password', two_factor_code: recoveryCodes[1] })).json().code).toBe(
      'invalid_credentials',
    );
  });

  test('the secret is sealed at rest; recovery codes only as hashes', async () => {
    const me = await person();
    const { secret, recoveryCodes } = await withTwoFactor(me);
    const [row] = await t.database.query<{ totp_secret: string }>(`select totp_secret from users where email = '${me.email}'`);
    expect(row!.totp_secret).toMatch(/^v1\./);
    expect(row!.totp_secret).not.toContain(secret);
    expect(testSecretBox().open(row!.totp_secret)).toBe(secret);
    const hashes = (await t.database.query<{ code_hash: string }>('select code_hash from recovery_codes')).map((r) => r.code_hash).join();
    for (const code of recoveryCodes) expect(hashes).not.toContain(code.replace('-', ''));
  });

  test('new recovery codes replace the old; turning it off needs the password', async () => {
    const me = await person();
    const { recoveryCodes } = await withTwoFactor(me);
    expect((await api('POST', '/account/two-factor/recovery-codes', me.change, { password: 'wrong password!' })).statusCode).toBe(401);
    const renewed = await api('POST', '/account/two-factor/recovery-codes', me.change, { password: PASSWORD });
    expect(renewed.statusCode).toBe(200);
    expect((await signInWith(me.email, { two_factor_code: recoveryCodes[0] })).json().code).toBe('invalid_two_factor_code');
    expect((await signInWith(me.email, { two_factor_code: renewed.json().recovery_codes[0] })).statusCode).toBe(200);
    expect((await api('POST', '/account/two-factor/setup', me.change)).statusCode).toBe(409);

    expect((await api('POST', '/account/two-factor/disable', me.change, { password: 'wrong password!' })).statusCode).toBe(401);
    expect((await api('POST', '/account/two-factor/disable', me.change, { password: PASSWORD })).statusCode).toBe(204);
    expect((await signInWith(me.email)).statusCode).toBe(200);
    expect((await api('POST', '/account/two-factor/recovery-codes', me.change, { password: PASSWORD })).statusCode).toBe(409);
  });

  test('the operator turns it off for a holder who lost app and codes: intake user two-factor-off, which ends their sessions', async () => {
    const me = await person();
    await withTwoFactor(me);
    const { json } = await runCliJson(['user', 'two-factor-off', '--email', me.email], { INTAKE_DATABASE_URL: t.database.databaseUrl });
    expect(json).toMatchObject({ email: me.email, two_factor_enabled: false });
    expect((await api('GET', '/auth/session', me.read)).statusCode).toBe(401);
    expect((await signInWith(me.email)).statusCode).toBe(200);
  });

  test('a reset password does not turn two-factor off', async () => {
    const me = await person();
    await withTwoFactor(me);
    const token = tokenOf(await passwordResetLink(t.store, t.config.baseUrl, (await t.store.findUserByEmail(me.email))!.id));
    expect((await api('POST', '/auth/password-reset/complete', {}, { token, password: 'a reset passphrase' })).statusCode).toBe(204);
    expect((await api('POST', '/auth/login', {}, { email: me.email, password: 'a reset passphrase' })).json().two_factor_required).toBe(true);
  });
});

describe('a company that requires two-factor sign-in', () => {
  test('only an owner who has it may require it; members without it reach nothing of the company until they turn it on', async () => {
    const owner = await person('owner');
    const refused = await api('PATCH', '/company', owner.change, { require_two_factor: true });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().field).toBe('require_two_factor');
    await withTwoFactor(owner);
    const required = await api('PATCH', '/company', owner.change, { require_two_factor: true });
    expect(required.statusCode, required.body).toBe(200);
    expect(required.json().require_two_factor).toBe(true);
    const [record] = await t.store.listAuditLog(owner.companyId, { limit: 1, action: 'company.update' });
    expect(record).toMatchObject({ before: { requireTwoFactor: false }, after: { requireTwoFactor: true } });

    const viewer = await member(t, owner.companyId, 'viewer');
    const blocked = await api('GET', '/integrations', viewer.read);
    expect(blocked.statusCode).toBe(403);
    expect(blocked.json()).toMatchObject({ code: 'two_factor_setup_required', message: expect.stringContaining('Accounts requires two-factor sign-in') });
    const session = (await api('GET', '/auth/session', viewer.read)).json();
    expect(session.companies).toEqual([expect.objectContaining({ id: owner.companyId, requires_two_factor: true })]);
    await withTwoFactor(viewer);
    expect((await api('GET', '/integrations', viewer.read)).statusCode).toBe(200);
    const disable = await api('POST', '/account/two-factor/disable', viewer.change, { password: PASSWORD });
    expect(disable.statusCode).toBe(409);
    expect(disable.json().message).toContain('Accounts requires two-factor sign-in');
  });
});
