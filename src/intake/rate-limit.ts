/**
 * Per-integration token buckets, in memory on each node: a bucket holds a minute's worth of
 * requests and refills continuously, so a sender may burst up to its limit and then keeps
 * the limit's pace. Several nodes each allow the limit (documented in docs/operations.md).
 */
export class RateLimiter {
  private buckets = new Map<string, { tokens: number; updatedAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Takes one token; returns 0 when allowed, else the seconds until one is free. */
  take(integrationId: string, perMinute: number): number {
    const now = this.now();
    const refillPerMs = perMinute / 60_000;
    const bucket = this.buckets.get(integrationId) ?? { tokens: perMinute, updatedAt: now };
    bucket.tokens = Math.min(perMinute, bucket.tokens + (now - bucket.updatedAt) * refillPerMs);
    bucket.updatedAt = now;
    this.buckets.set(integrationId, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / refillPerMs / 1000));
  }
}
