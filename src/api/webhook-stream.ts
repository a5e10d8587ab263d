import type { ServerResponse } from 'node:http';
import { Type } from 'typebox';
import type { AppInstance } from '../app.js';
import type { StoredWebhook, WebhookSearch } from '../store/store.js';
import { principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, Id } from './schemas.js';
import { summary, WebhookSummarySchema } from './webhooks.js';

/**
 * How often an open stream asks the store for new webhooks. Polling the store (not an
 * in-process event) is what makes a webhook taken by any node show up in every node's tail.
 */
const POLL_INTERVAL_MS = 500;
/**
 * How far back each poll looks. A webhook's time is taken when it arrives and it becomes
 * visible at its commit, so one can appear after a later one; a window of a few seconds of
 * already-sent uuids catches those without sending anything twice.
 */
const LATE_COMMIT_WINDOW_MS = 5_000;
/** At most this many new webhooks per poll; a tail is for watching, the list for reading all. */
const MAX_PER_POLL = 200;
const KEEP_ALIVE_MS = 15_000;
/** Streams end after this long; the browser reconnects (re-authenticated) with Last-Event-ID and misses nothing. */
const MAX_STREAM_MS = 10 * 60_000;

/** GET /api/v1/webhooks/stream: the live tail, as Server-Sent Events. */
export async function webhookStreamRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const open = new Set<() => void>();
  // Open streams would hold the server's close (and a SIGTERM drain) forever: end them first.
  app.addHook('preClose', async () => {
    for (const end of open) end();
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
          '10 minutes and the browser reconnects by itself.',
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
      const { companyId } = principalOf(request);
      const filter: Omit<WebhookSearch, 'limit'> = { integrationId: request.query.integration_id, event: request.query.event };
      const resumeFrom = await resumePoint(deps, companyId, request.headers['last-event-id']);

      reply.hijack();
      const out = reply.raw;
      out.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        connection: 'keep-alive',
      });
      out.write('retry: 2000\n\n');

      const tail = new Tail(resumeFrom);
      let polling = false;
      const poll = async () => {
        if (polling) return;
        polling = true;
        try {
          const page = await deps.store.listCompanyWebhooks(companyId, {
            ...filter,
            since: tail.since(),
            limit: MAX_PER_POLL,
          });
          for (const webhook of tail.unseen(page.webhooks)) send(out, webhook);
        } catch (error) {
          // The store is down for a moment: the next poll tries again; the client waits.
          request.log.warn({ err: error }, 'live tail poll failed');
        } finally {
          polling = false;
        }
      };
      const timers = [
        setInterval(poll, POLL_INTERVAL_MS),
        setInterval(() => out.write(': keep-alive\n\n'), KEEP_ALIVE_MS),
        setTimeout(() => end(), MAX_STREAM_MS),
      ];
      const end = () => {
        for (const timer of timers) clearInterval(timer);
        open.delete(end);
        if (!out.writableEnded) out.end();
      };
      open.add(end);
      out.on('close', end);
    },
  );
}

function send(out: ServerResponse, webhook: StoredWebhook): void {
  out.write(`event: webhook\nid: ${webhook.uuid}\ndata: ${JSON.stringify(summary(webhook))}\n\n`);
}

/** Where a stream starts: now, or just after the webhook a reconnecting browser saw last. */
async function resumePoint(deps: ApiDeps, companyId: string, lastEventId: string | string[] | undefined) {
  const now = { at: Date.now(), seen: [] as string[] };
  if (typeof lastEventId !== 'string' || !/^[0-9a-f-]{36}$/.test(lastEventId)) return now;
  const last = await deps.store.getCompanyWebhook(companyId, lastEventId);
  return last ? { at: last.receivedAt, seen: [last.uuid] } : now;
}

/**
 * Which webhooks a stream has sent: everything before `watermark - window` counts as sent,
 * and the uuids within the window are remembered one by one.
 */
class Tail {
  /** Nothing received before the stream's start is sent, however late it commits. */
  private readonly floor: number;
  private watermark: number;
  private readonly sent = new Map<string, number>();

  constructor(start: { at: number; seen: string[] }) {
    this.floor = start.at;
    this.watermark = start.at;
    for (const uuid of start.seen) this.sent.set(uuid, start.at);
  }

  since(): number {
    return this.watermark - LATE_COMMIT_WINDOW_MS;
  }

  /** The webhooks of a page (newest first) not sent yet, oldest first; marks them sent. */
  unseen(page: StoredWebhook[]): StoredWebhook[] {
    const from = Math.max(this.floor, this.since());
    const fresh = page.filter((w) => w.receivedAt >= from && !this.sent.has(w.uuid)).reverse();
    for (const webhook of fresh) {
      this.sent.set(webhook.uuid, webhook.receivedAt);
      this.watermark = Math.max(this.watermark, webhook.receivedAt);
    }
    const forgetBefore = this.since();
    for (const [uuid, at] of this.sent) if (at < forgetBefore) this.sent.delete(uuid);
    return fresh;
  }
}
