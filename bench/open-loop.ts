import { performance } from 'node:perf_hooks';
import { monotonicMs } from './clock.js';
import type { LoadTarget } from './closed-loop.js';
import { ConnectionPool } from './http-connections.js';

/**
 * The warm-up the bench's measured open loops send before what they measure (see
 * OpenLoopOptions.warmupSeconds).
 */
export const OPEN_LOOP_WARMUP_SECONDS = 2;

export interface OpenLoopOptions {
  ratePerSecond: number;
  seconds: number;
  /**
   * Connections the generator may hold open. A request due while all are busy waits in the
   * generator, and that wait counts in its latency, as it would for a real sender.
   */
  maxConnections: number;
  /** A request not answered this long after it got its connection counts as `timeout`. */
  timeoutMs: number;
  /**
   * Seconds sent at the same rate before `seconds`, measured apart (`warmup`), as wrk2 does
   * with its calibration: the generator starts as a fresh process, and while its code runs
   * cold it takes CPU from the two cores the server has. On a quiet machine at 5,000 a
   * second the service's first second had a p99 of 117-239 ms and the floor's 15-17,
   * against 6-13 ms for both in every later second, so the start alone decided a 20 s
   * run's p99; with the generator's code warm, bursts from new connections had none of it
   * (docs/performance-history.md, 2026-11-28, later). Default 0.
   */
  warmupSeconds?: number;
  /** Hears each whole answer of the measured seconds as it ends (its status and body), for checks of its own. */
  onAnswer?: (status: number, body: Buffer) => void;
}

/** Nearest-rank percentiles, in ms. */
export interface Percentiles {
  p50: number;
  p99: number;
  p99_9: number;
  max: number;
}

export interface OpenLoopResult {
  ratePerSecond: number;
  seconds: number;
  scheduled: number;
  /** Answers by status, plus `timeout` and `error CODE` (the connection failed). */
  statuses: Record<string, number>;
  /** Still waiting for a connection when the load stopped: never sent. */
  abandoned: number;
  /** Of answered requests, from the time each was due to the end of its answer. */
  latencyMs: Percentiles;
  /**
   * How late the generator itself started requests: when large, the latencies above
   * include the generator's own backlog, not only the service's.
   */
  generatorLagMs: Percentiles;
  /** The p99 latency of the requests due in each second of the load: where in the run the tail was. */
  p99BySecond: number[];
  /** The warm-up's requests (options.warmupSeconds), which the figures above leave out. */
  warmup: { scheduled: number; latencyMs: Percentiles };
}

export interface OpenLoopRun {
  /**
   * Resolves when the last request has been scheduled, with that moment on the machine's
   * monotonic clock (clock.ts), which a process other than the generator's reads alike.
   */
  loadStopped: Promise<number>;
  /** Resolves when every sent request is answered, failed or timed out. */
  finished: Promise<OpenLoopResult>;
}

/**
 * Sends requests at fixed times whatever the answers (open loop), the way independent
 * senders do. Latency runs from the time a request was due, not from when it went out, so
 * a slow answer that delays the next request still counts against the service (no
 * coordinated omission).
 */
export function startOpenLoop(target: LoadTarget, options: OpenLoopOptions): OpenLoopRun {
  const url = new URL(target.url);
  const pool = new ConnectionPool(url.hostname, Number(url.port), options.maxConnections, {
    method: 'POST',
    path: url.pathname + url.search,
    headers: target.headers,
    body: target.body,
  });
  const intervalMs = 1000 / options.ratePerSecond;
  const warmupTotal = Math.round(options.ratePerSecond * (options.warmupSeconds ?? 0));
  const total = warmupTotal + Math.round(options.ratePerSecond * options.seconds);
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  const warmupLatencies: number[] = [];
  const bySecond: number[][] = [];
  const lags: number[] = [];
  let outstanding = 0;
  let abandoned = 0;
  let stopped = false;
  let resolveFinished: () => void = () => {};
  const allAnswered = new Promise<void>((resolve) => (resolveFinished = resolve));

  const count = (key: string) => (statuses[key] = (statuses[key] ?? 0) + 1);
  const settle = () => {
    outstanding--;
    if (stopped && outstanding === 0) resolveFinished();
  };

  const send = (dueAt: number, measured: boolean) => {
    if (measured) lags.push(performance.now() - dueAt);
    outstanding++;
    let settled = false;
    let deadline: NodeJS.Timeout | undefined;
    const done = (key: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      if (key !== null && measured) count(key);
      settle();
    };
    // The sender's clock starts when its request has a connection, and covers connecting
    // (a full accept queue makes the kernel drop SYNs, retried after 1, 3, 7 s…).
    const onConnection = () => {
      deadline = setTimeout(() => {
        done('timeout');
        exchange.cancel('timeout');
      }, options.timeoutMs);
    };
    const exchange = pool.send(onConnection, (answer) => {
      if ('error' in answer) {
        done(answer.error);
        return;
      }
      const latency = performance.now() - dueAt;
      if (!measured) warmupLatencies.push(latency);
      else {
        latencies.push(latency);
        (bySecond[Math.floor((dueAt - measuredFrom) / 1000)] ??= []).push(latency);
        options.onAnswer?.(answer.status, answer.body);
      }
      done(String(answer.status));
    });
  };

  const start = performance.now();
  const measuredFrom = start + warmupTotal * intervalMs;
  const loadStopped = new Promise<number>((resolve) => {
    let next = 0;
    const tick = () => {
      const now = performance.now();
      for (; next < total && start + next * intervalMs <= now; next++) send(start + next * intervalMs, next >= warmupTotal);
      if (next < total) {
        // Timers fire with 1 ms granularity at best; requests due meanwhile go out together.
        setTimeout(tick, Math.max(1, Math.floor(start + next * intervalMs - now)));
        return;
      }
      stopped = true;
      const stoppedAt = monotonicMs();
      // Requests still waiting for a busy connection are never sent.
      abandoned = pool.abandonWaiting();
      outstanding -= abandoned;
      if (outstanding === 0) resolveFinished();
      resolve(stoppedAt);
    };
    tick();
  });

  const finished = allAnswered.then(() => {
    pool.destroy();
    return {
      ratePerSecond: Math.round(options.ratePerSecond),
      seconds: options.seconds,
      scheduled: total - warmupTotal,
      statuses,
      abandoned,
      latencyMs: percentiles(latencies),
      generatorLagMs: percentiles(lags),
      p99BySecond: Array.from(bySecond, (second) => (second === undefined ? Number.NaN : percentiles(second).p99)),
      warmup: { scheduled: warmupTotal, latencyMs: percentiles(warmupLatencies) },
    };
  });
  return { loadStopped, finished };
}

/** An open loop's latencies in a line: over the load, by second, and the warm-up's. */
export function describeOpenLoop({ latencyMs, p99BySecond, warmup }: OpenLoopResult): string {
  const warmupPart = warmup.scheduled > 0 ? `; the warm-up's p50 ${warmup.latencyMs.p50}, p99 ${warmup.latencyMs.p99} ms` : '';
  return `p50 ${latencyMs.p50}, p99 ${latencyMs.p99} ms; p99 by second ${p99BySecond.map(Math.round).join(' ')}${warmupPart}`;
}

export function percentiles(values: number[]): Percentiles {
  const sorted = Float64Array.from(values).sort();
  const at = (p: number) => round2(sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN);
  return { p50: at(50), p99: at(99), p99_9: at(99.9), max: at(100) };
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}
