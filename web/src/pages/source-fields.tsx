import { api } from '../api/client';
import { useApi } from '../api/use-api';
import { Field } from '../components/dialog';

/**
 * An integration's source: the shapes of /api/v1/sources and an integration's `source`
 * (src/api/sources.ts, src/api/source-schemas.ts), their names in words, and the fields that
 * choose one when an integration is created or its source changed.
 */

export type SourceType =
  | 'api_key'
  | 'github'
  | 'gitlab'
  | 'stripe'
  | 'shopify'
  | 'slack'
  | 'standard_webhooks'
  | 'twilio'
  | 'hmac'
  | 'basic'
  | 'query_token';

/** The settings of hmac, basic and query_token, as the API shows and takes them; {} for the others. */
export interface SourceConfig {
  header?: string;
  algorithm?: 'sha1' | 'sha256' | 'sha512';
  encoding?: 'hex' | 'base64';
  prefix?: string;
  timestamp_header?: string | null;
  tolerance_seconds?: number;
  signed_payload?: string;
  username?: string;
  parameter?: string;
}

export interface Source {
  type: SourceType;
  config: SourceConfig;
  /** Where the provider puts its signature; null for api_key. */
  signature_header: string | null;
  /** For a provider type: true while it has no live signing secret (one its provider shows later). */
  awaiting_secret?: boolean;
}

/** What GET /api/v1/sources says of a type. */
export interface SourceTypeInfo {
  type: SourceType;
  signature_header: string | null;
  accepts: string[];
  /** False where the provider issues the secret and it has to be pasted (Stripe, Shopify, Slack, Twilio). */
  generates_secret: boolean;
}

export interface SourceSecret {
  id: string;
  created_at: string;
  /** When it stops verifying (the old one of a rotation); null: until rotated. */
  expires_at: string | null;
}

/**
 * The choices, in the order the select shows them. `secret` says where the user finds the
 * secret of a provider that issues its own (or the format a sender expects of ours).
 */
export const SOURCE_TYPES: { type: SourceType; label: string; secret?: { hint: string; placeholder: string } }[] = [
  { type: 'api_key', label: 'API key only' },
  { type: 'github', label: 'GitHub' },
  { type: 'gitlab', label: 'GitLab' },
  { type: 'stripe', label: 'Stripe', secret: { hint: 'From the endpoint’s page in Stripe: “Signing secret”, Reveal.', placeholder: 'whsec_…' } },
  {
    type: 'shopify',
    label: 'Shopify',
    secret: { hint: 'The key shown under Settings → Notifications → Webhooks, or the app’s client secret.', placeholder: 'Shopify signing key' },
  },
  { type: 'slack', label: 'Slack', secret: { hint: 'The app’s Basic Information → App Credentials → Signing Secret.', placeholder: 'Slack signing secret' } },
  {
    type: 'standard_webhooks',
    label: 'Standard Webhooks (Svix…)',
    secret: { hint: 'The sender’s whsec_… secret, if it gave you one.', placeholder: 'whsec_…' },
  },
  { type: 'twilio', label: 'Twilio', secret: { hint: 'The account’s Auth Token, from the Twilio console.', placeholder: 'Twilio Auth Token' } },
  { type: 'hmac', label: 'Generic HMAC' },
  { type: 'basic', label: 'HTTP Basic' },
  { type: 'query_token', label: 'Token in URL (weakest)' },
];

export function sourceLabel(type: SourceType): string {
  return SOURCE_TYPES.find((s) => s.type === type)?.label ?? type;
}

/** The types as the server describes them; undefined while loading. */
export function useSourceTypes(): SourceTypeInfo[] | undefined {
  return useApi(() => api.get<{ data: SourceTypeInfo[] }>('/sources'), []).data?.data;
}

/** Whether the sender takes a secret intake generates (true until the types are loaded: the server says otherwise). */
export function generatesSecret(types: SourceTypeInfo[] | undefined, type: SourceType): boolean {
  return types?.find((t) => t.type === type)?.generates_secret ?? true;
}

