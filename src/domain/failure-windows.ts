/** Keys (addresses, accounts) tracked at most; past it the oldest windows are forgotten, so memory stays bounded. */
const MAX_TRACKED = 100_000;

/**
 * Failures counted per key in fixed windows: past the limit, a key is refused until its
 * window ends, so a slow guesser gets no more tries than a fast one. Windows are kept in the
 * order they started, so the ended ones are always at the front and are dropped as they end.
 */
export class FailureWindows {
  private windows = new Map<string, { startedAt: number; failures: number }>();

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  count(key: string): void {
    const now = this.now();
    this.forgetEnded(now);
    const window = this.windows.get(key);
    if (window) {
      window.failures++;
      return;
    }
    this.windows.set(key, { startedAt: now, failures: 1 });
    for (const oldest of this.windows.keys()) {
      if (this.windows.size <= MAX_TRACKED) break;
      this.windows.delete(oldest);
    }
  }

  /** Takes back one count of `key` (an attempt counted before it was checked, which did not fail). */
  uncount(key: string): void {
    const window = this.windows.get(key);
    if (window && window.failures > 0) window.failures--;
  }

  /** Milliseconds until `key` may try again (0: now). */
  blockedFor(key: string, limit: number): number {
    const window = this.windows.get(key);
    if (!window || window.failures < limit) return 0;
    return Math.max(0, window.startedAt + this.windowMs - this.now());
  }

  private forgetEnded(now: number): void {
    for (const [key, window] of this.windows) {
      if (now - window.startedAt < this.windowMs) break;
      this.windows.delete(key);
    }
  }
}
