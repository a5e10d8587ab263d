import type { CommitOutcome, PendingWebhook } from '../store/store.js';

/** How often a waiting read of the feed asks the store anyway: for webhooks another node committed. */
export const FEED_POLL_MS = 250;

/**
 * This node's signal that a company's feed has grown: the group commit rings it after each
 * commit, for the companies whose webhooks it accepted, and a waiting read of the feed
 * (src/api/webhook-feed.ts) wakes on it instead of asking the store on a timer. It hears only
 * this node's commits; what another node commits reaches a waiting read by its poll.
 *
 * Ringing is on intake's path, right after a commit: with no read waiting on the node it is
 * one size check a group; otherwise one Map lookup a run of webhooks of one company, and a
 * flag set on each of that company's waiting reads. It allocates nothing a webhook, never
 * awaits, and throws nothing (its wakers are its own).
 */
export class FeedBell {
  private readonly listening = new Map<string, Set<FeedListener>>();

  constructor(
    /** How often a waiting read asks the store without a ring (tests lengthen it, so that only the bell can wake a read). */
    readonly pollMs = FEED_POLL_MS,
  ) {}

  /** Rings for each company with webhooks accepted by this commit (`outcomes` in the order of `webhooks`). */
  ringCommitted(webhooks: readonly PendingWebhook[], outcomes: readonly CommitOutcome[]): void {
    if (this.listening.size === 0) return;
    let last: string | undefined;
    for (let i = 0; i < webhooks.length; i++) {
      if (outcomes[i]!.kind !== 'accepted') continue;
      const companyId = webhooks[i]!.companyId;
      if (companyId === last) continue;
      last = companyId;
      const listeners = this.listening.get(companyId);
      if (listeners !== undefined) for (const listener of listeners) listener.ring();
    }
  }

  /** Starts listening for the company's commits; close() the listener when the read ends. */
  listen(companyId: string): FeedListener {
    let listeners = this.listening.get(companyId);
    if (listeners === undefined) {
      listeners = new Set();
      this.listening.set(companyId, listeners);
    }
    const company = listeners;
    const listener = new FeedListener(() => {
      company.delete(listener);
      if (company.size === 0 && this.listening.get(companyId) === company) this.listening.delete(companyId);
    });
    company.add(listener);
    return listener;
  }
}

/**
 * One waiting read's ear. Rings coalesce: any number of them between two take()s is one,
 * so a flood of commits makes a read ask the store once, then wait again.
 */
export class FeedListener {
  private rung = false;
  private wake: (() => void) | undefined;

  constructor(private readonly stop: () => void) {}

  ring(): void {
    this.rung = true;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Whether a ring came since the last take(), and forgets it: call it just before reading. */
  take(): boolean {
    const rung = this.rung;
    this.rung = false;
    return rung;
  }

  /** Resolves at a ring (at once if one came since take()), after `ms`, or when `signal` aborts. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.rung || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done);
      this.wake = done;
    });
  }

  close(): void {
    this.wake = undefined;
    this.stop();
  }
}
