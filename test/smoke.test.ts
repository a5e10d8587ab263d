import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp } from './helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

test('a webhook sent with its key is acknowledged with 202', async () => {
  const tenant = await t.newTenant();
  const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
  expect(response.statusCode).toBe(202);
  expect(response.json()).toMatchObject({ uuid: expect.any(String), received_at: expect.any(String) });
});
