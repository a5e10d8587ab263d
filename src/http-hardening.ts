import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest, FastifyServerFactory } from 'fastify';
import type { Config } from './config.js';
import { AppError, ERRORS, errorBody, type ErrorCode } from './errors.js';

/**
 * The HTTP server's limits and the headers every answer carries: what stands between the
 * open internet and the routes (docs/security.md names the threat behind each).
 */

export type ServerLimits = Pick<
  Config,
  'maxHeaderSize' | 'maxUrlLength' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'
>;

/** Security headers of an API answer (JSON, or nothing for a browser to render). */
const API_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  // Answers carry a company's data: no browser or shared cache keeps them.
  'cache-control': 'no-store',
} as const;

/**
 * The API reference page (Swagger UI) is an application: its own scripts and styles, and
 * calls to the API it documents, all same-origin; no inline script, nothing from elsewhere.
 * Its code highlighter sets inline styles, which can style but not run anything.
 */
const DOCS_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
} as const;

const DOCS_PATH = /^\/api\/docs(?:[/?]|$)/;

/**
 * Adds the security headers to an answer, but none it sets itself: the panel sends its own
 * policy (src/admin/panel.ts), static files their own caching. The app's onSend hook.
 */
export function securityHeaders(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (error: null, payload: unknown) => void,
): void {
  addSecurityHeaders(request, reply);
  done(null, payload);
}

/** The same, for the answers Fastify sends without running hooks (a URL its router cannot read). */
export function addSecurityHeaders(request: FastifyRequest, reply: FastifyReply): void {
  const headers = DOCS_PATH.test(request.url) ? DOCS_HEADERS : API_HEADERS;
  for (const [name, value] of Object.entries(headers)) if (!reply.hasHeader(name)) reply.header(name, value);
}

/**
 * The HTTP server, with its limits set where Node applies them: header size in the parser,
 * timeouts in its connection checks, the connection cap at accept. A request whose URL is
 * over the limit is answered (414) before it reaches the router.
 */
export function hardenedServerFactory(limits: ServerLimits, beforeRouting?: EarlyAnswer): FastifyServerFactory {
  return (handler) => {
    const server = createServer(
      {
        // Intake needs no Host (addresses are paths); without this Node answers a bare 400.
        requireHostHeader: false,
        maxHeaderSize: limits.maxHeaderSize,
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        // Node looks for expired requests every 30 s by default, which would let a
        // slowloris hold a connection for 40 s against a 10 s limit.
        connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(limits.headersTimeoutMs / 4))),
      },
      (request: IncomingMessage, response: ServerResponse) => {
        if ((request.url?.length ?? 0) > limits.maxUrlLength) {
          refuse(response, 'uri_too_long', `The request URL is longer than the limit of ${limits.maxUrlLength} characters.`);
          return;
        }
        if (beforeRouting?.(request, response)) return;
        handler(request, response);
      },
    );
    // Any Expect but 100-continue: Node's own answer is a bare 417; this one is JSON.
    server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) =>
      refuse(response, 'expectation_failed', 'Only "Expect: 100-continue" is understood.'),
    );
    server.keepAliveTimeout = limits.keepAliveTimeoutMs;
    // Node closes a connection over the cap as soon as it is accepted.
    server.maxConnections = limits.maxConnections;
    return server as Server;
  };
}

/**
 * Answers a request before Fastify sees it and returns true, or returns false to pass it on
 * (the server's cheapest place to refuse one: src/intake/shed-before-routing.ts).
 */
export type EarlyAnswer = (request: IncomingMessage, response: ServerResponse) => boolean;

/** Answers a request Fastify never saw, in the shape of every other error; then closes. */
function refuse(response: ServerResponse, code: ErrorCode, message: string): void {
  writeErrorAnswer(response, new AppError(code, message), { close: true });
}

/**
 * Writes an error answer without Fastify: the JSON body, the API's security headers and
 * Retry-After when the error has one; `close` ends the connection after it.
 */
export function writeErrorAnswer(response: ServerResponse, error: AppError, options: { close?: boolean; requestId?: string } = {}): void {
  const body = JSON.stringify(errorBody(error, options.requestId));
  const { retryAfterSeconds } = error.details;
  response
    .writeHead(error.status, {
      ...API_HEADERS,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      ...(retryAfterSeconds !== undefined && { 'retry-after': String(retryAfterSeconds) }),
      ...(options.close === true && { connection: 'close' }),
    })
    .end(body);
}

/** A whole raw HTTP answer for a connection the parser gave up on. */
function rawAnswer(code: ErrorCode): string {
  const status = ERRORS[code].status;
  const body = JSON.stringify(errorBody(new AppError(code)));
  const headers = {
    ...API_HEADERS,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  };
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${lines.join('')}\r\n${body}`;
}

const CLIENT_ERROR_ANSWERS = {
  timeout: rawAnswer('request_timeout'),
  headersTooLarge: rawAnswer('headers_too_large'),
  invalid: rawAnswer('invalid_request'),
};

/**
 * Node's 'clientError': a request that never became one (headers too large, too slow, not
 * HTTP). Answered with the JSON error body and the security headers, as Fastify's default
 * would answer with its own shape, then the connection is closed.
 */
export function clientErrorHandler(this: { log: FastifyBaseLogger }, error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // Not the error itself: Node's parse errors carry `rawPacket`, the request's bytes as
  // received, with whatever keys, cookies and passwords they hold.
  this.log.debug({ code: error.code, message: error.message }, 'client error');
  // A timeout in the middle of an answer cannot start another one.
  const inProgress = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  if (socket.writable && !inProgress?.headersSent) {
    socket.write(
      error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? CLIENT_ERROR_ANSWERS.timeout
        : error.code === 'HPE_HEADER_OVERFLOW'
          ? CLIENT_ERROR_ANSWERS.headersTooLarge
          : CLIENT_ERROR_ANSWERS.invalid,
    );
  }
  socket.destroy(error);
}
