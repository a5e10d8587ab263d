import type { Kysely } from 'kysely';
import type { DialectTypes } from '../dialect-types.js';

/**
 * `deliveries` is a queue: each delivery is written once and updated at least twice (its
 * lease, its result), and every update leaves a dead row version, and dead entries in the
 * partial indexes the claim reads (`deliveries_open`, `deliveries_leased`), until vacuum.
 * Left there, each claim walks more of them: in `npm run bench`, on a server with
 * autovacuum off, the receiver's rate fell round after round (1,944 → 1,155 → 1,007 a
 * second). With autovacuum on, its defaults wait for 20 % of the table to be dead and run
 * throttled; here it comes at 1 % and unthrottled (the default's effect on deliveries was
 * not measured: the machine's server has autovacuum off, and the dispatcher vacuums the
 * table itself as well). SQLite has nothing to tune.
 */
export async function up(db: Kysely<unknown>, types: DialectTypes): Promise<void> {
  await types.vacuumAsQueue(db, 'deliveries');
}
