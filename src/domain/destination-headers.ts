import { AppError } from '../errors.js';

/**
 * The extra headers a company adds to its destination's requests (an Authorization, a
 * routing key). Checked when they are set, so an attempt never fails on them: names that
 * intake sets itself or that frame the request are refused, and values must be what Node's
 * HTTP client sends (no control characters but tab, nothing beyond Latin-1), which rules
 * out CR/LF header injection too.
 */

export const MAX_HEADERS = 20;
const MAX_NAME_LENGTH = 100;
const MAX_VALUE_LENGTH = 4096;
/** RFC 9110's token: what a header name may be made of. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What Node's http refuses in a header value (lib/_http_common.js checkInvalidHeaderChar). */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const REFUSED = new Set(['host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'user-agent']);
const REFUSED_PREFIXES = ['webhook-', 'x-intake-'];
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
    if (REFUSED.has(lower) || REFUSED_PREFIXES.some((prefix) => lower.startsWith(prefix))) {
      throw invalid(`headers: ${name} is set by intake and cannot be replaced (nor can host, content-*, connection, user-agent, webhook-* and x-intake-*).`);
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

/** A name as an error message may quote it: no control characters, not too long. */
function printable(name: string): string {
  return name.replace(/[^\x20-\x7e]/g, '?').slice(0, MAX_NAME_LENGTH);
}

function invalid(message: string): AppError {
  return new AppError('invalid_request', message, { field: FIELD });
}
