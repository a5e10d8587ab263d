import { afterAll, expect, test } from 'vitest';
import { CompanyTurns, DeliveryRules } from '../../src/destinations/delivery-rules.js';
import { TransformPool } from '../../src/destinations/transform/pool.js';
import { threadCpuMs } from '../../src/destinations/transform/sandbox.js';
import { validRules } from '../../src/domain/rules/rules.js';
import type { ClaimedDelivery, Store, WebhookBody } from '../../src/store/store.js';

/**
 * One company's transformations cannot take every sandbox worker: with a company whose code
 * loops on every delivery (each run stopped at its CPU limit), another company's delivery is
 * transformed on the other worker at once, not after the first company's backlog. The real
 * pool (two workers, dist/'s worker: `npm run build` first, as `npm test` does).
 */

const pool = new TransformPool({ workers: 2 });
afterAll(() => pool.close());

function delivery(companyId: string, n: number): ClaimedDelivery {
  return {
    id: `dlv_${companyId}_${n}`,
    companyId,
    destinationId: `dst_${companyId}`,
    leaseToken: 'lease',
    series: 0,
    attempt: 1,
    webhookUuid: `00000000-0000-4000-8000-00000000000${n}`,
    integrationId: 'int_1',
    event: 'order.created',
    destination: { url: 'https://example.invalid/hook', timeoutMs: 15_000, secretSealed: '', previousSecretSealed: null, headersSealed: null, rulesVersion: 1 },
    seriesStartedAt: 0,
    webhookReceivedAt: 0,
    sendAt: 0,
  };
}

const webhook: WebhookBody = { rawBody: Buffer.from('{"event":"order.created","data":{"id":1}}'), headersJson: '{}', contentType: 'application/json', hops: 0, payloadFormat: 'envelope' };

test("a company whose transformation loops holds one worker; another company's is made meanwhile", async () => {
  // The rules' store is not read by shape().
  const rules = new DeliveryRules(undefined as unknown as Store, () => pool);
  const looping = validRules({ transformation: { code: 'function transform() { for (;;) {} }' } });
  const quick = validRules({ transformation: { code: 'function transform(r) { r.headers["x-ok"] = "1"; return r; }' } });
  // Both workers started first (a worker's start is 100 ms or more, longer than a run).
  const warm = { body: {}, headers: {}, path: '', query: {} };
  const context = { webhookId: 'w', event: 'e', integrationId: 'i', receivedAt: '', attempt: 1 };
  await Promise.all([1, 2].map(() => pool.run('function transform(r) { return r; }', warm, context)));
  expect(pool.stats().workers).toBe(2);
  const finished: string[] = [];
  const hostile = [1, 2, 3, 4].map((n) => rules.shape(delivery('cmp_a', n), webhook, looping).then((shaped) => finished.push(`a${n}:${shaped.kind}`)));
  const other = rules.shape(delivery('cmp_b', 1), webhook, quick).then((shaped) => finished.push(`b1:${shaped.kind}`));
  await Promise.all([...hostile, other]);
  // Each of cmp_a's takes its CPU limit (50 ms); cmp_b's about a millisecond, on the free worker.
  expect(finished.indexOf('b1:request')).toBeLessThan(finished.indexOf('a2:error'));
  expect(finished.filter((f) => f.startsWith('a'))).toEqual(['a1:error', 'a2:error', 'a3:error', 'a4:error']);
});

test("a company past its sandbox time waits for its bucket, then is refused; another company's tasks do not wait", async () => {
  let clock = 0;
  const slept: number[] = [];
  const turns = new CompanyTurns(1, { perSecondMs: 200, burstMs: 1000, maxWaitMs: 1500, maxWaiting: 4 }, () => clock, async (ms) => {
    slept.push(ms);
    clock += ms;
  });
  // Each task of cmp_a takes 600 ms of sandbox time (the clock moves as it runs).
  const busy = () => turns.run('cmp_a', async () => void (clock += 600));
  await busy();
  await busy();
  expect(slept).toEqual([]);
  // 1,000 ms, less 1,200 used, plus 240 refilled while they ran: 80 ms short, 400 ms (and
  // one) to wait at 200 ms a second.
  await busy();
  expect(slept).toEqual([401]);
  await turns.run('cmp_b', async () => void (clock += 10));
  expect(slept).toEqual([401]);
  // cmp_a is now about 480 ms short: 2.4 s to wait, past its 1.5 s: refused, without waiting.
  await expect(busy()).rejects.toThrow(/share of the sandbox/);
  expect(slept).toEqual([401]);
});

test("a company's queue is bounded, and closing refuses what waits at once", async () => {
  const turns = new CompanyTurns(1, { perSecondMs: 200, burstMs: 1000, maxWaitMs: 1500, maxWaiting: 2 }, () => 0, () => new Promise(() => {}));
  let release!: () => void;
  const running = turns.run('cmp_a', () => new Promise<void>((resolve) => (release = resolve)));
  const waiting = [turns.run('cmp_a', async () => 'ran'), turns.run('cmp_a', async () => 'ran')];
  await expect(turns.run('cmp_a', async () => 'ran')).rejects.toThrow(/2 of this company's transformations are waiting/);
  turns.close();
  for (const task of waiting) await expect(task).rejects.toThrow(/stopping/);
  release();
  await running;
  await expect(turns.run('cmp_b', async () => 'ran')).rejects.toThrow(/stopping/);
});

test("the CPU limit's clock counts the thread's own work, not the time it waited", () => {
  const before = threadCpuMs();
  expect(before).not.toBeNull();
  // Blocked 200 ms without running: a thread descheduled on a busy machine is the same.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
  const waited = threadCpuMs()! - before!;
  expect(waited).toBeLessThanOrEqual(30);
  // Working, it advances (however busy the machine: the loop ends when it has, or at 10 s).
  const from = threadCpuMs()!;
  const deadline = performance.now() + 10_000;
  while (threadCpuMs()! - from < 50 && performance.now() < deadline);
  expect(threadCpuMs()! - from).toBeGreaterThanOrEqual(50);
});
