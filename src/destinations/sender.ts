import type { IncomingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import { Pool, type Dispatcher } from 'undici';
import type { AttemptErrorClass } from '../store/store.js';
import { BLOCKED_ADDRESS, hostOf, type AddressGuard } from './address-guard.js';
import { parseRetryAfter } from './schedule.js';

/**
 * One attempt: a POST to a destination, judged by its answer. Whatever the receiver does
 * (never answer, answer slowly, close the connection, send a body without end, redirect to
 * intake's own admin port) ends as an `AttemptOutcome` within the timeout; `send` never throws.
 */

/**
 * Why an attempt failed, as the attempts log shows it (`status` tells which non-2xx for
 * `http_status`): every class but `webhook_purged`, which the dispatcher sets without sending.
 */
export type AttemptError = Exclude<AttemptErrorClass, 'webhook_purged'>;

/** What one attempt came to. */
export interface AttemptOutcome {
  /** A 2xx answer within the timeout. */
  ok: boolean;
  /** The answer's status; null when there was none. */
  status: number | null;
  error: AttemptError | null;
  durationMs: number;
  /** The first 1 KiB of the answer's body as UTF-8 text; null when there was no answer. */
  responseExcerpt: string | null;
  /** The answer's `Retry-After`, in ms from when it arrived. */
  retryAfterMs: number | null;
  /** Why an attempt of class `other` failed, for the log (no class says it). */
  cause?: AttemptCause;
}

/**
 * An error as the log may show it: its type, code and message, never its other fields (an
 * HTTP parser's error keeps the answer's bytes in one), nor the request's headers or body.
 */
export interface AttemptCause {
  type: string;
  code?: string;
  message: string;
}

/** One request to send. */
export interface Sending {
  url: string;
  headers: Record<string, string>;
  body: Buffer;
  /** The whole attempt: connecting, sending, the answer's headers and its excerpt. */
  timeoutMs: number;
}

const EXCERPT_BYTES = 1024;
/** Past this many origins the least recently used one's pool (and its idle connections) is dropped. */
const MAX_AGENTS = 1000;
/**
 * An idle connection is closed after this, under the 5 s a Node server keeps one (a shorter
 * `Keep-Alive: timeout` hint wins): reusing one the server is closing fails the attempt.
 */
const IDLE_SOCKET_MS = 4000;

const TLS_CODES =
  /^(ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|CRL_|ERROR_IN_)|^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|INVALID_CA|PATH_LENGTH_EXCEEDED|INVALID_PURPOSE|HOSTNAME_MISMATCH|EPROTO)$/;

type Verdict = Omit<AttemptOutcome, 'durationMs'>;

/** A destination URL's origin and path, or the verdict of every attempt to it. */
type Target = { origin: string; path: string } | { refused: Verdict };

/** URLs whose targets are kept; past it the cache starts again. */
const MAX_TARGETS = 10_000;

function parseTarget(address: string, guard: AddressGuard): Target {
  const url = URL.parse(address);
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    return { refused: failure('other', { type: 'InvalidUrl', message: 'the destination URL is not an http(s) URL' }) };
  }
  // net connects to an IP literal without calling the lookup: it is judged here.
  const host = hostOf(url);
  if (isIP(host) !== 0 && guard.refusal(host) !== undefined) return { refused: failure('blocked_address') };
  return { origin: url.origin, path: `${url.pathname}${url.search}` };
}

/**
 * Sends attempts over keep-alive connections, one pool per origin and timeout, every address guarded.
 * undici rather than node:http's client: measured against a bare receiver on loopback (7 KB
 * bodies, 64 at once), its `request()` spent 31 µs of CPU a request where node:http spent
 * 66, and with its `dispatch()` (AttemptExchange) a send takes 19-25; delivery runs on intake's event loop.
 */
export class DestinationSender {
  private readonly guard: AddressGuard;
  private readonly now: () => number;
  private readonly maxAgents: number;
  /** By attempt timeout and origin, least recently used first (a Map keeps insertion order). */
  private readonly pools = new Map<string, Pool>();
  private readonly targets = new Map<string, Target>();

