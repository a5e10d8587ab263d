import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable } from 'kysely';
import { keptForDelivery } from '../../domain/webhook-body.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database, DestinationsTable } from '../schema.js';
import type { ClaimedDelivery, ClaimOptions, PayloadFormat, WebhookBody, WebhookRef } from '../store.js';

/**
 * Claims: due deliveries of active destinations taken with a lease, within each
 * destination's requests in flight and rate per second (counted in the database, so they
 * hold across nodes) and the claiming node's fair share per company.
 */

/** Candidates read per claim, per delivery wanted: room for rows another node takes first. */
const CANDIDATES_PER_CLAIM = 4;

/**
 * How far ahead a claim gives out a rated destination's send slots (ClaimedDelivery.sendAt;
 * the worker waits for each). A rate is a spacing of 1/rate between requests, so that no
 * second ever holds more than the rate; a claim that could give only the slot of its own
 * instant would send one request per round, and rounds come every 100 ms when idle. Longer
 * than that gap, or slots pass unused and the rate is not reached; short, because a
 * delivery waiting for its slot holds a place among the requests in flight.
 */
export const RATE_HORIZON_MS = 250;

/**
 * `state = 'pending'`, written so that SQLite reads one destination's pending rows from the
 * partial index `deliveries_open`: its planner uses a partial index only when the query
 * states the index's WHERE term itself (it does not infer `state in (…)` from `state = …`,
 * and did not match the term with its values bound as parameters), so it is written in
 * literals. Without it SQLite walked `deliveries_due` (dropped by migration 0008) by due
 * time, through every other destination's backlog. PostgreSQL infers it and reads the same.
 */
export const PENDING_OF_ONE_DESTINATION = sql<boolean>`deliveries.state = 'pending' and deliveries.state in ('pending', 'held')`;

/** A destination row as locked for an exchange: what the claim's budgets and the results' health read. */
export type LockedDestination = Pick<
  Selectable<DestinationsTable>,
  | 'id'
  | 'company_id'
  | 'url'
  | 'timeout_ms'
  | 'max_in_flight'
  | 'rate_per_second'
  | 'rate_next_send_at_us'
  | 'secret_sealed'
  | 'previous_secret_sealed'
  | 'previous_secret_expires_at'
  | 'headers_sealed'
  | 'rules_version'
  | 'status'
  | 'failing_since'
  | 'last_success_at'
  | 'deleted_at'
>;

/**
 * The destinations a claim locks and reads: active ones with room (requests in flight, and
 * a send slot of their rate within RATE_HORIZON_MS) and with a due delivery, at most `limit`. Each company's
 * oldest-waiting destination first, then each one's second, and so on, oldest due first
 * within a rank: a company whose backlog is the oldest (or whose destinations take
 * nothing) can neither hold back another company's deliveries nor fill a claim alone.
 *
 * Found from the destinations, not from the oldest due rows: a destination with no room
 * and a large old backlog would otherwise be all a claim ever looked at. The cost is two
 * index probes per active destination (its oldest pending row in `deliveries_open`, its
 * leases in `deliveries_leased`), whatever the backlogs; a company has at most
 * MAX_DESTINATIONS of them. The leases of `reported` (the tokens whose results this
 * exchange records first) count as free: a worker's results make room for its next claim.
 */
