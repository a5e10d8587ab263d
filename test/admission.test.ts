import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { AdmissionGate } from '../src/intake/admission.js';
import { shedBeforeRouting } from '../src/intake/shed-before-routing.js';
import { blockLoop, buildTestApp, fillGroupsInFlight, releaseStalledCommits, sendWebhook, stallCommits, waitFor, type TestApp, type TestTenant } from './helpers.js';
import { scrape } from './support/metrics.js';
import { answerAfter, exchange, openConnection, type RawResponse } from './support/raw-http.js';

/** Lets the loop turn, so the gate's timer records it. */
function letLoopTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 30));
}

describe('AdmissionGate', () => {
  const gates: AdmissionGate[] = [];
  function startedGate(maxLagMs: number): AdmissionGate {
    const gate = new AdmissionGate(maxLagMs);
    gate.start();
    gates.push(gate);
    return gate;
  }
  afterEach(() => {
    for (const gate of gates.splice(0)) gate.stop();
  });

  test('is overloaded while one turn of the loop runs past the bound, and not once the loop turns', async () => {
    const gate = startedGate(50);
    await letLoopTurn();
    expect(gate.overloaded()).toBe(false);
    blockLoop(150);
    expect(gate.overloaded()).toBe(true);
    await letLoopTurn();
    expect(gate.overloaded()).toBe(false);
  });

  test('admit() refuses while overloaded and counts each refusal', async () => {
    const gate = startedGate(50);
    await letLoopTurn();
    expect(gate.admit()).toBe(true);
    blockLoop(150);
    expect([gate.admit(), gate.admit()]).toEqual([false, false]);
    expect(gate.shedBy).toEqual({ event_loop_lag: 2, queue_wait: 0 });
    await letLoopTurn();
    expect(gate.admit()).toBe(true);
    expect(gate.shedBy).toEqual({ event_loop_lag: 2, queue_wait: 0 });
  });

  test('a turn shorter than the bound is not overload', async () => {
    const gate = startedGate(200);
    await letLoopTurn();
    blockLoop(100);
    expect(gate.overloaded()).toBe(false);
  });

  test('is overloaded while the oldest webhook in the write queue has waited past its bound', () => {
    let waitedMs = 0;
    const gate = new AdmissionGate(0, { maxWaitMs: 100, waitMs: () => waitedMs });
    expect(gate.admit()).toBe(true);
    waitedMs = 101;
    expect(gate.admit()).toBe(false);
    waitedMs = 100;
    expect(gate.admit()).toBe(true);
    expect(gate.shedBy).toEqual({ event_loop_lag: 0, queue_wait: 1 });
    const unbounded = new AdmissionGate(0, { maxWaitMs: 0, waitMs: () => 60_000 });
    expect(unbounded.overloaded()).toBe(false);
  });

  test('0 turns the gate off, and a stopped gate admits', async () => {
    const off = startedGate(0);
    const stopped = startedGate(50);
    stopped.stop();
    blockLoop(150);
    expect(off.overloaded()).toBe(false);
    expect(stopped.overloaded()).toBe(false);
    expect(off.admit()).toBe(true);
    expect(off.shedBy).toEqual({ event_loop_lag: 0, queue_wait: 0 });
  });
});

