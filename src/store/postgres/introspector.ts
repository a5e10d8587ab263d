import {
  PostgresDialect,
  sql,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type Kysely,
  type SchemaMetadata,
  type TableMetadata,
} from 'kysely';

/**
 * Kysely's Migrator asks which tables exist through the dialect's introspector. The stock
 * one reads every column of every table in every schema and looks each table up by name
 * (pg_get_serial_sequence), so a table dropped meanwhile by anyone (another node's
 * retention dropping a day partition, another schema's cleanup) fails the migration with
 * "relation does not exist". The Migrator needs only names: read them from the catalog,
 * in the current schema, leaving partitions out.
 */
class CurrentSchemaIntrospector implements DatabaseIntrospector {
  constructor(private readonly db: Kysely<unknown>) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    return (await sql<SchemaMetadata>`select nspname as name from pg_namespace`.execute(this.db)).rows;
  }

  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ schema: string; name: string; kind: string }>`
      select n.nspname as schema, c.relname as name, c.relkind as kind
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = current_schema() and c.relkind in ('r', 'p', 'v') and not c.relispartition`.execute(this.db);
    return rows.map((row) => ({ schema: row.schema, name: row.name, isView: row.kind === 'v', columns: [] }));
  }

  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}

/** PostgreSQL as Kysely speaks it, with the introspector above. */
export class IntakePostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new CurrentSchemaIntrospector(db);
  }
}
