import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openStore } from '../src/store/open-store.js';
import { freshDatabase, testDialect, type TestDatabase } from './support/databases.js';
import { DAY_MS, createCompany, createIntegration, logRow, webhook, type Owner } from './support/webhooks.js';

/**
 * The contract's list queries and the retention purge, as the store really sends them, must
 * read webhooks and the request log through their indexes, newest first without sorting:
 * a full scan or a sort grows with the table, a bounded index read does not. (The request
 * log is read in two halves, request_log and the webhooks' own records, each a page at most;
 * sorting those pages together, or the rows of one millisecond, is bounded too.) The SQL is
 * captured from the store (so a change to a query is checked as it is) and explained on a
 * database of a few thousand analysed rows, with its own parameters: on PostgreSQL that
 * also lets the planner prune day partitions as it does for the real query.
 */

type Table = 'webhooks' | 'request_log';

/** One read of a table (or one of its partitions) in a plan. */
interface Read {
  table: Table;
  /** The partition read (PostgreSQL); the table itself on SQLite. */
  relation: string;
  /** The index as the migration names it, or undefined for a full scan. */
  index: string | undefined;
}

interface Plan {
  reads: Read[];
  /** Sorts the plan needs: SQLite's temporary B-trees, PostgreSQL's Sort nodes. */
  sorts: string[];
  /** PostgreSQL: whether partitions' ordered reads are merged rather than sorted. */
  mergeAppend: boolean;
  /** The plan as the database printed it, for failure messages. */
  text: string;
}

interface Captured {
  sql: string;
  parameters: readonly unknown[];
}

const dialect = testDialect();
const EVENTS = ['invoice.paid', 'invoice.created', 'customer.updated', 'charge.failed', 'payout.sent'];
const PAGE = 50;

