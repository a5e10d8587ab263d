import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { issueApiKey } from '../src/domain/api-key.js';
import { AuthFailureLimiter, addressKey } from '../src/intake/auth-failures.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from './helpers.js';
import { exchange, openConnection, parseResponse, type Connection, type RawResponse } from './support/raw-http.js';

/**
 * Limits against abuse (issue 7, item 5): the per-integration rate limit and its RateLimit-*
 * headers, the per-address limit on failed authentication, header and URL size, the
 * header, request and keep-alive timeouts (slowloris), and the cap on connections. The
 * server-level limits are exercised on a real port with raw TCP, as an attacker would.
 */

type Injected = Awaited<ReturnType<typeof sendWebhook>>;

function expectJsonError(response: Injected, status: number, code: string) {
  expect(response.statusCode, response.body).toBe(status);
  expect(String(response.headers['content-type'])).toMatch(/^application\/json/);
  const body = response.json<{ error: string; message: string; code: string }>();
  expect(body.code).toBe(code);
  expect(body.error.length).toBeGreaterThan(0);
  expect(body.message.length).toBeGreaterThan(0);
}

function integerHeader(response: Injected, name: string): number {
  const value = response.headers[name];
  expect(value, `${name} header`).toMatch(/^\d+$/);
  return Number(value);
}

describe('per-integration rate limit: RateLimit-* headers', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(() => t.close());

  test('202s count the quota down; the 429 has Retry-After and the same headers', async () => {
    const tenant = await t.newTenant({ rateLimitPerMinute: 3 });
    for (const left of [2, 1, 0]) {
      const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
      expect(response.statusCode).toBe(202);
      expect(integerHeader(response, 'ratelimit-limit')).toBe(3);
      expect(integerHeader(response, 'ratelimit-remaining')).toBe(left);
      const reset = integerHeader(response, 'ratelimit-reset');
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(60);
    }
    const limited = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
    expectJsonError(limited, 429, 'rate_limited');
    expect(integerHeader(limited, 'ratelimit-limit')).toBe(3);
    expect(integerHeader(limited, 'ratelimit-remaining')).toBe(0);
    const retryAfter = integerHeader(limited, 'retry-after');
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    // The bucket is full again no sooner than one request is free.
    expect(integerHeader(limited, 'ratelimit-reset')).toBeGreaterThanOrEqual(retryAfter);
    expect(integerHeader(limited, 'ratelimit-reset')).toBeLessThanOrEqual(60);
  });

  test('an idempotent replay (200) carries them too', async () => {
    const tenant = await t.newTenant({ rateLimitPerMinute: 10 });
    const headers = { 'idempotency-key': 'replay-1' };
    expect((await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, headers })).statusCode).toBe(202);
    const replayed = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey, headers });
    expect(replayed.statusCode).toBe(200);
    expect(integerHeader(replayed, 'ratelimit-limit')).toBe(10);
    expect(integerHeader(replayed, 'ratelimit-remaining')).toBe(8);
  });

  test('an integration without a limit sends none', async () => {
    const tenant = await t.newTenant();
    const response = await sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
    expect(response.statusCode).toBe(202);
    expect(response.headers['ratelimit-limit']).toBeUndefined();
    expect(response.headers['ratelimit-remaining']).toBeUndefined();
  });
});

