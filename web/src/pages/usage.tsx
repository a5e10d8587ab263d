import { useMemo, useState } from 'react';
import { Link } from 'react-router';
import { api, type Page } from '../api/client';
import { useApi } from '../api/use-api';
import { StackedBarChart, type ChartBar } from '../components/chart';
import { Field } from '../components/dialog';
import { param, useQueryState } from '../components/list-controls';
import {
  IntegrationSelect,
  useIntegrations,
  type Bucket,
  type Usage,
} from '../components/log-shared';
import { Breakdown, OUTCOMES, ZERO, add, percent, type GroupBy } from '../components/log-usage';
import { EmptyState, ErrorMessage, Loading, PageHeader, numberFormat } from '../components/ui';
import { UrlIntegration, type Integration } from './integration-shared';
import './logs.css';

const RANGES = {
  '1h': { label: 'Last hour', detail: 'per minute', bucket: 'minute', ms: 3_600_000 },
  '24h': { label: 'Last 24 hours', detail: 'per hour', bucket: 'hour', ms: 86_400_000 },
  '30d': { label: 'Last 30 days', detail: 'per day (UTC)', bucket: 'day', ms: 30 * 86_400_000 },
} as const satisfies Record<string, { label: string; detail: string; bucket: Bucket; ms: number }>;
type RangeName = keyof typeof RANGES;

const BUCKET_MS: Record<Bucket, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };

interface KeySummary {
  id: string;
  name: string;
  prefix: string;
  status: string;
}

/**
 * Usage: webhook sends over time by outcome (a stacked bar per minute, hour or day), the
 * totals, and a breakdown per integration or per key. Range and filters live in the URL.
 */
export function UsagePage() {
  const [params] = useQueryState();
  return (
    <UrlIntegration id={param(params, 'integration_id')} back={{ to: '/usage', label: 'Show the usage of every integration' }}>
      {(integration) => <UsageView integration={integration} />}
    </UrlIntegration>
  );
}