/** The fields as typed; numbers stay text until submitted. */
export interface SourceDraft {
  type: SourceType;
  secret: string;
  header: string;
  algorithm: 'sha1' | 'sha256' | 'sha512';
  encoding: 'hex' | 'base64';
  prefix: string;
  timestampHeader: string;
  tolerance: string;
  signedPayload: string;
  username: string;
  parameter: string;
}

/** A draft from a source's settings, or the API's defaults. */
export function sourceDraftOf(source?: Source): SourceDraft {
  const config = source?.config ?? {};
  return {
    type: source?.type ?? 'api_key',
    secret: '',
    header: config.header ?? 'X-Signature',
    algorithm: config.algorithm ?? 'sha256',
    encoding: config.encoding ?? 'hex',
    prefix: config.prefix ?? '',
    timestampHeader: config.timestamp_header ?? '',
    tolerance: String(config.tolerance_seconds ?? 300),
    signedPayload: config.signed_payload ?? '',
    username: config.username ?? 'intake',
    parameter: config.parameter ?? 'token',
  };
}

/** The `source` body of POST /integrations and PUT …/source; an Error (shown by the form) for what the API would refuse. */
export function parseSourceDraft(draft: SourceDraft): { type: SourceType; config?: SourceConfig; secret?: string } {
  const secret = draft.secret.trim();
  const base = { type: draft.type, ...(secret && draft.type !== 'api_key' && { secret }) };
  if (draft.type === 'hmac') {
    const tolerance = Number(draft.tolerance);
    if (!Number.isInteger(tolerance) || tolerance < 1 || tolerance > 86_400) {
      throw new Error('The timestamp tolerance is a whole number of seconds from 1 to 86,400.');
    }
    const config: SourceConfig = {
      header: draft.header.trim(),
      algorithm: draft.algorithm,
      encoding: draft.encoding,
      prefix: draft.prefix,
      timestamp_header: draft.timestampHeader.trim() || null,
      tolerance_seconds: tolerance,
      ...(draft.signedPayload.trim() && { signed_payload: draft.signedPayload.trim() }),
    };
    return { ...base, config };
  }
  if (draft.type === 'basic') return { ...base, config: { username: draft.username.trim() } };
  if (draft.type === 'query_token') return { ...base, config: { parameter: draft.parameter.trim() } };
  return base;
}

/**
 * The source's fields: the type, then its signing secret (pasted where the provider issues
 * it, now or once the provider shows it) and its settings. `emptySecretMeans` replaces what an empty secret does (generate one,
 * or nothing where the provider issues it): changing a source keeps the secrets of its type.
 */
