/**
 * Per-integration token buckets, in memory on each node: a bucket holds a minute's worth of
 * requests and refills continuously, so a sender may burst up to its limit and then keeps
 * the limit's pace. Several nodes each allow the limit (documented in docs/operations.md).
 */
export class RateLimiter {
  private buckets = new Map<string, { tokens: number; updatedAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Takes one token; returns 0 when allowed, else the seconds until one is free. */
  take(key: string, perMinute: number): number {
    const bucket = this.refilled(key, perMinute);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return this.secondsUntilToken(bucket, perMinute);
  }

  /**
   * What is left, for the RateLimit-* headers: whole requests that may be sent now, and the
   * seconds until the bucket is full again.
   */
  quota(key: string, perMinute: number): { remaining: number; resetSeconds: number } {
    const bucket = this.refilled(key, perMinute);
    return {
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil(((perMinute - bucket.tokens) * 60_000) / perMinute / 1000),
    };
  }

  private refilled(key: string, perMinute: number) {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: perMinute, updatedAt: now };
    bucket.tokens = Math.min(perMinute, bucket.tokens + ((now - bucket.updatedAt) * perMinute) / 60_000);
    bucket.updatedAt = now;
    this.buckets.set(key, bucket);
    return bucket;
  }

  private secondsUntilToken(bucket: { tokens: number }, perMinute: number): number {
    return Math.max(1, Math.ceil(((1 - bucket.tokens) * 60_000) / perMinute / 1000));
  }
}
