import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { NewSession, Role, SessionRecord, UserMembership } from '../store.js';

export async function listMembershipsOfUser(db: Kysely<Database>, userId: string): Promise<UserMembership[]> {
  const rows = await db
    .selectFrom('memberships as m')
    .innerJoin('companies as c', 'c.id', 'm.company_id')
    .select(['m.company_id', 'c.name', 'm.role', 'c.require_two_factor'])
    .where('m.user_id', '=', userId)
    .orderBy('c.name')
    .execute();
  return rows.map((row) => ({
    companyId: row.company_id,
    companyName: row.name,
    role: row.role as Role,
    requiresTwoFactor: row.require_two_factor === 1,
  }));
}

export async function createSession(db: Kysely<Database>, session: NewSession): Promise<void> {
  await db
    .insertInto('sessions')
    .values({
      id_hash: session.idHash,
      user_id: session.userId,
      csrf_token: session.csrfToken,
      created_at: session.createdAt,
      last_seen_at: session.lastSeenAt,
      expires_at: session.expiresAt,
      ip: session.ip,
      user_agent: session.userAgent,
    })
    .execute();
}

export async function findSession(db: Kysely<Database>, idHash: string, now: number): Promise<SessionRecord | undefined> {
  const row = await db
    .selectFrom('sessions as s')
    .innerJoin('users as u', 'u.id', 's.user_id')
    .selectAll('s')
    .select('u.totp_secret')
    .where('s.id_hash', '=', idHash)
    .where('s.expires_at', '>', now)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    idHash: row.id_hash,
    userId: row.user_id,
    csrfToken: row.csrf_token,
    createdAt: Number(row.created_at),
    lastSeenAt: Number(row.last_seen_at),
    expiresAt: Number(row.expires_at),
    ip: row.ip,
    userAgent: row.user_agent,
    userHasTwoFactor: row.totp_secret !== null,
  };
}
