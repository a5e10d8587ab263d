import { isIPv6 } from 'node:net';
import { FailureWindows } from '../domain/failure-windows.js';

/**
 * The per-address limit on failed authentications (a missing or invalid API key) at the
 * webhook addresses. An address past it is refused before any key is looked up, so guessing
 * keys, or making the database look up made-up ones, costs the guesser a window per
 * `limit` tries. Requests that authenticate are never counted. In memory on each node.
 */
export class AuthFailureLimiter {
  private readonly windows: FailureWindows;

  constructor(
    /** Failures per window and address; 0 turns the limit off. */
    private readonly limit: number,
    windowMs: number,
    now: () => number = Date.now,
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
