import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { INTEGRATION_SCOPES, MANAGEMENT_SCOPES, issueApiKey, type Scope } from '../src/domain/api-key.js';
import { newId, newIntegrationKey, newWebhookUuid } from '../src/domain/ids.js';
import {
  IDEMPOTENCY_WINDOW_MS,
  type Integration,
  type NewApiKey,
  type PendingWebhook,
  type RequestLogEntry,
  type Store,
} from '../src/store/store.js';
import { freshDatabase, testDialect } from './support/databases.js';
import { pendingLog } from './support/webhooks.js';
import { MIGRATION_NAMES } from '../src/store/migrations/index.js';

/**
 * The store's suite runs once per database, as Kysely runs its suite once per dialect: the
 * `sqlite` and `postgres` projects of vitest.config.ts each run this file on their own.
 */
interface StoreHarness {
  store: Store;
  /** Another process (a node, the CLI) on the same database. */
  openAnother(): Store;
  cleanup(): Promise<void>;
}

interface StoreFactory {
  name: string;
  /** A migrated store on a database of its own. */
  fresh(): Promise<StoreHarness>;
  /** A store on a brand-new database, before any migration. */
  empty(): Promise<StoreHarness>;
}

const STORES: StoreFactory[] = [
  {
    name: testDialect(),
    fresh: () => freshDatabase(),
    empty: () => freshDatabase({ migrate: false }),
  },
];

const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

interface Tenant {
  companyId: string;
  integration: Integration;
  keyId: string;
  keyHash: string;
}

function apiKeyFor(integrationId: string | null, createdAt: number, scopes: Scope[] = [...INTEGRATION_SCOPES]) {
  const issued = issueApiKey('development');
  const key: NewApiKey = {
    id: newId('key'),
    integrationId,
    scopes,
    prefix: issued.prefix,
    hash: issued.hash,
    createdAt,
    expiresAt: null,
  };
  return key;
}

async function createCompany(store: Store, name = 'Acme'): Promise<string> {
  const id = newId('cmp');
  await store.createCompany({ id, name, retentionDays: 30, createdAt: T0 });
  return id;
}

async function createIntegration(
  store: Store,
  companyId: string,
  options: { rateLimitPerMinute?: number | null; bodyLimitBytes?: number } = {},
): Promise<Tenant> {
  const integration: Integration = {
    id: newId('int'),
    companyId,
    integrationKey: newIntegrationKey(),
    name: 'Billing',
    description: 'invoices',
    enabled: true,
    bodyLimitBytes: options.bodyLimitBytes ?? 1024 * 1024,
    rateLimitPerMinute: options.rateLimitPerMinute ?? null,
    createdAt: T0,
    updatedAt: T0,
    source: { type: 'api_key', config: {} },
    redaction: null,
    retentionDays: null,
  };
  const key = apiKeyFor(integration.id, T0);
  await store.createIntegration(companyId, integration, key);
  return { companyId, integration, keyId: key.id, keyHash: key.hash };
}

async function seedTenant(store: Store, name = 'Acme'): Promise<Tenant> {
  return createIntegration(store, await createCompany(store, name));
}

function logEntry(tenant: Tenant, overrides: Partial<RequestLogEntry> = {}): RequestLogEntry {
  return {
    id: newId('req'),
    companyId: tenant.companyId,
    integrationId: tenant.integration.id,
    receivedAt: T0,
    method: 'POST',
    status: 401,
    errorCode: 'invalid_api_key',
    keyId: null,
    ip: '203.0.113.9',
    userAgent: 'curl/8.5.0',
    sizeBytes: 12,
    durationMs: 0.5,
    webhookUuid: null,
    ...overrides,
  };
}

function pending(
  tenant: Tenant,
  options: { uuid?: string; event?: string; receivedAt?: number; body?: string | Buffer; idempotencyKey?: string | null } = {},
): PendingWebhook {
  const event = options.event ?? 'invoice.paid';
  const rawBody = Buffer.isBuffer(options.body)
    ? options.body
    : Buffer.from(options.body ?? JSON.stringify({ event, data: { n: 1 } }));
  const receivedAt = options.receivedAt ?? T0;
  return {
    uuid: options.uuid ?? newWebhookUuid(),
    companyId: tenant.companyId,
    integrationId: tenant.integration.id,
    keyId: tenant.keyId,
    event,
    receivedAt,
    rawBody,
    bodySha256: createHash('sha256').update(rawBody).digest('hex'),
    headers: JSON.stringify({ 'content-type': 'application/json', 'user-agent': 'sender/1.0' }),
    sourceIp: '198.51.100.4',
    idempotencyKey: options.idempotencyKey ?? null,
    log: pendingLog(logEntry(tenant, { receivedAt, keyId: tenant.keyId })),
  };
}

