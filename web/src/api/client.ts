/**
 * The panel's one HTTP client. Everything goes to /api/v1 with the session cookie; changes
 * carry the session's CSRF token, and the chosen company travels as X-Company-Id.
 */

/** An error answered by the API: `message` is written for people and shown as is. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    /** From Retry-After, on 429 and 503. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** The connection state the client adds to every request; set by the session provider. */
export const connection: {
  csrfToken?: string;
  companyId?: string;
  onSignedOut?: () => void;
  /** The company requires two-factor sign-in, which the user has not turned on yet. */
  onTwoFactorSetupRequired?: () => void;
} = {};

type Query = Record<string, string | number | boolean | undefined | null>;

/** `/api/v1` + path + the query, without empty values. */
export function apiUrl(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  }
  const search = params.toString();
  return `/api/v1${path}${search ? `?${search}` : ''}`;
}

async function request<T>(method: string, path: string, options: { query?: Query; body?: unknown; text?: boolean } = {}): Promise<T> {
  const headers: Record<string, string> = { accept: options.text ? 'text/plain, application/json' : 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && connection.csrfToken) headers['x-csrf-token'] = connection.csrfToken;
  if (connection.companyId) headers['x-company-id'] = connection.companyId;
  let response: Response;
  try {
    response = await fetch(apiUrl(path, options.query), {
      method,
      headers,
      credentials: 'same-origin',
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
  } catch {
    throw new ApiError(0, 'network', 'The server cannot be reached. Check your connection and try again.');
  }
  if (response.status === 204) return undefined as T;
  if (options.text && response.ok) return (await response.text()) as T;
  const body = (await response.json().catch(() => null)) as Record<string, unknown> | null;
  if (!response.ok) {
    const code = typeof body?.code === 'string' ? body.code : 'unknown';
    if (response.status === 401 && code === 'not_signed_in') connection.onSignedOut?.();
    // The requirement may have been turned on since the session was loaded: reloading it
    // brings the layout's banner, which keeps the user on the Account page.
    if (response.status === 403 && code === 'two_factor_setup_required') connection.onTwoFactorSetupRequired?.();
    const message = typeof body?.message === 'string' ? body.message : `The server answered ${response.status}.`;
    const retryAfter = Number(response.headers.get('retry-after') ?? NaN);
    throw new ApiError(
      response.status,
      code,
      message,
      typeof body?.field === 'string' ? body.field : undefined,
      Number.isFinite(retryAfter) ? retryAfter : undefined,
    );
  }
  return body as T;
}

export const api = {
  get: <T>(path: string, query?: Query) => request<T>('GET', path, { query }),
  /** A plain-text answer (a report to download); errors are JSON as everywhere. */
  getText: (path: string) => request<string>('GET', path, { text: true }),
  post: <T>(path: string, body: unknown = {}) => request<T>('POST', path, { body }),
  patch: <T>(path: string, body: unknown) => request<T>('PATCH', path, { body }),
  put: <T>(path: string, body: unknown) => request<T>('PUT', path, { body }),
  delete: <T = void>(path: string) => request<T>('DELETE', path),
};

/** Every list of the API has this shape: newest first, null next_cursor on the last page. */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}
