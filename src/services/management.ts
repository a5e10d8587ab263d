import { checkRedaction, type Redaction } from '../domain/redaction.js';
import type { Environment } from '../config.js';
import {
  DEFAULT_ROTATION_GRACE_SECONDS,
  MANAGEMENT_SCOPES,
  MAX_ROTATION_GRACE_SECONDS,
  issueApiKey,
  validIntegrationScopes,
  type IntegrationScope,
  type Scope,
} from '../domain/api-key.js';
import { isId, newId, newIntegrationKey, newSequencedId } from '../domain/ids.js';
import { DEFAULT_PASSWORD_HASH_COST, MIN_PASSWORD_LENGTH, hashPassword } from '../domain/password.js';
import type { SecretBox } from '../domain/secret-box.js';
import { AppError } from '../errors.js';
import { prepareFirstSecret, prepareSecret, validSource, type SourceInput } from '../sources/settings.js';
import {
  DEFAULT_RETENTION_DAYS,
  MAX_RETENTION_DAYS,
  ROLES,
  type Actor,
  type AuditEvent,
  type Company,
  type CompanyChanges,
  type Integration,
  type IntegrationChanges,
  type Member,
  type MemberChange,
  type NewUser,
  type Role,
  type Store,
} from '../store/store.js';

export interface ManagementOptions {
  environment: Environment;
  baseUrl: string;
  defaultBodyLimit: number;
  /** Seals sources' signing secrets; without it, only `api_key` sources can be set. */
  secrets?: SecretBox;
  /** scrypt's log2 N for the passwords addUser sets (config.passwordHashCost); absent, the default. */
  passwordHashCost?: number;
}

export interface NewIntegrationInput {
  name: string;
  description?: string;
  /** Default true; false makes it ready to configure before it takes webhooks. */
  enabled?: boolean;
  bodyLimitBytes?: number;
  rateLimitPerMinute?: number | null;
  /** Of its first key; all of them when absent (see validIntegrationScopes). */
  keyScopes?: readonly IntegrationScope[];
  /** Absent: `api_key`, the key alone. */
  source?: SourceInput;
  /** What to replace before each webhook is stored; absent or null: nothing. */
  redaction?: { paths?: unknown; headers?: unknown; mode?: unknown } | null;
  /** Days its webhooks are kept, at most the company's retention; absent or null: the company's. */
  retentionDays?: number | null;
}

/** How long a rotated source secret keeps verifying beside its successor, unless told. */
export const DEFAULT_SECRET_OVERLAP_SECONDS = 24 * 60 * 60;

