import { afterAll, beforeAll, expect, test } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import type { WebhookRef } from '../../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from '../support/databases.js';
import { createTenant, webhook, type Owner } from '../support/webhooks.js';

/**
 * A worker reads the bodies of the deliveries it claimed but does not hold in memory (a
 * retry, another node's webhook): only those of the companies the deliveries belong to, and
 * by the primary key whatever the statistics say. On PostgreSQL, with the company in its
 * WHERE and no analyze since the company's day filled up (as before autovacuum's first
 * pass, or where it is off), the planner read the company's whole day to find 48 rows.
 */

const dialect = testDialect();
let database: TestDatabase;
let owner: Owner;
let other: Owner;
const refs: WebhookRef[] = [];

beforeAll(async () => {
  database = await freshDatabase();
  const { store } = database;
  owner = await createTenant(store);
  other = await createTenant(store);
  const now = Date.now();
  for (let i = 0; i < 3000; i += 500) {
    const batch = Array.from({ length: 500 }, (_, j) => webhook(owner, now - 60_000 + i + j));
    await store.commitBatch(batch, []);
    if (i === 1500) refs.push(...batch.slice(0, 48).map((w) => ({ companyId: owner.companyId, uuid: w.uuid, receivedAt: w.receivedAt })));
  }
  if (dialect === 'postgres') {
    // The company's day as a busy one looks (50,000 more rows of 400 B, written directly),
    // large enough that PostgreSQL reads it through an index rather than whole.
    await database.query(
      `insert into webhooks (uuid, company_id, integration_id, event, received_at, raw_body, headers, source_ip, key_id)
       select gen_random_uuid()::text, $1, $2, 'invoice.paid', $3::bigint + g, convert_to(repeat('x', 400), 'UTF8'), '{}', '192.0.2.1', 'key_bulk'
       from generate_series(1, 50000) as g`,
      [owner.companyId, owner.integrationId, now - 50_000],
    );
  }
}, 120_000);

afterAll(async () => {
  await database?.cleanup();
});

test("a body is read for the delivery's own company only", async () => {
  const [ref] = refs;
  expect((await database.store.readWebhookBodies([ref!])).map((body) => body.uuid)).toEqual([ref!.uuid]);
  expect(await database.store.readWebhookBodies([{ ...ref!, companyId: other.companyId }])).toEqual([]);
  const mixed = await database.store.readWebhookBodies([refs[1]!, { ...refs[2]!, companyId: other.companyId }]);
  expect(mixed.map((body) => body.uuid)).toEqual([refs[1]!.uuid]);
});

test('bodies are read through the primary key, not a walk through the company, without statistics', async () => {
  const seen: Array<{ sql: string; parameters: readonly unknown[] }> = [];
  const observed = openStore(database.databaseUrl, { poolSize: 1, onQuery: (query) => seen.push(query) });
  try {
    expect(await observed.readWebhookBodies(refs)).toHaveLength(48);
  } finally {
    await observed.close();
  }
  const [read] = seen.filter((query) => query.sql.includes('"raw_body"'));
  let plan: string;
  if (dialect === 'sqlite') {
    const rows = await database.query<{ detail: string }>(`explain query plan ${read!.sql}`, [...read!.parameters]);
    plan = rows.map((row) => row.detail).join('\n');
    // A point lookup of each uuid (SQLite's planner makes one of either query).
    expect(plan, plan).toMatch(/^SEARCH webhooks USING (INDEX|PRIMARY KEY).*\buuid=\?/);
  } else {
    const rows = await database.query<{ 'QUERY PLAN': string }>(`explain ${read!.sql}`, [...read!.parameters]);
    plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan, plan).toMatch(/Index.* Scan (using|on) webhooks_p\d+_pkey/);
    expect(plan, plan).not.toMatch(/company_id/);
  }
});
