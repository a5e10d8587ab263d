import type { Logger } from 'pino';
import { openPostgresStore } from './postgres/open-postgres.js';
import type { QueryObserver } from './query-log.js';
import { openSqliteStore } from './sqlite/open-sqlite.js';
import type { Store } from './store.js';

export interface StoreOptions {
  /** PostgreSQL connections at most (SQLite has one writer and needs no pool). */
  poolSize: number;
  log?: Logger;
  /** Sees every SQL statement the store runs (tests check query plans with it). */
  onQuery?: QueryObserver;
  /**
   * SQLite: intake's writes and the API's heavy reads on worker threads of their own (the
   * server does; see SqliteThread). PostgreSQL needs none: its queries already wait on a socket.
   */
  sqliteThreads?: boolean;
}

/** The store named by INTAKE_DATABASE_URL: `sqlite:PATH` or `postgres://…`. */
export function openStore(databaseUrl: string, options: StoreOptions): Store {
  if (databaseUrl.startsWith('sqlite:')) {
    return openSqliteStore(databaseUrl.slice('sqlite:'.length), {
      onQuery: options.onQuery,
      threads: options.sqliteThreads,
    });
  }
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) return openPostgresStore(databaseUrl, options);
  throw new Error(`unsupported database URL: ${databaseUrl.replace(/\/\/[^@]*@/, '//***@')}`);
}