function UsageView({ integration }: { integration: Integration | undefined }) {
  const [params, update] = useQueryState();
  const rangeParam = param(params, 'range');
  const rangeName: RangeName = rangeParam !== undefined && Object.hasOwn(RANGES, rangeParam) ? (rangeParam as RangeName) : '24h';
  const range = RANGES[rangeName];
  const integrationId = param(params, 'integration_id');
  const keyId = param(params, 'key_id');
  const groupBy: GroupBy = param(params, 'group_by') === 'key' ? 'key' : 'integration';
  const [refresh, setRefresh] = useState(0);
  const span = useMemo(() => {
    const until = Date.now();
    return { since: new Date(until - range.ms).toISOString(), until: new Date(until).toISOString() };
  }, [rangeName, refresh]);

  const integrations = useIntegrations();
  const query = { bucket: range.bucket, since: span.since, until: span.until, integration_id: integrationId, key_id: keyId };
  const usage = useApi(() => api.get<Usage>('/usage', query), [range.bucket, span.since, span.until, integrationId, keyId]);
  const breakdown = useApi(
    () => api.get<Usage>('/usage', { ...query, group_by: groupBy }),
    [range.bucket, span.since, span.until, integrationId, keyId, groupBy],
  );
  // Once the integration is known to exist: the keys of one that does not are not asked for.
  const keyOwner = integration?.id;
  const keys = useApi(
    async () =>
      keyOwner === undefined
        ? []
        : (await api.get<Page<KeySummary>>(`/integrations/${encodeURIComponent(keyOwner)}/keys`, { limit: 200 })).data,
    [keyOwner],
  );

  const bars = useMemo(() => (usage.data ? toBars(usage.data) : []), [usage.data]);
  const totals = useMemo(() => (usage.data?.data ?? []).reduce(add, ZERO), [usage.data]);

  return (
    <div className="log-page">
      <PageHeader
        title="Usage"
        description="Webhooks sent to your addresses over time, by outcome."
        actions={
          <button type="button" className="button" onClick={() => setRefresh((n) => n + 1)} disabled={usage.loading}>
            Refresh
          </button>
        }
      />

      <div className="toolbar log-filters">
        <div className="field">
          <span className="field-label" id="usage-range-label">
            Range
          </span>
          <div className="segmented" role="group" aria-labelledby="usage-range-label">
            {(Object.keys(RANGES) as RangeName[]).map((name) => (
              <button
                key={name}
                type="button"
                className={name === rangeName ? 'button primary' : 'button'}
                aria-pressed={name === rangeName}
                onClick={() => update({ range: name === '24h' ? undefined : name })}
              >
                {RANGES[name].label}
              </button>
            ))}
          </div>
        </div>
        <IntegrationSelect integrations={integrations} value={integrationId} onChange={(id) => update({ integration_id: id, key_id: undefined })} />
        {integrationId && (
          <Field label="Key">
            <select value={keyId ?? ''} onChange={(e) => update({ key_id: e.target.value || undefined })}>
              <option value="">All keys</option>
              {keyId && !(keys.data ?? []).some((k) => k.id === keyId) && <option value={keyId}>{keyId}</option>}
              {(keys.data ?? []).map((key) => (
                <option key={key.id} value={key.id}>
                  {key.prefix}…{key.name ? ` ${key.name}` : ''}
                  {key.status === 'active' ? '' : ` (${key.status})`}
                </option>
              ))}
            </select>
          </Field>
        )}
      </div>

      <section className="card" aria-labelledby="usage-chart-title">
        <h2 id="usage-chart-title">
          Requests {range.detail} <span className="muted small">· {range.label.toLowerCase()}</span>
        </h2>
        {usage.error && !usage.data ? (
          <ErrorMessage error={usage.error} retry={usage.reload} />
        ) : !usage.data ? (
          <Loading label="Loading usage…" />
        ) : (
          <>
            {usage.error && <ErrorMessage error={usage.error} retry={usage.reload} />}
            <ul className="usage-stats" aria-label="Totals">
              <li>
                <span className="stat-label">Total</span>
                <span className="stat-value">{numberFormat.format(totals.total)}</span>
              </li>
              {OUTCOMES.map((o) => (
                <li key={o.key} title={o.hint}>
                  <span className="stat-label">
                    <span className={`legend-swatch ${o.className}`} aria-hidden="true" /> {o.label}
                  </span>
                  <span className="stat-value">
                    {numberFormat.format(totals[o.key])}
                    {totals.total > 0 && <span className="muted small"> {percent(totals[o.key], totals.total)}</span>}
                  </span>
                </li>
              ))}
            </ul>
            {totals.total === 0 ? (
              <EmptyState
                title="No requests in this range"
                action={
                  <Link className="button" to="/integrations">
                    Go to integrations
                  </Link>
                }
              >
                Send a webhook to an integration's address (its page has a ready <code>curl</code> line), or pick a longer range.
              </EmptyState>
            ) : (
              <StackedBarChart title={`Requests ${range.detail}, ${range.label.toLowerCase()}, by outcome`} series={OUTCOMES} bars={bars} />
            )}
          </>
        )}
      </section>

      <section className="card" aria-labelledby="usage-breakdown-title">
        <div className="section-header">
          <h2 id="usage-breakdown-title">Breakdown</h2>
          <div className="segmented" role="group" aria-label="Group by">
            {(['integration', 'key'] as const).map((g) => (
              <button
                key={g}
                type="button"
                className={g === groupBy ? 'button small primary' : 'button small'}
                aria-pressed={g === groupBy}
                onClick={() => update({ group_by: g === 'integration' ? undefined : g })}
              >
                By {g}
              </button>
            ))}
          </div>
        </div>
        <Breakdown usage={breakdown} groupBy={groupBy} integrations={integrations} integrationId={integrationId} />
      </section>
    </div>
  );
}

/** Every bucket of the range, empty ones included (the API leaves them out). */
function toBars(usage: Usage): ChartBar[] {
  const step = BUCKET_MS[usage.bucket];
  const byStart = new Map(usage.data.map((item) => [Date.parse(item.start), item]));
  const bars: ChartBar[] = [];
  const until = Date.parse(usage.until);
  for (let start = Date.parse(usage.since); start < until && bars.length < 2000; start += step) {
    const item = byStart.get(start);
    bars.push({
      key: String(start),
      label: axisLabel(start, usage.bucket),
      title: longLabel(start, usage.bucket),
      values: item ? { accepted: item.accepted, replayed: item.replayed, rejected: item.rejected, failed: item.failed } : {},
    });
  }
  return bars;
}

const TIME = new Intl.DateTimeFormat('en', { hour: '2-digit', minute: '2-digit', hour12: false });
const DAY_UTC = new Intl.DateTimeFormat('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });
const FULL = new Intl.DateTimeFormat('en', { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false });
const FULL_DAY_UTC = new Intl.DateTimeFormat('en', { weekday: 'short', month: 'short', day: 'numeric', year: 'numeric', timeZone: 'UTC' });

function axisLabel(start: number, bucket: Bucket): string {
  return bucket === 'day' ? DAY_UTC.format(start) : TIME.format(start);
}

function longLabel(start: number, bucket: Bucket): string {
  return bucket === 'day' ? `${FULL_DAY_UTC.format(start)} (UTC)` : FULL.format(start);
}
