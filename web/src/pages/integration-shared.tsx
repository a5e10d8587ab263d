import { useState, type ReactNode } from 'react';
import { Link } from 'react-router';
import { api, ApiError } from '../api/client';
import { useApi, type Loaded } from '../api/use-api';
import { NotFound, numberFormat, formatBytes } from '../components/ui';
import { Field } from '../components/dialog';
import type { Source } from './source-fields';

/**
 * What the integration pages share: the shapes of /api/v1/integrations and its keys
 * (src/api/integrations.ts, src/api/keys.ts), and the form that creates and edits one.
 */

export interface Integration {
  id: string;
  name: string;
  description: string;
  enabled: boolean;
  integration_key: string;
  webhook_url: string;
  body_limit_bytes: number;
  rate_limit_per_minute: number | null;
  created_at: string;
  updated_at: string;
  /** When it last took a webhook; null: never. */
  last_webhook_at: string | null;
  source: Source;
  /** What is replaced before each webhook is stored (src/api/integrations.ts); null: nothing. */
  redaction: Redaction | null;
  /** Days its webhooks are kept, shorter than the company's retention; null: the company's. */
  retention_days: number | null;
}

/** An integration's redaction as the API shows and takes it (src/domain/redaction.ts). */
export interface Redaction {
  paths: string[];
  headers: string[];
  /** redact: each value becomes "[redacted]"; hash: its keyed hash. */
  mode: 'redact' | 'hash';
}

export type KeyStatus = 'active' | 'expiring' | 'expired' | 'revoked';

export interface IntegrationKey {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  status: KeyStatus;
  last_used_at: string | null;
  last_used_ip: string | null;
  requests_24h: number;
}

export interface KeyCaller {
  ip: string;
  user_agent: string | null;
  last_seen_at: string;
  requests: number;
}

export interface CreatedIntegration {
  integration: Integration;
  api_key: string;
  key_id: string;
  source_secret_id?: string;
  /** Only when intake generated the signing secret: shown once. */
  source_secret?: string;
  /** For a provider source: true while it has no signing secret (one its provider shows later). */
  awaiting_secret?: boolean;
}

/** The API's default and largest body limits (src/api/integrations.ts). */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
export const MAX_BODY_LIMIT = 16 * 1024 * 1024;


/** The webhook address in its other accepted shape: /api/webhook/<key>. */
export function singularWebhookUrl(webhookUrl: string): string {
  return webhookUrl.replace('/api/webhooks/', '/api/webhook/');
}

/** The form's fields as typed; numbers stay text until submitted. */
export interface IntegrationDraft {
  name: string;
  description: string;
  enabled: boolean;
  bodyLimit: string;
  rateLimit: string;
}

export function draftOf(integration?: Integration): IntegrationDraft {
  return {
    name: integration?.name ?? '',
    description: integration?.description ?? '',
    enabled: integration?.enabled ?? true,
    bodyLimit: String(integration?.body_limit_bytes ?? DEFAULT_BODY_LIMIT),
    rateLimit: integration?.rate_limit_per_minute == null ? '' : String(integration.rate_limit_per_minute),
  };
}

/** The fields as the API takes them; an Error (shown by the form) for what it would refuse. */
export function parseDraft(draft: IntegrationDraft): {
  name: string;
  description: string;
  enabled: boolean;
  body_limit_bytes: number;
  rate_limit_per_minute: number | null;
} {
  const name = draft.name.trim();
  if (!name) throw new Error('Give the integration a name.');
  const bodyLimit = Number(draft.bodyLimit);
  if (!Number.isInteger(bodyLimit) || bodyLimit < 1 || bodyLimit > MAX_BODY_LIMIT) {
    throw new Error(`The body limit is a whole number of bytes from 1 to ${numberFormat.format(MAX_BODY_LIMIT)} (16 MiB).`);
  }
  let rateLimit: number | null = null;
  if (draft.rateLimit.trim() !== '') {
    rateLimit = Number(draft.rateLimit);
    if (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > 1_000_000) {
      throw new Error('The rate limit is a whole number of requests per minute from 1 to 1,000,000, or empty for no limit.');
    }
  }
  return { name, description: draft.description.trim(), enabled: draft.enabled, body_limit_bytes: bodyLimit, rate_limit_per_minute: rateLimit };
}