export async function destinationsToClaimFrom(trx: Kysely<Database>, now: number, limit: number, reported: readonly string[]): Promise<string[]> {
  const rows = await trx
    .selectFrom((eb) =>
      eb
        .selectFrom('destinations as d')
        .select(['d.id', 'd.company_id'])
        .select((eb) =>
          eb
            .selectFrom('deliveries')
            .select((eb) => eb.fn.min('next_attempt_at').as('due'))
            .whereRef('deliveries.destination_id', '=', 'd.id')
            .where(PENDING_OF_ONE_DESTINATION)
            .as('oldest_due'),
        )
        .where('d.status', '=', 'active')
        .where('d.deleted_at', 'is', null)
        .where((eb) => eb.or([eb('d.rate_per_second', 'is', null), eb('d.rate_next_send_at_us', '<=', horizonUs(now))]))
        .where((eb) =>
          eb(
            'd.max_in_flight',
            '>',
            eb
              .selectFrom('deliveries')
              .select((eb) => eb.fn.countAll<number>().as('leased'))
              .whereRef('deliveries.destination_id', '=', 'd.id')
              .where('deliveries.lease_token', 'is not', null)
              .$if(reported.length > 0, (qb) => qb.where('deliveries.lease_token', 'not in', reported))
              .where('deliveries.next_attempt_at', '>', now),
          ),
        )
        .as('open'),
    )
    .select(['id', sql<number>`row_number() over (partition by company_id order by oldest_due)`.as('turn')])
    .where('oldest_due', '<=', now)
    .orderBy('turn')
    .orderBy('oldest_due')
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}

/**
 * One destination's due deliveries, oldest due first, at most `limit`, read without a lock
 * (the ones the budgets choose are locked afterwards, so a node never holds rows it will not
 * take). One destination at a time: the (destination, state, due time) index then gives
 * them in order and stops at `limit`, whatever the destination's backlog.
 */
async function dueOf(trx: Kysely<Database>, destinationId: string, now: number, limit: number) {
  return trx
    .selectFrom('deliveries')
    .select(['id', 'company_id', 'destination_id', 'webhook_uuid', 'webhook_received_at', 'integration_id', 'event', 'attempts', 'series', 'series_started_at', 'next_attempt_at'])
    .where('destination_id', '=', destinationId)
    .where(PENDING_OF_ONE_DESTINATION)
    .where('next_attempt_at', '<=', now)
    .orderBy('next_attempt_at')
    .limit(limit)
    .execute();
}

type Candidate = Awaited<ReturnType<typeof dueOf>>[number];

/**
 * Locks the destinations an exchange touches, all in one statement in id order: two
 * nodes exchanging at once wait for each other on these rows, and never deadlock.
 */
