import { randomUUID } from 'node:crypto';
import { isId } from '../domain/ids.js';
import { AppError } from '../errors.js';
import { chunks } from '../store/group-rows.js';
import {
  DELIVERY_STATES,
  type Actor,
  type AuditEvent,
  type Delivery,
  type DeliveryState,
  type RedeliveryBudget,
  type RedeliveryLease,
  type RedeliveryStep,
  type ReplayFilter,
  type SendSelection,
  type Store,
} from '../store/store.js';

/**
 * Replays and sends: deliveries made again, by a person or a script, in one place for the
 * API and the CLI. Each is bounded so that no company can turn it against intake, another
 * company or a third party (issue 33, docs/security.md):
 *
 * - **one bulk operation per company at a time**, across nodes (a lease in the database);
 *   another is refused at once with 429 and `Retry-After`;
 * - what it changes is **read on the read side** (SQLite's read thread), then **written in
 *   steps of DEFAULT_STEP_ROWS rows**, each its own short transaction, one step at a time on a node
 *   whatever the company: every other company's group commits go between two steps;
 * - a **budget** per company of deliveries made again (a token bucket: `burst` at once,
 *   `perHour` an hour), single replays included, past which the answer is 429;
 * - a bulk replay leaves out deliveries whose series is still running (pending) and those it
 *   replayed less than `cooldownMs` ago, so calling it again and again sends nothing again.
 */

export interface RedeliveryOptions {
  /** Deliveries one company may make again an hour. */
  perHour: number;
  /** A bulk replay leaves out deliveries it replayed less than this long ago. */
  cooldownMs?: number;
  /** Rows a step writes at most. */
  stepRows?: number;
  now?: () => number;
  /**
   * Runs an operation's read of what it will change (up to 50,000 rows of one destination
   * or of the company's webhooks) within the bounds every heavy read has: the API gives its
   * per-company and per-node caps (src/intake/read-limits.ts). Unbounded by default (the CLI).
   */
  boundedRead?: <T>(companyId: string, read: () => Promise<T>) => Promise<T>;
}

/** Deliveries one bulk replay or send makes at most; `more` says to call again. */
export const MAX_PER_CALL = 10_000;
/** Webhooks one send may name. */
export const MAX_SEND_UUIDS = 100;
/** Deliveries a replay may name (the panel's selection); the bulk replays' bounds apply to them too. */
export const MAX_REPLAY_IDS = 100;
/** Deliveries a bulk replay reads at most per call, on the read side. */
export const REPLAY_SCAN_ROWS = 50_000;
export const DEFAULT_REPLAY_COOLDOWN_MS = 60_000;
/**
 * A few hundred rows a transaction: on SQLite a step of 250 replays took 5.4 ms on the commit
 * thread at the median, 13.6 at most (40 steps of a replay of 10,000, this 2-core machine),
 * beside 2.3 ms for a group commit of 32 webhooks: a webhook waits for one step at most.
 */
export const DEFAULT_STEP_ROWS = 250;
/** How long an operation's lease lasts after each step: a node that died frees it then. */
const LEASE_MS = 60_000;
/** The longest Retry-After for a company whose bulk operation is under way (most last seconds). */
const MAX_BUSY_RETRY_MS = 10_000;
/** Companies whose spent budget a node remembers at most (past it, it starts again: the database still decides). */
const MAX_REMEMBERED_SPENT = 10_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What a bulk operation made, and where to go on. */
export interface RedeliveryOutcome {
  count: number;
  /** Call again (from `nextSince` when given): the call's limit, its read window or the budget ended it. */
  more: boolean;
  nextSince?: number;
}

export interface SendOutcome extends RedeliveryOutcome {
  /** Webhooks selected that the destination already had a delivery of. */
  skipped: number;
}

/** One item of a bulk operation and where it sits in the range (for `nextSince`). */
interface Item<T> {
  value: T;
  at: number;
}

/** A bulk operation's own parts: its read, its step, its audit record. */
interface BulkOperation<T> {
  scan(limit: number): Promise<{ items: Array<Item<T>>; more: boolean; nextSince?: number }>;
  step(lease: RedeliveryLease, values: T[], finish?: { audit: AuditEvent; countBefore: number; countKey: string }): Promise<RedeliveryStep>;
  audit(at: number): AuditEvent;
  countKey: string;
}

