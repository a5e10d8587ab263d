import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { matchesEvent } from '../domain/event-patterns.js';
import { AppError } from '../errors.js';
import type { FeedListener } from '../intake/feed-bell.js';
import { WEBHOOK_PAGE_BYTES, type FeedCursor, type FeedItem, type FeedStart } from '../store/store.js';
import { principalOf, resolvePrincipal, type ApiDeps, type Principal } from './context.js';
import type { ReadLimits } from '../intake/read-limits.js';
import { ERROR_RESPONSES, Id } from './schemas.js';
import { summary, WebhookSummarySchema } from './webhooks.js';

/** How often a waiting read checks its caller again (and before it answers with what it waited for). */
const ACCESS_CHECK_MS = 2_000;
/**
 * After a ring whose webhooks a read did not show yet, the next read waits this long, then
 * twice as long each time, up to the poll's interval. On PostgreSQL a commit is in the feed
 * only once every older transaction of the database has ended; a read also finds no slot
 * at times. Rings cannot shorten these waits, so a flood of commits held back by a long
 * transaction costs no more reads than the poll.
 */
const CATCH_UP_MS = 10;
const MAX_WAIT_SECONDS = 30;
/** Values of `integration_id` or of `event` at most (a destination has 50 patterns at most too). */
const MAX_FILTER_VALUES = 50;
/** Where a reader with no cursor starts: before every position on either database. */
const START: FeedCursor = { txid: '0', seq: 0 };
const MAX_XID8 = 2n ** 64n - 1n;

const FeedItemSchema = Type.Object(
  {
    ...WebhookSummarySchema.properties,
    headers: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description: 'With `include=request`: the request headers as received, without credentials (as `GET /api/v1/webhooks/{uuid}` gives them).',
      }),
    ),
    cursor: Type.Optional(Type.String({ description: 'With `include=request`: where a read resumes after this webhook (as `after`).' })),
    raw_body_base64: Type.Optional(
      Type.String({
        contentEncoding: 'base64',
        description: 'With `include=request`: the body exactly as received, byte for byte, in base64 (whatever its encoding).',
      }),
    ),
  },
  { $id: 'FeedItem' },
);

