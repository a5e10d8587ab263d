import type { Kysely } from 'kysely';
import type { PageCursor } from '../../domain/cursor.js';
import type { Database } from '../schema.js';
import type { AcceptOutcome, AuditEvent, Invitation, InvitationForToken, InviteOutcome, NewInvitation, NewUser, Role } from '../store.js';
import { insertAudit } from './audit.js';
import { getMember, lockCompany } from './members.js';

/**
 * Invitations: how a person joins a company, with their own account and their consent. The
 * link's token is stored only as its SHA-256; it works once, until it expires or is revoked.
 */

function invitationsOf(db: Kysely<Database>) {
  return db
    .selectFrom('invitations as i')
    .leftJoin('users as u', 'u.id', 'i.invited_by')
    .select(['i.id', 'i.company_id', 'i.email', 'i.role', 'i.invited_by', 'u.email as invited_by_email', 'i.created_at', 'i.expires_at']);
}

function invitationOfRow(row: {
  id: string;
  company_id: string;
  email: string;
  role: string;
  invited_by: string | null;
  invited_by_email: string | null;
  created_at: number;
  expires_at: number;
}): Invitation {
  return {
    id: row.id,
    companyId: row.company_id,
    email: row.email,
    role: row.role as Role,
    invitedBy: row.invited_by !== null && row.invited_by_email !== null ? { userId: row.invited_by, email: row.invited_by_email } : null,
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
  };
}

/**
 * Invites `email`, unless it is a member already; a pending invitation of the same email is
 * revoked (its link stops working), so one link per person is live.
 */
export async function createInvitation(
  db: Kysely<Database>,
  companyId: string,
  invitation: NewInvitation,
  audit: AuditEvent,
): Promise<InviteOutcome> {
  return db.transaction().execute(async (trx) => {
    if (!(await lockCompany(trx, companyId))) return { kind: 'no_company' };
    const member = await trx
      .selectFrom('memberships as m')
      .innerJoin('users as u', 'u.id', 'm.user_id')
      .select('m.user_id')
      .where('m.company_id', '=', companyId)
      .where('u.email', '=', invitation.email)
      .executeTakeFirst();
    if (member) return { kind: 'already_member' };
    await trx
      .updateTable('invitations')
      .set({ revoked_at: invitation.createdAt })
      .where('company_id', '=', companyId)
      .where('email', '=', invitation.email)
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .execute();
    await trx
      .insertInto('invitations')
      .values({
        id: invitation.id,
        company_id: companyId,
        email: invitation.email,
        role: invitation.role,
        token_hash: invitation.tokenHash,
        invited_by: invitation.invitedBy,
        created_at: invitation.createdAt,
        expires_at: invitation.expiresAt,
      })
      .execute();
    await insertAudit(trx, companyId, audit);
    const created = await invitationsOf(trx).where('i.id', '=', invitation.id).executeTakeFirstOrThrow();
    return { kind: 'created', invitation: invitationOfRow(created) };
  });
}

/** The company's pending invitations (not accepted, revoked or expired at `now`), newest first. */
export async function listInvitations(
  db: Kysely<Database>,
  companyId: string,
  query: { limit: number; cursor?: PageCursor },
  now: number,
): Promise<Invitation[]> {
  let select = pending(invitationsOf(db).where('i.company_id', '=', companyId), now);
  const cursor = query.cursor;
  if (cursor) {
    select = select.where((eb) =>
      eb.or([eb('i.created_at', '<', cursor.at), eb.and([eb('i.created_at', '=', cursor.at), eb('i.id', '<', cursor.id)])]),
    );
  }
  const rows = await select.orderBy('i.created_at', 'desc').orderBy('i.id', 'desc').limit(query.limit).execute();
  return rows.map(invitationOfRow);
}

function pending<Q extends ReturnType<typeof invitationsOf>>(select: Q, now: number): Q {
  return select.where('i.accepted_at', 'is', null).where('i.revoked_at', 'is', null).where('i.expires_at', '>', now) as Q;
}

