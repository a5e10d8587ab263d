import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { decodeCursor, encodeCursor, type Cursor } from '../domain/cursor.js';
import { webhookData } from '../domain/webhook-body.js';
import { AppError } from '../errors.js';
import {
  SEARCH_SCAN_BYTES,
  SEARCH_SCAN_ROWS,
  WEBHOOK_PAGE_BYTES,
  type StoredWebhook,
  type WebhookSearch,
  type WebhookSummary,
} from '../store/store.js';
import { principalOf, stillAllowed, type ApiDeps } from './context.js';
import { PAGE_BUDGET_TEXT, type ReadLimits } from '../intake/read-limits.js';
import { ERROR_RESPONSES, Id, Page, PageQuery, Timestamp, iso } from './schemas.js';
import { cutOffStalledClient } from './send-timeout.js';
import { parseOptionalTime } from '../domain/time.js';

/** Rows per store read while exporting; WEBHOOK_PAGE_BYTES bounds its bodies, so what is held in memory at once. */
const EXPORT_PAGE_ROWS = 200;
const MIB = 1024 * 1024;
const UUID = Type.String({ pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', description: 'A webhook uuid.' });

/** The items of the key-authenticated list (GET /api/webhooks/…), with the integration. */
export const WebhookSummarySchema = Type.Object(
  {
    uuid: UUID,
    integration_id: Id('int'),
    event: Type.String(),
    data: Type.Unknown({
      description:
        "The webhook's `data` object ({} when it had none). From a provider source (signature, not API key): the provider's whole body, a form as an object.",
    }),
    received_at: Timestamp,
  },
  { $id: 'WebhookSummary' },
);

export const WebhookSchema = Type.Object(
  {
    ...WebhookSummarySchema.properties,
    headers: Type.Record(Type.String(), Type.String(), { description: 'Request headers as received, without credentials.' }),
    raw_body: Type.String({ description: 'The body exactly as received (UTF-8).' }),
    source_ip: Type.String(),
  },
  { $id: 'Webhook' },
);

const Filters = {
  integration_id: Type.Optional(Id('int', "Only this integration's webhooks.")),
  event: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Only this event, exactly.' })),
  since: Type.Optional(Type.String({ format: 'date-time', description: 'Received at or after (ISO-8601).' })),
  until: Type.Optional(Type.String({ format: 'date-time', description: 'Received before (ISO-8601).' })),
  q: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description:
        'Only webhooks whose raw body contains this text, exactly (case-sensitive; `%` and `_` are plain characters). ' +
        `It scans the filtered range newest first, at most ${SEARCH_SCAN_ROWS} webhooks or ${SEARCH_SCAN_BYTES / MIB} MiB ` +
        'of bodies per request, whichever comes first: a page may then hold fewer than `limit` items, or none, and still ' +
        'have a `next_cursor` to scan on. Narrow it with the other filters.',
    }),
  ),
};

type FilterQuery = { integration_id?: string; event?: string; since?: string; until?: string; q?: string };

