import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { buildTestApp, type TestApp, type TestTenant } from '../helpers.js';
import { managementKey } from '../support/api.js';
import { addDestination } from '../support/deliveries.js';
import { webhook } from '../support/webhooks.js';

/**
 * Bulk replays and sends over HTTP, as a hostile tenant calls them (issue 33, findings 2,
 * 3 and 6), on each database: many at once from one company get one run and 429s with
 * Retry-After, never a 500 (PostgreSQL answered "deadlock detected" to concurrent replays),
 * and calling again and again does not send the same deliveries again.
 */

let t: TestApp;
let tenant: TestTenant;
let headers: Record<string, string>;
let base: string;
let destinationId: string;

beforeAll(async () => {
  // The workers stay stopped: what the calls change is what is checked, not what is sent.
  t = await buildTestApp({}, { delivery: { start: false } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/api/v1`;
  tenant = await t.newTenant();
  headers = { ...(await managementKey(t, tenant.companyId)), 'content-type': 'application/json' };
  const owner = { companyId: tenant.companyId, integrationId: tenant.integrationId, keyId: tenant.keyId };
  destinationId = await addDestination(t.store, tenant.companyId, { createdAt: Date.now() - 3_600_000 });
  const at = Date.now() - 600_000;
  for (let i = 0; i < 3000; i += 500) await t.store.commitBatch(Array.from({ length: 500 }, (_, j) => webhook(owner, at + i + j)), []);
  await t.database.query(`update deliveries set state = 'failed', next_attempt_at = null, attempts = 8 where destination_id = '${destinationId}'`);
});
afterAll(() => t?.close());

async function call(path: string, body: object) {
  const response = await fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as Record<string, unknown> };
}

test('many bulk replays and sends of one company at once: one runs, the others get 429 with Retry-After, none a 500', async () => {
  const since = new Date(0).toISOString();
  // The operation that runs holds its first step until every other call has its answer, so
  // that they all come while it runs, whatever order the server reads them in.
  const calls = 12;
  let answered = 0;
  let everyOtherAnswered!: () => void;
  const othersDone = new Promise<void>((resolve) => (everyOtherAnswered = resolve));
  for (const method of ['replayStep', 'sendStep'] as const) {
    const step = t.store[method].bind(t.store) as (...args: unknown[]) => Promise<unknown>;
    vi.spyOn(t.store, method).mockImplementation((async (...args: unknown[]) => {
      await othersDone;
      return step(...args);
    }) as never);
  }
  const counted = (answer: Promise<Awaited<ReturnType<typeof call>>>) =>
    answer.then((a) => {
      if (++answered === calls - 1) everyOtherAnswered();
      return a;
    });
  const answers = await Promise.all([
    ...Array.from({ length: 8 }, () => counted(call('/deliveries/replay', { destination_id: destinationId, state: 'failed' }))),
    ...Array.from({ length: 4 }, () => counted(call(`/destinations/${destinationId}/send`, { since }))),
  ]);
  vi.restoreAllMocks();
  expect(answers.map((a) => a.status).filter((status) => status !== 200 && status !== 429), JSON.stringify(answers)).toEqual([]);
  const ran = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status === 429);
  expect([ran.length, refused.length]).toEqual([1, calls - 1]);
  for (const answer of refused) {
    expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(answer.body).toMatchObject({ error: 'Bulk operation under way', code: 'redelivery_busy', message: expect.any(String) });
  }
  expect(ran[0]!.body).toEqual(expect.objectContaining(ran[0]!.body.replayed === undefined ? { created: 0, skipped: 3000 } : { replayed: 3000 }));

  // Called again at once: the series just began, so nothing is replayed twice.
  await t.database.query(`update deliveries set state = 'failed', next_attempt_at = null where destination_id = '${destinationId}'`);
  const again = await call('/deliveries/replay', { destination_id: destinationId });
  expect([again.status, again.body.replayed]).toEqual([200, 0]);
  // Retry now takes pending ones only, and these are failed: none.
  const pending = await call('/deliveries/replay', { destination_id: destinationId, state: 'pending' });
  expect([pending.status, pending.body.replayed]).toEqual([200, 0]);
  const cancelled = await call('/deliveries/replay', { destination_id: destinationId, state: 'cancelled' });
  expect([cancelled.status, cancelled.body.field]).toEqual([400, 'state']);
});
