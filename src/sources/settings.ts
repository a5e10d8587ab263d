import { newId } from '../domain/ids.js';
import type { SecretBox } from '../domain/secret-box.js';
import { AppError } from '../errors.js';
import type { IntegrationSource, NewSourceSecret } from '../store/store.js';
import { SOURCE_TYPES, type HmacConfig, type ProviderType, type SourceConfig, type SourceType } from '../domain/source-types.js';
import { checkHmacConfig, DEFAULT_HMAC_CONFIG } from './providers/hmac.js';
import { providerFor } from './providers/index.js';

/**
 * What a person sets of a source (API, panel, CLI) checked into what is stored: the type,
 * its settings with defaults filled in, and its signing secret, pasted or generated, sealed.
 */

/** A source as a client asks for it; config and secret in the API's snake_case. */
export interface SourceInput {
  type: string;
  config?: {
    header?: string;
    algorithm?: string;
    encoding?: string;
    prefix?: string;
    timestamp_header?: string | null;
    tolerance_seconds?: number;
    signed_payload?: string;
    username?: string;
    parameter?: string;
  };
  /** Pasted from the provider; absent: generated where the provider takes ours, or waited for where it issues its own. */
  secret?: string;
}

/** A new signing secret: sealed for the store, and the plain value when intake made it (shown once). */
export interface PreparedSecret {
  row: NewSourceSecret;
  /** Set only when generated: the one answer that shows it. */
  generated: string | undefined;
}

export const MAX_SECRET_LENGTH = 1000;
const USERNAME = /^[^:\s]{1,100}$/;
const PARAMETER = /^[A-Za-z0-9_.-]{1,50}$/;

export function validSourceType(type: string): SourceType {
  if (!(SOURCE_TYPES as readonly string[]).includes(type)) {
    throw new AppError('invalid_request', `The source type must be one of ${SOURCE_TYPES.join(', ')}.`, { field: 'source_type' });
  }
  return type as SourceType;
}

/** The type and its settings, defaults filled in; AppError naming the field otherwise. */
export function validSource(input: Pick<SourceInput, 'type' | 'config'>): IntegrationSource {
  const type = validSourceType(input.type);
  const given = input.config ?? {};
  const config: SourceConfig = {};
  if (type === 'hmac') {
    const hmac: HmacConfig = {
      header: given.header ?? DEFAULT_HMAC_CONFIG.header,
      algorithm: (given.algorithm ?? DEFAULT_HMAC_CONFIG.algorithm) as HmacConfig['algorithm'],
      encoding: (given.encoding ?? DEFAULT_HMAC_CONFIG.encoding) as HmacConfig['encoding'],
      prefix: given.prefix ?? DEFAULT_HMAC_CONFIG.prefix,
      timestampHeader: given.timestamp_header ?? null,
      toleranceSeconds: given.tolerance_seconds ?? DEFAULT_HMAC_CONFIG.toleranceSeconds,
      signedPayload: given.signed_payload ?? (given.timestamp_header ? '{timestamp}.{body}' : '{body}'),
    };
    const problem = checkHmacConfig(hmac);
    if (problem) throw new AppError('invalid_request', problem, { field: 'source_config' });
    config.hmac = hmac;
  } else if (type === 'basic') {
    config.username = given.username ?? 'intake';
    if (!USERNAME.test(config.username)) {
      throw new AppError('invalid_request', 'The user name must be 1 to 100 characters, without ":" or spaces.', { field: 'source_config' });
    }
  } else if (type === 'query_token') {
    config.parameter = given.parameter ?? 'token';
    if (!PARAMETER.test(config.parameter)) {
      throw new AppError('invalid_request', 'The parameter name must be 1 to 50 letters, digits, "_", "." or "-".', { field: 'source_config' });
    }
  }
  return { type, config };
}

/**
 * The source's signing secret, sealed: the one pasted (checked against the provider's
 * format), or one generated where the sender takes ours. A provider that issues its own
 * (Stripe, Slack…) needs it pasted.
 */
export function prepareSecret(type: ProviderType, secret: string | undefined, box: SecretBox, now: number): PreparedSecret {
  const provider = providerFor(type);
  if (secret === undefined || secret === '') {
    if (!provider.generatesSecret) {
      throw new AppError('invalid_request', `A ${type} source needs the signing secret ${type} shows you: paste it as "secret".`, {
        field: 'secret',
      });
    }
    const generated = provider.newSecret();
    return { row: sealed(generated, box, now), generated };
  }
  const problem = secret.length > MAX_SECRET_LENGTH ? `The secret must be at most ${MAX_SECRET_LENGTH} characters.` : provider.checkSecret(secret);
  if (problem) throw new AppError('invalid_request', problem, { field: 'secret' });
  return { row: sealed(secret, box, now), generated: undefined };
}

/**
 * The first secret of a source being set up: as prepareSecret, except that a provider which
 * issues its own secret (Stripe shows it only once the endpoint exists, with our address)
 * may go without one for now. Undefined then: the source waits for it, and refuses signed
 * requests with that reason until it is pasted (POST …/source-secrets).
 */
export function prepareFirstSecret(type: ProviderType, secret: string | undefined, box: SecretBox, now: number): PreparedSecret | undefined {
  if ((secret === undefined || secret === '') && !providerFor(type).generatesSecret) return undefined;
  return prepareSecret(type, secret, box, now);
}

function sealed(secret: string, box: SecretBox, now: number): NewSourceSecret {
  return { id: newId('sec'), sealed: box.seal(secret), createdAt: now };
}

/** What the audit log and API show of a source: never a secret. */
export function describeSource(source: IntegrationSource) {
  return { type: source.type, config: source.config };
}
