import { FailureWindows } from '../domain/failure-windows.js';
import { decoyPasswordHash, hashPassword, verifyPassword } from '../domain/password.js';
import { AppError } from '../errors.js';
import { addressKey } from '../intake/auth-failures.js';

/** Failed sign-ins allowed per window, per account and per address; then 429 until the window ends. */
const FAILURE_WINDOW_MS = 15 * 60 * 1000;
const FAILURES_PER_ACCOUNT = 5;
const FAILURES_PER_ADDRESS = 20;

export interface PasswordWorkLimits {
  /** Password hashes computed at once (scrypt takes 128 MiB at the default cost, and a thread of libuv's pool of four, each). */
  running: number;
  /** Waiting for a turn; past it, 503 at once. */
  queued: number;
  /** Running or waiting for one address (IPv6: its /64); past it, 429 at once. */
  perAddress: number;
}

const DEFAULT_LIMITS: PasswordWorkLimits = { running: 2, queued: 8, perAddress: 2 };

/** A reserved sign-in attempt: it counts as a failure unless it is given back. */
export interface Attempt {
  /** The attempt did not fail (it succeeded, or never got to check anything): it stops counting. */
  giveBack(): void;
}

/**
 * What stands between a flood of sign-ins and the password hashing: attempts are counted
 * before the slow work (so 60 parallel guesses at one account get 5 checks, not 60), and
 * the hashing itself is bounded: a few at once overall, a couple per address, a short queue,
 * and a refusal at once past it, so a flood costs its sender 429s and a real user is never
 * stuck behind it. In memory on each node, like the other limits. All password work of the
 * node goes through it, at the one configured cost (INTAKE_PASSWORD_HASH_COST).
 */
export class SignInGuard {
  private readonly failures: FailureWindows;
  private running = 0;
  private readonly queue: Array<() => void> = [];
  private readonly perAddress = new Map<string, number>();
  /** Checked when there is no account: of the configured cost, so it takes what checking a hash made now does. */
  private readonly decoy: string;

  constructor(
    /** scrypt's log2 N for new hashes and the decoy. */
    private readonly hashCost: number,
    private readonly limits: PasswordWorkLimits = DEFAULT_LIMITS,
    now: () => number = Date.now,
  ) {
    this.failures = new FailureWindows(FAILURE_WINDOW_MS, now);
    this.decoy = decoyPasswordHash(hashCost);
  }

  /**
   * Counts an attempt at `account` from `ip` now, before anything is checked; 429 (counting
   * nothing) when either is already at its limit.
   */
  reserve(account: string, ip: string): Attempt {
    const keys = [`account:${account}`, `ip:${addressKey(ip)}`];
    const wait = Math.max(
      this.failures.blockedFor(keys[0]!, FAILURES_PER_ACCOUNT),
      this.failures.blockedFor(keys[1]!, FAILURES_PER_ADDRESS),
    );
    if (wait > 0) {
      throw new AppError('rate_limited', 'Too many failed sign-ins; wait and try again.', { retryAfterSeconds: Math.ceil(wait / 1000) });
    }
    for (const key of keys) this.failures.count(key);
    let given = false;
    return {
      giveBack: () => {
        if (given) return;
        given = true;
        for (const key of keys) this.failures.uncount(key);
      },
    };
  }

  /**
   * Checks a password for an attempt at `account` from `ip`: the attempt is counted first,
   * then the stored hash is found (undefined when there is no such account: the decoy is
   * checked instead, so that both failures take the same time) and the password hashed
   * within the bounds. Undefined when the password is wrong (the attempt stays counted);
   * else the attempt, still counted, for the caller to give back once nothing else it
   * checks (a second factor) has failed. An attempt refused before anything was checked
   * (the hashing busy, the store away) counts for nothing.
   */
  async checkPassword(account: string, ip: string, password: string, storedHash: () => Promise<string | undefined>): Promise<Attempt | undefined> {
    const attempt = this.reserve(account, ip);
    let valid: boolean;
    try {
      const hash = (await storedHash()) ?? this.decoy;
      valid = await this.hashing(ip, () => verifyPassword(password, hash));
    } catch (error) {
      attempt.giveBack();
      throw error;
    }
    return valid ? attempt : undefined;
  }

  /** The hash of a new password for a request from `ip`, at the configured cost, within the bounds. */
  newHash(ip: string, password: string): Promise<string> {
    return this.hashing(ip, () => hashPassword(password, this.hashCost));
  }

  /**
   * Runs password hashing for a request from `ip` within the bounds: at once when a slot is
   * free, after a short wait in line, or not at all (429 for an address with its share in
   * use, 503 when the line is full), so no request waits behind a flood.
   */
  private async hashing<T>(ip: string, work: () => Promise<T>): Promise<T> {
    const address = addressKey(ip);
    const mine = this.perAddress.get(address) ?? 0;
    if (mine >= this.limits.perAddress) {
      throw new AppError('rate_limited', 'This address has sign-ins being checked already; retry in a moment.', { retryAfterSeconds: 1 });
    }
    if (this.running >= this.limits.running && this.queue.length >= this.limits.queued) {
      throw new AppError('service_unavailable', 'Too many passwords are being checked right now; retry in a moment.', {
        retryAfterSeconds: 1,
      });
    }
    this.perAddress.set(address, mine + 1);
    try {
      if (this.running >= this.limits.running) await new Promise<void>((turn) => this.queue.push(turn));
      else this.running++;
      try {
        return await work();
      } finally {
        // The slot passes to the next in line, or is freed.
        const next = this.queue.shift();
        if (next) next();
        else this.running--;
      }
    } finally {
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left === 0) this.perAddress.delete(address);
      else this.perAddress.set(address, left);
    }
  }
}
