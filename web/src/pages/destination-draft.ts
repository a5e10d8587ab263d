import type { Destination } from './destination-shared';

/**
 * A destination's settings as the form holds them (numbers stay text until submitted),
 * and as the API takes them: parsing says in words what the API would refuse.
 */

export interface HeaderRow {
  name: string;
  value: string;
}

export interface DestinationDraft {
  name: string;
  url: string;
  allIntegrations: boolean;
  integrationIds: string[];
  /** As typed: patterns separated by commas, spaces or lines. */
  eventPatterns: string;
  /** Creating always sets the headers; editing, only when asked to replace them. */
  replaceHeaders: boolean;
  headers: HeaderRow[];
  timeoutSeconds: string;
  ratePerSecond: string;
  maxInFlight: string;
}

/** What POST and PATCH /destinations take. */
export interface DestinationBody {
  name: string;
  url: string;
  integration_ids: string[] | null;
  event_patterns: string[];
  headers?: Record<string, string>;
  timeout_ms: number;
  rate_per_second: number | null;
  max_in_flight: number;
}

/** The API's defaults and bounds (design: "Vocabulary"). */
const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_MAX_IN_FLIGHT = 100;
const DEFAULT_RATE_PER_SECOND = 100;
export const MAX_HEADERS = 20;

/** The form started from the destination, or from the defaults for a new one. */
export function draftOf(destination?: Destination): DestinationDraft {
  return {
    name: destination?.name ?? '',
    url: destination?.url ?? '',
    allIntegrations: destination ? destination.integration_ids === null : true,
    integrationIds: destination?.integration_ids ?? [],
    eventPatterns: (destination?.event_patterns ?? ['*']).join(', '),
    replaceHeaders: destination === undefined,
    headers: [],
    timeoutSeconds: String((destination?.timeout_ms ?? DEFAULT_TIMEOUT_MS) / 1000),
    // Empty is no limit; a new destination starts at the API's default.
    ratePerSecond: destination === undefined ? String(DEFAULT_RATE_PER_SECOND) : destination.rate_per_second === null ? '' : String(destination.rate_per_second),
    maxInFlight: String(destination?.max_in_flight ?? DEFAULT_MAX_IN_FLIGHT),
  };
}

function wholeNumber(text: string, min: number, max: number, message: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isInteger(value) || value < min || value > max) throw new Error(message);
  return value;
}

/** The fields as the API takes them; an Error (shown by the form) for what it would refuse. */
export function parseDraft(draft: DestinationDraft): DestinationBody {
  const name = draft.name.trim();
  if (!name) throw new Error('Give the destination a name.');
  const url = draft.url.trim();
  if (!url) throw new Error('Give the URL to send to.');
  if (!draft.allIntegrations && draft.integrationIds.length === 0) {
    throw new Error('Pick at least one integration, or choose every integration.');
  }
  const patterns = [...new Set(draft.eventPatterns.split(/[\s,]+/).filter((p) => p !== ''))];
  if (patterns.length === 0) throw new Error('Give at least one event pattern; * takes every event.');
  const seconds = Number(draft.timeoutSeconds);
  if (!Number.isFinite(seconds) || seconds < 1 || seconds > 60) throw new Error('The timeout is from 1 to 60 seconds.');
  const body: DestinationBody = {
    name,
    url,
    integration_ids: draft.allIntegrations ? null : draft.integrationIds,
    event_patterns: patterns,
    timeout_ms: Math.round(seconds * 1000),
    rate_per_second:
      draft.ratePerSecond.trim() === ''
        ? null
        : wholeNumber(draft.ratePerSecond, 1, 10_000, 'The rate is a whole number of requests per second from 1 to 10,000, or empty for no limit.'),
    max_in_flight: wholeNumber(draft.maxInFlight, 1, 1000, 'Requests in flight is a whole number from 1 to 1,000.'),
  };
  if (draft.replaceHeaders) {
    const headers: Record<string, string> = {};
    for (const row of draft.headers) {
      const headerName = row.name.trim();
      if (headerName === '' && row.value === '') continue;
      if (headerName === '') throw new Error('A header has a value but no name.');
      if (Object.keys(headers).some((n) => n.toLowerCase() === headerName.toLowerCase())) {
        throw new Error(`The header ${headerName} is there twice.`);
      }
      headers[headerName] = row.value;
    }
    body.headers = headers;
  }
  return body;
}

/** Only what differs from `destination`: PATCH changes only the fields sent. */
export function changesOf(destination: Destination, body: DestinationBody): Partial<DestinationBody> {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const changes: Partial<DestinationBody> = {};
  if (body.name !== destination.name) changes.name = body.name;
  if (body.url !== destination.url) changes.url = body.url;
  if (!same(body.integration_ids, destination.integration_ids)) changes.integration_ids = body.integration_ids;
  if (!same(body.event_patterns, destination.event_patterns)) changes.event_patterns = body.event_patterns;
  if (body.timeout_ms !== destination.timeout_ms) changes.timeout_ms = body.timeout_ms;
  if (body.rate_per_second !== destination.rate_per_second) changes.rate_per_second = body.rate_per_second;
  if (body.max_in_flight !== destination.max_in_flight) changes.max_in_flight = body.max_in_flight;
  if (body.headers !== undefined) changes.headers = body.headers;
  return changes;
}
