import { performance } from 'node:perf_hooks';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { ensurePartitions } from '../../src/store/postgres/partitions.js';
import type { PendingWebhook, Store } from '../../src/store/store.js';
import { DAY_MS, createCompany, createIntegration, webhook, type Owner } from '../../test/support/webhooks.js';

/** What was seeded: what the queries aim at, and what `--keep` needs to reuse a file. */
export interface Fixture {
  rows: number;
  companyId: string;
  integrations: Owner[];
  /** Most frequent first; the last is the rarest (2 %). */
  events: string[];
  /** received_at of the oldest and the newest webhook, ms. */
  from: number;
  to: number;
  /** Distinct customer ids in the payloads (`cus_000000` …); each is in about 1 webhook in `customers`. */
  customers: number;
  averageBodyBytes: number;
}

export interface SeedReport {
  seconds: number;
  rowsPerSecond: number;
  batchSize: number;
}

export const DAYS = 20;

/** The received_at of the oldest and the newest seeded webhook, ms. */
export interface SeedRange {
  from: number;
  to: number;
}

/** The DAYS days that end a minute before `now`. */
export function seedRange(now: number): SeedRange {
  return { from: now - 60_000 - DAYS * DAY_MS, to: now - 60_000 };
}

const EVENTS = ['invoice.paid', 'invoice.created', 'customer.updated', 'charge.succeeded', 'charge.refunded', 'subscription.renewed', 'payout.paid', 'dispute.created'];
const EVENT_WEIGHTS = [30, 20, 15, 12, 9, 7, 5, 2];
/** Five integrations of unequal traffic, as a company's sources are. */
const INTEGRATION_WEIGHTS = [35, 25, 20, 12, 8];
const CUSTOMERS = 5_000;
/** Webhooks per commitBatch: twice the intake's largest group, to seed fast. */
const BATCH = 1_000;
/** Commits in flight: PostgreSQL overlaps one's fsync with the next's inserts; SQLite takes them in turn. */
const IN_FLIGHT = 2;
const HEADERS = JSON.stringify({
  'content-type': 'application/json',
  'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
  'content-length': '1024',
  'x-request-id': 'req_bench',
});

/**
 * One company with five integrations and `rows` webhooks over the last DAYS days, in time
 * order (as intake writes them, with UUIDv7s of their own time), through store.commitBatch
 * in batches of BATCH, each with its request-log row as intake writes it.
 */
export async function seed(
  store: Store,
  rows: number,
  { from, to }: SeedRange,
  progress: (line: string) => void,
): Promise<{ fixture: Fixture; report: SeedReport }> {
  const companyId = await createCompany(store, 30, from - DAY_MS);
  const integrations: Owner[] = [];
  for (let i = 0; i < INTEGRATION_WEIGHTS.length; i++) integrations.push(await createIntegration(store, companyId, from - DAY_MS));
  const random = mulberry32(20261122);
  const pickIntegration = weighted(random, INTEGRATION_WEIGHTS);
  const pickEvent = weighted(random, EVENT_WEIGHTS);

  const started = performance.now();
  const inFlight = new Set<Promise<unknown>>();
  let bodyBytes = 0;
  for (let first = 0; first < rows; first += BATCH) {
    const batch: PendingWebhook[] = [];
    for (let i = first; i < Math.min(first + BATCH, rows); i++) {
      const at = Math.floor(from + ((i + random()) * (to - from)) / rows);
      const event = EVENTS[pickEvent()]!;
      const body = payload(random, event, at);
      bodyBytes += Buffer.byteLength(body);
      const pending = webhook(integrations[pickIntegration()]!, at, { event, body });
      // The builder's uuid is of today; intake's is of the moment it received the webhook.
      batch.push({ ...pending, uuid: uuidv7({ msecs: at }), bodySha256: null, headers: HEADERS, sourceIp: '54.187.174.169' });
    }
    const commit = store.commitBatch(batch, []).finally(() => inFlight.delete(commit));
    inFlight.add(commit);
    if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight);
    const done = first + batch.length;
    if (done % 100_000 === 0) progress(`  seeded ${done.toLocaleString('en')} rows, ${rate(done, started)} rows/s`);
  }
  await Promise.all(inFlight);
  const seconds = (performance.now() - started) / 1000;
  const fixture = { rows, companyId, integrations, events: EVENTS, from, to, customers: CUSTOMERS, averageBodyBytes: Math.round(bodyBytes / rows) };
  return { fixture, report: { seconds: round(seconds), rowsPerSecond: Math.round(rows / seconds), batchSize: BATCH } };
}

