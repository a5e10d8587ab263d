import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { fieldWithNul } from '../src/domain/text.js';
import { MAX_NESTING_DEPTH } from '../src/domain/webhook-body.js';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from './helpers.js';
import { managementKey, member } from './support/api.js';
import { exchange, openConnection } from './support/raw-http.js';

/**
 * HTTP hardening (issue 7, item 7): the security headers on every API and intake answer,
 * successes and errors alike, a policy of its own for the API reference page, the panel's
 * own headers left alone, no internals in a 500, and no key repeated in an error (issue 13,
 * finding 11).
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
    // Whichever read the route makes.
    vi.spyOn(t.store, 'listWebhooks').mockImplementation(async () => failing());
    vi.spyOn(t.store, 'listCompanyWebhooks').mockImplementation(async () => failing());
    expectBare500(
      await t.app.inject({ method: 'GET', url: `/api/webhooks/${tenant.integrationKey}`, headers: { 'x-api-key': tenant.apiKey } }),
    );
  });

  test('an /api/v1 route whose store throws', async () => {
    vi.spyOn(t.store, 'getIntegration').mockImplementation(async () => failing());
    expectBare500(await t.app.inject({ method: 'GET', url: `/api/v1/integrations/${tenant.integrationId}`, headers: keyHeaders }));
  });
});

describe('deep JSON on /api/v1 (issue 13, finding 9)', () => {
  const nested = (depth: number, inner = '1') => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
  const post = (url: string, payload: string, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, payload });

  test("a body nested deeper than intake's limit is a 400, on sign-in and on a change, and nothing is logged as a failure", async () => {
    const logged = vi.spyOn(t.app.log, 'error');
    for (const payload of [nested(5000), `{"email":"a@example.com","password":${nested(5000)}}`, '{"a":'.repeat(5000) + '1' + '}'.repeat(5000)]) {
      for (const response of [await post('/api/v1/auth/login', payload), await post('/api/v1/integrations', payload, keyHeaders)]) {
        expect(response.statusCode, response.body).toBe(400);
        expect(response.json()).toMatchObject({ error: 'Invalid JSON', code: 'invalid_json' });
        expect(response.json<{ message: string }>().message).toContain(String(MAX_NESTING_DEPTH));
      }
    }
    expect(logged).not.toHaveBeenCalled();
  });

  test('a body within the limit is read as before, and prototype keys are still refused', async () => {
    const within = await post('/api/v1/integrations', `{"name":"Deep but fine","extra":${nested(MAX_NESTING_DEPTH - 1)}}`, keyHeaders);
    expect(within.statusCode, within.body).toBe(201);
    for (const poisoned of ['{"name":"x","__proto__":{"admin":true}}', '{"name":"x","constructor":{"prototype":{"admin":true}}}']) {
      const response = await post('/api/v1/integrations', poisoned, keyHeaders);
      expect(response.statusCode, poisoned).toBe(400);
      expect(response.json()).toMatchObject({ code: 'invalid_json' });
    }
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  test('the NUL check walks any depth without recursion', () => {
    let deep: unknown = 'nul\u0000';
    for (let i = 0; i < 100_000; i++) deep = i % 2 === 0 ? [deep] : { k: deep };
    expect(fieldWithNul(deep)).toMatch(/^k\[0\]\.k/);
    expect(fieldWithNul({ a: 'x', b: [{ c: 'ok' }, { 'd\u0000': 1 }], e: 'nul\u0000' })).toBe('b[1]');
    expect(fieldWithNul({ a: ['x', 'y\u0000'], b: 'nul\u0000' })).toBe('a[1]');
    expect(fieldWithNul('nul\u0000')).toBe('body');
    expect(fieldWithNul({ a: [1, { b: 'fine' }] })).toBeUndefined();
  });
});

describe('no error repeats a key', () => {
  const sockets: Socket[] = [];
  let port: number;
  let owner: Awaited<ReturnType<typeof member>>;
  beforeAll(async () => {
    owner = await member(t, tenant.companyId, 'owner');
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterEach(() => {
    for (const socket of sockets.splice(0)) socket.destroy();
  });

  /** One request written by hand over TCP, so the URL reaches the server exactly as typed. */
  async function raw(method: string, path: string, headers: Record<string, string> = {}, body?: string) {
    const lines = [`${method} ${path} HTTP/1.1`, 'Host: localhost', ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
    if (body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
    return exchange(await openConnection(port, sockets), `${lines.join('\r\n')}\r\n\r\n${body ?? ''}`);
  }

  test('a key pasted into a path, a query, a header or a body is never in the 4xx that refuses it', async () => {
    const key = tenant.apiKey;
    const secretPart = key.slice('whk_dev_'.length);
    const encoded = [...key].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');
    const manage = { 'x-api-key': keyHeaders['x-api-key']! };
    const cases: Array<[string, ReturnType<typeof raw>]> = [
      ['a bad escape after the key', raw('POST', `/api/webhooks/${key}%`, { 'x-api-key': key })],
      ['a malformed escape after the key', raw('GET', `/api/webhooks/${key}%zz`)],
      ['a percent-encoded key and a bad escape', raw('GET', `/api/webhooks/${encoded}%`)],
      ['the key without its prefix and a bad escape, the key sent too', raw('GET', `/api/webhooks/${secretPart}%`, { 'x-api-key': key })],
      ['an over-long segment', raw('GET', `/api/webhooks/${key}${'a'.repeat(200)}`, { 'x-api-key': key })],
      ['a bad escape under /api/v1', raw('GET', `/api/v1/integrations/${key}%`, manage)],
      ['a key as an id', raw('GET', `/api/v1/integrations/${key}`, manage)],
      ['a key in an unknown path', raw('GET', `/nowhere/${key}?key=${key}`)],
      ['a key in the query', raw('GET', `/api/v1/webhooks?integration_id=${key}&since=${key}`, manage)],
      ['a key as the company', raw('GET', '/api/v1/integrations', { cookie: owner.cookie, 'x-company-id': key })],
      // Adding a member by email, or inviting them, whichever this version offers: its 400 names the email.
      ['a key as an email', raw('POST', '/api/v1/members', owner.change, JSON.stringify({ email: key, role: 'viewer' }))],
      ['a key as an email to invite', raw('POST', '/api/v1/invitations', owner.change, JSON.stringify({ email: key, role: 'viewer' }))],
      ['a key as a field name', raw('POST', '/api/v1/integrations', manage, JSON.stringify({ name: 'x', [key]: { [key]: 'nul\u0000' } }))],
    ];
    const leaks: string[] = [];
    for (const [what, pending] of cases) {
      const response = await pending;
      expect(response.status, `${what}: ${response.body}`).toBeGreaterThanOrEqual(400);
      expect(response.status, `${what}: ${response.body}`).toBeLessThan(500);
      expect(JSON.parse(response.body), what).toMatchObject({ error: expect.any(String), message: expect.any(String) });
      // Percent-escapes decoded too: a key echoed as the URL spelled it is still the key.
      const unescaped = response.body.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
      const shown = `${response.body}\n${unescaped}`;
      if ([key, secretPart, key.slice(-20)].some((needle) => shown.includes(needle))) leaks.push(`${what}: ${response.body}`);
    }
    expect(leaks).toEqual([]);
  });
});
