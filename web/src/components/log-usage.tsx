import { useMemo } from 'react';
import { Link } from 'react-router';
import type { Loaded } from '../api/use-api';
import type { ChartSeries } from './chart';
import {
  KeyLabel,
  useKeyLabels,
  type Integrations,
  type Usage,
  type UsageCounts,
} from './log-shared';
import { ErrorMessage, Loading, numberFormat } from './ui';
import '../pages/logs.css';

/** Usage by outcome: the outcomes, sums of counts, and the breakdown per integration or key. */

export type GroupBy = 'integration' | 'key';

export const OUTCOMES: (ChartSeries & { key: keyof Omit<UsageCounts, 'total'>; hint: string })[] = [
  { key: 'accepted', label: 'Accepted', className: 'series-accepted', hint: 'stored (202)' },
  { key: 'replayed', label: 'Replayed', className: 'series-replayed', hint: 'idempotent repeats (200)' },
  { key: 'rejected', label: 'Rejected', className: 'series-rejected', hint: 'refused (4xx)' },
  { key: 'failed', label: 'Failed', className: 'series-failed', hint: 'server errors (5xx)' },
];

export const ZERO: UsageCounts = { accepted: 0, replayed: 0, rejected: 0, failed: 0, total: 0 };

export function add(into: UsageCounts, counts: UsageCounts): UsageCounts {
  return {
    accepted: into.accepted + counts.accepted,
    replayed: into.replayed + counts.replayed,
    rejected: into.rejected + counts.rejected,
    failed: into.failed + counts.failed,
    total: into.total + counts.total,
  };
}

export function percent(part: number, whole: number): string {
  if (whole === 0) return '';
  const value = (part / whole) * 100;
  return `${value > 0 && value < 1 ? '<1' : Math.round(value)}%`;
}

export function Breakdown({
  usage,
  groupBy,
  integrations,
  integrationId,
}: {
  usage: Loaded<Usage>;
  groupBy: GroupBy;
  integrations: Integrations;
  integrationId: string | undefined;
}) {
  const keyOwners = useMemo(
    () => (integrationId ? [integrationId] : (integrations.data ?? []).slice(0, 25).map((i) => i.id)),
    [integrationId, integrations.data],
  );
  const keyLabel = useKeyLabels(groupBy === 'key' ? keyOwners : []);
  const rows = useMemo(() => {
    const groups = new Map<string, UsageCounts>();
    for (const item of usage.data?.data ?? []) {
      const id = (groupBy === 'integration' ? item.integration_id : item.key_id) ?? '';
      groups.set(id, add(groups.get(id) ?? ZERO, item));
    }
    return [...groups.entries()].sort((a, b) => b[1].total - a[1].total || a[0].localeCompare(b[0]));
  }, [usage.data, groupBy]);
  const total = rows.reduce((sum, [, counts]) => add(sum, counts), ZERO);

  if (usage.error && !usage.data) return <ErrorMessage error={usage.error} retry={usage.reload} />;
  if (!usage.data || usage.data.group_by !== groupBy) return <Loading label="Loading the breakdown…" />;
  if (rows.length === 0) return <p className="muted">No requests in this range.</p>;
  return (
    <div className="table-wrap">
      <table className="log-table breakdown-table">
        <thead>
          <tr>
            <th scope="col">{groupBy === 'integration' ? 'Integration' : 'Key'}</th>
            {OUTCOMES.map((o) => (
              <th scope="col" key={o.key} className="num">
                {o.label}
              </th>
            ))}
            <th scope="col" className="num">
              Total
            </th>
            <th scope="col" className="num">
              Share
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map(([id, counts]) => (
            <tr key={id || 'none'}>
              <th scope="row">
                {groupBy === 'integration' ? (
                  <Link to={`/requests?${new URLSearchParams({ integration_id: id })}`} title="See its requests">
                    {integrations.nameOf(id) ?? id}
                  </Link>
                ) : id ? (
                  <KeyLabel keyId={id} labelOf={keyLabel} />
                ) : (
                  <span className="muted">No valid key</span>
                )}
              </th>
              {OUTCOMES.map((o) => (
                <td key={o.key} className="num">
                  {numberFormat.format(counts[o.key])}
                </td>
              ))}
              <td className="num">
                <strong>{numberFormat.format(counts.total)}</strong>
              </td>
              <td className="num muted">{percent(counts.total, total.total)}</td>
            </tr>
          ))}
        </tbody>
        <tfoot>
          <tr>
            <th scope="row">Total</th>
            {OUTCOMES.map((o) => (
              <td key={o.key} className="num">
                {numberFormat.format(total[o.key])}
              </td>
            ))}
            <td className="num">
              <strong>{numberFormat.format(total.total)}</strong>
            </td>
            <td className="num muted">{total.total > 0 ? '100%' : ''}</td>
          </tr>
        </tfoot>
      </table>
    </div>
  );
}
