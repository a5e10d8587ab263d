import type { PageCursor } from '../domain/cursor.js';
import type { DestinationRules } from '../domain/rules/rules.js';
import type { PayloadFormat } from '../domain/webhook-body.js';

/**
 * Destinations and their deliveries as the store hands them over: the company's own URLs
 * that receive, at least once, every accepted webhook matching their filters
 * (docs/destinations.md). The Store interface (store.ts) holds the methods.
 */

/** `active` sends; `paused` (by a person) and `disabled` (by intake) hold their deliveries. */
export type DestinationStatus = 'active' | 'paused' | 'disabled';

export interface Destination {
  id: string;
  companyId: string;
  name: string;
  url: string;
  /** Null: every integration of the company. */
  integrationIds: string[] | null;
  /** Non-empty; `*` matches any run of characters (src/domain/event-patterns.ts). */
  eventPatterns: string[];
  /** The extra headers' names; their values stay sealed in the store. */
  headerNames: string[];
  timeoutMs: number;
  /** Null: no limit. */
  ratePerSecond: number | null;
  maxInFlight: number;
  status: DestinationStatus;
  /** Why intake disabled it, in words; null unless disabled. */
  disabledReason: string | null;
  /** When it last changed status (paused, resumed, disabled). */
  statusChangedAt: number;
  /** The first failed attempt since the last success; null while it succeeds. */
  failingSince: number | null;
  lastSuccessAt: number | null;
  /** While a rotation's overlap lasts, the previous secret also signs until then. */
  previousSecretExpiresAt: number | null;
  /** Its filter, transformation, deduplication, delay and retry policy (src/domain/rules/rules.ts). */
  rules: DestinationRules;
  /** Every save of the rules is a new version; 0: never given any. */
  rulesVersion: number;
  createdAt: number;
  updatedAt: number;
}

/** A destination as created: every setting, its secret and headers sealed. */
export interface NewDestination {
  id: string;
  name: string;
  url: string;
  integrationIds: string[] | null;
  eventPatterns: string[];
  /** The headers as a sealed JSON object, or null for none. */
  headersSealed: string | null;
  headerNames: string[];
  timeoutMs: number;
  ratePerSecond: number | null;
  maxInFlight: number;
  secretSealed: string;
  rules: DestinationRules;
  createdAt: number;
}

/** What an update may change; a header set replaces the whole set. */
export type DestinationChanges = Partial<
  Pick<NewDestination, 'name' | 'url' | 'integrationIds' | 'eventPatterns' | 'timeoutMs' | 'ratePerSecond' | 'maxInFlight'>
> & {
  headers?: { sealed: string | null; names: string[] };
  /** A new signing secret; the previous one keeps signing until `previousExpiresAt`. */
  secret?: { sealed: string; previousExpiresAt: number };
  /** A new version of the whole set of rules. */
  rules?: DestinationRules;
  /**
   * `active` from paused or disabled clears the failure streak; `paused` by a person;
   * `disabled` only by intake (when results are written: exchangeDeliveries).
   */
  status?: Exclude<DestinationStatus, 'disabled'>;
};

/**
 * `pending`: waiting for its next attempt, or in flight; `held`: its destination is paused
 * or disabled (pending again when it is resumed); `succeeded`; `failed`: the schedule ran
 * out, or the webhook was purged first (the dead letter, replayable); `cancelled`: its
 * destination was deleted; `filtered`: the destination's filter refused it, or its
 * transformation returned nothing (no attempt made); `deduplicated`: it repeats a delivery
 * of the destination within its deduplication window (no attempt made).
 */
export type DeliveryState = 'pending' | 'held' | 'succeeded' | 'failed' | 'cancelled' | 'filtered' | 'deduplicated';
export const DELIVERY_STATES: readonly DeliveryState[] = ['pending', 'held', 'succeeded', 'failed', 'cancelled', 'filtered', 'deduplicated'];

/** Why a `filtered` delivery was not sent. */
export type SkippedBy = 'filter' | 'transformation';

export interface Delivery {
  id: string;
  companyId: string;
  destinationId: string;
  webhookUuid: string;
  webhookReceivedAt: number;
  integrationId: string;
  event: string;
  state: DeliveryState;
  /** Attempts made in the current series (a replay starts a new series at 0). */
  attempts: number;
  /** 0: the original series; n: the n-th replay. */
  series: number;
  /** When the next attempt is due (in flight: when its lease ends); null once settled or held. */
  nextAttemptAt: number | null;
  lastAttemptAt: number | null;
  lastStatus: number | null;
  lastError: string | null;
  /** The rules version its last attempt (or its skip) used; null before the destination had rules. */
  rulesVersion: number | null;
  /** For a `filtered` delivery: what refused it. */
  skippedBy: SkippedBy | null;
  /** For a `deduplicated` delivery: the delivery it repeats. */
  duplicateOf: string | null;
  createdAt: number;
  updatedAt: number;
}