describe('shedBeforeRouting', () => {
  /**
   * A bare node:http server whose handler asks shedBeforeRouting first, as the app's server
   * does, and otherwise answers 299: which requests it refuses without Fastify.
   */
  async function serverWith(admitting: boolean) {
    const gate = { admit: () => admitting } as AdmissionGate;
    const metrics = { answered: vi.fn(), webhookAnswered: vi.fn() };
    const early = shedBeforeRouting(gate, metrics);
    const server = createServer((request, response) => {
      if (!early(request, response)) response.writeHead(299).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const statusOf = async (method: string, path: string) => (await fetch(`http://127.0.0.1:${port}${path}`, { method, body: method === 'POST' ? '{}' : undefined })).status;
    return { server, metrics, statusOf };
  }

  test('refuses POSTs to a webhook address while the gate refuses, counted on the route the router would choose', async () => {
    const { server, metrics, statusOf } = await serverWith(false);
    try {
      const refused = ['/api/webhooks/int_1', '/api/webhook/int_1', '/api/webhooks/int_1/', '/api/webhooks/int_1?x=1'];
      const passed = ['/api/webhooks', '/api/webhooks/int_1/wh_1', '/api/webhooksx/int_1', '/api/v1/integrations', '/x/api/webhooks/int_1'];
      expect(await Promise.all(refused.map((path) => statusOf('POST', path)))).toEqual(refused.map(() => 503));
      expect(await Promise.all(passed.map((path) => statusOf('POST', path)))).toEqual(passed.map(() => 299));
      expect(await statusOf('GET', '/api/webhooks/int_1')).toBe(299);
      expect(metrics.webhookAnswered.mock.calls.map(([route]) => route)).toEqual([
        '/api/webhooks/:integration_key',
        '/api/webhook/:integration_key',
        '/api/webhooks/:integration_key',
        '/api/webhooks/:integration_key',
      ]);
      expect(metrics.answered).toHaveBeenCalledTimes(4);
    } finally {
      server.close();
    }
  });

  test('passes everything on while the gate admits', async () => {
    const { server, metrics, statusOf } = await serverWith(true);
    try {
      expect(await statusOf('POST', '/api/webhooks/int_1')).toBe(299);
      expect(metrics.answered).not.toHaveBeenCalled();
    } finally {
      server.close();
    }
  });
});

describe('INTAKE_MAX_EVENT_LOOP_LAG_MS', () => {
  test('defaults to 250 ms; 0 is allowed and turns the gate off', () => {
    expect(loadConfig({}).maxEventLoopLagMs).toBe(250);
    expect(loadConfig({ INTAKE_MAX_EVENT_LOOP_LAG_MS: '0' }).maxEventLoopLagMs).toBe(0);
    expect(loadConfig({ INTAKE_MAX_EVENT_LOOP_LAG_MS: '1000' }).maxEventLoopLagMs).toBe(1000);
  });

  test('the write queue\'s bound defaults to 500 ms; 0 turns it off', () => {
    expect(loadConfig({}).maxQueueWaitMs).toBe(500);
    expect(loadConfig({ INTAKE_MAX_QUEUE_WAIT_MS: '0' }).maxQueueWaitMs).toBe(0);
    expect(() => loadConfig({ INTAKE_MAX_QUEUE_WAIT_MS: '-1' })).toThrow(ConfigError);
  });

  test.each(['-1', '2.5', 'soon', '60001'])('%s stops the start with one line naming the variable', (value) => {
    let error: unknown;
    try {
      loadConfig({ INTAKE_MAX_EVENT_LOOP_LAG_MS: value });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([expect.stringMatching(/^INTAKE_MAX_EVENT_LOOP_LAG_MS=/)]);
  });
});

describe('the admission gate in the app', () => {
  let t: TestApp;
  let tenant: TestTenant;
  beforeAll(async () => {
    t = await buildTestApp({ INTAKE_MAX_EVENT_LOOP_LAG_MS: '50' });
    tenant = await t.newTenant();
  });
  afterAll(() => t.close());

  const send = () => sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });

  async function storedUuids(): Promise<string[]> {
    const response = await t.app.inject({
      method: 'GET',
      url: `/api/webhooks/${tenant.integrationKey}?limit=200`,
      headers: { 'x-api-key': tenant.apiKey },
    });
    expect(response.statusCode).toBe(200);
    return (response.json() as { data: Array<{ uuid: string }> }).data.map((item) => item.uuid).sort();
  }

  /**
   * The statuses of the tenant's webhook POSTs in the request log once the writer has caught up: a last rejected request (no key)
   * is logged after every row before it, so once its row is in, so are theirs.
   */
  async function settledLogStatuses(): Promise<number[]> {
    const sentinel = await sendWebhook(t.app, tenant.integrationKey, { headers: { 'user-agent': 'sentinel' } });
    expect(sentinel.statusCode).toBe(401);
    const rows = await waitFor(async () => {
      const found = await t.store.listRequestLog(tenant.companyId, tenant.integrationId, 1000);
      return found.some((row) => row.userAgent === 'sentinel') ? found : undefined;
    }, 'the request log to catch up');
    return rows.filter((row) => row.method === 'POST' && row.userAgent !== 'sentinel').map((row) => row.status);
  }

  async function shedTotal(): Promise<number> {
    return (await scrape(t.app)).value('intake_requests_shed_total', { bound: 'event_loop_lag' });
  }

  test('a webhook arriving in a turn past the bound gets 503 with Retry-After, is not stored or logged, and is counted', async () => {
    // The first request after start is let in: loading the app is one long turn that the
    // gate does not count. It also warms the key cache before the loop is blocked.
    const first = await send();
    expect(first.statusCode).toBe(202);
    expect(await shedTotal()).toBe(0);
    await letLoopTurn();

    // Both injections are dispatched on process.nextTick, which runs after this block and
    // before the next timers phase: the gate's timer cannot record a turn in between.
    blockLoop(150);
    const [refused, health] = await Promise.all([send(), t.app.inject({ method: 'GET', url: '/healthz' })]);

    expect(refused.statusCode).toBe(503);
    expect(refused.headers['content-type']).toMatch(/^application\/json/);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.json()).toMatchObject({
      error: 'Service unavailable',
      code: 'service_unavailable',
      message: 'The service is overloaded; retry later.',
    });
    expect(health.statusCode).toBe(200);

    await letLoopTurn();
    const again = await send();
    expect(again.statusCode).toBe(202);

    const accepted = [first.json<{ uuid: string }>().uuid, again.json<{ uuid: string }>().uuid].sort();
    expect(await storedUuids()).toEqual(accepted);
    expect(await settledLogStatuses()).toEqual([202, 202]);
    expect(await shedTotal()).toBe(1);
  });

  test('health, readiness, metrics and /api/v1 are never refused', async () => {
    const before = await shedTotal();
    await letLoopTurn();
    blockLoop(150);
    const answers = await Promise.all([
      t.app.inject({ method: 'GET', url: '/healthz' }),
      t.app.inject({ method: 'GET', url: '/readyz' }),
      t.app.inject({ method: 'GET', url: '/metrics' }),
      t.app.inject({ method: 'GET', url: '/api/v1/integrations' }),
    ]);
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 200, 401]);
    expect(await shedTotal()).toBe(before);
  });
});