async function allWebhooks(store: Store, tenant: Tenant) {
  return store.listWebhooks(tenant.companyId, tenant.integration.id, { limit: 1000 });
}

describe.each(STORES)('$name store', (factory) => {
  let harness: StoreHarness;
  let store: Store;

  beforeEach(async () => {
    harness = await factory.fresh();
    store = harness.store;
  });
  afterEach(async () => {
    await harness.cleanup();
  });

  describe('migrations', () => {
    test('a new database gets every migration once, then nothing', async () => {
      const empty = await factory.empty();
      try {
        expect(await empty.store.migrate()).toEqual(MIGRATION_NAMES);
        expect(await empty.store.migrate()).toEqual([]);
        await empty.store.ping();
      } finally {
        await empty.cleanup();
      }
    });

    test('a migrated database has nothing left to apply', async () => {
      expect(await store.migrate()).toEqual([]);
    });
  });

  describe('companies and users', () => {
    test('a company reads back as created; an unknown id is undefined', async () => {
      const id = await createCompany(store, 'Acme Inc');
      expect(await store.getCompany(id)).toEqual({ id, name: 'Acme Inc', retentionDays: 30, requireTwoFactor: false, createdAt: T0 });
      expect(await store.getCompany(newId('cmp'))).toBeUndefined();
    });

    test('addUser creates a user once; the same email again returns the same id', async () => {
      const companyId = await createCompany(store);
      expect(await store.countUsers()).toBe(0);
      const first = { id: newId('usr'), email: 'ada@example.com', passwordHash: 'scrypt$x', createdAt: T0 };
      expect(await store.addUser(companyId, first, 'owner')).toEqual({
        id: first.id,
        email: 'ada@example.com',
        created: true,
      });
      const again = { ...first, id: newId('usr'), passwordHash: 'scrypt$y' };
      expect(await store.addUser(companyId, again, 'owner')).toEqual({
        id: first.id,
        email: 'ada@example.com',
        created: false,
      });
      const otherCompany = await createCompany(store, 'Other');
      const elsewhere = await store.addUser(otherCompany, { ...first, id: newId('usr') }, 'viewer');
      expect(elsewhere).toEqual({ id: first.id, email: 'ada@example.com', created: false });
      expect(await store.countUsers()).toBe(1);
    });

    test('addUser again changes the role, but never demotes the last owner', async () => {
      const companyId = await createCompany(store);
      const ada = { id: newId('usr'), email: 'ada@example.com', passwordHash: 'scrypt$x', createdAt: T0 };
      const bob = { id: newId('usr'), email: 'bob@example.com', passwordHash: 'scrypt$x', createdAt: T0 };
      await store.addUser(companyId, ada, 'owner');
      await expect(store.addUser(companyId, ada, 'admin')).rejects.toMatchObject({ code: 'conflict' });
      await store.addUser(companyId, bob, 'owner');
      await store.addUser(companyId, ada, 'admin');
      expect((await store.getMember(companyId, ada.id))?.role).toBe('admin');
      await expect(store.addUser(companyId, bob, 'viewer')).rejects.toMatchObject({ code: 'conflict' });
    });
  });

  describe('integrations', () => {
    test('findIntegrationByKey returns the route of an integration', async () => {
      const companyId = await createCompany(store);
      const tenant = await createIntegration(store, companyId, { rateLimitPerMinute: 120, bodyLimitBytes: 4096 });
      expect(await store.findIntegrationByKey(tenant.integration.integrationKey)).toEqual({
        id: tenant.integration.id,
        companyId,
        enabled: true,
        bodyLimitBytes: 4096,
        rateLimitPerMinute: 120,
        source: null,
        redaction: null,
      });
      expect(await store.findIntegrationByKey(newIntegrationKey())).toBeUndefined();
    });

    test('getIntegration is scoped by company: another company gets undefined', async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      expect(await store.getIntegration(tenant.companyId, tenant.integration.id)).toEqual(tenant.integration);
      expect(await store.getIntegration(other.companyId, tenant.integration.id)).toBeUndefined();
      expect(await store.getIntegration(tenant.companyId, other.integration.id)).toBeUndefined();
      expect(await store.getIntegration(tenant.companyId, newId('int'))).toBeUndefined();
    });

    test('companyOfIntegration and companyOfKey name the owner', async () => {
      const tenant = await seedTenant(store);
      expect(await store.companyOfIntegration(tenant.integration.id)).toBe(tenant.companyId);
      expect(await store.companyOfKey(tenant.keyId)).toBe(tenant.companyId);
      expect(await store.companyOfIntegration(newId('int'))).toBeUndefined();
      expect(await store.companyOfKey(newId('key'))).toBeUndefined();
    });

    test('setIntegrationEnabled changes the route; another company cannot', async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      expect(await store.setIntegrationEnabled(other.companyId, tenant.integration.id, false, T0 + 1)).toBe(false);
      expect((await store.findIntegrationByKey(tenant.integration.integrationKey))?.enabled).toBe(true);

      expect(await store.setIntegrationEnabled(tenant.companyId, tenant.integration.id, false, T0 + 2)).toBe(true);
      expect((await store.findIntegrationByKey(tenant.integration.integrationKey))?.enabled).toBe(false);
      const stored = await store.getIntegration(tenant.companyId, tenant.integration.id);
      expect(stored).toMatchObject({ enabled: false, updatedAt: T0 + 2 });
    });
  });

  describe('API keys', () => {
    test('findKeyByHash returns the grant of a live key', async () => {
      const tenant = await seedTenant(store);
      expect(await store.findKeyByHash(tenant.keyHash)).toEqual({
        keyId: tenant.keyId,
        keyHash: tenant.keyHash,
        companyId: tenant.companyId,
        integrationId: tenant.integration.id,
        scopes: [...INTEGRATION_SCOPES],
        expiresAt: null,
      });
      expect(await store.findKeyByHash(issueApiKey('development').hash)).toBeUndefined();
    });

    test('a management key has no integration and its own scopes', async () => {
      const companyId = await createCompany(store);
      const key = apiKeyFor(null, T0, [...MANAGEMENT_SCOPES]);
      await store.createApiKey(companyId, key);
      expect(await store.findKeyByHash(key.hash)).toMatchObject({
        keyId: key.id,
        companyId,
        integrationId: null,
        scopes: [...MANAGEMENT_SCOPES],
      });
    });

    test('a revoked key is not found; revoking again returns the first revocation time', async () => {
      const tenant = await seedTenant(store);
      expect(await store.revokeApiKey(tenant.companyId, tenant.keyId, T0 + 1000)).toBe(T0 + 1000);
      expect(await store.findKeyByHash(tenant.keyHash)).toBeUndefined();
      expect(await store.revokeApiKey(tenant.companyId, tenant.keyId, T0 + 5000)).toBe(T0 + 1000);
      const [record] = await store.listApiKeys(tenant.companyId, tenant.integration.id);
      expect(record).toMatchObject({ id: tenant.keyId, revokedAt: T0 + 1000 });
    });

    test("another company cannot revoke a key, and does not learn it exists", async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      expect(await store.revokeApiKey(other.companyId, tenant.keyId, T0 + 1)).toBeUndefined();
      expect(await store.revokeApiKey(tenant.companyId, newId('key'), T0 + 1)).toBeUndefined();
      expect(await store.findKeyByHash(tenant.keyHash)).toBeDefined();
    });

    test('listApiKeys is scoped by company and shows prefix, never the hash', async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      const keys = await store.listApiKeys(tenant.companyId, tenant.integration.id);
      expect(keys).toHaveLength(1);
      expect(keys[0]).toMatchObject({ id: tenant.keyId, companyId: tenant.companyId, prefix: expect.stringMatching(/^whk_dev_/) });
      expect(JSON.stringify(keys)).not.toContain(tenant.keyHash);
      expect(await store.listApiKeys(other.companyId, tenant.integration.id)).toEqual([]);
    });

    test('rotation sets expires_at on the previous keys, not on the new one', async () => {
      const tenant = await seedTenant(store);
      const second = apiKeyFor(tenant.integration.id, T0 + 10);
      await store.createApiKey(tenant.companyId, second);
      const rotated = apiKeyFor(tenant.integration.id, T0 + 1000);
      const graceEnd = T0 + 1000 + 86_400_000;
      await store.rotateIntegrationKey(tenant.companyId, tenant.integration.id, rotated, graceEnd);

      const byId = new Map((await store.listApiKeys(tenant.companyId, tenant.integration.id)).map((k) => [k.id, k]));
      expect(byId.size).toBe(3);
      expect(byId.get(tenant.keyId)?.expiresAt).toBe(graceEnd);
      expect(byId.get(second.id)?.expiresAt).toBe(graceEnd);
      expect(byId.get(rotated.id)?.expiresAt).toBeNull();
      // The previous key still authenticates until the grace period ends (the caller checks expiresAt).
      expect((await store.findKeyByHash(tenant.keyHash))?.expiresAt).toBe(graceEnd);
      expect((await store.findKeyByHash(rotated.hash))?.expiresAt).toBeNull();
    });

    test('a second rotation never extends an earlier expiry, nor touches revoked keys', async () => {
      const tenant = await seedTenant(store);
      const revoked = apiKeyFor(tenant.integration.id, T0 + 1);
      await store.createApiKey(tenant.companyId, revoked);
      await store.revokeApiKey(tenant.companyId, revoked.id, T0 + 2);

      const first = apiKeyFor(tenant.integration.id, T0 + 10);
      await store.rotateIntegrationKey(tenant.companyId, tenant.integration.id, first, T0 + 100);
      const second = apiKeyFor(tenant.integration.id, T0 + 20);
      await store.rotateIntegrationKey(tenant.companyId, tenant.integration.id, second, T0 + 999_999);

      const byId = new Map((await store.listApiKeys(tenant.companyId, tenant.integration.id)).map((k) => [k.id, k]));
      expect(byId.get(tenant.keyId)?.expiresAt).toBe(T0 + 100);
      expect(byId.get(first.id)?.expiresAt).toBe(T0 + 999_999);
      expect(byId.get(second.id)?.expiresAt).toBeNull();
      expect(byId.get(revoked.id)).toMatchObject({ expiresAt: null, revokedAt: T0 + 2 });
    });

    test("rotating another company's integration changes nothing and adds no key", async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      const intruder = apiKeyFor(tenant.integration.id, T0 + 10);
      await store.rotateIntegrationKey(other.companyId, tenant.integration.id, intruder, T0 + 20).catch(() => undefined);

      const keys = await store.listApiKeys(tenant.companyId, tenant.integration.id);
      expect(keys.map((k) => [k.id, k.expiresAt])).toEqual([[tenant.keyId, null]]);
      expect(await store.listApiKeys(other.companyId, tenant.integration.id)).toEqual([]);
      expect(await store.findKeyByHash(intruder.hash)).toBeUndefined();
    });

    test("a key cannot be created for another company's integration", async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      const intruder = apiKeyFor(tenant.integration.id, T0 + 10);
      await store.createApiKey(other.companyId, intruder).catch(() => undefined);

      expect(await store.listApiKeys(other.companyId, tenant.integration.id)).toEqual([]);
      expect(await store.findKeyByHash(intruder.hash)).toBeUndefined();
    });

    test('latestAuthChange moves forward on every change that can stale a cached key', async () => {
      const tenant = await seedTenant(store);
      let last = await store.latestAuthChange();
      expect(last).toBeGreaterThan(0);
      const expectIncrease = async (what: string) => {
        const now = await store.latestAuthChange();
        expect(now, what).toBeGreaterThan(last);
        last = now;
      };

      const extra = apiKeyFor(tenant.integration.id, T0 + 1);
      await store.createApiKey(tenant.companyId, extra);
      await expectIncrease('createApiKey');
      await store.revokeApiKey(tenant.companyId, extra.id, T0 + 2);
      await expectIncrease('revokeApiKey');
      await store.rotateIntegrationKey(tenant.companyId, tenant.integration.id, apiKeyFor(tenant.integration.id, T0 + 3), T0 + 4);
      await expectIncrease('rotateIntegrationKey');
      await store.setIntegrationEnabled(tenant.companyId, tenant.integration.id, false, T0 + 5);
      await expectIncrease('setIntegrationEnabled(false)');
      await store.setIntegrationEnabled(tenant.companyId, tenant.integration.id, true, T0 + 6);
      await expectIncrease('setIntegrationEnabled(true)');
      await createIntegration(store, tenant.companyId);
      await expectIncrease('createIntegration');
    });

    test('recordKeyUsage sets last use and never moves it backwards', async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      const lastUse = async () => {
        const [key] = await store.listApiKeys(tenant.companyId, tenant.integration.id);
        return { at: key?.lastUsedAt, ip: key?.lastUsedIp };
      };
      expect(await lastUse()).toEqual({ at: null, ip: null });

      await store.recordKeyUsage([{ companyId: tenant.companyId, keyId: tenant.keyId, at: T0 + 1000, ip: '192.0.2.1' }]);
      expect(await lastUse()).toEqual({ at: T0 + 1000, ip: '192.0.2.1' });

      await store.recordKeyUsage([{ companyId: tenant.companyId, keyId: tenant.keyId, at: T0 + 500, ip: '192.0.2.2' }]);
      expect(await lastUse()).toEqual({ at: T0 + 1000, ip: '192.0.2.1' });

      await store.recordKeyUsage([
        { companyId: tenant.companyId, keyId: tenant.keyId, at: T0 + 3000, ip: '192.0.2.3' },
        { companyId: tenant.companyId, keyId: tenant.keyId, at: T0 + 2000, ip: '192.0.2.4' },
      ]);
      expect(await lastUse()).toEqual({ at: T0 + 3000, ip: '192.0.2.3' });

      // Another company's id for the key changes nothing.
      await store.recordKeyUsage([{ companyId: other.companyId, keyId: tenant.keyId, at: T0 + 9000, ip: '192.0.2.9' }]);
      expect(await lastUse()).toEqual({ at: T0 + 3000, ip: '192.0.2.3' });
      await store.recordKeyUsage([]);
    });

    // Several nodes share PostgreSQL only. (Two SQLite stores in one process would block each
    // other: the driver is synchronous, so busy_timeout stalls the very thread that holds the lock.)
    test.runIf(factory.name === 'postgres')('two nodes writing the last use of the same keys at once keep the newest, and never deadlock', async () => {
      const first = await seedTenant(store);
      const second = await seedTenant(store, 'Other');
      const otherNode = harness.openAnother();
      const use = (tenant: Tenant, at: number) => ({ companyId: tenant.companyId, keyId: tenant.keyId, at, ip: `192.0.2.${at % 200}` });
      for (let round = 0; round < 20; round++) {
        const at = T0 + round * 10;
        // Opposite orders: unsorted, each node would lock one key and wait for the other's.
        await Promise.all([
          store.recordKeyUsage([use(first, at + 1), use(second, at + 2)]),
          otherNode.recordKeyUsage([use(second, at + 3), use(first, at + 4)]),
        ]);
      }
      const [firstKey] = await store.listApiKeys(first.companyId, first.integration.id);
      const [secondKey] = await store.listApiKeys(second.companyId, second.integration.id);
      expect(firstKey?.lastUsedAt).toBe(T0 + 194);
      expect(secondKey?.lastUsedAt).toBe(T0 + 193);
    });
  });

  describe('commitBatch', () => {
    test.runIf(factory.name === 'postgres')('two nodes claiming the same idempotency keys at once store each once, and never deadlock', async () => {
      const tenant = await seedTenant(store);
      const otherNode = harness.openAnother();
      const keys = Array.from({ length: 40 }, (_, i) => `order-${i}`);
      for (let round = 0; round < 5; round++) {
        const batch = (order: string[]) => order.map((key) => pending(tenant, { idempotencyKey: `${round}-${key}` }));
        // Opposite orders: claimed as listed, each node would hold keys the other waits for.
        const [a, b] = await Promise.all([store.commitBatch(batch(keys), []), otherNode.commitBatch(batch([...keys].reverse()), [])]);
        const accepted = [...a, ...b].filter((outcome) => outcome.kind === 'accepted').length;
        expect(accepted).toBe(keys.length);
      }
      expect(await allWebhooks(store, tenant)).toHaveLength(5 * keys.length);
    });

    test('stores the webhooks and the request log rows together', async () => {
      const tenant = await seedTenant(store);
      const webhooks = [pending(tenant, { receivedAt: T0 + 1 }), pending(tenant, { receivedAt: T0 + 2 })];
      const rejected = logEntry(tenant, { receivedAt: T0 + 3 });
      const outcomes = await store.commitBatch(webhooks, [rejected]);
      expect(outcomes).toEqual([
        { kind: 'accepted', uuid: webhooks[0]!.uuid, receivedAt: T0 + 1 },
        { kind: 'accepted', uuid: webhooks[1]!.uuid, receivedAt: T0 + 2 },
      ]);
      expect((await allWebhooks(store, tenant)).map((w) => w.uuid).sort()).toEqual(webhooks.map((w) => w.uuid).sort());

      const log = await store.listRequestLog(tenant.companyId, tenant.integration.id, 100);
      expect(log).toHaveLength(3);
      expect(log.find((r) => r.id === rejected.id)).toEqual({ ...rejected, errorDetail: null, traceId: null });
      expect(log.filter((r) => r.status === 202).map((r) => r.webhookUuid).sort()).toEqual(
        webhooks.map((w) => w.uuid).sort(),
      );
    });

    test('groups of every size store each webhook and its log row once, byte for byte (PostgreSQL pads and chunks them)', async () => {
      const tenant = await seedTenant(store);
      // Sizes around PostgreSQL's padded statements (8, 16, 32, 64 rows) and its 64-row chunks.
      const sizes = [1, 7, 8, 9, 33, 64, 65, 130];
      let at = T0;
      const sent: PendingWebhook[] = [];
      for (const size of sizes) {
        const group = Array.from({ length: size }, (_, i) => {
          at += 1;
          // Bytes that are not UTF-8 and a NUL: the body must come back as sent.
          const body = Buffer.concat([Buffer.from(`{"event":"e${i}","data":{}}`), Buffer.from([0x00, 0xff, 0xfe, i % 256])]);
          return pending(tenant, { receivedAt: at, body, event: `e${i}`, idempotencyKey: i % 3 === 0 ? `key-${at}` : null });
        });
        const outcomes = await store.commitBatch(group, [logEntry(tenant, { receivedAt: at, userAgent: null })]);
        expect(outcomes.map((outcome) => outcome.kind)).toEqual(group.map(() => 'accepted'));
        sent.push(...group);
      }
      const stored = await allWebhooks(store, tenant);
      expect(stored).toHaveLength(sent.length);
      const byUuid = new Map(stored.map((webhook) => [webhook.uuid, webhook]));
      for (const webhook of sent) {
        const row = byUuid.get(webhook.uuid)!;
        expect(row.rawBody.equals(webhook.rawBody)).toBe(true);
        expect([row.event, row.receivedAt, row.sourceIp, row.headers]).toEqual([webhook.event, webhook.receivedAt, webhook.sourceIp, JSON.parse(webhook.headers)]);
      }
      // The idempotency keys went in with their rows: sent again, a keyed webhook is a replay.
      const keyed = sent.filter((webhook) => webhook.idempotencyKey !== null).at(-1)!;
      const again = { ...keyed, uuid: newWebhookUuid(), receivedAt: at + 1, log: { ...keyed.log, id: newId('req') } };
      expect(await store.commitBatch([again], [])).toEqual([{ kind: 'replayed', uuid: keyed.uuid, receivedAt: keyed.receivedAt }]);
      const log = await store.listRequestLog(tenant.companyId, tenant.integration.id, 1000);
      expect(log).toHaveLength(sent.length + sizes.length + 1);
      expect(log.filter((row) => row.status === 202).map((row) => row.webhookUuid).sort()).toEqual(sent.map((w) => w.uuid).sort());
      expect(log.filter((row) => row.status === 401).map((row) => row.userAgent)).toEqual(sizes.map(() => null));
    });

    test('a batch of logs only stores the logs', async () => {
      const tenant = await seedTenant(store);
      expect(await store.commitBatch([], [logEntry(tenant), logEntry(tenant)])).toEqual([]);
      expect(await store.listRequestLog(tenant.companyId, tenant.integration.id, 10)).toHaveLength(2);
      expect(await allWebhooks(store, tenant)).toEqual([]);
    });

    test('idempotency within one batch: first accepted, same body replayed, other body conflict', async () => {
      const tenant = await seedTenant(store);
      const body = '{"event":"a","data":{}}';
      const first = pending(tenant, { body, idempotencyKey: 'evt_1', receivedAt: T0 });
      const repeat = pending(tenant, { body, idempotencyKey: 'evt_1', receivedAt: T0 + 5 });
      const changed = pending(tenant, { body: '{"event":"b","data":{}}', idempotencyKey: 'evt_1', receivedAt: T0 + 6 });
      const plain = pending(tenant, { body, receivedAt: T0 + 7 });

      const outcomes = await store.commitBatch([first, repeat, changed, plain], []);
      expect(outcomes).toEqual([
        { kind: 'accepted', uuid: first.uuid, receivedAt: T0 },
        { kind: 'replayed', uuid: first.uuid, receivedAt: T0 },
        { kind: 'conflict' },
        { kind: 'accepted', uuid: plain.uuid, receivedAt: T0 + 7 },
      ]);
      expect((await allWebhooks(store, tenant)).map((w) => w.uuid).sort()).toEqual([first.uuid, plain.uuid].sort());
      const statuses = (await store.listRequestLog(tenant.companyId, tenant.integration.id, 10)).map((r) => r.status);
      expect(statuses.sort()).toEqual([200, 202, 202, 422]);
    });

    test('idempotency across batches, per integration', async () => {
      const tenant = await seedTenant(store);
      const sibling = await createIntegration(store, tenant.companyId);
      const body = '{"event":"a"}';
      const first = pending(tenant, { body, idempotencyKey: 'k', receivedAt: T0 });
      expect(await store.commitBatch([first], [])).toEqual([{ kind: 'accepted', uuid: first.uuid, receivedAt: T0 }]);

      const repeat = pending(tenant, { body, idempotencyKey: 'k', receivedAt: T0 + 60_000 });
      const changed = pending(tenant, { body: '{"event":"b"}', idempotencyKey: 'k', receivedAt: T0 + 60_001 });
      const elsewhere = pending(sibling, { body, idempotencyKey: 'k', receivedAt: T0 + 60_002 });
      expect(await store.commitBatch([repeat, changed, elsewhere], [])).toEqual([
        { kind: 'replayed', uuid: first.uuid, receivedAt: T0 },
        { kind: 'conflict' },
        { kind: 'accepted', uuid: elsewhere.uuid, receivedAt: T0 + 60_002 },
      ]);
      expect((await allWebhooks(store, tenant)).map((w) => w.uuid)).toEqual([first.uuid]);
      expect((await allWebhooks(store, sibling)).map((w) => w.uuid)).toEqual([elsewhere.uuid]);
    });

    test('an idempotency key older than the window is a new webhook', async () => {
      const tenant = await seedTenant(store);
      const body = '{"event":"a"}';
      const first = pending(tenant, { body, idempotencyKey: 'k', receivedAt: T0 });
      await store.commitBatch([first], []);

      const inside = pending(tenant, { body, idempotencyKey: 'k', receivedAt: T0 + IDEMPOTENCY_WINDOW_MS - 1 });
      expect(await store.commitBatch([inside], [])).toEqual([{ kind: 'replayed', uuid: first.uuid, receivedAt: T0 }]);

      const later = T0 + IDEMPOTENCY_WINDOW_MS + 1;
      const after = pending(tenant, { body, idempotencyKey: 'k', receivedAt: later });
      expect(await store.commitBatch([after], [])).toEqual([{ kind: 'accepted', uuid: after.uuid, receivedAt: later }]);

      // The new webhook now holds the key: a repeat of it is a replay of the new one.
      const repeat = pending(tenant, { body, idempotencyKey: 'k', receivedAt: later + 10 });
      expect(await store.commitBatch([repeat], [])).toEqual([{ kind: 'replayed', uuid: after.uuid, receivedAt: later }]);

      // Past the window a different body is not a conflict either.
      const changed = pending(tenant, {
        body: '{"event":"z"}',
        idempotencyKey: 'k',
        receivedAt: later + IDEMPOTENCY_WINDOW_MS + 1,
      });
      expect((await store.commitBatch([changed], []))[0]).toMatchObject({ kind: 'accepted', uuid: changed.uuid });
      expect((await allWebhooks(store, tenant)).map((w) => w.uuid).sort()).toEqual(
        [first.uuid, after.uuid, changed.uuid].sort(),
      );
    });

    test('a batch that fails on a webhook stores nothing at all', async () => {
      const tenant = await seedTenant(store);
      const uuid = newWebhookUuid();
      const batch = [
        pending(tenant, { idempotencyKey: 'claimed-in-failed-batch' }),
        pending(tenant, { uuid }),
        pending(tenant, { uuid }),
      ];
      await expect(store.commitBatch(batch, [logEntry(tenant)])).rejects.toThrow();

      expect(await allWebhooks(store, tenant)).toEqual([]);
      expect(await store.listRequestLog(tenant.companyId, tenant.integration.id, 100)).toEqual([]);
      // Nor the idempotency claim: the sender's retry is a new webhook.
      const retry = pending(tenant, { idempotencyKey: 'claimed-in-failed-batch' });
      expect((await store.commitBatch([retry], []))[0]).toMatchObject({ kind: 'accepted', uuid: retry.uuid });
    });

    test('a batch that fails on a log row rolls back its webhooks too', async () => {
      const tenant = await seedTenant(store);
      const duplicateLog = logEntry(tenant);
      const webhook = pending(tenant, { idempotencyKey: 'k' });
      await expect(store.commitBatch([webhook], [duplicateLog, { ...duplicateLog }])).rejects.toThrow();

      expect(await allWebhooks(store, tenant)).toEqual([]);
      expect(await store.listRequestLog(tenant.companyId, tenant.integration.id, 100)).toEqual([]);
    });

    test('a large batch (more than one insert chunk) is stored whole', async () => {
      const tenant = await seedTenant(store);
      const batch = Array.from({ length: 1200 }, (_, i) =>
        pending(tenant, { receivedAt: T0 + i, idempotencyKey: i % 2 === 0 ? `k${i}` : null }),
      );
      const outcomes = await store.commitBatch(batch, []);
      expect(outcomes.every((o) => o.kind === 'accepted')).toBe(true);
      const page = await store.listWebhooks(tenant.companyId, tenant.integration.id, { limit: 5000 });
      expect(page).toHaveLength(1200);
      expect(await store.listRequestLog(tenant.companyId, tenant.integration.id, 5000)).toHaveLength(1200);
    });
  });

  describe('reading webhooks', () => {
    async function seedTimeline(tenant: Tenant) {
      // Two webhooks share a millisecond: the uuid breaks the tie.
      const batch = [
        pending(tenant, { event: 'a', receivedAt: T0 + 1000 }),
        pending(tenant, { event: 'b', receivedAt: T0 + 2000 }),
        pending(tenant, { event: 'a', receivedAt: T0 + 3000 }),
        pending(tenant, { event: 'a', receivedAt: T0 + 3000 }),
        pending(tenant, { event: 'b', receivedAt: T0 + 4000 }),
      ];
      await store.commitBatch(batch, []);
      return [...batch].sort((x, y) => y.receivedAt - x.receivedAt || (y.uuid < x.uuid ? -1 : 1));
    }

    test('newest first, ties broken by uuid', async () => {
      const tenant = await seedTenant(store);
      const expected = await seedTimeline(tenant);
      const rows = await allWebhooks(store, tenant);
      expect(rows.map((r) => r.uuid)).toEqual(expected.map((w) => w.uuid));
    });

    test('the cursor pages through every row exactly once', async () => {
      const tenant = await seedTenant(store);
      const expected = await seedTimeline(tenant);
      const seen: string[] = [];
      let cursor: { receivedAt: number; uuid: string } | undefined;
      for (let page = 0; page < 10; page++) {
        const rows = await store.listWebhooks(tenant.companyId, tenant.integration.id, { limit: 2, cursor });
        if (rows.length === 0) break;
        seen.push(...rows.map((r) => r.uuid));
        const last = rows[rows.length - 1]!;
        cursor = { receivedAt: last.receivedAt, uuid: last.uuid };
      }
      expect(seen).toEqual(expected.map((w) => w.uuid));
    });

    test('event, since (inclusive) and until (exclusive) filter', async () => {
      const tenant = await seedTenant(store);
      const expected = await seedTimeline(tenant);
      const query = (q: { event?: string; since?: number; until?: number }) =>
        store.listWebhooks(tenant.companyId, tenant.integration.id, { limit: 100, ...q }).then((rows) => rows.map((r) => r.uuid));

      expect(await query({ event: 'b' })).toEqual(expected.filter((w) => w.event === 'b').map((w) => w.uuid));
      expect(await query({ event: 'nope' })).toEqual([]);
      expect(await query({ since: T0 + 3000 })).toEqual(expected.filter((w) => w.receivedAt >= T0 + 3000).map((w) => w.uuid));
      expect(await query({ until: T0 + 3000 })).toEqual(expected.filter((w) => w.receivedAt < T0 + 3000).map((w) => w.uuid));
      expect(await query({ event: 'a', since: T0 + 2000, until: T0 + 4000 })).toEqual(
        expected.filter((w) => w.event === 'a' && w.receivedAt >= T0 + 2000).map((w) => w.uuid),
      );
    });

    test("another company or integration sees none of the webhooks", async () => {
      const tenant = await seedTenant(store);
      const other = await seedTenant(store, 'Other');
      const sibling = await createIntegration(store, tenant.companyId);
      const [newest] = await seedTimeline(tenant);
      expect(await store.listWebhooks(other.companyId, tenant.integration.id, { limit: 100 })).toEqual([]);
      expect(await store.listWebhooks(tenant.companyId, sibling.integration.id, { limit: 100 })).toEqual([]);
      expect(await store.getWebhook(other.companyId, tenant.integration.id, newest!.uuid)).toBeUndefined();
      expect(await store.getWebhook(tenant.companyId, sibling.integration.id, newest!.uuid)).toBeUndefined();
      expect(await store.listRequestLog(other.companyId, tenant.integration.id, 100)).toEqual([]);
    });

    test('getWebhook returns the raw body byte for byte, as a Buffer', async () => {
      const tenant = await seedTenant(store);
      const body = Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('{"event":"é 😀","data":{"nul":"\\u0000"},"x":1e400}   \r\n', 'utf8'),
        Buffer.from([0x00, 0xff, 0xfe, 0x80]),
      ]);
      const webhook = pending(tenant, { body, event: 'é 😀' });
      await store.commitBatch([webhook], []);

      const stored = await store.getWebhook(tenant.companyId, tenant.integration.id, webhook.uuid);
      expect(stored).toBeDefined();
      expect(Buffer.isBuffer(stored!.rawBody)).toBe(true);
      expect(stored!.rawBody.equals(body)).toBe(true);
      expect(stored).toMatchObject({
        uuid: webhook.uuid,
        integrationId: tenant.integration.id,
        event: 'é 😀',
        receivedAt: T0,
        headers: { 'content-type': 'application/json', 'user-agent': 'sender/1.0' },
        sourceIp: '198.51.100.4',
      });
      expect(await store.getWebhook(tenant.companyId, tenant.integration.id, newWebhookUuid())).toBeUndefined();
    });
  });
});
