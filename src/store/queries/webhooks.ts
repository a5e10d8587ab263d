import { sql, type Kysely, type Selectable } from 'kysely';
import type { Cursor } from '../../domain/cursor.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database, WebhooksTable } from '../schema.js';
import {
  SEARCH_SCAN_BYTES,
  SEARCH_SCAN_ROWS,
  WEBHOOK_PAGE_BYTES,
  type PayloadFormat,
  type StoredWebhook,
  type WebhookHead,
  type WebhookHeadQuery,
  type WebhookPage,
  type WebhookSearch,
  type WebhookSummary,
} from '../store.js';

/**
 * A company's webhooks as the management API, the integration key's list and the live tail
 * read them: heads first (uuid, time, size: an index read and each row's header), then the
 * bodies of only the heads that fit a byte budget. A body can be 16 MiB and a page 200
 * rows: reading them whole before knowing their size is what let one viewer stall a node.
 */

/** What a list shows of a webhook: no headers, no source IP. */
export const SUMMARY_COLUMNS = ['uuid', 'integration_id', 'event', 'received_at', 'raw_body', 'payload_format'] as const;
/** What a read of a whole webhook returns (everything but the tenant and idempotency columns). */
export const WEBHOOK_COLUMNS = [...SUMMARY_COLUMNS, 'headers', 'source_ip'] as const;

/** Which columns a read takes and what it makes of a row. */
export interface WebhookShape<W extends WebhookSummary> {
  columns: ReadonlyArray<(typeof WEBHOOK_COLUMNS)[number]>;
  ofRow(row: Selectable<WebhooksTable>): W;
}

