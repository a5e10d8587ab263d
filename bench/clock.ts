/**
 * Milliseconds on the machine's monotonic clock (process.hrtime: CLOCK_MONOTONIC on Linux),
 * which every process of the machine reads alike: the receiver stamps arrivals with it and
 * the generator its 202s, so the two can be subtracted. performance.now() cannot: its
 * origin is each process's own start.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}
