import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { AppError } from '../errors.js';
import { WEBHOOK_PAGE_BYTES, type FeedCursor, type FeedItem } from '../store/store.js';
import { principalOf, resolvePrincipal, type ApiDeps, type Principal } from './context.js';
import type { ReadLimits } from '../intake/read-limits.js';
import { ERROR_RESPONSES, Id } from './schemas.js';
import { summary, WebhookSummarySchema } from './webhooks.js';

/**
 * How often a waiting read asks the store again. Polling the store (not an in-process
 * event) is what makes a webhook taken by any node reach a reader on every node.
 */
const POLL_INTERVAL_MS = 250;
/** How often a waiting read checks its caller again (and before it answers with what it waited for). */
const ACCESS_CHECK_MS = 2_000;
const MAX_WAIT_SECONDS = 30;
/** Where a reader with no cursor starts: before every position on either database. */
const START: FeedCursor = { txid: '0', seq: 0 };
const MAX_XID8 = 2n ** 64n - 1n;

/** GET /api/v1/webhooks/feed: the company's webhooks in commit order, for consumers that pull. */
export async function webhookFeedRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const limits = app.readLimits;
  const polls = limits.longPolls.caps;
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
          `time is up (long polling; the store is asked every ${POLL_INTERVAL_MS} ms and the caller checked again every ` +
          `${ACCESS_CHECK_MS / 1000} s). With \`integration_id\`, the others are left out of \`data\` but still passed: a ` +
          'page may hold fewer items than `limit`, even none, with a `next_cursor` further on. A page also stops once its ' +
          `bodies reach ${WEBHOOK_PAGE_BYTES / 1024 / 1024} MiB. At most ${polls.perCaller} waiting reads per key or user, ` +
          `${polls.perCompany} per company and ${polls.perNode} per server at once (429 past it). ${limits.describeHeavyReads()}`,
        querystring: Type.Object({
          after: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous read.' })),
          wait: Type.Integer({ minimum: 0, maximum: MAX_WAIT_SECONDS, default: 0, description: 'Seconds to wait for a webhook when none is there yet.' }),
          limit: Type.Integer({ minimum: 1, maximum: 500, default: 100, description: 'Webhooks per read.' }),
          integration_id: Type.Optional(Id('int', "Only this integration's webhooks.")),
        }),
        response: {
          200: Type.Object({
            data: Type.Array(WebhookSummarySchema),
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
      const after = query.after === undefined ? START : decodeFeedCursor(query.after);
      const read = (): Promise<FeedItem[]> => deps.store.readFeed(companyId, { after, limit: query.limit });
      let items = await limits.read(companyId, read);
      if (items.length === 0 && query.wait > 0) {
        const release = limits.longPolls.take(companyId, principal.actor.id ?? undefined);
        const abort = new AbortController();
        waiting.add(abort);
        try {
          items = await waitForWebhooks({ deps, limits, request, reply, principal, read, waitMs: query.wait * 1000, abort });
        } finally {
          waiting.delete(abort);
          release();
        }
      }
      const last = items.at(-1);
      const shown = query.integration_id === undefined ? items : items.filter((item) => item.integrationId === query.integration_id);
      return { data: shown.map(summary), next_cursor: last ? encodeFeedCursor(last.position) : (query.after ?? encodeFeedCursor(START)) };
    },
  );
}

/**
 * Asks the store every POLL_INTERVAL_MS until it has webhooks past the cursor, the time is
 * up, the client leaves or the server closes; [] for all but the first. A poll that finds
 * the node's reads all taken waits for the next tick rather than queue.
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
}): Promise<FeedItem[]> {
  const { deps, limits, request, reply, principal, abort } = wait;
  const signal = abort.signal;
  const leave = () => abort.abort();
  reply.raw.once('close', leave);
  const deadline = Date.now() + wait.waitMs;
  let checkedAt = Date.now();
  try {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0 || signal.aborted) return [];
      await sleep(Math.min(POLL_INTERVAL_MS, left), undefined, { signal }).catch(() => undefined);
      if (signal.aborted) return [];
      if (Date.now() - checkedAt >= ACCESS_CHECK_MS) {
        await checkAccess(deps, request, principal);
        checkedAt = Date.now();
      }
      const slot = limits.heavyReads.tryTake(principal.companyId);
      if (!slot) continue;
      let items: FeedItem[];
      try {
        items = await wait.read();
      } catch (error) {
        // The store is away for a moment: the next tick asks again; the client waits.
        request.log.warn({ err: error }, 'feed poll failed');
        continue;
      } finally {
        slot();
      }
      if (items.length > 0) {
        // Checked after the read: a webhook that committed after the caller lost access is never shown.
        await checkAccess(deps, request, principal);
        return items;
      }
    }
  } finally {
    reply.raw.off('close', leave);
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
