import type { PageCursor } from '../domain/cursor.js';
import type { AuditEvent } from './audit-store.js';
import type {
  AttemptResult,
  ClaimedDelivery,
  ClaimOptions,
  DedupeClaim,
  Delivery,
  DeliveryAttempt,
  DeliveryBacklog,
  DeliveryState,
  DeliveryQuery,
  Destination,
  DestinationChanges,
  DestinationStats,
  DisabledDestination,
  FeedItem,
  FeedCursor,
  FeedQuery,
  FeedStart,
  NewDestination,
  RedeliveryBudget,
  RedeliveryLease,
  RedeliveryStart,
  RedeliveryStep,
  ReplayFilter,
  ReplayScan,
  SendCandidate,
  SendScan,
  SendSelection,
  SingleReplay,
  WebhookBody,
  WebhookRef,
} from './destination-types.js';

/** Destinations and their deliveries: the delivery workers' exchanges, the API's reads and changes, replays and sends, the feed. */
export interface DestinationStore {
  // Delivery workers: like commitBatch, these serve every company; rows carry theirs.
  /**
   * One round of a delivery worker, in one transaction. First `results`: each attempt
   * recorded, and its delivery settled or rescheduled only while it still holds the lease it
   * was claimed with; each destination's failure streak kept, a destination failing for
   * `disableAfterMs` without a success (or answering 410) disabled, with its audit record.
   * Then, unless `claim` is null, due deliveries of active destinations claimed within each
   * destination's requests in flight and rate per second, each leased until now + its
   * timeout + claim.leaseMs (its next_attempt_at): a node that dies lets its claims go then.
   * Several nodes exchange at once without taking the same delivery.
   */
  exchangeDeliveries(
    results: AttemptResult[],
    now: number,
    claim: ClaimOptions | null,
    disableAfterMs: number,
  ): Promise<{ claimed: ClaimedDelivery[]; disabled: DisabledDestination[] }>;
  /** The bodies of webhooks to deliver that the worker does not have in memory, each with its uuid; purged ones absent. */
  readWebhookBodies(refs: WebhookRef[]): Promise<Array<WebhookBody & { uuid: string }>>;
  /**
   * Moves up to `limit` deliveries between `pending` and `held` to follow their
   * destination's status (paused or disabled: held; active again: pending, due now), so
   * claims never scan a paused destination's backlog. Returns how many moved.
   */
  reconcileHeldDeliveries(now: number, limit: number): Promise<number>;
  /** Versions of destinations' rules, as stored JSON (a version never changes: workers keep what they read). */
  readDestinationRules(refs: Array<{ destinationId: string; version: number }>): Promise<Array<{ destinationId: string; version: number; rules: string }>>;
  /**
   * Takes each deduplication key for its delivery unless another delivery holds it within
   * its window, in one statement per key (so two nodes agree on the first); a key past its
   * window is taken over. For each claim, the delivery that holds its key now: its own id,
   * or the one it duplicates. Also removes some keys long expired.
   */
  claimDedupeKeys(claims: DedupeClaim[], now: number): Promise<Array<{ deliveryId: string; heldBy: string }>>;
  /**
   * Vacuums the deliveries table now (PostgreSQL; nothing on SQLite), skipping it when
   * another node is vacuuming it: the dead entries every lease and result leaves in the
   * claim's indexes go, whatever the server's autovacuum does.
   */
  vacuumDeliveries(): Promise<void>;

