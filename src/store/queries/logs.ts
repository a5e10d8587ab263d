import { sql, type Kysely, type Selectable } from 'kysely';
import type { Cursor } from '../../domain/cursor.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database, RequestLogTable, WebhooksTable } from '../schema.js';
import {
  SEARCH_SCAN_ROWS,
  type RequestLogEntry,
  type RequestLogQuery,
  type StoredWebhook,
  type UsageBucket,
  type UsageQuery,
  type WebhookPage,
  type WebhookSearch,
} from '../store.js';

/** A company's webhooks, its request log and its usage, as the management API reads them. */

/** What a read of a webhook returns (everything but the tenant and idempotency columns). */
export const WEBHOOK_COLUMNS = ['uuid', 'integration_id', 'event', 'received_at', 'raw_body', 'headers', 'source_ip'] as const;

/** The company's webhooks newest first; a search reads at most SEARCH_SCAN_ROWS rows of the range. */
export async function listCompanyWebhooks(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  query: WebhookSearch,
): Promise<WebhookPage> {
  const inRange = () => {
    let select = db.selectFrom('webhooks').where('company_id', '=', companyId);
    if (query.integrationId !== undefined) select = select.where('integration_id', '=', query.integrationId);
    if (query.event !== undefined) select = select.where('event', '=', query.event);
    if (query.since !== undefined) select = select.where('received_at', '>=', query.since);
    if (query.until !== undefined) select = select.where('received_at', '<', query.until);
    const cursor = query.cursor;
    if (cursor) {
      // The first bound is implied by the second; it starts the index read at the cursor.
      select = select
        .where('received_at', '<=', cursor.receivedAt)
        .where((eb) =>
          eb.or([
            eb('received_at', '<', cursor.receivedAt),
            eb.and([eb('received_at', '=', cursor.receivedAt), eb('uuid', '<', cursor.uuid)]),
          ]),
        );
    }
    return select.orderBy('received_at', 'desc').orderBy('uuid', 'desc');
  };

  let select = inRange().select(WEBHOOK_COLUMNS);
  let edge: Cursor | undefined;
  if (query.text !== undefined) {
    // The last row this search may read; found first, so rows that land meanwhile can only
    // add to this page, never move its end.
    const last = await inRange().select(['received_at', 'uuid']).limit(1).offset(SEARCH_SCAN_ROWS - 1).executeTakeFirst();
    if (last) {
      edge = { receivedAt: Number(last.received_at), uuid: last.uuid };
      const bound = edge;
      select = select
        .where('received_at', '>=', bound.receivedAt)
        .where((eb) =>
          eb.or([
            eb('received_at', '>', bound.receivedAt),
            eb.and([eb('received_at', '=', bound.receivedAt), eb('uuid', '>=', bound.uuid)]),
          ]),
        );
    }
    select = select.where(types.binaryContainsText('raw_body', query.text));
  }
  const rows = await select.limit(query.limit + 1).execute();
  const webhooks = rows.slice(0, query.limit).map(webhookOfRow);
  const last = webhooks.at(-1);
  const next = rows.length > query.limit && last ? { receivedAt: last.receivedAt, uuid: last.uuid } : (edge ?? null);
  return { webhooks, next };
}

/** One webhook of the company, whichever its integration. */
export async function getCompanyWebhook(db: Kysely<Database>, companyId: string, uuid: string): Promise<StoredWebhook | undefined> {
  const row = await db
    .selectFrom('webhooks')
    .select(WEBHOOK_COLUMNS)
    .where('company_id', '=', companyId)
    .where('uuid', '=', uuid)
    .executeTakeFirst();
  return row && webhookOfRow(row);
}

