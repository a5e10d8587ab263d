/**
 * Milliseconds on the machine's monotonic clock (process.hrtime: CLOCK_MONOTONIC on Linux),
 * which every process of the machine reads alike: the open loop's generator, in a process of
 * its own, stamps the end of its load with it and the bench times the recovery from there.
 * performance.now() cannot: its origin is each process's own start.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}