/** GET /api/v1/webhooks/feed: the company's webhooks in commit order, for consumers that pull. */
export async function webhookFeedRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const limits = app.readLimits;
  const polls = limits.longPolls.caps;
  const bell = app.feedBell;
  const waiting = new Set<AbortController>();
  // A read waiting up to 30 s would hold the server's close (and a SIGTERM drain): it answers now instead.
  app.addHook('preClose', async () => {
    for (const abort of waiting) abort.abort();
  });

  app.get(
    '/webhooks/feed',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags: ['Webhooks'],
        summary: 'Read the feed (pull, resumable)',
        description:
          "The company's webhooks oldest first, in the order they were committed, across every node: a consumer that stores " +
          '`next_cursor` and passes it back as `after` sees every webhook exactly once. Without `after` it starts at its ' +
          'oldest webhook still kept (webhooks accepted before intake had destinations are not in it). `next_cursor` is never null: the last item\'s position, or `after` again when nothing ' +
          `came. With \`wait\` (1 to ${MAX_WAIT_SECONDS} s), a read that finds nothing waits until a webhook arrives or the ` +
          'time is up (long polling): a webhook committed by the server holding the read wakes it at once; for those other ' +
          `servers commit, the store is asked every ${bell.pollMs} ms. The caller is checked again every ` +
          `${ACCESS_CHECK_MS / 1000} s. With \`integration_id\` (repeat it for several) or \`event\` (patterns matched as ` +
          "destinations match theirs; repeat it for several), the other webhooks are left out of `data` but still passed: a " +
          'page may hold fewer items than `limit`, even none, with a `next_cursor` further on. With `include=request`, each ' +
          'item also has its `headers` and its body byte for byte (`raw_body_base64`), to replay the request as it came. ' +
          `A page also stops once its bodies (and with \`include=request\` their headers) reach ${WEBHOOK_PAGE_BYTES / 1024 / 1024} MiB. ` +
          `At most ${polls.perCaller} waiting reads per key or user, ${polls.perCompany} per company and ${polls.perNode} ` +
          `per server at once (429 past it). ${limits.describeHeavyReads()}`,
        querystring: Type.Object({
          after: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous read.' })),
          wait: Type.Integer({ minimum: 0, maximum: MAX_WAIT_SECONDS, default: 0, description: 'Seconds to wait for a webhook when none is there yet.' }),
          limit: Type.Integer({ minimum: 1, maximum: 500, default: 100, description: 'Webhooks per read.' }),
          integration_id: Type.Optional(
            Type.Array(Id('int'), { minItems: 1, maxItems: MAX_FILTER_VALUES, description: "Only these integrations' webhooks; repeat it for several." }),
          ),
          event: Type.Optional(
            Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
              minItems: 1,
              maxItems: MAX_FILTER_VALUES,
              description:
                'Only webhooks whose event matches one of these patterns, as a destination\'s `event_patterns` match: `*` is any ' +
                'run of characters, dots included (`order.*`, `*.failed`); the rest is literal and case-sensitive. Repeat it for several.',
            }),
          ),
          start: Type.Optional(Type.Literal('now', { description: 'Without `after`: only what commits from now on (`data` is empty, `next_cursor` the end).' })),
          since: Type.Optional(Type.String({ format: 'date-time', description: 'Without `after`: start at the first webhook received at or after this time (ISO-8601).' })),
          last: Type.Optional(
            Type.Integer({ minimum: 1, maximum: 1000, description: 'Without `after`: start before the last N webhooks (of the `integration_id`s, when given).' }),
          ),
          include: Type.Optional(
            Type.Literal('request', { description: '`request`: each item also has `headers` and `raw_body_base64`, the request as received.' }),
          ),
        }),
        response: {
          200: Type.Object({
            data: Type.Array(FeedItemSchema),
            next_cursor: Type.String({ description: 'Pass as `after` next time; store it with what you processed.' }),
          }),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const { companyId } = principal;
      const query = request.query;
      const after = query.after === undefined ? await startOf(deps, limits, companyId, query) : decodeFeedCursor(query.after);
      const withHeaders = query.include === 'request';
      const read = (): Promise<FeedItem[]> => deps.store.readFeed(companyId, { after, limit: query.limit, withHeaders });
      // Listening before the first read: a commit between it and the wait still wakes the wait.
      const listener = query.wait > 0 ? bell.listen(companyId) : undefined;
      let items: FeedItem[];
      try {
        items = await limits.read(companyId, read);
        if (items.length === 0 && listener !== undefined) {
          const release = limits.longPolls.take(companyId, principal.actor.id ?? undefined);
          const abort = new AbortController();
          waiting.add(abort);
          try {
            items = await waitForWebhooks({ deps, limits, request, reply, principal, read, waitMs: query.wait * 1000, abort, listener, pollMs: bell.pollMs });
          } finally {
            waiting.delete(abort);
            release();
          }
        }
      } finally {
        listener?.close();
      }
      const last = items.at(-1);
      const shown = items.filter((item) => passes(query, item));
      return {
        data: shown.map((item) => (withHeaders ? asReceived(item) : summary(item))),
        next_cursor: last ? encodeFeedCursor(last.position) : (query.after ?? encodeFeedCursor(after)),
      };
    },
  );
}

/** Whether a webhook is one the read asked for (the others are passed, not shown). */
function passes(filter: { integration_id?: string[]; event?: string[] }, item: FeedItem): boolean {
  return (
    (filter.integration_id === undefined || filter.integration_id.includes(item.integrationId)) &&
    (filter.event === undefined || matchesEvent(filter.event, item.event))
  );
}

/** A feed item with the request as received (`include=request`): a consumer can forward it byte for byte. */
function asReceived(item: FeedItem) {
  return { ...summary(item), headers: item.headers, raw_body_base64: item.rawBody.toString('base64'), cursor: encodeFeedCursor(item.position) };
}

/**
 * Where a read without `after` starts: the oldest webhook kept, or as `start`, `since` or
 * `last` say (one of them; a read of the heavy kind, as a search is).
 */
async function startOf(
  deps: ApiDeps,
  limits: ReadLimits,
  companyId: string,
  query: { start?: 'now'; since?: string; last?: number; integration_id?: string[] },
): Promise<FeedCursor> {
  const chosen = [query.start !== undefined, query.since !== undefined, query.last !== undefined].filter(Boolean).length;
  if (chosen === 0) return START;
  if (chosen > 1) throw new AppError('invalid_request', 'Pass one of start, since and last.', { field: 'start' });
  const since = query.since === undefined ? undefined : Date.parse(query.since);
  if (since !== undefined && Number.isNaN(since)) throw new AppError('invalid_request', 'since must be an ISO-8601 time.', { field: 'since' });
  const start: FeedStart =
    query.start !== undefined ? { now: true } : since !== undefined ? { since } : { last: query.last!, integrationIds: query.integration_id };
  return limits.read(companyId, () => deps.store.feedStart(companyId, start));
}

