import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { Role, SessionRecord } from '../store.js';

export async function findUserByEmail(db: Kysely<Database>, email: string) {
  const row = await db.selectFrom('users').select(['id', 'email', 'password_hash']).where('email', '=', email).executeTakeFirst();
  return row && { id: row.id, email: row.email, passwordHash: row.password_hash };
}

export async function listMembershipsOfUser(db: Kysely<Database>, userId: string) {
  const rows = await db
    .selectFrom('memberships as m')
    .innerJoin('companies as c', 'c.id', 'm.company_id')
    .select(['m.company_id', 'c.name', 'm.role'])
    .where('m.user_id', '=', userId)
    .orderBy('c.name')
    .execute();
  return rows.map((row) => ({ companyId: row.company_id, companyName: row.name, role: row.role as Role }));
}

export async function createSession(db: Kysely<Database>, session: SessionRecord): Promise<void> {
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
    .selectFrom('sessions')
    .selectAll()
    .where('id_hash', '=', idHash)
    .where('expires_at', '>', now)
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
  };
}
