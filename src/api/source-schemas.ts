import { Type } from 'typebox';
import { SOURCE_TYPES, type SourceConfig } from '../domain/source-types.js';
import { providerFor } from '../sources/providers/index.js';
import { MAX_SECRET_LENGTH } from '../sources/settings.js';
import type { IntegrationSource } from '../store/store.js';

/** How the API reads and shows an integration's source (src/api/sources.ts has its routes). */

/** The settings of the types that have any (hmac, basic, query_token), in the API's snake_case. */
export const SourceConfigSchema = Type.Object(
  {
    header: Type.Optional(Type.String({ maxLength: 100, description: 'hmac: the header carrying the signature (default X-Signature).' })),
    algorithm: Type.Optional(Type.Union([Type.Literal('sha1'), Type.Literal('sha256'), Type.Literal('sha512')], { description: 'hmac (default sha256).' })),
    encoding: Type.Optional(Type.Union([Type.Literal('hex'), Type.Literal('base64')], { description: 'hmac (default hex).' })),
    prefix: Type.Optional(Type.String({ maxLength: 50, description: 'hmac: text before the signature, e.g. "sha256=" (default none).' })),
    timestamp_header: Type.Optional(Type.Union([Type.String({ maxLength: 100 }), Type.Null()], { description: 'hmac: a header with a Unix timestamp that is signed too.' })),
    tolerance_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400, description: 'hmac: how old a timestamp may be (default 300).' })),
    signed_payload: Type.Optional(Type.String({ maxLength: 100, description: 'hmac: what is signed, from {timestamp} and {body} (default {body}, or {timestamp}.{body} with a timestamp header).' })),
    username: Type.Optional(Type.String({ maxLength: 100, description: 'basic: the user name (default intake).' })),
    parameter: Type.Optional(Type.String({ maxLength: 50, description: 'query_token: the query parameter (default token).' })),
  },
  { additionalProperties: false, $id: 'SourceConfig' },
);

export const SourceTypeSchema = Type.Union(
  [
    Type.Literal('api_key'),
    Type.Literal('github'),
    Type.Literal('gitlab'),
    Type.Literal('stripe'),
    Type.Literal('shopify'),
    Type.Literal('slack'),
    Type.Literal('standard_webhooks'),
    Type.Literal('twilio'),
    Type.Literal('hmac'),
    Type.Literal('basic'),
    Type.Literal('query_token'),
  ] satisfies { [I in keyof typeof SOURCE_TYPES]: unknown },
  { description: "api_key: the X-API-Key header only (the default). Any other: the provider's signature too (docs/sources.md)." },
);

/** How a new or changed source is asked for. */
export const SourceBody = Type.Object(
  {
    type: SourceTypeSchema,
    config: Type.Optional(SourceConfigSchema),
    // No maxLength here: the settings' check says what is too long, naming the field.
    secret: Type.Optional(
      Type.String({
        description: `The signing secret the provider shows you (Stripe, Shopify, Slack, Twilio issue their own), at most ${MAX_SECRET_LENGTH} characters. Absent: intake generates one, shown once; or, for a provider that issues its own, the source waits for it (awaiting_secret).`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const AwaitingSecret = Type.Boolean({
  description: 'True while the source has no signing secret (a provider that shows its secret only once the endpoint exists): signed requests get 401 saying so until one is added.',
});

export const SourceSchema = Type.Object({
  type: SourceTypeSchema,
  config: Type.Object({}, { additionalProperties: true, description: 'The type\'s settings (hmac, basic, query_token); {} for the others.' }),
  signature_header: Type.Union([Type.String(), Type.Null()], { description: 'Where the provider puts its signature; null for api_key.' }),
  awaiting_secret: Type.Optional(AwaitingSecret),
});

/** What the API shows of a source: its type and settings, never a secret; for a provider type, whether it waits for its secret. */
export function presentSource(source: IntegrationSource, awaitingSecret: boolean) {
  return {
    type: source.type,
    config: apiConfig(source.config),
    signature_header: source.type === 'api_key' ? null : providerFor(source.type).signatureHeader(source.config),
    ...(source.type !== 'api_key' && { awaiting_secret: awaitingSecret }),
  };
}

function apiConfig(config: SourceConfig): Record<string, unknown> {
  const { hmac, ...rest } = config;
  if (!hmac) return rest;
  return {
    header: hmac.header,
    algorithm: hmac.algorithm,
    encoding: hmac.encoding,
    prefix: hmac.prefix,
    timestamp_header: hmac.timestampHeader,
    tolerance_seconds: hmac.toleranceSeconds,
    signed_payload: hmac.signedPayload,
  };
}

