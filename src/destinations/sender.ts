import { Agent as HttpAgent, request as httpRequest, type AgentOptions, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
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
/** Past this many origins the least recently used one's agent (and its idle connections) is dropped. */
const MAX_AGENTS = 1000;
/**
 * An idle connection is closed after this, under the 5 s a Node server keeps one (a shorter
 * `Keep-Alive: timeout` hint wins): reusing one the server is closing fails the attempt.
 */
const IDLE_SOCKET_MS = 4000;

const TLS_CODES =
  /^(ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|CRL_|ERROR_IN_)|^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|INVALID_CA|PATH_LENGTH_EXCEEDED|INVALID_PURPOSE|HOSTNAME_MISMATCH|EPROTO)$/;

type Verdict = Omit<AttemptOutcome, 'durationMs'>;

/** Sends attempts over keep-alive connections, one agent per origin, every address guarded. */
export class DestinationSender {
  private readonly guard: AddressGuard;
  private readonly now: () => number;
  private readonly maxAgents: number;
  /** By origin, least recently used first (a Map keeps insertion order). */
  private readonly agents = new Map<string, HttpAgent>();

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

  /** Destroys every agent and its connections. */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private async attempt(sending: Sending): Promise<Verdict> {
    if (!URL.canParse(sending.url)) return failure('other');
    const url = new URL(sending.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return failure('other');
    // net connects to an IP literal without calling the agent's lookup: it is judged here.
    const host = hostOf(url);
    if (isIP(host) !== 0 && this.guard.refusal(host) !== undefined) return failure('blocked_address');
    return new Promise((resolve) => this.exchange(url, sending, resolve));
  }

  private exchange(url: URL, sending: Sending, resolve: (verdict: Verdict) => void): void {
    // Throws on a header value Node refuses, before anything is under way.
    const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, {
      method: 'POST',
      agent: this.agentFor(url),
      headers: { ...sending.headers, 'content-length': String(sending.body.length) },
    });
    let settled = false;
    let response: IncomingMessage | undefined;
    // Before the answer's headers a timeout fails the attempt; after, its status stands.
    let onTimeout = () => settle(failure('timeout'), true);
    const timer = setTimeout(() => onTimeout(), sending.timeoutMs);

    function settle(verdict: Verdict, drop: boolean): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // A connection whose answer was read to its end goes back to the agent for the next attempt.
      if (drop) {
        response?.destroy();
        request.destroy();
      }
      resolve(verdict);
    }

    request.on('error', (error: NodeJS.ErrnoException) => settle(failure(classify(error)), true));
    request.on('response', (answer) => {
      response = answer;
      const status = answer.statusCode ?? 0;
      const ok = status >= 200 && status < 300;
      const error: AttemptError | null = ok ? null : status >= 300 && status < 400 ? 'redirect' : 'http_status';
      const retryAfter = answer.headers['retry-after'];
      const retryAfterMs = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, this.now());
      const decoder = new StringDecoder('utf8');
      let excerpt = '';
      let bytes = 0;
      // A body cut short (by the limit, the timeout or the receiver) keeps what came whole.
      const finish = (cut: boolean) =>
        settle({ ok, status, error, retryAfterMs, responseExcerpt: storable(cut ? excerpt : excerpt + decoder.end()) }, cut);
      onTimeout = () => finish(true);
      answer.on('data', (chunk: Buffer) => {
        const taken = chunk.subarray(0, EXCERPT_BYTES - bytes);
        excerpt += decoder.write(taken);
        bytes += taken.length;
        if (bytes === EXCERPT_BYTES) finish(true);
      });
      answer.on('end', () => finish(false));
      answer.on('close', () => finish(true));
      answer.on('error', () => finish(true));
    });
    request.end(sending.body);
  }

  private agentFor(url: URL): HttpAgent {
    const origin = url.origin;
    let agent = this.agents.get(origin);
    if (agent === undefined) {
      const options: AgentOptions = { keepAlive: true, timeout: IDLE_SOCKET_MS, lookup: this.guard.lookup };
      agent = url.protocol === 'https:' ? new HttpsAgent(options) : new HttpAgent(options);
    } else {
      this.agents.delete(origin);
    }
    this.agents.set(origin, agent);
    if (this.agents.size > this.maxAgents) {
      const [oldest, dropped] = this.agents.entries().next().value!;
      this.agents.delete(oldest);
      // Its attempts under way finish; their connections then time out idle, unreferenced.
      for (const sockets of Object.values(dropped.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
    }
    return agent;
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
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED') return 'connection_reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NODATA' || code === 'ENODATA') return 'dns';
  if (code === 'ETIMEDOUT') return 'timeout';
  return TLS_CODES.test(code) ? 'tls' : 'other';
}

/** PostgreSQL's text cannot hold U+0000: an excerpt is shown, not parsed, so it becomes U+FFFD. */
function storable(text: string): string {
  return text.replaceAll('\u0000', '\ufffd');
}
