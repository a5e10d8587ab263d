import { afterAll, afterEach, describe, expect, test, vi } from 'vitest';
import { parseCidrList } from '../../src/domain/cidr.js';
import { AddressGuard } from '../../src/destinations/address-guard.js';
import { DestinationSender, type AttemptOutcome } from '../../src/destinations/sender.js';
import { newSigningSecret, signatureHeaders } from '../../src/destinations/signing.js';
import { standardWebhooks } from '../../src/sources/providers/standard-webhooks.js';
import { expectAccepted, secrets, signedRequest, verdictOf } from '../sources/requests.js';
import * as receivers from '../support/receivers.js';
import type { Receiver } from '../support/receivers.js';

/**
 * One attempt against real receivers on loopback, each behaving as a destination may. The
 * guard allows 127.0.0.1 (as INTAKE_DESTINATION_ALLOW does in the tests) except where the
 * test is that it refuses.
 */

const ALLOWED = new AddressGuard(parseCidrList('127.0.0.1/32'));
const sender = new DestinationSender({ guard: ALLOWED });
const started: Receiver[] = [];

async function receiver(start: Promise<Receiver>): Promise<Receiver> {
  const one = await start;
  started.push(one);
  return one;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((one) => one.close()));
});
afterAll(() => sender.close());

const BODY = Buffer.from('{"type":"order.created","data":{"id":"ord_1"}}');

function send(url: string, options: { body?: Buffer; headers?: Record<string, string>; timeoutMs?: number; via?: DestinationSender } = {}) {
  const body = options.body ?? BODY;
  return (options.via ?? sender).send({ url, body, headers: { 'content-type': 'application/json', ...options.headers }, timeoutMs: options.timeoutMs ?? 5000 });
}

function failed(error: AttemptOutcome['error'], status: number | null = null) {
  return expect.objectContaining({ ok: false, error, status });
}