describe('per-address limit on failed authentication', () => {
  const LIMIT = 5;
  let t: TestApp;
  let tenant: TestTenant;
  let other: TestTenant;
  beforeAll(async () => {
    t = await buildTestApp({ INTAKE_AUTH_FAILURE_LIMIT: String(LIMIT), INTAKE_AUTH_FAILURE_WINDOW_SECONDS: '60' });
    tenant = await t.newTenant();
    other = await t.newTenant();
  });
  afterAll(() => t.close());
  afterEach(() => vi.restoreAllMocks());

  /** A well-formed key (checksum and environment right) that was never issued: only a lookup can refuse it. */
  const unknownKey = () => issueApiKey(t.config.environment).plaintext;

  const send = (remoteAddress: string, apiKey?: string, to: TestTenant = tenant) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (apiKey !== undefined) headers['x-api-key'] = apiKey;
    return t.app.inject({
      method: 'POST',
      url: `/api/webhooks/${to.integrationKey}`,
      headers,
      payload: '{"event":"limits.test"}',
      remoteAddress,
    });
  };

  test('past the limit an address gets 429 with Retry-After, before any key is looked up', async () => {
    const ip = '198.51.100.1';
    for (let i = 0; i < LIMIT; i++) {
      // Unknown and missing keys alike.
      if (i % 2 === 0) expectJsonError(await send(ip, unknownKey()), 401, 'invalid_api_key');
      else expectJsonError(await send(ip), 401, 'missing_api_key');
    }

    const lookups = vi.spyOn(t.store, 'findKeyByHash');
    const refused = await send(ip, unknownKey());
    expectJsonError(refused, 429, 'auth_rate_limited');
    const retryAfter = integerHeader(refused, 'retry-after');
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(lookups).not.toHaveBeenCalled();

    // Every request from it, a valid key's too, until the window ends; reads as well.
    expectJsonError(await send(ip, tenant.apiKey), 429, 'auth_rate_limited');
    expectJsonError(await send(ip), 429, 'auth_rate_limited');
    const read = await t.app.inject({
      method: 'GET',
      url: `/api/webhooks/${tenant.integrationKey}`,
      headers: { 'x-api-key': unknownKey() },
      remoteAddress: ip,
    });
    expectJsonError(read, 429, 'auth_rate_limited');
    expect(lookups).not.toHaveBeenCalled();
  });

  test("one address's failures never block another", async () => {
    const attacker = '198.51.100.2';
    for (let i = 0; i <= LIMIT; i++) await send(attacker, unknownKey());
    expectJsonError(await send(attacker, tenant.apiKey), 429, 'auth_rate_limited');

    expect((await send('198.51.100.3', tenant.apiKey)).statusCode).toBe(202);
    expectJsonError(await send('198.51.100.3', unknownKey()), 401, 'invalid_api_key');
    // An IPv6 sender in another /64.
    expect((await send('2001:db8:1::1', tenant.apiKey)).statusCode).toBe(202);
  });

  test('successful and merely forbidden requests are not counted', async () => {
    const ip = '198.51.100.4';
    for (let i = 0; i < LIMIT * 2; i++) {
      expect((await send(ip, tenant.apiKey)).statusCode).toBe(202);
      // A valid key at another integration's address: 403, the key is real.
      expectJsonError(await send(ip, tenant.apiKey, other), 403, 'insufficient_permissions');
    }
    for (let i = 0; i < LIMIT; i++) expectJsonError(await send(ip, unknownKey()), 401, 'invalid_api_key');
    expectJsonError(await send(ip, tenant.apiKey), 429, 'auth_rate_limited');
  });

  test('/api/v1 counts refused keys against the same address: guesses cannot move there', async () => {
    const ip = '198.51.100.9';
    const management = await t.management.createManagementKey(tenant.companyId, ['logs:read']);
    const call = (apiKey: string) =>
      t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: { 'x-api-key': apiKey }, remoteAddress: ip });
    expect((await call(management.apiKey)).statusCode).toBe(200);
    for (let i = 0; i < LIMIT - 1; i++) expectJsonError(await call(unknownKey()), 401, 'invalid_api_key');
    // The last failure allowed, at a webhook address: the limiter is the same.
    expectJsonError(await send(ip, unknownKey()), 401, 'invalid_api_key');
    const refused = await call(management.apiKey);
    expectJsonError(refused, 429, 'auth_rate_limited');
    expect(integerHeader(refused, 'retry-after')).toBeGreaterThanOrEqual(1);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/integrations', headers: { 'x-api-key': management.apiKey }, remoteAddress: '198.51.100.10' })).statusCode).toBe(200);
  });

  test('a refusal at an integration is in its request log, with its code and no key', async () => {
    const ip = '198.51.100.5';
    for (let i = 0; i < LIMIT; i++) await send(ip, unknownKey());
    const refused = await send(ip, tenant.apiKey);
    expectJsonError(refused, 429, 'auth_rate_limited');
    const row = await waitFor(async () => {
      const rows = await t.store.listRequestLog(tenant.companyId, tenant.integrationId, 1000);
      return rows.find((r) => r.ip === ip && r.status === 429);
    }, 'the refusal in the request log');
    expect(row).toMatchObject({ errorCode: 'auth_rate_limited', keyId: null, method: 'POST', webhookUuid: null });
    expect(row.errorCode).toBe(refused.json<{ code: string }>().code);
  });
});

