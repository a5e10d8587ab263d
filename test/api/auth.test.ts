import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ABSOLUTE_TIMEOUT_MS, IDLE_TIMEOUT_MS, Sessions } from '../../src/admin/sessions.js';
import { buildTestApp, type TestApp } from '../helpers.js';
import { managementKey, PASSWORD, signIn } from '../support/api.js';
import { mapConcurrent } from '../support/processes.js';

/** Panel sessions: sign-in, the cookie, CSRF, throttling, expiry and sign-out. */
let t: TestApp;
let companyId: string;
const EMAIL = 'ada@example.com';

beforeAll(async () => {
  t = await buildTestApp();
  companyId = (await t.management.createCompany('Acme')).id;
  await t.management.addUser(companyId, EMAIL, PASSWORD, 'owner');
});
afterAll(() => t.close());

const login = (email: string, password: string, ip = '203.0.113.1') =>
  t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password }, remoteAddress: ip });

describe('sign-in', () => {
  test('sets an HttpOnly, SameSite session cookie and answers who is signed in, with a CSRF token', async () => {
    const response = await login(EMAIL, PASSWORD);
    expect(response.statusCode).toBe(200);
    const cookie = String(response.headers['set-cookie']);
    expect(cookie).toMatch(/^intake_session=[A-Za-z0-9_-]{43};/);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Lax');
    expect(cookie).not.toContain('Secure');
    expect(response.json()).toMatchObject({
      user: { email: EMAIL },
      companies: [{ id: companyId, name: 'Acme', role: 'owner' }],
      environment: 'development',
    });
    expect(response.json().csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  test('each sign-in gets a new session id', async () => {
    const first = await signIn(t.app, EMAIL);
    const second = await signIn(t.app, EMAIL);
    expect(first.cookie).not.toBe(second.cookie);
    expect(first.csrfToken).not.toBe(second.csrfToken);
  });

  test('a wrong password and an unknown email get the same answer, which names neither', async () => {
    const wrongPassword = await login(EMAIL, 'not the password at all', '203.0.113.2');
    const unknownEmail = await login('nobody@example.com', PASSWORD, '203.0.113.3');
    for (const response of [wrongPassword, unknownEmail]) {
      expect(response.statusCode).toBe(401);
      expect(response.json()).toMatchObject({ error: 'Invalid credentials', message: 'The email or password is not correct.' });
      expect(response.headers['set-cookie']).toBeUndefined();
    }
  });

  test('after 5 failures an account is throttled (429 with Retry-After), even with the right password', async () => {
    const email = 'throttled@example.com';
    await t.management.addUser(companyId, email, PASSWORD, 'viewer');
    for (let i = 0; i < 5; i++) expect((await login(email, 'wrong password!', `198.51.100.${i}`)).statusCode).toBe(401);
    const blocked = await login(email, PASSWORD, '198.51.100.99');
    expect(blocked.statusCode).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    // Another account from another address is not affected.
    expect((await login(EMAIL, PASSWORD, '198.51.100.100')).statusCode).toBe(200);
  });

  test('after 20 failures from one IP, that IP is throttled whatever the account', async () => {
    // Two at a time, as many as one address may have checked at once.
    const guesses = await mapConcurrent(Array.from({ length: 20 }, (_, i) => i), 2, (i) =>
      login(`guess${i}@example.com`, 'wrong password!', '192.0.2.77'),
    );
    expect(guesses.map((r) => r.statusCode)).toEqual(Array(20).fill(401));
    expect((await login(EMAIL, PASSWORD, '192.0.2.77')).statusCode).toBe(429);
    expect((await login(EMAIL, PASSWORD, '192.0.2.78')).statusCode).toBe(200);
  }, 90_000);

  test('the cookie is Secure when the service is served over HTTPS', async () => {
    const secure = await buildTestApp({ INTAKE_BASE_URL: 'https://intake.example.com' });
    try {
      const company = (await secure.management.createCompany('S')).id;
      await secure.management.addUser(company, EMAIL, PASSWORD, 'owner');
      const response = await secure.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: EMAIL, password: PASSWORD } });
      expect(String(response.headers['set-cookie'])).toContain('Secure');
    } finally {
      await secure.close();
    }
  });
});

