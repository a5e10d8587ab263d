import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import { freshDatabase, testDialect, type TestDatabase } from '../support/databases.js';
import { addDestination } from '../support/deliveries.js';
import { createTenant, webhook, type Owner } from '../support/webhooks.js';

/**
 * A claim reads each destination's pending rows through `deliveries_open`, and the backlog
 * metric its own `deliveries_waiting`, on a table where one destination holds nearly every
 * row: the statistics an attacker's backlog gives the planner. Any index of all pending rows
 * by due time would serve a per-destination read in due-time order, walking that backlog
 * for every other destination on every claim; both planners chose so while one existed.
 * The SQL is captured from the store and explained with its own parameters.
 */

const dialect = testDialect();
const BACKLOG = 3000;

interface Captured {
  sql: string;
  parameters: readonly unknown[];
}

/**
 * The indexes each statement reads `deliveries` through: an index's name, `all of` an index
 * when SQLite reads it whole, `full scan` for the table.
 */
async function deliveryReads(database: TestDatabase, query: Captured): Promise<{ reads: string[]; text: string }> {
  if (dialect === 'sqlite') {
    const rows = await database.query<{ detail: string }>(`explain query plan ${query.sql}`, [...query.parameters]);
    const reads = rows
      .map(({ detail }) => /^(SEARCH|SCAN) deliveries\b(?:.* USING (?:COVERING )?INDEX (\w+))?/.exec(detail))
      .filter((match) => match !== null)
      // SEARCH finds a range of an index; SCAN reads a whole index (or the table).
      .map((match) => (!match[2] ? 'full scan' : match[1] === 'SEARCH' ? match[2] : `all of ${match[2]}`));
    return { reads, text: rows.map((r) => r.detail).join('\n') };
  }
  type Node = { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; Plans?: Node[] };
  const [row] = await database.query<{ 'QUERY PLAN': [{ Plan: Node }] }>(`explain (format json) ${query.sql}`, [...query.parameters]);
  const reads: string[] = [];
  const visit = (node: Node) => {
    // Index Scan, Index Only Scan, Bitmap Index Scan (its Bitmap Heap Scan reads what it finds).
    if (node['Index Name']?.startsWith('deliveries_')) reads.push(node['Index Name']);
    if (node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'deliveries') reads.push('full scan');
    for (const child of node.Plans ?? []) visit(child);
  };
  visit(row!['QUERY PLAN'][0].Plan);
  return { reads, text: JSON.stringify(row!['QUERY PLAN'][0].Plan, null, 1) };
}

describe(`delivery query plans (${dialect})`, () => {
  let database: TestDatabase;
  const claimStatements: Captured[] = [];
  const backlogStatements: Captured[] = [];

  beforeAll(async () => {
    database = await freshDatabase();
    const { store } = database;
    const now = Date.now();
    const destination = (owner: Owner, maxInFlight: number) =>
      addDestination(store, owner.companyId, { name: 'd', url: 'https://example.com/', integrationIds: [owner.integrationId], maxInFlight, createdAt: now });
    // The attacker: one destination that takes one request at a time, and a large backlog.
    const attacker = await createTenant(store);
    await destination(attacker, 1);
    for (let i = 0; i < BACKLOG; i += 500) {
      await store.commitBatch(Array.from({ length: 500 }, (_, j) => webhook(attacker, now - 60_000 + i + j)), []);
    }
    // Twenty other companies, a few deliveries each due, and the history a table holds until
    // retention: 10,000 deliveries settled (as if sent; set directly, the plans are the point).
    for (let i = 0; i < 20; i++) {
      const owner = await createTenant(store);
      await destination(owner, 10);
      await store.commitBatch(Array.from({ length: 500 }, (_, j) => webhook(owner, now - 3_600_000 + j)), []);
      await store.commitBatch([webhook(owner, now - 1000), webhook(owner, now - 999)], []);
    }
    const settled = dialect === 'sqlite' ? 'next_attempt_at < ?' : 'next_attempt_at < $1';
    await database.query(`update deliveries set state = 'succeeded', next_attempt_at = null where ${settled}`, [now - 3_000_000]);
    await database.query('analyze');

    const seen: Captured[] = [];
    const observed = openStore(database.databaseUrl, { poolSize: 1, onQuery: (query) => seen.push(query) });
    try {
      await observed.exchangeDeliveries([], now, { limit: 64, leaseMs: 30_000 }, Number.MAX_SAFE_INTEGER);
      claimStatements.push(...seen.filter((s) => /^select\b/i.test(s.sql) && s.sql.includes('"deliveries"')));
      seen.length = 0;
      await observed.deliveryBacklog(now, 10_000);
      backlogStatements.push(...seen);
    } finally {
      await observed.close();
    }
  }, 120_000);

  afterAll(async () => {
    await database?.cleanup();
  });

  test("a claim reads deliveries only through deliveries_open and deliveries_leased (and the primary key): never a walk through one destination's backlog", async () => {
    // Which destinations to claim from, each one's due rows, the rows to lock.
    expect(claimStatements.length).toBeGreaterThanOrEqual(3);
    const primaryKey = dialect === 'sqlite' ? 'sqlite_autoindex_deliveries_1' : 'deliveries_pkey';
    const used = new Set<string>();
    for (const statement of claimStatements) {
      const { reads, text } = await deliveryReads(database, statement);
      expect(reads.length, statement.sql).toBeGreaterThan(0);
      for (const read of reads) expect(['deliveries_open', 'deliveries_leased', primaryKey], `${statement.sql}\n${text}`).toContain(read);
      reads.forEach((read) => used.add(read));
    }
    expect(used).toContain('deliveries_open');
  });

  test('the backlog metric counts the waiting rows through deliveries_waiting, and the expired leases through deliveries_leased', async () => {
    const reads = new Set<string>();
    for (const statement of backlogStatements) {
      const plan = await deliveryReads(database, statement);
      expect(plan.reads, `${statement.sql}\n${plan.text}`).not.toContain('full scan');
      plan.reads.forEach((read) => reads.add(read));
    }
    // The leased rows are a few per slot of each node: SQLite may read that partial index whole.
    expect([...reads].map((read) => read.replace(/^all of deliveries_leased$/, 'deliveries_leased')).sort()).toEqual(['deliveries_leased', 'deliveries_waiting']);
  });
});
