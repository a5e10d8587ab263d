/**
 * What a destination's transformation sees and gives back, and the check of what it gave
 * back. The value comes out of the sandbox as JSON text, parsed here: plain data with own
 * properties only, so no getter, prototype or host object of the sandbox's ever reaches the
 * service, and a `__proto__` key is a key like any other (JSON.parse defines it).
 */

/** The outbound request as the transformation gets it, and must return it. */
export interface TransformRequest {
  /** The parsed JSON body, or the text when the body is not JSON. */
  body: unknown;
  headers: Record<string, string>;
  /** Appended to the destination's URL: '' or a path starting with `/`. */
  path: string;
  query: Record<string, string>;
}

/** What the transformation knows of the delivery, beside the request: its only clock. */
export interface TransformContext {
  webhookId: string;
  event: string;
  integrationId: string;
  /** When the webhook arrived, ISO 8601. */
  receivedAt: string;
  attempt: number;
}

export type TransformOutcome =
  | { kind: 'request'; request: TransformRequest }
  /** The transformation returned nothing (undefined or null): the delivery is not sent. */
  | { kind: 'dropped' }
  /** The first 1 KiB of what went wrong, with the line when the sandbox gives one. */
  | { kind: 'error'; message: string };

/** An error outcome's message is cut to this many characters. */
export const MESSAGE_CHARS = 1024;
/**
 * The largest returned request, as JSON: intake's largest body (16 MiB) and some. It is
 * parsed on the worker and cloned to the event loop, so it bounds what one outcome costs there.
 */
export const MAX_RESULT_CHARS = 16 * 1024 * 1024 + 64 * 1024;

const FIELDS = ['body', 'headers', 'path', 'query'];
/** RFC 9110's token: what a header's name may be. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FORBIDDEN_IN_VALUE = /[\r\n\0]/;
const FORBIDDEN_IN_PATH = /[\s?#\0-\x1f\x7f]/;

/** An error outcome, its message cut to MESSAGE_CHARS. */
export function failed(message: string): TransformOutcome {
  return { kind: 'error', message: message.length > MESSAGE_CHARS ? `${message.slice(0, MESSAGE_CHARS - 1)}…` : message };
}

/** The outcome of what the transformation returned, as JSON text (undefined: it returned nothing). */
export function outcomeOf(returned: string | undefined): TransformOutcome {
  if (returned === undefined) return { kind: 'dropped' };
  if (returned.length > MAX_RESULT_CHARS) return failed(`the returned request is larger than ${MAX_RESULT_CHARS} characters as JSON`);
  const value: unknown = JSON.parse(returned);
  if (value === null) return { kind: 'dropped' };
  if (!isRecord(value)) {
    return failed(
      `the transform must return the request (an object with body, headers, path and query), or nothing to drop the delivery; it returned ${describe(value)}`,
    );
  }
  const unknown = Object.keys(value).filter((key) => !FIELDS.includes(key));
  if (unknown.length > 0) return failed(`the returned request has unknown fields: ${unknown.join(', ')} (it has body, headers, path and query)`);
  const missing = FIELDS.filter((key) => !Object.hasOwn(value, key));
  if (missing.length > 0) return failed(`the returned request lacks ${missing.join(', ')} (set body to null for an empty body)`);
  const headers = stringMap(value.headers, 'headers');
  if (typeof headers === 'string') return failed(headers);
  const badName = Object.keys(headers).find((name) => !TOKEN.test(name));
  if (badName !== undefined) return failed(`headers: ${JSON.stringify(badName)} is not a valid header name`);
  const badValue = Object.keys(headers).find((name) => FORBIDDEN_IN_VALUE.test(headers[name]!));
  if (badValue !== undefined) return failed(`headers.${badValue}: a header's value may not hold CR, LF or NUL`);
  const query = stringMap(value.query, 'query');
  if (typeof query === 'string') return failed(query);
  const path = pathProblem(value.path);
  if (path !== null) return failed(path);
  return { kind: 'request', request: { body: value.body, headers, path: value.path as string, query } };
}

/** The map as strings to strings, or what is wrong with it. */
function stringMap(value: unknown, field: string): Record<string, string> | string {
  if (!isRecord(value)) return `${field} must be an object of strings, not ${describe(value)}`;
  const entries = Object.entries(value);
  for (const [key, entry] of entries) {
    // An own `__proto__` is harmless here, but `Object.assign` or a `for…in` copy by a caller
    // would turn it into a prototype: it is never a real header or query parameter anyway.
    if (key === '__proto__') return `${field}: "__proto__" is not allowed as a name`;
    if (typeof entry !== 'string') return `${field}.${key} must be a string, not ${describe(entry)}`;
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

function pathProblem(path: unknown): string | null {
  if (typeof path !== 'string') return `path must be a string, not ${describe(path)}`;
  if (path === '') return null;
  if (!path.startsWith('/')) return `path must be empty or start with "/": ${JSON.stringify(path.slice(0, 100))}`;
  if (path.startsWith('//')) return 'path may not start with "//" (it would name another host)';
  if (FORBIDDEN_IN_PATH.test(path)) return 'path may not hold whitespace, control characters, "?" or "#" (the query goes in query)';
  return null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
