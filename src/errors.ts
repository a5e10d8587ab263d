/**
 * The closed list of errors the service shows to clients, and the one place that turns a
 * code into an HTTP status and a title. Domain code throws `AppError(code)`; only the HTTP
 * layer (app.ts) renders it.
 */
export const ERRORS = {
  missing_api_key: { status: 401, title: 'Missing API key', message: 'API key is required in the X-API-Key header.' },
  invalid_api_key: {
    status: 401,
    title: 'Invalid API key',
    message: 'The provided API key is not valid or has been revoked.',
  },
  insufficient_permissions: {
    status: 403,
    title: 'Insufficient permissions',
    message: 'Your API key does not have permission to access this resource.',
  },
  invalid_signature: {
    status: 401,
    title: 'Invalid signature',
    message: "The request is not signed as this integration's source expects.",
  },
  signature_expired: {
    status: 401,
    title: 'Signature expired',
    message: "The request's signature timestamp is outside the accepted window.",
  },
  integration_disabled: {
    status: 403,
    title: 'Integration disabled',
    message: 'This integration is disabled and does not accept webhooks.',
  },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported media type',
    message: 'The request body must be JSON, sent with Content-Type: application/json.',
  },
  payload_too_large: { status: 413, title: 'Payload too large', message: 'The request body is larger than the limit.' },
  invalid_json: { status: 400, title: 'Invalid JSON', message: 'The request body must be a valid JSON object.' },
  invalid_request: { status: 400, title: 'Invalid request', message: 'The request is not valid.' },
  validation_failed: { status: 422, title: 'Validation failed', message: 'The webhook does not follow the rules.' },
  idempotency_conflict: {
    status: 422,
    title: 'Idempotency key reused',
    message: 'This idempotency key was already used with a different body.',
  },
  rate_limited: { status: 429, title: 'Rate limit exceeded', message: 'Too many requests; retry later.' },
  auth_rate_limited: {
    status: 429,
    title: 'Too many failed authentications',
    message: 'Too many requests with a missing or invalid API key came from this address; retry later.',
  },
  request_timeout: { status: 408, title: 'Request timeout', message: 'The request was not received in time.' },
  uri_too_long: { status: 414, title: 'URI too long', message: 'The request URL is longer than the limit.' },
  headers_too_large: {
    status: 431,
    title: 'Request headers too large',
    message: 'The request line and headers are larger than the limit.',
  },
  service_unavailable: {
    status: 503,
    title: 'Service unavailable',
    message: 'The service cannot store this request right now; retry later.',
  },
  invalid_metrics_token: {
    status: 401,
    title: 'Invalid metrics token',
    message: 'GET /metrics needs the header Authorization: Bearer <INTAKE_METRICS_TOKEN>.',
  },
  not_signed_in: {
    status: 401,
    title: 'Not signed in',
    message: 'Your session has expired or is not valid; sign in again.',
  },
  invalid_credentials: { status: 401, title: 'Invalid credentials', message: 'The email or password is not correct.' },
  two_factor_required: {
    status: 401,
    title: 'Two-factor code required',
    message: 'Enter the 6-digit code from your authenticator app, or one of your recovery codes.',
  },
  invalid_two_factor_code: {
    status: 401,
    title: 'Invalid two-factor code',
    message: 'The two-factor code is not correct, or was already used.',
  },
  two_factor_setup_required: {
    status: 403,
    title: 'Two-factor sign-in required',
    message: 'This company requires two-factor sign-in: turn it on under Account to continue.',
  },
  invitation_invalid: {
    status: 403,
    title: 'Invitation not valid',
    message: 'This invitation link is wrong, expired, revoked or already used. Ask the company for a new one.',
  },
  invitation_wrong_account: {
    status: 403,
    title: 'Invitation for another account',
    message: 'This invitation is for another email than the account you are signed in with.',
  },
  reset_link_invalid: {
    status: 403,
    title: 'Reset link not valid',
    message: 'This password reset link is wrong, expired or already used. Ask for a new one.',
  },
  csrf_failed: {
    status: 403,
    title: 'CSRF check failed',
    message: 'A change made with a session must carry the X-CSRF-Token header of that session.',
  },
  role_required: {
    status: 403,
    title: 'Insufficient permissions',
    message: 'Your role in this company does not allow this.',
  },
  setup_link_invalid: {
    status: 403,
    title: 'Setup link not valid',
    message: 'This setup link is wrong, expired or already used. Sign in, or ask the operator for a new link.',
  },
  conflict: { status: 409, title: 'Conflict', message: 'The request conflicts with the current state.' },
  delivery_loop: {
    status: 508,
    title: 'Loop detected',
    message: "This request is one of this intake's own deliveries coming back to a webhook address: a destination points at intake itself.",
  },
  redelivery_busy: {
    status: 429,
    title: 'Bulk operation under way',
    message: "Another replay or send of this company's deliveries is under way; retry when it has finished.",
  },
  redelivery_budget_spent: {
    status: 429,
    title: 'Redelivery budget spent',
    message: 'This company has replayed or sent as many deliveries as it may for now; retry later.',
  },
  expectation_failed: { status: 417, title: 'Expectation failed', message: 'Only "Expect: 100-continue" is understood.' },
  not_found: { status: 404, title: 'Not found', message: 'The requested resource does not exist.' },
  method_not_allowed: { status: 405, title: 'Method not allowed', message: 'This method is not allowed on this path.' },
  internal_error: { status: 500, title: 'Internal server error', message: 'Something went wrong on our side.' },
} as const satisfies Record<string, { status: number; title: string; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

/** A failure a client may cause or see, named by a code from the table above. */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message?: string,
    /** Extra fields for the body (`field`, …) and the Retry-After delay in seconds. */
    readonly details: { field?: string; retryAfterSeconds?: number; allow?: string[] } = {},
  ) {
    // An answer to a client, not a fault of ours: it carries no stack trace. Capturing one
    // walks the whole stack of Fastify's hooks, and was the largest single cost of a 503
    // under overload (10 % of the event loop at twice intake's maximum, docs/performance.md).
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message ?? ERRORS[code].message);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = 'AppError';
  }

  get status(): number {
    return ERRORS[this.code].status;
  }
}

export interface ErrorBody {
  error: string;
  message: string;
  code: ErrorCode;
  request_id?: string;
  field?: string;
}

/** The JSON body of an error; the only shape errors take on the wire. */
export function errorBody(error: AppError, requestId?: string): ErrorBody {
  const body: ErrorBody = { error: ERRORS[error.code].title, message: error.message, code: error.code };
  if (error.details.field !== undefined) body.field = error.details.field;
  if (requestId !== undefined) body.request_id = requestId;
  return body;
}
