import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { MAX_ATTEMPTS, nextAttemptAt, parseRetryAfter, RETRY_DELAYS_MS } from '../../src/destinations/schedule.js';

const NOW = Date.parse('2026-03-01T12:00:00Z');
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/** random() = 0.5 is a jitter factor of exactly 1. */
const NO_JITTER = () => 0.5;

function after(attempt: number, options: { status?: number | null; retryAfterMs?: number | null; random?: () => number } = {}) {
  return nextAttemptAt({ attempt, now: NOW, status: options.status ?? 500, retryAfterMs: options.retryAfterMs ?? null, random: options.random ?? NO_JITTER });
}

describe('the retry schedule', () => {
  test('5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h after attempts 1 to 7; none after the 8th', () => {
    expect(RETRY_DELAYS_MS).toEqual([5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]);
    expect(MAX_ATTEMPTS).toBe(8);
    const waits = [1, 2, 3, 4, 5, 6, 7].map((attempt) => after(attempt)! - NOW);
    expect(waits).toEqual([5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]);
    expect(after(8)).toBeNull();
    expect(after(8, { status: 429, retryAfterMs: MINUTE })).toBeNull();
    expect(after(9)).toBeNull();
  });

  test('the same whatever failed: no answer at all, or any status', () => {
    expect(after(2, { status: null })).toBe(NOW + 5 * MINUTE);
    expect(after(2, { status: 410 })).toBe(NOW + 5 * MINUTE);
    expect(after(2, { status: 302 })).toBe(NOW + 5 * MINUTE);
  });

  test('jitter stretches or shrinks each delay by at most 10 %', () => {
    expect(after(1, { random: () => 0 })).toBe(NOW + 4500);
    expect(after(4, { random: () => 0 })).toBe(NOW + 0.9 * 2 * HOUR);
    expect(after(4, { random: () => 0.999_999_999 })).toBe(NOW + 1.1 * 2 * HOUR);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 7 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (attempt, dice) => {
        const wait = after(attempt, { random: () => dice })! - NOW;
        const base = RETRY_DELAYS_MS[attempt - 1]!;
        expect(Number.isInteger(wait)).toBe(true);
        expect(wait).toBeGreaterThanOrEqual(Math.floor(0.9 * base));
        expect(wait).toBeLessThanOrEqual(Math.ceil(1.1 * base));
      }),
    );
  });

  test("the service's own jitter (from the CSPRNG) stays within those bounds and varies", () => {
    const waits = Array.from({ length: 200 }, () => nextAttemptAt({ attempt: 2, now: NOW, status: 500, retryAfterMs: null })! - NOW);
    for (const wait of waits) {
      expect(wait).toBeGreaterThanOrEqual(0.9 * 5 * 60_000);
      expect(wait).toBeLessThanOrEqual(1.1 * 5 * 60_000);
    }
    expect(new Set(waits).size).toBeGreaterThan(100);
  });

  test('a 429 or 503 with Retry-After waits at least that long, at most 24 h', () => {
    expect(after(1, { status: 429, retryAfterMs: 3 * HOUR })).toBe(NOW + 3 * HOUR);
    expect(after(1, { status: 503, retryAfterMs: 3 * HOUR })).toBe(NOW + 3 * HOUR);
    // Shorter than the schedule's own delay: the schedule's stands.
    expect(after(3, { status: 429, retryAfterMs: MINUTE })).toBe(NOW + 30 * MINUTE);
    expect(after(1, { status: 429, retryAfterMs: 0 })).toBe(NOW + 5 * SECOND);
    expect(after(1, { status: 503, retryAfterMs: 30 * 24 * HOUR })).toBe(NOW + 24 * HOUR);
    // Another status's Retry-After is not a request to slow down.
    expect(after(1, { status: 500, retryAfterMs: 3 * HOUR })).toBe(NOW + 5 * SECOND);
    expect(after(1, { status: 301, retryAfterMs: 3 * HOUR })).toBe(NOW + 5 * SECOND);
  });

  test('an attempt number that is not a whole number from 1 is a programming error', () => {
    expect(() => after(0)).toThrow(RangeError);
    expect(() => after(1.5)).toThrow(RangeError);
  });
});

describe('parseRetryAfter', () => {
  test('delta seconds', () => {
    expect(parseRetryAfter('120', NOW)).toBe(120 * SECOND);
    expect(parseRetryAfter(' 5 ', NOW)).toBe(5 * SECOND);
    expect(parseRetryAfter('0', NOW)).toBe(0);
    expect(parseRetryAfter('9'.repeat(400), NOW)).toBe(Number.MAX_SAFE_INTEGER);
  });

  test('the three forms of an HTTP-date, as the time left until it', () => {
    const now = Date.parse('1994-11-06T08:48:37Z');
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', now)).toBe(MINUTE);
    expect(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', now)).toBe(MINUTE);
    expect(parseRetryAfter('Sun Nov  6 08:49:37 1994', now)).toBe(MINUTE);
    expect(parseRetryAfter(new Date(NOW + 90 * SECOND).toUTCString(), NOW)).toBe(90 * SECOND);
  });

  test('a date already past is no wait', () => {
    expect(parseRetryAfter(new Date(NOW - HOUR).toUTCString(), NOW)).toBe(0);
  });

  test.each([undefined, '', 'soon', '1.5', '-5', '+5', '5s', '0x10', '2026-03-01T12:00:00Z', 'Sun, 32 Nov 1994 08:49:37 GMT', 'Sun, 06 Nov 1994 08:49:37 CET', 'hello 5'])(
    'null for %j',
    (value) => {
      expect(parseRetryAfter(value, NOW)).toBeNull();
    },
  );
});

describe("a destination's own retry policy", () => {
  const policy = (strategy: 'linear' | 'exponential', attempts: number, intervalMs: number, maxAgeMs: number | null = null) => ({ strategy, attempts, intervalMs, maxAgeMs });
  const next = (attempt: number, p: ReturnType<typeof policy>, startedAt = NOW) =>
    nextAttemptAt({ attempt, now: NOW, status: 500, retryAfterMs: null, random: NO_JITTER, policy: p, startedAt });

  test('linear: the interval each time, for its attempts and no more', () => {
    const p = policy('linear', 3, MINUTE);
    expect([1, 2].map((n) => next(n, p)! - NOW)).toEqual([MINUTE, MINUTE]);
    expect(next(3, p)).toBeNull();
  });

  test('exponential: doubling from the interval, each wait at most a day', () => {
    const p = policy('exponential', 50, 30 * SECOND);
    expect([1, 2, 3, 4].map((n) => next(n, p)! - NOW)).toEqual([30 * SECOND, MINUTE, 2 * MINUTE, 4 * MINUTE]);
    expect(next(40, p)! - NOW).toBe(24 * HOUR);
    expect(next(50, p)).toBeNull();
  });

  test('the time bound: no attempt starts later than max age after the series began', () => {
    const p = policy('linear', 50, 10 * MINUTE, HOUR);
    expect(next(1, p, NOW - 49 * MINUTE)).toBe(NOW + 10 * MINUTE);
    expect(next(1, p, NOW - 51 * MINUTE)).toBeNull();
  });

  test('a loop still ends it at once, and Retry-After still pushes it back', () => {
    const p = policy('linear', 10, MINUTE);
    expect(nextAttemptAt({ attempt: 1, now: NOW, status: 508, retryAfterMs: null, random: NO_JITTER, policy: p })).toBeNull();
    expect(nextAttemptAt({ attempt: 1, now: NOW, status: 429, retryAfterMs: HOUR, random: NO_JITTER, policy: p })).toBe(NOW + HOUR);
  });
});
