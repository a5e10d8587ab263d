import pg from 'pg';

/**
 * The PostgreSQL server the tests may use: INTAKE_TEST_DATABASE_URL, or the one every
 * machine of ours runs. Tests never touch its databases; they create their own.
 */
export const TEST_POSTGRES_URL = process.env.INTAKE_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** The same server address with another database name. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** The URL without its password, for messages. */
export function printable(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}

/** Runs `work` on a fresh connection to `url` and closes it. */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Whether a PostgreSQL answers a query at `url`; the reason when it does not. */
export async function probePostgres(url: string): Promise<{ ok: true } | { ok: false; reason: string }> {
  try {
    await withClient(url, (client) => client.query('select 1'));
    return { ok: true };
  } catch (error) {
    return { ok: false, reason: (error as Error).message || String(error) };
  }
}
