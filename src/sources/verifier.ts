import type { FastifyRequest } from 'fastify';
import type { SecretBox } from '../domain/secret-box.js';
import { AppError } from '../errors.js';
import type { RouteSource } from '../store/store.js';
import type { ParsedBody, Refusal, SignedRequest, SourceSecret } from './provider.js';
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
      throw new SignatureRefused({ code: 'invalid_signature', reason: 'this source has no live signing secret: add one in the panel' }, source);
    }
    const refusal = providerFor(source.type).checkHeaders(request, source.config);
    if (refusal) throw new SignatureRefused(refusal, source);
  }

  /** The id of the secret that signed the request; throws SignatureRefused when none did. */
  async verify(source: RouteSource, request: SignedRequest, body: () => ParsedBody): Promise<string> {
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
      throw new AppError('service_unavailable', "This source's signing secrets cannot be opened on this node right now; retry later.", {
        retryAfterSeconds: 60,
      });
    }
    const verdict = await providerFor(source.type).verify(request, opened, source.config, body);
    if (!verdict.ok) throw new SignatureRefused(verdict.refusal, source);
    return verdict.secretId;
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

/** The cache keeps a route a while: a secret whose overlap ended since is left out here. */
function liveSecrets(source: RouteSource, now: number) {
  return source.secrets.filter((secret) => secret.expiresAt === null || secret.expiresAt > now);
}

function sentence(reason: string): string {
  return `${reason.charAt(0).toUpperCase()}${reason.slice(1)}.`;
}
