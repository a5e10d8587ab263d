import type { AccountStore, NewSession, SessionRecord } from '../account-store.js';
import type { AuditEvent } from '../audit-store.js';
import * as accounts from '../queries/accounts.js';
import * as sessions from '../queries/sessions.js';
import { KyselyStoreBase } from './store-base.js';

/** Accounts, sessions, passwords and second factors on Kysely (the AccountStore part of KyselyStore). */
export class KyselyAccountStore extends KyselyStoreBase implements AccountStore {
  findUserByEmail(email: string) {
    return accounts.findUserByEmail(this.db, email);
  }

  findUserById(userId: string) {
    return accounts.findUserById(this.db, userId);
  }

  listMembershipsOfUser(userId: string) {
    return sessions.listMembershipsOfUser(this.db, userId);
  }

  createSession(session: NewSession): Promise<void> {
    return sessions.createSession(this.db, session);
  }

  findSession(idHash: string, now: number): Promise<SessionRecord | undefined> {
    return sessions.findSession(this.db, idHash, now);
  }

  async touchSession(idHash: string, at: number): Promise<void> {
    await this.db.updateTable('sessions').set({ last_seen_at: at }).where('id_hash', '=', idHash).execute();
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.db.deleteFrom('sessions').where('id_hash', '=', idHash).execute();
  }

  async deleteSessionsOfUser(userId: string): Promise<number> {
    const result = await this.db.deleteFrom('sessions').where('user_id', '=', userId).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  setPassword(userId: string, passwordHash: string, at: number, keepSession: string | null, audit?: AuditEvent) {
    return accounts.setPassword(this.db, userId, passwordHash, at, keepSession, audit);
  }

  createPasswordReset(userId: string, tokenHash: string, createdAt: number, expiresAt: number) {
    return accounts.createPasswordReset(this.db, userId, tokenHash, createdAt, expiresAt);
  }

  findUsablePasswordReset(tokenHash: string, now: number) {
    return accounts.findUsablePasswordReset(this.db, tokenHash, now);
  }

  resetPassword(tokenHash: string, now: number, passwordHash: string, audit?: AuditEvent) {
    return accounts.resetPassword(this.db, tokenHash, now, passwordHash, audit);
  }

  setPendingTwoFactor(userId: string, sealedSecret: string) {
    return accounts.setPendingTwoFactor(this.db, userId, sealedSecret);
  }

  enableTwoFactor(
    userId: string,
    change: { sealedSecret: string; step: number; recoveryCodeHashes: string[]; at: number; keepSession: string | null },
    audit?: AuditEvent,
  ) {
    return accounts.enableTwoFactor(this.db, userId, change, audit);
  }

  disableTwoFactor(userId: string, audit?: AuditEvent) {
    return accounts.disableTwoFactor(this.db, userId, audit);
  }

  replaceRecoveryCodes(userId: string, codeHashes: string[], at: number, audit?: AuditEvent) {
    return accounts.replaceRecoveryCodes(this.db, userId, codeHashes, at, audit);
  }

  useTotpStep(userId: string, step: number) {
    return accounts.useTotpStep(this.db, userId, step);
  }

  useRecoveryCode(userId: string, codeHash: string, at: number) {
    return accounts.useRecoveryCode(this.db, userId, codeHash, at);
  }

  countRecoveryCodes(userId: string) {
    return accounts.countRecoveryCodes(this.db, userId);
  }
}
