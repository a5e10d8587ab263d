import autocannon from 'autocannon';

/** Where load goes: the same body and headers for the service and the baseline. */
export interface LoadTarget {
  name: string;
  url: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** One autocannon round against one target. Latencies in ms (autocannon's resolution: 1 ms). */
export interface ClosedLoopRound {
  target: string;
  round: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  p99_9: number;
  non2xx: number;
  errors: number;
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

/**
 * Each target as fast as it answers (closed loop: a connection sends its next request when
 * the previous one is answered). Rounds alternate between the targets, and which goes first
 * alternates too, so drift in the shared machine's load hits both alike. A warm-up round
 * per target (JIT, caches, database pages) is not counted.
 */
export async function runClosedLoop(
  targets: LoadTarget[],
  options: ClosedLoopOptions,
  hooks: ClosedLoopHooks = {},
): Promise<ClosedLoopRound[]> {
  for (const target of targets) {
    await hooks.beforeFire?.(target, 0);
    await fire(target, options.connections, options.warmupSeconds);
    await hooks.afterFire?.(target, 0, null);
  }
  const rounds: ClosedLoopRound[] = [];
  for (let round = 1; round <= options.rounds; round++) {
    const order = round % 2 === 1 ? targets : [...targets].reverse();
    for (const target of order) {
      await hooks.beforeFire?.(target, round);
      const result = await fire(target, options.connections, options.seconds);
      rounds.push({
        target: target.name,
        round,
        // Only answered 2xx count as throughput: a fast 503 is not work done.
        requestsPerSecond: Math.round(result['2xx'] / result.duration),
        p50: result.latency.p50,
        p99: result.latency.p99,
        p99_9: result.latency.p99_9,
        non2xx: result.non2xx,
        errors: result.errors,
      });
      process.stdout.write(`  closed loop round ${round} ${target.name}: ${rounds.at(-1)?.requestsPerSecond} req/s\n`);
      await hooks.afterFire?.(target, round, rounds.at(-1) ?? null);
    }
  }
  return rounds;
}

function fire(target: LoadTarget, connections: number, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: target.url,
    method: 'POST',
    headers: target.headers,
    body: target.body,
    connections,
    duration: seconds,
  });
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
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length % 2 === 1) return sorted[middle] ?? Number.NaN;
  return ((sorted[middle - 1] ?? Number.NaN) + (sorted[middle] ?? Number.NaN)) / 2;
}
