import { sql } from 'kysely';
import type { DialectTypes } from '../migrations/index.js';

/**
 * The feed's position on PostgreSQL, where several nodes commit at once: a sequence number
 * alone is taken at insert, not at commit, so a reader could pass a number whose
 * transaction commits a moment later and never see it. Each row also keeps the id of its
 * transaction (xid8), and the feed shows only rows of transactions older than the oldest
 * one still running in this database: those have all ended, and every transaction to come
 * has a larger id. Order: (transaction, sequence).
 *
 * In this database, not the cluster (`pg_snapshot_xmin` alone): transaction ids are the
 * cluster's, and a long transaction of another application sharing the server (a report,
 * a pg_dump) would hold every company's feed back until it ended. The running ids of the
 * reader's snapshot are kept unless pg_stat_activity shows that id's backend in another
 * database; one that ended since the snapshot, or one whose database a role without
 * pg_read_all_stats cannot see, is kept: the bound can only be lower, never past a
 * transaction of ours that commits after the snapshot.
 *
 * Both columns are added without a default, then given one: a volatile default on ADD
 * COLUMN would rewrite every partition; this way old rows keep null (not in the feed) and
 * the migration is instant.
 */
/**
 * The lowest transaction id whose rows the feed does not show yet: every transaction of this
 * database below it has ended (see above).
 */
const VISIBLE_BOUND = sql`(
          select coalesce(min(running), pg_snapshot_xmax(pg_current_snapshot()))
          from pg_snapshot_xip(pg_current_snapshot()) as running
          where not exists (
            select 1 from pg_stat_activity elsewhere
            where elsewhere.datname <> current_database()
              and elsewhere.backend_xid::text::bigint = running::text::bigint % 4294967296))`;

/** A sequence number past every one a cursor can hold (a cursor's sequence has at most 15 digits). */
const LAST_SEQ = 999_999_999_999_999;

export const postgresFeed: Pick<DialectTypes, 'addFeedPosition' | 'reserveFeedSeqs' | 'feedHeads' | 'feedStart'> = {
  async addFeedPosition(db) {
    await sql`alter table webhooks add column feed_xid xid8, add column feed_seq bigint`.execute(db);
    await sql`create sequence webhooks_feed_seq`.execute(db);
    await sql`alter table webhooks alter column feed_xid set default pg_current_xact_id(),
      alter column feed_seq set default nextval('webhooks_feed_seq')`.execute(db);
    // Partial: only the feed's query (whose comparisons imply it) can use it, so the planner
    // never takes it for another read of a company's webhooks (the purge, the lists).
    await sql`create index webhooks_feed on webhooks (company_id, feed_xid, feed_seq) where feed_xid is not null`.execute(db);
  },

  // The column defaults number the rows.
  reserveFeedSeqs: async () => null,

  async feedHeads(db, companyId, query) {
    const after = query.after;
    const { rows } = await sql<{ uuid: string; received_at: number; size_bytes: number; txid: string; seq: number }>`
      select uuid, received_at, ${query.withHeaders ? sql`octet_length(raw_body) + octet_length(headers)` : sql`octet_length(raw_body)`} as size_bytes,
        feed_xid::text as txid, feed_seq as seq
      from webhooks
      where company_id = ${companyId}
        and feed_xid < ${VISIBLE_BOUND}
        and ${after ? sql`(feed_xid, feed_seq) > (${after.txid}::xid8, ${after.seq})` : sql`feed_xid is not null`}
      order by feed_xid, feed_seq
      limit ${query.limit}`.execute(db);
    return rows.map((row) => ({
      uuid: row.uuid,
      receivedAt: Number(row.received_at),
      sizeBytes: Number(row.size_bytes),
      position: { txid: row.txid, seq: Number(row.seq) },
    }));
  },

  async feedStart(db, companyId, start) {
    if ('now' in start) {
      // Past every row of the transactions below the bound; those at or above it come later.
      const { rows } = await sql<{ txid: string }>`select (${VISIBLE_BOUND}::text::numeric - 1)::text as txid`.execute(db);
      return { txid: rows[0]!.txid, seq: LAST_SEQ };
    }
    const { rows } =
      'since' in start
        ? await sql<{ txid: string; seq: string }>`
            select feed_xid::text as txid, feed_seq as seq from webhooks
            where company_id = ${companyId} and feed_xid is not null and received_at >= ${start.since}
            order by feed_xid, feed_seq limit 1`.execute(db)
        : await sql<{ txid: string; seq: string }>`
            select feed_xid::text as txid, feed_seq as seq from webhooks
            where company_id = ${companyId} and feed_xid is not null
              ${start.integrationIds?.length ? sql`and integration_id in (${sql.join([...start.integrationIds])})` : sql``}
            order by feed_xid desc, feed_seq desc limit 1 offset ${start.last - 1}`.execute(db);
    const row = rows[0];
    if (row) return { txid: row.txid, seq: Number(row.seq) - 1 };
    return 'since' in start ? this.feedStart(db, companyId, { now: true }) : { txid: '0', seq: 0 };
  },
};
