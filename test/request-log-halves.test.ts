import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PendingWebhook, RequestLogEntry } from '../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from './support/databases.js';
import { createTenant, logRow, webhook, type Owner } from './support/webhooks.js';

/**
 * The request log in two halves (migration 0010): an accepted webhook's record is in its own
 * row, every other request's in request_log. Each read of the log must see both as one:
 * every record once, in one order, through pages, counts and callers alike.
 */

const dialect = testDialect();
/** The first parameter in raw SQL. */
const FIRST = dialect === 'postgres' ? '$1' : '?';

describe(`the request log's two halves (${dialect})`, () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await freshDatabase();
  });
  afterAll(() => database?.cleanup());

  const count = async (table: string, where = 'true', parameters: unknown[] = []) =>
    Number((await database.query<{ n: number | string }>(`select count(*) as n from ${table} where ${where}`, parameters))[0]!.n);

  /** A refused request of this owner: another key's, say, and another user agent. */
  function refusal(owner: Owner, receivedAt: number, changes: Partial<RequestLogEntry> = {}): RequestLogEntry {
    return { ...logRow(owner, receivedAt), ...changes };
  }

  test("an accepted webhook's record is its row's, read back with every field; a replay's is request_log's", async () => {
    const owner = await createTenant(database.store);
    const at = Date.now();
    const accepted = webhook(owner, at, { idempotencyKey: 'once' });
    accepted.log.userAgent = 'halves-test/1.0';
    await database.store.commitBatch([accepted], []);
    expect(await count('request_log', `company_id = ${FIRST}`, [owner.companyId])).toBe(0);

    const replay: PendingWebhook = { ...webhook(owner, at + 1, { idempotencyKey: 'once' }), rawBody: accepted.rawBody, bodySha256: accepted.bodySha256 };
    const [outcome] = await database.store.commitBatch([replay], []);
    expect(outcome).toMatchObject({ kind: 'replayed', uuid: accepted.uuid });

    const log = await database.store.listCompanyRequestLog(owner.companyId, { limit: 10 });
    expect(log.map((r) => r.status)).toEqual([200, 202]);
    expect(log[1]).toEqual({
      id: accepted.log.id,
      companyId: owner.companyId,
      integrationId: owner.integrationId,
      receivedAt: at,
      method: 'POST',
      status: 202,
      errorCode: null,
      keyId: owner.keyId,
      ip: accepted.sourceIp,
      userAgent: 'halves-test/1.0',
      sizeBytes: accepted.rawBody.length,
      durationMs: expect.any(Number),
      webhookUuid: accepted.uuid,
      errorDetail: null,
      traceId: null,
    });
    expect(log[1]!.durationMs).toBeGreaterThanOrEqual(0);
    expect(log[0]).toMatchObject({ id: replay.log.id, webhookUuid: accepted.uuid });
  });

  test('a record kept in request_log before migration 0010, its webhook without one, is read once', async () => {
    const owner = await createTenant(database.store);
    const at = Date.now();
    const old = webhook(owner, at);
    await database.store.commitBatch([old], []);
    // As an older version wrote it: the webhook's row without its record, the record in request_log.
    await database.query(`update webhooks set request_id = null, user_agent = null, duration_ms = null where uuid = ${FIRST}`, [old.uuid]);
    const record = refusal(owner, at, { status: 202, errorCode: null, keyId: owner.keyId, webhookUuid: old.uuid });
    await database.store.commitBatch([], [record]);

    const log = await database.store.listCompanyRequestLog(owner.companyId, { limit: 10 });
    expect(log.map((r) => r.id)).toEqual([record.id]);
    const usage = await database.store.countUsage(owner.companyId, { bucketMs: 3_600_000, since: at - 3_600_000, until: at + 3_600_000 });
    expect(usage.map((b) => ({ accepted: b.accepted, total: b.total }))).toEqual([{ accepted: 1, total: 1 }]);
    const perKey = await database.store.countKeyRequests(owner.companyId, owner.integrationId, [owner.keyId], at - 1);
    expect(perKey.get(owner.keyId)).toBe(1);
  });

  test('pages through both halves with a cursor: every record once, in order, ties of one millisecond included', async () => {
    const owner = await createTenant(database.store);
    const at = Date.now();
    // Three milliseconds, each with four webhooks and four refusals.
    const webhooks = Array.from({ length: 12 }, (_, i) => webhook(owner, at + (i % 3)));
    const refusals = Array.from({ length: 12 }, (_, i) => refusal(owner, at + (i % 3)));
    await database.store.commitBatch(webhooks, refusals);

    const all = await database.store.listCompanyRequestLog(owner.companyId, { limit: 100 });
    expect(all.map((r) => r.id).sort()).toEqual([...webhooks.map((w) => w.log.id), ...refusals.map((r) => r.id)].sort());
    for (let i = 1; i < all.length; i++) expect(all[i - 1]!.receivedAt).toBeGreaterThanOrEqual(all[i]!.receivedAt);

    for (const limit of [1, 3, 5]) {
      const paged: RequestLogEntry[] = [];
      let cursor: { at: number; id: string } | undefined;
      for (;;) {
        const page = await database.store.listCompanyRequestLog(owner.companyId, { limit, cursor });
        paged.push(...page);
        if (page.length < limit) break;
        cursor = { at: page.at(-1)!.receivedAt, id: page.at(-1)!.id };
      }
      expect(paged.map((r) => r.id)).toEqual(all.map((r) => r.id));
    }
  });

  test("filters, usage, a key's count and its callers take both halves", async () => {
    const owner = await createTenant(database.store);
    const at = Date.now();
    const agentA = 'sender-a/1';
    const accepted = [0, 1, 2].map((i) => {
      const w = webhook(owner, at + i);
      w.log.userAgent = agentA;
      return w;
    });
    // Refused with the key (over the rate limit), from the same sender; replayed from another.
    const refused = [3, 4].map((i) => refusal(owner, at + i, { status: 429, errorCode: 'rate_limited', keyId: owner.keyId, userAgent: agentA, ip: accepted[0]!.sourceIp }));
    const replayed = refusal(owner, at + 5, { status: 200, errorCode: null, keyId: owner.keyId, userAgent: 'sender-b/1', ip: '192.0.2.7' });
    await database.store.commitBatch(accepted, [...refused, replayed]);

    const ids = async (query: Parameters<typeof database.store.listCompanyRequestLog>[1]) =>
      (await database.store.listCompanyRequestLog(owner.companyId, query)).map((r) => r.id).sort();
    expect(await ids({ limit: 50, status: { from: 400, to: 500 } })).toEqual(refused.map((r) => r.id).sort());
    expect(await ids({ limit: 50, errorCode: 'rate_limited' })).toEqual(refused.map((r) => r.id).sort());
    expect(await ids({ limit: 50, status: { from: 200, to: 300 } })).toEqual([...accepted.map((w) => w.log.id), replayed.id].sort());
    expect(await ids({ limit: 50, keyId: owner.keyId, since: at + 2, until: at + 4 })).toEqual([accepted[2]!.log.id, refused[0]!.id].sort());

    const usage = await database.store.countUsage(owner.companyId, { bucketMs: 3_600_000, since: at - 3_600_000, until: at + 3_600_000 });
    const summed = usage.reduce(
      (sum, b) => ({ accepted: sum.accepted + b.accepted, replayed: sum.replayed + b.replayed, rejected: sum.rejected + b.rejected, total: sum.total + b.total }),
      { accepted: 0, replayed: 0, rejected: 0, total: 0 },
    );
    expect(summed).toEqual({ accepted: 3, replayed: 1, rejected: 2, total: 6 });
    const byKey = await database.store.countUsage(owner.companyId, { bucketMs: 3_600_000, since: at - 3_600_000, until: at + 3_600_000, groupBy: 'key' });
    expect(byKey.filter((b) => b.group === owner.keyId).reduce((sum, b) => sum + b.total, 0)).toBe(6);

    expect((await database.store.countKeyRequests(owner.companyId, owner.integrationId, [owner.keyId], at - 1)).get(owner.keyId)).toBe(6);
    const callers = await database.store.listKeyCallers(owner.companyId, owner.integrationId, owner.keyId, { since: at - 1, limit: 10 });
    expect(callers).toEqual([
      { ip: '192.0.2.7', userAgent: 'sender-b/1', lastSeenAt: at + 5, requests: 1 },
      { ip: accepted[0]!.sourceIp, userAgent: agentA, lastSeenAt: at + 4, requests: 5 },
    ]);
    // The limit applies to callers, each counted whole across both halves.
    expect(await database.store.listKeyCallers(owner.companyId, owner.integrationId, owner.keyId, { since: at - 1, limit: 1 })).toEqual([callers[0]]);
  });
});
