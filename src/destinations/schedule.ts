import { randomInt } from 'node:crypto';
import type { RetryPolicy } from '../domain/rules/rules.js';

/**
 * When a failed delivery is tried again: a fixed schedule like the field's (Svix, Hookdeck),
 * stretched or shrunk by jitter so that the deliveries a receiver's outage failed together
 * do not all come back in the same second, and pushed back by the receiver's own
 * `Retry-After` when it asks to slow down. Pure: the caller gives the clock and the dice.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** The wait after failed attempt n (1-based) is `RETRY_DELAYS_MS[n - 1]`, before jitter. */
export const RETRY_DELAYS_MS: readonly number[] = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];

/** Attempts in one series: the first, then one per delay. */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** The most a `Retry-After` may push an attempt back: a receiver cannot park deliveries for ever. */
const MAX_RETRY_AFTER_MS = 24 * HOUR;

const JITTER = 0.1;

const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day';
const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '\\d{2}:\\d{2}:\\d{2}';

/**
 * The three forms of an HTTP-date (RFC 9110, 5.6.7), checked before Date.parse, which
 * reads almost anything ("1" is a date in 2001 to it). asctime's has no zone; it is GMT.
 */
const HTTP_DATES: ReadonlyArray<[RegExp, string]> = [
  [new RegExp(`^${DAY}, \\d{2} ${MONTH} \\d{4} ${TIME} GMT$`), ''],
  [new RegExp(`^${LONG_DAY}, \\d{2}-${MONTH}-\\d{2} ${TIME} GMT$`), ''],
  [new RegExp(`^${DAY} ${MONTH} [ \\d]\\d ${TIME} \\d{4}$`), ' GMT'],
];

/**
 * A `Retry-After` header as the milliseconds to wait from `now`: delta seconds or an
 * HTTP-date (a date already past is 0). Null when absent or unreadable.
 */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * SECOND, Number.MAX_SAFE_INTEGER);
  const form = HTTP_DATES.find(([pattern]) => pattern.test(text));
  if (form === undefined) return null;
  const at = Date.parse(text + form[1]);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** What `nextAttemptAt` needs to know of the attempt just made. */
export interface FinishedAttempt {
  /** The number (1-based) of the attempt just made. */
  attempt: number;
  now: number;
  /** Its HTTP status; null when there was no answer. */
  status: number | null;
  /** Its answer's `Retry-After`, parsed (`parseRetryAfter`). */
  retryAfterMs: number | null;
  /** Uniform in [0, 1); the jitter factor is 0.9 + 0.2 × random(). */
  random?: () => number;
  /** The destination's own schedule (its rules); absent or null: the standard one. */
  policy?: RetryPolicy | null;
  /** When the series began (the webhook's arrival, or the replay's start): a policy's time bound counts from it. */
  startedAt?: number;
}

/** The longest one wait of an exponential policy may grow to. */
const MAX_POLICY_WAIT_MS = 24 * HOUR;

/**
 * 508 Loop Detected (RFC 5842): what intake's own webhook addresses answer a delivery of
 * theirs that came back (src/domain/delivery-loop.ts). A loop answers the same every
 * time, and each retry would go round it again: the delivery fails at once.
 */
export const LOOP_DETECTED = 508;

/** When the next attempt after a failed one is due (ms since the epoch); null after the last, or after a loop. */
export function nextAttemptAt({ attempt, now, status, retryAfterMs, random = uniform, policy = null, startedAt = now }: FinishedAttempt): number | null {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be a whole number from 1, not ${attempt}`);
  if (status === LOOP_DETECTED) return null;
  const base = policy === null ? RETRY_DELAYS_MS[attempt - 1] : policyDelay(policy, attempt);
  if (base === undefined) return null;
  let delay = base * (1 - JITTER + 2 * JITTER * random());
  // On a 3xx, Retry-After says when to follow the redirect, which intake never does.
  if ((status === 429 || status === 503) && retryAfterMs !== null) delay = Math.max(delay, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
  const at = now + Math.round(delay);
  // A policy's time bound: no attempt starts past it, so the dead letter comes when it says.
  if (policy?.maxAgeMs != null && at - startedAt > policy.maxAgeMs) return null;
  return at;
}

/**
 * The wait after failed attempt n under a destination's own policy: the interval each time
 * (linear), or doubling from it (exponential) up to a day; undefined after its last attempt.
 */
function policyDelay(policy: RetryPolicy, attempt: number): number | undefined {
  if (attempt >= policy.attempts) return undefined;
  return policy.strategy === 'linear' ? policy.intervalMs : Math.min(policy.intervalMs * 2 ** (attempt - 1), MAX_POLICY_WAIT_MS);
}

/** Uniform in [0, 1) from the CSPRNG, as every random number of the service is (test/key-material.test.ts). */
function uniform(): number {
  return randomInt(2 ** 47) / 2 ** 47;
}
