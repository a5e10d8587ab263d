import { useMemo, useRef, useState, type KeyboardEvent, type ReactNode } from 'react';
import { Link } from 'react-router';
import { api } from '../api/client';
import { useApi } from '../api/use-api';
import { Dialog } from './dialog';
import { JsonView } from './json-view';
import {
  type WebhookDetail,
} from './log-shared';
import { CopyButton, ErrorMessage, Loading, Time, formatBytes } from './ui';
import '../pages/logs.css';

/**
 * Webhooks already read by whoever opens the viewer (the webhooks page reads one to learn a
 * typed uuid is a webhook): the viewer takes it from here once instead of reading its body
 * again. A reload reads anew.
 */
export const readAhead = new Map<string, WebhookDetail>();

/**
 * One webhook, read from GET /api/v1/webhooks/{uuid}, in a wide dialog: its facts, then
 * tabs for the payload as a collapsible tree, the headers, and the raw body byte for byte.
 * Nothing of the payload is ever HTML: it is all React text.
 */
export function WebhookViewer({
  uuid,
  onClose,
  integrationName,
  onNewer,
  onOlder,
  related,
}: {
  uuid: string;
  onClose(): void;
  integrationName?(id: string): string | undefined;
  onNewer?: () => void;
  onOlder?: () => void;
  /** Shown under the facts: what became of the webhook (its deliveries, on the webhooks page). */
  related?: (webhook: WebhookDetail) => ReactNode;
}) {
  const webhook = useApi(() => {
    const read = readAhead.get(uuid);
    readAhead.delete(uuid);
    return read === undefined ? api.get<WebhookDetail>(`/webhooks/${encodeURIComponent(uuid)}`) : Promise.resolve(read);
  }, [uuid]);
  return (
    <Dialog title="Webhook details" onClose={onClose} wide>
      {(onNewer || onOlder) && (
        <div className="viewer-nav">
          <button type="button" className="button small" onClick={onNewer} disabled={!onNewer}>
            ← Newer
          </button>
          <button type="button" className="button small" onClick={onOlder} disabled={!onOlder}>
            Older →
          </button>
        </div>
      )}
      {webhook.error ? (
        <ErrorMessage error={webhook.error} retry={webhook.reload} />
      ) : !webhook.data || webhook.data.uuid !== uuid ? (
        <Loading label="Loading the webhook…" />
      ) : (
        <WebhookBody webhook={webhook.data} integrationName={integrationName} related={related} />
      )}
    </Dialog>
  );
}

type Tab = 'payload' | 'headers' | 'raw';
const TABS: { id: Tab; label: string }[] = [
  { id: 'payload', label: 'Payload' },
  { id: 'headers', label: 'Headers' },
  { id: 'raw', label: 'Raw body' },
];

