import { EventEmitter } from 'node:events';
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

/**
 * Sends attempts over keep-alive connections, one pool per origin, every address guarded.
 * undici rather than node:http's client: measured against a bare receiver on loopback (7 KB
 * bodies, 64 at once), it spends 31 µs of CPU a request where node:http spends 66, and
 * delivery runs on intake's event loop.
 */
export class DestinationSender {
  private readonly guard: AddressGuard;
  private readonly now: () => number;
  private readonly maxAgents: number;
  /** By origin, least recently used first (a Map keeps insertion order). */
  private readonly pools = new Map<string, Pool>();

  constructor({ guard, now = Date.now, maxAgents = MAX_AGENTS }: { guard: AddressGuard; now?: () => number; maxAgents?: number }) {
    this.guard = guard;
    this.now = now;
    this.maxAgents = maxAgents;
  }

  /** Makes one attempt; resolves within about `timeoutMs`, never rejects. */
  async send(sending: Sending): Promise<AttemptOutcome> {
    const started = this.now();
    const verdict = await this.attempt(sending).catch((): Verdict => failure('other'));
    return { ...verdict, durationMs: this.now() - started };
  }

  /** Destroys every pool and its connections. */
  close(): void {
    for (const pool of this.pools.values()) void pool.destroy().catch(() => {});
    this.pools.clear();
  }

  private async attempt(sending: Sending): Promise<Verdict> {
    if (!URL.canParse(sending.url)) return failure('other');
    const url = new URL(sending.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return failure('other');
    // net connects to an IP literal without calling the lookup: it is judged here.
    const host = hostOf(url);
    if (isIP(host) !== 0 && this.guard.refusal(host) !== undefined) return failure('blocked_address');
    return this.exchange(url, sending);
  }

  private async exchange(url: URL, sending: Sending): Promise<Verdict> {
    // Before the answer's headers a timeout fails the attempt; after, its status stands
    // with what came of the body.
    const aborted = new AttemptSignal();
    let onTimeout = () => aborted.abort();
    const timer = setTimeout(() => onTimeout(), sending.timeoutMs);
    try {
      let answer: Dispatcher.ResponseData;
      try {
        answer = await this.poolFor(url).request({
          method: 'POST',
          path: `${url.pathname}${url.search}`,
          headers: sending.headers,
          body: sending.body,
          signal: aborted,
          // The attempt's own timer bounds it; undici's would only race it.
          headersTimeout: 0,
          bodyTimeout: 0,
        });
      } catch (error) {
        return failure(aborted.aborted ? 'timeout' : classify(error as NodeJS.ErrnoException));
      }
      const status = answer.statusCode;
      const ok = status >= 200 && status < 300;
      const error: AttemptError | null = ok ? null : status >= 300 && status < 400 ? 'redirect' : 'http_status';
      const retryAfter = answer.headers['retry-after'];
      const retryAfterMs = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, this.now());
      const excerpt = await new Promise<string | null>((resolve) => {
        onTimeout = () => finish(true);
        const decoder = new StringDecoder('utf8');
        let text = '';
        let bytes = 0;
        // A body cut short (by the limit, the timeout or the receiver) keeps what came whole;
        // one read to its end leaves the connection to the pool for the next attempt.
        function finish(cut: boolean): void {
          const excerpt = storable(cut ? text : text + decoder.end());
          if (cut) {
            answer.body.destroy();
            resolve(excerpt);
          } else {
            // undici frees the connection in the turn after the answer's end is read: an attempt
            // started in that turn (the next to this origin) would open another connection.
            setImmediate(() => resolve(excerpt));
          }
        }
        answer.body.on('data', (chunk: Buffer) => {
          const taken = chunk.subarray(0, EXCERPT_BYTES - bytes);
          text += decoder.write(taken);
          bytes += taken.length;
          if (bytes === EXCERPT_BYTES) finish(true);
        });
        answer.body.on('end', () => finish(false));
        answer.body.on('error', () => finish(true));
      });
      return { ok, status, error, retryAfterMs, responseExcerpt: excerpt };
    } finally {
      clearTimeout(timer);
    }
  }

  private poolFor(url: URL): Pool {
    const origin = url.origin;
    let pool = this.pools.get(origin);
    if (pool === undefined) {
      pool = new Pool(origin, {
        connect: { lookup: this.guard.lookup },
        keepAliveTimeout: IDLE_SOCKET_MS,
        keepAliveMaxTimeout: IDLE_SOCKET_MS,
      });
    } else {
      this.pools.delete(origin);
    }
    this.pools.set(origin, pool);
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
 * What aborts an attempt's request: undici takes an EventEmitter with `aborted` as a signal
 * as well as an AbortSignal, and costs less to make and to listen to: a send to nginx on
 * loopback (7 KB, 64 at once) took 37-43 µs of CPU with an AbortController, 31-33 with this.
 */
class AttemptSignal extends EventEmitter {
  aborted = false;

  abort(): void {
    this.aborted = true;
    this.emit('abort');
  }
}

function failure(error: AttemptError): Verdict {
  return { ok: false, status: null, error, responseExcerpt: null, retryAfterMs: null };
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
