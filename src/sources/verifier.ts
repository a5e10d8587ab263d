import { createHmac } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { SecretBox } from '../domain/secret-box.js';
import { AppError } from '../errors.js';
import type { RouteSource } from '../store/store.js';
import type { ParsedBody, ProviderType, SourceRefusalReason } from '../domain/source-types.js';
import type { Refusal, SignedContent, SignedRequest, SourceSecret } from './provider.js';
import { providerFor } from './providers/index.js';

/** A request refused for its signature: the contract's 401, and the reason in words for the request log. */
export class SignatureRefused extends AppError {
  constructor(
    readonly refusal: Refusal,
    source: RouteSource,
  ) {
    const header = providerFor(source.type).signatureHeader(source.config);
    super(
      refusal.code,
      `${sentence(refusal.reason)} This address takes webhooks signed as ${source.type} signs them (${header}), or with an API key in X-API-Key.`,
    );
  }
}

/**
 * The second way into an integration's address: its provider's signature. Opens the
 * source's secrets (sealed at rest) only for the request that needs them, and hands the
 * provider module the request as it was received: the raw bytes, and the address the
 * sender used (INTAKE_BASE_URL and the path), which Twilio signs.
 */
export class SourceVerifier {
  /**
   * Secrets opened already, by their sealed form: opening one (AES-GCM) costs as much as the
   * HMAC over a 7 KB body, on every request. A rotated or ended secret has a new sealed form
   * or is no longer live, so an entry never outlives its meaning; the map is emptied when full.
   */
  private readonly opened = new Map<string, string>();

  constructor(
    private readonly secrets: SecretBox,
    private readonly baseUrl: string,
    /** Told of every request the source refused, and why in one word (for /metrics). */
    private readonly onRefusal: (provider: ProviderType, reason: SourceRefusalReason) => void = () => {},
  ) {}

  /** The request without its body, as providers see it. */
  requestOf(request: FastifyRequest, now: number): Omit<SignedRequest, 'rawBody'> {
    const queryAt = request.url.indexOf('?');
    return {
      headers: request.headers,
      publicUrl: this.baseUrl + request.url,
      query: new URLSearchParams(queryAt === -1 ? '' : request.url.slice(queryAt + 1)),
      now,
    };
  }

  /** Throws SignatureRefused for what can be refused before the body is read. */
  checkHeaders(source: RouteSource, request: Omit<SignedRequest, 'rawBody'>): void {
    if (liveSecrets(source, request.now).length === 0) {
      this.onRefusal(source.type, 'no_live_secret');
      // A source created before its provider showed the secret (Stripe's order): say what is missing, not "does not match".
      throw new SignatureRefused(
        { code: 'invalid_signature', reason: `this source is waiting for its signing secret: paste the one ${source.type} gives you in the integration's Source section` },
        source,
      );
    }
    const refusal = providerFor(source.type).checkHeaders(request, source.config);
    if (refusal) throw this.refused(refusal, source);
  }

  /** The secret that signed the request and the request's signature claim; throws SignatureRefused when none did. */
  async verify(source: RouteSource, request: SignedRequest, body: () => ParsedBody): Promise<Verified> {
    const live = liveSecrets(source, request.now);
    const opened: SourceSecret[] = [];
    for (const secret of live) {
      try {
        opened.push({ id: secret.id, value: this.open(secret.sealed) });
      } catch {
        // Sealed with a key this node lacks: the operator's to fix (INTAKE_SECRETS_KEY), not the sender's.
      }
    }
    if (opened.length === 0) {
      this.onRefusal(source.type, 'secrets_unavailable');
      throw new AppError('service_unavailable', "This source's signing secrets cannot be opened on this node right now; retry later.", {
        retryAfterSeconds: 60,
      });
    }
    const verdict = await providerFor(source.type).verify(request, opened, source.config, body);
    if (!verdict.ok) throw this.refused(verdict.refusal, source);
    const secret = opened.find((candidate) => candidate.id === verdict.secretId)!;
    return { secretId: verdict.secretId, signatureClaim: signatureClaim(secret.value, verdict.signed) };
  }

  private refused(refusal: Refusal, source: RouteSource): SignatureRefused {
    this.onRefusal(source.type, refusal.code);
    return new SignatureRefused(refusal, source);
  }

  private open(sealed: string): string {
    let value = this.opened.get(sealed);
    if (value === undefined) {
      value = this.secrets.open(sealed);
      if (this.opened.size >= MAX_OPENED_SECRETS) this.opened.clear();
      this.opened.set(sealed, value);
    }
    return value;
  }
}

const MAX_OPENED_SECRETS = 10_000;

/** A request whose signature verified. */
export interface Verified {
  /** The id of the live secret that signed it (`sec_…`). */
  secretId: string;
  /**
   * The same for every copy of one signed request, whatever delivery id or other unsigned
   * header it carries: the store holds it as an idempotency claim, so a captured request
   * sent again is a replay. Keyed with the secret, so nobody without it can claim the value
   * beforehand with a made-up delivery id.
   */
  signatureClaim: string;
}

const CLAIM_CONTEXT = 'intake signature claim\n';

function signatureClaim(secret: string, signed: SignedContent): string {
  const mac = createHmac('sha256', secret).update(CLAIM_CONTEXT);
  for (const part of signed) mac.update(part);
  return mac.digest('base64url');
}

/** The cache keeps a route a while: a secret whose overlap ended since is left out here. */
function liveSecrets(source: RouteSource, now: number) {
  return source.secrets.filter((secret) => secret.expiresAt === null || secret.expiresAt > now);
}

function sentence(reason: string): string {
  return `${reason.charAt(0).toUpperCase()}${reason.slice(1)}.`;
}
