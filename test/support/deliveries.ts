import type { AttemptResult, ClaimedDelivery, ClaimOptions, DisabledDestination, Store } from '../../src/store/store.js';

/** A worker's round that only claims, as the store tests take one step at a time. */
export async function claimDeliveries(store: Store, now: number, options: ClaimOptions): Promise<ClaimedDelivery[]> {
  return (await store.exchangeDeliveries([], now, options, Number.MAX_SAFE_INTEGER)).claimed;
}

/** A worker's round that only writes results. */
export async function finishAttempts(store: Store, results: AttemptResult[], now: number, disableAfterMs: number): Promise<DisabledDestination[]> {
  return (await store.exchangeDeliveries(results, now, null, disableAfterMs)).disabled;
}