describe('AuthFailureLimiter', () => {
  test('a window of failures per address, then a fresh start', () => {
    let now = 1_000_000;
    const limiter = new AuthFailureLimiter(3, 60_000, () => now);
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfterSeconds('203.0.113.1')).toBe(0);
      limiter.recordFailure('203.0.113.1');
    }
    expect(limiter.retryAfterSeconds('203.0.113.1')).toBe(60);
    expect(limiter.retryAfterSeconds('203.0.113.2')).toBe(0);
    now += 59_500;
    expect(limiter.retryAfterSeconds('203.0.113.1')).toBe(1);
    now += 500;
    expect(limiter.retryAfterSeconds('203.0.113.1')).toBe(0);
    limiter.recordFailure('203.0.113.1');
    expect(limiter.retryAfterSeconds('203.0.113.1')).toBe(0);
  });

  test('of its refusals, the first of an address at each integration in each window is logged; the rest are counted', () => {
    let now = 1_000_000;
    const limiter = new AuthFailureLimiter(2, 60_000, () => now);
    const block = (ip: string) => {
      for (let i = 0; i < 2; i++) limiter.recordFailure(ip);
      expect(limiter.retryAfterSeconds(ip)).toBeGreaterThan(0);
    };
    block('203.0.113.1');
    expect(limiter.logsRefusal('203.0.113.1', 'int_a')).toBe(true);
    for (let i = 0; i < 1000; i++) expect(limiter.logsRefusal('203.0.113.1', 'int_a')).toBe(false);
    expect(limiter.logsRefusal('203.0.113.1', 'int_b')).toBe(true);
    expect(limiter.logsRefusal('203.0.113.1', 'int_b')).toBe(false);
    block('2001:db8:5::1');
    expect(limiter.logsRefusal('2001:db8:5::1', 'int_a')).toBe(true);
    // Another host of the same /64 is the same address.
    expect(limiter.logsRefusal('2001:db8:5::2', 'int_a')).toBe(false);
    expect(limiter.unloggedRefusals).toBe(1002);

    // Until the window ends; blocked again in the next one, the first refusal is logged again.
    now += 59_999;
    expect(limiter.logsRefusal('203.0.113.1', 'int_a')).toBe(false);
    now += 1;
    expect(limiter.retryAfterSeconds('203.0.113.1')).toBe(0);
    block('203.0.113.1');
    expect(limiter.logsRefusal('203.0.113.1', 'int_a')).toBe(true);
    expect(limiter.logsRefusal('203.0.113.1', 'int_a')).toBe(false);
    expect(limiter.unloggedRefusals).toBe(1004);
  });

  test('a limit of 0 turns it off', () => {
    const limiter = new AuthFailureLimiter(0, 60_000);
    for (let i = 0; i < 1000; i++) limiter.recordFailure('203.0.113.1');
    expect(limiter.retryAfterSeconds('203.0.113.1')).toBe(0);
  });

  test('IPv6 addresses count by their /64; IPv4, also mapped, by the address', () => {
    expect(addressKey('2001:db8:1:2:aaaa::1')).toBe(addressKey('2001:0db8:0001:0002:ffff:1:2:3'));
    expect(addressKey('2001:db8:1:2::1')).not.toBe(addressKey('2001:db8:1:3::1'));
    expect(addressKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressKey('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(addressKey('192.0.2.7')).toBe('192.0.2.7');
    expect(addressKey('192.0.2.8')).not.toBe(addressKey('192.0.2.7'));
  });
});

