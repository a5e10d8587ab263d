import { useMemo, useRef, useState } from 'react';
import { Link } from 'react-router';
import { usePagedList } from '../api/use-api';
import { Dialog, Field } from '../components/dialog';
import { ListFooter, TimeRangeFilter, onActivate, param, useQueryState, useTimeRange } from '../components/list-controls';
import {
  IntegrationSelect,
  KeyLabel,
  useIntegrations,
  useKeyLabels,
  type RequestRecord,
} from '../components/log-shared';
import { Badge, CopyButton, EmptyState, ErrorMessage, Loading, PageHeader, Time, type Tone, formatBytes } from '../components/ui';
import { UrlIntegration } from './integration-shared';
import './logs.css';

/** The codes a request to a webhook address can be refused with (the contract's error table). */
const ERROR_CODES: { code: string; label: string }[] = [
  { code: 'missing_api_key', label: 'Missing API key (401)' },
  { code: 'invalid_api_key', label: 'Invalid API key (401)' },
  { code: 'invalid_signature', label: 'Invalid signature (401)' },
  { code: 'signature_expired', label: 'Signature expired (401)' },
  { code: 'insufficient_permissions', label: 'Insufficient permissions (403)' },
  { code: 'integration_disabled', label: 'Integration disabled (403)' },
  { code: 'unsupported_media_type', label: 'Unsupported media type (415)' },
  { code: 'payload_too_large', label: 'Payload too large (413)' },
  { code: 'invalid_json', label: 'Invalid JSON (400)' },
  { code: 'invalid_request', label: 'Invalid request (400)' },
  { code: 'validation_failed', label: 'Validation failed (422)' },
  { code: 'idempotency_conflict', label: 'Idempotency key reused (422)' },
  { code: 'rate_limited', label: 'Rate limited (429)' },
  { code: 'auth_rate_limited', label: 'Too many failed authentications (429)' },
  { code: 'service_unavailable', label: 'Service unavailable (503)' },
  { code: 'internal_error', label: 'Internal error (500)' },
];

const STATUS_CLASSES = [
  { value: '2xx', label: '2xx: accepted or replayed' },
  { value: '4xx', label: '4xx: refused' },
  { value: '5xx', label: '5xx: failed' },
];

function statusTone(status: number): Tone {
  if (status >= 200 && status < 300) return 'good';
  if (status >= 400 && status < 500) return 'warn';
  if (status >= 500) return 'bad';
  return 'neutral';
}

/** The outcome in words: what the sender was told. */
function outcomeOf(record: RequestRecord): string {
  if (record.status === 202) return 'Accepted';
  if (record.status === 200) return record.method === 'POST' ? 'Replayed (idempotent repeat)' : 'Read';
  if (record.reason) return record.reason;
  if (record.error_code) return record.error_code.replace(/_/g, ' ');
  return `Answered ${record.status}`;
}

/**
 * The request log: every request to the company's webhook addresses, refused ones too,
 * with why; newest first; filters kept in the URL.
 */
export function RequestsPage() {
  const [params] = useQueryState();
  return (
    <UrlIntegration id={param(params, 'integration_id')} back={{ to: '/requests', label: 'Show the requests of every integration' }}>
      {() => <RequestLog />}
    </UrlIntegration>
  );
}

/**
 * Finds one request by the id its sender was answered with (`request_id`, req_…), the id
 * the list and the logs show. Applied on Enter or when the field is left.
 */
function RequestIdSearch({ value, onChange }: { value: string | undefined; onChange(id: string | undefined): void }) {
  const [text, setText] = useState(value ?? '');
  const apply = () => {
    const id = text.trim();
    if (id !== (value ?? '')) onChange(id === '' ? undefined : id);
  };
  return (
    <Field label="Request ID">
      <input
        type="search"
        className="mono"
        placeholder="req_…"
        value={text}
        onChange={(e) => setText(e.target.value)}
        onBlur={apply}
        onKeyDown={(e) => e.key === 'Enter' && apply()}
        spellCheck={false}
      />
    </Field>
  );
}

