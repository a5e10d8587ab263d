import type { Cursor, PageCursor } from '../domain/cursor.js';
import type { PayloadFormat } from '../domain/webhook-body.js';

/** Webhooks and the request log: intake's group commits, and every read of what they stored. */
export interface WebhookStore {
  // Intake: one transaction for a group of requests, rows carry their company.
  /**
   * Stores the group: webhooks (idempotency decided here), their request-log rows, and the
   * outbox: a delivery for every destination of the company each accepted webhook matches,
   * in the same transaction, so an acknowledged webhook never lacks its deliveries.
   */
  commitBatch(webhooks: PendingWebhook[], logs: RequestLogEntry[]): Promise<CommitOutcome[]>;

  // Reading.
  listWebhooks(companyId: string, integrationId: string, query: WebhookQuery): Promise<StoredWebhook[]>;
  getWebhook(companyId: string, integrationId: string, uuid: string): Promise<StoredWebhook | undefined>;
  listRequestLog(companyId: string, integrationId: string, limit: number): Promise<RequestLogEntry[]>;

  // --- management API: webhooks, request log, usage ---
  /**
   * The company's webhooks newest first, across its integrations or one, and where the
   * next page starts; without headers. A page stops at `limit` webhooks or when their bodies
   * reach WEBHOOK_PAGE_BYTES, whichever comes first (always one at least). A search (`text`)
   * reads at most SEARCH_SCAN_ROWS rows or SEARCH_SCAN_BYTES of bodies of the range per
   * call, so its page may hold fewer than `limit` webhooks and still have a next.
   */
  listCompanyWebhooks(companyId: string, query: WebhookSearch): Promise<WebhookPage>;
  /** The same page as listCompanyWebhooks, each webhook whole (headers and source IP): the export's read. */
  exportCompanyWebhooks(companyId: string, query: WebhookSearch): Promise<WebhookPage<StoredWebhook>>;
  getCompanyWebhook(companyId: string, uuid: string): Promise<StoredWebhook | undefined>;
  /** The newest webhooks of a range without their bodies (uuid, time, size): what the live tail polls. */
  listCompanyWebhookHeads(companyId: string, query: WebhookHeadQuery): Promise<WebhookHead[]>;
  /** One webhook's head, or undefined. */
  getCompanyWebhookHead(companyId: string, uuid: string): Promise<WebhookHead | undefined>;
  /** These webhooks of the company (heads the caller read), without headers, in the order given; purged ones left out. */
  getCompanyWebhookSummaries(companyId: string, heads: readonly WebhookHead[]): Promise<WebhookSummary[]>;
  /** The company's request log newest first (cursor: received_at and id of the last). */
  listCompanyRequestLog(companyId: string, query: RequestLogQuery): Promise<RequestLogEntry[]>;
  /** Webhook sends (POST) per time bucket by outcome, oldest bucket first; empty buckets left out. */
  countUsage(companyId: string, query: UsageQuery): Promise<UsageBucket[]>;
}

export interface PendingWebhook {
  uuid: string;
  companyId: string;
  integrationId: string;
  keyId: string;
  event: string;
  receivedAt: number;
  rawBody: Buffer;
  /** SHA-256 of the raw body, computed only when there is an idempotency key or a signature claim. */
  bodySha256: string | null;
  /** JSON object of the kept headers. */
  headers: string;
  sourceIp: string;
  idempotencyKey: string | null;
  /**
   * A provider's signed request: its signature claim (src/sources/verifier.ts), so that a
   * copy of it within the idempotency window is a replay whatever delivery id it carries.
   * Absent for API-key webhooks.
   */
  signatureClaim?: string;
  /** Where the webhook's `data` comes from (see PayloadFormat); absent: `envelope`. */
  payloadFormat?: PayloadFormat;
  /** This request's request-log row, but for what the transaction decides (see requestLogOf). */
  log: PendingLogEntry;
  /** A source test's sample (src/intake/source-test-mark.ts): stored, but no deliveries. */
  sourceTest?: true;
}

export type CommitOutcome =
  | {
      kind: 'accepted';
      uuid: string;
      receivedAt: number;
      /** The outbox holds a delivery of it due now (absent: none, or only to paused destinations). */
      deliveriesDue?: true;
    }
  | { kind: 'replayed'; uuid: string; receivedAt: number }
  | { kind: 'conflict' };

/**
 * A webhook's request-log row before its transaction runs. Plain data, not a callback, so a
 * batch can be handed to another thread (the SQLite commit thread) as it is.
 */
export type PendingLogEntry = Omit<RequestLogEntry, 'status' | 'errorCode' | 'webhookUuid' | 'durationMs' | 'errorDetail'> & {
  /** When the request arrived, in ms since the epoch (fractional): its duration runs to the commit. */
  startedAt: number;
};

