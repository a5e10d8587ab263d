import type { Actor, AuditEvent } from './audit-store.js';
import type { StoredWebhook } from './webhook-store.js';

/**
 * Erasure by data subject (issue 40, src/services/erasures.ts): the requests, and the work
 * of one in steps. The scan is read on the read side (SQLite's read thread), a page at a
 * time; what it found is written in a short transaction of its own, with the request's
 * progress, under the lease of the node running it.
 */
export interface ErasureStore {
  createErasure(erasure: NewErasure, audit: AuditEvent): Promise<ErasureRecord>;
  getErasure(companyId: string, id: string): Promise<ErasureRecord | undefined>;
  /** Newest first; `before`: the id of the last of the previous page. */
  listErasures(companyId: string, query: { limit: number; before?: string }): Promise<ErasureRecord[]>;
  /**
   * A previewed erasure made real: queued to run from the start of its range again (what
   * arrived since the preview is searched too), its counts zeroed. `not_previewed`: it is
   * not a preview waiting (still counting, already confirmed, expired).
   */
  confirmErasure(companyId: string, id: string, confirmation: ErasureConfirmation): Promise<ErasureRecord | 'not_found' | 'not_previewed'>;

  /**
   * Across companies (the job's question): leases the oldest erasure waiting to run (or
   * whose node's lease ended), one per company at a time, and gives what running it needs.
   * Previews past their time are dropped (their value with them) on the way.
   */
  takeErasure(at: number, token: string, leaseMs: number): Promise<ErasureWork | undefined>;
  /** Up to `rows` of the company's webhooks of the range after the cursor, oldest first, those already erased left out. */
  scanErasure(companyId: string, query: ErasureScanQuery): Promise<ErasureScanPage>;
  /** How many deliveries, attempts with a response excerpt and request-log rows these webhooks have: a preview's counts. */
  countErasureLinks(companyId: string, webhooks: readonly ErasureTarget[]): Promise<ErasureCounts>;
  /**
   * One step: the page's matches tombstoned (unless a preview), and the request's progress
   * (cursor, counts, sample) saved, in one transaction, under the lease. False: the lease
   * was lost (another node runs it now); nothing was written.
   */
  erasureStep(companyId: string, step: ErasureStep): Promise<boolean>;
  /** The end of a run: its state, the value dropped (but for a preview, which keeps it sealed until `expiresAt`), the audit record. */
  finishErasure(companyId: string, id: string, token: string, end: ErasureEnd): Promise<boolean>;

  // Operator lookup for the CLI, which is given bare ids: which company owns this?
  companyOfErasure(erasureId: string): Promise<string | undefined>;
}

export type ErasureState = 'counting' | 'previewed' | 'queued' | 'running' | 'completed' | 'failed' | 'expired';

/** What an erasure looks for; `value` is held sealed, and only while it is needed. */
export interface ErasureCriteria {
  /** Inclusive, ms. */
  since: number;
  /** Exclusive, ms. */
  until: number;
  /**
   * No `until` was asked for: the range runs to when the erasure starts. A preview's is set
   * then to the time of its confirmation, so what arrived since the preview is erased too.
   */
  untilConfirmed?: true;
  /** Null: every integration of the company. */
  integrationIds: string[] | null;
  /** Empty: anywhere in the body and the headers. */
  paths: string[];
}

export interface NewErasure {
  id: string;
  companyId: string;
  dryRun: boolean;
  valueSealed: string;
  valueHint: string;
  criteria: ErasureCriteria;
  requestedBy: Actor;
  createdAt: number;
  /** A preview's value is dropped then if no one confirms it. */
  expiresAt: number | null;
}

export interface ErasureConfirmation {
  by: Actor;
  at: number;
  /** The range's end, when the preview's ran to its confirmation (`untilConfirmed`): `at` and after. */
  until: number | null;
  audit: AuditEvent;
}

export interface ErasureCounts {
  webhooks: number;
  deliveries: number;
  attempts: number;
  requestLog: number;
}

/** One match, as a preview shows it: never the body. */
export interface ErasureSample {
  uuid: string;
  integrationId: string;
  event: string;
  receivedAt: number;
  /** `body`, `header <name>`, or the path where the value was. */
  matchedIn: string;
}

export interface ErasureRecord {
  id: string;
  companyId: string;
  state: ErasureState;
  dryRun: boolean;
  valueHint: string;
  criteria: ErasureCriteria;
  requestedBy: { type: Actor['type']; id: string | null };
  confirmedBy: { type: Actor['type']; id: string | null } | null;
  createdAt: number;
  confirmedAt: number | null;
  startedAt: number | null;
  finishedAt: number | null;
  expiresAt: number | null;
  /** Webhooks of the range read so far. */
  scanned: number;
  counts: ErasureCounts;
  sample: ErasureSample[];
  error: string | null;
}

export interface ErasureWork {
  id: string;
  companyId: string;
  dryRun: boolean;
  valueSealed: string;
  criteria: ErasureCriteria;
  /** Null: from the start of the range. */
  cursor: { receivedAt: number; uuid: string } | null;
  counts: ErasureCounts;
  sample: ErasureSample[];
  /** Who the tombstones name. */
  erasedBy: { type: Actor['type']; id: string | null };
}

export interface ErasureScanQuery {
  since: number;
  until: number;
  integrationIds: string[] | null;
  cursor: { receivedAt: number; uuid: string } | null;
  rows: number;
  /** Bodies a page holds at most (one more body at most). */
  bytes: number;
}

export interface ErasureScanPage {
  /** The page's webhooks, whole: what the value is looked for in. */
  webhooks: StoredWebhook[];
  /** The last webhook the page read (where the next starts); null: none. */
  last: { receivedAt: number; uuid: string } | null;
  /** False: the range ends within this page. */
  more: boolean;
}

export interface ErasureTarget {
  uuid: string;
  receivedAt: number;
}

export interface ErasureStep {
  id: string;
  token: string;
  at: number;
  leaseMs: number;
  dryRun: boolean;
  /** The webhooks of this step to tombstone (a preview: to count). */
  targets: ErasureTarget[];
  /** The tombstone their bodies become. */
  tombstone: Buffer;
  /** Where the scan has reached with this step. */
  cursor: { receivedAt: number; uuid: string };
  /** Rows read since the last step. */
  scanned: number;
  /** A preview's counts of this step's targets (an erasure counts what it changes). */
  counted?: ErasureCounts;
  /** The sample so far (ten at most). */
  sample: ErasureSample[];
}

export interface ErasureEnd {
  at: number;
  state: 'previewed' | 'completed' | 'failed';
  error?: string;
  /** A preview: when its value is dropped if it is not confirmed. */
  expiresAt?: number;
  audit?: AuditEvent;
}
