import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CursorFile } from './cursor-file.js';
import { errorCode, type Forwarder } from './forwarder.js';
import { IntakeRefusal, type FeedQuery, type FeedStart, type FeedWebhook, type IntakeClient } from './intake-client.js';
import { ReadPacer } from './read-pacer.js';
import type { Report } from './report.js';
import { CliError } from '../cli-error.js';

/** How the first read of a run starts. `resume` takes the cursor file's, and from now on a first run. */
export type StartAt = 'resume' | FeedStart;

export interface ListenerParts {
  client: IntakeClient;
  forwarder: Forwarder;
  report: Report;
  cursorFile: CursorFile;
  /** Local URL by integration id; `defaultUrl` for the others (none: they are not read). */
  routes: ReadonlyMap<string, string>;
  defaultUrl: string | undefined;
  /** Names for the lines printed. */
  integrationNames: ReadonlyMap<string, string>;
  integrationIds: readonly string[];
  events: readonly string[];
  startAt: StartAt;
  /** Seconds a read of the feed waits on the server (long polling). */
  waitSeconds?: number;
  pageSize?: number;
  /** Keeps the reads under the key's API limit (default: 10 a second, bursts of 20). */
  readPacer?: ReadPacer;
  /** Backoff between reconnection attempts: first, and most. */
  backoffMs?: { first: number; most: number };
  /** Called once the first read has answered: from then on nothing that commits is missed. */
  onFollowing?: () => void;
}

/**
 * Follows the company's feed from a cursor and forwards each webhook to its local URL, one
 * at a time in the order intake committed them. The cursor is saved past each webhook once
 * it is forwarded (whatever the local answer: a failing handler does not stop the stream),
 * so a run stopped in any way resumes where it left off: a crash or kill -9 may forward the
 * last few again (at least once), a stop with Ctrl-C none.
 */
export class Listener {
  readonly #parts: ListenerParts;
  readonly #stop = new AbortController();
  /** Forwards go one at a time: the feed's and `r`'s. */
  #serial: Promise<unknown> = Promise.resolve();
  #last: { webhook: FeedWebhook; url: string } | undefined;
  #following = false;

  constructor(parts: ListenerParts) {
    this.#parts = parts;
  }

  /** Ends the run after the forward in progress; run() then saves the cursor and returns. */
  stop(): void {
    this.#stop.abort();
  }

  get stopping(): boolean {
    return this.#stop.signal.aborted;
  }

