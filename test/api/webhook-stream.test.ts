import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { WEBHOOK_PAGE_BYTES } from '../../src/store/store.js';
import { buildTestApp, sendWebhook, waitFor, type TestApp, type TestTenant } from '../helpers.js';
import { member, managementKey, type SignedIn } from '../support/api.js';
import { openConnection } from '../support/raw-http.js';
import { webhook } from '../support/webhooks.js';

/** GET /api/v1/webhooks/stream: the live tail, read as a browser's EventSource reads it. */
let t: TestApp;
let base: string;
let tenant: TestTenant;
let viewer: SignedIn & { userId: string };
const streams: AbortController[] = [];

beforeAll(async () => {
  t = await buildTestApp();
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  tenant = await t.newTenant();
  viewer = await member(t, tenant.companyId, 'viewer');
});
afterAll(async () => {
  for (const stream of streams) stream.abort();
  await t.close();
});
const sockets: Socket[] = [];
afterAll(() => {
  for (const socket of sockets) socket.destroy();
});

interface ServerSentEvent {
  event: string;
  id: string;
  data: string;
}

/**
 * Opens the stream; `next()` resolves with the next event (comments and retry lines
 * skipped), `ended` once the server has closed it.
 */
async function openStream(query: string, headers: Record<string, string>, on = base) {
  const abort = new AbortController();
  streams.push(abort);
  const response = await fetch(`${on}/api/v1/webhooks/stream${query}`, { headers, signal: abort.signal });
  const events: ServerSentEvent[] = [];
  const waiters: Array<() => void> = [];
  let ended: Promise<'ended' | 'aborted'> = Promise.resolve('ended');
  if (response.ok) {
    ended = (async () => {
      let buffer = '';
      const decoder = new TextDecoder();
      try {
        for await (const chunk of response.body!) {
          buffer += decoder.decode(chunk as Uint8Array, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const fields = Object.fromEntries(
              block
                .split('\n')
                .filter((line) => line !== '' && !line.startsWith(':'))
                .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trimStart()]),
            );
            if (fields.data === undefined) continue;
            events.push({ event: fields.event ?? 'message', id: fields.id ?? '', data: fields.data });
            waiters.splice(0).forEach((wake) => wake());
          }
        }
      } catch {
        return 'aborted' as const;
      }
      return 'ended' as const;
    })();
  }
  return {
    response,
    events,
    ended,
    async next(timeoutMs = 5_000): Promise<ServerSentEvent> {
      const deadline = Date.now() + timeoutMs;
      while (events.length === 0) {
        if (Date.now() > deadline) throw new Error('no event within the time limit');
        await new Promise<void>((wake) => {
          waiters.push(wake);
          setTimeout(wake, 100);
        });
      }
      return events.shift()!;
    },
    close: () => abort.abort(),
  };
}

const send = (target: TestTenant, event: string) =>
  sendWebhook(t.app, target.integrationKey, { apiKey: target.apiKey, body: JSON.stringify({ event, data: { event } }) });

describe('the live tail', () => {
  test('sends each new webhook once, as the list shows it, and nothing from before it opened', async () => {
    await send(tenant, 'before.open');
    const stream = await openStream('', viewer.read);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get('content-type')).toContain('text/event-stream');
    const sent = (await send(tenant, 'order.created')).json<{ uuid: string }>();
    const first = await stream.next();
    expect(first.event).toBe('webhook');
    expect(first.id).toBe(sent.uuid);
    expect(JSON.parse(first.data)).toEqual({
      uuid: sent.uuid,
      integration_id: tenant.integrationId,
      event: 'order.created',
      data: { event: 'order.created' },
      received_at: expect.any(String),
    });
    await send(tenant, 'order.paid');
    expect(JSON.parse((await stream.next()).data).event).toBe('order.paid');
    // Polls go on; nothing is sent twice.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(stream.events).toEqual([]);
    stream.close();
  });

  test('keeps to its filters and to its company', async () => {
    const other = await t.newTenant({ companyId: tenant.companyId });
    const stranger = await t.newTenant();
    const stream = await openStream(`?integration_id=${other.integrationId}&event=wanted`, viewer.read);
    await send(stranger, 'wanted');
    await send(tenant, 'wanted');
    await send(other, 'unwanted');
    const uuid = (await send(other, 'wanted')).json<{ uuid: string }>().uuid;
    expect((await stream.next()).id).toBe(uuid);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(stream.events).toEqual([]);
    stream.close();
  });

  test('resumes after the Last-Event-ID a reconnecting browser sends', async () => {
    const seen = (await send(tenant, 'seen')).json<{ uuid: string }>().uuid;
    const missed = (await send(tenant, 'missed')).json<{ uuid: string }>().uuid;
    const stream = await openStream('', { ...viewer.read, 'last-event-id': seen });
    expect((await stream.next()).id).toBe(missed);
    stream.close();
  });

  test('a user of several companies names one with company_id; strangers and integration keys get nothing', async () => {
    const second = await t.newTenant();
    const user = await t.store.findUserById(viewer.userId);
    await t.management.addUser(second.companyId, user!.email, 'never used: the account exists', 'viewer');
    const unnamed = await openStream('', viewer.read);
    expect(unnamed.response.status).toBe(400);
    const named = await openStream(`?company_id=${second.companyId}`, viewer.read);
    expect(named.response.status).toBe(200);
    const uuid = (await send(second, 'second.company')).json<{ uuid: string }>().uuid;
    expect((await named.next()).id).toBe(uuid);
    named.close();

    const stranger = await t.newTenant();
    expect((await openStream(`?company_id=${stranger.companyId}`, viewer.read)).response.status).toBe(404);
    expect((await openStream('', { 'x-api-key': tenant.apiKey })).response.status).toBe(403);
    const key = await openStream('', await managementKey(t, tenant.companyId, ['logs:read']));
    expect(key.response.status).toBe(200);
    key.close();
  });
});


