import type { IntegrationRoute, KeyGrant, Store } from '../store/store.js';

/** How often the cache asks the database whether any key or integration changed. */
const POLL_INTERVAL_MS = 200;
/** Past this without a successful poll the cache cannot vouch for its entries and drops them. */
const MAX_STALENESS_MS = 800;
const MAX_ENTRIES = 50_000;

/**
 * Keys and integrations for the hot path, held in memory.
 *
 * Every change that can make an answer stale (revoke, rotate, disable, delete) adds a row
 * to `auth_changes` in the same transaction, whoever writes it: this server, another node
 * or the CLI. Where the store can push (PostgreSQL NOTIFY), the cache forgets everything
 * the moment the change commits. Either way it polls the newest id and forgets everything
 * when it moves, so a missed notification costs at most POLL_INTERVAL_MS plus one query,
 * well under a second.
 * A generation number keeps a lookup that started before a change from caching its answer.
 */
export class KeyCache {
  private keys = new Map<string, KeyGrant | null>();
  private integrations = new Map<string, IntegrationRoute>();
  private inFlight = new Map<string, Promise<unknown>>();
  private generation = 0;
  private latestChange = -1;
  private lastVerifiedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: () => void = () => {};
  /** Lookups answered from memory (hits) or from the store (misses), since start (exposed in /metrics). */
  readonly lookups = { keyHits: 0, keyMisses: 0, integrationHits: 0, integrationMisses: 0 };
  /** Times everything was forgotten, by why (exposed in /metrics). */
  readonly invalidations: Record<InvalidationReason, number> = { change: 0, local: 0, unverified: 0, full: 0 };

  constructor(
    private readonly store: Store,
    private readonly now: () => number = Date.now,
  ) {}

  /** Starts polling; the first poll runs before this resolves. */
  async start(): Promise<void> {
    this.unsubscribe = this.store.subscribeAuthChanges(() => this.invalidate('change'));
    await this.poll();
    this.timer = setInterval(() => void this.poll(), POLL_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    this.unsubscribe();
    clearInterval(this.timer);
  }

  /** The live key with this hash, or undefined. Revoked and deleted keys are never returned. */
  async findKey(keyHash: string): Promise<KeyGrant | undefined> {
    this.dropIfUnverified();
    const cached = this.keys.get(keyHash);
    if (cached !== undefined) {
      this.lookups.keyHits++;
      return cached ?? undefined;
    }
    this.lookups.keyMisses++;
    const found = await this.lookup(`k:${keyHash}`, () => this.store.findKeyByHash(keyHash), (grant) => {
      this.keys.set(keyHash, grant ?? null);
    });
    return found;
  }

  /** The integration this address names, or undefined when there is none. */
  async findIntegration(integrationKey: string): Promise<IntegrationRoute | undefined> {
    this.dropIfUnverified();
    const cached = this.integrations.get(integrationKey);
    if (cached !== undefined) {
      this.lookups.integrationHits++;
      return cached;
    }
    this.lookups.integrationMisses++;
    return this.lookup(`i:${integrationKey}`, () => this.store.findIntegrationByKey(integrationKey), (route) => {
      if (route) this.integrations.set(integrationKey, route);
    });
  }

  /** Forget everything now (by default: after a change this process made itself). */
  invalidate(reason: InvalidationReason = 'local'): void {
    this.invalidations[reason]++;
    this.generation++;
    this.keys.clear();
    this.integrations.clear();
    this.inFlight.clear();
  }

  private async lookup<T>(slot: string, load: () => Promise<T>, remember: (value: T) => void): Promise<T> {
    const pending = this.inFlight.get(slot) as Promise<T> | undefined;
    if (pending) return pending;
    const generation = this.generation;
    const promise = load().finally(() => {
      if (this.inFlight.get(slot) === promise) this.inFlight.delete(slot);
    });
    this.inFlight.set(slot, promise);
    const value = await promise;
    if (generation === this.generation) {
      if (this.keys.size + this.integrations.size >= MAX_ENTRIES) this.invalidate('full');
      remember(value);
    }
    return value;
  }

  private dropIfUnverified(): void {
    if (this.now() - this.lastVerifiedAt > MAX_STALENESS_MS && this.keys.size + this.integrations.size > 0) {
      this.invalidate('unverified');
    }
  }

  private async poll(): Promise<void> {
    try {
      const startedAt = this.now();
      const latest = await this.store.latestAuthChange();
      if (latest !== this.latestChange) {
        this.latestChange = latest;
        this.invalidate('change');
      }
      this.lastVerifiedAt = startedAt;
    } catch {
      // The database did not answer: entries age out through dropIfUnverified.
    }
  }
}

/**
 * Why the cache forgot everything: a change the database told of (notification or poll),
 * one this node made, polls that failed for too long, or the cache full.
 */
export type InvalidationReason = 'change' | 'local' | 'unverified' | 'full';
