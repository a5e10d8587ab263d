import { newId } from '../../src/domain/ids.js';
import { NO_RULES } from '../../src/domain/rules/rules.js';
import { MAX_DESTINATIONS } from '../../src/services/destinations.js';
import type { AttemptResult, ClaimedDelivery, ClaimOptions, DisabledDestination, NewDestination, Store } from '../../src/store/store.js';

/** A worker's round that only claims, as the store tests take one step at a time. */
export async function claimDeliveries(store: Store, now: number, options: ClaimOptions): Promise<ClaimedDelivery[]> {
  return (await store.exchangeDeliveries([], now, options, Number.MAX_SAFE_INTEGER)).claimed;
}

/** A worker's round that only writes results. */
export async function finishAttempts(store: Store, results: AttemptResult[], now: number, disableAfterMs: number): Promise<DisabledDestination[]> {
  return (await store.exchangeDeliveries(results, now, null, disableAfterMs)).disabled;
}

/**
 * A destination made in the store, as the CLI would (the API's checks are their own tests'):
 * every event of every integration, 10 in flight, 15 s timeout, unless `settings` say
 * otherwise. Returns its id.
 */
export async function addDestination(store: Store, companyId: string, settings: Partial<NewDestination> = {}): Promise<string> {
  const destination: NewDestination = {
    id: newId('dst'),
    name: 'Orders service',
    url: 'https://orders.example.com/hooks',
    integrationIds: null,
    eventPatterns: ['*'],
    headersSealed: null,
    headerNames: [],
    timeoutMs: 15_000,
    ratePerSecond: null,
    maxInFlight: 10,
    secretSealed: 'sealed-secret',
    rules: NO_RULES,
    createdAt: Date.now(),
    ...settings,
  };
  await store.createDestination(companyId, destination, {
    actor: { type: 'cli', id: 'test', ip: null },
    action: 'destination.create',
    targetType: 'destination',
    targetId: destination.id,
    at: destination.createdAt,
  }, MAX_DESTINATIONS);
  return destination.id;
}
