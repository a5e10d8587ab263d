import { sql, type Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { STATS_MAX_ATTEMPTS, type DeliveryBacklog, type DestinationStats } from '../store.js';

/**
 * A destination's health as the panel charts it: attempts of a range (the newest
 * STATS_MAX_ATTEMPTS: a read that cannot grow with traffic), their outcome and latency by
 * bucket, and the backlog now, counted from the partial indexes of unsettled rows.
 */
export async function destinationStats(
  db: Kysely<Database>,
  companyId: string,
  destinationId: string,
  query: { since: number; until: number; bucketMs: number; now: number },
): Promise<DestinationStats> {
  const rows = await db
    .selectFrom('delivery_attempts')
    .select(['attempted_at', 'duration_ms', 'error'])
    .where('company_id', '=', companyId)
    .where('destination_id', '=', destinationId)
    .where('attempted_at', '>=', query.since)
    .where('attempted_at', '<', query.until)
    .orderBy('attempted_at', 'desc')
    .limit(STATS_MAX_ATTEMPTS + 1)
    .execute();
  const truncated = rows.length > STATS_MAX_ATTEMPTS;
  const attempts = rows.slice(0, STATS_MAX_ATTEMPTS);

  const buckets = new Map<number, { succeeded: number; failed: number; durations: number[] }>();
  for (const attempt of attempts) {
    // On the clock (a multiple of the bucket since the epoch), as Usage's buckets are: a bar
    // labelled 19:07 holds 19:07's attempts, whenever the range began.
    const attemptedAt = Number(attempt.attempted_at);
    const start = attemptedAt - (attemptedAt % query.bucketMs);
    const bucket = buckets.get(start) ?? { succeeded: 0, failed: 0, durations: [] };
    if (attempt.error === null) bucket.succeeded++;
    else bucket.failed++;
    bucket.durations.push(attempt.duration_ms);
    buckets.set(start, bucket);
  }
  const succeeded = attempts.filter((attempt) => attempt.error === null).length;
  const durations = attempts.map((attempt) => attempt.duration_ms).sort((a, b) => a - b);

  const backlog = await backlogOf(db, companyId, destinationId, query.now);

  return {
    attempts: attempts.length,
    succeeded,
    failed: attempts.length - succeeded,
    latencyMs: { p50: percentile(durations, 0.5), p90: percentile(durations, 0.9), p99: percentile(durations, 0.99) },
    backlog,
    buckets: [...buckets.entries()]
      .sort(([a], [b]) => a - b)
      .map(([start, bucket]) => {
        const sorted = bucket.durations.sort((a, b) => a - b);
        return { start, succeeded: bucket.succeeded, failed: bucket.failed, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99) };
      }),
    truncated,
  };
}

/**
 * The destination's backlog now, read from its unsettled deliveries only, by destination
 * alone once the destination is found to be the company's, in one statement whose state
 * filter is written as the partial index deliveries_open states it (SQLite uses a partial
 * index only then). Without statistics PostgreSQL chose worse for each of the statements
 * this replaced: with company_id, every delivery of the destination through (company,
 * destination, created_at), 140 ms at 92,000 settled rows against 4; and the oldest due time
 * as the first row of deliveries_waiting (every destination's waiting rows by due time) that
 * was this destination's: a walk through other companies' backlogs.
 */
async function backlogOf(db: Kysely<Database>, companyId: string, destinationId: string, now: number): Promise<DestinationStats['backlog']> {
  const owned = await db.selectFrom('destinations').select('id').where('id', '=', destinationId).where('company_id', '=', companyId).executeTakeFirst();
  if (!owned) return { pending: 0, held: 0, inFlight: 0, oldestDueAt: null };
  const unsettled = await db
    .selectFrom('deliveries')
    .select(['state', (eb) => eb.fn.countAll<number>().as('count'), sql<number | null>`min(case when lease_token is null then next_attempt_at end)`.as('due')])
    .where('destination_id', '=', destinationId)
    .where(sql<boolean>`deliveries.state in ('pending', 'held')`)
    .groupBy('state')
    .execute();
  const inFlight = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('destination_id', '=', destinationId)
    .where('lease_token', 'is not', null)
    .where('next_attempt_at', '>', now)
    .executeTakeFirst();
  const pending = unsettled.find((row) => row.state === 'pending');
  const held = unsettled.find((row) => row.state === 'held');
  return {
    pending: Number(pending?.count ?? 0),
    held: Number(held?.count ?? 0),
    inFlight: Number(inFlight?.count ?? 0),
    oldestDueAt: pending?.due === null || pending?.due === undefined ? null : Number(pending.due),
  };
}

/** The nearest-rank percentile of sorted values; null when there are none. */
function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
}

/**
 * Every company's due deliveries not being attempted, up to `cap`, and the oldest one's due
 * time. Those waiting read the partial index `deliveries_waiting` (pending rows without a
 * lease, by due time), the count no further than `cap` entries, the minimum one entry; a
 * claimed delivery is not counted until its lease expires (a node died), and the expired
 * leases are found among the leased rows, a few per slot of every node.
 */
export async function deliveryBacklog(db: Kysely<Database>, now: number, cap: number): Promise<DeliveryBacklog> {
  // In literals, as the index states it: SQLite matches a partial index's terms only so.
  const waiting = sql<boolean>`state = 'pending' and lease_token is null`;
  const due = await db
    .selectFrom((eb) => eb.selectFrom('deliveries').select('next_attempt_at').where(waiting).where('next_attempt_at', '<=', now).limit(cap).as('due'))
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirst();
  const oldest = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.min('next_attempt_at').as('at'))
    .where(waiting)
    .where('next_attempt_at', '<=', now)
    .executeTakeFirst();
  const expired = await db
    .selectFrom('deliveries')
    .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.min('next_attempt_at').as('at')])
    .where('lease_token', 'is not', null)
    .where('state', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .executeTakeFirst();
  const times = [oldest?.at, expired?.at].filter((at) => at !== null && at !== undefined).map(Number);
  return {
    due: Math.min(cap, Number(due?.count ?? 0) + Number(expired?.count ?? 0)),
    oldestDueAt: times.length === 0 ? null : Math.min(...times),
  };
}
