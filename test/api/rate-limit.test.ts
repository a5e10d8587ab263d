import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers.js';
import { managementKey } from '../support/api.js';

/** The same limit on every /api/v1 route, per caller, announced in RateLimit-* headers. */
let t: TestApp;
let companyId: string;

beforeAll(async () => {
  t = await buildTestApp();
  companyId = (await t.management.createCompany('Acme')).id;
});
afterAll(() => t.close());

test('every answer carries RateLimit-* headers; past the limit a 429 with Retry-After, for that caller only', async () => {
  const busy = await managementKey(t, companyId);
  const first = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: busy });
  const limit = Number(first.headers['ratelimit-limit']);
  expect(limit).toBeGreaterThan(0);
  expect(Number(first.headers['ratelimit-remaining'])).toBe(limit - 1);

  let last = first;
  for (let i = 1; i <= limit; i++) last = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: busy });
  expect(last.statusCode).toBe(429);
  expect(last.json()).toMatchObject({ error: 'Rate limit exceeded', code: 'rate_limited' });
  expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);

  const other = await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: await managementKey(t, companyId) });
  expect(other.statusCode).toBe(200);
});
