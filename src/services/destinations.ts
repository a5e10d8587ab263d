import type { Environment } from '../config.js';
import type { AddressGuard } from '../destinations/address-guard.js';
import { newSigningSecret } from '../destinations/signing.js';
import { MAX_ROTATION_GRACE_SECONDS } from '../domain/api-key.js';
import { validDestinationHeaders } from '../domain/destination-headers.js';
import { validEventPatterns } from '../domain/event-patterns.js';
import { isId, newSequencedId } from '../domain/ids.js';
import { NO_RULES, validRules } from '../domain/rules/rules.js';
import type { SecretBox } from '../domain/secret-box.js';
import { AppError } from '../errors.js';
import type { Actor, AuditEvent, Destination, DestinationChanges, NewDestination, Store } from '../store/store.js';

export interface DestinationOptions {
  environment: Environment;
  /** Seals each destination's signing secrets and its headers' values. */
  secrets: SecretBox;
  /** Judges URLs at creation and change (server-side request forgery); attempts judge again. */
  addressGuard: AddressGuard;
  /** The service's own public address (INTAKE_BASE_URL): a destination there would deliver to intake itself. */
  baseUrl: string;
  /**
   * Compiles a transformation in the sandbox: what is wrong with it (with its line), or null.
   * Without it, code is saved unchecked (its errors come at the attempts).
   */
  checkTransformation?: (code: string) => Promise<string | null>;
}

/** A destination as a client asks for it (the API's fields, in camelCase). */
export interface DestinationInput {
  name: string;
  url: string;
  /** Null or absent: every integration of the company. */
  integrationIds?: string[] | null;
  eventPatterns?: string[];
  headers?: Record<string, string>;
  timeoutMs?: number;
  ratePerSecond?: number | null;
  maxInFlight?: number;
  /** As the API takes them (src/domain/rules/rules.ts's validRules); null or absent: none. */
  rules?: unknown;
}

/** What a change may touch; `headers` replaces the whole set. */
export type DestinationEdit = Partial<DestinationInput>;

export const DEFAULT_TIMEOUT_MS = 15_000;
export const DEFAULT_MAX_IN_FLIGHT = 100;
/**
 * Requests a second of a destination created without a rate: a receiver that never asked
 * for a flood is not sent the whole backlog at once after an outage. Null, asked for, is no limit.
 */
export const DEFAULT_RATE_PER_SECOND = 100;
/** How long the previous signing secret keeps signing beside the new one, unless told. */
export const DEFAULT_PREVIOUS_SECRET_SECONDS = 24 * 60 * 60;
export const MAX_INTEGRATION_IDS = 100;
/**
 * Live destinations of one company at most: every webhook the company receives is matched
 * against each of them inside the commit that stores it (the outbox), so the count bounds
 * what one tenant's webhooks cost the commit path everyone shares.
 */
export const MAX_DESTINATIONS = 50;
const MAX_NAME_LENGTH = 200;

/** The bounds of each number a destination has: the message and the field of a refusal. */
const NUMBERS = {
  timeoutMs: { field: 'timeout_ms', min: 1000, max: 60_000, unit: 'milliseconds' },
  ratePerSecond: { field: 'rate_per_second', min: 1, max: 10_000, unit: 'requests a second' },
  maxInFlight: { field: 'max_in_flight', min: 1, max: 1000, unit: 'requests' },
} as const;

/**
 * The changes to a company's destinations, shared by the management API, the CLI and the
 * panel, as `Management` is for integrations: validation, sealing, the store calls and their
 * audit records in one place (replays and sends: redeliveries.ts). Secrets are sealed before
 * anything is stored and every change is one store call, so nothing is half-stored.
 */
export class DestinationManagement {
  constructor(
    private readonly store: Store,
    private readonly options: DestinationOptions,
    private readonly actor: Actor,
    private readonly now: () => number = Date.now,
  ) {}

  /** The audit record of a change made now by this instance's actor (as Management writes them). */
  private audit(action: string, targetType: string, targetId: string, change: { before?: unknown; after?: unknown } = {}): AuditEvent {
    return { actor: this.actor, action, targetType, targetId, at: this.now(), ...change };
  }