function WebhookBody({
  webhook,
  integrationName,
  related,
}: {
  webhook: WebhookDetail;
  integrationName?(id: string): string | undefined;
  related?: (webhook: WebhookDetail) => ReactNode;
}) {
  const [tab, setTab] = useState<Tab>('payload');
  const tabs = useRef<(HTMLButtonElement | null)[]>([]);
  const parsed = useMemo<{ ok: true; value: unknown } | { ok: false }>(() => {
    try {
      return { ok: true, value: JSON.parse(webhook.raw_body) as unknown };
    } catch {
      return { ok: false };
    }
  }, [webhook.raw_body]);
  const size = useMemo(() => new TextEncoder().encode(webhook.raw_body).length, [webhook.raw_body]);
  const headers = useMemo(() => Object.entries(webhook.headers).sort(([a], [b]) => a.localeCompare(b)), [webhook.headers]);
  const name = integrationName?.(webhook.integration_id);

  const onTabKey = (event: KeyboardEvent, index: number) => {
    const step = event.key === 'ArrowRight' ? 1 : event.key === 'ArrowLeft' ? -1 : 0;
    if (step === 0) return;
    event.preventDefault();
    const next = (index + step + TABS.length) % TABS.length;
    setTab(TABS[next]!.id);
    tabs.current[next]?.focus();
  };

  const erased = erasureOf(parsed.ok ? parsed.value : undefined);

  return (
    <div className="viewer">
      {erased && (
        <p className="notice info" role="status">
          Erased by <code>{erased.erasure_id}</code>
          {erased.erased_at && (
            <>
              {' '}
              <Time iso={erased.erased_at} />
            </>
          )}
          : its body and headers are gone; what is shown is the tombstone that took their place.
        </p>
      )}
      <dl className="details viewer-facts">
        <dt>Event</dt>
        <dd>
          <code className="viewer-event">{webhook.event}</code>
          {webhook.headers['intake-test'] === 'source-test' && (
            <>
              {' '}
              <span className="badge badge-info viewer-test" title="Sent by Send a test: stored like any webhook, delivered to no destination">
                Test
              </span>
            </>
          )}
        </dd>
        <dt>UUID</dt>
        <dd className="viewer-copy">
          <code>{webhook.uuid}</code>
          <CopyButton text={webhook.uuid} label="Copy UUID" />
        </dd>
        <dt>Integration</dt>
        <dd>
          <Link to={`/integrations/${encodeURIComponent(webhook.integration_id)}`}>{name ?? webhook.integration_id}</Link>
        </dd>
        <dt>Received</dt>
        <dd>
          <Time iso={webhook.received_at} /> <span className="muted small">({webhook.received_at})</span>
        </dd>
        <dt>Source IP</dt>
        <dd>
          <code>{webhook.source_ip}</code>
        </dd>
        <dt>Size</dt>
        <dd>{formatBytes(size)}</dd>
      </dl>
      {related?.(webhook)}

      <div className="tabs" role="tablist" aria-label="Webhook views">
        {TABS.map((t, index) => (
          <button
            key={t.id}
            ref={(element) => {
              tabs.current[index] = element;
            }}
            type="button"
            role="tab"
            id={`viewer-tab-${t.id}`}
            aria-controls={`viewer-panel-${t.id}`}
            aria-selected={tab === t.id}
            tabIndex={tab === t.id ? 0 : -1}
            className={tab === t.id ? 'tab active' : 'tab'}
            onClick={() => setTab(t.id)}
            onKeyDown={(event) => onTabKey(event, index)}
          >
            {t.label}
            {t.id === 'headers' && <span className="muted small"> {headers.length}</span>}
          </button>
        ))}
      </div>

      <div className="tab-panel" role="tabpanel" id={`viewer-panel-${tab}`} aria-labelledby={`viewer-tab-${tab}`}>
        {tab === 'payload' &&
          (parsed.ok ? (
            <JsonView value={parsed.value} label="Payload" />
          ) : (
            <>
              <p className="notice">
                {/form-urlencoded/i.test(webhook.headers['content-type'] ?? '')
                  ? 'The body is a form: its fields are shown as an object.'
                  : 'The raw body is not valid JSON; its data is shown as stored.'}
              </p>
              <JsonView value={webhook.data} label="Payload" />
            </>
          ))}
        {tab === 'headers' && <HeadersTable headers={headers} />}
        {tab === 'raw' && (
          <div className="raw-body">
            <div className="raw-body-toolbar">
              <span className="muted small">As stored, byte for byte (as received, less what its integration redacts), {formatBytes(size)}</span>
              <CopyButton text={webhook.raw_body} label="Copy raw body" />
            </div>
            <pre className="raw-body-text" tabIndex={0} aria-label="Raw body">
              {webhook.raw_body}
            </pre>
          </div>
        )}
      </div>
    </div>
  );
}

/** A webhook's kept headers, name and value a row (the viewer's tab, and a redaction's preview). */
export function HeadersTable({ headers, label }: { headers: Array<[string, string]>; label?: string }) {
  if (headers.length === 0) return <p className="muted">No headers were kept for this webhook.</p>;
  return (
    <div className="table-wrap">
      <table className="headers-table" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Header</th>
            <th scope="col">Value</th>
          </tr>
        </thead>
        <tbody>
          {headers.map(([header, value]) => (
            <tr key={header}>
              <td className="mono">{header}</td>
              <td className="wrap mono">{value}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The tombstone an erasure left in place of a body (docs/personal-data.md), or null. */
function erasureOf(value: unknown): { erasure_id: string; erased_at?: string } | null {
  if (typeof value !== 'object' || value === null || Object.keys(value).length !== 1) return null;
  const erased = (value as { erased?: unknown }).erased;
  if (typeof erased !== 'object' || erased === null) return null;
  const { erasure_id: id, erased_at: at } = erased as { erasure_id?: unknown; erased_at?: unknown };
  if (typeof id !== 'string' || !id.startsWith('ers_')) return null;
  return { erasure_id: id, ...(typeof at === 'string' && { erased_at: at }) };
}