test('closing the server ends open streams instead of waiting for them', async () => {
  const own = await buildTestApp();
  const url = await own.app.listen({ host: '127.0.0.1', port: 0 });
  const target = await own.newTenant();
  const key = await managementKey(own, target.companyId, ['logs:read']);
  const response = await fetch(`${url}/api/v1/webhooks/stream`, { headers: key });
  expect(response.status).toBe(200);
  const ended = (async () => {
    for await (const _chunk of response.body!) {
      // read until the server ends the stream
    }
    return 'ended';
  })();
  await own.close();
  await expect(ended).resolves.toBe('ended');
});

/** Resolves with 'ended' once `stream` is closed by the server, or 'open' after `ms`. */
function endsWithin(stream: { ended: Promise<'ended' | 'aborted'> }, ms: number) {
  return Promise.race([stream.ended, new Promise<'open'>((done) => setTimeout(() => done('open'), ms))]);
}

describe('the live tail ends when its caller loses access, and sends nothing after', () => {
  /** Opens a stream, sees it deliver, makes the `change`, sends one more webhook: the stream ends without it. */
  async function expectEndsWithNothingAfter(target: TestTenant, headers: Record<string, string>, change: () => Promise<void>) {
    const stream = await openStream('', headers);
    expect(stream.response.status).toBe(200);
    const before = (await send(target, 'before.change')).json<{ uuid: string }>().uuid;
    expect((await stream.next()).id).toBe(before);
    await change();
    const after = (await send(target, 'after.change')).json<{ uuid: string }>().uuid;
    expect(await endsWithin(stream, 2_500)).toBe('ended');
    expect(stream.events.map((e) => e.id)).not.toContain(after);
  }

  test('a revoked management key', async () => {
    const target = await t.newTenant();
    const owner = await member(t, target.companyId, 'owner');
    const key = await t.management.createManagementKey(target.companyId, ['logs:read']);
    await expectEndsWithNothingAfter(target, { 'x-api-key': key.apiKey }, async () => {
      const revoked = await t.app.inject({
        method: 'POST',
        url: `/api/v1/management-keys/${key.id}/revoke`,
        headers: owner.change,
      });
      expect(revoked.statusCode, revoked.body).toBe(200);
    });
  });

  test('a removed member', async () => {
    const target = await t.newTenant();
    const owner = await member(t, target.companyId, 'owner');
    const removed = await member(t, target.companyId, 'viewer');
    await expectEndsWithNothingAfter(target, removed.read, async () => {
      const response = await t.app.inject({ method: 'DELETE', url: `/api/v1/members/${removed.userId}`, headers: owner.change });
      expect(response.statusCode, response.body).toBe(204);
    });
  });

  test('a user signed out everywhere', async () => {
    const target = await t.newTenant();
    const user = await member(t, target.companyId, 'viewer');
    await expectEndsWithNothingAfter(target, user.read, async () => {
      const response = await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout-everywhere', headers: user.change });
      expect(response.statusCode, response.body).toBe(204);
    });
  });
});

