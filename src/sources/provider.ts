import type { IncomingHttpHeaders } from 'node:http';
import type { ParsedBody, ProviderType, SourceConfig } from '../domain/source-types.js';

/**
 * Sources: the ways a request to an integration's address may prove who sent it, besides
 * the integration's API key. Each provider type verifies a request exactly as its provider
 * documents, over the raw bytes received; this file is the shape every provider module in
 * ./providers/ fills, and the intake route (src/intake/routes.ts) the only caller. The data
 * a source is made of (its type, its settings) is src/domain/source-types.ts.
 */

/** One signing secret of a source, opened (plain text); live secrets only reach a provider. */
export interface SourceSecret {
  id: string;
  value: string;
}

/** A request to an integration's address, as a provider sees it. */
export interface SignedRequest {
  /** Lower-cased header names, as Node gives them. */
  headers: IncomingHttpHeaders;
  /** The body exactly as received. */
  rawBody: Buffer;
  /**
   * The address the sender used: INTAKE_BASE_URL followed by the request's path and query
   * as received (Twilio signs it).
   */
  publicUrl: string;
  /** The query's parameters, decoded. */
  query: URLSearchParams;
  /** Milliseconds since the epoch. */
  now: number;
}

/** Why a request is refused, in the words a person setting up the provider needs. */
export interface Refusal {
  /** `invalid_signature` (401 "Invalid signature") or `signature_expired` (401 "Signature expired"). */
  code: 'invalid_signature' | 'signature_expired';
  /**
   * What was wrong, in words, e.g. "signature does not match the secret",
   * "X-Hub-Signature-256 header is missing", "timestamp 7 minutes old". Never holds a secret
   * or the signature sent. At most 200 characters.
   */
  reason: string;
}

export type Verdict = { ok: true; secretId: string; signed: SignedContent } | { ok: false; refusal: Refusal };

/**
 * What a verified request's proof covers, exactly as signed, in order: `<t>.` and the body
 * for Stripe, the address and the sorted fields for Twilio, the body for GitHub; the body
 * alone for the types whose proof covers none (gitlab, basic, query_token). Two requests
 * with the same are copies of one signed request, whatever unsigned headers (a delivery id)
 * they carry: intake stores one of them (src/sources/verifier.ts, signatureClaim).
 */
export type SignedContent = ReadonlyArray<string | Buffer>;

/** What a verified request says of itself. */
export interface Described {
  /** The event name by the provider's rule; undefined when the request does not carry one. */
  event: string | undefined;
  /** The provider's delivery id (its retries repeat it), for idempotency; undefined when none. */
  deliveryId: string | undefined;
  /**
   * A request the provider expects answered rather than stored (Slack's url_verification):
   * the JSON body of a 200 answer. Undefined for every ordinary webhook.
   */
  answer?: unknown;
}

/** A request signed as the provider would sign it: the panel's "send a test". */
export interface SampleRequest {
  /** Path suffix to the integration's address: '' or a query string such as `?token=…`. */
  query: string;
  headers: Record<string, string>;
  body: Buffer;
}

export interface Provider {
  type: ProviderType;
  /** The header a sender must set (named in the 401's message), e.g. `X-Hub-Signature-256`. */
  signatureHeader(config: SourceConfig): string;
  /** The Content-Types this provider sends (a request with another gets 415). */
  accepts: ReadonlyArray<'json' | 'form'>;
  /**
   * Whether intake may generate the secret (the sender takes ours: GitHub, GitLab, hmac,
   * basic, query_token, standard_webhooks) or the provider issues it and the user pastes it
   * (Stripe, Shopify, Slack, Twilio).
   */
  generatesSecret: boolean;
  /** A new secret in the provider's format, when generatesSecret. */
  newSecret(): string;
  /** Undefined when `secret` has the provider's format; otherwise a sentence saying what is wrong (never repeating it). */
  checkSecret(secret: string): string | undefined;
  /**
   * What can be refused before the body is read: the signature header missing, a timestamp
   * outside the provider's window. Undefined when the request may go on.
   */
  checkHeaders(request: Omit<SignedRequest, 'rawBody'>, config: SourceConfig): Refusal | undefined;
  /**
   * Verifies the request against each live secret (constant-time comparisons), accepting
   * several signatures where the provider sends several. `body` parses the raw body on
   * demand (Twilio signs form fields).
   */
  verify(request: SignedRequest, secrets: readonly SourceSecret[], config: SourceConfig, body: () => ParsedBody): Promise<Verdict> | Verdict;
  /** The event name, delivery id and any immediate answer of a verified request. */
  describe(request: SignedRequest, body: ParsedBody): Described;
  /** A sample event signed with `secret` as the provider would send it to `publicUrl`. */
  sample(secret: string, config: SourceConfig, publicUrl: string, now: number): SampleRequest;
}