const MAX_NAME_LENGTH = 200;
const MAX_DESCRIPTION_LENGTH = 2000;
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * The operations that change a company's setup, shared by the CLI, the management API and
 * the panel: validation, key issuing, the store calls and their audit records in one
 * place. One instance acts for one actor (a user, a management key, the CLI's operator).
 */
export class Management {
  constructor(
    private readonly store: Store,
    private readonly options: ManagementOptions,
    private readonly actor: Actor,
    private readonly now: () => number = Date.now,
  ) {}

  /** The audit record of a change made now by this instance's actor. */
  protected audit(action: string, targetType: string, targetId: string, change: { before?: unknown; after?: unknown } = {}): AuditEvent {
    return { actor: this.actor, action, targetType, targetId, at: this.now(), ...change };
  }

  async createCompany(name: string): Promise<Company> {
    const company = { id: newId('cmp'), name: validName(name), retentionDays: DEFAULT_RETENTION_DAYS, createdAt: this.now() };
    await this.store.createCompany(company, this.audit('company.create', 'company', company.id, { after: company }));
    return { ...company, requireTwoFactor: false };
  }

  async addUser(companyId: string, email: string, password: string, role: string): Promise<{ id: string; email: string }> {
    await this.requireCompany(companyId);
    const validRole = this.validRole(role);
    const user = await this.newUser(newId('usr'), email, password);
    const added = await this.store.addUser(
      companyId,
      user,
      validRole,
      this.audit('member.add', 'user', user.id, { after: { email: user.email, role: validRole } }),
    );
    return { id: added.id, email: added.email };
  }

  /**
   * First-run setup from the one-time link: the company and its first owner (`ownerId`,
   * who is also this instance's actor), whose password `hash` hashes (the API's, within the
   * sign-in guard's bounds). AppError setup_link_invalid when the token is wrong, used or
   * expired; nothing is stored then.
   */
  async completeSetup(
    tokenHash: string,
    input: { companyName: string; email: string; password: string; ownerId: string },
    hash: (password: string) => Promise<string>,
  ) {
    const now = this.now();
    // Checked before the password is hashed, so a stream of guesses costs no CPU; the
    // store checks again atomically when it uses the token up.
    if (!(await this.store.isSetupTokenUsable(tokenHash, now))) throw new AppError('setup_link_invalid');
    const company = { id: newId('cmp'), name: validName(input.companyName), retentionDays: DEFAULT_RETENTION_DAYS, createdAt: now };
    const owner = await this.newUser(input.ownerId, input.email, input.password, hash);
    const done = await this.store.completeSetup(tokenHash, now, company, owner, {
      company: this.audit('company.create', 'company', company.id, { after: company }),
      owner: this.audit('member.add', 'user', owner.id, { after: { email: owner.email, role: 'owner' } }),
    });
    if (!done) throw new AppError('setup_link_invalid');
    return { company, owner: { id: owner.id, email: owner.email } };
  }

  /** A new account's row: the email checked and lower-cased, the password long enough and hashed. */
  private async newUser(
    id: string,
    email: string,
    password: string,
    hash = (chosen: string) => hashPassword(chosen, this.options.passwordHashCost ?? DEFAULT_PASSWORD_HASH_COST),
  ): Promise<NewUser> {
    const normalized = email.trim().toLowerCase();
    if (!EMAIL_PATTERN.test(normalized)) throw new AppError('invalid_request', `"${email}" is not an email address.`, { field: 'email' });
    if (password.length < MIN_PASSWORD_LENGTH) {
      throw new AppError('invalid_request', `The password must be at least ${MIN_PASSWORD_LENGTH} characters.`, { field: 'password' });
    }
    return { id, email: normalized, passwordHash: await hash(password), createdAt: this.now() };
  }

  async createIntegration(companyId: string, input: NewIntegrationInput) {
    const company = await this.requireCompany(companyId);
    const now = this.now();
    const source = validSource(input.source ?? { type: 'api_key' });
    const secret = source.type === 'api_key' ? undefined : prepareFirstSecret(source.type, input.source?.secret, this.box(), now);
    const integration: Integration = {
      id: newSequencedId('int', now),
      companyId,
      integrationKey: newIntegrationKey(),
      name: validName(input.name),
      description: input.description ?? '',
      enabled: input.enabled ?? true,
      bodyLimitBytes: input.bodyLimitBytes ?? this.options.defaultBodyLimit,
      rateLimitPerMinute: input.rateLimitPerMinute ?? null,
      createdAt: now,
      updatedAt: now,
      source,
      redaction: validRedaction(input.redaction),
      retentionDays: validIntegrationRetention(input.retentionDays, company),
    };
    const keyScopes = validIntegrationScopes(input.keyScopes);
    const key = issueApiKey(this.options.environment);
    const keyId = newSequencedId('key', now);
    await this.store.createIntegration(
      companyId,
      integration,
      {
        id: keyId,
        integrationId: integration.id,
        scopes: keyScopes,
        prefix: key.prefix,
        hash: key.hash,
        createdAt: now,
        expiresAt: null,
      },
      this.audit('integration.create', 'integration', integration.id, {
        after: { ...integration, firstKeyId: keyId, firstKeyScopes: keyScopes, ...(secret && { sourceSecretId: secret.row.id }) },
      }),
      secret?.row,
    );
    return {
      integration,
      keyId,
      apiKey: key.plaintext,
      webhookUrl: this.webhookUrl(integration.integrationKey),
      sourceSecretId: secret?.row.id,
      sourceSecret: secret?.generated,
      awaitingSecret: source.type !== 'api_key' && secret === undefined,
    };
  }

  /**
   * Sets how the integration's address proves its requests. A new provider type, or a
   * secret given, replaces the secrets at once (the old provider's secrets mean nothing to
   * the new one); the same type with new settings keeps them. `api_key` ends them all. A
   * provider that issues its own secret may be chosen without it: the source then waits for
   * it (`awaitingSecret`), as a new integration's may.
   */
  async setSource(companyId: string, integrationId: string, input: SourceInput) {
    const before = await this.store.getIntegration(companyId, integrationId);
    if (!before) throw notFound('integration', integrationId);
    const now = this.now();
    const source = validSource(input);
    const replaced = source.type !== before.source.type || (input.secret !== undefined && input.secret !== '');
    const secret = source.type === 'api_key' || !replaced ? undefined : prepareFirstSecret(source.type, input.secret, this.box(), now);
    const updated = await this.store.updateIntegration(
      companyId,
      integrationId,
      { source },
      now,
      this.audit('integration.source', 'integration', integrationId, { ...(secret && { after: { sourceSecretId: secret.row.id } }) }),
      source.type === 'api_key' || replaced ? { add: secret?.row ?? null, othersExpireAt: now } : undefined,
    );
    if (!updated) throw notFound('integration', integrationId);
    const awaitingSecret =
      source.type !== 'api_key' && secret === undefined && (replaced || (await this.store.listSourceSecrets(companyId, integrationId, now)).length === 0);
    return { integration: updated.after, sourceSecretId: secret?.row.id, sourceSecret: secret?.generated, awaitingSecret };
  }

  /** A new signing secret; the others keep verifying for `overlapSeconds` (0 to 7 days), so senders can move over. */
  async rotateSourceSecret(companyId: string, integrationId: string, secret: string | undefined, overlapSeconds = DEFAULT_SECRET_OVERLAP_SECONDS) {
    if (!Number.isInteger(overlapSeconds) || overlapSeconds < 0 || overlapSeconds > MAX_ROTATION_GRACE_SECONDS) {
      throw new AppError('invalid_request', `The overlap must be a whole number of seconds from 0 to ${MAX_ROTATION_GRACE_SECONDS} (7 days).`, {
        field: 'previous_expires_in_seconds',
      });
    }
    const integration = await this.store.getIntegration(companyId, integrationId);
    if (!integration) throw notFound('integration', integrationId);
    const type = integration.source.type;
    if (type === 'api_key') throw new AppError('conflict', 'This integration takes its API key only: it has no signing secret to rotate.');
    const now = this.now();
    const prepared = prepareSecret(type, secret, this.box(), now);
    const othersExpireAt = now + overlapSeconds * 1000;
    const done = await this.store.rotateSourceSecret(
      companyId,
      integrationId,
      { add: prepared.row, othersExpireAt },
      this.audit('source_secret.rotate', 'integration', integrationId, {
        after: { sourceSecretId: prepared.row.id, previousSecretsExpireAt: othersExpireAt },
      }),
    );
    if (!done) throw notFound('integration', integrationId);
    return { id: prepared.row.id, createdAt: now, secret: prepared.generated, previousSecretsExpireAt: othersExpireAt };
  }

  /** Stops one signing secret now; the source's last live secret is refused (change the source type instead). */
  async endSourceSecret(companyId: string, integrationId: string, secretId: string): Promise<void> {
    const now = this.now();
    const live = await this.store.listSourceSecrets(companyId, integrationId, now);
    if (!live.some((secret) => secret.id === secretId)) throw notFound('source secret', secretId);
    if (live.length === 1) {
      throw new AppError('conflict', "This is the source's only live secret: rotate to a new one first, or change the source type.");
    }
    const ended = await this.store.endSourceSecret(companyId, integrationId, secretId, now, this.audit('source_secret.end', 'integration', integrationId, { after: { sourceSecretId: secretId } }));
    if (!ended) throw notFound('source secret', secretId);
  }

  /** Records that a signed test was sent to the integration's address (it stores a webhook like any other). */
  async recordSourceTest(companyId: string, integrationId: string, result: { status: number; uuid: string | undefined }): Promise<void> {
    await this.store.recordAudit(companyId, this.audit('integration.source_test', 'integration', integrationId, { after: result }));
  }

  private box(): SecretBox {
    if (!this.options.secrets) throw new Error('Management needs the secrets box to set a provider source');
    return this.options.secrets;
  }

  async setIntegrationEnabled(companyId: string, integrationId: string, enabled: boolean) {
    const changed = await this.store.setIntegrationEnabled(
      companyId,
      integrationId,
      enabled,
      this.now(),
      // The store records the integration before and after.
      this.audit(enabled ? 'integration.enable' : 'integration.disable', 'integration', integrationId),
    );
    if (!changed) throw notFound('integration', integrationId);
    return { id: integrationId, enabled };
  }

  /**
   * Changes what `changes` names; the integration as it is now. A change of `enabled` alone
   * is recorded as `integration.enable` or `integration.disable`, as the CLI's are, so the
   * audit log reads the same whichever way it was made.
   */
  async updateIntegration(companyId: string, integrationId: string, changes: IntegrationChanges): Promise<Integration> {
    const valid: IntegrationChanges = { ...changes };
    if (changes.name !== undefined) valid.name = validName(changes.name);
    if (changes.redaction !== undefined) valid.redaction = validRedaction(changes.redaction);
    if (changes.retentionDays !== undefined) {
      valid.retentionDays = validIntegrationRetention(changes.retentionDays, await this.requireCompany(companyId));
    }
    if (changes.description !== undefined && changes.description.length > MAX_DESCRIPTION_LENGTH) {
      throw new AppError('invalid_request', `The description must be at most ${MAX_DESCRIPTION_LENGTH} characters.`, {
        field: 'description',
      });
    }
    const updated = await this.store.updateIntegration(
      companyId,
      integrationId,
      valid,
      this.now(),
      this.audit(integrationUpdateAction(valid), 'integration', integrationId),
    );
    if (!updated) throw notFound('integration', integrationId);
    return updated.after;
  }

  async deleteIntegration(companyId: string, integrationId: string): Promise<void> {
    const deleted = await this.store.deleteIntegration(
      companyId,
      integrationId,
      this.now(),
      this.audit('integration.delete', 'integration', integrationId),
    );
    if (!deleted) throw notFound('integration', integrationId);
  }

  /**
   * `write` stores the key and its audit record; by default the store's createApiKey. A
   * command-line sign-in passes one that writes the key only if it marks the sign-in issued
   * in the same transaction (src/api/cli-logins.ts).
   */
  async createManagementKey(companyId: string, scopes: string[], name = '', write: Store['createApiKey'] = (...args) => this.store.createApiKey(...args)) {
    await this.requireCompany(companyId);
    const keyName = validKeyName(name);
    const unknown = scopes.filter((s) => !(MANAGEMENT_SCOPES as readonly string[]).includes(s));
    if (scopes.length === 0 || unknown.length > 0) {
      throw new AppError(
        'invalid_request',
        `A management key's scopes are one or more of ${MANAGEMENT_SCOPES.join(', ')}${unknown.length ? `; not ${unknown.join(', ')}` : ''}.`,
        { field: 'scope' },
      );
    }
    const key = issueApiKey(this.options.environment);
    const now = this.now();
    const id = newSequencedId('key', now);
    const uniqueScopes = [...new Set(scopes)] as Scope[];
    await write(
      companyId,
      {
        id,
        integrationId: null,
        name: keyName,
        scopes: uniqueScopes,
        prefix: key.prefix,
        hash: key.hash,
        createdAt: now,
        expiresAt: null,
      },
      this.audit('management_key.create', 'key', id, { after: { name: keyName, scopes: uniqueScopes, prefix: key.prefix } }),
    );
    return { id, apiKey: key.plaintext };
  }

  /** A new key for the integration (with `scopes`, by default all); the old ones keep working for `graceSeconds`. */
  async rotateIntegrationKey(
    companyId: string,
    integrationId: string,
    graceSeconds = DEFAULT_ROTATION_GRACE_SECONDS,
    scopes?: readonly IntegrationScope[],
  ) {
    if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_ROTATION_GRACE_SECONDS) {
      throw new AppError(
        'invalid_request',
        `The grace period must be a whole number of seconds from 0 to ${MAX_ROTATION_GRACE_SECONDS} (7 days).`,
        { field: 'grace' },
      );
    }
    const keyScopes = validIntegrationScopes(scopes);
    const now = this.now();
    const key = issueApiKey(this.options.environment);
    const id = newSequencedId('key', now);
    const previousExpiresAt = now + graceSeconds * 1000;
    await this.store.rotateIntegrationKey(
      companyId,
      integrationId,
      { id, integrationId, scopes: keyScopes, prefix: key.prefix, hash: key.hash, createdAt: now, expiresAt: null },
      previousExpiresAt,
      this.audit('key.rotate', 'integration', integrationId, {
        after: { newKeyId: id, prefix: key.prefix, scopes: keyScopes, previousKeysExpireAt: previousExpiresAt },
      }),
    );
    return { id, apiKey: key.plaintext, previousKeyExpiresAt: previousExpiresAt };
  }

  async revokeKey(companyId: string, keyId: string) {
    const revokedAt = await this.store.revokeApiKey(companyId, keyId, this.now(), this.audit('key.revoke', 'key', keyId));
    if (revokedAt === undefined) throw notFound('key', keyId);
    return { id: keyId, revokedAt };
  }

  // --- keys and management keys ---
  /** One more key for the integration beside its others, e.g. for a second sender; with `scopes`, by default all. */
  async createIntegrationKey(
    companyId: string,
    integrationId: string,
    input: { name?: string; expiresAt?: number | null; scopes?: readonly IntegrationScope[] } = {},
  ) {
    const now = this.now();
    const name = validKeyName(input.name ?? '');
    const expiresAt = input.expiresAt ?? null;
    if (expiresAt !== null && expiresAt <= now) {
      throw new AppError('invalid_request', 'expires_at must be in the future.', { field: 'expires_at' });
    }
    const scopes = validIntegrationScopes(input.scopes);
    const key = issueApiKey(this.options.environment);
    const id = newSequencedId('key', now);
    await this.store.createApiKey(
      companyId,
      { id, integrationId, name, scopes, prefix: key.prefix, hash: key.hash, createdAt: now, expiresAt },
      this.audit('key.create', 'key', id, { after: { integrationId, name, scopes, prefix: key.prefix, expiresAt } }),
    );
    return { id, apiKey: key.plaintext };
  }

  /** Revokes a key of this integration (not of another, nor a management key); the key as it is now. */
  async revokeIntegrationKey(companyId: string, integrationId: string, keyId: string) {
    const at = this.now();
    const audit = this.audit('key.revoke', 'key', keyId, { after: { integrationId, revokedAt: at } });
    const key = await this.store.revokeKeyOf(companyId, integrationId, keyId, at, audit);
    if (!key) throw notFound('key', keyId);
    return key;
  }

  /** Revokes one of the company's management keys (never an integration's key); the key as it is now. */
  async revokeManagementKey(companyId: string, keyId: string) {
    const at = this.now();
    const audit = this.audit('management_key.revoke', 'key', keyId, { after: { revokedAt: at } });
    const key = await this.store.revokeKeyOf(companyId, null, keyId, at, audit);
    if (!key) throw notFound('management key', keyId);
    return key;
  }

  // --- members and company settings ---

  /** Gives a member another role; the company always keeps an owner. */
  async changeMemberRole(companyId: string, userId: string, role: string): Promise<Member> {
    const valid = this.validRole(role);
    const change = await this.store.changeMember(companyId, userId, valid, this.audit('member.role_change', 'user', userId));
    return { ...this.memberChanged(change, userId).before, role: valid };
  }

  /**
   * Ends a membership; the company always keeps an owner. The person's sessions go on (a
   * session is a user's, not a company's), but every request checks membership, so the
   * access ends with this call.
   */
  async removeMember(companyId: string, userId: string): Promise<void> {
    this.memberChanged(await this.store.changeMember(companyId, userId, null, this.audit('member.remove', 'user', userId)), userId);
  }

  /** Changes what `changes` names; the company as it is now. */
  async updateCompany(companyId: string, changes: CompanyChanges): Promise<Company> {
    const valid: CompanyChanges = { ...changes };
    if (changes.name !== undefined) valid.name = validName(changes.name);
    const days = changes.retentionDays;
    if (days !== undefined && (!Number.isInteger(days) || days < 1 || days > MAX_RETENTION_DAYS)) {
      throw new AppError('invalid_request', `The retention must be a whole number of days from 1 to ${MAX_RETENTION_DAYS}.`, {
        field: 'retention_days',
      });
    }
    if (changes.requireTwoFactor === true && !(await this.actorHasTwoFactor())) {
      throw new AppError('conflict', 'Turn on two-factor sign-in for your own account first (under Account), then require it of everyone.', {
        field: 'require_two_factor',
      });
    }
    const updated = await this.store.updateCompany(companyId, valid, this.audit('company.update', 'company', companyId));
    if (!updated) throw notFound('company', companyId);
    return updated.after;
  }

  /** Whether the person making this change signs in with a second factor (keys and the CLI do not sign in). */
  private async actorHasTwoFactor(): Promise<boolean> {
    if (this.actor.type !== 'user' || this.actor.id === null) return false;
    return (await this.store.findUserById(this.actor.id))?.totpSecret != null;
  }

  private memberChanged(change: MemberChange, userId: string): { before: Member } {
    if (change.kind === 'not_found') throw notFound('member', userId);
    if (change.kind === 'last_owner') {
      throw new AppError('conflict', 'A company must keep at least one owner: make another member an owner first.');
    }
    return change;
  }

  private validRole(role: string): Role {
    if (!ROLES.includes(role as Role)) throw new AppError('invalid_request', `The role must be one of ${ROLES.join(', ')}.`, { field: 'role' });
    return role as Role;
  }

  webhookUrl(integrationKey: string): string {
    return `${this.options.baseUrl}/api/webhooks/${integrationKey}`;
  }

  private async requireCompany(companyId: string): Promise<Company> {
    const company = isId('cmp', companyId) ? await this.store.getCompany(companyId) : undefined;
    if (!company) throw notFound('company', companyId);
    return company;
  }
}

