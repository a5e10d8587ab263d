import type { ServerResponse } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { withinBudget } from '../store/queries/webhooks.js';
import { WEBHOOK_PAGE_BYTES, type WebhookHeadQuery, type WebhookSummary } from '../store/store.js';
import { principalOf, stillAllowed, type ApiDeps, type Principal } from './context.js';
import type { ReadLimits } from '../intake/read-limits.js';
import { ERROR_RESPONSES, Id } from './schemas.js';
import { cutOffStalledClient } from './send-timeout.js';
import { TailWindow } from './tail-window.js';
import { summary, WebhookSummarySchema } from './webhooks.js';

/**
 * How often an open stream asks the store for new webhooks. Polling the store (not an
 * in-process event) is what makes a webhook taken by any node show up in every node's tail.
 */
const POLL_INTERVAL_MS = 500;
/** At most this many new webhooks per poll; a tail is for watching, the list for reading all. */
const MAX_PER_POLL = 200;
/** Bodies one poll reads and writes at most (one larger webhook still goes, alone). */
const POLL_BYTES = WEBHOOK_PAGE_BYTES;
/** How often a stream's caller is checked again even when nothing is sent (before each send too). */
const ACCESS_CHECK_MS = 1_000;
const KEEP_ALIVE_MS = 15_000;
/** Streams end after this long; the browser reconnects (re-authenticated) with Last-Event-ID and misses nothing. */
const MAX_STREAM_MS = 10 * 60_000;

/** GET /api/v1/webhooks/stream: the live tail, as Server-Sent Events. */
export async function webhookStreamRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const limits = app.readLimits;
  const streams = limits.streams.caps;
  const open = new Set<LiveTail>();
  // Open streams would hold the server's close (and a SIGTERM drain) forever: end them first.
  app.addHook('preClose', async () => {
    for (const tail of open) tail.end();
  });

  app.get(
    '/webhooks/stream',
    {
      config: { permission: 'logs:read', companyInQuery: true },
      schema: {
        tags: ['Webhooks'],
        summary: 'Live tail (Server-Sent Events)',
        description:
          'A `text/event-stream` of the webhooks received from now on, oldest first: one `webhook` event per webhook, ' +
          'its `id` the uuid and its `data` an item as GET /api/v1/webhooks lists it. Filters: `integration_id`, `event`. ' +
          'A browser\'s EventSource cannot send X-Company-Id: pass `company_id` instead. After a reconnect, ' +
          '`Last-Event-ID` resumes where the stream left off. Comments keep the connection alive; a stream ends after ' +
          '10 minutes and the browser reconnects by itself. ' +
          `The store is polled every ${POLL_INTERVAL_MS} ms; a poll sends at most ${MAX_PER_POLL} webhooks and ` +
          `${POLL_BYTES / 1024 / 1024} MiB of bodies (the rest follows on the next polls). ` +
          `The caller is checked again every second and before anything is sent: the stream ends (it is closed) ` +
          'once the key is revoked, the member removed or no longer allowed `logs:read`, or the session ended. ' +
          `At most ${streams.perCaller} streams per key or user, ${streams.perCompany} per company and ${streams.perNode} ` +
          'per server are open at once; past that, 429 with Retry-After. A client that stops reading is not polled ' +
          `until it catches up, and is cut off after ${limits.sendTimeoutMs / 1000} s.`,
        querystring: Type.Object({
          integration_id: Type.Optional(Id('int', "Only this integration's webhooks.")),
          event: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Only this event, exactly.' })),
          company_id: Type.Optional(Id('cmp', 'The company, for a user of several (instead of X-Company-Id).')),
        }),
        response: {
          200: { description: 'The stream.', content: { 'text/event-stream': { schema: WebhookSummarySchema } } },
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const filter = { integrationId: request.query.integration_id, event: request.query.event };
      // Refused with a JSON 429 before anything is streamed.
      const release = limits.streams.take(principal.companyId, principal.actor.id ?? undefined);
      let start: { at: number; seen: string[] };
      try {
        start = await resumePoint(deps, principal.companyId, request.headers['last-event-id']);
      } catch (error) {
        release();
        throw error;
      }

      reply.hijack();
      const out = reply.raw;
      out.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        connection: 'keep-alive',
      });
      out.write('retry: 2000\n\n');
      const tail = new LiveTail(deps, limits, request, out, principal, filter, new TailWindow(start), () => {
        release();
        open.delete(tail);
      });
      open.add(tail);
    },
  );
}

/** One open stream: its polls, its caller's re-checks, its timers, and how it ends. */
class LiveTail {
  private readonly timers: NodeJS.Timeout[];
  private readonly stopCutOff: () => void;
  private polling = false;
  private checking = false;
  private checkedAt = Date.now();
  private ended = false;

