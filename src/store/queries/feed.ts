import type { Kysely, Selectable } from 'kysely';
import type { DialectTypes } from '../migrations/index.js';
import type { Database, WebhooksTable } from '../schema.js';
import { WEBHOOK_PAGE_BYTES, type FeedItem, type FeedQuery, type WebhookSummary } from '../store.js';
import { readBodies, SUMMARY, SUMMARY_COLUMNS, summaryOfRow, withinBudget, type WebhookShape } from './webhooks.js';

/**
 * A page of the company's feed: positions from the dialect (store/sqlite/feed.ts,
 * store/postgres/feed.ts), then the bodies of the leading heads that fit the page's byte
 * budget, as every list reads them; the headers only when asked (their bytes then count in
 * the budget: the heads' sizes include them).
 */
export async function readFeed(db: Kysely<Database>, types: DialectTypes, companyId: string, query: FeedQuery): Promise<FeedItem[]> {
  const heads = await types.feedHeads(db, companyId, query);
  const shown = withinBudget(heads, WEBHOOK_PAGE_BYTES);
  const positions = new Map(shown.map((head) => [head.uuid, head.position]));
  const webhooks = await readBodies(db, companyId, shown, query.withHeaders ? WITH_HEADERS : SUMMARY);
  // A webhook purged between the two reads is left out; the next page starts after it anyway.
  return webhooks.map((webhook) => ({ ...webhook, position: positions.get(webhook.uuid)! }));
}

/** A list's webhook and the headers it was received with (`include=request`). */
const WITH_HEADERS: WebhookShape<WebhookSummary & { headers: Record<string, string> }> = {
  columns: [...SUMMARY_COLUMNS, 'headers'],
  ofRow: (row: Selectable<WebhooksTable>) => ({ ...summaryOfRow(row), headers: JSON.parse(row.headers) as Record<string, string> }),
};
