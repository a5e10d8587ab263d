import type { SignedRequests } from './signed-requests.js';
import { sleep } from './processes.js';
import type { Wrk, WrkResult } from './wrk.js';

/** Where load goes: the same body and headers for the service, the floor and the baseline. */
export interface LoadTarget {
  name: string;
  url: string;
  headers: Record<string, string>;
  body: Buffer;
  /** CPU time its server has used so far, in µs (machine-load.ts): the closed loop's rounds report it per request. */
  cpuMicroseconds?: () => number;
  /**
   * Seconds each of its server's threads has been busy so far, by thread (the service's
   * /metrics): the closed loop's rounds report each thread's share of the round.
   */
  threadBusySeconds?: () => Promise<Record<string, number>>;
  /**
   * Requests that must all differ (a provider's signed ones: intake takes a copy as a
   * replay), made anew for each run, `perRun` of them; `body` is then unused.
   */
  signed?: { requests: SignedRequests; perRun: number };
}

/** One wrk round against one target. Latencies in ms. */
export interface ClosedLoopRound {
  target: string;
  round: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  p99_9: number;
  non2xx: number;
  errors: number;
  /**
   * CPU time of the target's server per 2xx answer, in µs: unlike the rate, it does not
   * move with the speed of the shared machine, so runs of different days compare.
   */
  cpuPerRequestUs: number | null;
  /**
   * The share of the round each thread of the target's server was busy, 0 to 1, by thread
   * (the service: event_loop, and on SQLite sqlite_commit): which one, if any, limited it.
   */
  threadsBusy?: Record<string, number>;
}

export interface ClosedLoopOptions {
  rounds: number;
  seconds: number;
  connections: number;
  warmupSeconds: number;
}

/** What a run does around each target's load (round 0 is the target's warm-up). */
export interface ClosedLoopHooks {
  beforeFire?(target: LoadTarget, round: number): Promise<void>;
  /** After the load stopped; `result` is null for the warm-up. */
  afterFire?(target: LoadTarget, round: number, result: ClosedLoopRound | null): Promise<void>;
}

/** One target at one number of connections, in the curve over concurrency. */
export interface CurvePoint {
  target: string;
  connections: number;
  requestsPerSecond: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/**
 * Between two loads: the last one's connections close, its late commits and the WAL's
 * checkpoint finish, and the next target starts on a settled machine.
 */
const PAUSE_BETWEEN_RUNS_MS = 1_000;

/**
 * Each target as fast as it answers (closed loop: a connection sends its next request when
 * the previous one is answered). Rounds alternate between the targets, and which goes first
 * alternates too, so drift in the shared machine's load hits all alike. A warm-up round
 * per target (JIT, caches, database pages) is not counted.
 */
export async function runClosedLoop(
  wrk: Wrk,
  targets: LoadTarget[],
  options: ClosedLoopOptions,
  hooks: ClosedLoopHooks = {},
): Promise<ClosedLoopRound[]> {
  for (const target of targets) {
    await hooks.beforeFire?.(target, 0);
    await wrk.run(target, options.connections, options.warmupSeconds);
    await hooks.afterFire?.(target, 0, null);
    await sleep(PAUSE_BETWEEN_RUNS_MS);
  }
  const rounds: ClosedLoopRound[] = [];
  for (let round = 1; round <= options.rounds; round++) {
    for (const target of alternate(targets, round)) {
      await hooks.beforeFire?.(target, round);
      const busyBefore = await target.threadBusySeconds?.();
      const cpuBefore = target.cpuMicroseconds?.();
      const result = await wrk.run(target, options.connections, options.seconds);
      const cpuAfter = target.cpuMicroseconds?.();
      const busyAfter = await target.threadBusySeconds?.();
      const answered = result.answered - result.non2xx;
      const { p50, p99, p99_9 } = result.latencyMs;
      const measured: ClosedLoopRound = {
        target: target.name,
        round,
        requestsPerSecond: okPerSecond(result),
        p50,
        p99,
        p99_9,
        non2xx: result.non2xx,
        errors: result.errors,
        cpuPerRequestUs: cpuBefore === undefined || cpuAfter === undefined || answered === 0 ? null : Math.round((cpuAfter - cpuBefore) / answered),
        ...(busyBefore && busyAfter && { threadsBusy: sharesOf(busyBefore, busyAfter, result.seconds) }),
      };
      rounds.push(measured);
      const cpu = measured.cpuPerRequestUs === null ? '' : `, ${measured.cpuPerRequestUs} µs of CPU a request`;
      const busyShares = measured.threadsBusy && describeThreadsBusy(measured.threadsBusy);
      const busy = busyShares ? `, busy ${busyShares}` : '';
      process.stdout.write(`  closed loop round ${round} ${target.name}: ${measured.requestsPerSecond} req/s${cpu}${busy}\n`);
      await hooks.afterFire?.(target, round, measured);
      await sleep(PAUSE_BETWEEN_RUNS_MS);
    }
  }
  return rounds;
}

/**
 * Throughput and p99 at each number of connections: one round per target and level,
 * alternating which target goes first, so the curve shows where each one saturates and
 * what waiting costs past that point.
 */
export async function runConcurrencyCurve(
  wrk: Wrk,
  targets: LoadTarget[],
  connectionLevels: number[],
  seconds: number,
): Promise<CurvePoint[]> {
  const points: CurvePoint[] = [];
  for (const [index, connections] of connectionLevels.entries()) {
    for (const target of alternate(targets, index + 1)) {
      const result = await wrk.run(target, connections, seconds);
      const point: CurvePoint = {
        target: target.name,
        connections,
        requestsPerSecond: okPerSecond(result),
        p99: result.latencyMs.p99,
        non2xx: result.non2xx,
        errors: result.errors,
      };
      points.push(point);
      process.stdout.write(`  curve ${connections} connections ${target.name}: ${point.requestsPerSecond} req/s\n`);
      await sleep(PAUSE_BETWEEN_RUNS_MS);
    }
  }
  return points;
}

/** Each thread's busy seconds over the round as a share of it, to 0.01. */
function sharesOf(before: Record<string, number>, after: Record<string, number>, seconds: number): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after).map(([thread, busy]) => [thread, Math.round(((busy - (before[thread] ?? 0)) / seconds) * 100) / 100]),
  );
}

