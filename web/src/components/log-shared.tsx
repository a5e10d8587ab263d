import { useCallback, useEffect, useMemo, useRef, useState, type KeyboardEvent } from 'react';
import { api, type Page } from '../api/client';
import { useApi, type Loaded } from '../api/use-api';
import { Field } from './dialog';

/**
 * What the log pages (Webhooks, Requests, Usage) share: the shapes they read, and the
 * names of integrations and keys. Their filters are in log-filters.tsx.
 */

export interface WebhookSummary {
  uuid: string;
  integration_id: string;
  event: string;
  /** The webhook's `data`; from a provider source, the provider's whole body (a form as an object). */
  data: unknown;
  received_at: string;
}

export interface WebhookDetail extends WebhookSummary {
  headers: Record<string, string>;
  raw_body: string;
  source_ip: string;
}

export interface RequestRecord {
  id: string;
  integration_id: string;
  received_at: string;
  method: string;
  status: number;
  error_code: string | null;
  reason: string | null;
  key_id: string | null;
  ip: string;
  user_agent: string | null;
  size_bytes: number;
  duration_ms: number;
  webhook_uuid: string | null;
  /** The request's OpenTelemetry trace (32 hex digits) when tracing is on and sampled it. */
  trace_id: string | null;
}

export type Bucket = 'minute' | 'hour' | 'day';

export interface UsageCounts {
  accepted: number;
  replayed: number;
  rejected: number;
  failed: number;
  total: number;
}

export interface UsageItem extends UsageCounts {
  start: string;
  integration_id?: string;
  key_id?: string | null;
}

export interface Usage {
  bucket: Bucket;
  since: string;
  until: string;
  group_by: 'integration' | 'key' | null;
  data: UsageItem[];
}

export interface IntegrationSummary {
  id: string;
  name: string;
  enabled: boolean;
}

interface KeySummary {
  id: string;
  name: string;
  prefix: string;
}

// ---------------------------------------------------------------------------------------
// Integrations and keys, by id

export interface Integrations extends Loaded<IntegrationSummary[]> {
  nameOf(id: string): string | undefined;
}

/** The company's integrations (the first 200, newest first), for pickers and names. */
export function useIntegrations(): Integrations {
  const loaded = useApi(async () => (await api.get<Page<IntegrationSummary>>('/integrations', { limit: 200 })).data, []);
  const names = useMemo(() => new Map((loaded.data ?? []).map((i) => [i.id, i.name])), [loaded.data]);
  return { ...loaded, nameOf: (id) => names.get(id) };
}

/**
 * The keys of these integrations (prefix and name by key id), loaded once per integration
 * as they are needed; unknown ids (or a failed load) fall back to the id.
 */
export function useKeyLabels(integrationIds: readonly string[]): (keyId: string) => { prefix: string; name: string } | undefined {
  const [keys, setKeys] = useState<ReadonlyMap<string, KeySummary>>(new Map());
  const requested = useRef(new Set<string>());
  const wanted = [...new Set(integrationIds)].sort().join(',');
  useEffect(() => {
    let live = true;
    for (const id of wanted ? wanted.split(',') : []) {
      if (requested.current.has(id)) continue;
      requested.current.add(id);
      api
        .get<Page<KeySummary>>(`/integrations/${encodeURIComponent(id)}/keys`, { limit: 200 })
        .then((page) => {
          if (!live) return;
          setKeys((previous) => {
            const next = new Map(previous);
            for (const key of page.data) next.set(key.id, key);
            return next;
          });
        })
        .catch(() => requested.current.delete(id));
    }
    return () => {
      live = false;
    };
  }, [wanted]);
  return useCallback((keyId: string) => keys.get(keyId), [keys]);
}

/** A key as "whk_dev_AbC… (name)", the id on hover; the signing secret that verified a signed request; "—" when none was valid. */
export function KeyLabel({ keyId, labelOf }: { keyId: string | null | undefined; labelOf(id: string): { prefix: string; name: string } | undefined }) {
  if (!keyId) return <span className="muted" title="No valid key was sent">—</span>;
  // A request let in by its provider's signature names the signing secret that verified it.
  if (keyId.startsWith('sec_')) {
    return (
      <span title={keyId}>
        signature <span className="mono small">{keyId}</span>
      </span>
    );
  }
  const key = labelOf(keyId);
  if (!key) return <span className="mono small" title={keyId}>{keyId}</span>;
  return (
    <span title={keyId}>
      <code>{key.prefix}…</code>
      {key.name && <span className="muted small"> {key.name}</span>}
    </span>
  );
}

export function IntegrationSelect({
  integrations,
  value,
  onChange,
}: {
  integrations: Integrations;
  value: string | undefined;
  onChange(id: string | undefined): void;
}) {
  const list = integrations.data ?? [];
  const known = value === undefined || list.some((i) => i.id === value);
  return (
    <Field label="Integration">
      <select value={value ?? ''} onChange={(event) => onChange(event.target.value || undefined)}>
        <option value="">All integrations</option>
        {!known && value && <option value={value}>{value}</option>}
        {list.map((integration) => (
          <option key={integration.id} value={integration.id}>
            {integration.name}
            {integration.enabled ? '' : ' (disabled)'}
          </option>
        ))}
      </select>
    </Field>
  );
}