/** Why an attempt failed; null for a 2xx (src/destinations/sender.ts classifies). */
export type AttemptErrorClass =
  | 'http_status'
  | 'redirect'
  | 'timeout'
  | 'connection_refused'
  | 'connection_reset'
  | 'dns'
  | 'tls'
  | 'blocked_address'
  | 'webhook_purged'
  | 'transformation_error'
  | 'other';

export interface DeliveryAttempt {
  id: string;
  deliveryId: string;
  destinationId: string;
  series: number;
  /** 1-based within its series. */
  number: number;
  attemptedAt: number;
  durationMs: number;
  status: number | null;
  error: AttemptErrorClass | null;
  /** The first 1 KiB of the answer's body, as text. */
  responseExcerpt: string | null;
  /** When the next attempt was scheduled; null when this one settled the delivery. */
  nextAttemptAt: number | null;
}

/** A delivery claimed for one attempt: what the sender needs, the destination's secrets still sealed. */
export interface ClaimedDelivery {
  id: string;
  companyId: string;
  destinationId: string;
  /** Must come back with the result: a lease that ended and was claimed again is not this one's. */
  leaseToken: string;
  series: number;
  /** The number this attempt will have. */
  attempt: number;
  webhookUuid: string;
  integrationId: string;
  event: string;
  destination: {
    url: string;
    timeoutMs: number;
    secretSealed: string;
    /** Signs too while a rotation's overlap lasts. */
    previousSecretSealed: string | null;
    headersSealed: string | null;
    /** Its rules' version when claimed (Store.readDestinationRules); 0: none. */
    rulesVersion: number;
  };
  /** When the current series began: the webhook's arrival, or the replay's start (a retry policy's time bound counts from it). */
  seriesStartedAt: number;
  /** Where the webhook's body is (Store.readWebhookBodies, unless the worker has it in memory). */
  webhookReceivedAt: number;
  /**
   * When the attempt may start: the claim's time, or for a destination with a rate, the
   * slot the claim gave it (a little later), so that its requests are spaced 1/rate apart.
   */
  sendAt: number;
}

/** Deliveries of every company waiting for a worker, as /metrics shows them. */
export interface DeliveryBacklog {
  /** Due and unclaimed (or their claim expired), counted up to the cap asked for. */
  due: number;
  /** When the longest-waiting of them came due; null when none is due. */
  oldestDueAt: number | null;
}

/** A webhook as a delivery sends it. */
export interface WebhookBody {
  rawBody: Buffer;
  /** Its stored headers, as JSON (what a destination's rules read). */
  headersJson: string;
  /** The Content-Type it arrived with. */
  contentType: string;
  /** Intake deliveries it had come through when it arrived (its `x-intake-hops`). */
  hops: number;
  payloadFormat: PayloadFormat;
}

/** Which webhook's body to read: a delivery's. */
export interface WebhookRef {
  companyId: string;
  uuid: string;
  receivedAt: number;
}

export interface ClaimOptions {
  /** Deliveries to claim at most. */
  limit: number;
  /**
   * This node's fair share per company: each company first gets up to `limit` requests in
   * flight; room left then goes to anyone, up to `burst` for one company (`inFlight` says
   * how many each has now). A lone tenant uses most of the node, yet one tenant's slow
   * receivers never hold every slot while other tenants' deliveries wait.
   */
  perCompany?: { limit: number; burst: number; inFlight: ReadonlyMap<string, number> };
  /** How long a claim lasts past `now` plus the destination's timeout: a node that dies lets it go then. */
  leaseMs: number;
}

/** The outcome of one attempt, reported by the node that made it. */
export interface AttemptResult {
  deliveryId: string;
  companyId: string;
  destinationId: string;
  leaseToken: string;
  /** Its series and number are the claim's. */
  attempt: Omit<DeliveryAttempt, 'id' | 'deliveryId' | 'destinationId'>;
  /**
   * `succeeded`, `failed` (for good), or `retry` at attempt.nextAttemptAt; or, with no
   * attempt made (its `attempt` is not recorded), `filtered` or `deduplicated` by the rules.
   */
  outcome: 'succeeded' | 'failed' | 'retry' | 'filtered' | 'deduplicated';
  /** The receiver said 410 Gone: the destination is disabled at once. */
  gone: boolean;
  /** The destination's rules version the worker applied (absent: none). */
  rulesVersion?: number;
  /** A `filtered` outcome's cause. */
  skippedBy?: SkippedBy;
  /** A `deduplicated` outcome's first delivery. */
  duplicateOf?: string;
}

/** A deduplication key a worker takes for a delivery before its first attempt. */
export interface DedupeClaim {
  destinationId: string;
  key: string;
  deliveryId: string;
  /** The end of the window; a key past it is free again. */
  expiresAt: number;
}

/** A destination intake disabled while applying results: the dispatcher logs it. */
export interface DisabledDestination {
  companyId: string;
  destinationId: string;
  reason: string;
}

