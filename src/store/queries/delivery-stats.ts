import { sql, type Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { PENDING_OF_ONE_DESTINATION } from './delivery-claims.js';
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
    const start = query.since + Math.floor((Number(attempt.attempted_at) - query.since) / query.bucketMs) * query.bucketMs;
    const bucket = buckets.get(start) ?? { succeeded: 0, failed: 0, durations: [] };
    if (attempt.error === null) bucket.succeeded++;
    else bucket.failed++;
    bucket.durations.push(attempt.duration_ms);
    buckets.set(start, bucket);
  }
  const succeeded = attempts.filter((attempt) => attempt.error === null).length;
  const durations = attempts.map((attempt) => attempt.duration_ms).sort((a, b) => a - b);

  const open = await db
    .selectFrom('deliveries')
    .select(['state', (eb) => eb.fn.countAll<number>().as('count')])
    .where('company_id', '=', companyId)
    .where('destination_id', '=', destinationId)
    .where('state', 'in', ['pending', 'held'])
    .groupBy('state')
    .execute();
  const count = (state: string) => Number(open.find((row) => row.state === state)?.count ?? 0);
  const inFlight = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('company_id', '=', companyId)
    .where('destination_id', '=', destinationId)
    .where('lease_token', 'is not', null)
    .where('next_attempt_at', '>', query.now)
    .executeTakeFirst();
  const oldest = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.min('next_attempt_at').as('due'))
    .where('company_id', '=', companyId)
    .where('destination_id', '=', destinationId)
    .where(PENDING_OF_ONE_DESTINATION)
    .where('lease_token', 'is', null)
    .executeTakeFirst();

  return {
    attempts: attempts.length,
    succeeded,
    failed: attempts.length - succeeded,
    latencyMs: { p50: percentile(durations, 0.5), p90: percentile(durations, 0.9), p99: percentile(durations, 0.99) },
    backlog: {
      pending: count('pending'),
      held: count('held'),
      inFlight: Number(inFlight?.count ?? 0),
      oldestDueAt: oldest?.due === null || oldest?.due === undefined ? null : Number(oldest.due),
    },
    buckets: [...buckets.entries()]
      .sort(([a], [b]) => a - b)
      .map(([start, bucket]) => {
        const sorted = bucket.durations.sort((a, b) => a - b);
        return { start, succeeded: bucket.succeeded, failed: bucket.failed, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99) };
      }),
    truncated,
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