// --- The server's own limits, on a real port ---

const connections: Socket[] = [];

/** A connection closed after each test. */
function open(port: number): Promise<Connection> {
  return openConnection(port, connections);
}

const healthCheck = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n';

/** One request on a connection of its own (node:http), for "the server still answers others". */
function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function listening(env: Record<string, string>): Promise<{ t: TestApp; port: number }> {
  const t = await buildTestApp(env);
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return { t, port: (t.app.server.address() as AddressInfo).port };
}

afterEach(() => {
  for (const socket of connections.splice(0)) socket.destroy();
});

function expectJsonRaw(response: RawResponse, status: number, code: string) {
  expect(response.status, JSON.stringify(response)).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  expect(response.headers['x-content-type-options']).toBe('nosniff');
  const body = JSON.parse(response.body) as { error: string; message: string; code: string };
  expect(body.code).toBe(code);
  expect(body.error.length).toBeGreaterThan(0);
  expect(body.message.length).toBeGreaterThan(0);
}

describe('header and URL size', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    ({ t, port } = await listening({ INTAKE_MAX_HEADER_SIZE: '4096', INTAKE_MAX_URL_LENGTH: '1024' }));
  });
  afterAll(() => t.close());

  test('headers over the configured size: 431 with a JSON body, and the connection closed', async () => {
    const connection = await open(port);
    const response = await exchange(connection, `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(6000)}\r\n\r\n`);
    expectJsonRaw(response, 431, 'headers_too_large');
    await connection.closed;
    // Just under the limit is fine.
    const fine = await exchange(await open(port), `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(3000)}\r\n\r\n`);
    expect(fine.status).toBe(200);
  });

  test('a URL over the limit: 414 with a JSON body, before routing', async () => {
    const connection = await open(port);
    const response = await exchange(connection, `POST /api/webhooks/${'k'.repeat(2000)} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n`);
    expectJsonRaw(response, 414, 'uri_too_long');
    expect(response.headers.connection).toBe('close');
    await connection.closed;
    const query = await exchange(await open(port), `GET /healthz?${'q'.repeat(1100)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expectJsonRaw(query, 414, 'uri_too_long');
  });

  test('what is not HTTP: 400 with a JSON body', async () => {
    const connection = await open(port);
    const response = await exchange(connection, 'HELLO\r\n\r\n');
    expectJsonRaw(response, 400, 'invalid_request');
  });

  test('a URL the router cannot decode: 400 in the same shape', async () => {
    const response = await exchange(await open(port), 'GET /api/webhooks/%zz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expectJsonRaw(response, 400, 'invalid_request');
  });
});

/** Until the server closes the connection; a clean failure if it does not within `ms`. */
function closedWithin(connection: Connection, ms: number, what: string): Promise<true> {
  return waitFor(async () => (connection.isClosed() ? true : undefined), what, ms);
}

describe('timeouts against slow clients', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    // The request timeout stays at its default: the header timeout alone must cut these off.
    ({ t, port } = await listening({ INTAKE_HEADERS_TIMEOUT_MS: '300', INTAKE_KEEP_ALIVE_TIMEOUT_MS: '1000' }));
  });
  afterAll(() => t.close());

  test('headers sent a byte at a time are cut off (408), while others are answered', async () => {
    const slow = await open(port);
    const request = `POST /api/webhooks/abc HTTP/1.1\r\nHost: localhost\r\nX-Slow: ${'s'.repeat(400)}\r\n\r\n`;
    let sent = 0;
    const drip = setInterval(() => {
      if (slow.isClosed() || sent >= request.length) return clearInterval(drip);
      slow.socket.write(request[sent++]!);
    }, 20);
    try {
      // Others get their answers meanwhile.
      for (let i = 0; i < 3; i++) expect((await get(port, '/healthz')).status).toBe(200);
      await closedWithin(slow, 5000, 'the server to close the slow connection');
    } finally {
      clearInterval(drip);
    }
    expect(sent).toBeLessThan(request.length);
    expectJsonRaw(parseResponse(slow.received()), 408, 'request_timeout');
  });

  test('a connection that sends nothing is closed', async () => {
    await closedWithin(await open(port), 5000, 'the server to close the silent connection');
  });

  test('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const connection = await open(port);
    expect((await exchange(connection, healthCheck)).status).toBe(200);
    expect(connection.isClosed()).toBe(false);
    await closedWithin(connection, 4000, 'the server to close the idle connection');
  });
});

describe('the request timeout', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    ({ t, port } = await listening({ INTAKE_HEADERS_TIMEOUT_MS: '300', INTAKE_REQUEST_TIMEOUT_MS: '1000' }));
  });
  afterAll(() => t.close());

  test('a body sent too slowly is cut off', async () => {
    const slow = await open(port);
    slow.socket.write(`POST /api/webhooks/abc HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
    const drip = setInterval(() => {
      if (!slow.isClosed()) slow.socket.write(' ');
    }, 50);
    try {
      await closedWithin(slow, 5000, 'the server to close the slow body');
    } finally {
      clearInterval(drip);
    }
  });
});

