import type { Scope } from '../domain/api-key.js';
import type { PageCursor } from '../domain/cursor.js';
import type { AuditEvent } from './audit-store.js';

/** API keys (integrations' and management keys) and what authentication asks of them. */
export interface KeyStore {
  // Authentication: these find the tenant from a key, so they cannot take one.
  findKeyByHash(keyHash: string): Promise<KeyGrant | undefined>;
  /** The id of the newest change that may invalidate a cached key (0 when none). */
  latestAuthChange(): Promise<number>;
  /**
   * Calls `listener` as soon as the database tells of a change to keys or integrations
   * (PostgreSQL NOTIFY), and after a lost notification channel comes back. A store that
   * cannot push returns at once and never calls it: latestAuthChange is then the only way.
   * Returns the unsubscribe function.
   */
  subscribeAuthChanges(listener: () => void): () => void;
  /** Write-behind of keys' last use; each entry names its company. */
  recordKeyUsage(usages: KeyUsage[]): Promise<void>;

  // Keys of an integration.
  createApiKey(companyId: string, key: NewApiKey, audit?: AuditEvent): Promise<void>;
  /**
   * Adds `newKey` and makes every other live key of the integration expire by
   * `previousExpiresAt`; throws not_found (changing nothing) unless the integration is the
   * company's. createApiKey checks an integration key the same way.
   */
  rotateIntegrationKey(
    companyId: string,
    integrationId: string,
    newKey: NewApiKey,
    previousExpiresAt: number,
    audit?: AuditEvent,
  ): Promise<void>;
  /** Revokes the key; the time it was revoked (the earlier one if it already was), or undefined. */
  revokeApiKey(companyId: string, keyId: string, at: number, audit?: AuditEvent): Promise<number | undefined>;
  listApiKeys(companyId: string, integrationId: string): Promise<ApiKeyRecord[]>;

  // --- management API: keys ---
  /**
   * The company's keys of a live integration (integrationId) or its management keys (null),
   * newest first (cursor: created_at and id of the last).
   */
  listKeys(companyId: string, integrationId: string | null, query: { limit: number; cursor?: PageCursor }): Promise<KeyDetails[]>;
  /** One key of that integration (or a management key, for null), or undefined. */
  getKey(companyId: string, integrationId: string | null, keyId: string): Promise<KeyDetails | undefined>;
  /**
   * Revokes a key of that integration (or a management key, for null) and returns it, or
   * undefined when there is none. Revoking a revoked key changes nothing and writes no audit.
   */
  revokeKeyOf(
    companyId: string,
    integrationId: string | null,
    keyId: string,
    at: number,
    audit: AuditEvent,
  ): Promise<KeyDetails | undefined>;
  /** Request-log rows of each key at the integration's address since `since`, by key id. */
  countKeyRequests(companyId: string, integrationId: string, keyIds: string[], since: number): Promise<Map<string, number>>;
  /** Who sent requests with the key to the integration's address since `since`, most recent first. */
  listKeyCallers(
    companyId: string,
    integrationId: string,
    keyId: string,
    query: { since: number; limit: number },
  ): Promise<KeyCaller[]>;

  // Operator lookup for the CLI, which is given bare ids: which company owns this?
  companyOfKey(keyId: string): Promise<string | undefined>;
}

export interface NewApiKey {
  id: string;
  /** Null for a company management key. */
  integrationId: string | null;
  scopes: Scope[];
  prefix: string;
  hash: string;
  createdAt: number;
  expiresAt: number | null;
  /** What the key is for, as its creator put it; unnamed when absent. */
  name?: string;
}

export interface ApiKeyRecord {
  id: string;
  companyId: string;
  integrationId: string | null;
  scopes: Scope[];
  prefix: string;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  lastUsedAt: number | null;
  lastUsedIp: string | null;
}

/** A key as the management API shows it. */
export interface KeyDetails extends ApiKeyRecord {
  /** '' when unnamed. */
  name: string;
}

/** One sender seen using a key: its address and user agent, when last and how often. */
export interface KeyCaller {
  ip: string;
  userAgent: string | null;
  lastSeenAt: number;
  requests: number;
}

/** What a live key allows: found by hash, not revoked, its integration not deleted. */
export interface KeyGrant {
  keyId: string;
  keyHash: string;
  companyId: string;
  integrationId: string | null;
  scopes: Scope[];
  expiresAt: number | null;
}

export interface KeyUsage {
  companyId: string;
  keyId: string;
  at: number;
  ip: string;
}
