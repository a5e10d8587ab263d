import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { setupLinkIfFirstRun } from '../../src/admin/setup.js';
import { buildTestApp, type TestApp } from '../helpers.js';
import { PASSWORD } from '../support/api.js';

/** POST /api/v1/auth/setup: the one-time link of the first run makes the first company and owner. */
let t: TestApp;
beforeEach(async () => {
  t = await buildTestApp();
});
afterEach(() => t.close());

async function newToken(now = Date.now()): Promise<string> {
  const link = await setupLinkIfFirstRun(t.store, t.config.baseUrl, now);
  if (!link) throw new Error('no setup link on an empty database');
  return new URL(link).searchParams.get('token')!;
}

const setup = (payload: object) => t.app.inject({ method: 'POST', url: '/api/v1/auth/setup', payload });
const valid = (token: string) => ({ token, company_name: 'Acme', email: 'Founder@Example.com', password: PASSWORD });

describe('first-run setup', () => {
  test('creates the company and its owner, signs them in, and records both in the audit log', async () => {
    const response = await setup(valid(await newToken()));
    expect(response.statusCode).toBe(200);
    const session = response.json();
    expect(session.user.email).toBe('founder@example.com');
    expect(session.companies).toEqual([{ id: expect.stringMatching(/^cmp_/), name: 'Acme', role: 'owner', requires_two_factor: false }]);
    const cookie = String(response.headers['set-cookie']);
    expect(cookie).toMatch(/^intake_session=.+HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Lax/i);

    // The cookie is a working session: the audit log names the new owner as the actor.
    const audit = await t.app.inject({ method: 'GET', url: '/api/v1/audit-log', headers: { cookie: cookie.split(';', 1)[0]! } });
    expect(audit.statusCode).toBe(200);
    const records = audit.json().data as Array<{ action: string; actor: { type: string; id: string } }>;
    expect(records.map((r) => r.action).sort()).toEqual(['company.create', 'member.add']);
    expect(records.every((r) => r.actor.type === 'user' && r.actor.id === session.user.id)).toBe(true);
  });

  test('a link works once: the second use is refused and creates nothing', async () => {
    const token = await newToken();
    expect((await setup(valid(token))).statusCode).toBe(200);
    const again = await setup({ ...valid(token), email: 'second@example.com', company_name: 'Other' });
    expect(again.statusCode).toBe(403);
    expect(again.json()).toMatchObject({ error: 'Setup link not valid', code: 'setup_link_invalid' });
    expect(await t.store.countUsers()).toBe(1);
  });

  test('two submissions of the same link at once: exactly one succeeds', async () => {
    const token = await newToken();
    const answers = await Promise.all([
      setup(valid(token)),
      setup({ ...valid(token), email: 'rival@example.com', company_name: 'Rival' }),
    ]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 403]);
    expect(await t.store.countUsers()).toBe(1);
  });

  test('a wrong or expired token is refused', async () => {
    await newToken();
    expect((await setup(valid('not-the-token'))).json().code).toBe('setup_link_invalid');
    const expired = await newToken(Date.now() - 25 * 60 * 60 * 1000);
    expect((await setup(valid(expired))).statusCode).toBe(403);
    expect(await t.store.countUsers()).toBe(0);
  });

  test('bad input names its field and leaves the link usable', async () => {
    const token = await newToken();
    const short = await setup({ ...valid(token), password: 'short' });
    expect(short.statusCode).toBe(400);
    expect(short.json()).toMatchObject({ code: 'invalid_request', field: 'password' });
    const email = await setup({ ...valid(token), email: 'not-an-email' });
    expect(email.json()).toMatchObject({ code: 'invalid_request', field: 'email' });
    const name = await setup({ ...valid(token), company_name: '  ' });
    expect(name.json()).toMatchObject({ code: 'invalid_request', field: 'name' });
    expect(await t.store.countUsers()).toBe(0);
    expect((await setup(valid(token))).statusCode).toBe(200);
  });

  test('finding 8: a printed link sets up nothing once anyone has an account (here, made with the CLI)', async () => {
    const token = await newToken();
    const company = await t.management.createCompany('Made by the operator');
    await t.management.addUser(company.id, 'operator@example.com', PASSWORD, 'owner');
    const late = await setup(valid(token));
    expect(late.statusCode).toBe(403);
    expect(late.json().code).toBe('setup_link_invalid');
    expect(await t.store.countUsers()).toBe(1);
    expect(await t.store.findUserByEmail('founder@example.com')).toBeUndefined();
  });

  test('finding 8: one use ends every link printed (a server started twice printed two); a wrong token burns none', async () => {
    const first = await newToken();
    const second = await newToken();
    expect((await setup(valid('not-the-token'))).statusCode).toBe(403);
    expect((await setup(valid(second))).statusCode).toBe(200);
    const other = await setup({ ...valid(first), email: 'rival@example.com', company_name: 'Rival' });
    expect(other.statusCode).toBe(403);
    expect(await t.store.countUsers()).toBe(1);
  });
});
