import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PendingWebhook } from '../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from './support/databases.js';
import { createTenant, logRow, webhook } from './support/webhooks.js';

/**
 * A request's trace id (migration 0014) as the store keeps it, on each database: with an
 * accepted webhook's record in its row, with every other request in request_log (a refusal,
 * a replay), and none for a request that was not traced; the request log reads it back
 * from both halves.
 */

const dialect = testDialect();
const TRACE = (n: number) => `${n}`.repeat(32).slice(0, 32);

describe(`trace ids in the request log (${dialect})`, () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await freshDatabase();
  });
  afterAll(() => database?.cleanup());

  test('each request keeps its trace id, read back from both halves of the log; an untraced one has none', async () => {
    const owner = await createTenant(database.store);
    const at = Date.now();
    const traced = webhook(owner, at, { idempotencyKey: 'traced' });
    traced.log.traceId = TRACE(1);
    const untraced = webhook(owner, at + 1);
    const replay: PendingWebhook = { ...webhook(owner, at + 2, { idempotencyKey: 'traced' }), rawBody: traced.rawBody, bodySha256: traced.bodySha256 };
    replay.log.traceId = TRACE(2);
    const refused = { ...logRow(owner, at + 3), traceId: TRACE(3) };
    // The first group alone: the replay must find the webhook it repeats committed.
    await database.store.commitBatch([traced, untraced], [refused]);
    const [outcome] = await database.store.commitBatch([replay], []);
    expect(outcome).toMatchObject({ kind: 'replayed', uuid: traced.uuid });

    const log = await database.store.listCompanyRequestLog(owner.companyId, { limit: 10 });
    const traceOf = (id: string) => log.find((row) => row.id === id)?.traceId;
    expect(traceOf(traced.log.id)).toBe(TRACE(1));
    expect(traceOf(untraced.log.id)).toBeNull();
    expect(traceOf(replay.log.id)).toBe(TRACE(2));
    expect(traceOf(refused.id)).toBe(TRACE(3));
  });
});