export interface DeliveryQuery {
  destinationId?: string;
  webhookUuid?: string;
  state?: DeliveryState;
  event?: string;
  since?: number;
  until?: number;
  limit: number;
  /** created_at and id of the last delivery of the previous page (newest first). */
  cursor?: PageCursor;
}

/** Deliveries to replay: one destination's, filtered. */
export interface ReplayFilter {
  destinationId: string;
  state?: DeliveryState;
  event?: string;
  since?: number;
  until?: number;
  /**
   * These deliveries of the destination (at most 100), picked by a person: each is taken
   * if it can be replayed (held, succeeded, failed) or retried now (failing and waiting
   * for its next attempt), unless `state` narrows them; no range then.
   */
  deliveryIds?: string[];
}

/** Stored webhooks to send to a destination that has no delivery of them yet. */
export interface SendSelection {
  /** These webhooks (at most 100), whatever the destination's filters. */
  webhookUuids?: string[];
  /** Or a range of received times, taking only webhooks the destination's filters match. */
  since?: number;
  until?: number;
  event?: string;
}

/**
 * What a company may make again (replays and sends), as a token bucket: `burst` at once at
 * most, refilled at `perHour`. Every delivery a replay restarts or a send makes takes one.
 */
export interface RedeliveryBudget {
  perHour: number;
  burst: number;
}

/** How a bulk operation's start went: it holds the company's lease, or why not and when to try again. */
export type RedeliveryStart =
  | { kind: 'started'; /** Deliveries the budget allows now. */ available: number }
  | { kind: 'busy'; retryAfterMs: number }
  | { kind: 'no_budget'; retryAfterMs: number };

/** The lease a bulk operation holds, and what each of its transactions renews and takes. */
export interface RedeliveryLease {
  token: string;
  destinationId: string;
  at: number;
  /** How long the lease lasts from each transaction: a node that dies leaves it to expire. */
  leaseMs: number;
  budget: RedeliveryBudget;
}

/** Deliveries to replay, found on the read side, oldest first; `nextSince` when the read stopped short. */
export interface ReplayScan {
  items: Array<{ id: string; createdAt: number }>;
  more: boolean;
  nextSince?: number;
}

/** A stored webhook a send may make a delivery of. */
export interface SendCandidate {
  uuid: string;
  receivedAt: number;
  integrationId: string;
  event: string;
}

/** Webhooks to send, found on the read side: those without a delivery to the destination, oldest first. */
export interface SendScan {
  fresh: SendCandidate[];
  /** Webhooks selected that the destination already had a delivery of. */
  skipped: number;
  more: boolean;
  nextSince?: number;
}

/** What one transaction of a bulk operation did. */
export interface RedeliveryStep {
  count: number;
  /** Why the operation must stop here: the lease was lost (it expired and another took it), the destination deleted, or the budget spent. */
  stop?: 'lease_lost' | 'destination_gone' | 'no_budget';
}

/** The outcome of a single replay. */
export type SingleReplay =
  | { kind: 'replayed'; delivery: Delivery }
  | { kind: 'not_found' }
  | { kind: 'cancelled' }
  | { kind: 'no_budget'; retryAfterMs: number };

export interface DestinationStats {
  attempts: number;
  succeeded: number;
  failed: number;
  latencyMs: { p50: number | null; p90: number | null; p99: number | null };
  backlog: { pending: number; held: number; inFlight: number; oldestDueAt: number | null };
  buckets: Array<{ start: number; succeeded: number; failed: number; p50Ms: number | null; p99Ms: number | null }>;
  /** Whether the attempts read stopped at STATS_MAX_ATTEMPTS (the figures cover the newest). */
  truncated: boolean;
}

/** Attempts one stats read takes into account at most (the newest of the range). */
export const STATS_MAX_ATTEMPTS = 50_000;

/**
 * Where a feed reader is: opaque to clients. `txid` orders PostgreSQL's transactions (0 on
 * SQLite, whose single writer commits in `seq` order).
 */
export interface FeedCursor {
  /** A PostgreSQL xid8 in decimal; '0' on SQLite. */
  txid: string;
  seq: number;
}

/** The feed is the company's: a consumer that wants one integration filters on integration_id (an index per integration would cost every webhook). */
/**
 * Where a reader without a cursor starts: at the end (only what commits from now on), at
 * the first webhook received at or after a time, or before the last N (of these
 * integrations, when named).
 */
export type FeedStart = { now: true } | { since: number } | { last: number; integrationIds?: readonly string[] };

export interface FeedQuery {
  after: FeedCursor | null;
  limit: number;
  /** Read each webhook's stored headers too, counted with its body in the page's byte budget. */
  withHeaders?: boolean;
}

export interface FeedItem {
  uuid: string;
  integrationId: string;
  event: string;
  receivedAt: number;
  rawBody: Buffer;
  payloadFormat: PayloadFormat;
  position: FeedCursor;
  /** The headers as stored (GET /api/v1/webhooks/:uuid's), only when the query asked `withHeaders`. */
  headers?: Record<string, string>;
}
