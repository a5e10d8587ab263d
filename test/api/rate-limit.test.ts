import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers.js';
import { PASSWORD, managementKey, member, signIn } from '../support/api.js';

/**
 * The same limit on every /api/v1 route, per caller, announced in RateLimit-* headers. A
 * caller is who authenticated (a management key, a person), else an address: nothing a
 * client merely sends picks its allowance (issue 13, finding 10).
 */
let t: TestApp;
let companyId: string;

beforeAll(async () => {
  t = await buildTestApp();
  companyId = (await t.management.createCompany('Acme')).id;
});
afterAll(() => t.close());

type Injected = Awaited<ReturnType<TestApp['app']['inject']>>;
const remaining = (response: Injected) => Number(response.headers['ratelimit-remaining']);
const madeUpCookie = () => `intake_session=${randomBytes(32).toString('base64url')}`;

test('every answer carries RateLimit-* headers; past the limit a 429 with Retry-After, for that caller only', async () => {
  const busy = await managementKey(t, companyId);
  const first = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: busy });
  const limit = Number(first.headers['ratelimit-limit']);
  expect(limit).toBeGreaterThan(0);
  expect(remaining(first)).toBe(limit - 1);

  let last = first;
  for (let i = 1; i <= limit; i++) last = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: busy });
  expect(last.statusCode).toBe(429);
  expect(last.json()).toMatchObject({ error: 'Rate limit exceeded', code: 'rate_limited' });
  expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);

  const other = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: await managementKey(t, companyId) });
  expect(other.statusCode).toBe(200);
});

test('a new made-up cookie on every request does not make a new caller: an address is limited as one', async () => {
  const remoteAddress = '203.0.113.77';
  // A public route (sign-in), with a body it refuses at validation: cheap, and no sign-in throttle involved.
  const call = () =>
    t.app.inject({ method: 'POST', url: '/api/v1/auth/login', headers: { cookie: madeUpCookie() }, payload: {}, remoteAddress });
  const first = await call();
  const limit = Number(first.headers['ratelimit-limit']);
  expect(remaining(first)).toBe(limit - 1);
  expect(remaining(await call())).toBe(limit - 2);

  let last = first;
  for (let i = 2; i <= limit; i++) last = await call();
  expect(last.statusCode).toBe(429);
  expect(last.json()).toMatchObject({ code: 'rate_limited' });
  // Another address is another caller; an IPv6 sender counts by its /64.
  expect(remaining(await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: {}, remoteAddress: '203.0.113.78' }))).toBe(limit - 1);
  const v6 = (host: string) => t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: {}, remoteAddress: `2001:db8:77:1::${host}` });
  expect(remaining(await v6('1'))).toBe(limit - 1);
  expect(remaining(await v6('2'))).toBe(limit - 2);
});

test("a person's sessions share one allowance; another person, a key and the address have their own", async () => {
  const remoteAddress = '203.0.113.88';
  const email = `alice-${randomBytes(4).toString('hex')}@example.com`;
  await t.management.addUser(companyId, email, PASSWORD, 'admin');
  const alice = await signIn(t.app, email);
  const aliceAgain = await signIn(t.app, email);
  expect(aliceAgain.cookie).not.toBe(alice.cookie);
  const bob = await member(t, companyId, 'viewer');
  const get = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers, remoteAddress });

  const one = await get(alice.read);
  expect(one.statusCode).toBe(200);
  const limit = Number(one.headers['ratelimit-limit']);
  expect(remaining(one)).toBe(limit - 1);
  expect(remaining(await get(aliceAgain.read))).toBe(limit - 2);
  expect(remaining(await get(alice.read))).toBe(limit - 3);
  expect(remaining(await get(bob.read))).toBe(limit - 1);
  expect(remaining(await get(await managementKey(t, companyId)))).toBe(limit - 1);
});
