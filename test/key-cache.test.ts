import { afterEach, describe, expect, test } from 'vitest';
import { INTEGRATION_SCOPES, issueApiKey } from '../src/domain/api-key.js';
import { newId, newIntegrationKey } from '../src/domain/ids.js';
import { KeyCache } from '../src/intake/key-cache.js';
import type { Store } from '../src/store/store.js';
import { freshStore, waitFor } from './helpers.js';
import { testDialect } from './support/databases.js';
import { eventually, seedKey } from './support/seed.js';

describe('KeyCache', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup() {
    const fresh = await freshStore();
    cleanups.push(() => fresh.cleanup());
    // The CLI in another process (or another node): its own connections to the same database.
    const cli = fresh.openAnother();
    const cache = new KeyCache(fresh.store);
    await cache.start();
    cleanups.push(() => cache.stop());
    return { store: fresh.store, cli, cache };
  }

  test('a key revoked by another process stops being returned within a second', async () => {
    const { store, cli, cache } = await setup();
    const seeded = await seedKey(store);
    expect(await cache.findKey(seeded.keyHash)).toMatchObject({ keyId: seeded.keyId, companyId: seeded.companyId });
    // Asked again: still there (now from memory).
    expect(await cache.findKey(seeded.keyHash)).toMatchObject({ keyId: seeded.keyId });

    expect(await cli.revokeApiKey(seeded.companyId, seeded.keyId, Date.now())).toBeDefined();
    const gone = await eventually(async () => (await cache.findKey(seeded.keyHash)) === undefined, 1000);
    expect(gone).toBe(true);
  });

  test('an integration disabled by another process is seen disabled within a second', async () => {
    const { store, cli, cache } = await setup();
    const seeded = await seedKey(store);
    expect(await cache.findIntegration(seeded.integrationKey)).toMatchObject({ id: seeded.integrationId, enabled: true });

    await cli.setIntegrationEnabled(seeded.companyId, seeded.integrationId, false, Date.now());
    const disabled = await eventually(async () => (await cache.findIntegration(seeded.integrationKey))?.enabled === false, 1000);
    expect(disabled).toBe(true);
  });

  test('a key created by another process after a miss is found within a second', async () => {
    const { store, cli, cache } = await setup();
    const seeded = await seedKey(store);
    const key = issueApiKey('development');
    expect(await cache.findKey(key.hash)).toBeUndefined();

    await cli.createApiKey(seeded.companyId, {
      id: newId('key'),
      integrationId: seeded.integrationId,
      scopes: [...INTEGRATION_SCOPES],
      prefix: key.prefix,
      hash: key.hash,
      createdAt: Date.now(),
      expiresAt: null,
    });
    const found = await eventually(async () => (await cache.findKey(key.hash)) !== undefined, 1000);
    expect(found).toBe(true);
  });

  test('unknown keys and integrations are undefined', async () => {
    const { cache } = await setup();
    expect(await cache.findKey(issueApiKey('development').hash)).toBeUndefined();
    expect(await cache.findIntegration(newIntegrationKey())).toBeUndefined();
  });
});

describe.runIf(testDialect() === 'postgres')('PostgreSQL change notifications', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A subscriber that counts calls, once its channel is up (the first call is the connect). */
  async function subscribed(store: Store) {
    let calls = 0;
    const unsubscribe = store.subscribeAuthChanges(() => calls++);
    cleanups.push(unsubscribe);
    await waitFor(async () => (calls > 0 ? true : undefined), 'the LISTEN connection');
    return { count: () => calls };
  }

  test('a key revoked through another connection wakes subscribers', async () => {
    const fresh = await freshStore();
    cleanups.push(() => fresh.cleanup());
    const seeded = await seedKey(fresh.store);
    const listener = await subscribed(fresh.store);
    const before = listener.count();

    await fresh.openAnother().revokeApiKey(seeded.companyId, seeded.keyId, Date.now());
    await waitFor(async () => (listener.count() > before ? true : undefined), 'a notification');
  });

  test('the channel comes back after its connection is killed, and says so', async () => {
    const fresh = await freshStore();
    cleanups.push(() => fresh.cleanup());
    const seeded = await seedKey(fresh.store);
    const listener = await subscribed(fresh.store);
    const before = listener.count();

    const killed = await fresh.query<{ done: boolean }>(
      `select pg_terminate_backend(pid) as done from pg_stat_activity
       where datname = current_database() and query like 'LISTEN%' and pid <> pg_backend_pid()`,
    );
    expect(killed.length).toBeGreaterThan(0);
    // Reconnecting calls the subscribers (a notification may have been missed meanwhile).
    await waitFor(async () => (listener.count() > before ? true : undefined), 'the reconnect');
    const afterReconnect = listener.count();
    await fresh.openAnother().setIntegrationEnabled(seeded.companyId, seeded.integrationId, false, Date.now());
    await waitFor(async () => (listener.count() > afterReconnect ? true : undefined), 'a notification after reconnecting');
  });
});