describe(`query plans (${dialect})`, () => {
  let database: TestDatabase;
  const captured = new Map<string, Captured>();
  /** Every statement of the lists of webhooks (pages, searches). */
  const pageStatements: Captured[] = [];
  /** Rows in each relation that holds any: an empty partition may be read any way the planner likes. */
  const rowsIn = new Map<string, number>();

  beforeAll(async () => {
    database = await freshDatabase();
    const { store } = database;
    const now = Date.now();
    // Eight integrations of one company and two of another, their rows interleaved in time
    // order as traffic writes them.
    const keeper = await createCompany(store, 90);
    const keepers: Owner[] = [];
    for (let i = 0; i < 8; i++) keepers.push(await createIntegration(store, keeper));
    // And one that keeps 30 of the company's 90 days: the purge finds its rows by integration.
    const shortKeeper = await createIntegration(store, keeper, now, 30);
    const purged = await createCompany(store, 30);
    const purgedOwners = [await createIntegration(store, purged), await createIntegration(store, purged)];
    /** `count` webhooks from `from` to `to`, oldest first, round robin over `owners`. */
    const traffic = (owners: Owner[], count: number, from: number, to: number) =>
      Array.from({ length: count }, (_, i) =>
        webhook(owners[i % owners.length]!, from + Math.floor(((to - from) * i) / count), {
          event: EVENTS[(i * 7) % EVENTS.length],
        }),
      );
    /** The request-log rows of refused requests among the same traffic, one a webhook in three. */
    const refusals = (owners: Owner[], count: number, from: number, to: number) =>
      Array.from({ length: Math.floor(count / 3) }, (_, i) => logRow(owners[i % owners.length]!, from + Math.floor(((to - from) * 3 * i) / count) + 1));
    // Forty days back is past the second company's retention only, and it has one row in
    // seventeen there: the purge must find its rows without reading everyone's. On
    // PostgreSQL these rows land in the default partition, the last day's in yesterday's
    // and today's partitions.
    const old = { from: now - 41 * DAY_MS, to: now - 40 * DAY_MS };
    const oldOwners = [...keepers, ...keepers, purgedOwners[0]!];

    const seen: Captured[] = [];
    const observed = openStore(database.databaseUrl, { poolSize: 1, onQuery: (query) => seen.push(query) });
    /** The statements `run` sent, in order. */
    const capture = async (run: () => Promise<unknown>) => {
      seen.length = 0;
      await run();
      return [...seen];
    };
    try {
      // The purge first, on a few expired rows, to capture what it sends; the rows it is
      // explained against come next.
      await store.commitBatch(traffic(purgedOwners, 100, old.from, old.to), refusals(purgedOwners, 100, old.from, old.to));
      const purge = await capture(() => observed.purgeExpired(now));
      const purgeOf = (table: Table) =>
        purge.find((s) => s.sql.startsWith(`delete from "${table}"`) && s.parameters.includes(purged))!;
      captured.set('retention purge of webhooks', purgeOf('webhooks'));
      captured.set('retention purge of the request log', purgeOf('request_log'));
      const ofIntegration = (start: string) => purge.find((s) => s.sql.startsWith(start) && s.parameters.includes(shortKeeper.integrationId))!;
      captured.set("an integration's retention purge of webhooks", ofIntegration('select "uuid" from "webhooks"'));
      captured.set("an integration's retention purge of the request log", ofIntegration('delete from "request_log"'));

      const recent = [...keepers, ...purgedOwners];
      await store.commitBatch(
        [...traffic(oldOwners, 1700, old.from, old.to), ...traffic(recent, 6000, now - DAY_MS, now)],
        [...refusals(oldOwners, 1700, old.from, old.to), ...refusals(recent, 6000, now - DAY_MS, now)],
      );
      const [owner] = keepers;
      const list = (query: Parameters<typeof store.listWebhooks>[2]) =>
        observed.listWebhooks(keeper, owner!.integrationId, query);
      const only = async (run: () => Promise<unknown>) => {
        const statements = await capture(run);
        expect(statements).toHaveLength(1);
        return statements[0]!;
      };
      captured.set('newest page', await only(() => list({ limit: PAGE })));
      const firstPage = await list({ limit: PAGE });
      const cursor = { receivedAt: firstPage[PAGE - 1]!.receivedAt, uuid: firstPage[PAGE - 1]!.uuid };
      captured.set('next page (cursor)', await only(() => list({ limit: PAGE, cursor })));
      captured.set('by event', await only(() => list({ limit: PAGE, event: 'charge.failed' })));
      const range = { since: now - 20 * 3_600_000, until: now - 2 * 3_600_000 };
      captured.set('by time range', await only(() => list({ limit: PAGE, ...range })));
      captured.set('request log', await only(() => observed.listRequestLog(keeper, owner!.integrationId, PAGE)));
      // The management API's reads across a company: the heads of a page, then its bodies.
      const company = (query: Omit<Parameters<typeof store.listCompanyWebhooks>[1], 'limit'>) =>
        observed.listCompanyWebhooks(keeper, { limit: PAGE, ...query });
      /** A page's two statements: its heads, then its bodies by uuid. */
      const headsAndBodies = async (name: string, run: () => Promise<unknown>) => {
        const statements = await capture(run);
        expect(statements).toHaveLength(2);
        captured.set(name, statements[0]!);
        captured.set(`${name}, bodies`, statements[1]!);
        pageStatements.push(...statements);
      };
      await headsAndBodies('company newest page', () => company({}));
      const companyNext = (await store.listCompanyWebhooks(keeper, { limit: PAGE })).next!;
      await headsAndBodies('company next page (cursor)', () => company({ cursor: companyNext }));
      await headsAndBodies('company by event', () => company({ event: 'charge.failed' }));
      // The integration key's list is the same read, of one integration.
      await headsAndBodies('integration page', () => company({ integrationId: owner!.integrationId }));
      await headsAndBodies('integration page by event', () => company({ integrationId: owner!.integrationId, event: 'charge.failed' }));
      // A search: where its scan ends (sizes only), then its matches' heads, then their bodies.
      const searched = await capture(() => company({ text: 'no such text' }));
      expect(searched).toHaveLength(2);
      captured.set('search edge', searched[0]!);
      captured.set('search', searched[1]!);
      pageStatements.push(...searched);
      // The live tail's poll.
      captured.set('tail heads', await only(() => observed.listCompanyWebhookHeads(keeper, { since: now - 5_000, limit: 200 })));
      captured.set('company request log', await only(() => observed.listCompanyRequestLog(keeper, { limit: PAGE })));
      const lastLog = (await store.listCompanyRequestLog(keeper, { limit: PAGE })).at(-1)!;
      captured.set(
        'company request log, next page',
        await only(() => observed.listCompanyRequestLog(keeper, { limit: PAGE, cursor: { at: lastLog.receivedAt, id: lastLog.id } })),
      );
      captured.set(
        'usage of a few minutes',
        await only(() => observed.countUsage(keeper, { bucketMs: 60_000, since: now - 12 * 3_600_000, until: now - 11.8 * 3_600_000 })),
      );
    } finally {
      await observed.close();
    }
    await database.query('analyze');

    for (const table of ['webhooks', 'request_log']) {
      const rows =
        dialect === 'postgres'
          ? await database.query<{ relation: string; count: string }>(`select tableoid::regclass::text as relation, count(*) as count from ${table} group by 1`)
          : await database.query<{ relation: string; count: number }>(`select '${table}' as relation, count(*) as count from ${table}`);
      for (const { relation, count } of rows) if (Number(count) > 0) rowsIn.set(relation, Number(count));
    }
  }, 60_000);

  afterAll(async () => {
    await database?.cleanup();
  });

  async function explain(name: string): Promise<Plan> {
    const query = captured.get(name);
    expect(query, `no SQL captured for ${name}`).toBeDefined();
    return dialect === 'postgres' ? explainPostgres(database, query!) : explainSqlite(database, query!);
  }

  /**
   * No read of `table` is a full scan, and every relation that holds rows is read through
   * one of `indexes`, the first of them at least once.
   */
  function expectIndexedReads(plan: Plan, table: Table, indexes: string[]) {
    const reads = plan.reads.filter((r) => r.table === table);
    expect(reads.length, plan.text).toBeGreaterThan(0);
    expect(
      reads.filter((r) => r.index === undefined).map((r) => r.relation),
      `full scans in:\n${plan.text}`,
    ).toEqual([]);
    const used = new Set(reads.filter((r) => rowsIn.has(r.relation)).map((r) => r.index));
    expect(used, plan.text).toContain(indexes[0]);
    for (const index of used) expect(indexes, plan.text).toContain(index);
  }

  test.each([
    ['newest page', 'webhooks_integration_time'],
    ['next page (cursor)', 'webhooks_integration_time'],
    ['by event', 'webhooks_integration_event_time'],
    ['by time range', 'webhooks_integration_time'],
  ])('listWebhooks, %s: through %s, newest first without a sort', async (name, index) => {
    const plan = await explain(name);
    expectIndexedReads(plan, 'webhooks', [index]);
    expect(plan.sorts, plan.text).toEqual([]);
  });

  test.runIf(dialect === 'postgres')('the newest page merges the day partitions in index order', async () => {
    const plan = await explain('newest page');
    expect(new Set(plan.reads.map((r) => r.relation)).size, plan.text).toBeGreaterThan(1);
    expect(plan.mergeAppend, plan.text).toBe(true);
  });

  /**
   * The sorts a read of the request log may make, each bounded by its page: the two halves'
   * pages put together (at most twice the limit), and the webhooks' records of one
   * millisecond ordered by their request id (their index breaks ties by uuid).
   */
  function expectOnlyPageSorts(plan: Plan) {
    const bounded = /^(USE TEMP B-TREE FOR (LAST TERM|RIGHT PART) OF ORDER BY|merge of pages|Incremental Sort presorted on received_at)$/;
    expect(plan.sorts.filter((sort) => !bounded.test(sort)), plan.text).toEqual([]);
  }

  test("listRequestLog: each half through the integration's time index, a page at most", async () => {
    const plan = await explain('request log');
    expectIndexedReads(plan, 'request_log', ['request_log_integration_time', 'request_log_company_time']);
    expectIndexedReads(plan, 'webhooks', ['webhooks_integration_time', 'webhooks_company_time']);
    expectOnlyPageSorts(plan);
  });

  test.each([
    ['company newest page', 'webhooks_company_time'],
    ['company next page (cursor)', 'webhooks_company_time'],
    ['company by event', 'webhooks_company_time'],
  ])('listCompanyWebhooks, %s: through %s, newest first without a sort', async (name, index) => {
    const plan = await explain(name);
    expectIndexedReads(plan, 'webhooks', [index]);
    expect(plan.sorts, plan.text).toEqual([]);
  });

  test.each(['company newest page, bodies', 'company by event, bodies', 'integration page by event, bodies'])(
    'listCompanyWebhooks, %s: point lookups, only in the partitions that hold the page',
    async (name) => {
      const plan = await explain(name);
      const reads = plan.reads.filter((r) => r.table === 'webhooks');
      expect(reads.length, plan.text).toBeGreaterThan(0);
      if (dialect === 'sqlite') {
        for (const read of reads) expect(['sqlite_autoindex_webhooks_1', 'webhooks_company_time'], plan.text).toContain(read.index);
        return;
      }
      // PostgreSQL may read a small partition whole; what must not happen is reading the
      // day partitions that hold none of the page (the heads' exact times prune them).
      const uuids = captured.get(name)!.parameters.filter((p) => typeof p === 'string' && /^[0-9a-f-]{36}$/.test(p));
      const holding = await database.query<{ relation: string }>(
        'select distinct tableoid::regclass::text as relation from webhooks where uuid = any($1)',
        [uuids],
      );
      const allowed = holding.map((r) => r.relation);
      for (const read of reads) expect(allowed, plan.text).toContain(read.relation);
    },
  );

  test.each([
    ['integration page', ['webhooks_integration_time', 'webhooks_company_time']],
    ['integration page by event', ['webhooks_integration_event_time', 'webhooks_company_time', 'webhooks_integration_time']],
  ])('%s: through an index, newest first without a sort', async (name, indexes) => {
    const plan = await explain(name);
    expectIndexedReads(plan, 'webhooks', indexes);
    expect(plan.sorts, plan.text).toEqual([]);
  });

  test("the tail's poll reads the heads of its few seconds through webhooks_company_time", async () => {
    // Its range is seconds: the planner may sort those few rows, and read the empty day
    // partitions made ahead any way it likes, and a day partition of a few rows too (run
    // just after midnight UTC, today's holds the fixture's last minutes); the partitions of
    // a thousand rows and more go through the index.
    const plan = await explain('tail heads');
    const reads = plan.reads.filter((r) => (rowsIn.get(r.relation) ?? 0) >= 1000);
    expect(reads.length, plan.text).toBeGreaterThan(0);
    for (const read of reads) expect(read.index, plan.text).toBe('webhooks_company_time');
  });

  test('a search reads its matches through webhooks_company_time, newest first without a sort', async () => {
    const plan = await explain('search');
    expectIndexedReads(plan, 'webhooks', ['webhooks_company_time']);
    expect(plan.sorts, plan.text).toEqual([]);
  });

  // On PostgreSQL the fixture holds fewer rows than a search may scan (SEARCH_SCAN_ROWS):
  // reading them all is then the planner's right choice, and says nothing of a real table.
  test.runIf(dialect === 'sqlite')('a search finds where its scan ends through webhooks_company_time, from sizes alone', async () => {
    const plan = await explain('search edge');
    expectIndexedReads(plan, 'webhooks', ['webhooks_company_time']);
    expect(captured.get('search edge')!.sql).not.toMatch(/"raw_body"(?!\))/);
  });

  test('the lists of webhooks never read the headers they do not show', () => {
    expect(pageStatements.length).toBeGreaterThan(0);
    for (const statement of pageStatements) expect(statement.sql).not.toMatch(/"headers"|"source_ip"/);
  });

  test.each(['company request log', 'company request log, next page'])(
    "listCompanyRequestLog, %s: each half through its company's time index, a page at most",
    async (name) => {
      const plan = await explain(name);
      expectIndexedReads(plan, 'request_log', ['request_log_company_time']);
      expectIndexedReads(plan, 'webhooks', ['webhooks_company_time']);
      expectOnlyPageSorts(plan);
    },
  );

  test("countUsage reads only its time range of each half, through its company's time index", async () => {
    // Grouping may sort the range's rows; reading whole partitions is what must not happen.
    const plan = await explain('usage of a few minutes');
    expectIndexedReads(plan, 'request_log', ['request_log_company_time']);
    expectIndexedReads(plan, 'webhooks', ['webhooks_company_time']);
    // Counting needs no column of the webhooks' rows, which on SQLite may sit past the body on its overflow pages.
    if (dialect === 'sqlite') expect(plan.text).toContain('SEARCH webhooks USING COVERING INDEX webhooks_company_time');
  });

  test.each([
    ['retention purge of webhooks', 'webhooks', 'webhooks_company_time'],
    ['retention purge of the request log', 'request_log', 'request_log_company_time'],
  ] as const)('%s: finds the expired rows through %s', async (name, table, index) => {
    const plan = await explain(name);
    // The outer DELETE may find the chosen rows again by primary key.
    const primaryKey = dialect === 'sqlite' ? `sqlite_autoindex_${table}_1` : `${table}_pkey`;
    expectIndexedReads(plan, table, [index, primaryKey]);
    expect(plan.sorts, plan.text).toEqual([]);
  });

  test.each([
    ["an integration's retention purge of webhooks", 'webhooks', ['webhooks_integration_time', 'webhooks_integration_event_time']],
    ["an integration's retention purge of the request log", 'request_log', ['request_log_integration_time']],
  ] as const)("%s: finds the expired rows through one of the integration's indexes", async (name, table, indexes) => {
    const plan = await explain(name);
    const primaryKey = dialect === 'sqlite' ? `sqlite_autoindex_${table}_1` : `${table}_pkey`;
    const reads = plan.reads.filter((r) => r.table === table);
    expect(reads.length, plan.text).toBeGreaterThan(0);
    // Either index starting with the integration bounds the read by it: this integration
    // has no rows here, so the planner may take either.
    for (const read of reads) expect([...indexes, primaryKey], plan.text).toContain(read.index);
    expect(reads.some((read) => (indexes as readonly (string | undefined)[]).includes(read.index)), plan.text).toBe(true);
    expect(plan.sorts, plan.text).toEqual([]);
  });
});