/** Revokes a pending invitation of the company; false when there is none. */
export async function revokeInvitation(
  db: Kysely<Database>,
  companyId: string,
  invitationId: string,
  at: number,
  audit: AuditEvent,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const revoked = await trx
      .updateTable('invitations')
      .set({ revoked_at: at })
      .where('company_id', '=', companyId)
      .where('id', '=', invitationId)
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', at)
      .returning(['email', 'role'])
      .executeTakeFirst();
    if (!revoked) return false;
    await insertAudit(trx, companyId, { ...audit, before: { email: revoked.email, role: revoked.role } });
    return true;
  });
}

/** The pending invitation behind a link's token, with its company's name; the token names the tenant. */
export async function findInvitationByToken(db: Kysely<Database>, tokenHash: string, now: number): Promise<InvitationForToken | undefined> {
  const row = await pending(invitationsOf(db).where('i.token_hash', '=', tokenHash), now)
    .innerJoin('companies as c', 'c.id', 'i.company_id')
    .select('c.name as company_name')
    .executeTakeFirst();
  return row && { ...invitationOfRow(row), companyName: row.company_name };
}

/**
 * Accepts the invitation behind `tokenHash` (pending at `now`) as the signed-in user
 * `{userId}`, whose email must be the invitation's, or as a new account made from
 * `newUser` with the invitation's email. All or nothing: the invitation is used up, the
 * account made, the membership and its audit record written in one transaction.
 */
export async function acceptInvitation(
  db: Kysely<Database>,
  tokenHash: string,
  now: number,
  who: { userId: string } | { newUser: NewUser },
  audit: Omit<AuditEvent, 'targetId' | 'after'>,
): Promise<AcceptOutcome> {
  const rollback = new Error('roll back');
  let outcome: AcceptOutcome = { kind: 'invalid' };
  try {
    await db.transaction().execute(async (trx) => {
      // The company's lock first, as every change of its members takes it (in that order,
      // two transactions never wait for each other's locks).
      const target = await trx.selectFrom('invitations').select('company_id').where('token_hash', '=', tokenHash).executeTakeFirst();
      if (!target || !(await lockCompany(trx, target.company_id))) throw rollback;
      const invitation = await trx
        .updateTable('invitations')
        .set({ accepted_at: now })
        .where('token_hash', '=', tokenHash)
        .where('accepted_at', 'is', null)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', now)
        .returning(['id', 'company_id', 'email', 'role'])
        .executeTakeFirst();
      if (!invitation) throw rollback;
      let user: { id: string; email: string } | undefined;
      if ('newUser' in who) {
        const inserted = await trx
          .insertInto('users')
          .values({ id: who.newUser.id, email: invitation.email, password_hash: who.newUser.passwordHash, created_at: who.newUser.createdAt })
          .onConflict((oc) => oc.column('email').doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0) {
          outcome = { kind: 'email_taken' };
          throw rollback;
        }
        user = { id: who.newUser.id, email: invitation.email };
      } else {
        user = await trx.selectFrom('users').select(['id', 'email']).where('id', '=', who.userId).executeTakeFirst();
        if (!user) throw rollback;
        if (user.email !== invitation.email) {
          outcome = { kind: 'wrong_account', invitationEmail: invitation.email, accountEmail: user.email };
          throw rollback;
        }
      }
      await trx.updateTable('invitations').set({ accepted_by: user.id }).where('id', '=', invitation.id).execute();
      if (!(await getMember(trx, invitation.company_id, user.id))) {
        const role = invitation.role as Role;
        await trx.insertInto('memberships').values({ company_id: invitation.company_id, user_id: user.id, role, created_at: now }).execute();
        await insertAudit(trx, invitation.company_id, {
          ...audit,
          targetId: user.id,
          after: { email: user.email, role, invitationId: invitation.id },
        });
      }
      outcome = { kind: 'joined', userId: user.id, companyId: invitation.company_id };
    });
  } catch (error) {
    if (error !== rollback) throw error;
  }
  return outcome;
}