export class Redeliveries {
  private readonly budget: RedeliveryBudget;
  private readonly cooldownMs: number;
  private readonly stepRows: number;
  private readonly now: () => number;
  private readonly boundedRead: NonNullable<RedeliveryOptions['boundedRead']>;
  /** The step under way on this node: steps of every company queue behind it. */
  private lastStep: Promise<unknown> = Promise.resolve();
  /** Companies with a bulk operation under way on this node: another is refused without asking the database. */
  private readonly running = new Set<string>();
  /** Companies whose budget this node saw spent, and until when: refused meanwhile without asking the database. */
  private readonly spentUntil = new Map<string, number>();

  constructor(
    private readonly store: Store,
    options: RedeliveryOptions,
  ) {
    this.budget = { perHour: options.perHour, burst: Math.min(options.perHour, MAX_PER_CALL) };
    this.cooldownMs = options.cooldownMs ?? DEFAULT_REPLAY_COOLDOWN_MS;
    this.stepRows = options.stepRows ?? DEFAULT_STEP_ROWS;
    this.now = options.now ?? Date.now;
    this.boundedRead = options.boundedRead ?? ((_companyId, read) => read());
  }

  /** The budget every company has, for the API's descriptions. */
  get perHour(): number {
    return this.budget.perHour;
  }
  get burst(): number {
    return this.budget.burst;
  }

  /** A new attempt series for one delivery, whatever its state but cancelled; one of the budget. */
  async replayOne(companyId: string, deliveryId: string, actor: Actor): Promise<Delivery> {
    const at = this.now();
    this.refuseWhileSpent(companyId, at);
    const outcome = await this.store.replayDelivery(companyId, deliveryId, at, this.budget, audit(actor, 'delivery.replay', 'delivery', deliveryId, at));
    if (outcome.kind === 'not_found') throw notFound('delivery', deliveryId);
    if (outcome.kind === 'cancelled') throw new AppError('conflict', 'This delivery was cancelled (its destination was deleted, or its webhook erased): it cannot be replayed.');
    if (outcome.kind === 'no_budget') throw this.budgetSpent(companyId, at, outcome.retryAfterMs);
    return outcome.delivery;
  }

  /**
   * A new series for up to MAX_PER_CALL of one destination's deliveries that match the
   * filter, oldest first: not cancelled, not pending (but with `state: 'pending'`, those
   * failing and waiting for a retry: "retry now"), not replayed in the last `cooldownMs`.
   */
  async replay(companyId: string, filter: ReplayFilter, actor: Actor): Promise<RedeliveryOutcome> {
    checkReplayFilter(filter);
    await this.requireDestination(companyId, filter.destinationId);
    const started = this.now();
    const startedBefore = started - this.cooldownMs;
    return this.bulk(companyId, filter.destinationId, started, {
      scan: async (limit) => {
        const scan = await this.boundedRead(companyId, () => this.store.scanReplay(companyId, filter, startedBefore, limit, REPLAY_SCAN_ROWS));
        return { items: scan.items.map((item) => ({ value: item.id, at: item.createdAt })), more: scan.more, nextSince: scan.nextSince };
      },
      step: (lease, ids, finish) => this.store.replayStep(companyId, lease, ids, startedBefore, finish, filter.state, filter.deliveryIds !== undefined),
      audit: (at) => audit(actor, 'delivery.replay', 'destination', filter.destinationId, at, { ...filter }),
      countKey: 'replayed',
    });
  }

  /**
   * How many deliveries a replay with this filter would take if called now (at most
   * MAX_PER_CALL; `more` when the read stopped before the end of the range), to say so
   * before it runs. Only a bounded read: no lease, no budget, no change.
   */
  async preview(companyId: string, filter: ReplayFilter): Promise<{ count: number; more: boolean }> {
    checkReplayFilter(filter);
    await this.requireDestination(companyId, filter.destinationId);
    const startedBefore = this.now() - this.cooldownMs;
    const scan = await this.boundedRead(companyId, () => this.store.scanReplay(companyId, filter, startedBefore, MAX_PER_CALL, REPLAY_SCAN_ROWS));
    return { count: scan.items.length, more: scan.more };
  }