describe('the session', () => {
  test('a cookie that opens no session counts against its address as a wrong key does: past the limit, 429 before any lookup', async () => {
    const forged = (i: number, remoteAddress: string) =>
      t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: { cookie: `intake_session=forged-${i}` }, remoteAddress });
    for (let i = 0; i < 100; i++) expect((await forged(i, '203.0.113.9')).statusCode).toBe(401);
    const limited = await forged(100, '203.0.113.9');
    expect(limited.statusCode).toBe(429);
    expect(limited.json().code).toBe('auth_rate_limited');
    // The address alone is held: a real session elsewhere is not.
    const session = await signIn(t.app, EMAIL);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: session.read })).statusCode).toBe(200);
    expect((await forged(101, '203.0.113.10')).statusCode).toBe(401);
  });

  test('GET /auth/session answers with the cookie; without it 401; with a management key 403', async () => {
    const session = await signIn(t.app, EMAIL);
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: session.read });
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({ user: { email: EMAIL }, csrf_token: session.csrfToken });
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: { cookie: 'intake_session=forged' } })).statusCode).toBe(401);
    const key = await managementKey(t, companyId);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: key })).statusCode).toBe(403);
  });

  test('sign-out ends the session: its cookie is then refused', async () => {
    const session = await signIn(t.app, EMAIL);
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: session.read })).statusCode).toBe(403);
    const out = await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: session.change });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/intake_session=;/);
    const after = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: session.read });
    expect(after.statusCode).toBe(401);
    expect(after.json().code).toBe('not_signed_in');
  });

  test('sign-out everywhere ends every session of the user, not other users', async () => {
    const email = 'many@example.com';
    await t.management.addUser(companyId, email, PASSWORD, 'admin');
    const [laptop, phone] = [await signIn(t.app, email), await signIn(t.app, email)];
    const someoneElse = await signIn(t.app, EMAIL);
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout-everywhere', headers: phone.change })).statusCode).toBe(204);
    for (const session of [laptop, phone]) {
      expect((await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: session.read })).statusCode).toBe(401);
    }
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: someoneElse.read })).statusCode).toBe(200);
  });

  test('a user of several companies names one with X-Company-Id', async () => {
    const email = 'consultant@example.com';
    await t.management.addUser(companyId, email, PASSWORD, 'viewer');
    const second = (await t.management.createCompany('Second')).id;
    await t.management.addUser(second, email, PASSWORD, 'admin');
    const session = await signIn(t.app, email);
    const unnamed = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: session.read });
    expect(unnamed.statusCode).toBe(400);
    expect(unnamed.json().field).toBe('X-Company-Id');
    const create = (company: string) =>
      t.app.inject({ method: 'POST', url: '/api/v1/integrations', headers: { ...session.change, 'x-company-id': company }, payload: { name: 'x' } });
    expect((await create(companyId)).statusCode).toBe(403); // a viewer there
    expect((await create(second)).statusCode).toBe(201); // an admin here
  });
});

describe('expiry', () => {
  test('a session unused for the idle timeout ends; one used keeps going until the absolute timeout', async () => {
    let now = Date.UTC(2026, 0, 1);
    const sessions = new Sessions(t.store, () => now);
    const user = (await t.store.findUserByEmail(EMAIL))!;
    const idle = await sessions.start(user, '192.0.2.1', null);
    const busy = await sessions.start(user, '192.0.2.1', null);
    const start = now;
    while (now < start + ABSOLUTE_TIMEOUT_MS - IDLE_TIMEOUT_MS) {
      now += IDLE_TIMEOUT_MS / 2;
      expect(await sessions.resume(busy.cookieValue)).toBeDefined();
    }
    expect(await sessions.resume(idle.cookieValue)).toBeUndefined();
    now = start + ABSOLUTE_TIMEOUT_MS + 1;
    expect(await sessions.resume(busy.cookieValue)).toBeUndefined();
  });
});