  /** A new destination and its signing secret, which is shown in this answer only. */
  async create(companyId: string, input: DestinationInput): Promise<{ destination: Destination; signingSecret: string }> {
    if (!isId('cmp', companyId) || !(await this.store.getCompany(companyId))) throw notFound('company', companyId);
    const headers = this.sealedHeaders(input.headers ?? {});
    const settings = await this.validSettings(companyId, {
      ...input,
      eventPatterns: input.eventPatterns ?? ['*'],
      timeoutMs: input.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      // Absent is the default; null, asked for, is no limit.
      ratePerSecond: input.ratePerSecond === undefined ? DEFAULT_RATE_PER_SECOND : input.ratePerSecond,
      maxInFlight: input.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
    });
    const signingSecret = newSigningSecret();
    const now = this.now();
    const destination: NewDestination = {
      id: newSequencedId('dst', now),
      name: settings.name!,
      url: settings.url!,
      integrationIds: settings.integrationIds ?? null,
      eventPatterns: settings.eventPatterns!,
      headersSealed: headers.sealed,
      headerNames: headers.names,
      timeoutMs: settings.timeoutMs!,
      ratePerSecond: settings.ratePerSecond ?? null,
      maxInFlight: settings.maxInFlight!,
      rules: settings.rules ?? NO_RULES,
      secretSealed: this.options.secrets.seal(signingSecret),
      createdAt: now,
    };
    const { headersSealed: _headers, secretSealed: _secret, ...shown } = destination;
    const created = await this.store.createDestination(
      companyId,
      destination,
      this.audit('destination.create', 'destination', destination.id, { after: shown }),
      MAX_DESTINATIONS,
    );
    if (!created) throw new AppError('conflict', `A company has at most ${MAX_DESTINATIONS} destinations; delete one first.`);
    return { destination: created, signingSecret };
  }

  /**
   * Changes what `edit` names; the destination as it is now. A URL of another origin drops
   * the headers unless `edit` sets them (the store judges it against the stored URL).
   */
  async update(companyId: string, destinationId: string, edit: DestinationEdit): Promise<Destination> {
    const headers = edit.headers === undefined ? undefined : this.sealedHeaders(edit.headers);
    const changes: DestinationChanges = { ...(await this.validSettings(companyId, edit)), ...(headers && { headers }) };
    // The store records the destination before and after: names of headers, never values.
    return this.changed(companyId, destinationId, changes, 'destination.update');
  }

  /** Pausing holds its deliveries; resuming sends them again, and re-enables one intake disabled. */
  async setPaused(companyId: string, destinationId: string, paused: boolean): Promise<Destination> {
    return this.changed(companyId, destinationId, { status: paused ? 'paused' : 'active' }, paused ? 'destination.pause' : 'destination.resume');
  }

  /** Deletes it; its pending and held deliveries are cancelled. */
  async remove(companyId: string, destinationId: string): Promise<void> {
    const deleted = await this.store.deleteDestination(companyId, destinationId, this.now(), this.audit('destination.delete', 'destination', destinationId));
    if (!deleted) throw notFound('destination', destinationId);
  }

  /** A new signing secret (shown once); the previous one also signs for `previousExpiresInSeconds` (0 to 7 days). */
  async rotateSecret(companyId: string, destinationId: string, previousExpiresInSeconds = DEFAULT_PREVIOUS_SECRET_SECONDS) {
    if (!Number.isInteger(previousExpiresInSeconds) || previousExpiresInSeconds < 0 || previousExpiresInSeconds > MAX_ROTATION_GRACE_SECONDS) {
      throw new AppError('invalid_request', `The overlap must be a whole number of seconds from 0 to ${MAX_ROTATION_GRACE_SECONDS} (7 days).`, {
        field: 'previous_expires_in_seconds',
      });
    }
    const signingSecret = newSigningSecret();
    const previousExpiresAt = this.now() + previousExpiresInSeconds * 1000;
    const secret = { sealed: this.options.secrets.seal(signingSecret), previousExpiresAt };
    await this.changed(companyId, destinationId, { secret }, 'destination.secret_rotate');
    return { signingSecret, previousSecretExpiresAt: previousExpiresAt };
  }

  private async changed(companyId: string, destinationId: string, changes: DestinationChanges, action: string): Promise<Destination> {
    const updated = await this.store.updateDestination(companyId, destinationId, changes, this.now(), this.audit(action, 'destination', destinationId));
    if (!updated) throw notFound('destination', destinationId);
    return updated.after;
  }