  // --- management API: destinations and their deliveries ---
  /**
   * Creates it unless the company has `maxLive` live destinations already (counted under
   * the company's lock, so parallel creates cannot all pass); undefined then, or when there
   * is no such company.
   */
  createDestination(companyId: string, destination: NewDestination, audit: AuditEvent, maxLive: number): Promise<Destination | undefined>;
  /** The company's live destinations, newest first (cursor: created_at and id of the last). */
  listDestinations(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Destination[]>;
  getDestination(companyId: string, destinationId: string): Promise<Destination | undefined>;
  /** Changes a live destination; its state before and after, or undefined when there is none. */
  updateDestination(
    companyId: string,
    destinationId: string,
    changes: DestinationChanges,
    at: number,
    audit: AuditEvent,
  ): Promise<{ before: Destination; after: Destination } | undefined>;
  /** Deletes a destination; its pending and held deliveries are cancelled. False when there is none. */
  deleteDestination(companyId: string, destinationId: string, at: number, audit: AuditEvent): Promise<boolean>;
  /** Deliveries newest first, of one destination or one webhook (the query names one). */
  listDeliveries(companyId: string, query: DeliveryQuery): Promise<Delivery[]>;
  getDelivery(companyId: string, deliveryId: string): Promise<Delivery | undefined>;
  /** A delivery's attempts, newest first. */
  listDeliveryAttempts(companyId: string, deliveryId: string, limit: number): Promise<DeliveryAttempt[]>;
  /**
   * Starts a new attempt series for one delivery (whatever its state but cancelled), taking
   * one of the company's redelivery budget.
   */
  replayDelivery(companyId: string, deliveryId: string, at: number, budget: RedeliveryBudget, audit: AuditEvent): Promise<SingleReplay>;
  /**
   * Starts a bulk replay or send for the company: takes its lease unless another operation
   * holds it (one per company at a time, across nodes), and says what the budget allows.
   */
  beginRedelivery(companyId: string, lease: Omit<RedeliveryLease, 'destinationId'>): Promise<RedeliveryStart>;
  /**
   * Up to `limit` deliveries of a destination that a bulk replay would restart, oldest
   * first, read on the read side: not cancelled, not pending (their series runs), and not
   * replayed since `startedBefore`. At most `scanRows` deliveries are looked at.
   */
  scanReplay(companyId: string, filter: ReplayFilter, startedBefore: number, limit: number, scanRows: number): Promise<ReplayScan>;
  /**
   * Up to `limit` stored webhooks with no delivery to the destination yet (named ones
   * whatever the filters, or a range through them), oldest first, read on the read side.
   */
  scanSend(companyId: string, destinationId: string, selection: SendSelection, limit: number): Promise<SendScan>;
  /**
   * One transaction of a bulk replay: a new series for those of `ids` that still qualify,
   * as many as the budget allows, under the operation's lease (renewed). With `finish`, the
   * operation's audit record is written and its lease freed in the same transaction.
   */
  replayStep(
    companyId: string,
    lease: RedeliveryLease,
    ids: readonly string[],
    startedBefore: number,
    finish: RedeliveryFinish | undefined,
    /** The filter's state: `pending` retries the failing ones now (see queries/redeliveries.ts's bulkReplayable). */
    state?: DeliveryState,
    /** The ids were named by a person (delivery_ids): failing ones qualify beside the settled ones. */
    named?: boolean,
  ): Promise<RedeliveryStep>;
  /** One transaction of a bulk send: deliveries for those of `webhooks` that still have none, as replayStep. */
  sendStep(companyId: string, lease: RedeliveryLease, webhooks: readonly SendCandidate[], finish?: RedeliveryFinish): Promise<RedeliveryStep>;
  /** Ends a bulk operation that stopped before its last step: its audit record, if it made anything, and its lease freed. */
  endRedelivery(companyId: string, token: string, record?: RedeliveryRecord): Promise<void>;
  /**
   * Across companies (an operator's figure, never shown to one): deliveries due at `now`
   * and not being attempted, counted up to `cap` so the count costs the same whatever the
   * backlog, and when the oldest came due. Paused and disabled destinations' (held) are not
   * waiting for a worker and are left out.
   */
  deliveryBacklog(now: number, cap: number): Promise<DeliveryBacklog>;
  /** Attempts of the range (the newest STATS_MAX_ATTEMPTS), in `bucketMs` buckets, and the backlog now. */
  destinationStats(
    companyId: string,
    destinationId: string,
    query: { since: number; until: number; bucketMs: number; now: number },
  ): Promise<DestinationStats>;
  /**
   * The company's webhooks oldest first after a position: each once, in the order their
   * transactions committed (PostgreSQL: only transactions that can no longer be overtaken
   * by one still running). Bounded by `limit` and WEBHOOK_PAGE_BYTES of bodies.
   */
  readFeed(companyId: string, query: FeedQuery): Promise<FeedItem[]>;
  /** Where a reader without a cursor starts (the end, a time, the last N): the cursor to read after. */
  feedStart(companyId: string, start: FeedStart): Promise<FeedCursor>;

  // Operator lookup for the CLI, which is given bare ids: which company owns this?
  /** The company of a live destination (the CLI names destinations by id alone). */
  companyOfDestination(destinationId: string): Promise<string | undefined>;
}

/** What a bulk operation's last transaction also does: its audit record (with the total made), and the lease freed. */
export interface RedeliveryFinish {
  audit: AuditEvent;
  /** What the earlier transactions of the operation made, for the record's total. */
  countBefore: number;
  /** The total's name in the record's `after`: `replayed`, `created`. */
  countKey: string;
}

/** What a bulk operation that stopped early made, for its audit record. */
export interface RedeliveryRecord {
  audit: AuditEvent;
  countKey: string;
  count: number;
}
