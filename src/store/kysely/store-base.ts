import type { Kysely } from 'kysely';
import type { GroupRowWriter } from '../group-rows.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database } from '../schema.js';

/**
 * What every part of KyselyStore (one class per aggregate in this directory) works with: the
 * connection, what differs by dialect (column types), and the writer of a group's rows.
 */
export abstract class KyselyStoreBase {
  constructor(
    readonly dialect: 'sqlite' | 'postgres',
    protected readonly db: Kysely<Database>,
    protected readonly types: DialectTypes,
    protected readonly groupRows: GroupRowWriter,
  ) {}
}