export function SourceFields({
  draft,
  onChange,
  types,
  emptySecretMeans,
}: {
  draft: SourceDraft;
  onChange(draft: SourceDraft): void;
  types: SourceTypeInfo[] | undefined;
  emptySecretMeans?: string;
}) {
  const set = (changes: Partial<SourceDraft>) => onChange({ ...draft, ...changes });
  const secret = SOURCE_TYPES.find((s) => s.type === draft.type)?.secret;
  const pasted = !generatesSecret(types, draft.type);
  const header = types?.find((t) => t.type === draft.type)?.signature_header;
  // Never required: where the provider issues the secret (Stripe shows it only once the endpoint
  // exists, with our address), the source can wait for it and the address comes first.
  const empty =
    emptySecretMeans ??
    (pasted ? `Leave empty to get the address first and paste the secret once ${sourceLabel(draft.type)} shows it` : 'Leave empty to generate one, shown once');
  const way =
    draft.type === 'hmac'
      ? 'An HMAC signature, as set below,'
      : draft.type === 'basic'
        ? 'HTTP Basic authentication'
        : draft.type === 'query_token'
          ? 'A token in the address'
          : `The provider’s signature${header ? ` (${header})` : ''}`;
  return (
    <>
      <Field
        label="Source"
        hint={
          draft.type === 'api_key'
            ? 'Senders put the API key in the X-API-Key header.'
            : `${way} lets webhooks in; the API key keeps working too.`
        }
      >
        <select value={draft.type} onChange={(e) => set({ type: e.target.value as SourceType, secret: '' })}>
          {SOURCE_TYPES.map((s) => (
            <option key={s.type} value={s.type}>
              {s.label}
              {s.type === 'api_key' ? ' (default)' : ''}
            </option>
          ))}
        </select>
      </Field>
      {draft.type !== 'api_key' && (
        <Field label="Signing secret" hint={[secret?.hint, empty && `${empty}.`].filter(Boolean).join(' ')}>
          <input
            type="password"
            value={draft.secret}
            onChange={(e) => set({ secret: e.target.value })}
            placeholder={secret?.placeholder ?? emptySecretMeans ?? (pasted ? undefined : 'Leave empty to generate one')}
            autoComplete="off"
            spellCheck={false}
            maxLength={1000}
          />
        </Field>
      )}
      {draft.type === 'hmac' && <HmacFields draft={draft} set={set} />}
      {draft.type === 'basic' && (
        <Field label="User name" hint="The password is the signing secret.">
          <input value={draft.username} onChange={(e) => set({ username: e.target.value })} required maxLength={100} />
        </Field>
      )}
      {draft.type === 'query_token' && (
        <Field label="Query parameter" hint="The token travels in the address: it shows in the sender’s and proxies’ logs.">
          <input value={draft.parameter} onChange={(e) => set({ parameter: e.target.value })} required maxLength={50} />
        </Field>
      )}
    </>
  );
}

function HmacFields({ draft, set }: { draft: SourceDraft; set(changes: Partial<SourceDraft>): void }) {
  return (
    <div className="grid-2 source-settings">
      <Field label="Signature header">
        <input value={draft.header} onChange={(e) => set({ header: e.target.value })} required maxLength={100} />
      </Field>
      <Field label="Signature prefix" hint="Text before the signature, e.g. sha256=. Optional.">
        <input value={draft.prefix} onChange={(e) => set({ prefix: e.target.value })} maxLength={50} />
      </Field>
      <Field label="Algorithm">
        <select value={draft.algorithm} onChange={(e) => set({ algorithm: e.target.value as SourceDraft['algorithm'] })}>
          <option value="sha256">HMAC-SHA256</option>
          <option value="sha512">HMAC-SHA512</option>
          <option value="sha1">HMAC-SHA1</option>
        </select>
      </Field>
      <Field label="Encoding">
        <select value={draft.encoding} onChange={(e) => set({ encoding: e.target.value as SourceDraft['encoding'] })}>
          <option value="hex">hex</option>
          <option value="base64">base64</option>
        </select>
      </Field>
      <Field label="Timestamp header" hint="Optional: a header with a Unix time that is signed too.">
        <input value={draft.timestampHeader} onChange={(e) => set({ timestampHeader: e.target.value })} maxLength={100} />
      </Field>
      <Field label="Timestamp tolerance (seconds)">
        <input
          type="number"
          inputMode="numeric"
          min={1}
          max={86_400}
          step={1}
          value={draft.tolerance}
          onChange={(e) => set({ tolerance: e.target.value })}
          disabled={!draft.timestampHeader.trim()}
        />
      </Field>
      <Field label="Signed payload" hint="From {timestamp} and {body}. Empty: {body}, or {timestamp}.{body} with a timestamp header.">
        <input
          value={draft.signedPayload}
          onChange={(e) => set({ signedPayload: e.target.value })}
          placeholder={draft.timestampHeader.trim() ? '{timestamp}.{body}' : '{body}'}
          maxLength={100}
        />
      </Field>
    </div>
  );
}
