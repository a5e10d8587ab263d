import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import type { WebhookRef } from '../../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from '../support/databases.js';
import { addDestination } from '../support/deliveries.js';
import { createTenant, webhook, type Owner } from '../support/webhooks.js';

/**
 * Reads of the delivery path that must not depend on the planner's statistics: before
 * autovacuum's first analyze of a busy day (or where it is off, as on the machine the
 * benchmark runs on), PostgreSQL took `company_id = …` for one row, and read a company's
 * whole day (the bodies a worker lacks) or a destination's every delivery (its backlog)
 * through the index that starts with it. Each test runs on a database never analyzed,
 * with a company holding tens of thousands of rows, and checks the plan of the statement
 * the store sends, captured with its parameters.
 */

const dialect = testDialect();
let database: TestDatabase;
let owner: Owner;
let other: Owner;
let destinationId: string;
const refs: WebhookRef[] = [];

interface Captured {
  sql: string;
  parameters: readonly unknown[];
}

/** The plan's text: SQLite's `explain query plan` details, PostgreSQL's `explain`. */
async function planOf(query: Captured): Promise<string> {
  if (dialect === 'sqlite') {
    const rows = await database.query<{ detail: string }>(`explain query plan ${query.sql}`, [...query.parameters]);
    return rows.map((row) => row.detail).join('\n');
  }
  const rows = await database.query<{ 'QUERY PLAN': string }>(`explain ${query.sql}`, [...query.parameters]);
  return rows.map((row) => row['QUERY PLAN']).join('\n');
}

/** The statements `read` sends through a store of its own. */
async function captured(read: (store: ReturnType<typeof openStore>) => Promise<unknown>): Promise<Captured[]> {
  const seen: Captured[] = [];
  const observed = openStore(database.databaseUrl, { poolSize: 1, onQuery: (query) => seen.push(query) });
  try {
    await read(observed);
  } finally {
    await observed.close();
  }
  return seen;
}

beforeAll(async () => {
  // A database of its own on PostgreSQL: another test file's `analyze` of the run's shared
  // database would give these tables statistics midway.
  database = await freshDatabase({ ownDatabase: true });
  const { store } = database;
  owner = await createTenant(store);
  other = await createTenant(store);
  destinationId = await addDestination(store, owner.companyId, { maxInFlight: 10 });
  const now = Date.now();
  for (let i = 0; i < 3000; i += 500) {
    const batch = Array.from({ length: 500 }, (_, j) => webhook(owner, now - 60_000 + i + j));
    await store.commitBatch(batch, []);
    if (i === 1500) refs.push(...batch.slice(0, 48).map((w) => ({ companyId: owner.companyId, uuid: w.uuid, receivedAt: w.receivedAt })));
  }
  if (dialect === 'postgres') {
    // A busy day as the company would have it, written directly: 50,000 more webhooks of
    // 400 B, and as many deliveries to the destination, settled long ago.
    await database.query(
      `insert into webhooks (uuid, company_id, integration_id, event, received_at, raw_body, headers, source_ip, key_id)
       select gen_random_uuid()::text, $1, $2, 'invoice.paid', $3::bigint + g, convert_to(repeat('x', 400), 'UTF8'), '{}', '192.0.2.1', 'key_bulk'
       from generate_series(1, 50000) as g`,
      [owner.companyId, owner.integrationId, now - 50_000],
    );
    await database.query(
      `insert into deliveries (id, company_id, destination_id, webhook_uuid, webhook_received_at, integration_id, event, state, next_attempt_at, created_at, updated_at)
       select 'dlv_bulk_' || g, $1, $2, gen_random_uuid()::text, $3::bigint + g, $4, 'invoice.paid', 'succeeded', null, $3::bigint + g, $3::bigint + g
       from generate_series(1, 50000) as g`,
      [owner.companyId, destinationId, now - 50_000, owner.integrationId],
    );
  }
}, 120_000);

afterAll(async () => {
  await database?.cleanup();
});

describe(`bodies a worker lacks (${dialect})`, () => {
  test("a body is read for the delivery's own company only", async () => {
    const [ref] = refs;
    expect((await database.store.readWebhookBodies([ref!])).map((body) => body.uuid)).toEqual([ref!.uuid]);
    expect(await database.store.readWebhookBodies([{ ...ref!, companyId: other.companyId }])).toEqual([]);
    const mixed = await database.store.readWebhookBodies([refs[1]!, { ...refs[2]!, companyId: other.companyId }]);
    expect(mixed.map((body) => body.uuid)).toEqual([refs[1]!.uuid]);
  });

  test('bodies are read through the primary key, not a walk through the company', async () => {
    const [read] = (await captured(async (store) => expect(await store.readWebhookBodies(refs)).toHaveLength(48))).filter((query) =>
      query.sql.includes('"raw_body"'),
    );
    const plan = await planOf(read!);
    if (dialect === 'sqlite') {
      // A point lookup of each uuid (SQLite's planner makes one of either query).
      expect(plan, plan).toMatch(/^SEARCH webhooks USING (INDEX|PRIMARY KEY).*\buuid=\?/);
    } else {
      expect(plan, plan).toMatch(/Index.* Scan (using|on) webhooks_p\d+_pkey/);
      expect(plan, plan).not.toMatch(/company_id/);
    }
  });
});

describe(`a destination's backlog (${dialect})`, () => {
  test('is counted from the partial indexes of unsettled deliveries, not from all of them', async () => {
    const now = Date.now();
    let stats: Awaited<ReturnType<typeof database.store.destinationStats>> | undefined;
    const statements = await captured(async (store) => {
      stats = await store.destinationStats(owner.companyId, destinationId, { since: now - 3_600_000, until: now, bucketMs: 60_000, now });
    });
    expect(stats!.backlog).toEqual({ pending: 3000, held: 0, inFlight: 0, oldestDueAt: expect.any(Number) });
    const backlog = statements.filter((query) => /from "deliveries"/.test(query.sql));
    expect(backlog).toHaveLength(2);
    for (const statement of backlog) {
      const plan = await planOf(statement);
      if (dialect === 'sqlite') expect(plan, `${statement.sql}\n${plan}`).toMatch(/deliveries USING (COVERING )?INDEX deliveries_(open|leased)/);
      else expect(plan, `${statement.sql}\n${plan}`).toMatch(/Index.* Scan (using|on) deliveries_(open|leased)/);
    }
  });
});
