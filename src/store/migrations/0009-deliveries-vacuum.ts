import type { Kysely } from 'kysely';
import type { DialectTypes } from '../dialect-types.js';

/**
 * `deliveries` is a queue: each delivery is written once and updated at least twice (its
 * lease, its result), and every update leaves a dead row version, and dead entries in the
 * partial indexes the claim reads (`deliveries_open`, `deliveries_leased`), until vacuum.
 * With PostgreSQL's defaults (20 % of the table dead, cost-limited) those entries pile up
 * under sustained delivery and each claim walks more of them: in `npm run bench` the
 * receiver's rate fell round after round (1,944 → 1,155 → 1,007 a second). Vacuum now
 * comes at 1 % and runs unthrottled. SQLite has nothing to tune.
 */
export async function up(db: Kysely<unknown>, types: DialectTypes): Promise<void> {
  await types.vacuumAsQueue(db, 'deliveries');
}
