import type { Store } from './store.js';
import { openSqliteStore } from './sqlite/open-sqlite.js';

/** The store named by INTAKE_DATABASE_URL: `sqlite:PATH` (PostgreSQL arrives with its issue). */
export function openStore(databaseUrl: string): Store {
  if (databaseUrl.startsWith('sqlite:')) return openSqliteStore(databaseUrl.slice('sqlite:'.length));
  throw new Error(`unsupported database URL: ${databaseUrl.replace(/\/\/[^@]*@/, '//***@')}`);
}
