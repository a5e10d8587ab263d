import { Agent, request } from 'undici';

/** A webhook as the feed gives it with `include=request`: the request as the sender made it. */
export interface FeedWebhook {
  uuid: string;
  integration_id: string;
  event: string;
  received_at: string;
  /** The stored headers: the sender's, less credentials and hop-by-hop headers. */
  headers: Record<string, string>;
  /** The body byte for byte. */
  raw_body_base64: string;
  /** Where the feed resumes after this webhook (absent from older servers: the page's cursor then). */
  cursor?: string;
}

export interface FeedPage {
  data: FeedWebhook[];
  next_cursor: string;
}

/** Where a read of the feed starts when there is no cursor yet. */
export type FeedStart = { after: string } | { since: string } | { last: number } | { fromNow: true };

export interface FeedQuery {
  start: FeedStart;
  waitSeconds: number;
  limit: number;
  integrationIds: readonly string[];
  events: readonly string[];
}

/**
 * An answer of intake's that is not a success, with its `error` code: the listener decides
 * from it whether to wait and ask again (503, 429, a restart) or stop (401, 403: the key is
 * revoked or lacks logs:read).
 */
export class IntakeRefusal extends Error {
  override readonly name = 'IntakeRefusal';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfterSeconds: number | undefined,
  ) {
    super(message);
  }

  /** The key itself is refused: asking again cannot help. */
  get isFinal(): boolean {
    return this.status === 401 || this.status === 403 || this.status === 404 || this.status === 400;
  }
}

/** The few management-API reads `intake listen` makes, with a management key. */
export class IntakeClient {
  readonly #origin: string;
  readonly #key: string;
  // One connection to intake, kept alive between long polls.
  readonly #agent = new Agent({ connections: 2, keepAliveTimeout: 60_000, headersTimeout: 0, bodyTimeout: 0 });

  constructor(url: string, key: string) {
    this.#origin = new URL(url).origin;
    this.#key = key;
  }

  get origin(): string {
    return this.#origin;
  }

  company(signal?: AbortSignal): Promise<{ id: string; name: string }> {
    return this.#get('/api/v1/company', new URLSearchParams(), 15_000, signal);
  }

  /** Every integration's id and name (for labels and for the lines printed). */
  async integrations(signal?: AbortSignal): Promise<Array<{ id: string; name: string }>> {
    const all: Array<{ id: string; name: string }> = [];
    let cursor: string | null = null;
    // A company has a bounded number of integrations; 50 pages of 200 is far past any of them.
    for (let page = 0; page < 50; page++) {
      const query = new URLSearchParams({ limit: '200' });
      if (cursor) query.set('cursor', cursor);
      const answer: { data: Array<{ id: string; name: string }>; next_cursor: string | null } = await this.#get(
        '/api/v1/integrations',
        query,
        15_000,
        signal,
      );
      all.push(...answer.data.map(({ id, name }) => ({ id, name })));
      cursor = answer.next_cursor;
      if (!cursor) break;
    }
    return all;
  }

  /** One read of the feed; waits up to `waitSeconds` on the server when nothing is there. */
  feed(query: FeedQuery, signal?: AbortSignal): Promise<FeedPage> {
    const params = new URLSearchParams({ include: 'request', limit: String(query.limit), wait: String(query.waitSeconds) });
    const start = query.start;
    if ('after' in start) params.set('after', start.after);
    else if ('since' in start) params.set('since', start.since);
    else if ('last' in start) params.set('last', String(start.last));
    else params.set('start', 'now');
    for (const id of query.integrationIds) params.append('integration_id', id);
    for (const event of query.events) params.append('event', event);
    // The server answers within `wait`; past it and a margin, the connection is taken as lost (a laptop asleep).
    return this.#get('/api/v1/webhooks/feed', params, (query.waitSeconds + 15) * 1000, signal);
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  async #get<T>(path: string, query: URLSearchParams, timeoutMs: number, signal?: AbortSignal): Promise<T> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const answer = await request(`${this.#origin}${path}?${query}`, {
      method: 'GET',
      headers: { 'x-api-key': this.#key, accept: 'application/json', 'user-agent': 'intake-listen' },
      dispatcher: this.#agent,
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    const text = await answer.body.text();
    if (answer.statusCode === 200) return JSON.parse(text) as T;
    let body: { error?: string; message?: string } = {};
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      // Not intake's JSON (a proxy's page): the status says enough.
    }
    const retryAfter = Number(answer.headers['retry-after']);
    throw new IntakeRefusal(
      answer.statusCode,
      body.error ?? `http_${answer.statusCode}`,
      body.message ?? `HTTP ${answer.statusCode}`,
      Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
    );
  }
}
