import { isIPv6 } from 'node:net';
import { FailureWindows } from '../domain/failure-windows.js';

/** Refusals remembered at most (an address at an integration each); past it the oldest are forgotten. */
const MAX_REFUSALS_TRACKED = 100_000;

/**
 * The per-address limit on failed authentications (a missing or invalid API key) at the
 * webhook addresses. An address past it is refused before any key is looked up, so guessing
 * keys, or making the database look up made-up ones, costs the guesser a window per
 * `limit` tries. Requests that authenticate are never counted. In memory on each node.
 */
export class AuthFailureLimiter {
  private readonly windows: FailureWindows;
  /**
   * Per address and place (an integration), when the block whose first refusal there was
   * logged ends; in the order they were logged.
   */
  private readonly loggedRefusals = new Map<string, number>();
  /** Refusals left out of the request log: not their address's first at that place in its window. */
  unloggedRefusals = 0;

  constructor(
    /** Failures per window and address; 0 turns the limit off. */
    private readonly limit: number,
    windowMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.windows = new FailureWindows(windowMs, now);
  }

  /** Seconds until this address may authenticate again; 0 when it may now. */
  retryAfterSeconds(ip: string): number {
    if (this.limit === 0) return 0;
    const wait = this.windows.blockedFor(addressKey(ip), this.limit);
    return wait === 0 ? 0 : Math.max(1, Math.ceil(wait / 1000));
  }

  recordFailure(ip: string): void {
    if (this.limit > 0) this.windows.count(addressKey(ip));
  }

  /**
   * Whether this refusal of `ip` at `place` (429, auth_rate_limited) gets a request-log row:
   * the first of its address at that place in each window does, so the company sees that
   * the address was throttled and when; the others are only counted (unloggedRefusals).
   * A flood of refused requests would otherwise be a row each.
   */
  logsRefusal(ip: string, place: string): boolean {
    const now = this.now();
    const address = addressKey(ip);
    const key = `${address} ${place}`;
    const until = this.loggedRefusals.get(key);
    if (until !== undefined && now < until) {
      this.unloggedRefusals++;
      return false;
    }
    this.loggedRefusals.delete(key);
    this.loggedRefusals.set(key, now + this.windows.blockedFor(address, this.limit));
    for (const [oldest, ends] of this.loggedRefusals) {
      if (this.loggedRefusals.size <= MAX_REFUSALS_TRACKED && ends > now) break;
      this.loggedRefusals.delete(oldest);
    }
    return true;
  }
}

/**
 * Who failures count against: an IPv4 address itself, an IPv6 address by its /64, the
 * smallest network a subscriber is given (one host may use any of its 2^64 addresses).
 */
export function addressKey(ip: string): string {
  if (!isIPv6(ip.split('%', 1)[0]!)) return ip;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = ip.split('%', 1)[0]!.toLowerCase().split('::');
  // An embedded IPv4 address (::ffff:1.2.3.4, 64:ff9b::1.2.3.4) fills the last two groups.
  const groups = (part: string) => (part === '' ? [] : part.split(':').flatMap((group) => (group.includes('.') ? ['0', '0'] : [group])));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const full = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${full
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}