/** `event_loop 0.71, sqlite_commit 0.83`: the threads that did any work. */
export function describeThreadsBusy(shares: Record<string, number>): string {
  return Object.entries(shares)
    .filter(([, share]) => share > 0)
    .map(([thread, share]) => `${thread} ${share.toFixed(2)}`)
    .join(', ');
}

/** The targets in their order on odd turns, reversed on even ones. */
export function alternate<T>(targets: readonly T[], turn: number): readonly T[] {
  return turn % 2 === 1 ? targets : [...targets].reverse();
}

/** Only answered 2xx count as throughput: a fast 503 is not work done. */
function okPerSecond(result: WrkResult): number {
  return Math.round((result.answered - result.non2xx) / result.seconds);
}

/** One target's rounds in one line: medians of the rates and latencies, sums of the failures. */
export function summarize(rounds: ClosedLoopRound[], target: string): Omit<ClosedLoopRound, 'target' | 'round'> {
  const mine = rounds.filter((round) => round.target === target);
  const medianOf = (key: 'requestsPerSecond' | 'p50' | 'p99' | 'p99_9') => median(mine.map((round) => round[key]));
  return {
    requestsPerSecond: medianOf('requestsPerSecond'),
    p50: medianOf('p50'),
    p99: medianOf('p99'),
    p99_9: medianOf('p99_9'),
    non2xx: mine.reduce((sum, round) => sum + round.non2xx, 0),
    errors: mine.reduce((sum, round) => sum + round.errors, 0),
    cpuPerRequestUs: mine.some((round) => round.cpuPerRequestUs === null) ? null : median(mine.map((round) => round.cpuPerRequestUs ?? 0)),
    ...(mine.every((round) => round.threadsBusy) && { threadsBusy: medianShares(mine.map((round) => round.threadsBusy!)) }),
  };
}

/** Each thread's median share over the rounds. */
function medianShares(rounds: Array<Record<string, number>>): Record<string, number> {
  const threads = [...new Set(rounds.flatMap((shares) => Object.keys(shares)))];
  return Object.fromEntries(threads.map((thread) => [thread, median(rounds.map((shares) => shares[thread] ?? 0))]));
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length % 2 === 1) return sorted[middle] ?? Number.NaN;
  return ((sorted[middle - 1] ?? Number.NaN) + (sorted[middle] ?? Number.NaN)) / 2;
}