export async function lockDestinations(trx: Kysely<Database>, types: DialectTypes, ids: readonly string[]): Promise<Map<string, LockedDestination>> {
  if (ids.length === 0) return new Map();
  const rows = await types
    .lockForUpdate(
      trx
        .selectFrom('destinations')
        .select([
          'id',
          'company_id',
          'url',
          'timeout_ms',
          'max_in_flight',
          'rate_per_second',
          'rate_next_send_at_us',
          'secret_sealed',
          'previous_secret_sealed',
          'previous_secret_expires_at',
          'headers_sealed',
          'rules_version',
          'status',
          'failing_since',
          'last_success_at',
          'deleted_at',
        ])
        .where('id', 'in', [...ids].sort())
        .orderBy('id'),
    )
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

/**
 * Takes the due deliveries of the locked destinations that each budget allows, locks them
 * without waiting (a row another transaction holds is left) and leases them. The
 * destinations are locked already: budgets are counted one node at a time. Bodies are not
 * read here (readWebhookBodies): the worker most often has them in memory from the commit.
 */
export async function claimCandidates(
  trx: Kysely<Database>,
  types: DialectTypes,
  now: number,
  options: ClaimOptions,
  destinations: ReadonlyMap<string, LockedDestination>,
): Promise<ClaimedDelivery[]> {
  const destinationIds = [...destinations.values()].filter((d) => d.status === 'active' && d.deleted_at === null).map((d) => d.id);
  if (destinationIds.length === 0) return [];
  const inFlight = await trx
    .selectFrom('deliveries')
    .select(['destination_id', (eb) => eb.fn.countAll<number>().as('count')])
    .where('destination_id', 'in', destinationIds)
    .where('lease_token', 'is not', null)
    .where('next_attempt_at', '>', now)
    .groupBy('destination_id')
    .execute();
  const leased = new Map(inFlight.map((row) => [row.destination_id, Number(row.count)]));
  const budget = new Map(
    destinationIds.map((id) => {
      const d = destinations.get(id)!;
      let room = d.max_in_flight - (leased.get(id) ?? 0);
      if (d.rate_per_second !== null) room = Math.min(room, slotsWithinHorizon(d, now));
      return [id, Math.max(0, room)];
    }),
  );
  // Read now that the destinations are locked: a node that held them a moment ago has
  // committed its claims, and these reads no longer see what it took.
  // Reads bounded in all, whatever the destinations' budgets (max_in_flight up to 1,000
  // each): no destination can be given more than the claim's limit, and the claim's
  // candidates are shared out among the destinations, about limit × CANDIDATES_PER_CLAIM.
  const perDestination = Math.min(options.limit, Math.ceil((options.limit * CANDIDATES_PER_CLAIM) / Math.max(1, destinationIds.length)));
  const usable: Candidate[] = [];
  for (const id of destinationIds) {
    const room = Math.min(budget.get(id)!, perDestination);
    if (room > 0) usable.push(...(await dueOf(trx, id, now, room)));
  }
  usable.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at));

  const chosen: Candidate[] = [];
  const chosenIds = new Set<string>();
  const companyShare = new Map(options.perCompany?.inFlight ?? []);
  // Each company's fair share first, then what room is left, up to the burst.
  for (const cap of options.perCompany ? [options.perCompany.limit, options.perCompany.burst] : [Infinity]) {
    for (const candidate of usable) {
      if (chosen.length >= options.limit) break;
      const room = budget.get(candidate.destination_id) ?? 0;
      const share = companyShare.get(candidate.company_id) ?? 0;
      if (room === 0 || share >= cap || chosenIds.has(candidate.id)) continue;
      budget.set(candidate.destination_id, room - 1);
      companyShare.set(candidate.company_id, share + 1);
      chosen.push(candidate);
      chosenIds.add(candidate.id);
    }
  }
  if (chosen.length === 0) return [];
  // Found by primary key alone, still due and pending checked on the rows locked: with the
  // state and due time in the WHERE, PostgreSQL (its statistics behind a growing backlog)
  // read them through deliveries_open, every due row of the destination, then matched ids.
  const lockedRows = await types
    .lockSkippingLocked(
      trx
        .selectFrom('deliveries')
        .select(['id', 'state', 'next_attempt_at'])
        .where('id', 'in', chosen.map((c) => c.id))
        .orderBy('id'),
      'deliveries',
    )
    .execute();
  const locked = new Set(lockedRows.filter((row) => row.state === 'pending' && row.next_attempt_at !== null && Number(row.next_attempt_at) <= now).map((row) => row.id));
  const taken = chosen.filter((c) => locked.has(c.id));
  if (taken.length === 0) return [];

  const token = randomUUID();
  const sendAt = new Map<string, number>();
  for (const id of destinationIds) {
    const destination = destinations.get(id)!;
    const ids = taken.filter((c) => c.destination_id === id).map((c) => c.id);
    if (ids.length === 0) continue;
    let lastSendAt = now;
    if (destination.rate_per_second !== null) {
      // Oldest due first, each in the next slot; the row keeps the slot after the last.
      const spacing = spacingUs(destination.rate_per_second);
      const first = firstSlotUs(destination, now);
      ids.forEach((deliveryId, i) => sendAt.set(deliveryId, Math.ceil((first + i * spacing) / 1000)));
      lastSendAt = sendAt.get(ids.at(-1)!)!;
      await trx
        .updateTable('destinations')
        .set({ rate_next_send_at_us: first + ids.length * spacing })
        .where('id', '=', id)
        .execute();
    }
    await trx
      .updateTable('deliveries')
      .set({
        lease_token: token,
        // A delivery waiting for its slot is leased until its attempt would have ended.
        next_attempt_at: lastSendAt + destination.timeout_ms + options.leaseMs,
        attempts: sql<number>`attempts + 1`,
        updated_at: now,
      })
      .where('id', 'in', ids)
      .execute();
  }

  return taken.map((c): ClaimedDelivery => {
    const destination = destinations.get(c.destination_id)!;
    const previousLive = destination.previous_secret_expires_at !== null && Number(destination.previous_secret_expires_at) > now;
    return {
      id: c.id,
      companyId: c.company_id,
      destinationId: c.destination_id,
      leaseToken: token,
      series: c.series,
      attempt: c.attempts + 1,
      webhookUuid: c.webhook_uuid,
      integrationId: c.integration_id,
      event: c.event,
      destination: {
        url: destination.url,
        timeoutMs: destination.timeout_ms,
        secretSealed: destination.secret_sealed,
        previousSecretSealed: previousLive ? destination.previous_secret_sealed : null,
        headersSealed: destination.headers_sealed,
        rulesVersion: destination.rules_version,
      },
      seriesStartedAt: c.series_started_at === null ? Number(c.webhook_received_at) : Number(c.series_started_at),
      webhookReceivedAt: Number(c.webhook_received_at),
      sendAt: sendAt.get(c.id) ?? now,
    };
  });
}

