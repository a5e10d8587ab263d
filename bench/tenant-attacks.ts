import { get, type ClientRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { sleep } from './processes.js';

/** How the attacker's reads authenticate: a viewer's session cookie or a `logs:read` key. */
export interface ReaderAuth {
  kind: 'viewer session' | 'management key';
  headers: Record<string, string>;
}

/** What one attack got from the service: never thrown, always counted. */
export interface AttackOutcome {
  attack: 'live tail' | 'search' | 'stalled exports' | 'small webhooks' | 'looping transformation';
  /** Answers by status, plus `timeout`, `error CODE`, `no answer` (none by the phase's end). */
  statuses: Record<string, number>;
  /** Per attack: events and bytes streamed, pages and scans read, exports' first bytes. */
  detail: Record<string, number>;
}

/** A running attack: stop() ends its connections and says what it got. */
export interface RunningAttack {
  /** Resolves once every connection has its answer's head or gave up (the tail waits for this). */
  opened: Promise<void>;
  stop(): Promise<AttackOutcome>;
}

/** Longest wait for one search page; past it the page counts as `timeout`. */
const SEARCH_TIMEOUT_MS = 30_000;
/** Longest wait for a stream's or an export's head before the attack counts as opened anyway. */
const OPEN_WAIT_MS = 10_000;
/** After a refused search the client waits this long and starts a new scan (no busy loop). */
const SEARCH_RETRY_MS = 250;
const EVENT_MARK = Buffer.from('\nevent: webhook');

function counter(): { counts: Record<string, number>; add(key: string, by?: number): void } {
  const counts: Record<string, number> = {};
  return { counts, add: (key, by = 1) => void (counts[key] = (counts[key] ?? 0) + by) };
}

/**
 * `streams` live tails (GET /api/v1/webhooks/stream) held open until stop(); each counts the
 * `webhook` events and bytes it was sent. A refusal (429 past a cap) is counted, not retried.
 */
export function startLiveTail(baseUrl: string, auth: ReaderAuth, streams: number): RunningAttack {
  const statuses = counter();
  const detail = { events: 0, megabytes: 0, endedByServer: 0 };
  let bytes = 0;
  let stopping = false;
  const requests: ClientRequest[] = [];
  const heads: Promise<void>[] = [];
  const closed: Promise<void>[] = [];

  for (let i = 0; i < streams; i++) {
    let answered = false;
    let headSeen: () => void = () => {};
    heads.push(new Promise((resolve) => (headSeen = resolve)));
    closed.push(
      new Promise((resolve) => {
        const req = get(`${baseUrl}/api/v1/webhooks/stream`, { headers: auth.headers, agent: false }, (res) => {
          answered = true;
          statuses.add(String(res.statusCode));
          headSeen();
          // The mark may straddle two chunks: look again across each boundary.
          let carry: Buffer = Buffer.alloc(0);
          res.on('data', (chunk: Buffer) => {
            bytes += chunk.length;
            if (res.statusCode !== 200) return;
            detail.events += countMarks(Buffer.concat([carry, chunk.subarray(0, EVENT_MARK.length - 1)]));
            detail.events += countMarks(chunk);
            carry = chunk.subarray(Math.max(0, chunk.length - (EVENT_MARK.length - 1)));
          });
          // Cut by stop() or by the server: an `aborted` error; the close below counts it.
          res.on('error', () => {});
          res.on('close', () => {
            if (!stopping && res.statusCode === 200) detail.endedByServer++;
            resolve();
          });
        });
        req.on('error', (error: NodeJS.ErrnoException) => {
          if (!stopping) statuses.add(`error ${error.code ?? error.message}`);
          else if (!answered) statuses.add('no answer');
          headSeen();
          resolve();
        });
        requests.push(req);
      }),
    );
  }

  return {
    opened: Promise.race([Promise.all(heads).then(() => {}), sleep(OPEN_WAIT_MS)]),
    async stop() {
      stopping = true;
      for (const req of requests) req.destroy();
      await Promise.all(closed);
      detail.megabytes = Math.round(bytes / 1e6);
      return { attack: 'live tail', statuses: statuses.counts, detail };
    },
  };
}

function countMarks(buffer: Buffer): number {
  let count = 0;
  for (let at = buffer.indexOf(EVENT_MARK); at !== -1; at = buffer.indexOf(EVENT_MARK, at + 1)) count++;
  return count;
}

/**
 * `clients` loops of GET /api/v1/webhooks?q=…&limit=200 following next_cursor to its end,
 * then from the start again, until stop(). `q` should match nothing, so every page is a
 * full scan's worth of reading for an empty answer.
 */
export function startSearchLoop(baseUrl: string, auth: ReaderAuth, clients: number, q: string): RunningAttack {
  const statuses = counter();
  const detail = { pages: 0, scansCompleted: 0, items: 0 };
  const stopped = new AbortController();

  const page = async (cursor: string | null): Promise<string | null | 'refused'> => {
    const query = new URLSearchParams({ q, limit: '200', ...(cursor !== null && { cursor }) });
    const signal = AbortSignal.any([stopped.signal, AbortSignal.timeout(SEARCH_TIMEOUT_MS)]);
    try {
      const response = await fetch(`${baseUrl}/api/v1/webhooks?${query}`, { headers: auth.headers, signal });
      const body = (await response.json().catch(() => null)) as { data?: unknown[]; next_cursor?: string | null } | null;
      statuses.add(String(response.status));
      if (response.status !== 200 || body === null) return 'refused';
      detail.pages++;
      detail.items += body.data?.length ?? 0;
      return body.next_cursor ?? null;
    } catch (error) {
      if (stopped.signal.aborted) return 'refused';
      // fetch fails with a TypeError whose cause holds the socket's error code.
      const cause = (error as { cause?: NodeJS.ErrnoException }).cause;
      const name = (error as Error).name;
      statuses.add(name === 'TimeoutError' ? 'timeout' : `error ${cause?.code ?? (error as NodeJS.ErrnoException).code ?? name}`);
      return 'refused';
    }
  };

  const loop = async () => {
    while (!stopped.signal.aborted) {
      let cursor: string | null = null;
      do {
        const next = await page(cursor);
        if (next === 'refused') {
          if (!stopped.signal.aborted) await sleep(SEARCH_RETRY_MS);
          break;
        }
        cursor = next;
        if (cursor === null) detail.scansCompleted++;
      } while (cursor !== null && !stopped.signal.aborted);
    }
  };
  const loops = Array.from({ length: clients }, loop);

  return {
    opened: Promise.resolve(),
    async stop() {
      stopped.abort();
      await Promise.all(loops);
      return { attack: 'search', statuses: statuses.counts, detail };
    },
  };
}

/**
 * `count` GET /api/v1/webhooks/export over raw TCP whose sockets stop reading after the
 * first bytes arrive, as a stalled (or malicious) client's do; held until stop().
 */
export function startStalledExports(baseUrl: string, auth: ReaderAuth, count: number): RunningAttack {
  const url = new URL(baseUrl);
  const statuses = counter();
  const detail = { firstByteMsMax: 0, closedByServer: 0 };
  const head = [
    `GET /api/v1/webhooks/export HTTP/1.1`,
    `Host: ${url.host}`,
    ...Object.entries(auth.headers).map(([name, value]) => `${name}: ${value}`),
    '',
    '',
  ].join('\r\n');
  let stopping = false;
  const sockets: Socket[] = [];
  const heads: Promise<void>[] = [];
  const closed: Promise<void>[] = [];
  const started = performance.now();

  for (let i = 0; i < count; i++) {
    let answered = false;
    let headSeen: () => void = () => {};
    heads.push(new Promise((resolve) => (headSeen = resolve)));
    const socket = connect({ host: url.hostname, port: Number(url.port) }, () => socket.write(head));
    socket.once('data', (chunk: Buffer) => {
      answered = true;
      socket.pause();
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(chunk.toString('latin1', 0, 32))?.[1] ?? 'unparsable';
      statuses.add(status);
      detail.firstByteMsMax = Math.max(detail.firstByteMsMax, Math.round(performance.now() - started));
      headSeen();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (!stopping && !answered) statuses.add(`error ${error.code ?? error.message}`);
    });
    closed.push(
      new Promise((resolve) =>
        socket.once('close', (hadError) => {
          if (stopping && !answered) statuses.add('no answer');
          if (!stopping && !answered && !hadError) statuses.add('closed without answer');
          if (!stopping) detail.closedByServer++;
          headSeen();
          resolve();
        }),
      ),
    );
    sockets.push(socket);
  }

  return {
    opened: Promise.race([Promise.all(heads).then(() => {}), sleep(OPEN_WAIT_MS)]),
    async stop() {
      stopping = true;
      for (const socket of sockets) socket.destroy();
      await Promise.all(closed);
      return { attack: 'stalled exports', statuses: statuses.counts, detail };
    },
  };
}
