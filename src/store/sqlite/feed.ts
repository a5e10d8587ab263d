import { sql, type Kysely } from 'kysely';
import type { DialectTypes } from '../migrations/index.js';

/**
 * The feed's position on SQLite: one writer commits at a time, so numbers handed out inside
 * each commit, from one counter row, are in commit order. The counter lives in its own row
 * rather than in max(feed_seq): a purge that emptied the table must not hand out numbers a
 * reader has already passed.
 */
export const sqliteFeed: Pick<DialectTypes, 'addFeedPosition' | 'reserveFeedSeqs' | 'feedHeads' | 'feedStart'> = {
  async addFeedPosition(db) {
    await db.schema.alterTable('webhooks').addColumn('feed_seq', 'integer').execute();
    // Partial, as on PostgreSQL: only the feed's query can use it.
    await db.schema.createIndex('webhooks_feed').on('webhooks').columns(['company_id', 'feed_seq']).where(sql<boolean>`feed_seq is not null`).execute();
    await db.schema
      .createTable('feed_sequence')
      .addColumn('id', 'integer', (c) => c.primaryKey())
      .addColumn('next', 'integer', (c) => c.notNull())
      .execute();
    await sql`insert into feed_sequence (id, next) values (1, 1)`.execute(db);
  },

  async reserveFeedSeqs(db, count) {
    const { rows } = await sql<{ first: number }>`update feed_sequence set next = next + ${count} where id = 1 returning next - ${count} as first`.execute(
      db,
    );
    return Number(rows[0]!.first);
  },

  async feedHeads(db, companyId, query) {
    // length() of a text counts its characters: the budget is in bytes, its blob's.
    const size = query.withHeaders ? sql<number>`length(raw_body) + length(cast(headers as blob))` : sql<number>`length(raw_body)`;
    const rows = await db
      .selectFrom('webhooks')
      .select(['uuid', 'received_at', 'feed_seq', size.as('size_bytes')])
      .where('company_id', '=', companyId)
      .where('feed_seq', '>', query.after?.seq ?? 0)
      .orderBy('feed_seq')
      .limit(query.limit)
      .execute();
    return rows.map((row: { uuid: string; received_at: number; feed_seq: number; size_bytes: number }) => ({
      uuid: row.uuid,
      receivedAt: Number(row.received_at),
      sizeBytes: Number(row.size_bytes),
      position: { txid: '0', seq: Number(row.feed_seq) },
    }));
  },

  async feedStart(db, companyId, start) {
    if ('now' in start) {
      // The counter is past every number handed out: what commits from now on is after it.
      const { rows } = await sql<{ next: number }>`select next from feed_sequence where id = 1`.execute(db);
      return { txid: '0', seq: Number(rows[0]!.next) - 1 };
    }
    let first = db.selectFrom('webhooks').select('feed_seq').where('company_id', '=', companyId).where('feed_seq', 'is not', null);
    if ('since' in start) {
      first = first.where('received_at', '>=', start.since).orderBy('feed_seq').limit(1);
    } else {
      if (start.integrationIds?.length) first = first.where('integration_id', 'in', [...start.integrationIds]);
      first = first.orderBy('feed_seq', 'desc').limit(1).offset(start.last - 1);
    }
    const row = await first.executeTakeFirst();
    if (row?.feed_seq != null) return { txid: '0', seq: Number(row.feed_seq) - 1 };
    // No webhook since then: from now on. Fewer than N: from the oldest.
    return 'since' in start ? this.feedStart(db, companyId, { now: true }) : { txid: '0', seq: 0 };
  },
};
