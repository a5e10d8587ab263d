import type { Environment } from '../config.js';
import { hashIfWellFormed, hashesEqual, type Scope } from '../domain/api-key.js';
import { AppError } from '../errors.js';
import type { IntegrationRoute, KeyGrant } from '../store/store.js';
import type { KeyCache } from './key-cache.js';

export interface AuthAttempt {
  /** The X-API-Key header as sent. */
  apiKey: string | undefined;
  /** The last segment of the address. */
  integrationKey: string;
  scope: Scope;
  /** Sending needs an enabled integration; reading its log does not. */
  requireEnabled: boolean;
  now: number;
}

/** What is known of a request after authentication, whether it passed or not. */
export interface AuthResult {
  integration: IntegrationRoute | undefined;
  /**
   * The key to name in this address's request log: set for a live key of the address's
   * own company, never for another company's (its id is that company's data).
   */
  keyId: string | null;
  /** Set when the request is refused. */
  error: AppError | undefined;
}

/**
 * Decides who may do what to an integration's address, from the header alone and before
 * the body is read. Malformed keys, bad checksums and other environments' keys are refused
 * without a lookup; everything else is answered from the key cache.
 *
 * A valid key aimed at an address it does not own gets 403, also when the address names
 * no integration at all, so a key holder cannot tell other companies' addresses from
 * unused ones.
 */
export class Authenticator {
  constructor(
    private readonly cache: KeyCache,
    private readonly environment: Environment,
  ) {}

  async authenticate(attempt: AuthAttempt): Promise<AuthResult> {
    const integration = await this.cache.findIntegration(attempt.integrationKey);
    const refuse = (error: AppError, grant?: KeyGrant): AuthResult => ({
      integration,
      keyId: grant !== undefined && grant.companyId === integration?.companyId ? grant.keyId : null,
      error,
    });

    const grant = await this.liveGrant(attempt.apiKey, attempt.now);
    if (grant instanceof AppError) return refuse(grant);
    const ownsAddress =
      integration !== undefined &&
      grant.integrationId === integration.id &&
      grant.companyId === integration.companyId &&
      grant.scopes.includes(attempt.scope);
    if (!ownsAddress) return refuse(new AppError('insufficient_permissions'), grant);
    if (attempt.requireEnabled && !integration.enabled) return refuse(new AppError('integration_disabled'), grant);
    return { integration, keyId: grant.keyId, error: undefined };
  }

  /**
   * The live key behind an X-API-Key header, or the error that refuses it: 401 when it is
   * absent, malformed, unknown, revoked or expired. What the key may do is the caller's
   * question.
   */
  async liveGrant(apiKey: string | undefined, now: number): Promise<KeyGrant | AppError> {
    if (apiKey === undefined || apiKey === '') return new AppError('missing_api_key');
    const hash = hashIfWellFormed(apiKey, this.environment);
    if (hash === undefined) return new AppError('invalid_api_key');
    const grant = await this.cache.findKey(hash);
    if (!grant || !hashesEqual(grant.keyHash, hash) || (grant.expiresAt !== null && grant.expiresAt <= now)) {
      return new AppError('invalid_api_key');
    }
    return grant;
  }
}
