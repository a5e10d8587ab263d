import { afterAll, beforeAll, expect, test } from 'vitest';
import { passwordResetLink } from '../../src/admin/accounts.js';
import type { AuditRecord } from '../../src/store/store.js';
import { buildTestApp, type TestApp } from '../helpers.js';
import { tokenOf, totpCode } from '../support/accounts.js';
import { PASSWORD, member, signIn } from '../support/api.js';
import { runCliJson } from '../support/processes.js';

/**
 * A person's own account changes (issue 35): two-factor on and off, the password changed or
 * reset, new recovery codes. Each is in the audit log of every company the person belongs
 * to, by them and of them, and no record holds a password, a secret or a code.
 */
let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

const api = (method: 'GET' | 'POST', url: string, headers: Record<string, string> = {}, payload?: object) =>
  t.app.inject({ method, url: `/api/v1${url}`, headers, ...(payload && { payload }) });

const accountRecords = async (companyId: string): Promise<AuditRecord[]> =>
  (await t.store.listAuditLog(companyId, { limit: 100 })).filter((record) => record.action.startsWith('account.'));

test('each change of an account is in the audit log of each of its companies, by and of the user, without a secret', async () => {
  const first = (await t.management.createCompany('Audited one')).id;
  const second = (await t.management.createCompany('Audited two')).id;
  const elsewhere = (await t.management.createCompany('Not theirs')).id;
  const me = await member(t, first, 'owner');
  const { email } = (await api('GET', '/account', me.read)).json<{ email: string }>();
  await t.management.addUser(second, email, PASSWORD, 'viewer');

  const setup = (await api('POST', '/account/two-factor/setup', me.change)).json<{ secret: string }>();
  const enabled = await api('POST', '/account/two-factor/enable', me.change, { code: totpCode(setup.secret) });
  expect(enabled.statusCode, enabled.body).toBe(200);
  const renewed = await api('POST', '/account/two-factor/recovery-codes', me.change, { password: PASSWORD });
  expect(renewed.statusCode, renewed.body).toBe(200);
  expect((await api('POST', '/account/two-factor/disable', me.change, { password: PASSWORD })).statusCode).toBe(204);
  const changed = 'a changed passphrase here';
  expect((await api('POST', '/account/password', me.change, { current_password: PASSWORD, new_password: changed })).statusCode).toBe(204);
  const reset = 'a reset passphrase here';
  const token = tokenOf(await passwordResetLink(t.store, t.config.baseUrl, me.userId));
  expect((await api('POST', '/auth/password-reset/complete', {}, { token, password: reset })).statusCode).toBe(204);

  const actions = [
    'account.password_reset',
    'account.password_change',
    'account.two_factor_disable',
    'account.recovery_codes_renew',
    'account.two_factor_enable',
  ];
  for (const companyId of [first, second]) {
    const records = await accountRecords(companyId);
    expect(records.map((record) => record.action)).toEqual(actions);
    for (const record of records) {
      expect(record).toMatchObject({ actor: { type: 'user', id: me.userId }, targetType: 'user', targetId: me.userId, after: { email } });
      expect(record.actor.ip).toBeTruthy();
      const text = JSON.stringify(record);
      for (const secret of [PASSWORD, changed, reset, token, setup.secret, ...renewed.json<{ recovery_codes: string[] }>().recovery_codes]) {
        expect(text).not.toContain(secret);
      }
    }
  }
  expect(await accountRecords(elsewhere)).toEqual([]);

  // The panel reads them through the audit route, filtered by action like any other (the reset ended the session).
  const again = await signIn(t.app, email, reset);
  const listed = await api('GET', `/audit-log?action=account.two_factor_enable`, { ...again.read, 'x-company-id': second });
  expect(listed.statusCode, listed.body).toBe(200);
  expect(listed.json<{ data: Array<{ action: string; target: { type: string; id: string } }> }>().data).toMatchObject([
    { action: 'account.two_factor_enable', target: { type: 'user', id: me.userId } },
  ]);
});

test('a refused change records nothing: a wrong password, a wrong code, a used reset link', async () => {
  const companyId = (await t.management.createCompany('Audited refusals')).id;
  const me = await member(t, companyId, 'owner');
  const setup = (await api('POST', '/account/two-factor/setup', me.change)).json<{ secret: string }>();
  const wrong = String((Number(totpCode(setup.secret)) + 500_000) % 1_000_000).padStart(6, '0');
  expect((await api('POST', '/account/two-factor/enable', me.change, { code: wrong })).statusCode).toBe(401);
  expect((await api('POST', '/account/password', me.change, { current_password: 'not the password', new_password: 'whatever it may be' })).statusCode).toBe(401);
  const token = tokenOf(await passwordResetLink(t.store, t.config.baseUrl, me.userId, Date.now() - 60 * 60 * 1000 - 1));
  expect((await api('POST', '/auth/password-reset/complete', {}, { token, password: 'too late for this' })).statusCode).toBe(403);
  expect(await accountRecords(companyId)).toEqual([]);
});

test("the operator's two-factor-off is recorded as the command line's, of the user", async () => {
  const companyId = (await t.management.createCompany('Audited operator')).id;
  const me = await member(t, companyId, 'owner');
  const setup = (await api('POST', '/account/two-factor/setup', me.change)).json<{ secret: string }>();
  expect((await api('POST', '/account/two-factor/enable', me.change, { code: totpCode(setup.secret) })).statusCode).toBe(200);
  const { email } = (await api('GET', '/account', me.read)).json<{ email: string }>();
  await runCliJson(['user', 'two-factor-off', '--email', email], { INTAKE_DATABASE_URL: t.database.databaseUrl });
  const [off] = await accountRecords(companyId);
  expect(off).toMatchObject({ action: 'account.two_factor_disable', actor: { type: 'cli' }, targetType: 'user', targetId: me.userId });
});