/** The fields of the create and edit dialogs. */
/** The integration's fields; `source` (when creating) goes after what names it and before the limits, which few change. */
export function IntegrationFields({
  draft,
  onChange,
  source,
}: {
  draft: IntegrationDraft;
  onChange(draft: IntegrationDraft): void;
  source?: ReactNode;
}) {
  const set = (changes: Partial<IntegrationDraft>) => onChange({ ...draft, ...changes });
  const bodyLimit = Number(draft.bodyLimit);
  return (
    <>
      <Field label="Name" hint="What sends to it, e.g. “Billing events from Stripe”.">
        <input value={draft.name} onChange={(e) => set({ name: e.target.value })} required maxLength={200} autoFocus />
      </Field>
      <Field label="Description" hint="Optional.">
        <textarea value={draft.description} onChange={(e) => set({ description: e.target.value })} maxLength={2000} rows={2} />
      </Field>
      {source}
      <label className="checkbox">
        <input type="checkbox" checked={draft.enabled} onChange={(e) => set({ enabled: e.target.checked })} />
        <span>Enabled (a disabled integration refuses webhooks with 403)</span>
      </label>
      <div className="grid-2 integration-limits">
        <Field
          label="Body limit (bytes)"
          hint={
            Number.isInteger(bodyLimit) && bodyLimit > 0
              ? `${formatBytes(bodyLimit)}; larger requests get 413. At most 16 MiB.`
              : 'Larger requests get 413. At most 16 MiB.'
          }
        >
          <input
            type="number"
            inputMode="numeric"
            min={1}
            max={MAX_BODY_LIMIT}
            step={1}
            value={draft.bodyLimit}
            onChange={(e) => set({ bodyLimit: e.target.value })}
            required
          />
        </Field>
        <Field label="Rate limit (requests per minute)" hint="Empty: no limit. Above it, senders get 429.">
          <input
            type="number"
            inputMode="numeric"
            min={1}
            max={1_000_000}
            step={1}
            value={draft.rateLimit}
            placeholder="No limit"
            onChange={(e) => set({ rateLimit: e.target.value })}
          />
        </Field>
      </div>
    </>
  );
}

/** A draft held by a dialog, started from the integration (or the defaults). */
export function useDraft(integration?: Integration) {
  return useState<IntegrationDraft>(() => draftOf(integration));
}

/** The shape of an integration id (src/api/schemas.ts): anything else names none. */
const INTEGRATION_ID = /^int_[A-Za-z0-9]{22}$/;

/**
 * The integration a URL names: null when it does not exist (deleted, another company's, or
 * not an id at all, which is not even asked for). The answer is kept with the id it was
 * asked for: in the render where the id changes, the previous id's answer (null for none
 * named) is not this one's, and the hook says loading instead of "does not exist".
 */
export function useIntegrationOf(id: string | undefined): Loaded<Integration | null> {
  const loaded = useApi(async () => {
    const found = async () => {
      if (id === undefined || !INTEGRATION_ID.test(id)) return null;
      try {
        return await api.get<Integration>(`/integrations/${encodeURIComponent(id)}`);
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) return null;
        throw error;
      }
    };
    return { askedFor: id, integration: await found() };
  }, [id]);
  const current = loaded.data !== undefined && loaded.data.askedFor === id ? loaded.data : undefined;
  return { ...loaded, data: current?.integration, loading: loaded.loading || (current === undefined && loaded.error === undefined) };
}

/** Said instead of a page when the integration its URL names does not exist. */
export function MissingIntegration({ back }: { back?: { to: string; label: string } }) {
  return (
    <NotFound
      title="This integration does not exist"
      actions={
        <>
          {back && (
            <Link className="button primary" to={back.to}>
              {back.label}
            </Link>
          )}
          <Link className={back ? 'button' : 'button primary'} to="/integrations">
            Go to integrations
          </Link>
        </>
      }
    >
      It may have been deleted, or the link that led here is wrong or incomplete.
    </NotFound>
  );
}

/**
 * A log page narrowed to the integration of `?integration_id=`: the page itself while that
 * integration exists (or none is named), else "This integration does not exist" with the
 * way back to the whole log. A malformed id never reaches the page, so never the API.
 */
export function UrlIntegration({
  id,
  back,
  children,
}: {
  id: string | undefined;
  back: { to: string; label: string };
  /** The integration once read (undefined while reading, or when none is named). */
  children(integration: Integration | undefined): ReactNode;
}) {
  const named = useIntegrationOf(id);
  if (id === undefined) return children(undefined);
  const known = named.data && named.data.id === id ? named.data : undefined;
  const missing = !INTEGRATION_ID.test(id) || (named.data === null && !named.loading);
  if (missing) return <MissingIntegration back={back} />;
  return children(known);
}