describe('the cap on connections', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    ({ t, port } = await listening({ INTAKE_MAX_CONNECTIONS: '2' }));
  });
  afterAll(() => t.close());

  test('a connection over the cap is closed at once; those within keep working', async () => {
    const first = await open(port);
    const second = await open(port);
    expect((await exchange(first, healthCheck)).status).toBe(200);
    expect((await exchange(second, healthCheck)).status).toBe(200);

    const third = await open(port);
    third.socket.write(healthCheck);
    await closedWithin(third, 5000, 'the server to close the connection over the cap');
    expect(third.received()).toBe('');

    expect((await exchange(first, healthCheck)).status).toBe(200);
    expect((await exchange(second, healthCheck)).status).toBe(200);

    // Once one leaves, a new one is let in.
    first.socket.destroy();
    await first.closed;
    const answered = async () => ((await get(port, '/healthz').catch(() => undefined))?.status === 200 ? true : undefined);
    await waitFor(answered, 'a free slot');
  });
});

describe('configuration of the limits', () => {
  test('defaults, and every variable read', () => {
    expect(loadConfig({})).toMatchObject({
      authFailureLimit: 100,
      authFailureWindowMs: 60_000,
      maxHeaderSize: 16_384,
      maxUrlLength: 8192,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 72_000,
      maxConnections: 10_000,
    });
    expect(
      loadConfig({
        INTAKE_AUTH_FAILURE_LIMIT: '0',
        INTAKE_AUTH_FAILURE_WINDOW_SECONDS: '300',
        INTAKE_MAX_HEADER_SIZE: '32768',
        INTAKE_MAX_URL_LENGTH: '4096',
        INTAKE_HEADERS_TIMEOUT_MS: '5000',
        INTAKE_REQUEST_TIMEOUT_MS: '60000',
        INTAKE_KEEP_ALIVE_TIMEOUT_MS: '65000',
        INTAKE_MAX_CONNECTIONS: '500',
      }),
    ).toMatchObject({
      authFailureLimit: 0,
      authFailureWindowMs: 300_000,
      maxHeaderSize: 32_768,
      maxUrlLength: 4096,
      headersTimeoutMs: 5000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 65_000,
      maxConnections: 500,
    });
  });

  test('a header timeout longer than the request timeout stops the start with one clear line', () => {
    const error = (() => {
      try {
        loadConfig({ INTAKE_HEADERS_TIMEOUT_MS: '40000' });
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'INTAKE_HEADERS_TIMEOUT_MS=40000: must not exceed INTAKE_REQUEST_TIMEOUT_MS (30000)',
    ]);
  });
});
