import { sql, type Kysely } from 'kysely';
import type { DialectTypes } from '../migrations/index.js';

/**
 * The feed's position on SQLite: one writer commits at a time, so numbers handed out inside
 * each commit, from one counter row, are in commit order. The counter lives in its own row
 * rather than in max(feed_seq): a purge that emptied the table must not hand out numbers a
 * reader has already passed.
 */
export const sqliteFeed: Pick<DialectTypes, 'addFeedPosition' | 'reserveFeedSeqs' | 'feedHeads'> = {
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
    const rows = await db
      .selectFrom('webhooks')
      .select(['uuid', 'received_at', 'feed_seq', sql<number>`length(raw_body)`.as('size_bytes')])
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
};