  /**
   * Deliveries to the destination for stored webhooks that have none to it yet (a
   * destination added after they arrived): up to MAX_SEND_UUIDS named ones, or a range
   * from `since` through the destination's filters, MAX_PER_CALL at most per call.
   */
  async send(companyId: string, destinationId: string, selection: SendSelection, actor: Actor): Promise<SendOutcome> {
    const uuids = selection.webhookUuids;
    if (uuids !== undefined) {
      if (selection.since !== undefined || selection.until !== undefined || selection.event !== undefined) {
        throw new AppError('invalid_request', 'Name webhooks (webhook_uuids) or give a range (since, until, event), not both.', { field: 'webhook_uuids' });
      }
      if (uuids.length === 0 || uuids.length > MAX_SEND_UUIDS || !uuids.every((uuid) => UUID.test(uuid))) {
        throw new AppError('invalid_request', `webhook_uuids must name 1 to ${MAX_SEND_UUIDS} webhooks by their uuid.`, { field: 'webhook_uuids' });
      }
    } else if (selection.since === undefined) {
      // A send of every stored webhook is never what a missing field meant.
      throw new AppError('invalid_request', 'Name webhooks (webhook_uuids) or give the start of a range (since).', { field: 'since' });
    }
    await this.requireDestination(companyId, destinationId);
    const selected = uuids === undefined ? selection : { webhookUuids: [...new Set(uuids)] };
    let skipped = 0;
    const outcome = await this.bulk(companyId, destinationId, this.now(), {
      scan: async (limit) => {
        const scan = await this.boundedRead(companyId, () => this.store.scanSend(companyId, destinationId, selected, limit));
        skipped = scan.skipped;
        return { items: scan.fresh.map((webhook) => ({ value: webhook, at: webhook.receivedAt })), more: scan.more, nextSince: scan.nextSince };
      },
      step: (lease, webhooks, finish) => this.store.sendStep(companyId, lease, webhooks, finish),
      audit: (at) => audit(actor, 'destination.send', 'destination', destinationId, at),
      countKey: 'created',
    });
    return { ...outcome, skipped };
  }

  /**
   * A bulk operation, one per company on this node (refused at once otherwise, without the
   * database), then under the company's lease across nodes (leased).
   */
  private async bulk<T>(
    companyId: string,
    destinationId: string,
    started: number,
    operation: BulkOperation<T>,
  ): Promise<RedeliveryOutcome> {
    if (this.running.has(companyId)) throw busy(MAX_BUSY_RETRY_MS);
    this.refuseWhileSpent(companyId, started);
    this.running.add(companyId);
    try {
      return await this.leased(companyId, destinationId, started, operation);
    } finally {
      this.running.delete(companyId);
    }
  }

  /**
   * The company's lease in the database, the read, the steps (the last one records the
   * operation and frees the lease in its own transaction), and the lease freed whatever
   * happens.
   */
  private async leased<T>(
    companyId: string,
    destinationId: string,
    started: number,
    operation: BulkOperation<T>,
  ): Promise<RedeliveryOutcome> {
    const token = randomUUID();
    const start = await this.store.beginRedelivery(companyId, { token, at: started, leaseMs: LEASE_MS, budget: this.budget });
    if (start.kind === 'busy') throw busy(Math.min(start.retryAfterMs, MAX_BUSY_RETRY_MS));
    if (start.kind === 'no_budget') throw this.budgetSpent(companyId, started, start.retryAfterMs);
    let count = 0;
    let ended = false;
    try {
      const scan = await operation.scan(Math.min(MAX_PER_CALL, start.available));
      const steps = [...chunks(scan.items, this.stepRows)];
      for (const [index, items] of steps.entries()) {
        const at = this.now();
        const last = index === steps.length - 1;
        const lease = { token, destinationId, at, leaseMs: LEASE_MS, budget: this.budget };
        const finish = last ? { audit: operation.audit(at), countBefore: count, countKey: operation.countKey } : undefined;
        const step = await this.oneStepAtATime(() => operation.step(lease, items.map((item) => item.value), finish));
        count += step.count;
        if (step.stop !== undefined) {
          const more = step.stop === 'no_budget';
          return { count, more, ...(more && { nextSince: items[0]!.at }) };
        }
        ended = last;
      }
      return { count, more: scan.more, ...(scan.nextSince !== undefined && { nextSince: scan.nextSince }) };
    } finally {
      if (!ended) {
        const at = this.now();
        await this.store.endRedelivery(companyId, token, count > 0 ? { audit: operation.audit(at), countKey: operation.countKey, count } : undefined);
      }
    }
  }

