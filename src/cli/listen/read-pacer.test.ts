import { describe, expect, test } from 'vitest';
import { ReadPacer, type PacerClock } from './read-pacer.js';

/** A clock that moves only when the pacer sleeps or the test says so. */
function fakeClock(): PacerClock & { advance(ms: number): void; slept: number[] } {
  let now = 0;
  const slept: number[] = [];
  return {
    slept,
    now: () => now,
    advance: (ms) => (now += ms),
    sleep: async (ms) => {
      slept.push(ms);
      now += ms;
    },
  };
}

const signal = new AbortController().signal;

describe('ReadPacer', () => {
  test('a burst of reads goes at once, the next waits for its share of a second', async () => {
    const clock = fakeClock();
    const pacer = new ReadPacer(10, 20, clock);
    for (let i = 0; i < 20; i++) await pacer.take(signal);
    expect(clock.slept).toEqual([]);
    await pacer.take(signal);
    expect(clock.slept).toEqual([100]);
  });

  test('reads back to back for a minute stay within the rate (plus the burst)', async () => {
    const clock = fakeClock();
    const pacer = new ReadPacer(10, 20, clock);
    let reads = 0;
    // Bounded, so that a pacer that never waits fails here instead of spinning.
    while (clock.now() < 60_000 && reads < 5_000) {
      await pacer.take(signal);
      reads++;
    }
    // 20 at once, then 10 a second: well under the API's 1,200 a minute for one key.
    expect(reads).toBeGreaterThanOrEqual(619);
    expect(reads).toBeLessThanOrEqual(621);
  });

  test('reads slower than the rate never wait', async () => {
    const clock = fakeClock();
    const pacer = new ReadPacer(10, 20, clock);
    for (let i = 0; i < 500; i++) {
      await pacer.take(signal);
      clock.advance(100);
    }
    expect(clock.slept).toEqual([]);
  });

  test('an idle spell refills the burst, no more', async () => {
    const clock = fakeClock();
    const pacer = new ReadPacer(10, 20, clock);
    for (let i = 0; i < 20; i++) await pacer.take(signal);
    clock.advance(60_000);
    for (let i = 0; i < 20; i++) await pacer.take(signal);
    expect(clock.slept).toEqual([]);
    await pacer.take(signal);
    expect(clock.slept).toEqual([100]);
  });
});