/** The company's request log, newest first. */
export async function listCompanyRequestLog(
  db: Kysely<Database>,
  companyId: string,
  query: RequestLogQuery,
): Promise<RequestLogEntry[]> {
  let select = db.selectFrom('request_log').selectAll().where('company_id', '=', companyId);
  if (query.integrationId !== undefined) select = select.where('integration_id', '=', query.integrationId);
  if (query.keyId !== undefined) select = select.where('key_id', '=', query.keyId);
  if (query.errorCode !== undefined) select = select.where('error_code', '=', query.errorCode);
  if (query.status !== undefined) select = select.where('status', '>=', query.status.from).where('status', '<', query.status.to);
  if (query.since !== undefined) select = select.where('received_at', '>=', query.since);
  if (query.until !== undefined) select = select.where('received_at', '<', query.until);
  const cursor = query.cursor;
  if (cursor) {
    select = select
      .where('received_at', '<=', cursor.at)
      .where((eb) =>
        eb.or([eb('received_at', '<', cursor.at), eb.and([eb('received_at', '=', cursor.at), eb('id', '<', cursor.id)])]),
      );
  }
  const rows = await select.orderBy('received_at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  return rows.map(requestLogOfRow);
}

const GROUP_COLUMNS = { integration: 'integration_id', key: 'key_id' } as const;

/** Webhook sends per bucket by outcome: one GROUP BY over the company's request log. */
export async function countUsage(db: Kysely<Database>, companyId: string, query: UsageQuery): Promise<UsageBucket[]> {
  // A literal, not a parameter: PostgreSQL must see the same expression in SELECT and GROUP BY.
  const start = sql<number>`received_at - received_at % ${sql.lit(Math.trunc(query.bucketMs))}`;
  const group = query.groupBy === undefined ? sql<string | null>`null` : sql<string | null>`${sql.ref(GROUP_COLUMNS[query.groupBy])}`;
  let select = db
    .selectFrom('request_log')
    .select([
      start.as('start'),
      group.as('group_id'),
      sql<number>`sum(case when status = 202 then 1 else 0 end)`.as('accepted'),
      sql<number>`sum(case when status = 200 then 1 else 0 end)`.as('replayed'),
      sql<number>`sum(case when status between 400 and 499 then 1 else 0 end)`.as('rejected'),
      sql<number>`sum(case when status between 500 and 599 then 1 else 0 end)`.as('failed'),
      sql<number>`count(*)`.as('total'),
    ])
    .where('company_id', '=', companyId)
    // Reads with an integration key (GET) are in the request log, but are not webhooks sent.
    .where('method', '=', 'POST')
    .where('received_at', '>=', query.since)
    .where('received_at', '<', query.until);
  if (query.integrationId !== undefined) select = select.where('integration_id', '=', query.integrationId);
  if (query.keyId !== undefined) select = select.where('key_id', '=', query.keyId);
  // PostgreSQL refuses a constant in GROUP BY: the group column only when there is one.
  const ordered =
    query.groupBy === undefined ? select.groupBy(start).orderBy(start) : select.groupBy([start, group]).orderBy(start).orderBy(group);
  const rows = await ordered.execute();
  return rows.map((r) => ({
    start: Number(r.start),
    group: r.group_id,
    accepted: Number(r.accepted),
    replayed: Number(r.replayed),
    rejected: Number(r.rejected),
    failed: Number(r.failed),
    total: Number(r.total),
  }));
}

export function webhookOfRow(row: Pick<Selectable<WebhooksTable>, (typeof WEBHOOK_COLUMNS)[number]>): StoredWebhook {
  return {
    uuid: row.uuid,
    integrationId: row.integration_id,
    event: row.event,
    receivedAt: Number(row.received_at),
    rawBody: Buffer.from(row.raw_body),
    headers: JSON.parse(row.headers) as Record<string, string>,
    sourceIp: row.source_ip,
  };
}

export function requestLogOfRow(r: Selectable<RequestLogTable>): RequestLogEntry {
  return {
    id: r.id,
    companyId: r.company_id,
    integrationId: r.integration_id,
    receivedAt: Number(r.received_at),
    method: r.method,
    status: r.status,
    errorCode: r.error_code,
    keyId: r.key_id,
    ip: r.ip,
    userAgent: r.user_agent,
    sizeBytes: r.size_bytes,
    durationMs: r.duration_ms,
    webhookUuid: r.webhook_uuid,
  };
}