describe('DestinationSender', () => {
  test('a 2xx: success; the body arrives byte for byte (bytes that are not UTF-8 too), with the headers, signed', async () => {
    const ok = await receiver(receivers.okReceiver(202));
    const body = Buffer.concat([BODY, Buffer.from([0x00, 0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82])]);
    const secret = newSigningSecret();
    const signature = signatureHeaders({ webhookId: 'whk_1', timestampSeconds: Math.floor(Date.now() / 1000), body, secrets: [secret] });
    const outcome = await send(`${ok.url}?tenant=a`, { body, headers: { ...signature, 'x-intake-event': 'order.created', 'X-Custom': 'yes' } });
    expect(outcome).toEqual({ ok: true, status: 202, error: null, durationMs: expect.any(Number), responseExcerpt: '{"received":true}', retryAfterMs: null });
    expect(ok.received).toHaveLength(1);
    const [got] = ok.received;
    expect(got!.method).toBe('POST');
    expect(got!.path).toBe('/hook?tenant=a');
    expect(got!.body.equals(body)).toBe(true);
    expect(got!.headers).toMatchObject({
      'content-type': 'application/json',
      'content-length': String(body.length),
      'x-intake-event': 'order.created',
      'x-custom': 'yes',
      ...signature,
    });
    // What intake sends, intake's own Standard Webhooks source (raw bytes) accepts.
    const asReceived = signedRequest({ headers: got!.headers as Record<string, string>, body: got!.body });
    expectAccepted(await verdictOf(standardWebhooks, asReceived, secrets(secret)));
  });

  test('attempts to one origin share a keep-alive connection', async () => {
    const ok = await receiver(receivers.okReceiver());
    expect((await send(ok.url)).ok).toBe(true);
    expect((await send(ok.url)).ok).toBe(true);
    expect(ok.connections).toBe(1);
    expect(ok.received[0]!.remotePort).toBe(ok.received[1]!.remotePort);
  });

  test('past the agents it may keep, the least recently used origin loses its connections', async () => {
    const [first, second] = [await receiver(receivers.okReceiver()), await receiver(receivers.okReceiver())];
    const one = new DestinationSender({ guard: ALLOWED, maxAgents: 1 });
    try {
      for (const url of [first.url, first.url, second.url, first.url]) expect((await send(url, { via: one })).ok).toBe(true);
    } finally {
      one.close();
    }
    expect(first.connections).toBe(2);
    expect(second.connections).toBe(1);
  });

  test('a receiver failing twice then succeeding: two http_status attempts, then success', async () => {
    const flaky = await receiver(receivers.flakyReceiver(2));
    const outcomes = [await send(flaky.url), await send(flaky.url), await send(flaky.url)];
    expect(outcomes.map((o) => [o.ok, o.status, o.error, o.responseExcerpt])).toEqual([
      [false, 500, 'http_status', 'not yet'],
      [false, 500, 'http_status', 'not yet'],
      [true, 200, null, 'ok'],
    ]);
    expect(flaky.received).toHaveLength(3);
  });

  test('a receiver that never answers: timeout, within about the time allowed', async () => {
    const silent = await receiver(receivers.silentReceiver());
    const outcome = await send(silent.url, { timeoutMs: 300 });
    expect(outcome).toEqual({ ok: false, status: null, error: 'timeout', durationMs: expect.any(Number), responseExcerpt: null, retryAfterMs: null });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(290);
    expect(outcome.durationMs).toBeLessThan(5000);
    expect(silent.received).toHaveLength(1);
  });

  test('a name whose resolution never ends: timeout within the time allowed, not at the connection\'s own limit (10 s)', async () => {
    const stuck = new DestinationSender({ guard: new AddressGuard(parseCidrList('127.0.0.1/32'), () => new Promise(() => {})) });
    try {
      const outcome = await send('http://stuck.example/hook', { timeoutMs: 300, via: stuck });
      expect(outcome).toEqual(failed('timeout'));
      expect(outcome.durationMs).toBeGreaterThanOrEqual(290);
      expect(outcome.durationMs).toBeLessThan(2000);
      // Nor does undici keep the attempts it was given once their verdict is out: 20 more,
      // and within a second of their timeouts it holds none (at undici's own 10 s connect
      // limit it held all 20, freed slots taking more: unbounded).
      const more = await Promise.all(Array.from({ length: 20 }, () => send('http://stuck.example/hook', { timeoutMs: 300, via: stuck })));
      expect(more.every((each) => each.error === 'timeout')).toBe(true);
      await vi.waitFor(() => expect(stuck.requestsHeld).toBe(0), { timeout: 1000, interval: 50 });
    } finally {
      stuck.close();
    }
  });

  test('a receiver that closes the connection without answering: connection_reset', async () => {
    const hangUp = await receiver(receivers.hangUpReceiver());
    expect(await send(hangUp.url)).toEqual(failed('connection_reset'));
    expect(hangUp.received).toHaveLength(1);
  });

  test('429 with Retry-After in seconds, or as an HTTP-date read against the clock', async () => {
    const seconds = await receiver(receivers.tooManyReceiver('120'));
    expect(await send(seconds.url)).toEqual(expect.objectContaining({ ok: false, status: 429, error: 'http_status', retryAfterMs: 120_000, responseExcerpt: 'slow down' }));
    const at = 'Wed, 21 Oct 2026 07:28:00 GMT';
    const dated = await receiver(receivers.tooManyReceiver(at));
    const clocked = new DestinationSender({ guard: ALLOWED, now: () => Date.parse(at) - 90_000 });
    try {
      expect((await send(dated.url, { via: clocked })).retryAfterMs).toBe(90_000);
    } finally {
      clocked.close();
    }
  });

  test('410 Gone: http_status with the status', async () => {
    const gone = await receiver(receivers.goneReceiver());
    expect(await send(gone.url)).toEqual(expect.objectContaining({ ok: false, status: 410, error: 'http_status', responseExcerpt: 'gone' }));
  });

  test('a 302 is a failed attempt, never followed', async () => {
    const target = await receiver(receivers.okReceiver());
    const redirect = await receiver(receivers.redirectReceiver(target.url));
    expect(await send(redirect.url)).toEqual(expect.objectContaining({ ok: false, status: 302, error: 'redirect', responseExcerpt: 'moved' }));
    expect(target.connections).toBe(0);
  });

  test('of a long answer only the first 1 KiB is read; a 2xx is still success', async () => {
    const large = await receiver(receivers.largeBodyReceiver(10 * 1024));
    const outcome = await send(large.url);
    expect(outcome).toEqual(expect.objectContaining({ ok: true, status: 200, error: null }));
    expect(outcome.responseExcerpt).toBe(Buffer.alloc(1024, 'abcdefghijklmnopqrstuvwxyz').toString());
  });

  test('the excerpt never ends in half a character, and holds no NUL', async () => {
    const euros = await receiver(receivers.startReceiver((response) => response.end('€'.repeat(1000))));
    // 341 euros are 1023 bytes: the 342nd, cut by the 1 KiB, is left out rather than mangled.
    expect((await send(euros.url)).responseExcerpt).toBe('€'.repeat(341));
    const odd = await receiver(receivers.startReceiver((response) => response.end(Buffer.from([0x61, 0x00, 0x62, 0xff, 0x63, 0xe2, 0x82]))));
    expect((await send(odd.url)).responseExcerpt).toBe('a\ufffdb\ufffdc\ufffd');
    const empty = await receiver(receivers.startReceiver((response) => response.writeHead(204).end()));
    expect(await send(empty.url)).toEqual(expect.objectContaining({ ok: true, status: 204, responseExcerpt: '' }));
  });

  test('headers in time and a body that never ends: the status stands, with what came of the body', async () => {
    const dribble = await receiver(receivers.startReceiver((response) => response.writeHead(200).write('partial')));
    expect(await send(dribble.url, { timeoutMs: 300 })).toEqual(expect.objectContaining({ ok: true, status: 200, error: null, responseExcerpt: 'partial' }));
  });

  test('nothing listening: connection_refused', async () => {
    const closed = await receivers.okReceiver();
    await closed.close();
    expect(await send(closed.url)).toEqual(failed('connection_refused'));
  });

  test('a name that does not resolve: dns', async () => {
    expect(await send('http://nothing-here.invalid/hook')).toEqual(failed('dns'));
  });

  test('a self-signed certificate: tls', async () => {
    const tls = await receiver(receivers.selfSignedReceiver());
    expect(await send(tls.url)).toEqual(failed('tls'));
    expect(tls.received).toHaveLength(0);
  });

  describe('addresses the guard refuses: blocked_address, and the receiver sees no connection', () => {
    const strict = new DestinationSender({ guard: new AddressGuard([]) });
    afterAll(() => strict.close());

    test.each([
      ['an IP literal', (port: number) => `http://127.0.0.1:${port}/hook`],
      ['an IPv4-mapped IPv6 literal', (port: number) => `http://[::ffff:127.0.0.1]:${port}/hook`],
      ['a name resolving to 127.0.0.1 (the agent lookup)', (port: number) => `http://localhost:${port}/hook`],
    ])('%s', async (_what, urlFor) => {
      const ok = await receiver(receivers.okReceiver());
      expect(await send(urlFor(ok.port), { via: strict })).toEqual(failed('blocked_address'));
      expect(ok.connections).toBe(0);
      expect(ok.received).toHaveLength(0);
    });
  });

  test('never throws: an unusable URL or header is a failed attempt of class other', async () => {
    expect(await send('not a url')).toEqual(failed('other'));
    expect(await send('ftp://127.0.0.1/hook')).toEqual(failed('other'));
    const ok = await receiver(receivers.okReceiver());
    expect(await send(ok.url, { headers: { 'x-bad': 'a\r\nInjected: yes' } })).toEqual(failed('other'));
    expect(ok.received).toHaveLength(0);
  });
});
