import { useCallback, useEffect, useMemo, useRef, type KeyboardEvent } from 'react';
import { useSearchParams } from 'react-router';
import type { Paged } from '../api/use-api';
import { Field } from './dialog';

/**
 * What every list page uses: filters kept in the URL so a view can be shared (query
 * parameters, time ranges: presets from now, or a custom from/to sent as UTC), rows that
 * open from the keyboard, and the foot of a paged list.
 */

// ---------------------------------------------------------------------------------------
// Filters kept in the URL, so a view can be shared

/** Reads and writes query parameters of the current URL; empty values are removed. */
export function useQueryState(): [URLSearchParams, (changes: Record<string, string | undefined>, push?: boolean) => void] {
  const [params, setParams] = useSearchParams();
  const update = useCallback(
    (changes: Record<string, string | undefined>, push = false) => {
      setParams(
        (previous) => {
          const next = new URLSearchParams(previous);
          for (const [name, value] of Object.entries(changes)) {
            if (value === undefined || value === '') next.delete(name);
            else next.set(name, value);
          }
          return next;
        },
        { replace: !push },
      );
    },
    [setParams],
  );
  return [params, update];
}

export function param(params: URLSearchParams, name: string): string | undefined {
  const value = params.get(name);
  return value === null || value === '' ? undefined : value;
}

// ---------------------------------------------------------------------------------------
// Time ranges: presets relative to now, or a custom from/to

export const RANGE_PRESETS = {
  '1h': { label: 'Last hour', ms: 3_600_000 },
  '24h': { label: 'Last 24 hours', ms: 86_400_000 },
  '7d': { label: 'Last 7 days', ms: 7 * 86_400_000 },
  '30d': { label: 'Last 30 days', ms: 30 * 86_400_000 },
} as const;
export type RangePreset = keyof typeof RANGE_PRESETS;

function isPreset(value: string | undefined): value is RangePreset {
  return value !== undefined && Object.hasOwn(RANGE_PRESETS, value);
}

/** ISO (UTC) → the value of a datetime-local input, in the browser's time zone. */
export function toLocalInput(iso: string | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** A datetime-local value (local time) → ISO UTC, or undefined when empty or incomplete. */
export function fromLocalInput(value: string): string | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

function validIso(value: string | undefined): string | undefined {
  return value !== undefined && !Number.isNaN(Date.parse(value)) ? new Date(value).toISOString() : undefined;
}

export interface ResolvedRange {
  since: string | undefined;
  until: string | undefined;
  /** Whether `until` is fixed (a custom end): nothing new can arrive in it. */
  closed: boolean;
}

/**
 * The range in the URL (`range` = a preset or "custom" with `since`/`until`) as ISO UTC
 * times, computed when it or `refresh` changes (a preset is "from now").
 */
export function useTimeRange(params: URLSearchParams, refresh: number): ResolvedRange {
  const range = param(params, 'range');
  const since = param(params, 'since');
  const until = param(params, 'until');
  return useMemo(() => {
    if (isPreset(range)) return { since: new Date(Date.now() - RANGE_PRESETS[range].ms).toISOString(), until: undefined, closed: false };
    const end = validIso(until);
    return { since: validIso(since), until: end, closed: end !== undefined };
  }, [range, since, until, refresh]);
}

/** The time range filter: "any time", presets, or custom from/to (datetime-local, sent as UTC). */
export function TimeRangeFilter({
  params,
  update,
  presets = ['1h', '24h', '7d', '30d'],
}: {
  params: URLSearchParams;
  update(changes: Record<string, string | undefined>): void;
  presets?: RangePreset[];
}) {
  const range = param(params, 'range');
  const custom = !isPreset(range) && (range === 'custom' || param(params, 'since') !== undefined || param(params, 'until') !== undefined);
  const selected = isPreset(range) ? range : custom ? 'custom' : '';
  return (
    <>
      <Field label="Time range">
        <select
          value={selected}
          onChange={(event) => {
            const value = event.target.value;
            if (value === 'custom') {
              update({ range: 'custom', since: new Date(Date.now() - RANGE_PRESETS['24h'].ms).toISOString(), until: undefined });
            } else {
              update({ range: value || undefined, since: undefined, until: undefined });
            }
          }}
        >
          <option value="">Any time</option>
          {presets.map((preset) => (
            <option key={preset} value={preset}>
              {RANGE_PRESETS[preset].label}
            </option>
          ))}
          <option value="custom">Custom…</option>
        </select>
      </Field>
      {custom && (
        <>
          <Field label="From">
            <input
              type="datetime-local"
              value={toLocalInput(param(params, 'since'))}
              onChange={(event) => update({ range: 'custom', since: fromLocalInput(event.target.value) })}
            />
          </Field>
          <Field label="To">
            <input
              type="datetime-local"
              value={toLocalInput(param(params, 'until'))}
              onChange={(event) => update({ range: 'custom', until: fromLocalInput(event.target.value) })}
            />
          </Field>
        </>
      )}
    </>
  );
}

// ---------------------------------------------------------------------------------------
// The foot of a paged list: "Load more", and more as the end scrolls into view

export function ListFooter({
  list,
  auto = true,
  moreLabel = 'Load more',
  note,
}: {
  list: Paged<unknown>;
  /** Load the next page when the footer scrolls into view. */
  auto?: boolean;
  moreLabel?: string;
  note?: string;
}) {
  const sentinel = useRef<HTMLDivElement>(null);
  const { hasMore, loadingMore, loadMore, error } = list;
  useEffect(() => {
    const element = sentinel.current;
    if (!auto || !hasMore || loadingMore || error || !element || typeof IntersectionObserver === 'undefined') return;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) loadMore();
    });
    observer.observe(element);
    return () => observer.disconnect();
  }, [auto, hasMore, loadingMore, loadMore, error]);
  if (!hasMore) return null;
  return (
    <div className="list-footer log-footer" ref={sentinel}>
      {note && <span className="muted">{note}</span>}
      <button type="button" className="button" onClick={loadMore} disabled={loadingMore}>
        {loadingMore ? 'Loading…' : moreLabel}
      </button>
    </div>
  );
}

/** Runs `open` on Enter or Space, for table rows that open something. */
export function onActivate(open: () => void) {
  return (event: KeyboardEvent) => {
    if (event.target !== event.currentTarget) return;
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      open();
    }
  };
}
