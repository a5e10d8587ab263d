import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildTestApp, sendWebhook, type TestApp, type TestTenant } from '../helpers.js';
import { member, managementKey, type SignedIn } from '../support/api.js';

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

interface ServerSentEvent {
  event: string;
  id: string;
  data: string;
}

/** Opens the stream; `next()` resolves with the next event (comments and retry lines skipped). */
async function openStream(query: string, headers: Record<string, string>) {
  const abort = new AbortController();
  streams.push(abort);
  const response = await fetch(`${base}/api/v1/webhooks/stream${query}`, { headers, signal: abort.signal });
  const events: ServerSentEvent[] = [];
  const waiters: Array<() => void> = [];
  if (response.ok) {
    void (async () => {
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
        // aborted at the end of the test
      }
    })();
  }
  return {
    response,
    events,
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
    await t.management.addMember(second.companyId, { email: user!.email, role: 'viewer' });
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
