import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from './helpers.js';
import { managementKey } from './support/api.js';

/**
 * HTTP hardening (issue 7, item 7): the security headers on every API and intake answer,
 * successes and errors alike, a policy of its own for the API reference page, the panel's
 * own headers left alone, and no internals in a 500.
 */

let t: TestApp;
let tenant: TestTenant;
let keyHeaders: Record<string, string>;
beforeAll(async () => {
  t = await buildTestApp();
  tenant = await t.newTenant();
  keyHeaders = await managementKey(t, tenant.companyId);
});
afterAll(() => t.close());
afterEach(() => vi.restoreAllMocks());

type Response = Awaited<ReturnType<TestApp['app']['inject']>>;

const API_POLICY = "default-src 'none'; frame-ancestors 'none'";

function expectApiHeaders(response: Response, what: string) {
  expect(response.headers['x-content-type-options'], what).toBe('nosniff');
  expect(response.headers['referrer-policy'], what).toBe('no-referrer');
  expect(response.headers['content-security-policy'], what).toBe(API_POLICY);
  expect(response.headers['cache-control'], what).toBe('no-store');
}

describe('security headers', () => {
  test('on /api/v1 answers, read, error and refusal alike', async () => {
    const answers: Array<[string, Response]> = [
      ['a list', await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: keyHeaders })],
      ['one integration', await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${tenant.integrationId}`, headers: keyHeaders })],
      ['a 404', await t.app.inject({ method: 'GET', url: '/api/v1/integrations/int_missing', headers: keyHeaders })],
      ['a 401', await t.app.inject({ method: 'GET', url: '/api/v1/integrations' })],
      ['a 400', await t.app.inject({ method: 'GET', url: '/api/v1/integrations?limit=0', headers: keyHeaders })],
    ];
    expect(answers[0]![1].statusCode).toBe(200);
    for (const [what, response] of answers) {
      expectApiHeaders(response, what);
      expect(response.headers['content-type'], what).toMatch(/^application\/json/);
    }
  });

  test('on intake answers: 202, the log read, refusals', async () => {
    const accepted = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
    expect(accepted.statusCode).toBe(202);
    expectApiHeaders(accepted, '202');
    const read = await t.app.inject({
      method: 'GET',
      url: `/api/webhooks/${tenant.integrationKey}`,
      headers: { 'x-api-key': tenant.apiKey },
    });
    expect(read.statusCode).toBe(200);
    expectApiHeaders(read, 'the log read');
    expectApiHeaders(await sendWebhook(t.app, tenant.integrationKey), '401');
    expectApiHeaders(await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, body: '{' }), '400');
  });

  test('on answers outside any route: 404, 405, a URL the router cannot read, health', async () => {
    expectApiHeaders(await t.app.inject({ method: 'GET', url: '/no/such/path' }), '404');
    expectApiHeaders(await t.app.inject({ method: 'DELETE', url: `/api/webhooks/${tenant.integrationKey}` }), '405');
    const badUrl = await t.app.inject({ method: 'GET', url: '/api/webhooks/%zz' });
    expect(badUrl.statusCode).toBe(400);
    expect(badUrl.json()).toMatchObject({ error: 'Invalid request', code: 'invalid_request' });
    expectApiHeaders(badUrl, 'bad URL');
    expectApiHeaders(await t.app.inject({ method: 'GET', url: '/healthz' }), '/healthz');
    expectApiHeaders(await t.app.inject({ method: 'GET', url: '/api/openapi.json' }), '/api/openapi.json');
  });

  test('the API reference page keeps working under a policy of its own: same-origin scripts, no framing', async () => {
    const page = await t.app.inject({ method: 'GET', url: '/api/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const policy = String(page.headers['content-security-policy']);
    expect(policy).toContain("script-src 'self';");
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).toContain("object-src 'none'");
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    // Every script the page loads is a same-origin file, served as script; none is inline.
    const scripts = [...page.body.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attributes, body] of scripts) {
      expect(body?.trim()).toBe('');
      const src = /src="([^"]+)"/.exec(attributes ?? '')![1]!;
      const script = await t.app.inject({ method: 'GET', url: new URL(src, 'http://localhost/api/docs/').pathname });
      expect(script.statusCode, src).toBe(200);
      expect(script.headers['content-type'], src).toMatch(/javascript/);
    }
    const document = await t.app.inject({ method: 'GET', url: '/api/docs/json' });
    expect(document.statusCode).toBe(200);
  });

  test("the panel's own headers are left as the panel sets them", async () => {
    const page = await t.app.inject({ method: 'GET', url: '/admin/' });
    expect(String(page.headers['content-security-policy'])).toContain("default-src 'self'");
    expect(page.headers['cache-control']).not.toBe('no-store');
  });
});

describe('no internals in a 500', () => {
  const SECRET = 'connection to db-internal.example:5432 failed at /srv/intake/src/store/kysely-store.ts:123';

  function failing(): never {
    const error = new Error(SECRET);
    error.stack = `Error: ${SECRET}\n    at listWebhooks (/srv/intake/src/store/kysely-store.ts:123:45)`;
    throw error;
  }

  function expectBare500(response: Response) {
    expect(response.statusCode).toBe(500);
    const body = response.json<Record<string, unknown>>();
    expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message', 'request_id']);
    expect(body).toMatchObject({ error: 'Internal server error', message: 'Something went wrong on our side.', code: 'internal_error' });
    expect(response.body).not.toContain('db-internal');
    expect(response.body).not.toContain('kysely-store');
    expect(response.body).not.toMatch(/\bat \S+ \(/);
    expectApiHeaders(response, '500');
  }

  test('an intake read whose store throws', async () => {
    vi.spyOn(t.store, 'listWebhooks').mockImplementation(async () => failing());
    expectBare500(
      await t.app.inject({ method: 'GET', url: `/api/webhooks/${tenant.integrationKey}`, headers: { 'x-api-key': tenant.apiKey } }),
    );
  });

  test('an /api/v1 route whose store throws', async () => {
    vi.spyOn(t.store, 'getIntegration').mockImplementation(async () => failing());
    expectBare500(await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${tenant.integrationId}`, headers: keyHeaders }));
  });
});
