import { AppError } from '../errors.js';

/**
 * The extra headers a company adds to its destination's requests (an Authorization, a
 * routing key). Checked when they are set, so an attempt never fails on them: names that
 * intake sets itself, or that belong to the connection and the request's framing (which
 * the HTTP client refuses or which would break the request), are refused, and values must
 * be what Node's HTTP client sends (no control characters but tab, nothing beyond
 * Latin-1), which rules out CR/LF header injection too.
 */

export const MAX_HEADERS = 20;
const MAX_NAME_LENGTH = 100;
const MAX_VALUE_LENGTH = 4096;
/** RFC 9110's token: what a header name may be made of. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What Node's http refuses in a header value (lib/_http_common.js checkInvalidHeaderChar). */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/**
 * Set on every request by intake (content-* included: the body is the webhook's own, as it
 * came; traceparent and tracestate name the attempt's span when tracing is on).
 */
const SET_BY_INTAKE = new Set(['user-agent', 'traceparent', 'tracestate']);
const SET_BY_INTAKE_PREFIXES = ['content-', 'webhook-', 'x-intake-'];
/**
 * The connection's and the framing's: undici refuses transfer-encoding, keep-alive, upgrade
 * and expect outright (lib/core/request.js processHeader), takes host and connection as its
 * own instructions, and the rest are hop-by-hop (RFC 9110 7.6.1, RFC 9113 for
 * http2-settings) or would ask the receiver for a framing the client does not speak
 * (`te: gzip`, a trailer never sent). Accepted, each made every attempt fail as `other`.
 */
const CONNECTION_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'http2-settings',
]);
const FIELD = 'headers';

/** The headers of a request body, checked (names as given, in order); throws `invalid_request` naming `headers`. */
export function validDestinationHeaders(headers: Record<string, string>): Record<string, string> {
  const entries = Object.entries(headers);
  if (entries.length > MAX_HEADERS) throw invalid(`headers holds at most ${MAX_HEADERS} headers.`);
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    if (name.length === 0 || name.length > MAX_NAME_LENGTH || !TOKEN.test(name)) {
      throw invalid(`headers: "${printable(name)}" is not a header name (letters, digits and !#$%&'*+-.^_\`|~, at most ${MAX_NAME_LENGTH}).`);
    }
    const lower = name.toLowerCase();
    if (SET_BY_INTAKE.has(lower) || SET_BY_INTAKE_PREFIXES.some((prefix) => lower.startsWith(prefix))) {
      throw invalid(`headers: ${name} is set by intake and cannot be replaced (nor can user-agent, traceparent, tracestate, content-*, webhook-* and x-intake-*).`);
    }
    if (CONNECTION_HEADERS.has(lower)) {
      throw invalid(`headers: ${name} belongs to the connection, which intake's HTTP client manages: it cannot be sent (nor can ${[...CONNECTION_HEADERS].join(', ')}).`);
    }
    if (seen.has(lower)) throw invalid(`headers: ${name} is given twice (header names ignore case).`);
    seen.add(lower);
    if (typeof value !== 'string' || value.length > MAX_VALUE_LENGTH) throw invalid(`headers: the value of ${name} must be text of at most ${MAX_VALUE_LENGTH} characters.`);
    if (INVALID_VALUE.test(value)) {
      throw invalid(`headers: the value of ${name} holds a control character (CR, LF, NUL…) or a character beyond Latin-1, which HTTP cannot carry.`);
    }
  }
  return Object.fromEntries(entries);
}

/**
 * Whether a destination's headers stay with it when its URL changes from `current` to
 * `next`: only while the origin (scheme, host and port) stays the same. They are most often
 * its owner's credentials for that receiver (an Authorization), sealed and never shown: kept
 * across a change of origin, whoever may change the URL could send them to a server of
 * their own.
 */
export function headersFollowUrl(current: string, next: string): boolean {
  const [from, to] = [URL.parse(current), URL.parse(next)];
  return from !== null && to !== null && from.origin === to.origin;
}

/** A name as an error message may quote it: no control characters, not too long. */
function printable(name: string): string {
  return name.replace(/[^\x20-\x7e]/g, '?').slice(0, MAX_NAME_LENGTH);
}

function invalid(message: string): AppError {
  return new AppError('invalid_request', message, { field: FIELD });
}
