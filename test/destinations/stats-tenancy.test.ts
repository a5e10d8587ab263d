import { afterEach, beforeEach, expect, test } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import type { Store } from '../../src/store/store.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { createTenant, webhook } from '../support/webhooks.js';

/**
 * A row of another company is "not found" (STYLE.md, habit 4): destinationStats called
 * with company B and A's destination id must not count A's deliveries. Its backlog queries
 * (src/store/queries/delivery-stats.ts) filter on destination_id alone. The API checks the
 * destination's company first, so no route shows it; the store should not rely on that.
 */

let db: TestDatabase;
let store: Store;
beforeEach(async () => {
  db = await freshDatabase();
  store = db.store;
});
afterEach(() => db.cleanup());

test("destinationStats of another company's destination counts nothing of it", async () => {
  const a = await createTenant(store);
  const b = await createTenant(store);
  const id = newId('dst');
  const at = Date.now();
  const audit = { actor: { type: 'cli' as const, id: 'test', ip: null }, action: 'destination.create', targetType: 'destination', targetId: id, at };
  await store.createDestination(
    a.companyId,
    {
      id,
      name: 'A',
      url: 'https://a.example.invalid/',
      integrationIds: null,
      eventPatterns: ['*'],
      headersSealed: null,
      headerNames: [],
      timeoutMs: 15_000,
      ratePerSecond: null,
      maxInFlight: 10,
      secretSealed: 'sealed',
      createdAt: at,
    },
    audit,
  );
  await store.commitBatch([webhook(a, at), webhook(a, at + 1)], []);
  expect((await store.destinationStats(a.companyId, id, { since: at - 1000, until: at + 1000, bucketMs: 60_000, now: at })).backlog.pending).toBe(2);

  const seenByB = await store.destinationStats(b.companyId, id, { since: at - 1000, until: at + 1000, bucketMs: 60_000, now: at });
  expect(seenByB.backlog).toEqual({ pending: 0, held: 0, inFlight: 0, oldestDueAt: null });
});
