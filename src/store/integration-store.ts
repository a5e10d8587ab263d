import type { Redaction } from '../domain/redaction.js';
import type { PageCursor } from '../domain/cursor.js';
import type { ProviderType, SourceConfig, SourceType } from '../domain/source-types.js';
import type { AuditEvent } from './audit-store.js';
import type { NewApiKey } from './key-store.js';

/** Integrations and their sources (a provider's settings and signing secrets), and every sealed value. */
export interface IntegrationStore {
  // Authentication: this finds the tenant from the address, so it cannot take one.
  findIntegrationByKey(integrationKey: string): Promise<IntegrationRoute | undefined>;

  // Integrations.
  /** With a provider source, its first signing secret in the same transaction. */
  createIntegration(
    companyId: string,
    integration: Integration,
    firstKey: NewApiKey,
    audit?: AuditEvent,
    firstSecret?: NewSourceSecret,
  ): Promise<void>;
  getIntegration(companyId: string, integrationId: string): Promise<Integration | undefined>;
  setIntegrationEnabled(
    companyId: string,
    integrationId: string,
    enabled: boolean,
    at: number,
    audit?: AuditEvent,
  ): Promise<boolean>;

  // --- management API: integrations ---
  /** The company's live integrations, newest first (cursor: created_at and id of the last). */
  listIntegrations(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Integration[]>;
  /** When each of these integrations of the company last took a webhook (absent: never, or all purged). */
  lastWebhookTimes(companyId: string, integrationIds: readonly string[]): Promise<Map<string, number>>;
  /** Which of these provider integrations of the company have no live signing secret at `now` (waiting for it). */
  awaitingSecret(companyId: string, integrationIds: readonly string[], now: number): Promise<Set<string>>;
  /** Changes a live integration; its state before and after, or undefined when there is none. */
  updateIntegration(
    companyId: string,
    integrationId: string,
    changes: IntegrationChanges,
    at: number,
    audit?: AuditEvent,
    secrets?: SourceSecretChange,
  ): Promise<{ before: Integration; after: Integration } | undefined>;
  /**
   * The source's secrets still verifying at `now` (not their values), oldest first; empty
   * for an integration the company does not have.
   */
  listSourceSecrets(companyId: string, integrationId: string, now: number): Promise<SourceSecretInfo[]>;
  /**
   * Adds a signing secret and ends every other live one at `change.othersExpireAt` (the
   * overlap of a rotation); false, changing nothing, unless the integration is the company's.
   */
  rotateSourceSecret(companyId: string, integrationId: string, change: SourceSecretChange, audit?: AuditEvent): Promise<boolean>;
  /** Ends one live secret at `at`; false when the integration has no such live secret. */
  endSourceSecret(companyId: string, integrationId: string, secretId: string, at: number, audit?: AuditEvent): Promise<boolean>;
  /**
   * Every value sealed with INTAKE_SECRETS_KEY (two-factor secrets, source secrets), across
   * companies: `intake secrets rotate` reseals them with the first key. Not tenant-scoped.
   */
  listSealedValues(): Promise<SealedValue[]>;
  /** Replaces each value still sealed as listed (one changed meanwhile is left alone); how many were replaced. */
  replaceSealedValues(values: Array<SealedValue & { resealed: string }>): Promise<number>;
  /** Deletes an integration: its address and keys stop working; false when there is none. */
  deleteIntegration(companyId: string, integrationId: string, at: number, audit: AuditEvent): Promise<boolean>;

  // Operator lookup for the CLI, which is given bare ids: which company owns this?
  companyOfIntegration(integrationId: string): Promise<string | undefined>;
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
  source: IntegrationSource;
  /** What is replaced before each webhook is stored; null: nothing. */
  redaction: Redaction | null;
  /**
   * Days its webhooks (and their log, deliveries and attempts) are kept, at most the
   * company's retention when set; null: the company's. Should the company's become shorter,
   * the company's holds: the purge keeps the shorter of the two.
   */
  retentionDays: number | null;
}

/** What an update may change in an integration. */
export type IntegrationChanges = Partial<
  Pick<
    Integration,
    'name' | 'description' | 'enabled' | 'bodyLimitBytes' | 'rateLimitPerMinute' | 'source' | 'redaction' | 'retentionDays'
  >
>;

/** How an integration proves its requests: the API key alone, or a provider's signature too. */
export interface IntegrationSource {
  type: SourceType;
  /** The type's settings (empty for most types); never a secret. */
  config: SourceConfig;
}

export interface NewSourceSecret {
  id: string;
  /** Sealed with INTAKE_SECRETS_KEY. */
  sealed: string;
  createdAt: number;
}

/** A new secret (or none), and when the ones before it stop verifying (at once: now). */
export interface SourceSecretChange {
  add: NewSourceSecret | null;
  othersExpireAt: number;
}

/** A signing secret as the API shows it: never its value. */
export interface SourceSecretInfo {
  id: string;
  createdAt: number;
  /** Null: verifies until replaced. */
  expiresAt: number | null;
}

/** A value sealed with INTAKE_SECRETS_KEY, wherever it is kept. */
export interface SealedValue {
  kind: 'totp_secret' | 'totp_pending_secret' | 'source_secret' | 'secret_sealed' | 'previous_secret_sealed' | 'headers_sealed';
  /** The user's, the secret's or the destination's id (the destination's sealed columns are the last three kinds). */
  id: string;
  sealed: string;
}

/** What the intake path needs of the integration an address names. */
export interface IntegrationRoute {
  id: string;
  companyId: string;
  enabled: boolean;
  bodyLimitBytes: number;
  rateLimitPerMinute: number | null;
  /** Null for an `api_key` source: the key is the only way in. */
  source: RouteSource | null;
  /** What intake replaces before storing each webhook of it; null: nothing. */
  redaction: Redaction | null;
}

/** A provider source as intake verifies it: its secrets still sealed (opened per request). */
export interface RouteSource {
  type: ProviderType;
  config: SourceConfig;
  /** Live when found; each checked against `expiresAt` again when used, as the cache keeps them a while. */
  secrets: Array<{ id: string; sealed: string; expiresAt: number | null }>;
}
