import type { Kysely } from 'kysely';
import type { DialectTypes } from '../migrations/index.js';
import type { Database } from '../schema.js';
import { WEBHOOK_PAGE_BYTES, type FeedItem, type FeedQuery } from '../store.js';
import { readBodies, SUMMARY, withinBudget } from './webhooks.js';

/**
 * A page of the company's feed: positions from the dialect (store/sqlite/feed.ts,
 * store/postgres/feed.ts), then the bodies of the leading heads that fit the page's byte
 * budget, as every list reads them.
 */
export async function readFeed(db: Kysely<Database>, types: DialectTypes, companyId: string, query: FeedQuery): Promise<FeedItem[]> {
  const heads = await types.feedHeads(db, companyId, query);
  const shown = withinBudget(heads, WEBHOOK_PAGE_BYTES);
  const positions = new Map(shown.map((head) => [head.uuid, head.position]));
  const webhooks = await readBodies(db, companyId, shown, SUMMARY);
  // A webhook purged between the two reads is left out; the next page starts after it anyway.
  return webhooks.map((webhook) => ({ ...webhook, position: positions.get(webhook.uuid)! }));
}