  /**
   * The settings `input` names but headers (sealedHeaders checks those), checked: the cheap
   * rules first, then the integrations, then the URL, whose name is resolved.
   */
  private async validSettings(companyId: string, input: DestinationEdit) {
    const valid: Omit<DestinationChanges, 'headers' | 'secret' | 'status'> = {};
    if (input.name !== undefined) valid.name = validName(input.name);
    if (input.eventPatterns !== undefined) valid.eventPatterns = validEventPatterns(input.eventPatterns);
    if (input.timeoutMs !== undefined) valid.timeoutMs = validNumber('timeoutMs', input.timeoutMs);
    if (input.ratePerSecond !== undefined) valid.ratePerSecond = input.ratePerSecond === null ? null : validNumber('ratePerSecond', input.ratePerSecond);
    if (input.maxInFlight !== undefined) valid.maxInFlight = validNumber('maxInFlight', input.maxInFlight);
    if (input.rules !== undefined) valid.rules = await this.validRulesOf(input.rules);
    if (input.integrationIds !== undefined) valid.integrationIds = await this.validIntegrations(companyId, input.integrationIds);
    if (input.url !== undefined) {
      refuseOwnOrigin(input.url, this.options.baseUrl);
      await this.options.addressGuard.checkUrl(input.url, this.options.environment);
      valid.url = input.url;
    }
    return valid;
  }

  /**
   * The rules checked, their transformation compiled: code that does not compile or defines
   * no transform would fail every attempt until its deliveries are dead letters.
   */
  private async validRulesOf(input: unknown) {
    const rules = validRules(input);
    const code = rules.transformation?.code;
    const problem = code === undefined ? null : ((await this.options.checkTransformation?.(code)) ?? null);
    if (problem !== null) throw new AppError('invalid_request', `rules.transformation.code: ${problem}`, { field: 'rules.transformation.code' });
    return rules;
  }

  /** Live integrations of the company, each once; null stays null (every integration). */
  private async validIntegrations(companyId: string, ids: string[] | null): Promise<string[] | null> {
    if (ids === null) return null;
    const unique = [...new Set(ids)];
    if (unique.length === 0 || unique.length > MAX_INTEGRATION_IDS) {
      throw new AppError('invalid_request', `integration_ids must name 1 to ${MAX_INTEGRATION_IDS} integrations, or be null for all of them.`, {
        field: 'integration_ids',
      });
    }
    for (const id of unique) {
      if (!isId('int', id) || !(await this.store.getIntegration(companyId, id))) {
        throw new AppError('invalid_request', `integration_ids: no integration with id ${id}.`, { field: 'integration_ids' });
      }
    }
    return unique;
  }

  /** The headers sealed as one JSON object (null for none), and their names in clear. */
  private sealedHeaders(headers: Record<string, string>): { sealed: string | null; names: string[] } {
    const valid = validDestinationHeaders(headers);
    const names = Object.keys(valid);
    return { sealed: names.length === 0 ? null : this.options.secrets.seal(JSON.stringify(valid)), names };
  }
}

function validName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_NAME_LENGTH) {
    throw new AppError('invalid_request', `The name must be 1 to ${MAX_NAME_LENGTH} characters.`, { field: 'name' });
  }
  return trimmed;
}

function validNumber(which: keyof typeof NUMBERS, value: number): number {
  const { field, min, max, unit } = NUMBERS[which];
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new AppError('invalid_request', `${field} must be a whole number from ${min} to ${max} (${unit}).`, { field });
  }
  return value;
}

/**
 * A destination at intake's own public address would send each webhook back to a webhook
 * address: a loop that intake would refuse at every attempt (the delivery's own marks,
 * src/domain/delivery-loop.ts), refused here before any is made.
 */
function refuseOwnOrigin(url: string, baseUrl: string): void {
  const origin = URL.parse(url)?.origin;
  if (origin !== undefined && origin === new URL(baseUrl).origin) {
    throw new AppError('invalid_request', `The URL is this intake's own address (${origin}): a destination there would deliver intake's webhooks back to itself.`, {
      field: 'url',
    });
  }
}

function notFound(kind: string, id: string): AppError {
  return new AppError('not_found', `No ${kind} with id ${id}.`);
}
