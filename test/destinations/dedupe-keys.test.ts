import { afterEach, describe, expect, test } from 'vitest';
import { freshDatabase, testDialect, type TestDatabase } from '../support/databases.js';
import type { Store } from '../../src/store/store.js';

/**
 * Deduplication keys beneath the workers, on each database: two nodes (two stores with their
 * own connections) deciding at once about deliveries with the same key agree on one first
 * delivery; a key is taken over once its window ended, and expired keys are swept.
 */

let database: TestDatabase | undefined;
const others: Store[] = [];
afterEach(async () => {
  await Promise.all(others.splice(0).map((store) => store.close()));
  await database?.cleanup();
  database = undefined;
});

const NOW = Date.parse('2026-12-02T12:00:00Z');

describe('claimDedupeKeys', () => {
  test('two nodes claiming one key at once: exactly one delivery holds it, and every claim says which', async () => {
    database = await freshDatabase();
    // SQLite is one node (its claims run on the commit thread, one at a time): a second
    // store in this process would wait on the file's lock with the event loop blocked.
    const other = testDialect() === 'postgres' ? database.openAnother() : database.store;
    if (other !== database.store) others.push(other);
    const claims = Array.from({ length: 20 }, (_, i) => ({ destinationId: 'dst_a', key: 'k1', deliveryId: `dlv_${i}`, expiresAt: NOW + 60_000 }));
    const answers = await Promise.all(claims.map((claim, i) => (i % 2 === 0 ? database!.store : other).claimDedupeKeys([claim], NOW)));
    const holders = new Set(answers.flat().map((answer) => answer.heldBy));
    expect(holders.size).toBe(1);
    const [holder] = holders;
    expect(claims.map((c) => c.deliveryId)).toContain(holder);
    // The holder's own claim says it holds it; every other says who does.
    for (const answer of answers.flat()) expect(answer.heldBy).toBe(holder);
  });

  test('keys are per destination; a key past its window is taken over, and swept later', async () => {
    database = await freshDatabase();
    const { store } = database;
    expect(await store.claimDedupeKeys([{ destinationId: 'dst_a', key: 'k', deliveryId: 'dlv_1', expiresAt: NOW + 1000 }], NOW)).toEqual([{ deliveryId: 'dlv_1', heldBy: 'dlv_1' }]);
    expect(await store.claimDedupeKeys([{ destinationId: 'dst_b', key: 'k', deliveryId: 'dlv_2', expiresAt: NOW + 1000 }], NOW)).toEqual([{ deliveryId: 'dlv_2', heldBy: 'dlv_2' }]);
    expect(await store.claimDedupeKeys([{ destinationId: 'dst_a', key: 'k', deliveryId: 'dlv_3', expiresAt: NOW + 2000 }], NOW + 999)).toEqual([{ deliveryId: 'dlv_3', heldBy: 'dlv_1' }]);
    expect(await store.claimDedupeKeys([{ destinationId: 'dst_a', key: 'k', deliveryId: 'dlv_4', expiresAt: NOW + 3000 }], NOW + 1000)).toEqual([{ deliveryId: 'dlv_4', heldBy: 'dlv_4' }]);
    // dst_b's key ended at NOW + 1000: the next claim sweeps it.
    await store.claimDedupeKeys([{ destinationId: 'dst_c', key: 'x', deliveryId: 'dlv_5', expiresAt: NOW + 9000 }], NOW + 1500);
    const rows = await database.query<{ destination_id: string }>('select destination_id from delivery_dedupe_keys order by destination_id');
    expect(rows.map((row) => row.destination_id)).toEqual(['dst_a', 'dst_c']);
  });
});