  /** Sends the last webhook forwarded again (the `r` key), between the feed's forwards. */
  resendLast(): Promise<void> {
    return this.#exclusive(async () => {
      const last = this.#last;
      if (!last) {
        this.#parts.report.say('nothing forwarded yet to send again');
        return;
      }
      const result = await this.#parts.forwarder.forward(last.webhook, last.url);
      this.#parts.report.forwarded(last.webhook, this.#name(last.webhook), last.url, result, true);
    });
  }

  async run(): Promise<void> {
    const { report, cursorFile } = this.#parts;
    const signal = this.#stop.signal;
    const saved = await cursorFile.load();
    let start = this.#firstStart(saved);
    /** Counting what arrived while the listener was away, until it has caught up. */
    let away: { since: string; forwarded: number } | undefined =
      this.#parts.startAt === 'resume' && saved ? { since: `listen last ran (${saved.savedAt.toISOString()})`, forwarded: 0 } : undefined;
    let lost: { at: number; attempts: number } | undefined;
    const pageSize = this.#parts.pageSize ?? 100;
    const pacer = this.#parts.readPacer ?? new ReadPacer();
    while (!signal.aborted) {
      let page;
      await pacer.take(signal);
      if (signal.aborted) break;
      try {
        page = await this.#parts.client.feed(this.#query(start, away || !this.#following ? 0 : (this.#parts.waitSeconds ?? 25), pageSize), signal);
      } catch (error) {
        if (signal.aborted) break;
        if (error instanceof IntakeRefusal && error.isFinal) throw new CliError(refusalLine(error));
        const attempts = (lost?.attempts ?? 0) + 1;
        if (!lost) report.say(`lost intake at ${this.#parts.client.origin} (${reason(error)}); reconnecting, nothing is missed meanwhile`);
        lost = { at: lost?.at ?? Date.now(), attempts };
        const backoff = this.#parts.backoffMs ?? { first: 500, most: 30_000 };
        const delay = Math.min(backoff.most, backoff.first * 2 ** (attempts - 1));
        const wait = error instanceof IntakeRefusal && error.retryAfterSeconds !== undefined ? Math.max(delay, error.retryAfterSeconds * 1000) : delay;
        // Jittered by a fifth either way, so listeners cut off together do not come back together.
        await sleep(Math.round(wait * (0.8 + randomInt(401) / 1000)), undefined, { signal }).catch(() => undefined);
        continue;
      }
      if (!this.#following) {
        this.#following = true;
        this.#parts.onFollowing?.();
      }
      if (lost) {
        report.say(`reconnected after ${Math.round((Date.now() - lost.at) / 1000)} s`);
        away ??= { since: 'the connection was lost', forwarded: 0 };
        lost = undefined;
      }
      const done = await this.#exclusive(() => this.#forwardPage(page.data));
      if (away) away.forwarded += done;
      // Stopped in the middle of a page: the cursor stays past the last webhook forwarded.
      if (done < page.data.length) break;
      start = { after: page.next_cursor };
      cursorFile.save(page.next_cursor);
      if (away && page.data.length < pageSize) {
        report.say(
          away.forwarded === 0
            ? `caught up: nothing arrived since ${away.since}`
            : `caught up: forwarded ${away.forwarded} webhook${away.forwarded === 1 ? '' : 's'} that arrived since ${away.since}`,
        );
        away = undefined;
      }
    }
    await this.#exclusive(() => cursorFile.flush());
  }

  async close(): Promise<void> {
    await Promise.all([this.#parts.client.close(), this.#parts.forwarder.close()]);
  }

  /** Forwards a page's webhooks in order; returns how many were forwarded before a stop. */
  async #forwardPage(webhooks: readonly FeedWebhook[]): Promise<number> {
    const { forwarder, report, cursorFile } = this.#parts;
    let done = 0;
    for (const webhook of webhooks) {
      if (this.#stop.signal.aborted) break;
      const url = this.#parts.routes.get(webhook.integration_id) ?? this.#parts.defaultUrl;
      if (url === undefined) {
        report.skipped(webhook, this.#name(webhook), 'no --forward-to for this integration');
      } else {
        const result = await forwarder.forward(webhook, url);
        report.forwarded(webhook, this.#name(webhook), url, result);
        this.#last = { webhook, url };
      }
      done++;
      if (webhook.cursor !== undefined) cursorFile.save(webhook.cursor);
    }
    return done;
  }

  #firstStart(saved: { cursor: string } | undefined): FeedStart {
    const { startAt, report } = this.#parts;
    if (startAt !== 'resume') return startAt;
    if (saved) return { after: saved.cursor };
    report.say('first run for this target: forwarding webhooks from now on (--since 1h or --replay 10 sends recent ones)');
    return { fromNow: true };
  }

  #query(start: FeedStart, waitSeconds: number, limit: number): FeedQuery {
    return { start, waitSeconds, limit, integrationIds: this.#parts.integrationIds, events: this.#parts.events };
  }

  #name(webhook: FeedWebhook): string {
    return this.#parts.integrationNames.get(webhook.integration_id) ?? webhook.integration_id;
  }

  #exclusive<T>(job: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(job);
    this.#serial = run.catch(() => undefined);
    return run;
  }
}

/** One line for a refusal that ends the run. */
function refusalLine(error: IntakeRefusal): string {
  if (error.status === 401) return `intake refused the key (${error.message}): it may have been revoked; run intake login again or pass another --key`;
  if (error.status === 403) return `the key may not read webhooks (${error.message}): it needs the logs:read scope`;
  return `intake refused the read: ${error.message}`;
}

function reason(error: unknown): string {
  if (error instanceof IntakeRefusal) return `${error.status} ${error.code}`;
  const code = errorCode(error);
  if ((error as Error)?.name === 'TimeoutError') return 'no answer in time';
  return code ?? (error as Error)?.message ?? String(error);
}
