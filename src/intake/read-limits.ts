import { AppError, type ErrorCode } from '../errors.js';
import { WEBHOOK_PAGE_BYTES } from '../store/store.js';

/**
 * How much reading of webhooks may be under way at once, per caller, per company and on
 * this node. A read of webhook bodies holds a database connection (PostgreSQL's pool is
 * shared with intake's commits) or a turn of the SQLite read thread; without a bound, one
 * viewer looping on a search, or many of them, would take every connection and queue
 * unbounded work ahead of everyone else's. Past a bound the answer is immediate (429 for a
 * caller or a company, 503 for the node), never a wait.
 */
export interface ReadLimitOptions {
  /**
   * Reads of pages of webhook bodies (lists, searches, an export's page, a tail's poll) at
   * once. One webhook by its uuid is not counted: one row, one body, and senders verify
   * their deliveries with many of them at a time.
   */
  heavyReads: Caps;
  /** Live tails open at once. */
  streams: Caps;
  /** Reads of the feed waiting for webhooks (`wait` > 0) at once: each holds a connection open, as a tail does. */
  longPolls: Caps;
  /** Exports under way at once (each also takes a heavy read for each page it reads). */
  exports: Caps;
  /** A stream or an export whose client takes nothing for this long is cut off and its memory freed. */
  sendTimeoutMs: number;
}

export interface Caps {
  perCaller?: number;
  perCompany: number;
  perNode: number;
}

/** The bounds for a node with this many database connections (PostgreSQL's pool; SQLite has one read thread). */
export function defaultReadLimits(poolSize: number): ReadLimitOptions {
  // Four connections are left to intake's commits (two groups at once), key lookups and
  // sessions; one company may take half of what reads get.
  const perNode = Math.max(2, poolSize - 4);
  return {
    heavyReads: { perCompany: Math.max(1, Math.floor(perNode / 2)), perNode },
    streams: { perCaller: 5, perCompany: 20, perNode: 100 },
    longPolls: { perCaller: 5, perCompany: 20, perNode: 100 },
    exports: { perCaller: 2, perCompany: 3, perNode: 8 },
    sendTimeoutMs: 30_000,
  };
}

/** The bounds of one node, shared by every route that reads webhooks (the app decorates itself with it). */
export class ReadLimits {
  readonly heavyReads: ConcurrencyCaps;
  readonly streams: ConcurrencyCaps;
  readonly longPolls: ConcurrencyCaps;
  readonly exports: ConcurrencyCaps;
  readonly sendTimeoutMs: number;

  constructor(options: ReadLimitOptions) {
    this.heavyReads = new ConcurrencyCaps('reads of webhooks', options.heavyReads, 'service_unavailable', 1);
    this.streams = new ConcurrencyCaps('live tails', options.streams, 'rate_limited', 5);
    this.longPolls = new ConcurrencyCaps('waiting reads of the feed', options.longPolls, 'rate_limited', 5);
    this.exports = new ConcurrencyCaps('exports', options.exports, 'rate_limited', 5);
    this.sendTimeoutMs = options.sendTimeoutMs;
  }

  /** The heavy-read bounds as a route's description states them (they become the OpenAPI document). */
  describeHeavyReads(): string {
    const { perCompany, perNode } = this.heavyReads.caps;
    return `At most ${perCompany} reads of webhooks run at once per company (429 past it) and ${perNode} per server (503), with Retry-After.`;
  }

  /** Runs one heavy read of the company's webhooks, or refuses it at once. */
  async read<T>(companyId: string, run: () => Promise<T>): Promise<T> {
    const release = this.heavyReads.take(companyId);
    try {
      return await run();
    } finally {
      release();
    }
  }
}

/** The page budget of every list of webhooks, as the route descriptions state it. */
export const PAGE_BUDGET_TEXT =
  `A page stops at \`limit\` webhooks or once their bodies reach ${WEBHOOK_PAGE_BYTES / 1024 / 1024} MiB, whichever comes ` +
  'first (a single larger webhook still makes a page of one): a page may hold fewer than `limit` items and still have a `next_cursor`.';

declare module 'fastify' {
  interface FastifyInstance {
    readLimits: ReadLimits;
  }
}

/** Counts what is under way per caller, per company and on the node, and refuses what would pass a cap. */
export class ConcurrencyCaps {
  private readonly byCaller = new Map<string, number>();
  private readonly byCompany = new Map<string, number>();
  private onNode = 0;

  constructor(
    private readonly what: string,
    readonly caps: Caps,
    /** The node's cap is the service's limit, not the caller's: a 503 where reads are concerned. */
    private readonly nodeRefusal: ErrorCode,
    private readonly retryAfterSeconds: number,
  ) {}

  /** Takes a slot and returns its release (safe to call twice), or throws the refusal. */
  take(companyId: string, callerId?: string): () => void {
    const release = this.tryTake(companyId, callerId);
    if (release) return release;
    throw this.refusal(companyId, callerId);
  }

  /** Takes a slot, or returns undefined when a cap is reached. */
  tryTake(companyId: string, callerId?: string): (() => void) | undefined {
    if (this.refusal(companyId, callerId)) return undefined;
    const caller = callerId === undefined || this.caps.perCaller === undefined ? undefined : callerId;
    this.onNode++;
    bump(this.byCompany, companyId, 1);
    if (caller !== undefined) bump(this.byCaller, caller, 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.onNode--;
      bump(this.byCompany, companyId, -1);
      if (caller !== undefined) bump(this.byCaller, caller, -1);
    };
  }

  /** What is under way now, for tests and metrics. */
  get inUse(): number {
    return this.onNode;
  }

  private refusal(companyId: string, callerId: string | undefined): AppError | undefined {
    const { perCaller, perCompany, perNode } = this.caps;
    const retry = { retryAfterSeconds: this.retryAfterSeconds };
    if (perCaller !== undefined && callerId !== undefined && (this.byCaller.get(callerId) ?? 0) >= perCaller) {
      return new AppError('rate_limited', `At most ${perCaller} ${this.what} at once per key or user; retry later.`, retry);
    }
    if ((this.byCompany.get(companyId) ?? 0) >= perCompany) {
      return new AppError('rate_limited', `At most ${perCompany} ${this.what} at once per company; retry later.`, retry);
    }
    if (this.onNode >= perNode) {
      return new AppError(this.nodeRefusal, `This server has ${perNode} ${this.what} under way; retry later.`, retry);
    }
    return undefined;
  }
}

function bump(counts: Map<string, number>, key: string, by: number): void {
  const count = (counts.get(key) ?? 0) + by;
  if (count > 0) counts.set(key, count);
  else counts.delete(key);
}