function RequestLog() {
  const [params, update] = useQueryState();
  const integrationId = param(params, 'integration_id');
  const statusClass = param(params, 'status_class');
  const errorCode = param(params, 'error_code');
  const keyId = param(params, 'key_id');
  const requestId = param(params, 'id');
  const [refresh, setRefresh] = useState(0);
  const range = useTimeRange(params, refresh);
  const integrations = useIntegrations();
  const narrowed =
    requestId !== undefined || statusClass !== undefined || errorCode !== undefined || keyId !== undefined || range.since !== undefined || range.until !== undefined;

  const list = usePagedList<RequestRecord>(
    '/requests',
    { id: requestId, integration_id: integrationId, status_class: statusClass, error_code: errorCode, key_id: keyId, since: range.since, until: range.until },
    [requestId, integrationId, statusClass, errorCode, keyId, range.since, range.until, refresh],
  );
  const keyLabel = useKeyLabels(useMemo(() => (list.data ?? []).map((r) => r.integration_id), [list.data]));
  const [selected, setSelected] = useState<RequestRecord>();
  const opener = useRef<HTMLElement | null>(null);
  const open = (record: RequestRecord) => {
    opener.current = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    setSelected(record);
  };
  const close = () => {
    setSelected(undefined);
    const back = opener.current;
    setTimeout(() => back?.isConnected && back.focus(), 0);
  };

  return (
    <div className="log-page">
      <PageHeader
        title="Requests"
        description="Every request to your webhook addresses, accepted or refused, with the reason; newest first."
        actions={
          <button type="button" className="button" onClick={() => setRefresh((n) => n + 1)} disabled={list.loading}>
            Refresh
          </button>
        }
      />

      <div className="toolbar log-filters" role="search" aria-label="Filter requests">
        <RequestIdSearch value={requestId} onChange={(id) => update({ id })} />
        <IntegrationSelect integrations={integrations} value={integrationId} onChange={(id) => update({ integration_id: id, key_id: undefined })} />
        <Field label="Status">
          <select value={statusClass ?? ''} onChange={(e) => update({ status_class: e.target.value || undefined })}>
            <option value="">Any status</option>
            {STATUS_CLASSES.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Error code">
          <select value={errorCode ?? ''} onChange={(e) => update({ error_code: e.target.value || undefined })}>
            <option value="">Any error</option>
            {errorCode && !ERROR_CODES.some((c) => c.code === errorCode) && <option value={errorCode}>{errorCode}</option>}
            {ERROR_CODES.map((c) => (
              <option key={c.code} value={c.code}>
                {c.label}
              </option>
            ))}
          </select>
        </Field>
        <TimeRangeFilter params={params} update={update} />
        {keyId && (
          <span className="filter-chip">
            Key <KeyLabel keyId={keyId} labelOf={keyLabel} />
            <button type="button" className="button ghost small" aria-label="Remove the key filter" onClick={() => update({ key_id: undefined })}>
              ✕
            </button>
          </span>
        )}
        {narrowed && (
          <button
            type="button"
            className="button ghost"
            onClick={() =>
              update({ id: undefined, status_class: undefined, error_code: undefined, key_id: undefined, range: undefined, since: undefined, until: undefined })
            }
          >
            Clear filters
          </button>
        )}
      </div>

      {list.error && !list.data ? (
        <ErrorMessage error={list.error} retry={list.reload} />
      ) : !list.data ? (
        <Loading label="Loading requests…" />
      ) : list.data.length === 0 ? (
        narrowed ? (
          <EmptyState title="No requests match these filters">Try another status, error code or a longer time range.</EmptyState>
        ) : (
          <EmptyState
            title="No requests yet"
            action={
              <Link className="button primary" to={integrationId ? `/integrations/${encodeURIComponent(integrationId)}` : '/integrations'}>
                {integrationId ? 'Open the integration' : 'Go to integrations'}
              </Link>
            }
          >
            Every request to an integration's webhook address shows here, refused ones too (a wrong key, a body that is not
            JSON…). The integration's page has a ready <code>curl</code> line to send one.
          </EmptyState>
        )
      ) : (
        <>
          {list.error && <ErrorMessage error={list.error} retry={list.reload} />}
          <div className="table-wrap">
            <table className="log-table request-table">
              <thead>
                <tr>
                  <th scope="col">Status</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Error code</th>
                  {!integrationId && <th scope="col">Integration</th>}
                  <th scope="col">Key</th>
                  <th scope="col">IP</th>
                  <th scope="col">Time</th>
                </tr>
              </thead>
              <tbody>
                {list.data.map((record) => (
                  <tr
                    key={record.id}
                    className={selected?.id === record.id ? 'clickable selected' : 'clickable'}
                    tabIndex={0}
                    data-status={record.status}
                    onClick={() => open(record)}
                    onKeyDown={onActivate(() => open(record))}
                  >
                    <td>
                      <Badge tone={statusTone(record.status)}>
                        {record.method === 'POST' ? '' : `${record.method} `}
                        {record.status}
                      </Badge>
                    </td>
                    <td className="wrap reason">{outcomeOf(record)}</td>
                    <td>{record.error_code ? <code>{record.error_code}</code> : <span className="muted">—</span>}</td>
                    {!integrationId && (
                      <td>{integrations.nameOf(record.integration_id) ?? <span className="mono small">{record.integration_id}</span>}</td>
                    )}
                    <td>
                      <KeyLabel keyId={record.key_id} labelOf={keyLabel} />
                    </td>
                    <td className="mono small">{record.ip}</td>
                    <td>
                      <Time iso={record.received_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      {list.data && <ListFooter list={list} />}

      {selected && (
        <RequestDialog
          record={selected}
          integrationName={integrations.nameOf(selected.integration_id)}
          keyLabel={keyLabel}
          onClose={close}
        />
      )}
    </div>
  );
}

function RequestDialog({
  record,
  integrationName,
  keyLabel,
  onClose,
}: {
  record: RequestRecord;
  integrationName: string | undefined;
  keyLabel: Parameters<typeof KeyLabel>[0]['labelOf'];
  onClose(): void;
}) {
  return (
    <Dialog title="Request details" onClose={onClose} wide>
      <dl className="details">
        <dt>Status</dt>
        <dd>
          <Badge tone={statusTone(record.status)}>{record.status}</Badge> {outcomeOf(record)}
        </dd>
        <dt>Error code</dt>
        <dd>{record.error_code ? <code>{record.error_code}</code> : '—'}</dd>
        <dt>Request</dt>
        <dd>
          <code>{record.method}</code> · {formatBytes(record.size_bytes)} · answered in {record.duration_ms.toLocaleString('en')} ms
        </dd>
        <dt>Integration</dt>
        <dd>
          <Link to={`/integrations/${encodeURIComponent(record.integration_id)}`}>{integrationName ?? record.integration_id}</Link>
        </dd>
        <dt>Key</dt>
        <dd>
          <KeyLabel keyId={record.key_id} labelOf={keyLabel} />
          {record.key_id && <span className="muted small"> {record.key_id}</span>}
        </dd>
        <dt>IP</dt>
        <dd>
          <code>{record.ip}</code>
        </dd>
        <dt>User agent</dt>
        <dd>{record.user_agent ? <code>{record.user_agent}</code> : '—'}</dd>
        <dt>Received</dt>
        <dd>
          <Time iso={record.received_at} /> <span className="muted small">({record.received_at})</span>
        </dd>
        <dt>Request id</dt>
        <dd className="viewer-copy">
          <code>{record.id}</code>
          <CopyButton text={record.id} label="Copy id" />
        </dd>
        <dt>Trace id</dt>
        {record.trace_id ? (
          <dd className="viewer-copy">
            <code>{record.trace_id}</code>
            <CopyButton text={record.trace_id} label="Copy trace id" />
          </dd>
        ) : (
          <dd className="muted">Not traced</dd>
        )}
        <dt>Webhook</dt>
        <dd>
          {record.webhook_uuid ? (
            <Link to={`/webhooks?${new URLSearchParams({ integration_id: record.integration_id, webhook: record.webhook_uuid })}`}>
              Open webhook {record.webhook_uuid.slice(0, 8)}
            </Link>
          ) : (
            <span className="muted">None stored</span>
          )}
        </dd>
      </dl>
    </Dialog>
  );
}
