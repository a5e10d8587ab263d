import type { CreateTableBuilder, Kysely, Migration, MigrationProvider } from 'kysely';
import * as initial from './0001-initial.js';

/** What differs between dialects in a table definition; each store supplies its own. */
export interface DialectTypes {
  binary: 'blob' | 'bytea';
  addSerialPrimaryKey<T extends string>(table: CreateTableBuilder<T>, column: string): CreateTableBuilder<T>;
}

type DialectMigration = { up(db: Kysely<unknown>, types: DialectTypes): Promise<void> };

/** Every migration, in order. Names are their version; never rename or edit a landed one. */
const MIGRATIONS: Record<string, DialectMigration> = {
  '0001-initial': initial,
};

/** The migrations for Kysely's Migrator, bound to one dialect's types. */
export class IntakeMigrations implements MigrationProvider {
  constructor(private readonly types: DialectTypes) {}

  async getMigrations(): Promise<Record<string, Migration>> {
    const bound: Record<string, Migration> = {};
    for (const [name, migration] of Object.entries(MIGRATIONS)) {
      bound[name] = { up: (db) => migration.up(db, this.types) };
    }
    return bound;
  }
}