async function explainSqlite(database: TestDatabase, query: Captured): Promise<Plan> {
  const rows = await database.query<{ detail: string }>(`explain query plan ${query.sql}`, [...query.parameters]);
  const reads: Read[] = [];
  const sorts: string[] = [];
  for (const [i, { detail }] of rows.entries()) {
    // SEARCH uses an index to find a range; SCAN reads the whole table (or a whole index).
    const access = /^(SEARCH|SCAN) (webhooks|request_log)\b(?:.* USING (?:COVERING )?INDEX (\w+))?/.exec(detail);
    if (access) {
      const table = access[2] as Table;
      reads.push({ table, relation: table, index: access[1] === 'SEARCH' ? access[3] : undefined });
    }
    // The request log's last step: its two pages (`log`, a compound of two LIMITs) in order.
    const mergeOfPages = i === rows.length - 1 && rows[i - 1]?.detail === 'SCAN log' && /^USE TEMP B-TREE FOR ORDER BY$/.test(detail);
    if (detail.startsWith('USE TEMP B-TREE')) sorts.push(mergeOfPages ? 'merge of pages' : detail);
  }
  return { reads, sorts, mergeAppend: false, text: rows.map((r) => r.detail).join('\n') };
}

interface PostgresPlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Presorted Key'?: string[];
  Plans?: PostgresPlanNode[];
}