  constructor({ guard, now = Date.now, maxAgents = MAX_AGENTS }: { guard: AddressGuard; now?: () => number; maxAgents?: number }) {
    this.guard = guard;
    this.now = now;
    this.maxAgents = maxAgents;
  }

  /** Makes one attempt; resolves within about `timeoutMs`, never rejects. */
  async send(sending: Sending): Promise<AttemptOutcome> {
    const started = this.now();
    // Ours, whatever it is (the request could not even be handed to undici): the cause says what.
    const verdict = await this.attempt(sending).catch((error: unknown): Verdict => failure('other', causeOf(error)));
    return { ...verdict, durationMs: this.now() - started };
  }

  /** Requests undici still holds, sent or waiting for a connection, across every pool. */
  get requestsHeld(): number {
    let held = 0;
    for (const pool of this.pools.values()) held += pool.stats.size;
    return held;
  }

  /** Destroys every pool and its connections. */
  close(): void {
    for (const pool of this.pools.values()) void pool.destroy().catch(() => {});
    this.pools.clear();
  }

  private async attempt(sending: Sending): Promise<Verdict> {
    const target = this.targetOf(sending.url);
    if ('refused' in target) return target.refused;
    return new Promise((resolve) => {
      this.poolFor(target.origin, sending.timeoutMs).dispatch(
        {
          method: 'POST',
          path: target.path,
          headers: sending.headers,
          body: sending.body,
          // The attempt's own timer bounds it; undici's would only race it.
          headersTimeout: 0,
          bodyTimeout: 0,
        },
        new AttemptExchange(sending.timeoutMs, this.now, resolve),
      );
    });
  }

  /** Where a URL sends to, or why it cannot be sent to; parsed once a URL, not once an attempt. */
  private targetOf(address: string): Target {
    let target = this.targets.get(address);
    if (target === undefined) {
      target = parseTarget(address, this.guard);
      if (this.targets.size >= MAX_TARGETS) this.targets.clear();
      this.targets.set(address, target);
    }
    return target;
  }

  /**
   * The pool of an origin's attempts with this timeout. Its connections give up connecting
   * (resolving the name included) at the attempt's timeout, not undici's 10 s: an attempt's
   * verdict comes at its timeout even while it waits for a connection, its slot is then
   * free, and undici must let the request go as soon, or a destination that never accepts
   * a connection would have undici hold ten times its `max_in_flight` requests (and their
   * bodies) at a 1 s timeout.
   */
  private poolFor(origin: string, timeoutMs: number): Pool {
    const key = `${timeoutMs} ${origin}`;
    let pool = this.pools.get(key);
    if (pool === undefined) {
      pool = new Pool(origin, {
        connect: { lookup: this.guard.lookup, timeout: timeoutMs },
        keepAliveTimeout: IDLE_SOCKET_MS,
        keepAliveMaxTimeout: IDLE_SOCKET_MS,
      });
    } else {
      this.pools.delete(key);
    }
    this.pools.set(key, pool);
    if (this.pools.size > this.maxAgents) {
      const [oldest, dropped] = this.pools.entries().next().value!;
      this.pools.delete(oldest);
      // Its attempts under way finish, then its connections close.
      void dropped.close().catch(() => {});
    }
    return pool;
  }
}

/**
 * One attempt's request and answer, as undici's dispatch callbacks see them. Not
 * `request()`, which makes a stream of every answer's body, a promise and an abort signal
 * for every request: a whole send to nginx on loopback (7 KB bodies, 64 at once; 5
 * alternating pairs of 20,000 sends, twice) cost 26-30 µs of CPU through `request()` and
 * 19-25 through this, a bare `dispatch()` 18-19.
 *
 * Its timer bounds the whole attempt. Before the answer's headers, the attempt is a
 * `timeout` at once, even while undici still waits to connect (the request is aborted
 * as soon as undici starts it); after them, the status stands with what came of the body.
 * Of the body only the first 1 KiB is read.
 */
class AttemptExchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private settled = false;
  private status: number | null = null;
  private retryAfterMs: number | null = null;
  /** Made at the body's first bytes: most answers to a webhook have none. */
  private decoder: StringDecoder | undefined;
  private text = '';
  private bytes = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    timeoutMs: number,
    private readonly now: () => number,
    private readonly resolve: (verdict: Verdict) => void,
  ) {
    this.timer = setTimeout(() => this.cut(), timeoutMs);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.settled) controller.abort(new AttemptOver());
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // A 1xx is followed by the answer itself.
    if (statusCode < 200 || this.settled) return;
    this.status = statusCode;
    const retryAfter = headers['retry-after'];
    this.retryAfterMs = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, this.now());
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    const taken = chunk.subarray(0, EXCERPT_BYTES - this.bytes);
    this.decoder ??= new StringDecoder('utf8');
    this.text += this.decoder.write(taken);
    this.bytes += taken.length;
    if (this.bytes === EXCERPT_BYTES) this.cut();
  }

  onResponseEnd(): void {
    if (this.settled) return;
    const verdict = this.answer(this.text + (this.decoder?.end() ?? ''));
    this.settle();
    // undici frees the connection in an immediate it queues once this callback returns: an
    // attempt started before that (the next to this origin) would open another connection.
    // So the verdict goes out in an immediate queued after undici's.
    process.nextTick(() => setImmediate(() => this.resolve(verdict)));
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return;
    // A body cut short by the receiver keeps what came whole, as the timer's cut does.
    this.finish(this.status === null ? failureOf(error as NodeJS.ErrnoException) : this.answer(this.text));
  }

  /** The timeout, or the excerpt's limit: what has come so far is the verdict, and the request ends. */
  private cut(): void {
    if (this.settled) return;
    this.finish(this.status === null ? failure('timeout') : this.answer(this.text));
    this.controller?.abort(new AttemptOver());
  }

  private answer(excerpt: string): Verdict {
    const status = this.status!;
    const ok = status >= 200 && status < 300;
    const error: AttemptError | null = ok ? null : status >= 300 && status < 400 ? 'redirect' : 'http_status';
    return { ok, status, error, retryAfterMs: this.retryAfterMs, responseExcerpt: storable(excerpt) };
  }

  private finish(verdict: Verdict): void {
    this.settle();
    this.resolve(verdict);
  }

  private settle(): void {
    this.settled = true;
    clearTimeout(this.timer);
  }
}

/** Why the service ended an attempt's request itself: its verdict is already made. */
class AttemptOver extends Error {
  constructor() {
    super('the attempt is over');
  }
}

function failure(error: AttemptError, cause?: AttemptCause): Verdict {
  return { ok: false, status: null, error, responseExcerpt: null, retryAfterMs: null, ...(cause && { cause }) };
}

/** A request error's verdict: its class, and its cause when the class is `other` (undici refused the request, an answer it could not parse…). */
function failureOf(error: NodeJS.ErrnoException): Verdict {
  const errorClass = classify(error);
  return failure(errorClass, errorClass === 'other' ? causeOf(error) : undefined);
}

/** What the log may show of an error (AttemptCause). */
export function causeOf(error: unknown): AttemptCause {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error).slice(0, 200) };
  const code = (error as NodeJS.ErrnoException).code;
  return { type: error.name, ...(typeof code === 'string' && { code }), message: error.message };
}

/** The class of a request error, from its code (`socket hang up` carries ECONNRESET). */
function classify(error: NodeJS.ErrnoException): AttemptError {
  const code = error.code ?? '';
  if (code === BLOCKED_ADDRESS) return 'blocked_address';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  // undici's SocketError ("other side closed") is a connection closed before the answer ended.
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED' || code === 'UND_ERR_SOCKET') return 'connection_reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NODATA' || code === 'ENODATA') return 'dns';
  if (code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'timeout';
  return TLS_CODES.test(code) ? 'tls' : 'other';
}

/** PostgreSQL's text cannot hold U+0000: an excerpt is shown, not parsed, so it becomes U+FFFD. */
function storable(text: string): string {
  return text.replaceAll('\u0000', '\ufffd');
}
