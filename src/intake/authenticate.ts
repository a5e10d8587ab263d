import type { Environment } from '../config.js';
import { hashIfWellFormed, hashesEqual, type Scope } from '../domain/api-key.js';
import { AppError } from '../errors.js';
import type { IntegrationRoute, KeyGrant } from '../store/store.js';
import type { AuthFailureLimiter } from './auth-failures.js';
import type { KeyCache } from './key-cache.js';

export interface AuthAttempt {
  /** The X-API-Key header as sent. */
  apiKey: string | undefined;
  /** The last segment of the address. */
  integrationKey: string;
  scope: Scope;
  /** Sending needs an enabled integration; reading its log does not. */
  requireEnabled: boolean;
  /**
   * Sending may also be proven by the integration's provider signature, when it has a
   * provider source and no X-API-Key is sent; reading never.
   */
  signatureAllowed: boolean;
  now: number;
  /** The client's address: its failed attempts are limited. */
  ip: string;
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
  /**
   * No key was sent to an address with a provider source: the request goes on to have its
   * signature checked (src/sources/verifier.ts), which decides; keyId is then null.
   */
  bySignature: boolean;
}

/**
 * Decides who may do what to an integration's address, from the header alone and before
 * the body is read. Malformed keys, bad checksums and other environments' keys are refused
 * without a lookup; everything else is answered from the key cache.
 *
 * A valid key aimed at an address it does not own gets 403, also when the address names
 * no integration at all, so a key holder cannot tell other companies' addresses from
 * unused ones.
 *
 * An address that sent too many missing or invalid keys is refused (429) before its key is
 * looked at; the integration is still found, so the refusal lands in its request log.
 *
 * A request to an address with a provider source that sends no key is not decided here:
 * its signature covers the body, which is read after this.
 */
export class Authenticator {
  constructor(
    private readonly cache: KeyCache,
    private readonly environment: Environment,
    private readonly failures: AuthFailureLimiter,
  ) {}

  async authenticate(attempt: AuthAttempt): Promise<AuthResult> {
    const integration = await this.cache.findIntegration(attempt.integrationKey);
    const refuse = (error: AppError, grant?: KeyGrant): AuthResult => ({
      integration,
      keyId: grant !== undefined && grant.companyId === integration?.companyId ? grant.keyId : null,
      error,
      bySignature: false,
    });
    if (attempt.signatureAllowed && integration?.source && (attempt.apiKey === undefined || attempt.apiKey === '')) {
      // The address's limit on failures holds for signatures too: refused ones count.
      const wait = this.failures.retryAfterSeconds(attempt.ip);
      if (wait > 0) return refuse(new AppError('auth_rate_limited', undefined, { retryAfterSeconds: wait }));
      return { integration, keyId: null, error: undefined, bySignature: true };
    }

    const grant = await this.throttledGrant(attempt.apiKey, attempt.ip, attempt.now);
    if (grant instanceof AppError) return refuse(grant);
    const ownsAddress =
      integration !== undefined &&
      grant.integrationId === integration.id &&
      grant.companyId === integration.companyId &&
      grant.scopes.includes(attempt.scope);
    if (!ownsAddress) return refuse(new AppError('insufficient_permissions'), grant);
    if (attempt.requireEnabled && !integration.enabled) return refuse(new AppError('integration_disabled'), grant);
    return { integration, keyId: grant.keyId, error: undefined, bySignature: false };
  }

  /**
   * liveGrant behind the per-address limit on failures: an address past it is refused (429)
   * before its key is looked at, and every refused key counts against its address. The
   * webhook addresses and /api/v1 share one limiter, so guesses cannot be spread over both.
   */
  async throttledGrant(apiKey: string | undefined, ip: string, now: number): Promise<KeyGrant | AppError> {
    const wait = this.failures.retryAfterSeconds(ip);
    if (wait > 0) return new AppError('auth_rate_limited', undefined, { retryAfterSeconds: wait });
    const grant = await this.liveGrant(apiKey, now);
    if (grant instanceof AppError) this.failures.recordFailure(ip);
    return grant;
  }

  /**
   * The same per-address limit for another credential (a panel session's cookie): `find`
   * resolves it, undefined meaning it is not valid, which counts as a failure.
   */
  async throttled<T>(ip: string, find: () => Promise<T | undefined>): Promise<T | undefined | AppError> {
    const wait = this.failures.retryAfterSeconds(ip);
    if (wait > 0) {
      return new AppError('auth_rate_limited', 'Too many requests with an invalid key or session came from this address; retry later.', {
        retryAfterSeconds: wait,
      });
    }
    const found = await find();
    if (found === undefined) this.failures.recordFailure(ip);
    return found;
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