/** /api/v1/webhooks: the company's webhooks, across its integrations. */
export async function webhookRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Webhooks'];
  const limits = app.readLimits;
  const exports = limits.exports.caps;
  const busyText = limits.describeHeavyReads();

  app.get(
    '/webhooks',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags,
        summary: 'List webhooks',
        description:
          'Across the company, or one integration; newest first. `since` is inclusive, `until` exclusive. ' +
          `${PAGE_BUDGET_TEXT} ${busyText}`,
        querystring: Type.Object({ ...PageQuery, ...Filters }),
        response: { 200: Page(WebhookSummarySchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const { limit, cursor } = request.query;
      const query = { ...search(request.query), limit, cursor: cursor === undefined ? undefined : decodeCursor(cursor) };
      const page = await limits.read(companyId, () => deps.store.listCompanyWebhooks(companyId, query));
      return { data: page.webhooks.map(summary), next_cursor: page.next && encodeCursor(page.next) };
    },
  );

  app.get(
    '/webhooks/export',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags,
        summary: 'Export webhooks as NDJSON',
        description:
          'Every webhook the filters match (the same filters as the list), newest first, one JSON object per line as ' +
          'GET /api/v1/webhooks/{uuid} answers it. Streamed as it is read, ' +
          `${EXPORT_PAGE_ROWS} webhooks or ${WEBHOOK_PAGE_BYTES / MIB} MiB of bodies at a time, and only as fast as the ` +
          `client takes it, so any size can be exported; a client that takes nothing for ${limits.sendTimeoutMs / 1000} s ` +
          'is cut off, and so is one whose caller loses access (the key revoked, the member removed) before its next page. ' +
          'Webhooks received after the export started are not in it. ' +
          `At most ${exports.perCaller} exports per key or user and ${exports.perCompany} per company run at once ` +
          `(429 past it). ${busyText}`,
        querystring: Type.Object(Filters),
        response: {
          200: { description: 'One webhook per line.', content: { 'application/x-ndjson': { schema: WebhookSchema } } },
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const { companyId, actor } = principal;
      const query = { ...search(request.query), limit: EXPORT_PAGE_ROWS };
      const release = limits.exports.take(companyId, actor.id ?? undefined);
      // However the answer ends (done, refused, the client gone, cut off), its place is freed.
      reply.raw.once('close', release);
      // The first page is read before answering, so a busy node still says 503, not a cut-off 200.
      const first = await limits.read(companyId, () => deps.store.exportCompanyWebhooks(companyId, query));
      cutOffStalledClient(reply.raw, limits.sendTimeoutMs);
      async function* lines() {
        let page = first;
        for (;;) {
          if (page.webhooks.length > 0) yield page.webhooks.map((w) => `${JSON.stringify(detail(w))}\n`).join('');
          if (!page.next) return;
          // A long export ends when its caller loses access, as the live tail does; cut, not
          // ended, so the client cannot take what it has for the whole export.
          if (!(await stillAllowed(deps, request, principal, 'logs:read'))) throw new Error('the caller lost access during the export');
          const cursor: Cursor = page.next;
          page = await laterPage(limits, companyId, () => deps.store.exportCompanyWebhooks(companyId, { ...query, cursor }));
        }
      }
      // A stream goes out as it is read, and is read only as the client takes it (a page is
      // read when the one before has been handed to the socket); the schema above describes
      // each of its lines.
      const stream = Readable.from(lines(), { objectMode: false, highWaterMark: 1 }) as never;
      return reply
        .type('application/x-ndjson; charset=utf-8')
        .header('content-disposition', 'attachment; filename="webhooks.ndjson"')
        .send(stream);
    },
  );

  app.get(
    '/webhooks/:uuid',
    {
      config: { permission: 'logs:read' },
      schema: {
        tags,
        summary: 'Read a webhook',
        description: 'With its headers, its raw body byte for byte, and the sender\'s IP.',
        params: Type.Object({ uuid: UUID }),
        response: { 200: WebhookSchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const webhook = await deps.store.getCompanyWebhook(companyId, request.params.uuid);
      if (!webhook) throw new AppError('not_found', `No webhook with uuid ${request.params.uuid}.`);
      return detail(webhook);
    },
  );
}

function search(query: FilterQuery): Omit<WebhookSearch, 'limit'> {
  return {
    integrationId: query.integration_id,
    event: query.event,
    since: parseOptionalTime(query.since, 'since'),
    until: parseOptionalTime(query.until, 'until'),
    text: query.q,
  };
}

/**
 * An export's next page. The answer has begun (200), so a busy node cannot refuse it: the
 * page waits for a read, as long as a stalled client would be given, then the export ends.
 */
async function laterPage<T>(limits: ReadLimits, companyId: string, read: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + limits.sendTimeoutMs;
  for (;;) {
    const release = limits.heavyReads.tryTake(companyId);
    if (release) {
      try {
        return await read();
      } finally {
        release();
      }
    }
    if (Date.now() > deadline) throw new AppError('service_unavailable', 'The export could not read its next page in time.');
    await sleep(100);
  }
}

/** A webhook as lists show it (no headers, no raw body). */
export function summary(webhook: WebhookSummary) {
  return {
    uuid: webhook.uuid,
    integration_id: webhook.integrationId,
    event: webhook.event,
    data: webhookData(webhook.rawBody, webhook.payloadFormat),
    received_at: iso(webhook.receivedAt),
  };
}

function detail(webhook: StoredWebhook) {
  return {
    ...summary(webhook),
    headers: webhook.headers,
    raw_body: webhook.rawBody.toString('utf8'),
    source_ip: webhook.sourceIp,
  };
}
