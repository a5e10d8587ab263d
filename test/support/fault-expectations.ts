import { expect } from 'vitest';
import type { FaultCycleResult } from './crash.js';

/**
 * What every fault test asks of a faultCycle (support/crash.ts): the fault was felt as 503s,
 * every answer was a 202 or a 503 with Retry-After and a JSON body, every 202 is stored
 * with its exact bytes, and after the fault nothing more was refused.
 */
export function expectNothingLost(result: FaultCycleResult): void {
  expect(result.refused).toBeGreaterThan(0);
  expect(result.badAnswers).toEqual([]);
  expect(result.failures).toEqual([]);
  expect(result.problems).toEqual([]);
  expect(result.lost).toBe(0);
  expect(result.corrupted).toBe(0);
  expect(result.bodiesChecked).toBe(result.acknowledged);
  expect(result.refusedAfterRecovery).toBe(0);
  expect(result.exit).toEqual({ code: 0, signal: null });
}

/** /readyz said 503 during the fault, and 200 again, with no traffic, once it ended. */
export function expectReadinessFollowedTheFault(result: FaultCycleResult): void {
  expect(result.readyzDuringFault[503]).toBeGreaterThan(0);
  expect(result.readyzStatuses[200]).toBe(1);
}
