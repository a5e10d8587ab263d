import type { PageCursor } from '../../domain/cursor.js';
import type { Role } from '../../domain/permissions.js';
import { AppError } from '../../errors.js';
import type { NewUser } from '../account-store.js';
import type { AuditEvent } from '../audit-store.js';
import type {
  AcceptOutcome,
  Company,
  CompanyChanges,
  CompanyStore,
  InviteOutcome,
  Member,
  MemberChange,
  NewCompany,
  NewInvitation,
} from '../company-store.js';
import { insertAudit } from '../queries/audit.js';
import * as invitations from '../queries/invitations.js';
import * as members from '../queries/members.js';
import { KyselyStoreBase } from './store-base.js';

/** Companies, members, invitations and first-run setup on Kysely (the CompanyStore part of KyselyStore). */
export class KyselyCompanyStore extends KyselyStoreBase implements CompanyStore {
  async createCompany(company: NewCompany, audit?: AuditEvent): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('companies')
        .values({
          id: company.id,
          name: company.name,
          retention_days: company.retentionDays,
          created_at: company.createdAt,
        })
        .execute();
      await insertAudit(trx, company.id, audit);
    });
  }

  async getCompany(companyId: string): Promise<Company | undefined> {
    const row = await this.db.selectFrom('companies').selectAll().where('id', '=', companyId).executeTakeFirst();
    return row && members.companyOfRow(row);
  }

  async addUser(
    companyId: string,
    user: NewUser,
    role: Role,
    audit?: AuditEvent,
  ): Promise<{ id: string; email: string; created: boolean }> {
    return this.db.transaction().execute(async (trx) => {
      await members.lockCompany(trx, companyId);
      const existing = await trx
        .selectFrom('users')
        .select(['id', 'email'])
        .where('email', '=', user.email)
        .executeTakeFirst();
      if (!existing) {
        await trx
          .insertInto('users')
          .values({ id: user.id, email: user.email, password_hash: user.passwordHash, created_at: user.createdAt })
          .execute();
      }
      const userId = existing?.id ?? user.id;
      // Already a member: a role change, under the same "one owner stays" rule as the API's.
      const change = await members.changeMember(trx, companyId, userId, role);
      if (change.kind === 'last_owner') {
        throw new AppError('conflict', 'A company must keep at least one owner; make someone else owner first.');
      }
      if (change.kind === 'not_found') {
        await trx.insertInto('memberships').values({ company_id: companyId, user_id: userId, role, created_at: user.createdAt }).execute();
      }
      await insertAudit(trx, companyId, audit && { ...audit, targetId: userId });
      return { id: userId, email: existing?.email ?? user.email, created: !existing };
    });
  }

  async countUsers(): Promise<number> {
    const row = await this.db
      .selectFrom('users')
      .select((eb) => eb.fn.countAll().as('count'))
      .executeTakeFirst();
    return Number(row?.count ?? 0);
  }

  async createSetupToken(tokenHash: string, createdAt: number, expiresAt: number): Promise<void> {
    await this.db
      .insertInto('setup_tokens')
      .values({ token_hash: tokenHash, created_at: createdAt, expires_at: expiresAt, used_at: null })
      .execute();
  }

  async isSetupTokenUsable(tokenHash: string, now: number): Promise<boolean> {
    const row = await this.db
      .selectFrom('setup_tokens')
      .select('token_hash')
      .where('token_hash', '=', tokenHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return row !== undefined && (await this.countUsers()) === 0;
  }

  async completeSetup(
    tokenHash: string,
    now: number,
    company: NewCompany,
    owner: NewUser,
    audit: { company: AuditEvent; owner: AuditEvent },
  ): Promise<boolean> {
    const rollback = new Error('roll back');
    try {
      await this.db.transaction().execute(async (trx) => {
        // One use ends every link: the claim takes every unused link at once, and counts
        // only if this one is among them. Two tabs (or two links) cannot both set up.
        const claimed = await trx
          .updateTable('setup_tokens')
          .set({ used_at: now })
          .where('used_at', 'is', null)
          .returning(['token_hash', 'expires_at'])
          .execute();
        const usable = claimed.some((t) => t.token_hash === tokenHash && Number(t.expires_at) > now);
        // Setup makes the first account: once anyone has one, no link sets up anything.
        const users = await trx.selectFrom('users').select('id').limit(1).execute();
        if (!usable || users.length > 0) throw rollback;
        await trx
          .insertInto('companies')
          .values({ id: company.id, name: company.name, retention_days: company.retentionDays, created_at: company.createdAt })
          .execute();
        await trx
          .insertInto('users')
          .values({ id: owner.id, email: owner.email, password_hash: owner.passwordHash, created_at: owner.createdAt })
          .execute();
        await trx.insertInto('memberships').values({ company_id: company.id, user_id: owner.id, role: 'owner', created_at: now }).execute();
        await insertAudit(trx, company.id, audit.company);
        await insertAudit(trx, company.id, audit.owner);
      });
      return true;
    } catch (error) {
      if (error === rollback) return false;
      throw error;
    }
  }

  // --- invitations ---
  createInvitation(companyId: string, invitation: NewInvitation, audit: AuditEvent): Promise<InviteOutcome> {
    return invitations.createInvitation(this.db, companyId, invitation, audit);
  }

  listInvitations(companyId: string, query: { limit: number; cursor?: PageCursor }, now: number) {
    return invitations.listInvitations(this.db, companyId, query, now);
  }

  revokeInvitation(companyId: string, invitationId: string, at: number, audit: AuditEvent) {
    return invitations.revokeInvitation(this.db, companyId, invitationId, at, audit);
  }

  findInvitationByToken(tokenHash: string, now: number) {
    return invitations.findInvitationByToken(this.db, tokenHash, now);
  }

  acceptInvitation(
    tokenHash: string,
    now: number,
    who: { userId: string } | { newUser: NewUser },
    audit: Omit<AuditEvent, 'targetId' | 'after'>,
  ): Promise<AcceptOutcome> {
    return invitations.acceptInvitation(this.db, tokenHash, now, who, audit);
  }

  // --- management API: members and company settings ---
  listMembers(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Member[]> {
    return members.listMembers(this.db, companyId, query);
  }

  getMember(companyId: string, userId: string): Promise<Member | undefined> {
    return members.getMember(this.db, companyId, userId);
  }

  countOwners(companyId: string): Promise<number> {
    return members.ownerCount(this.db, companyId);
  }

  async changeMember(companyId: string, userId: string, role: Role | null, audit: AuditEvent): Promise<MemberChange> {
    return this.db.transaction().execute(async (trx) => {
      if (!(await members.lockCompany(trx, companyId))) return { kind: 'not_found' };
      const change = await members.changeMember(trx, companyId, userId, role);
      if (change.kind === 'done') {
        const { before, after } = change;
        await insertAudit(trx, companyId, {
          ...audit,
          before: { email: before.email, role: before.role },
          ...(after && { after: { email: after.email, role: after.role } }),
        });
      }
      return change;
    });
  }

  async updateCompany(companyId: string, changes: CompanyChanges, audit: AuditEvent) {
    return this.db.transaction().execute(async (trx) => {
      if (!(await members.lockCompany(trx, companyId))) return undefined;
      const result = await members.updateCompany(trx, companyId, changes);
      if (result) await insertAudit(trx, companyId, { ...audit, before: result.before, after: result.after });
      return result;
    });
  }
}
