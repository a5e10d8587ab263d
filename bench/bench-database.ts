import pg from 'pg';

export type StoreName = 'sqlite' | 'postgres';

/** The database one benchmark run writes to, and how to get rid of it. */
export interface BenchDatabase {
  store: StoreName;
  url: string;
  /** Removes what create made (the SQLite file goes with the run's temp dir). */
  drop(): Promise<void>;
}

const DEFAULT_POSTGRES_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * SQLite: a file in the run's temp dir. PostgreSQL: a fresh database on the server at
 * BENCH_POSTGRES_URL (default the local one), so no earlier run's rows, indexes or
 * partitions shape this one. `purpose` names a second database of the run apart from the
 * service's (which has none).
 */
export async function createBenchDatabase(store: StoreName, workDir: string, purpose?: string): Promise<BenchDatabase> {
  if (store === 'sqlite') return { store, url: `sqlite:${workDir}/${purpose ?? 'intake'}.db`, drop: async () => {} };
  const adminUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_POSTGRES_ADMIN_URL;
  const name = `intake_bench_${purpose ? `${purpose}_` : ''}${process.pid}_${Date.now()}`;
  await withAdmin(adminUrl, (client) => client.query(`create database ${name}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    store,
    url: url.toString(),
    drop: () => withAdmin(adminUrl, (client) => client.query(`drop database if exists ${name} with (force)`)),
  };
}

async function withAdmin(adminUrl: string, use: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await use(client);
  } finally {
    await client.end();
  }
}
