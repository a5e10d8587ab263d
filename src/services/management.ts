import type { Environment } from '../config.js';
import {
  DEFAULT_ROTATION_GRACE_SECONDS,
  INTEGRATION_SCOPES,
  MANAGEMENT_SCOPES,
  MAX_ROTATION_GRACE_SECONDS,
  issueApiKey,
  type Scope,
} from '../domain/api-key.js';
import { isId, newId, newIntegrationKey } from '../domain/ids.js';
import { MIN_PASSWORD_LENGTH, hashPassword } from '../domain/password.js';
import { AppError } from '../errors.js';
import { DEFAULT_RETENTION_DAYS, ROLES, type Company, type Integration, type Role, type Store } from '../store/store.js';

export interface ManagementOptions {
  environment: Environment;
  baseUrl: string;
  defaultBodyLimit: number;
}

export interface NewIntegrationInput {
  name: string;
  description?: string;
  bodyLimitBytes?: number;
  rateLimitPerMinute?: number | null;
}

const MAX_NAME_LENGTH = 200;
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * The operations that change a company's setup, shared by the CLI (and, later, the
 * management API and the panel): validation, key issuing and the store calls in one place.
 */
export class Management {
  constructor(
    private readonly store: Store,
    private readonly options: ManagementOptions,
    private readonly now: () => number = Date.now,
  ) {}

  async createCompany(name: string): Promise<Company> {
    const company = { id: newId('cmp'), name: validName(name), retentionDays: DEFAULT_RETENTION_DAYS, createdAt: this.now() };
    await this.store.createCompany(company);
    return company;
  }

  async addUser(companyId: string, email: string, password: string, role: string): Promise<{ id: string; email: string }> {
    await this.requireCompany(companyId);
    const normalized = email.trim().toLowerCase();
    if (!EMAIL_PATTERN.test(normalized)) throw new AppError('invalid_request', `"${email}" is not an email address.`);
    if (!ROLES.includes(role as Role)) {
      throw new AppError('invalid_request', `The role must be one of ${ROLES.join(', ')}.`, { field: 'role' });
    }
    if (password.length < MIN_PASSWORD_LENGTH) {
      throw new AppError('invalid_request', `The password must be at least ${MIN_PASSWORD_LENGTH} characters.`, {
        field: 'password',
      });
    }
    const user = { id: newId('usr'), email: normalized, passwordHash: await hashPassword(password), createdAt: this.now() };
    const added = await this.store.addUser(companyId, user, role as Role);
    return { id: added.id, email: added.email };
  }

  async createIntegration(companyId: string, input: NewIntegrationInput) {
    await this.requireCompany(companyId);
    const now = this.now();
    const integration: Integration = {
      id: newId('int'),
      companyId,
      integrationKey: newIntegrationKey(),
      name: validName(input.name),
      description: input.description ?? '',
      enabled: true,
      bodyLimitBytes: input.bodyLimitBytes ?? this.options.defaultBodyLimit,
      rateLimitPerMinute: input.rateLimitPerMinute ?? null,
      createdAt: now,
      updatedAt: now,
    };
    const key = issueApiKey(this.options.environment);
    const keyId = newId('key');
    await this.store.createIntegration(companyId, integration, {
      id: keyId,
      integrationId: integration.id,
      scopes: [...INTEGRATION_SCOPES],
      prefix: key.prefix,
      hash: key.hash,
      createdAt: now,
      expiresAt: null,
    });
    return { integration, keyId, apiKey: key.plaintext, webhookUrl: this.webhookUrl(integration.integrationKey) };
  }

  async setIntegrationEnabled(companyId: string, integrationId: string, enabled: boolean) {
    const changed = await this.store.setIntegrationEnabled(companyId, integrationId, enabled, this.now());
    if (!changed) throw notFound('integration', integrationId);
    return { id: integrationId, enabled };
  }

  async createManagementKey(companyId: string, scopes: string[]) {
    await this.requireCompany(companyId);
    const unknown = scopes.filter((s) => !(MANAGEMENT_SCOPES as readonly string[]).includes(s));
    if (scopes.length === 0 || unknown.length > 0) {
      throw new AppError(
        'invalid_request',
        `A management key's scopes are one or more of ${MANAGEMENT_SCOPES.join(', ')}${unknown.length ? `; not ${unknown.join(', ')}` : ''}.`,
        { field: 'scope' },
      );
    }
    const key = issueApiKey(this.options.environment);
    const id = newId('key');
    await this.store.createApiKey(companyId, {
      id,
      integrationId: null,
      scopes: [...new Set(scopes)] as Scope[],
      prefix: key.prefix,
      hash: key.hash,
      createdAt: this.now(),
      expiresAt: null,
    });
    return { id, apiKey: key.plaintext };
  }

  /** A new key for the integration; the old ones keep working for `graceSeconds`. */
  async rotateIntegrationKey(companyId: string, integrationId: string, graceSeconds = DEFAULT_ROTATION_GRACE_SECONDS) {
    if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_ROTATION_GRACE_SECONDS) {
      throw new AppError(
        'invalid_request',
        `The grace period must be a whole number of seconds from 0 to ${MAX_ROTATION_GRACE_SECONDS} (7 days).`,
        { field: 'grace' },
      );
    }
    const now = this.now();
    const key = issueApiKey(this.options.environment);
    const id = newId('key');
    const previousExpiresAt = now + graceSeconds * 1000;
    await this.store.rotateIntegrationKey(
      companyId,
      integrationId,
      { id, integrationId, scopes: [...INTEGRATION_SCOPES], prefix: key.prefix, hash: key.hash, createdAt: now, expiresAt: null },
      previousExpiresAt,
    );
    return { id, apiKey: key.plaintext, previousKeyExpiresAt: previousExpiresAt };
  }

  async revokeKey(companyId: string, keyId: string) {
    const revokedAt = await this.store.revokeApiKey(companyId, keyId, this.now());
    if (revokedAt === undefined) throw notFound('key', keyId);
    return { id: keyId, revokedAt };
  }

  webhookUrl(integrationKey: string): string {
    return `${this.options.baseUrl}/api/webhooks/${integrationKey}`;
  }

  private async requireCompany(companyId: string): Promise<void> {
    if (!isId('cmp', companyId) || !(await this.store.getCompany(companyId))) throw notFound('company', companyId);
  }
}

function validName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_NAME_LENGTH) {
    throw new AppError('invalid_request', `The name must be 1 to ${MAX_NAME_LENGTH} characters.`, { field: 'name' });
  }
  return trimmed;
}

function notFound(kind: string, id: string): AppError {
  return new AppError('not_found', `No ${kind} with id ${id}.`);
}