describe('the admission gate over TCP', () => {
  /** The status and Retry-After of an answer, to compare several at once. */
  const statusAndRetry = (answer: RawResponse) => `${answer.status} retry-after=${answer.headers['retry-after'] ?? '-'}`;

  test('requests read in a turn that has run past the bound get 503, and their connections go on', async () => {
    const t = await buildTestApp({ INTAKE_MAX_EVENT_LOOP_LAG_MS: '50' });
    const sockets: Socket[] = [];
    try {
      const tenant = await t.newTenant();
      // What makes one turn long under overload is the work for the requests read before;
      // here one request does it alone.
      t.app.post('/slow', async () => {
        blockLoop(150);
        return {};
      });
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = t.app.server.address() as AddressInfo;
      const body = JSON.stringify({ event: 'e', data: { pad: 'x'.repeat(7000) } });
      const webhook =
        `POST /api/webhooks/${tenant.integrationKey} HTTP/1.1\r\nhost: intake\r\ncontent-type: application/json\r\n` +
        `x-api-key: ${tenant.apiKey}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const slow = await openConnection(port, sockets);
      const senders = await Promise.all(Array.from({ length: 5 }, () => openConnection(port, sockets)));
      await letLoopTurn();

      // Written in one go, so the server reads them all in one turn, the slow one first.
      slow.socket.write('POST /slow HTTP/1.1\r\nhost: intake\r\ncontent-length: 0\r\n\r\n');
      for (const sender of senders) sender.socket.write(webhook);
      expect(statusAndRetry(await answerAfter(slow, 0))).toBe('200 retry-after=-');
      const refusals = await Promise.all(senders.map((sender) => answerAfter(sender, 0)));
      expect(refusals.map(statusAndRetry)).toEqual(senders.map(() => '503 retry-after=1'));
      // In the shape of every other error answer: the JSON body and the security headers.
      const [refusal] = refusals;
      expect(JSON.parse(refusal!.body)).toEqual({
        error: 'Service unavailable',
        message: 'The service is overloaded; retry later.',
        code: 'service_unavailable',
        request_id: expect.stringMatching(/^req_[0-9A-Za-z]{22}$/),
      });
      expect(refusal!.headers).toMatchObject({
        'content-type': 'application/json; charset=utf-8',
        'x-content-type-options': 'nosniff',
        'cache-control': 'no-store',
        'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
      });

      // The refused bodies were skipped, not left in the way of the next request.
      await letLoopTurn();
      const accepted = await Promise.all(senders.map((sender) => exchange(sender, webhook)));
      expect(accepted.map(statusAndRetry)).toEqual(senders.map(() => '202 retry-after=-'));
      const metrics = await scrape(t.app);
      expect(metrics.value('intake_requests_shed_total', { bound: 'event_loop_lag' })).toBe(5);
      // Counted as every answer is, on the route the router would have chosen.
      const shed = { method: 'POST', route: '/api/webhooks/:integration_key', status: '503', outcome: 'service_unavailable' };
      expect(metrics.value('intake_webhook_requests_total', shed)).toBe(5);
    } finally {
      for (const socket of sockets) socket.destroy();
      await t.close();
    }
  });
});

describe('the write-queue bound in the app', () => {
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  test('while the oldest queued webhook has waited past the bound, webhooks get 503; once the queue moves, 202', async () => {
    const t = await buildTestApp({ INTAKE_MAX_QUEUE_WAIT_MS: '50' });
    try {
      const tenant = await t.newTenant();
      const send = () => sendWebhook(t.app, tenant.integrationKey, { apiKey: tenant.apiKey });
      expect((await send()).statusCode).toBe(202);
      // The database stalls: every commit waits until released.
      const release = stallCommits(t.store);

      // The groups the writer may have in flight go to the store; the next webhook waits in the queue.
      const queued = await fillGroupsInFlight(t, send);
      await pause(100);
      const refused = await send();

      expect(refused.statusCode).toBe(503);
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.json()).toMatchObject({ code: 'service_unavailable' });
      release();
      expect((await Promise.all(queued)).map((answer) => answer.statusCode)).toEqual(queued.map(() => 202));
      expect((await send()).statusCode).toBe(202);
      const listed = await t.app.inject({
        method: 'GET',
        url: `/api/webhooks/${tenant.integrationKey}?limit=200`,
        headers: { 'x-api-key': tenant.apiKey },
      });
      expect(listed.json<{ data: unknown[] }>().data).toHaveLength(queued.length + 2);
      expect((await scrape(t.app)).value('intake_requests_shed_total', { bound: 'queue_wait' })).toBe(1);
    } finally {
      vi.restoreAllMocks();
      releaseStalledCommits();
      await t.close();
    }
  });
});
