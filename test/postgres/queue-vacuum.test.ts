import { afterEach, expect, test } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/databases.js';

/**
 * `deliveries` is a queue table: migration 0009 has PostgreSQL vacuum it once 1 % of its
 * rows are dead, without cost-based pauses, so the claim's partial indexes do not fill with
 * the dead entries of deliveries already done.
 */

let database: TestDatabase | undefined;
afterEach(async () => {
  await database?.cleanup();
  database = undefined;
});

test('the deliveries table carries its own autovacuum settings; other tables keep the server defaults', async () => {
  database = await freshDatabase();
  const options = async (table: string) =>
    (
      await database!.query<{ reloptions: string[] | null }>(
        'select reloptions from pg_class where relname = $1 and relnamespace = current_schema()::regnamespace',
        [table],
      )
    )[0]?.reloptions ?? [];
  expect(await options('deliveries')).toEqual(
    expect.arrayContaining(['autovacuum_vacuum_scale_factor=0.01', 'autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_cost_delay=0']),
  );
  expect(await options('destinations')).toEqual([]);
});
