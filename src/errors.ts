/**
 * The closed list of errors the service shows to clients, and the one place that turns a
 * code into an HTTP status and a title (and `when`: what causes it, the error reference's
 * column, rendered by `npm run docs`). Domain code throws `AppError(code)`; only the HTTP
 * layer (app.ts) renders it.
 */
export const ERRORS = {
  missing_api_key: {
    status: 401,
    title: 'Missing API key',
    message: 'API key is required in the X-API-Key header.',
    when: "A webhook address or the API was called without an `X-API-Key` header (or with an empty one). Send the integration's API key, or a management key for `/api/v1`.",
  },
  invalid_api_key: {
    status: 401,
    title: 'Invalid API key',
    message: 'The provided API key is not valid or has been revoked.',
    when: "The key is unknown, malformed, fails its checksum, belongs to another environment, was revoked or expired, or its integration was deleted.",
  },
  insufficient_permissions: {
    status: 403,
    title: 'Insufficient permissions',
    message: 'Your API key does not have permission to access this resource.',
    when: "The key is valid but not for this resource: another integration's or company's key, or a management key without the scope the route needs.",
  },
  invalid_signature: {
    status: 401,
    title: 'Invalid signature',
    message: "The request is not signed as this integration's source expects.",
    when: "The integration has a provider source and the request's signature does not match its secret (or is missing). The answer's `message` says which check failed; docs/sources.md lists them per provider.",
  },
  signature_expired: {
    status: 401,
    title: 'Signature expired',
    message: "The request's signature timestamp is outside the accepted window.",
    when: "The provider's signed timestamp is outside the source's tolerance window (a replayed or delayed request, or a clock far off).",
  },
  integration_disabled: {
    status: 403,
    title: 'Integration disabled',
    message: 'This integration is disabled and does not accept webhooks.',
    when: "The integration was disabled (`intake integration disable`, or the panel); enable it to accept webhooks again.",
  },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported media type',
    message: 'The request body must be JSON, sent with Content-Type: application/json.',
    when: "The webhook's `Content-Type` is not JSON (and the integration's source does not accept another type, e.g. Slack's or Twilio's forms).",
  },
  payload_too_large: {
    status: 413,
    title: 'Payload too large',
    message: 'The request body is larger than the limit.',
    when: "The body is larger than the integration's body limit (default `INTAKE_DEFAULT_BODY_LIMIT`, 1 MiB).",
  },
  invalid_json: {
    status: 400,
    title: 'Invalid JSON',
    message: 'The request body must be a valid JSON object.',
    when: "The body is not valid JSON, or not a JSON object.",
  },
  invalid_request: {
    status: 400,
    title: 'Invalid request',
    message: 'The request is not valid.',
    when: "A field of an API request is missing or not valid; `field` names it and `message` says the rule.",
  },
  validation_failed: {
    status: 422,
    title: 'Validation failed',
    message: 'The webhook does not follow the rules.',
    when: "The webhook's `event` or `data` breaks the contract's rules; `field` names which.",
  },
  idempotency_conflict: {
    status: 422,
    title: 'Idempotency key reused',
    message: 'This idempotency key was already used with a different body.',
    when: "An `Idempotency-Key` was sent again with a different body within its window.",
  },
  rate_limited: {
    status: 429,
    title: 'Rate limit exceeded',
    message: 'Too many requests; retry later.',
    when: "A limit was reached: the integration's webhooks a minute, the API's requests a minute, reads at once (live tails, feed waits, exports), or failed sign-ins and password resets. `message` says which; retry after `Retry-After` seconds.",
  },
  auth_rate_limited: {
    status: 429,
    title: 'Too many failed authentications',
    message: 'Too many requests with a missing or invalid API key came from this address; retry later.',
    when: "Too many requests with a missing or invalid key came from this address in `INTAKE_AUTH_FAILURE_WINDOW_SECONDS`; past `INTAKE_AUTH_FAILURE_LIMIT` they are refused before any key is looked up.",
  },
  request_timeout: {
    status: 408,
    title: 'Request timeout',
    message: 'The request was not received in time.',
    when: "The request's headers or body did not arrive within `INTAKE_HEADERS_TIMEOUT_MS` / `INTAKE_REQUEST_TIMEOUT_MS`.",
  },
  uri_too_long: {
    status: 414,
    title: 'URI too long',
    message: 'The request URL is longer than the limit.',
    when: "The path and query are longer than `INTAKE_MAX_URL_LENGTH`.",
  },
  headers_too_large: {
    status: 431,
    title: 'Request headers too large',
    message: 'The request line and headers are larger than the limit.',
    when: "The request line and headers are larger than `INTAKE_MAX_HEADER_SIZE`.",
  },
  service_unavailable: {
    status: 503,
    title: 'Service unavailable',
    message: 'The service cannot store this request right now; retry later.',
    when: "The node is saturated (write queue full, commit wait or event-loop lag past their bounds) or its database does not answer; nothing was stored. Retry after `Retry-After` seconds.",
  },
  invalid_metrics_token: {
    status: 401,
    title: 'Invalid metrics token',
    message: 'GET /metrics needs the header Authorization: Bearer <INTAKE_METRICS_TOKEN>.',
    when: "`GET /metrics` without the bearer token `INTAKE_METRICS_TOKEN` asks for.",
  },
  not_signed_in: {
    status: 401,
    title: 'Not signed in',
    message: 'Your session has expired or is not valid; sign in again.',
    when: "A panel session is missing, expired or ended (signed out, password changed).",
  },
  invalid_credentials: {
    status: 401,
    title: 'Invalid credentials',
    message: 'The email or password is not correct.',
    when: "Sign-in with a wrong email or password.",
  },
  invalid_two_factor_code: {
    status: 401,
    title: 'Invalid two-factor code',
    message: 'The two-factor code is not correct, or was already used.',
    when: "The two-factor code is wrong, too old, or was already used.",
  },
  two_factor_setup_required: {
    status: 403,
    title: 'Two-factor sign-in required',
    message: 'This company requires two-factor sign-in: turn it on under Account to continue.',
    when: "The company requires two-factor sign-in and this account has not turned it on yet.",
  },
  invitation_invalid: {
    status: 403,
    title: 'Invitation not valid',
    message: 'This invitation link is wrong, expired, revoked or already used. Ask the company for a new one.',
    when: "The invitation link is wrong, expired, revoked or already used.",
  },
  invitation_wrong_account: {
    status: 403,
    title: 'Invitation for another account',
    message: 'This invitation is for another email than the account you are signed in with.',
    when: "A signed-in account opened an invitation addressed to another email.",
  },
  reset_link_invalid: {
    status: 403,
    title: 'Reset link not valid',
    message: 'This password reset link is wrong, expired or already used. Ask for a new one.',
    when: "The password reset link is wrong, expired or already used.",
  },
  // The terminal's side of `intake login` (POST /api/v1/cli-logins/token), with RFC 8628's
  // error names as codes and its statuses, so a device-flow client reads them as it expects.
  authorization_pending: {
    status: 400,
    title: 'Authorization pending',
    message: 'This sign-in waits for approval in the panel; poll again after the interval.',
    when: "The command-line sign-in has not been approved or denied in the panel yet: poll again after `interval` seconds.",
  },
  slow_down: {
    status: 400,
    title: 'Slow down',
    message: 'This sign-in was polled sooner than its interval allows.',
    when: "A command-line sign-in was polled sooner than `interval` seconds after its previous poll: wait 5 seconds more between polls from now on.",
  },
  access_denied: {
    status: 403,
    title: 'Access denied',
    message: 'This sign-in was denied in the panel.',
    when: "The person who opened the command-line sign-in in the panel denied it, or can no longer approve it (no longer a member of the company).",
  },
  expired_token: {
    status: 400,
    title: 'Expired token',
    message: 'This device code is unknown, expired or already used: start the sign-in again.',
    when: "A command-line sign-in's device code is unknown, past its 10 minutes, or its key was already handed out: run `intake login` again.",
  },
  csrf_failed: {
    status: 403,
    title: 'CSRF check failed',
    message: 'A change made with a session must carry the X-CSRF-Token header of that session.',
    when: "A change made with a panel session lacks the session's `X-CSRF-Token` header.",
  },
  role_required: {
    status: 403,
    title: 'Insufficient permissions',
    message: 'Your role in this company does not allow this.',
    when: "The member's role (viewer, developer, admin, owner) does not allow this change.",
  },
  setup_link_invalid: {
    status: 403,
    title: 'Setup link not valid',
    message: 'This setup link is wrong, expired or already used. Sign in, or ask the operator for a new link.',
    when: "The first-run setup link is wrong, expired or already used.",
  },
  conflict: {
    status: 409,
    title: 'Conflict',
    message: 'The request conflicts with the current state.',
    when: "The change conflicts with the current state (a name taken, two-factor already on, a resource changed meanwhile); `message` says which.",
  },
  delivery_loop: {
    status: 508,
    title: 'Loop detected',
    message: "This request is one of this intake's own deliveries coming back to a webhook address: a destination points at intake itself.",
    when: "A webhook arrived carrying this intake's own delivery marks: a destination points back at intake (directly or through a relay). The delivery that caused it is not retried.",
  },
  redelivery_busy: {
    status: 429,
    title: 'Bulk operation under way',
    message: "Another replay or send of this company's deliveries is under way; retry when it has finished.",
    when: "Another replay or send of this company's deliveries is under way on some node; retry when it has finished.",
  },
  redelivery_budget_spent: {
    status: 429,
    title: 'Redelivery budget spent',
    message: 'This company has replayed or sent as many deliveries as it may for now; retry later.',
    when: "The company spent its hourly redelivery budget (`INTAKE_REDELIVERY_BUDGET_PER_HOUR`); retry after `Retry-After` seconds.",
  },
  expectation_failed: {
    status: 417,
    title: 'Expectation failed',
    message: 'Only "Expect: 100-continue" is understood.',
    when: "An `Expect` header other than `100-continue`.",
  },
  not_found: {
    status: 404,
    title: 'Not found',
    message: 'The requested resource does not exist.',
    when: "No such route, or no such resource in the caller's company (another company's ids are not found, never forbidden).",
  },
  method_not_allowed: {
    status: 405,
    title: 'Method not allowed',
    message: 'This method is not allowed on this path.',
    when: "The path exists but not with this method; `Allow` lists those it takes.",
  },
  internal_error: {
    status: 500,
    title: 'Internal server error',
    message: 'Something went wrong on our side.',
    when: "A fault of intake's; the answer reveals nothing and the log has the details under the `request_id`.",
  },
} as const satisfies Record<string, { status: number; title: string; message: string; when: string }>;

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
    // under overload (10 % of the event loop at twice intake's maximum, docs/performance-history.md).
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
