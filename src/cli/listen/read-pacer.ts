import { setTimeout as sleep } from 'node:timers/promises';

/** The time a pacer reads and waits on: the real one, or a test's. */
export interface PacerClock {
  now(): number;
  /** Resolves after `ms`, or early when `signal` aborts (never rejects). */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

const REAL_CLOCK: PacerClock = {
  now: () => performance.now(),
  sleep: (ms, signal) => sleep(ms, undefined, { signal }).catch(() => undefined),
};

/**
 * Keeps `intake listen`'s reads of the feed under the API's limit for its key (1,200
 * requests a minute): a token bucket, `perSecond` reads a second with bursts of `burst`.
 * A long poll answers as soon as one webhook commits, so at a few hundred webhooks a second
 * an unpaced listener would read after every few and be refused with a 429 (measured: a
 * Retry-After of 27 s at 500 a second, bench/listen-latency.ts). Paced, it reads at most
 * `perSecond` times a second and each page holds what arrived meanwhile; below that rate
 * (a developer's usual traffic) no read waits.
 */
export class ReadPacer {
  #tokens: number;
  #refilledAt: number;

  constructor(
    readonly perSecond = 10,
    readonly burst = 20,
    private readonly clock: PacerClock = REAL_CLOCK,
  ) {
    this.#tokens = burst;
    this.#refilledAt = clock.now();
  }

  /** Resolves when the next read may start: at once while the bucket holds a token. */
  async take(signal: AbortSignal): Promise<void> {
    this.#refill();
    if (this.#tokens < 1) {
      await this.clock.sleep(Math.ceil(((1 - this.#tokens) * 1000) / this.perSecond), signal);
      this.#refill();
    }
    this.#tokens -= 1;
  }

  #refill(): void {
    const now = this.clock.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#refilledAt) * this.perSecond) / 1000);
    this.#refilledAt = now;
  }
}