/**
 * Waits for the bell (this node committed webhooks of the company) or for `pollMs` (another
 * node may have), then reads, until there are webhooks past the cursor, the time is up, the
 * client leaves or the server closes; [] for all but the first. Every read takes a heavy
 * read's slot: one that finds the node's reads all taken waits rather than queue.
 */
async function waitForWebhooks(wait: {
  deps: ApiDeps;
  limits: ReadLimits;
  request: FastifyRequest;
  reply: FastifyReply;
  principal: Principal;
  read: () => Promise<FeedItem[]>;
  waitMs: number;
  /** Aborted when the client leaves (here) or the server closes. */
  abort: AbortController;
  /** Listening since before the first read. */
  listener: FeedListener;
  pollMs: number;
}): Promise<FeedItem[]> {
  const { deps, limits, request, reply, principal, abort, listener, pollMs } = wait;
  const signal = abort.signal;
  const leave = () => abort.abort();
  reply.raw.once('close', leave);
  const deadline = Date.now() + wait.waitMs;
  let checkedAt = Date.now();
  /** 0: listening for the bell; otherwise catching up on a ring whose webhooks were not shown (CATCH_UP_MS). */
  let catchUpMs = 0;
  try {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0 || signal.aborted) return [];
      if (catchUpMs === 0) await listener.wait(Math.min(pollMs, left), signal);
      else await sleep(Math.min(catchUpMs, left), undefined, { signal }).catch(() => undefined);
      if (signal.aborted) return [];
      // Taken before the read: a ring during it (a commit the read may have begun before) ends the next wait at once.
      const rung = listener.take();
      // The time is up: a poll that falls due with it is not made (the client's next read asks at once anyway).
      if (!rung && Date.now() >= deadline) return [];
      if (Date.now() - checkedAt >= ACCESS_CHECK_MS) {
        await checkAccess(deps, request, principal);
        checkedAt = Date.now();
      }
      const items = await readIfFree(wait);
      if (items.length > 0) {
        // Checked after the read: a webhook that committed after the caller lost access is never shown.
        await checkAccess(deps, request, principal);
        return items;
      }
      if (rung || catchUpMs > 0) catchUpMs = Math.min(pollMs, catchUpMs === 0 ? CATCH_UP_MS : catchUpMs * 2);
    }
  } finally {
    reply.raw.off('close', leave);
  }
}

/** One read with a heavy read's slot; [] when none is free or the store is away for a moment (the client waits). */
async function readIfFree(wait: { limits: ReadLimits; principal: Principal; request: FastifyRequest; read: () => Promise<FeedItem[]> }): Promise<FeedItem[]> {
  const slot = wait.limits.heavyReads.tryTake(wait.principal.companyId);
  if (!slot) return [];
  try {
    return await wait.read();
  } catch (error) {
    wait.request.log.warn({ err: error }, 'feed poll failed');
    return [];
  } finally {
    slot();
  }
}

/**
 * Throws unless the caller may still read the company's webhooks: the key not revoked,
 * the session alive, the user still a member whose role allows logs:read. The answer has
 * not begun, so the refusal is the one a new request would get.
 */
async function checkAccess(deps: ApiDeps, request: FastifyRequest, started: Principal): Promise<void> {
  let current: Principal;
  try {
    current = await resolvePrincipal(deps, request);
  } catch (error) {
    if (error instanceof AppError) throw error;
    request.log.warn({ err: error }, 'access re-check failed');
    throw new AppError('service_unavailable', "The caller's access could not be checked; read again.", { retryAfterSeconds: 1 });
  }
  if (current.companyId !== started.companyId || !current.permissions.has('logs:read')) {
    throw new AppError(current.session ? 'role_required' : 'insufficient_permissions');
  }
}

/** Opaque to clients: base64url of `<txid>.<seq>`. */
export function encodeFeedCursor(cursor: FeedCursor): string {
  return Buffer.from(`${cursor.txid}.${cursor.seq}`, 'latin1').toString('base64url');
}

export function decodeFeedCursor(text: string): FeedCursor {
  const match = /^(\d{1,20})\.(\d{1,15})$/.exec(Buffer.from(text, 'base64url').toString('latin1'));
  // A transaction id past xid8's range would fail in PostgreSQL's cast: a 500 for a typo.
  if (!match || BigInt(match[1]!) > MAX_XID8) {
    throw new AppError('invalid_request', 'The cursor is not valid; pass next_cursor from a previous read as `after`.', { field: 'after' });
  }
  return { txid: BigInt(match[1]!).toString(), seq: Number(match[2]) };
}