/** The status each outcome is answered with. */
export const STATUS_OF_OUTCOME: Record<CommitOutcome['kind'], number> = { accepted: 202, replayed: 200, conflict: 422 };

/** The request-log row of a webhook, once the transaction holding it knows its outcome. */
export function requestLogOf(pending: PendingLogEntry, outcome: CommitOutcome, now = preciseNow()): RequestLogEntry {
  const { startedAt, ...row } = pending;
  return {
    ...row,
    status: STATUS_OF_OUTCOME[outcome.kind],
    errorCode: outcome.kind === 'conflict' ? 'idempotency_conflict' : null,
    webhookUuid: outcome.kind === 'conflict' ? null : outcome.uuid,
    durationMs: durationMsSince(startedAt, now),
  };
}

/** Milliseconds from `startedAt` to `now` (both preciseNow()), to the microsecond, as the log keeps them. */
export function durationMsSince(startedAt: number, now: number): number {
  return Math.round(Math.max(0, now - startedAt) * 1000) / 1000;
}

/**
 * Milliseconds since the epoch with sub-millisecond precision, comparable between threads
 * (performance.now() alone counts from each thread's own start).
 */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Repeats of an idempotency key (or of a signature claim) older than this are new webhooks. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export type { PayloadFormat };

export interface RequestLogEntry {
  id: string;
  companyId: string;
  integrationId: string;
  receivedAt: number;
  method: string;
  status: number;
  errorCode: string | null;
  keyId: string | null;
  ip: string;
  userAgent: string | null;
  sizeBytes: number;
  durationMs: number;
  webhookUuid: string | null;
  /** What was wrong, in words, where the code alone does not say (why a signature was refused); absent: nothing more. */
  errorDetail?: string | null;
  /** The request's OpenTelemetry trace id when it was traced and sampled (src/telemetry/tracing.ts); absent: none. */
  traceId?: string | null;
}

export interface WebhookQuery {
  limit: number;
  cursor?: Cursor;
  event?: string;
  /** Inclusive lower bound, ms. */
  since?: number;
  /** Exclusive upper bound, ms. */
  until?: number;
}

/** A webhook as lists show it: its body (lists show its `data`), not its headers. */
export interface WebhookSummary {
  uuid: string;
  integrationId: string;
  event: string;
  receivedAt: number;
  rawBody: Buffer;
  payloadFormat: PayloadFormat;
}

export interface StoredWebhook extends WebhookSummary {
  headers: Record<string, string>;
  sourceIp: string;
}

/** What a webhook is without reading its body: the size comes from the row, not the bytes. */
export interface WebhookHead {
  uuid: string;
  receivedAt: number;
  sizeBytes: number;
}

/**
 * Bodies one page of webhooks holds at most (a single larger webhook still makes a page):
 * what one read loads into memory and hands to the event loop, whatever the body sizes.
 */
export const WEBHOOK_PAGE_BYTES = 1024 * 1024;

/** Rows of the filtered range one payload search reads at most before it answers. */
export const SEARCH_SCAN_ROWS = 10_000;

/** Bytes of bodies one payload search reads at most before it answers (one more body at most). */
export const SEARCH_SCAN_BYTES = 16 * 1024 * 1024;

export interface WebhookSearch extends WebhookQuery {
  integrationId?: string;
  /** Only webhooks whose raw body contains this text, exactly. */
  text?: string;
}

/** A range of the live tail: no cursor, no search. */
export type WebhookHeadQuery = Omit<WebhookSearch, 'cursor' | 'text'>;

export interface WebhookPage<W extends WebhookSummary = WebhookSummary> {
  webhooks: W[];
  /** Where the next page starts, or null when there is none. */
  next: Cursor | null;
}

export interface RequestLogQuery {
  limit: number;
  cursor?: PageCursor;
  /** One request, by its id (req_…); pass a time range around the id's time too, so the read takes the time index. */
  id?: string;
  integrationId?: string;
  keyId?: string;
  errorCode?: string;
  /** Statuses from `from` (inclusive) to `to` (exclusive). */
  status?: { from: number; to: number };
  since?: number;
  until?: number;
}

export interface UsageQuery {
  bucketMs: number;
  /** Inclusive, ms; the first bucket starts here. */
  since: number;
  /** Exclusive, ms. */
  until: number;
  integrationId?: string;
  keyId?: string;
  /** Counts per integration or per key in each bucket, instead of one for the company. */
  groupBy?: 'integration' | 'key';
}

/** Counts of one time bucket (of one integration or key when grouped). */
export interface UsageBucket {
  start: number;
  /** The integration or key id when grouped (null: requests without a valid key); else null. */
  group: string | null;
  accepted: number;
  replayed: number;
  rejected: number;
  failed: number;
  total: number;
}