  /** Runs one step once the node's step before it has ended, whatever company it was for. */
  private oneStepAtATime<R>(step: () => Promise<R>): Promise<R> {
    const run = this.lastStep.then(step);
    this.lastStep = run.catch(() => undefined);
    return run;
  }

  /** Refuses at once, without the database, a company whose spent budget this node saw and that has not refilled since. */
  private refuseWhileSpent(companyId: string, at: number): void {
    const until = this.spentUntil.get(companyId);
    if (until === undefined) return;
    if (until > at) throw this.budgetSpent(companyId, at, until - at);
    this.spentUntil.delete(companyId);
  }

  /** The refusal of a spent budget, remembered until a token is back (a long-quiet company's entry goes with the next one's check). */
  private budgetSpent(companyId: string, at: number, retryAfterMs: number): AppError {
    if (this.spentUntil.size >= MAX_REMEMBERED_SPENT) this.spentUntil.clear();
    this.spentUntil.set(companyId, at + retryAfterMs);
    return new AppError(
      'redelivery_budget_spent',
      `A company may replay or send ${this.budget.perHour} deliveries an hour, ${this.budget.burst} at once; the next one is allowed in ${seconds(retryAfterMs)} s.`,
      { retryAfterSeconds: seconds(retryAfterMs) },
    );
  }

  private async requireDestination(companyId: string, destinationId: string): Promise<void> {
    if (!isId('dst', destinationId) || !(await this.store.getDestination(companyId, destinationId))) throw notFound('destination', destinationId);
  }
}

function busy(retryAfterMs: number): AppError {
  return new AppError('redelivery_busy', undefined, { retryAfterSeconds: seconds(retryAfterMs) });
}

/**
 * A state a bulk replay may filter on. `pending` retries now the deliveries failing and
 * waiting for their next attempt (queries/redeliveries.ts's bulkReplayable); cancelled ones
 * cannot be replayed.
 */
/** A bulk replay's filter as it can be: its state replayable, named deliveries (1 to 100 ids) or a range, not both. */
function checkReplayFilter(filter: ReplayFilter): void {
  if (filter.state !== undefined) replayableState(filter.state);
  const ids = filter.deliveryIds;
  if (ids === undefined) return;
  if (filter.since !== undefined || filter.until !== undefined || filter.event !== undefined) {
    throw new AppError('invalid_request', 'Name deliveries (delivery_ids) or give a range (since, until, event), not both.', { field: 'delivery_ids' });
  }
  if (ids.length === 0 || ids.length > MAX_REPLAY_IDS || !ids.every((id) => isId('dlv', id))) {
    throw new AppError('invalid_request', `delivery_ids must name 1 to ${MAX_REPLAY_IDS} deliveries by their id (dlv_…).`, { field: 'delivery_ids' });
  }
}

function replayableState(state: string): DeliveryState {
  if (!(DELIVERY_STATES as readonly string[]).includes(state)) {
    throw new AppError('invalid_request', `The state must be one of ${DELIVERY_STATES.join(', ')}.`, { field: 'state' });
  }
  if (state === 'cancelled') {
    throw new AppError('invalid_request', 'Cancelled deliveries belonged to a deleted destination and cannot be replayed.', { field: 'state' });
  }
  return state as DeliveryState;
}

function audit(actor: Actor, action: string, targetType: string, targetId: string, at: number, after?: object): AuditEvent {
  return { actor, action, targetType, targetId, at, ...(after && { after }) };
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

function notFound(kind: string, id: string): AppError {
  return new AppError('not_found', `No ${kind} with id ${id}.`);
}
