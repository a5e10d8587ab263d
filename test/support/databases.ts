import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { TEST_POSTGRES_URL, withClient, withDatabase } from './postgres-server.js';

export type Dialect = 'sqlite' | 'postgres';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Which database this project's tests run on (see vitest.config.ts). */
    dialect: Dialect;
    /** The PostgreSQL project's database for this run. */
    postgresUrl: string;
    /** A migrated SQLite file that migrated SQLite databases start as (sqlite-template-global-setup.ts). */
    sqliteTemplate: string;
  }
}

/** The database of the project running this test file. */
export function testDialect(): Dialect {
  return inject('dialect') ?? 'sqlite';
}

/** A database of a test's own: a SQLite file, or a PostgreSQL schema in the run's database. */
export interface TestDatabase {
  dialect: Dialect;
  /** What INTAKE_DATABASE_URL would be to reach it (for servers and the CLI). */
  databaseUrl: string;
  store: Store;
  /** Another store on the same database: the CLI or another node, with its own connections. */
  openAnother(): Store;
  /** Raw SQL, for what a test checks beneath the store (row counts, query plans). */
  query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  cleanup(): Promise<void>;
}

/**
 * A new database; migrated unless `migrate` is false (on SQLite a copy of the run's migrated
 * template, on which migrate() then finds nothing to apply). On PostgreSQL a schema in the
 * run's database, or with `ownDatabase` a database of its own on the server: for tests of
 * the feed, which on PostgreSQL shows only what committed before the oldest transaction
 * still running in its database (other test files' transactions included).
 */
export async function freshDatabase(options: { migrate?: boolean; dialect?: Dialect; ownDatabase?: boolean } = {}): Promise<TestDatabase> {
  const dialect = options.dialect ?? testDialect();
  const migrate = options.migrate ?? true;
  const database = dialect === 'postgres' ? await postgresSchema(options.ownDatabase ?? false) : sqliteFile(migrate);
  if (migrate) await database.store.migrate();
  return database;
}

function sqliteFile(fromTemplate: boolean): TestDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'intake-test-'));
  if (fromTemplate) copyFileSync(inject('sqliteTemplate'), join(dir, 'intake.db'));
  const databaseUrl = `sqlite:${join(dir, 'intake.db')}`;
  const others: Store[] = [];
  const store = openStore(databaseUrl, { poolSize: 1 });
  return {
    dialect: 'sqlite',
    databaseUrl,
    store,
    openAnother() {
      const other = openStore(databaseUrl, { poolSize: 1 });
      others.push(other);
      return other;
    },
    async query<T>(text: string, params: unknown[] = []) {
      const db = new Database(join(dir, 'intake.db'));
      try {
        const statement = db.prepare(text);
        return (statement.reader ? statement.all(...params) : (statement.run(...params), [])) as T[];
      } finally {
        db.close();
      }
    },
    async cleanup() {
      for (const other of others) await other.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresSchema(ownDatabase: boolean): Promise<TestDatabase> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  const runUrl = ownDatabase ? withDatabase(TEST_POSTGRES_URL, name) : inject('postgresUrl');
  if (ownDatabase) await withClient(TEST_POSTGRES_URL, (client) => client.query(`create database ${name}`));
  const schema = ownDatabase ? 'public' : name;
  if (!ownDatabase) await withClient(runUrl, (client) => client.query(`create schema ${schema}`));
  const url = new URL(runUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const databaseUrl = url.toString();
  const others: Store[] = [];
  const store = openStore(databaseUrl, { poolSize: 4 });
  return {
    dialect: 'postgres',
    databaseUrl,
    store,
    openAnother() {
      const other = openStore(databaseUrl, { poolSize: 2 });
      others.push(other);
      return other;
    },
    async query<T>(text: string, params: unknown[] = []) {
      return withClient(databaseUrl, async (client) => (await client.query(text, params)).rows as T[]);
    },
    async cleanup() {
      for (const other of others) await other.close();
      await store.close();
      if (ownDatabase) await withClient(TEST_POSTGRES_URL, (client) => client.query(`drop database if exists ${name} with (force)`));
      else await withClient(runUrl, (client) => client.query(`drop schema ${schema} cascade`));
    },
  };
}
