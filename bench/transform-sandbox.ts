/*
 * `npm run bench:transform`: what a destination's transformation costs (src/destinations/
 * transform/). The request is the bench's small delivery: a 2 KB JSON body and two headers.
 * The transform adds a field to the body and a header; the no-op returns the request as it
 * came, so the difference is the transform's own work and the rest is the sandbox's
 * (a fresh QuickJS runtime and context, the JSON in and out, the worker's round trip).
 *
 * - cold start: a new pool's first answer (a worker thread, QuickJS's module, one run).
 * - in thread: Sandbox.run (a fresh context) and Sandbox.runWarm (the owner's warm context,
 *   as deliveries run) on this thread, no worker: the sandbox's share of a call.
 * - one worker: calls one after another through a pool of one, median and p99 of each.
 * - throughput: --concurrency calls in flight on a pool of two workers for --seconds, each
 *   in a fresh context (`run`, a preview's way); then batches of --batch warm runs
 *   (`runMany`, deliveries' way) from two owners at once, one batch of each in flight.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    count: { type: 'string', default: '3000' },
    seconds: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '16' },
    batch: { type: 'string', default: '64' },
  },
});
const COUNT = Number(args.count);
const SECONDS = Number(args.seconds);
const CONCURRENCY = Number(args.concurrency);
const BATCH = Number(args.batch);

interface Request {
  body: unknown;
  headers: Record<string, string>;
  path: string;
  query: Record<string, string>;
}
interface Outcome {
  kind: string;
}
interface Pool {
  run(code: string, request: Request, context: object): Promise<Outcome>;
  runMany(owner: string, runs: Array<{ code: string; request: Request; context: object }>, budgetMs: number): Promise<{ outcomes: Array<Outcome | null>; usedMs: number }>;
  close(): Promise<void>;
}
interface Sandbox {
  run(code: string, request: Request, context: object): Outcome;
  runWarm(owner: string, code: string, request: Request, context: object): Outcome;
}

const root = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const dist = (path: string) => import(pathToFileURL(`${root}/dist/${path}`).href);
const { TransformPool } = (await dist('destinations/transform/pool.js')) as { TransformPool: new (options: { workers: number }) => Pool };
const { Sandbox } = (await dist('destinations/transform/sandbox.js')) as { Sandbox: { load(limits: { cpuMs: number; memoryMb: number }): Promise<Sandbox> } };

const REQUEST: Request = {
  body: {
    event: 'order.created',
    order: {
      id: 'ord_1',
      customer: { id: 'cus_1', email: 'someone@example.com', name: 'Some One' },
      items: Array.from({ length: 30 }, (_, n) => ({ sku: `sku-${n}`, name: `Item number ${n}`, quantity: n + 1, price: 9.5 + n })),
    },
  },
  headers: { 'content-type': 'application/json', 'user-agent': 'bench' },
  path: '',
  query: {},
};
const CONTEXT = { webhookId: 'wh_1', event: 'order.created', integrationId: 'int_1', receivedAt: '2025-01-01T00:00:00.000Z', attempt: 1 };
const TRANSFORM = `function transform(request, context) {
  request.body.webhook_id = context.webhookId;
  request.headers['x-event'] = context.event;
  return request;
}`;
const NO_OP = '(request) => request';
const VARIANTS = [
  ['no-op', NO_OP],
  ['transform', TRANSFORM],
] as const;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

function summary(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  return `median ${percentile(sorted, 0.5).toFixed(3)} ms, p99 ${percentile(sorted, 0.99).toFixed(3)} ms (${samples.length} calls)`;
}

function expectRequest(outcome: Outcome): void {
  if (outcome.kind !== 'request') throw new Error(`unexpected outcome ${JSON.stringify(outcome)}`);
}

console.log(`body ${JSON.stringify(REQUEST.body).length} B`);

{
  const started = performance.now();
  const pool = new TransformPool({ workers: 1 });
  expectRequest(await pool.run(TRANSFORM, REQUEST, CONTEXT));
  console.log(`cold start: ${(performance.now() - started).toFixed(1)} ms to a new pool's first answer`);
  await pool.close();
}

{
  const sandbox = await Sandbox.load({ cpuMs: 50, memoryMb: 32 });
  const samples = new Map<string, number[]>(VARIANTS.map(([name]) => [name, []]));
  const warm = new Map<string, number[]>(VARIANTS.map(([name]) => [name, []]));
  for (let n = 0; n < 200; n++) {
    for (const [, code] of VARIANTS) {
      sandbox.run(code, REQUEST, CONTEXT);
      sandbox.runWarm('bench', code, REQUEST, CONTEXT);
    }
  }
  // Alternating, so the machine's drift hits all four.
  for (let n = 0; n < COUNT; n++) {
    for (const [name, code] of VARIANTS) {
      let started = performance.now();
      expectRequest(sandbox.run(code, REQUEST, CONTEXT));
      samples.get(name)!.push(performance.now() - started);
      started = performance.now();
      expectRequest(sandbox.runWarm('bench', code, REQUEST, CONTEXT));
      warm.get(name)!.push(performance.now() - started);
    }
  }
  for (const [name, values] of samples) console.log(`in thread, fresh context, ${name}: ${summary(values)}`);
  for (const [name, values] of warm) console.log(`in thread, warm context, ${name}: ${summary(values)}`);
}

{
  const pool = new TransformPool({ workers: 1 });
  const samples = new Map<string, number[]>(VARIANTS.map(([name]) => [name, []]));
  for (let n = 0; n < 200; n++) for (const [, code] of VARIANTS) await pool.run(code, REQUEST, CONTEXT);
  for (let n = 0; n < COUNT; n++) {
    for (const [name, code] of VARIANTS) {
      const started = performance.now();
      expectRequest(await pool.run(code, REQUEST, CONTEXT));
      samples.get(name)!.push(performance.now() - started);
    }
  }
  for (const [name, values] of samples) console.log(`one worker, ${name}: ${summary(values)}`);
  await pool.close();
}

for (const [name, code] of VARIANTS) {
  const pool = new TransformPool({ workers: 2 });
  await Promise.all([pool.run(code, REQUEST, CONTEXT), pool.run(code, REQUEST, CONTEXT)]);
  let done = 0;
  const until = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        expectRequest(await pool.run(code, REQUEST, CONTEXT));
        done++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  console.log(`throughput, two workers, fresh contexts, ${name}: ${Math.round(done / seconds)} calls/s (${CONCURRENCY} in flight, ${seconds.toFixed(1)} s)`);
  await pool.close();
}

for (const [name, code] of VARIANTS) {
  const pool = new TransformPool({ workers: 2 });
  const batch = Array.from({ length: BATCH }, () => ({ code, request: REQUEST, context: CONTEXT }));
  const owners = ['company-a', 'company-b'];
  await Promise.all(owners.map((owner) => pool.runMany(owner, batch, 50)));
  let done = 0;
  const until = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    owners.map(async (owner) => {
      while (performance.now() < until) {
        const { outcomes } = await pool.runMany(owner, batch, 50);
        for (const outcome of outcomes) {
          if (outcome === null) continue;
          expectRequest(outcome);
          done++;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  console.log(`throughput, two workers, warm batches of ${BATCH}, ${name}: ${Math.round(done / seconds)} runs/s (two owners, ${seconds.toFixed(1)} s)`);
  await pool.close();
}