/**
 * The time between two requests of a destination at `rate` a second, in µs, rounded up:
 * `rate` slots then always span a whole second, so no second holds more than `rate`.
 */
function spacingUs(rate: number): number {
  return Math.ceil(1_000_000 / rate);
}

/** The end of the slots a claim at `now` may give out, in µs. */
function horizonUs(now: number): number {
  return (now + RATE_HORIZON_MS) * 1000;
}

/**
 * The destination's next slot: the one its row keeps, or now when that has passed. A slot
 * left unused is not saved up for later, which would let a burst through after a quiet spell.
 */
function firstSlotUs(destination: LockedDestination, now: number): number {
  return Math.max(Number(destination.rate_next_send_at_us), now * 1000);
}

/** How many requests the destination's rate lets a claim at `now` give slots to. */
function slotsWithinHorizon(destination: LockedDestination, now: number): number {
  const first = firstSlotUs(destination, now);
  const horizon = horizonUs(now);
  return first > horizon ? 0 : Math.floor((horizon - first) / spacingUs(destination.rate_per_second!)) + 1;
}

/**
 * The bodies of these webhooks, each with its uuid, for deliveries whose worker does not have them in
 * memory; a webhook purged by retention is absent. Reads by the primary key (uuid and
 * exact time: PostgreSQL reads only the day partitions that hold them), and checks each
 * row's company here rather than in SQL: with `company_id` in the WHERE, PostgreSQL on
 * statistics no analyze had refreshed read the company's whole day through its time
 * index (32 ms for 48 bodies among 92,000 rows, EXPLAIN ANALYZE) instead of 48 probes of
 * the key (0.9 ms), and rounds that need bodies are those of a worker already behind.
 */
export async function readWebhookBodies(db: Kysely<Database>, refs: readonly WebhookRef[]): Promise<Array<WebhookBody & { uuid: string }>> {
  if (refs.length === 0) return [];
  const companyOf = new Map(refs.map((ref) => [ref.uuid, ref.companyId]));
  const rows = await db
    .selectFrom('webhooks')
    .select(['uuid', 'company_id', 'raw_body', 'headers', 'payload_format'])
    .where('uuid', 'in', [...companyOf.keys()])
    .where('received_at', 'in', [...new Set(refs.map((ref) => ref.receivedAt))])
    .execute();
  return rows.filter((row) => companyOf.get(row.uuid) === row.company_id).map((row) => ({
    uuid: row.uuid,
    rawBody: Buffer.from(row.raw_body),
    headersJson: row.headers,
    ...keptForDelivery(row.headers),
    payloadFormat: row.payload_format as PayloadFormat,
  }));
}