/** One page of the company's webhooks, newest first, each in `shape`. */
export async function readWebhookPage<W extends WebhookSummary>(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  query: WebhookSearch,
  shape: WebhookShape<W>,
): Promise<WebhookPage<W>> {
  let select = inRange(db, companyId, query);
  let edge: Cursor | undefined;
  if (query.text !== undefined) {
    // The last row this search may read; found first, so rows that land meanwhile can only
    // add to this page, never move its end.
    edge = await searchEdge(db, types, companyId, query);
    const bound = edge;
    if (bound) {
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
  const heads = (await select.select(headColumns(types)).limit(query.limit + 1).execute()).map(headOfRow);
  const shown = withinBudget(heads.slice(0, query.limit), WEBHOOK_PAGE_BYTES);
  const webhooks = await readBodies(db, companyId, shown, shape);
  const last = shown.at(-1);
  const next = shown.length < heads.length && last ? { receivedAt: last.receivedAt, uuid: last.uuid } : (edge ?? null);
  return { webhooks, next };
}

/** The newest heads of a range (no cursor, no search), newest first. */
export async function listWebhookHeads(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  query: WebhookHeadQuery,
): Promise<WebhookHead[]> {
  const rows = await inRange(db, companyId, query).select(headColumns(types)).limit(query.limit).execute();
  return rows.map(headOfRow);
}

export async function getWebhookHead(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  uuid: string,
): Promise<WebhookHead | undefined> {
  const row = await db
    .selectFrom('webhooks')
    .select(headColumns(types))
    .where('company_id', '=', companyId)
    .where('uuid', '=', uuid)
    .executeTakeFirst();
  return row && headOfRow(row);
}

/**
 * The webhooks these heads name, in their order and in `shape`; those purged since their
 * heads were read are left out. Their exact times make every index a point lookup (a time
 * range would read whatever else a filtered page's span holds) and let PostgreSQL read only
 * the day partitions that hold them.
 */
export async function readBodies<W extends WebhookSummary>(
  db: Kysely<Database>,
  companyId: string,
  heads: readonly WebhookHead[],
  shape: WebhookShape<W>,
): Promise<W[]> {
  if (heads.length === 0) return [];
  const rows = await db
    .selectFrom('webhooks')
    .select(shape.columns)
    .where('company_id', '=', companyId)
    .where('uuid', 'in', heads.map((h) => h.uuid))
    .where('received_at', 'in', [...new Set(heads.map((h) => h.receivedAt))])
    .execute();
  const byUuid = new Map(rows.map((row) => [row.uuid, shape.ofRow(row as Selectable<WebhooksTable>)]));
  return heads.flatMap((head) => byUuid.get(head.uuid) ?? []);
}

/**
 * The leading heads whose bodies fit in `budget` bytes, and always the first: a page of one
 * webhook larger than the budget still moves the cursor on.
 */
export function withinBudget<H extends WebhookHead>(heads: readonly H[], budget: number): H[] {
  let total = 0;
  let count = 0;
  for (const head of heads) {
    total += head.sizeBytes;
    if (count > 0 && total > budget) break;
    count++;
  }
  return heads.slice(0, count);
}

/** The filters and the cursor, newest first. */
function inRange(db: Kysely<Database>, companyId: string, query: WebhookSearch) {
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
}

/**
 * Where a search's scan ends: the row at which the bodies read reach SEARCH_SCAN_BYTES or
 * the SEARCH_SCAN_ROWS-th row, whichever comes first; undefined when the range ends before
 * either. Sizes come from the heads, so finding the edge reads no body.
 */
async function searchEdge(
  db: Kysely<Database>,
  types: DialectTypes,
  companyId: string,
  query: WebhookSearch,
): Promise<Cursor | undefined> {
  const scanned = inRange(db, companyId, query).select(headColumns(types)).limit(SEARCH_SCAN_ROWS).as('scanned');
  const running = db
    .selectFrom(scanned)
    .select([
      'received_at',
      'uuid',
      sql<number>`sum(size_bytes) over (order by received_at desc, uuid desc)`.as('scanned_bytes'),
      sql<number>`row_number() over (order by received_at desc, uuid desc)`.as('scanned_rows'),
    ])
    .as('running');
  const edge = await db
    .selectFrom(running)
    .select(['received_at', 'uuid'])
    .where((eb) => eb.or([eb('scanned_bytes', '>=', SEARCH_SCAN_BYTES), eb('scanned_rows', '=', SEARCH_SCAN_ROWS)]))
    .orderBy('scanned_rows')
    .limit(1)
    .executeTakeFirst();
  return edge && { receivedAt: Number(edge.received_at), uuid: edge.uuid };
}

/** A webhook's head without reading its body: its size from the row (see DialectTypes.binaryLength). */
export function headColumns(types: DialectTypes) {
  return ['uuid', 'received_at', types.binaryLength('raw_body').as('size_bytes')] as const;
}

export function headOfRow(row: { uuid: string; received_at: number; size_bytes: number }): WebhookHead {
  return { uuid: row.uuid, receivedAt: Number(row.received_at), sizeBytes: Number(row.size_bytes) };
}

export function summaryOfRow(row: Pick<Selectable<WebhooksTable>, (typeof SUMMARY_COLUMNS)[number]>): WebhookSummary {
  return {
    uuid: row.uuid,
    integrationId: row.integration_id,
    event: row.event,
    receivedAt: Number(row.received_at),
    rawBody: Buffer.from(row.raw_body),
    payloadFormat: row.payload_format as PayloadFormat,
  };
}

export function webhookOfRow(row: Pick<Selectable<WebhooksTable>, (typeof WEBHOOK_COLUMNS)[number]>): StoredWebhook {
  return {
    ...summaryOfRow(row),
    headers: JSON.parse(row.headers) as Record<string, string>,
    sourceIp: row.source_ip,
  };
}

/** A list's webhook: no headers. */
export const SUMMARY: WebhookShape<WebhookSummary> = { columns: SUMMARY_COLUMNS, ofRow: summaryOfRow };
/** A webhook whole, as one read or the export shows it. */
export const WHOLE: WebhookShape<StoredWebhook> = { columns: WEBHOOK_COLUMNS, ofRow: webhookOfRow };

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
