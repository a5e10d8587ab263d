import type { Kysely, Selectable } from 'kysely';
import type { PageCursor } from '../../domain/cursor.js';
import type { CompaniesTable, Database } from '../schema.js';
import type { Company, CompanyChanges, Member, MemberChange, Role } from '../store.js';

/**
 * Members and company settings. Every change first takes the company's lock, so two
 * owners demoting each other at once cannot both pass the "one owner stays" check.
 */

/**
 * Locks the company row until the transaction ends (a row lock on PostgreSQL, the write
 * lock on SQLite, also against another process); false when there is no such company.
 */
export async function lockCompany(trx: Kysely<Database>, companyId: string): Promise<boolean> {
  const result = await trx
    .updateTable('companies')
    .set((eb) => ({ name: eb.ref('name') }))
    .where('id', '=', companyId)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

function membersOf(db: Kysely<Database>, companyId: string) {
  return db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(['m.user_id', 'u.email', 'm.role', 'm.created_at'])
    .where('m.company_id', '=', companyId);
}

function memberOfRow(row: { user_id: string; email: string; role: string; created_at: number }): Member {
  return { userId: row.user_id, email: row.email, role: row.role as Role, addedAt: Number(row.created_at) };
}

/** The company's members, newest first. */
export async function listMembers(
  db: Kysely<Database>,
  companyId: string,
  query: { limit: number; cursor?: PageCursor },
): Promise<Member[]> {
  let select = membersOf(db, companyId);
  const cursor = query.cursor;
  if (cursor) {
    select = select.where((eb) =>
      eb.or([eb('m.created_at', '<', cursor.at), eb.and([eb('m.created_at', '=', cursor.at), eb('m.user_id', '<', cursor.id)])]),
    );
  }
  const rows = await select.orderBy('m.created_at', 'desc').orderBy('m.user_id', 'desc').limit(query.limit).execute();
  return rows.map(memberOfRow);
}

export async function getMember(db: Kysely<Database>, companyId: string, userId: string): Promise<Member | undefined> {
  const row = await membersOf(db, companyId).where('m.user_id', '=', userId).executeTakeFirst();
  return row && memberOfRow(row);
}

/** The company's owners: at least one, always (changeMember keeps it so). */
export async function ownerCount(trx: Kysely<Database>, companyId: string): Promise<number> {
  const row = await trx
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll().as('count'))
    .where('company_id', '=', companyId)
    .where('role', '=', 'owner')
    .executeTakeFirst();
  return Number(row?.count ?? 0);
}

/** Sets the member's role, or removes the member (role null); call under lockCompany. */
export async function changeMember(
  trx: Kysely<Database>,
  companyId: string,
  userId: string,
  role: Role | null,
): Promise<MemberChange> {
  const before = await getMember(trx, companyId, userId);
  if (!before) return { kind: 'not_found' };
  if (before.role === 'owner' && role !== 'owner' && (await ownerCount(trx, companyId)) <= 1) return { kind: 'last_owner' };
  if (role === null) {
    await trx.deleteFrom('memberships').where('company_id', '=', companyId).where('user_id', '=', userId).execute();
    return { kind: 'done', before };
  }
  await trx.updateTable('memberships').set({ role }).where('company_id', '=', companyId).where('user_id', '=', userId).execute();
  return { kind: 'done', before, after: { ...before, role } };
}

/** Applies `changes` to the company; its state before and after, or undefined. Call under lockCompany. */
export async function updateCompany(
  trx: Kysely<Database>,
  companyId: string,
  changes: CompanyChanges,
): Promise<{ before: Company; after: Company } | undefined> {
  const row = await trx.selectFrom('companies').selectAll().where('id', '=', companyId).executeTakeFirst();
  if (!row) return undefined;
  const before = companyOfRow(row);
  const after: Company = { ...before, ...changes };
  await trx
    .updateTable('companies')
    .set({ name: after.name, retention_days: after.retentionDays, require_two_factor: after.requireTwoFactor ? 1 : 0 })
    .where('id', '=', companyId)
    .execute();
  return { before, after };
}

export function companyOfRow(row: Selectable<CompaniesTable>): Company {
  return {
    id: row.id,
    name: row.name,
    retentionDays: row.retention_days,
    requireTwoFactor: row.require_two_factor === 1,
    createdAt: Number(row.created_at),
  };
}