describe('what a poll reads', () => {
  test('heads first; each body once, and at most a budget of bodies per poll', async () => {
    const target = await t.newTenant();
    const owner = { companyId: target.companyId, integrationId: target.integrationId, keyId: target.keyId };
    const stream = await openStream('', await managementKey(t, target.companyId, ['logs:read']));
    const bodies = vi.spyOn(t.store, 'getCompanyWebhookSummaries');
    try {
      // Three bodies of 0.6 budgets, committed together: no poll may read two of them.
      const pad = 'x'.repeat(Math.floor(WEBHOOK_PAGE_BYTES * 0.6));
      const now = Date.now();
      const big = [0, 1, 2].map((i) => webhook(owner, now + i, { body: JSON.stringify({ event: 'big', data: { i, pad } }) }));
      await t.store.commitBatch(big, []);
      const received = [await stream.next(), await stream.next(), await stream.next()];
      expect(received.map((e) => e.id)).toEqual(big.map((w) => w.uuid));
      expect(JSON.parse(received[2]!.data).data).toEqual({ i: 2, pad });
      // Polls go on: the bodies already sent are not read again.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const read = bodies.mock.calls.filter(([companyId]) => companyId === target.companyId).map(([, heads]) => heads);
      expect(read.flat().map((h) => h.uuid)).toEqual(big.map((w) => w.uuid));
      for (const heads of read) expect(heads.reduce((sum, h) => sum + h.sizeBytes, 0)).toBeLessThanOrEqual(WEBHOOK_PAGE_BYTES);
      expect(stream.events).toEqual([]);
    } finally {
      bodies.mockRestore();
      stream.close();
    }
  });
});

describe('bounds on streams', () => {
  let small: TestApp;
  let url: string;
  beforeAll(async () => {
    small = await buildTestApp(
      {},
      { readLimits: { streams: { perCaller: 2, perCompany: 3, perNode: 4 }, sendTimeoutMs: 1_000 } },
    );
    url = await small.app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    for (const stream of streams) stream.abort();
    await small.close();
  });

  async function expectRefused(headers: Record<string, string>, message: RegExp) {
    const refused = await openStream('', headers, url);
    expect(refused.response.status).toBe(429);
    expect(refused.response.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(refused.response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await refused.response.json()).toMatchObject({ error: 'Rate limit exceeded', message: expect.stringMatching(message) });
  }

  test('per caller, per company and per node: 429 with Retry-After, and a closed stream frees its place', async () => {
    const first = await small.newTenant();
    const [a, b, c] = [
      await managementKey(small, first.companyId, ['logs:read']),
      await managementKey(small, first.companyId, ['logs:read']),
      await managementKey(small, first.companyId, ['logs:read']),
    ];
    const open = [await openStream('', a, url), await openStream('', a, url)];
    await expectRefused(a, /per key or user/);
    open.push(await openStream('', b, url));
    await expectRefused(c, /per company/);
    const second = await small.newTenant();
    open.push(await openStream('', await managementKey(small, second.companyId, ['logs:read']), url));
    for (const stream of open) expect(stream.response.status).toBe(200);
    const third = await small.newTenant();
    const stranger = await managementKey(small, third.companyId, ['logs:read']);
    await expectRefused(stranger, /this server/i);

    open[0]!.close();
    await waitFor(async () => (small.app.readLimits.streams.inUse === 3 ? true : undefined), 'the closed stream to free its place');
    const again = await openStream('', stranger, url);
    expect(again.response.status).toBe(200);
    for (const stream of [...open, again]) stream.close();
  });

  test('a client that stops reading is cut off after the send timeout, and its place freed', async () => {
    const target = await small.newTenant();
    const owner = { companyId: target.companyId, integrationId: target.integrationId, keyId: target.keyId };
    const key = await managementKey(small, target.companyId, ['logs:read']);
    await waitFor(async () => (small.app.readLimits.streams.inUse === 0 ? true : undefined), 'the streams of the test before to end');
    const connection = await openConnection(Number(new URL(url).port), sockets);
    connection.socket.write(`GET /api/v1/webhooks/stream HTTP/1.1\r\nhost: test\r\nx-api-key: ${key['x-api-key']}\r\n\r\n`);
    await waitFor(async () => (connection.received().includes('retry: 2000') ? true : undefined), 'the stream to open');
    expect(connection.received()).toMatch(/^HTTP\/1\.1 200/);
    // From now on the client takes nothing; webhooks far larger than the socket buffers arrive.
    connection.socket.pause();
    const pad = 'x'.repeat(4 * 1024 * 1024);
    for (let i = 0; i < 10; i++) {
      await small.store.commitBatch([webhook(owner, Date.now(), { body: JSON.stringify({ event: 'big', data: { i, pad } }) })], []);
    }
    // The server gives up on it while the client still takes nothing (a paused socket only
    // sees the close once it reads again)...
    await waitFor(async () => (small.app.readLimits.streams.inUse === 0 ? true : undefined), 'the stream to be cut off', 15_000);
    // ...and the client, reading again, gets what was already in the socket buffers, then the end.
    connection.socket.resume();
    await Promise.race([connection.closed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
    expect(connection.isClosed()).toBe(true);
    expect(connection.received().match(/^event: webhook$/gm)?.length ?? 0).toBeLessThan(10);
  });
});
