import { Badge, relativeTime, type Tone } from '../components/ui';

/**
 * What the destination pages share: the shapes of /api/v1/destinations and
 * /api/v1/deliveries (src/api/destinations.ts, src/api/deliveries.ts), and how their
 * states and errors read in words.
 */

export type DestinationStatus = 'active' | 'paused' | 'disabled';

export interface Destination {
  id: string;
  name: string;
  url: string;
  /** Null: every integration of the company. */
  integration_ids: string[] | null;
  event_patterns: string[];
  /** The extra headers' names: their values are never shown again. */
  header_names: string[];
  timeout_ms: number;
  /** Null: no limit. */
  rate_per_second: number | null;
  max_in_flight: number;
  status: DestinationStatus;
  /** Why intake disabled it, in words. */
  disabled_reason: string | null;
  disabled_at: string | null;
  /** The first failed attempt since the last success. */
  failing_since: string | null;
  last_success_at: string | null;
  /** While a rotation's overlap lasts, the previous secret signs too, until then. */
  previous_secret_expires_at: string | null;
  rules: DestinationRules;
  created_at: string;
  updated_at: string;
}

/**
 * What a destination does with its matching webhooks (docs/destinations.md, "Rules"),
 * applied in this order: delay, filter, deduplicate, transformation; then its retry policy.
 */
export interface DestinationRules {
  /** Every save is a new version; 0: never set. */
  version: number;
  /** A Hookdeck-style filter over body, headers, query and path; null: every matching webhook. */
  filter: Record<string, unknown> | null;
  /** The JavaScript of `function transform(request, context)`; null: sent as received. */
  transformation: { code: string } | null;
  /** fields null: the whole body is compared. */
  deduplicate: { fields: string[] | null; window_seconds: number } | null;
  delay_seconds: number;
  /** Null: the standard schedule. */
  retry: RetryPolicy | null;
}

export interface RetryPolicy {
  strategy: 'exponential' | 'linear';
  /** The first attempt included. */
  attempts: number;
  interval_seconds: number;
  /** Null: no bound. */
  max_age_seconds: number | null;
}

/** POST /destinations: the signing secret is in this answer only. */
export interface CreatedDestination {
  destination: Destination;
  signing_secret: string;
}

export type DeliveryState = 'pending' | 'held' | 'succeeded' | 'failed' | 'cancelled' | 'filtered' | 'deduplicated';

export interface Delivery {
  id: string;
  destination_id: string;
  webhook_uuid: string;
  integration_id: string;
  event: string;
  state: DeliveryState;
  /** Attempts in the current series. */
  attempts: number;
  /** 0: the original; n: the n-th replay. */
  series: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: AttemptError | null;
  /** The destination's rules version its last attempt (or skip) went out under; null before any. */
  rules_version: number | null;
  /** For a filtered delivery: what refused it. */
  skipped_by: 'filter' | 'transformation' | null;
  /** For a deduplicated delivery: the delivery it repeats. */
  duplicate_of: string | null;
  created_at: string;
  updated_at: string;
}

export type AttemptError =
  | 'http_status'
  | 'redirect'
  | 'timeout'
  | 'connection_refused'
  | 'connection_reset'
  | 'dns'
  | 'tls'
  | 'blocked_address'
  | 'webhook_purged'
  | 'transformation_error'
  | 'other';

export interface Attempt {
  id: string;
  series: number;
  /** 1-based within its series. */
  number: number;
  attempted_at: string;
  duration_ms: number;
  status: number | null;
  error: AttemptError | null;
  /** The first 1 KiB of the answer's body. */
  response_excerpt: string | null;
  next_attempt_at: string | null;
}

/** GET /deliveries/{id}: the delivery and its attempts, newest first. */
export interface DeliveryDetail {
  delivery: Delivery;
  attempts: Attempt[];
}

/** GET /destinations/{id}/stats: buckets start at `since`, every `bucket_seconds`; empty ones are left out. */
export interface DestinationStats {
  since: string;
  until: string;
  bucket_seconds: number;
  attempts: number;
  succeeded: number;
  failed: number;
  /** Null when nothing was attempted. */
  success_rate: number | null;
  latency_ms: { p50: number | null; p90: number | null; p99: number | null };
  backlog: { pending: number; held: number; in_flight: number; oldest_due_at: string | null };
  buckets: { start: string; succeeded: number; failed: number; p50_ms: number | null; p99_ms: number | null }[];
  /** The range held more attempts than one read counts: the figures cover the newest. */
  truncated: boolean;
}

const GONE = /\b410\b/;

/**
 * Why intake disabled it, in the user's words. Intake disables a destination for two
 * reasons only (src/store/queries/delivery-work.ts): a 410 Gone, or failing for days
 * without a success; its own `disabled_reason` says so with UTC timestamps.
 */