/**
 * PostgreSQL: a day partition for every seeded day, made by the store's own partition code
 * (ensurePartitions makes yesterday to three days ahead of the `now` it is given, so it is
 * called once per day of the range). Without them the older days would all land in the
 * default partition, which production only uses for a clock far off.
 */
export async function preparePartitions(url: string, { from, to }: SeedRange): Promise<void> {
  await withDatabase(url, async (db) => {
    for (let day = from + DAY_MS; day <= to; day += DAY_MS) await ensurePartitions(db, day);
  });
}

/**
 * PostgreSQL: planner statistics and visibility map, as autovacuum would leave them after a
 * load like this one (the local server runs with autovacuum off). Returns the seconds taken.
 */
export async function vacuumAnalyze(url: string): Promise<number> {
  const started = performance.now();
  await withDatabase(url, async (db) => {
    await sql`vacuum analyze webhooks`.execute(db);
    await sql`vacuum analyze request_log`.execute(db);
  });
  return round((performance.now() - started) / 1000);
}

/** PostgreSQL: the size of the database and of the webhooks table with its partitions, MB. */
export async function postgresSizes(url: string): Promise<{ databaseMb: number; webhooksMb: number }> {
  return withDatabase(url, async (db) => {
    const { rows } = await sql<{ database: number; webhooks: number }>`
      select pg_database_size(current_database())::float8 as database,
        (select sum(pg_total_relation_size(inhrelid))::float8 from pg_inherits where inhparent = 'webhooks'::regclass) as webhooks`.execute(db);
    return { databaseMb: Math.round(rows[0]!.database / 2 ** 20), webhooksMb: Math.round(rows[0]!.webhooks / 2 ** 20) };
  });
}

async function withDatabase<T>(url: string, use: (db: Kysely<unknown>) => Promise<T>): Promise<T> {
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
  try {
    return await use(db);
  } finally {
    await db.destroy();
  }
}

/** The id of the `n`th customer, as the payloads spell it. */
export function customerId(n: number): string {
  return `cus_${String(n).padStart(6, '0')}`;
}

const PRODUCTS = ['Team plan (seat)', 'Usage: API calls', 'Storage add-on, 100 GB', 'Priority support', 'Onboarding session'];

/** A payment provider's event of about 1 KB (2 to 4 invoice lines), as a sender would post it. */
function payload(random: () => number, event: string, at: number): string {
  const created = Math.floor(at / 1000);
  const lines = Array.from({ length: 2 + Math.floor(random() * 3) }, () => {
    const quantity = 1 + Math.floor(random() * 20);
    return {
      id: `il_${token(random, 24)}`,
      object: 'line_item',
      description: `${quantity} × ${PRODUCTS[Math.floor(random() * PRODUCTS.length)]}`,
      amount: quantity * 1200,
      currency: 'eur',
      period: { start: created - 2_592_000, end: created },
      proration: random() < 0.1,
    };
  });
  const total = lines.reduce((sum, line) => sum + line.amount, 0);
  return JSON.stringify({
    event,
    data: {
      id: `evt_${token(random, 24)}`,
      created,
      livemode: true,
      object: {
        id: `in_${token(random, 24)}`,
        customer: customerId(Math.floor(random() * CUSTOMERS)),
        amount_due: total,
        amount_paid: event === 'invoice.paid' ? total : 0,
        currency: 'eur',
        status: event === 'invoice.paid' ? 'paid' : 'open',
        billing_reason: 'subscription_cycle',
        hosted_invoice_url: `https://invoice.example.com/i/acct_1Nv0FGQ9RKHgCVdK/${token(random, 32)}`,
        lines,
        metadata: { order_id: `ord_${token(random, 12)}`, channel: random() < 0.5 ? 'web' : 'api' },
      },
    },
  });
}

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function token(random: () => number, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[Math.floor(random() * ALPHABET.length)];
  return out;
}

/** Picks an index with probability proportional to its weight. */
function weighted(random: () => number, weights: number[]): () => number {
  const total = weights.reduce((a, b) => a + b, 0);
  return () => {
    let r = random() * total;
    for (let i = 0; i < weights.length; i++) if ((r -= weights[i]!) < 0) return i;
    return weights.length - 1;
  };
}

/** A small seeded generator, so every run seeds the same distribution. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function rate(rows: number, started: number): string {
  return Math.round(rows / ((performance.now() - started) / 1000)).toLocaleString('en');
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
