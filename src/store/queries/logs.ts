import { sql, type Kysely, type Selectable, type SelectQueryBuilder } from 'kysely';
import type { Database, RequestLogTable } from '../schema.js';
import type { RequestLogEntry, RequestLogQuery, UsageBucket, UsageQuery } from '../store.js';

/**
 * A company's request log and its usage, as the management API reads them (its webhooks:
 * webhooks.ts).
 *
 * The log is kept in two places (migration 0010): a stored webhook's row holds the record of
 * the 202 that stored it, and `request_log` holds every other request (refused, replayed,
 * in conflict, a read with an integration key). Each read takes both halves through their
 * own indexes, each as `log` rows of request_log's columns, so that its filters are written
 * once; the database puts them together, so the order of the page (and of a cursor's ties)
 * is the database's own, as it was when the log was one table.
 */

type LogRow = Selectable<RequestLogTable>;
type LogDatabase = Database & { log: LogRow };
/** One half of the log, as rows of request_log's columns named `log`. */
type LogHalf = SelectQueryBuilder<LogDatabase, 'log', {}>;

/**
 * The columns a webhook's row gives its 202's record, named as request_log names them.
 * `records`: only rows that hold their record (webhooks stored before migration 0010 have
 * theirs in request_log); `counts`: every webhook (see requestLogHalves).
 */
function acceptedRecords(db: Kysely<Database>, companyId: string, use: HalvesFor) {
  const select = db
    .selectFrom('webhooks')
    .select([
      'request_id as id',
      'company_id',
      'integration_id',
      'received_at',
      sql<string>`'POST'`.as('method'),
      sql<number>`202`.as('status'),
      sql<string | null>`null`.as('error_code'),
      'key_id',
      'source_ip as ip',
      'user_agent',
      sql<number>`length(raw_body)`.as('size_bytes'),
      'duration_ms',
      'uuid as webhook_uuid',
      sql<string | null>`null`.as('error_detail'),
      'trace_id',
    ])
    .where('company_id', '=', companyId)
    .$castTo<LogRow>();
  return use === 'records' ? select.where('request_id', 'is not', null) : select;
}

/**
 * What a read of the log takes from each half. `records`: each record where it is kept (a
 * page shows their fields). `counts`: the same requests split another way, for reads that
 * only count: every stored webhook is one 202, and request_log's 202s that name a webhook
 * (the records of webhooks stored before migration 0010) are left out instead (the
 * retention purge takes a webhook and its record at the same cutoff); then the webhooks' half of
 * a count over a time range reads only its time index, not each row (on SQLite a column
 * after the body may sit on the body's overflow pages).
 */
export type HalvesFor = 'records' | 'counts';

/** Both halves of a company's log: request_log's rows, then the records in webhooks' rows. */
function requestLogHalves(db: Kysely<Database>, companyId: string, use: HalvesFor): [LogHalf, LogHalf] {
  let others = db.selectFrom('request_log').selectAll().where('company_id', '=', companyId);
  // A 202 that names its webhook is that webhook's record, counted in the webhooks' half.
  if (use === 'counts') others = others.where((eb) => eb.or([eb('status', '<>', 202), eb('webhook_uuid', 'is', null)]));
  return [db.selectFrom(others.as('log')), db.selectFrom(acceptedRecords(db, companyId, use).as('log'))];
}

/** One read of each half (`read`, with its own filters and grouping), as one UNION ALL for a read that sums them. */
export function unionOfHalves<O>(
  db: Kysely<Database>,
  companyId: string,
  use: HalvesFor,
  read: (half: LogHalf) => SelectQueryBuilder<LogDatabase, 'log', O>,
) {
  const [others, accepted] = requestLogHalves(db, companyId, use);
  return read(others).unionAll(read(accepted));
}

/** The company's request log, newest first. */
export async function listCompanyRequestLog(
  db: Kysely<Database>,
  companyId: string,
  query: RequestLogQuery,
): Promise<RequestLogEntry[]> {
  const [others, accepted] = requestLogHalves(db, companyId, 'records');
  // Only 202s are in the webhooks' half: left out when the filters exclude them.
  const may202 = query.errorCode === undefined && (query.status === undefined || (query.status.from <= 202 && 202 < query.status.to));
  // Each half's newest page, then the newest of both: each half reads at most a page of its index.
  const pages = (may202 ? [others, accepted] : [others]).map((half) => {
    let select = half.selectAll();
    if (query.id !== undefined) select = select.where('id', '=', query.id);
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
    return db.selectFrom(select.orderBy('received_at', 'desc').orderBy('id', 'desc').limit(query.limit).as('page')).selectAll();
  });
  const both = pages.length === 1 ? pages[0]! : pages[0]!.unionAll(pages[1]!);
  const rows = await db.selectFrom(both.as('log')).selectAll().orderBy('received_at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  return rows.map(requestLogOfRow);
}

const GROUP_COLUMNS = { integration: 'integration_id', key: 'key_id' } as const;

/** Webhook sends per bucket by outcome: one GROUP BY over each half of the company's log, summed. */
export async function countUsage(db: Kysely<Database>, companyId: string, query: UsageQuery): Promise<UsageBucket[]> {
  // A literal, not a parameter: PostgreSQL must see the same expression in SELECT and GROUP BY.
  const start = sql<number>`received_at - received_at % ${sql.lit(Math.trunc(query.bucketMs))}`;
  const group = query.groupBy === undefined ? sql<string | null>`null` : sql<string | null>`${sql.ref(GROUP_COLUMNS[query.groupBy])}`;
  const counted = unionOfHalves(db, companyId, 'counts', (half) => {
    let select = half
      .select([
        start.as('start'),
        group.as('group_id'),
        sql<number>`sum(case when status = 202 then 1 else 0 end)`.as('accepted'),
        sql<number>`sum(case when status = 200 then 1 else 0 end)`.as('replayed'),
        sql<number>`sum(case when status between 400 and 499 then 1 else 0 end)`.as('rejected'),
        sql<number>`sum(case when status between 500 and 599 then 1 else 0 end)`.as('failed'),
        sql<number>`count(*)`.as('total'),
      ])
      // Reads with an integration key (GET) are in the request log, but are not webhooks sent.
      .where('method', '=', 'POST')
      .where('received_at', '>=', query.since)
      .where('received_at', '<', query.until);
    if (query.integrationId !== undefined) select = select.where('integration_id', '=', query.integrationId);
    if (query.keyId !== undefined) select = select.where('key_id', '=', query.keyId);
    // PostgreSQL refuses a constant in GROUP BY: the group column only when there is one.
    return query.groupBy === undefined ? select.groupBy(start) : select.groupBy([start, group]);
  });
  const rows = await db
    .selectFrom(counted.as('half'))
    .select((eb) => [
      'start',
      'group_id',
      eb.fn.sum<number>('accepted').as('accepted'),
      eb.fn.sum<number>('replayed').as('replayed'),
      eb.fn.sum<number>('rejected').as('rejected'),
      eb.fn.sum<number>('failed').as('failed'),
      eb.fn.sum<number>('total').as('total'),
    ])
    .groupBy(['start', 'group_id'])
    .orderBy('start')
    .orderBy('group_id')
    .execute();
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
    traceId: r.trace_id,
  };
}