export function disabledWhy(destination: Destination): string {
  const reason = destination.disabled_reason ?? '';
  if (GONE.test(reason)) {
    return 'The receiver answered 410 Gone: it says this address no longer exists, so intake stopped sending to it at once.';
  }
  if (destination.failing_since) {
    const since = new Date(destination.failing_since).toLocaleString();
    return `No attempt has succeeded since ${since} (${relativeTime(destination.failing_since)}), so intake stopped trying.`;
  }
  return reason || 'It kept failing, so intake stopped trying.';
}

/** The same, short enough for a table cell. */
export function disabledSummary(destination: Destination): string {
  if (GONE.test(destination.disabled_reason ?? '')) return 'The receiver answered 410 Gone.';
  if (destination.failing_since) return `No success since ${new Date(destination.failing_since).toLocaleString()}.`;
  return destination.disabled_reason ?? 'It kept failing.';
}

const STATUS_TONES: Record<DestinationStatus, Tone> = { active: 'good', paused: 'warn', disabled: 'bad' };

export function DestinationStatusBadge({ status }: { status: DestinationStatus }) {
  return <Badge tone={STATUS_TONES[status]}>{status}</Badge>;
}

export const DELIVERY_STATES: { state: DeliveryState; label: string; tone: Tone; hint: string }[] = [
  { state: 'pending', label: 'pending', tone: 'info', hint: 'Waiting for its next attempt, or being sent' },
  { state: 'held', label: 'held', tone: 'warn', hint: 'Held while the destination is paused or disabled' },
  { state: 'succeeded', label: 'succeeded', tone: 'good', hint: 'The destination answered 2xx' },
  { state: 'failed', label: 'failed', tone: 'bad', hint: 'Every attempt failed: replay it once the destination is fixed' },
  { state: 'cancelled', label: 'cancelled', tone: 'neutral', hint: 'Its destination was deleted' },
  { state: 'filtered', label: 'filtered', tone: 'neutral', hint: "The destination's rules did not send it" },
  { state: 'deduplicated', label: 'deduplicated', tone: 'neutral', hint: 'A repeat of an earlier delivery' },
];

export function DeliveryStateBadge({ state }: { state: DeliveryState }) {
  const known = DELIVERY_STATES.find((s) => s.state === state);
  return (
    <span title={known?.hint}>
      <Badge tone={known?.tone ?? 'neutral'}>{state}</Badge>
    </span>
  );
}

/** The usual words for the statuses a receiver answers most. */
const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  301: 'Moved Permanently',
  302: 'Found',
  307: 'Temporary Redirect',
  308: 'Permanent Redirect',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  410: 'Gone',
  413: 'Content Too Large',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** "500 Internal Server Error". */
export function statusText(status: number): string {
  const words = STATUS_TEXT[status];
  return words ? `${status} ${words}` : String(status);
}

const ERROR_WORDS: Record<AttemptError, string> = {
  http_status: 'Answered with an error status',
  redirect: 'Redirected (redirects are not followed)',
  timeout: 'No answer within the timeout',
  connection_refused: 'Connection refused',
  connection_reset: 'Connection closed before a full answer',
  dns: 'The host name does not resolve',
  tls: 'TLS error (certificate or handshake)',
  blocked_address: 'Refused: the host resolves to a private or internal address',
  webhook_purged: 'The webhook was deleted by retention before it could be sent',
  transformation_error: "The destination's transformation failed",
  other: 'Failed to send',
};

/** What an attempt (or a delivery's last attempt) came to, in words, and how it reads. */
export function outcomeOf(status: number | null, error: AttemptError | null): { text: string; tone: Tone } {
  if (error === null) return status === null ? { text: 'Not attempted yet', tone: 'neutral' } : { text: statusText(status), tone: 'good' };
  if (status !== null && (error === 'http_status' || error === 'redirect')) {
    return { text: error === 'redirect' ? `${statusText(status)}: redirects are not followed` : statusText(status), tone: 'bad' };
  }
  return { text: ERROR_WORDS[error] ?? error, tone: 'bad' };
}

/** The outcome as a badge, e.g. "500 Internal Server Error" or "Connection refused". */
export function Outcome({ status, error }: { status: number | null; error: AttemptError | null }) {
  const { text, tone } = outcomeOf(status, error);
  return <Badge tone={tone}>{text}</Badge>;
}

/** 0.987 → "98.7%"; null (nothing attempted) → "—". */
export function formatRate(rate: number | null): string {
  if (rate === null) return '—';
  const percent = rate * 100;
  return `${percent >= 99.95 || percent === 0 ? percent.toFixed(0) : percent.toFixed(1)}%`;
}

/** 850 → "850 ms", 15000 → "15 s". */
export function formatMs(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(Math.round(ms / 100) / 10).toLocaleString('en')} s`;
}
