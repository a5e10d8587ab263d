import { Agent, request } from 'undici';
import type { FeedWebhook } from './intake-client.js';

/**
 * Headers of the stored request that are not passed on: they describe the connection to
 * intake, not the webhook (the local request has its own host, length and connection).
 * Intake never stored credentials nor hop-by-hop headers in the first place.
 */
const NOT_FORWARDED = new Set(['host', 'content-length', 'connection', 'keep-alive', 'transfer-encoding', 'expect', 'upgrade', 'te', 'trailer']);

/** What a forward gave: the local answer, or why there was none. */
export type Forwarded =
  | { ok: boolean; status: number; durationMs: number; firstLine: string }
  | { ok: false; status: null; durationMs: number; failure: string };

export interface ForwardOptions {
  /** Headers to add, or to put in place of the sender's (`--headers`). */
  extraHeaders: ReadonlyArray<readonly [string, string]>;
  timeoutMs: number;
}

/**
 * Sends a stored webhook to a developer's local URL as the sender sent it to intake: its
 * body byte for byte, its Content-Type and its other headers (the provider's signature
 * among them), so the handler verifies it with the provider's real secret. Intake's own
 * headers name the webhook: intake-webhook-id (its uuid), intake-integration-id,
 * intake-event, intake-received-at.
 */
export class Forwarder {
  readonly #agent = new Agent({ connections: 4, keepAliveTimeout: 10_000 });

  constructor(readonly options: ForwardOptions) {}

  async forward(webhook: FeedWebhook, url: string): Promise<Forwarded> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(webhook.headers)) {
      if (!NOT_FORWARDED.has(name.toLowerCase())) headers[name] = value;
    }
    headers['intake-webhook-id'] = webhook.uuid;
    headers['intake-integration-id'] = webhook.integration_id;
    headers['intake-event'] = webhook.event;
    headers['intake-received-at'] = webhook.received_at;
    for (const [name, value] of this.options.extraHeaders) headers[name.toLowerCase()] = value;
    const body = Buffer.from(webhook.raw_body_base64, 'base64');
    const started = performance.now();
    try {
      const answer = await request(url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.#agent,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      const text = await readStart(answer.body);
      const durationMs = performance.now() - started;
      const ok = answer.statusCode >= 200 && answer.statusCode < 300;
      return { ok, status: answer.statusCode, durationMs, firstLine: firstLine(text) };
    } catch (error) {
      return { ok: false, status: null, durationMs: performance.now() - started, failure: describeFailure(error, this.options.timeoutMs) };
    }
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}

/** The first 1 KiB of an answer's body, the rest discarded. */
async function readStart(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    if (length < 1024) {
      chunks.push(chunk);
      length += chunk.length;
    }
  }
  return Buffer.concat(chunks).subarray(0, 1024).toString('utf8');
}

function firstLine(text: string): string {
  const line = text.trim().split(/\r?\n/, 1)[0] ?? '';
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}

/** Why a local request got no answer, in words: "connection refused", "no answer within 30 s". */
export function describeFailure(error: unknown, timeoutMs: number): string {
  const code = errorCode(error);
  if (code === 'ECONNREFUSED') return 'connection refused (is the local server running?)';
  if (code === 'ENOTFOUND') return 'host not found';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection closed before an answer';
  if ((error as Error)?.name === 'TimeoutError' || code === 'UND_ERR_HEADERS_TIMEOUT') return `no answer within ${Math.round(timeoutMs / 1000)} s`;
  return (error as Error)?.message ?? String(error);
}

export function errorCode(error: unknown): string | undefined {
  let current = error as { code?: string; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < 4; depth++) {
    if (typeof current.code === 'string') return current.code;
    current = current.cause as typeof current;
  }
  return undefined;
}
