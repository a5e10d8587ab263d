import type { WebhookHead } from '../store/store.js';

/**
 * How far back a poll looks for webhooks that committed late. A webhook's time is taken
 * when it arrives and it becomes visible at its commit, so one can appear after a later
 * one; a window of a few seconds of already-sent uuids catches those without sending
 * anything twice.
 */
export const LATE_COMMIT_WINDOW_MS = 5_000;

/**
 * Which webhooks a live tail has sent, and from when its next poll must read.
 *
 * A poll reads heads (uuid, time, size) from `since()`; `fresh()` picks those not sent yet,
 * the stream sends what fits its byte budget, and `record()` moves the window: to the
 * oldest webhook it had to leave for later, else to the poll's start less the late-commit
 * window. A quiet stream thus reads an empty range, a busy one the last few seconds of
 * heads, and no poll reads a body it already sent.
 */
export class TailWindow {
  /** Nothing received before the stream's start is sent, however late it commits. */
  private readonly floor: number;
  private from: number;
  private readonly sent = new Map<string, number>();

  constructor(start: { at: number; seen: string[] }) {
    this.floor = start.at;
    this.from = start.at;
    for (const uuid of start.seen) this.sent.set(uuid, start.at);
  }

  /** The earliest time the next poll must read. */
  since(): number {
    return Math.max(this.floor, this.from);
  }

  /** The heads of a poll (newest first) not sent yet, oldest first. */
  fresh(heads: readonly WebhookHead[]): WebhookHead[] {
    const since = this.since();
    return heads.filter((head) => head.receivedAt >= since && !this.sent.has(head.uuid)).reverse();
  }

  /** Marks `sent` as sent; `left` (fresh, but over this poll's budget) are read again next time. */
  record(sent: readonly WebhookHead[], left: readonly WebhookHead[], polledAt: number): void {
    for (const head of sent) this.sent.set(head.uuid, head.receivedAt);
    this.from = Math.min(polledAt - LATE_COMMIT_WINDOW_MS, ...left.map((head) => head.receivedAt));
    const since = this.since();
    for (const [uuid, at] of this.sent) if (at < since) this.sent.delete(uuid);
  }
}
