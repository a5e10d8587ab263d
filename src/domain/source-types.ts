/**
 * What a source is, as data: the types an integration's source may have, the settings
 * stored with it, what a verified body is and why a request is refused. The store keeps
 * them, the domain parses bodies into them and /metrics counts by them; how each provider
 * verifies a request is src/sources/.
 */

/** Every type of source: `api_key` (the integration's API key alone) and the providers. */
export const SOURCE_TYPES = [
  'api_key',
  'github',
  'gitlab',
  'stripe',
  'shopify',
  'slack',
  'standard_webhooks',
  'twilio',
  'hmac',
  'basic',
  'query_token',
] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export type ProviderType = Exclude<SourceType, 'api_key'>;

/** The generic `hmac` type's settings (the only type with more than a secret to set). */
export interface HmacConfig {
  /** The header carrying the signature, e.g. `X-Signature`. */
  header: string;
  algorithm: 'sha1' | 'sha256' | 'sha512';
  encoding: 'hex' | 'base64';
  /** Text before the signature in the header, e.g. `sha256=`; '' for none. */
  prefix: string;
  /** A header carrying a Unix timestamp (seconds) that is part of what is signed; null for none. */
  timestampHeader: string | null;
  /** How old (or how far ahead) the timestamp may be, in seconds. */
  toleranceSeconds: number;
  /** What is signed: `{body}`, or with a timestamp header for example `{timestamp}.{body}`. */
  signedPayload: string;
}

/** `basic`'s user name and `query_token`'s parameter name; every other type has no settings. */
export interface SourceConfig {
  hmac?: HmacConfig;
  /** `basic`: the user name the sender must give (the password is the secret). */
  username?: string;
  /** `query_token`: the query parameter carrying the token. */
  parameter?: string;
}

/** The request's body once verified, parsed as its Content-Type says. */
export type ParsedBody =
  | { kind: 'json'; value: unknown }
  /** A form (`application/x-www-form-urlencoded`): its fields in order, as sent. */
  | { kind: 'form'; fields: Array<[string, string]> };

/**
 * Why a source refused a request, in one word: the refusal's code (a bad or an expired
 * signature: src/sources/provider.ts, Refusal), no live secret to check with (the source
 * needs one), or secrets this node cannot open (INTAKE_SECRETS_KEY lacks their key; answered 503).
 */
export type SourceRefusalReason = 'invalid_signature' | 'signature_expired' | 'no_live_secret' | 'secrets_unavailable';
