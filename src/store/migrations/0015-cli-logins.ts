import type { Kysely } from 'kysely';

/**
 * Command-line sign-ins (`intake login`, issue 37): a terminal asks, a signed-in person
 * approves or denies it in the panel, the terminal collects its key. In the database, not in
 * a node's memory: the approval and the poll may reach different nodes.
 *
 * Only the SHA-256 of the terminal's device code is kept, never the key it receives (the key
 * is made when the approved login is collected, in the transaction that marks it issued).
 * Rows live ten minutes; the expired ones are deleted as new ones are created.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('cli_logins')
    .addColumn('device_code_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_code', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('requested_ip', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('last_polled_at', 'bigint')
    // pending, approved, denied, issued.
    .addColumn('state', 'text', (c) => c.notNull())
    // Set by the approval: the company the key is for, and who chose it.
    .addColumn('company_id', 'text', (c) => c.references('companies.id').onDelete('cascade'))
    .addColumn('decided_by', 'text', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('decided_ip', 'text')
    .addColumn('decided_at', 'bigint')
    .addColumn('key_id', 'text')
    .execute();
  // The sweep of expired rows, and the count of those waiting.
  await db.schema.createIndex('cli_logins_expiry').on('cli_logins').columns(['expires_at']).execute();
}
