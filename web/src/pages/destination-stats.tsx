import { useMemo, useState, type ReactNode } from 'react';
import { api } from '../api/client';
import { useApi } from '../api/use-api';
import { LineChart, StackedBarChart, type ChartBar, type ChartSeries } from '../components/chart';
import { EmptyState, ErrorMessage, Loading, Time, numberFormat } from '../components/ui';
import { formatMs, formatRate, type Destination, type DestinationStats } from './destination-shared';
import './logs.css';

/** The API picks the bucket: at most 100 of the range (1 minute for an hour, 15 for a day, 3 hours for a week). */
const RANGES = {
  '1h': { label: 'Last hour', ms: 3_600_000 },
  '24h': { label: 'Last 24 hours', ms: 86_400_000 },
  '7d': { label: 'Last 7 days', ms: 7 * 86_400_000 },
} as const;
type RangeName = keyof typeof RANGES;

const OUTCOMES: ChartSeries[] = [
  { key: 'succeeded', label: 'Succeeded', className: 'series-accepted' },
  { key: 'failed', label: 'Failed', className: 'series-failed' },
];
const LATENCIES: ChartSeries[] = [
  { key: 'p50', label: 'p50', className: 'series-replayed' },
  { key: 'p99', label: 'p99', className: 'series-rejected' },
];

/**
 * How well a destination delivers: attempts per bucket by outcome, latency percentiles,
 * the success rate of the range and the backlog now (GET /destinations/{id}/stats).
 */
export function DestinationStatsCard({ destination, version }: { destination: Destination; version: number }) {
  const [rangeName, setRangeName] = useState<RangeName>('24h');
  const [refresh, setRefresh] = useState(0);
  const range = RANGES[rangeName];
  const span = useMemo(() => {
    const until = Date.now();
    return { since: until - range.ms, until };
  }, [rangeName, refresh, version]);
  const stats = useApi(
    () =>
      api.get<DestinationStats>(`/destinations/${destination.id}/stats`, {
        since: new Date(span.since).toISOString(),
        until: new Date(span.until).toISOString(),
      }),
    [destination.id, span.since, span.until],
  );
  const bars = useMemo(() => (stats.data ? toBars(stats.data) : []), [stats.data]);

  return (
    <section className="card" aria-labelledby="stats-heading">
      <header className="section-header">
        <h2 id="stats-heading">Delivery health</h2>
        <div className="actions">
          <div className="segmented" role="group" aria-label="Range">
            {(Object.keys(RANGES) as RangeName[]).map((name) => (
              <button
                key={name}
                type="button"
                className={name === rangeName ? 'button small primary' : 'button small'}
                aria-pressed={name === rangeName}
                onClick={() => setRangeName(name)}
              >
                {RANGES[name].label}
              </button>
            ))}
          </div>
          <button type="button" className="button small" onClick={() => setRefresh((n) => n + 1)} disabled={stats.loading}>
            Refresh
          </button>
        </div>
      </header>
      {stats.error && !stats.data ? (
        <ErrorMessage error={stats.error} retry={stats.reload} />
      ) : !stats.data ? (
        <Loading label="Loading delivery health…" />
      ) : (
        <>
          {stats.error && <ErrorMessage error={stats.error} retry={stats.reload} />}
          <StatTiles stats={stats.data} />
          {stats.data.truncated && (
            <p className="notice info">
              This range holds more attempts than one read counts: the figures cover the newest{' '}
              {numberFormat.format(stats.data.attempts)}.
            </p>
          )}
          {stats.data.attempts === 0 ? (
            <EmptyState title="No attempts in this range">
              Attempts show here as webhooks are sent to it. Pick a longer range to see earlier ones.
            </EmptyState>
          ) : (
            <div className="destination-charts">
              <div>
                <h3>Attempts per {bucketWords(stats.data.bucket_seconds)}</h3>
                <StackedBarChart title={`Attempts, ${range.label.toLowerCase()}, by outcome`} series={OUTCOMES} bars={bars} />
              </div>
              <div>
                <h3>Latency per {bucketWords(stats.data.bucket_seconds)}, in milliseconds</h3>
                <LineChart title={`Latency, ${range.label.toLowerCase()}, p50 and p99`} series={LATENCIES} bars={bars} unit="ms" />
              </div>
            </div>
          )}
        </>
      )}
    </section>
  );
}

function StatTiles({ stats }: { stats: DestinationStats }) {
  const { backlog } = stats;
  const tiles: { label: string; value: ReactNode; hint?: string }[] = [
    { label: 'Success rate', value: formatRate(stats.success_rate), hint: 'Attempts answered 2xx within the timeout' },
    { label: 'Attempts', value: numberFormat.format(stats.attempts) },
    { label: 'Failed', value: numberFormat.format(stats.failed) },
    { label: 'Latency p50', value: formatMs(stats.latency_ms.p50) },
    { label: 'Latency p99', value: formatMs(stats.latency_ms.p99) },
    { label: 'Pending', value: numberFormat.format(backlog.pending), hint: 'Waiting for their next attempt, or being sent' },
    { label: 'Held', value: numberFormat.format(backlog.held), hint: 'Held while the destination is paused or disabled' },
    { label: 'In flight', value: numberFormat.format(backlog.in_flight), hint: 'Being sent now' },
    {
      label: 'Oldest due',
      value: backlog.oldest_due_at ? <Time iso={backlog.oldest_due_at} /> : '—',
      hint: 'When the longest-waiting pending delivery was due',
    },
  ];
  return (
    <ul className="usage-stats destination-stats" aria-label="Delivery figures">
      {tiles.map((tile) => (
        <li key={tile.label} title={tile.hint}>
          <span className="stat-label">{tile.label}</span>
          <span className="stat-value">{tile.value}</span>
        </li>
      ))}
    </ul>
  );
}

/** 60 → "minute", 900 → "15 minutes", 10800 → "3 hours". */
function bucketWords(seconds: number): string {
  const [unit, size] = seconds % 3600 === 0 ? ['hour', 3600] : ['minute', 60];
  const count = Math.max(1, Math.round(seconds / size));
  return count === 1 ? unit : `${count} ${unit}s`;
}

const TIME = new Intl.DateTimeFormat('en', { hour: '2-digit', minute: '2-digit', hour12: false });
const DAY = new Intl.DateTimeFormat('en', { month: 'short', day: 'numeric' });
const FULL = new Intl.DateTimeFormat('en', { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false });

/** Every bucket of the range, empty ones included (the API leaves them out). */
function toBars(stats: DestinationStats): ChartBar[] {
  const stepMs = stats.bucket_seconds * 1000;
  const byStart = new Map(stats.buckets.map((bucket) => [Date.parse(bucket.start), bucket]));
  const bars: ChartBar[] = [];
  const until = Date.parse(stats.until);
  // The API's buckets are on the clock: the first holds the range's start.
  const first = Date.parse(stats.since) - (Date.parse(stats.since) % stepMs);
  for (let start = first; start < until && bars.length < 500; start += stepMs) {
    const bucket = byStart.get(start);
    bars.push({
      key: String(start),
      label: stepMs >= 3_600_000 * 6 ? DAY.format(start) : TIME.format(start),
      title: FULL.format(start),
      values: bucket ? { succeeded: bucket.succeeded, failed: bucket.failed, p50: bucket.p50_ms, p99: bucket.p99_ms } : {},
    });
  }
  return bars;
}