  constructor(
    private readonly deps: ApiDeps,
    private readonly limits: ReadLimits,
    private readonly request: FastifyRequest,
    private readonly out: ServerResponse,
    /** Who opened the stream (resolved by the onRequest hook a moment ago). */
    private readonly principal: Principal,
    private readonly filter: Omit<WebhookHeadQuery, 'limit' | 'since'>,
    private readonly window: TailWindow,
    private readonly onEnd: () => void,
  ) {
    this.timers = [
      setInterval(() => void this.poll(), POLL_INTERVAL_MS),
      setInterval(() => void this.periodicCheck(), ACCESS_CHECK_MS),
      setInterval(() => this.keepAlive(), KEEP_ALIVE_MS),
      setTimeout(() => this.end(), MAX_STREAM_MS),
    ];
    this.stopCutOff = cutOffStalledClient(this.out, limits.sendTimeoutMs);
    this.out.on('close', () => this.end());
    // The client may have gone while the stream was being opened: its close is past.
    if (this.out.destroyed) this.end();
  }

  /** Ends the stream: timers stopped, its slot freed, the answer closed. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const timer of this.timers) clearInterval(timer);
    this.stopCutOff();
    this.onEnd();
    if (!this.out.writableEnded && !this.out.destroyed) this.out.end();
  }

  /** A comment now and then keeps proxies from closing an idle stream; none into a full buffer. */
  private keepAlive(): void {
    if (!this.out.writableNeedDrain) this.out.write(': keep-alive\n\n');
  }

  /** Heads first; bodies only of webhooks not sent yet, within the poll's budget, once the caller is checked. */
  private async poll(): Promise<void> {
    // A client that does not read is not polled until it drains (cutOffStalledClient ends it).
    if (this.polling || this.ended || this.out.writableNeedDrain) return;
    // The node's reads are all taken: this poll waits for the next tick rather than queue.
    const slot = this.limits.heavyReads.tryTake(this.principal.companyId);
    if (!slot) return;
    this.polling = true;
    try {
      const polledAt = Date.now();
      const { companyId } = this.principal;
      const heads = await this.deps.store.listCompanyWebhookHeads(companyId, {
        ...this.filter,
        since: this.window.since(),
        limit: MAX_PER_POLL,
      });
      const fresh = this.window.fresh(heads);
      if (fresh.length === 0) {
        this.window.record([], [], polledAt);
        return;
      }
      // Checked after the heads were read: a webhook that committed after the caller lost
      // access is never sent, even within the second between two periodic checks.
      if (!(await this.stillAllowed())) return;
      const batch = withinBudget(fresh, POLL_BYTES);
      const webhooks = await this.deps.store.getCompanyWebhookSummaries(companyId, batch);
      if (this.ended) return;
      for (const webhook of webhooks) send(this.out, webhook);
      this.window.record(batch, fresh.slice(batch.length), polledAt);
    } catch (error) {
      // The store is down for a moment: the next poll tries again; the client waits.
      this.request.log.warn({ err: error }, 'live tail poll failed');
    } finally {
      this.polling = false;
      slot();
    }
  }

  /** The check of every second, unless a poll's check just ran (an idle stream still ends when access does). */
  private async periodicCheck(): Promise<void> {
    if (this.checking || Date.now() - this.checkedAt < ACCESS_CHECK_MS / 2) return;
    this.checking = true;
    try {
      await this.stillAllowed();
    } finally {
      this.checking = false;
    }
  }

  /**
   * Whether the caller may still read this company's webhooks: the key not revoked, the
   * session alive, the user still a member whose role allows logs:read. Ends the stream
   * when not, or when it cannot be told (the browser reconnects and is authenticated anew).
   */
  private async stillAllowed(): Promise<boolean> {
    const startedAt = Date.now();
    const allowed = await stillAllowed(this.deps, this.request, this.principal, 'logs:read');
    if (!allowed) this.end();
    else this.checkedAt = Math.max(this.checkedAt, startedAt);
    return allowed && !this.ended;
  }
}

function send(out: ServerResponse, webhook: WebhookSummary): void {
  out.write(`event: webhook\nid: ${webhook.uuid}\ndata: ${JSON.stringify(summary(webhook))}\n\n`);
}

/** Where a stream starts: now, or just after the webhook a reconnecting browser saw last. */
async function resumePoint(deps: ApiDeps, companyId: string, lastEventId: string | string[] | undefined) {
  const now = { at: Date.now(), seen: [] as string[] };
  if (typeof lastEventId !== 'string' || !/^[0-9a-f-]{36}$/.test(lastEventId)) return now;
  const last = await deps.store.getCompanyWebhookHead(companyId, lastEventId);
  return last ? { at: last.receivedAt, seen: [last.uuid] } : now;
}