function validName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_NAME_LENGTH) {
    throw new AppError('invalid_request', `The name must be 1 to ${MAX_NAME_LENGTH} characters.`, { field: 'name' });
  }
  return trimmed;
}

/** A key's name: optional, so '' is fine; trimmed. */
function validKeyName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length > MAX_NAME_LENGTH) {
    throw new AppError('invalid_request', `The name must be at most ${MAX_NAME_LENGTH} characters.`, { field: 'name' });
  }
  return trimmed;
}

/** The audit action of an integration change: enabling or disabling when that is all it does. */
function integrationUpdateAction(changes: IntegrationChanges): string {
  const fields = Object.entries(changes).filter(([, value]) => value !== undefined);
  if (fields.length === 1 && fields[0]![0] === 'enabled') return changes.enabled ? 'integration.enable' : 'integration.disable';
  return 'integration.update';
}

function notFound(kind: string, id: string): AppError {
  return new AppError('not_found', `No ${kind} with id ${id}.`);
}

/**
 * An integration's own retention, checked (AppError naming `retention_days`): whole days, no
 * longer than its company's, which the purge would keep to anyway; null for the company's.
 */
function validIntegrationRetention(days: number | null | undefined, company: Company): number | null {
  if (days === undefined || days === null) return null;
  if (!Number.isInteger(days) || days < 1 || days > company.retentionDays) {
    throw new AppError(
      'invalid_request',
      `An integration's retention must be a whole number of days from 1 to the company's retention, ${company.retentionDays} days (null: the company's).`,
      { field: 'retention_days' },
    );
  }
  return days;
}

/** What an integration redacts, checked (AppError naming `redaction`); null for nothing asked. */
function validRedaction(input: { paths?: unknown; headers?: unknown; mode?: unknown } | null | undefined): Redaction | null {
  if (input === undefined || input === null) return null;
  const checked = checkRedaction(input);
  if (typeof checked === 'string') throw new AppError('invalid_request', checked, { field: 'redaction' });
  return checked.paths.length === 0 && checked.headers.length === 0 ? null : checked;
}