async function explainPostgres(database: TestDatabase, query: Captured): Promise<Plan> {
  // Partitions' indexes get generated names; each is attached to the index the migration made.
  const indexes = await database.query<{ index: string; relation: string; parent: string | null }>(
    `select i.relname as index, t.relname as relation, p.relname as parent
     from pg_index x
     join pg_class i on i.oid = x.indexrelid
     join pg_class t on t.oid = x.indrelid
     left join pg_inherits h on h.inhrelid = i.oid
     left join pg_class p on p.oid = h.inhparent
     where i.relnamespace = current_schema()::regnamespace`,
  );
  const indexByName = new Map(indexes.map((row) => [row.index, { relation: row.relation, name: row.parent ?? row.index }]));
  const [row] = await database.query<{ 'QUERY PLAN': [{ Plan: PostgresPlanNode }] }>(
    `explain (format json) ${query.sql}`,
    [...query.parameters],
  );
  const root = row!['QUERY PLAN'][0].Plan;
  const lines = (await database.query<{ 'QUERY PLAN': string }>(`explain ${query.sql}`, [...query.parameters])).map(
    (r) => r['QUERY PLAN'],
  );

  const plan: Plan = { reads: [], sorts: [], mergeAppend: false, text: lines.join('\n') };
  const tableOf = (relation: string): Table | undefined =>
    relation === 'webhooks' || relation.startsWith('webhooks_')
      ? 'webhooks'
      : relation === 'request_log' || relation.startsWith('request_log_')
        ? 'request_log'
        : undefined;
  const visit = (node: PostgresPlanNode) => {
    const type = node['Node Type'];
    if (type === 'Seq Scan' && node['Relation Name']) {
      const table = tableOf(node['Relation Name']);
      if (table) plan.reads.push({ table, relation: node['Relation Name'], index: undefined });
    }
    if (node['Index Name']) {
      // Index Scan, Index Only Scan, Bitmap Index Scan (whose heap scan reads what it finds).
      const index = indexByName.get(node['Index Name']);
      const table = index && tableOf(index.relation);
      if (index && table) plan.reads.push({ table, relation: index.relation, index: index.name });
    }
    if (type === 'Sort') plan.sorts.push(sortsPages(node) ? 'merge of pages' : 'Sort');
    if (type === 'Incremental Sort') {
      const presorted = (node['Presorted Key'] ?? []).map((key) => key.replace(/^.*\./, ''));
      plan.sorts.push(`Incremental Sort presorted on ${presorted.join(', ')}`);
    }
    if (type === 'Merge Append') plan.mergeAppend = true;
    for (const child of node.Plans ?? []) visit(child);
  };
  visit(root);
  return plan;
}

/** A Sort of what pages (LIMITs) return, appended: the request log's two halves put together. */
function sortsPages(sort: PostgresPlanNode): boolean {
  const below = (node: PostgresPlanNode | undefined): PostgresPlanNode | undefined =>
    node?.['Node Type'] === 'Subquery Scan' ? below(node.Plans?.[0]) : node;
  const append = below(sort.Plans?.[0]);
  if (append?.['Node Type'] !== 'Append') return false;
  return (append.Plans ?? []).every((child) => below(child)?.['Node Type'] === 'Limit');
}
