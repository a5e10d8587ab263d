import { afterAll, expect, test } from 'vitest';
import { CompanyBatches, DeliveryRules, type TimeBudget, type Transformer } from '../../src/destinations/delivery-rules.js';
import type { TransformOutcome, TransformRun } from '../../src/destinations/transform/pool.js';
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

/**
 * A transformer whose runs each take `msPerRun` of the clock (a batch stops starting runs
 * past its budget, as the pool's worker does), recording each batch's owner, size and budget.
 */
function timedTransformer(clock: { now: number }, msPerRun: number) {
  const batches: Array<{ owner: string; runs: number; budgetMs: number }> = [];
  let hold: Promise<void> = Promise.resolve();
  const transformer: Transformer = {
    run: () => Promise.reject(new Error('not used')),
    async runMany(owner: string, runs: TransformRun[], budgetMs: number) {
      await hold;
      batches.push({ owner, runs: runs.length, budgetMs });
      const outcomes: Array<TransformOutcome | null> = runs.map(() => null);
      let used = 0;
      for (let index = 0; index < runs.length && (index === 0 || used < budgetMs); index++) {
        used += msPerRun;
        outcomes[index] = { kind: 'request', request: runs[index]!.request };
      }
      clock.now += used;
      return { outcomes, usedMs: used };
    },
  };
  return { transformer, batches, holdUntil: (gate: Promise<void>) => (hold = gate) };
}

const BUDGET: TimeBudget = { perSecondMs: 200, burstMs: 1000, maxWaitMs: 1500, maxWaiting: 100, maxBatchRuns: 4, maxBatchMs: 50 };
const RUN: TransformRun = { code: 'x', request: { body: null, headers: {}, path: '', query: {} }, context: { webhookId: 'w', event: 'e', integrationId: 'i', receivedAt: '', attempt: 1 } };

test("a company's waiting runs go as batches of at most maxBatchRuns, each within maxBatchMs; what a batch did not start goes in the next", async () => {
  const clock = { now: 0 };
  const { transformer, batches, holdUntil } = timedTransformer(clock, 20);
  let open!: () => void;
  holdUntil(new Promise((resolve) => (open = resolve)));
  const batcher = new CompanyBatches(() => transformer, BUDGET, () => clock.now, async (ms) => void (clock.now += ms));
  const runs = Array.from({ length: 6 }, () => batcher.run('cmp_a', RUN));
  open();
  const outcomes = await Promise.all(runs);
  expect(outcomes.every((outcome) => outcome.kind === 'request')).toBe(true);
  // The first came alone (nothing else waited); then the other five, four at a time, of which
  // three start within 50 ms at 20 ms each; the rest in the next batch.
  expect(batches.map(({ runs }) => runs)).toEqual([1, 4, 2]);
  expect(batches.every(({ budgetMs }) => budgetMs === 50)).toBe(true);
});

test("a company past its sandbox time waits for its bucket, then is refused; another company's runs do not wait", async () => {
  const clock = { now: 0 };
  const slept: number[] = [];
  const { transformer } = timedTransformer(clock, 600);
  const batcher = new CompanyBatches(() => transformer, { ...BUDGET, maxBatchRuns: 1 }, () => clock.now, async (ms) => {
    slept.push(ms);
    clock.now += ms;
  });
  // Each run of cmp_a takes 600 ms of sandbox time (the clock moves as it runs).
  await batcher.run('cmp_a', RUN);
  await batcher.run('cmp_a', RUN);
  expect(slept).toEqual([]);
  // 1,000 ms, less 1,200 used, plus 120 refilled while the second ran: 80 ms short when the
  // third comes, 400 ms (and one) to wait at 200 ms a second.
  await batcher.run('cmp_a', RUN);
  expect(slept).toEqual([401]);
  await batcher.run('cmp_b', RUN);
  expect(slept).toEqual([401]);
  // cmp_a is now about 480 ms short: 2.4 s to wait, past its 1.5 s: refused, without waiting.
  await expect(batcher.run('cmp_a', RUN)).rejects.toThrow(/share of the sandbox/);
  expect(slept).toEqual([401]);
});

test("a company's queue is bounded, and closing refuses what waits at once", async () => {
  const clock = { now: 0 };
  const { transformer, holdUntil } = timedTransformer(clock, 1);
  holdUntil(new Promise(() => {}));
  const batcher = new CompanyBatches(() => transformer, { ...BUDGET, maxWaiting: 2, maxBatchRuns: 1 }, () => clock.now, () => new Promise(() => {}));
  // The first is out in a batch (held); two wait behind it.
  const running = batcher.run('cmp_a', RUN);
  await Promise.resolve();
  const waiting = [batcher.run('cmp_a', RUN), batcher.run('cmp_a', RUN)];
  await expect(batcher.run('cmp_a', RUN)).rejects.toThrow(/2 of this company's transformations are waiting/);
  batcher.close();
  for (const task of waiting) await expect(task).rejects.toThrow(/stopping/);
  await expect(batcher.run('cmp_b', RUN)).rejects.toThrow(/stopping/);
  void running;
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
