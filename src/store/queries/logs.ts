import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, RequestLogTable } from '../schema.js';
import type { RequestLogEntry, RequestLogQuery, UsageBucket, UsageQuery } from '../store.js';

/** A company's request log and its usage, as the management API reads them (its webhooks: webhooks.ts). */

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
    errorDetail: r.error_detail,
  };
}
