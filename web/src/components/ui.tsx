import { useEffect, useRef, useState, type ReactNode } from 'react';
import type { ApiError } from '../api/client';

/** The title row of every page, with its main actions on the right. */
export function PageHeader({ title, description, actions }: { title: string; description?: ReactNode; actions?: ReactNode }) {
  return (
    <header className="page-header">
      <div>
        <h1>{title}</h1>
        {description && <p className="muted">{description}</p>}
      </div>
      {actions && <div className="actions">{actions}</div>}
    </header>
  );
}

/** A list's empty state: says what there is to do next. */
export function EmptyState({ title, children, action }: { title: string; children?: ReactNode; action?: ReactNode }) {
  return (
    <div className="empty-state" role="status">
      <h2>{title}</h2>
      {children && <div className="muted">{children}</div>}
      {action}
    </div>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <div className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      {label}
    </div>
  );
}

/** An API error in words, with a way to try again. */
export function ErrorMessage({ error, retry }: { error: ApiError | Error; retry?: () => void }) {
  return (
    <div className="error-message" role="alert">
      <span>{error.message}</span>
      {retry && (
        <button type="button" className="button small" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/**
 * The usual wrapper of a loaded section: a spinner the first time, the error with a retry,
 * the empty state, or the content.
 */
export function Loaded<T>({
  state,
  empty,
  children,
}: {
  state: { data: T | undefined; error: ApiError | undefined; loading: boolean; reload(): void };
  empty?: (data: T) => ReactNode | undefined;
  children: (data: T) => ReactNode;
}) {
  if (state.error && !state.data) return <ErrorMessage error={state.error} retry={state.reload} />;
  if (!state.data) return <Loading />;
  const emptyState = empty?.(state.data);
  return (
    <>
      {state.error && <ErrorMessage error={state.error} retry={state.reload} />}
      {emptyState ?? children(state.data)}
    </>
  );
}

export type Tone = 'neutral' | 'good' | 'warn' | 'bad' | 'info';

export function Badge({ tone = 'neutral', children }: { tone?: Tone; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

/** A time as "3 min ago", with the exact UTC time on hover. */
export function Time({ iso, fallback = '—' }: { iso: string | null | undefined; fallback?: string }) {
  if (!iso) return <span className="muted">{fallback}</span>;
  return (
    <time dateTime={iso} title={new Date(iso).toUTCString()}>
      {relativeTime(iso)}
    </time>
  );
}

export function relativeTime(iso: string, now = Date.now()): string {
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  const format = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
  const units: [Intl.RelativeTimeFormatUnit, number][] = [
    ['day', 86400],
    ['hour', 3600],
    ['minute', 60],
  ];
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size) return format.format(Math.round(seconds / size), unit);
  }
  return Math.abs(seconds) < 10 ? 'just now' : format.format(seconds, 'second');
}

/**
 * Copies `text`; says "Copied" for a moment. `label` is what it shows, `name` what it is
 * called for a screen reader (with the start of the text), when the label alone is too short.
 */
export function CopyButton({ text, label = 'Copy', name = label }: { text: string; label?: string; name?: string }) {
  const [copied, setCopied] = useState(false);
  const timer = useRef<ReturnType<typeof setTimeout>>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  return (
    <button
      type="button"
      className="button small"
      aria-label={`${name}: ${text.length > 40 ? text.slice(0, 40) + '…' : text}`}
      onClick={async () => {
        await navigator.clipboard.writeText(text);
        setCopied(true);
        clearTimeout(timer.current);
        timer.current = setTimeout(() => setCopied(false), 1500);
      }}
    >
      {copied ? 'Copied' : label}
    </button>
  );
}

/**
 * A value to copy: its label above, the value (monospace, selectable, wrapping) and a short
 * "Copy" button on one line, however long the value.
 */
export function CopyField({ label, value }: { label: string; value: string }) {
  return (
    <div className="copy-field">
      <span className="copy-label">{label}</span>
      <code>{value}</code>
      <CopyButton text={value} name={`Copy ${label}`} />
    </div>
  );
}

/** What the URL names is not there: what happened, and the ways back. */
export function NotFound({ title, children, actions }: { title: string; children: ReactNode; actions: ReactNode }) {
  return (
    <section className="not-found" aria-labelledby="not-found-title">
      <h1 id="not-found-title">{title}</h1>
      <p className="muted">{children}</p>
      <div className="actions">{actions}</div>
    </section>
  );
}

/** Counts as people read them: 12,345. */
export const numberFormat = new Intl.NumberFormat('en');

/** 1048576 → "1 MiB", 1500 → "1.5 KiB". */
export function formatBytes(bytes: number): string {
  const units: [string, number][] = [
    ['MiB', 1024 * 1024],
    ['KiB', 1024],
  ];
  for (const [unit, size] of units) {
    if (bytes >= size) return `${numberFormat.format(Math.round((bytes / size) * 10) / 10)} ${unit}`;
  }
  return `${numberFormat.format(bytes)} bytes`;
}
