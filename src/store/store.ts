import type { Scope } from '../domain/api-key.js';
import type { Cursor } from '../domain/cursor.js';

/**
 * The storage interface. Every method that reads or changes a company's data takes the
 * company id first, so a query that forgets the tenant does not type-check; a row of
 * another company is "not found". The exceptions say why in their comment.
 */
export interface Store {
  readonly dialect: 'sqlite' | 'postgres';

  /** Applies pending migrations; returns the names applied now. */
  migrate(): Promise<string[]>;
  /** Resolves when the database answers a query. */
  ping(): Promise<void>;
  close(): Promise<void>;

  // Authentication: these find the tenant from a key, so they cannot take one.
  findKeyByHash(keyHash: string): Promise<KeyGrant | undefined>;
  findIntegrationByKey(integrationKey: string): Promise<IntegrationRoute | undefined>;
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

  // Intake: one transaction for a group of requests, rows carry their company.
  commitBatch(webhooks: PendingWebhook[], logs: RequestLogEntry[]): Promise<CommitOutcome[]>;

  /**
   * Retention: deletes webhooks and request-log rows older than their company's retention,
   * in small batches, and idempotency claims past their window. Safe to run on several
   * nodes at once (each delete finds what the others left).
   */
  purgeExpired(now: number): Promise<PurgeReport>;

  // Reading.
  listWebhooks(companyId: string, integrationId: string, query: WebhookQuery): Promise<StoredWebhook[]>;
  getWebhook(companyId: string, integrationId: string, uuid: string): Promise<StoredWebhook | undefined>;
  listRequestLog(companyId: string, integrationId: string, limit: number): Promise<RequestLogEntry[]>;

  // Companies and users.
  /** Creates a tenant: the one write that has no company yet. */
  createCompany(company: Company): Promise<void>;
  getCompany(companyId: string): Promise<Company | undefined>;
  /** Creates the user (or finds it by email) and makes it a member with this role. */
  addUser(companyId: string, user: NewUser, role: Role): Promise<{ id: string; email: string; created: boolean }>;
  /** Across all companies: first run is when nobody exists yet. */
  countUsers(): Promise<number>;
  createSetupToken(tokenHash: string, createdAt: number, expiresAt: number): Promise<void>;

  // Integrations and keys.
  createIntegration(companyId: string, integration: Integration, firstKey: NewApiKey): Promise<void>;
  getIntegration(companyId: string, integrationId: string): Promise<Integration | undefined>;
  setIntegrationEnabled(companyId: string, integrationId: string, enabled: boolean, at: number): Promise<boolean>;
  createApiKey(companyId: string, key: NewApiKey): Promise<void>;
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
  ): Promise<void>;
  /** Revokes the key; the time it was revoked (the earlier one if it already was), or undefined. */
  revokeApiKey(companyId: string, keyId: string, at: number): Promise<number | undefined>;
  listApiKeys(companyId: string, integrationId: string): Promise<ApiKeyRecord[]>;

  // Operator lookups for the CLI, which is given bare ids: which company owns this?
  companyOfIntegration(integrationId: string): Promise<string | undefined>;
  companyOfKey(keyId: string): Promise<string | undefined>;
}

export type Role = 'owner' | 'admin' | 'viewer';
export const ROLES: readonly Role[] = ['owner', 'admin', 'viewer'];

export interface Company {
  id: string;
  name: string;
  retentionDays: number;
  createdAt: number;
}

export interface NewUser {
  id: string;
  email: string;
  passwordHash: string;
  createdAt: number;
}

export interface Integration {
  id: string;
  companyId: string;
  integrationKey: string;
  name: string;
  description: string;
  enabled: boolean;
  bodyLimitBytes: number;
  rateLimitPerMinute: number | null;
  createdAt: number;
  updatedAt: number;
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

/** What a live key allows: found by hash, not revoked, its integration not deleted. */
export interface KeyGrant {
  keyId: string;
  keyHash: string;
  companyId: string;
  integrationId: string | null;
  scopes: Scope[];
  expiresAt: number | null;
}

/** What the intake path needs of the integration an address names. */
export interface IntegrationRoute {
  id: string;
  companyId: string;
  enabled: boolean;
  bodyLimitBytes: number;
  rateLimitPerMinute: number | null;
}

export interface KeyUsage {
  companyId: string;
  keyId: string;
  at: number;
  ip: string;
}

export interface PendingWebhook {
  uuid: string;
  companyId: string;
  integrationId: string;
  keyId: string;
  event: string;
  receivedAt: number;
  rawBody: Buffer;
  /** SHA-256 of the raw body, computed only when there is an idempotency key to compare. */
  bodySha256: string | null;
  /** JSON object of the kept headers. */
  headers: string;
  sourceIp: string;
  idempotencyKey: string | null;
  /** The request-log row of this request, once its outcome is known inside the transaction. */
  logFor(outcome: CommitOutcome): RequestLogEntry;
}

export type CommitOutcome =
  | { kind: 'accepted'; uuid: string; receivedAt: number }
  | { kind: 'replayed'; uuid: string; receivedAt: number }
  | { kind: 'conflict' };

/** Repeats of an idempotency key older than this are new webhooks. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface RequestLogEntry {
  id: string;
  companyId: string;
  integrationId: string;
  receivedAt: number;
  method: string;
  status: number;
  errorCode: string | null;
  keyId: string | null;
  ip: string;
  userAgent: string | null;
  sizeBytes: number;
  durationMs: number;
  webhookUuid: string | null;
}

export interface PurgeReport {
  webhooks: number;
  requestLog: number;
  idempotencyKeys: number;
  /** Whole time partitions dropped (PostgreSQL), by table name. */
  partitionsDropped: string[];
}

/** A company's retention unless it sets its own. */
export const DEFAULT_RETENTION_DAYS = 30;

export interface WebhookQuery {
  limit: number;
  cursor?: Cursor;
  event?: string;
  /** Inclusive lower bound, ms. */
  since?: number;
  /** Exclusive upper bound, ms. */
  until?: number;
}

export interface StoredWebhook {
  uuid: string;
  integrationId: string;
  event: string;
  receivedAt: number;
  rawBody: Buffer;
  headers: Record<string, string>;
  sourceIp: string;
}
