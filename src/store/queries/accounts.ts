import type { Kysely, Selectable, Transaction } from 'kysely';
import type { Database, UsersTable } from '../schema.js';
import type { AuditEvent, PasswordReset, UserAccount } from '../store.js';
import { insertAuditOfUser } from './audit.js';

/**
 * A person's account: its password, its two-factor sign-in, its reset links. Accounts are
 * not a company's (a person may belong to several), so nothing here takes a company.
 * Every change that must end sessions ends them in its own transaction.
 */

const USER_COLUMNS = ['id', 'email', 'password_hash', 'created_at', 'totp_secret', 'totp_pending_secret', 'totp_last_step'] as const;

function accountOfRow(row: Pick<Selectable<UsersTable>, (typeof USER_COLUMNS)[number]>): UserAccount {
  return {
    id: row.id,
    email: row.email,
    passwordHash: row.password_hash,
    createdAt: Number(row.created_at),
    totpSecret: row.totp_secret,
    totpPendingSecret: row.totp_pending_secret,
    totpLastStep: row.totp_last_step === null ? null : Number(row.totp_last_step),
  };
}

export async function findUserByEmail(db: Kysely<Database>, email: string): Promise<UserAccount | undefined> {
  const row = await db.selectFrom('users').select(USER_COLUMNS).where('email', '=', email).executeTakeFirst();
  return row && accountOfRow(row);
}

export async function findUserById(db: Kysely<Database>, userId: string): Promise<UserAccount | undefined> {
  const row = await db.selectFrom('users').select(USER_COLUMNS).where('id', '=', userId).executeTakeFirst();
  return row && accountOfRow(row);
}

/** Ends the user's sessions, all of them or all but `keep` (the one making the change). */
async function endSessions(trx: Transaction<Database>, userId: string, keep: string | null): Promise<void> {
  let deletion = trx.deleteFrom('sessions').where('user_id', '=', userId);
  if (keep !== null) deletion = deletion.where('id_hash', '!=', keep);
  await deletion.execute();
}

/** Sets a new password hash: every other session ends and every reset link of the user is used up. */
export async function setPassword(
  db: Kysely<Database>,
  userId: string,
  passwordHash: string,
  at: number,
  keepSession: string | null,
  audit?: AuditEvent,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ password_hash: passwordHash, password_changed_at: at }).where('id', '=', userId).execute();
    await trx.updateTable('password_resets').set({ used_at: at }).where('user_id', '=', userId).where('used_at', 'is', null).execute();
    await endSessions(trx, userId, keepSession);
    await insertAuditOfUser(trx, userId, audit);
  });
}

export async function createPasswordReset(
  db: Kysely<Database>,
  userId: string,
  tokenHash: string,
  createdAt: number,
  expiresAt: number,
): Promise<void> {
  await db.insertInto('password_resets').values({ token_hash: tokenHash, user_id: userId, created_at: createdAt, expires_at: expiresAt }).execute();
}

/** The reset link with this hash if it can be used at `now`, with its account; reading it uses nothing up. */
export async function findUsablePasswordReset(db: Kysely<Database>, tokenHash: string, now: number): Promise<PasswordReset | undefined> {
  const row = await db
    .selectFrom('password_resets as r')
    .innerJoin('users as u', 'u.id', 'r.user_id')
    .select(['r.user_id', 'u.email', 'r.expires_at'])
    .where('r.token_hash', '=', tokenHash)
    .where('r.used_at', 'is', null)
    .where('r.expires_at', '>', now)
    .executeTakeFirst();
  return row && { userId: row.user_id, email: row.email, expiresAt: Number(row.expires_at) };
}

/**
 * Uses up a reset link (unused, unexpired) and sets the password: every session of the user
 * ends, every other link too. The user's id, or undefined (nothing changed).
 */
export async function resetPassword(
  db: Kysely<Database>,
  tokenHash: string,
  now: number,
  passwordHash: string,
  audit?: AuditEvent,
): Promise<string | undefined> {
  return db.transaction().execute(async (trx) => {
    // The update is the claim: two tabs submitting one link cannot both reset.
    const claimed = await trx
      .updateTable('password_resets')
      .set({ used_at: now })
      .where('token_hash', '=', tokenHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .returning('user_id')
      .executeTakeFirst();
    if (!claimed) return undefined;
    await trx.updateTable('users').set({ password_hash: passwordHash, password_changed_at: now }).where('id', '=', claimed.user_id).execute();
    await trx.updateTable('password_resets').set({ used_at: now }).where('user_id', '=', claimed.user_id).where('used_at', 'is', null).execute();
    await endSessions(trx, claimed.user_id, null);
    await insertAuditOfUser(trx, claimed.user_id, audit);
    return claimed.user_id;
  });
}

export async function setPendingTwoFactor(db: Kysely<Database>, userId: string, sealedSecret: string): Promise<void> {
  await db.updateTable('users').set({ totp_pending_secret: sealedSecret }).where('id', '=', userId).execute();
}

/**
 * Turns two-factor sign-in on with the pending secret (if it is still `sealedSecret`: a
 * second enrolment started meanwhile wins), the step of the code that proved it, and new
 * recovery codes; every other session ends. False when the pending secret changed.
 */
export async function enableTwoFactor(
  db: Kysely<Database>,
  userId: string,
  change: { sealedSecret: string; step: number; recoveryCodeHashes: string[]; at: number; keepSession: string | null },
  audit?: AuditEvent,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const updated = await trx
      .updateTable('users')
      .set({ totp_secret: change.sealedSecret, totp_pending_secret: null, totp_enabled_at: change.at, totp_last_step: change.step })
      .where('id', '=', userId)
      .where('totp_pending_secret', '=', change.sealedSecret)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) !== 1) return false;
    await insertRecoveryCodes(trx, userId, change.recoveryCodeHashes, change.at);
    await endSessions(trx, userId, change.keepSession);
    await insertAuditOfUser(trx, userId, audit);
    return true;
  });
}

export async function disableTwoFactor(db: Kysely<Database>, userId: string, audit?: AuditEvent): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('users')
      .set({ totp_secret: null, totp_pending_secret: null, totp_enabled_at: null, totp_last_step: null })
      .where('id', '=', userId)
      .execute();
    await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
    await insertAuditOfUser(trx, userId, audit);
  });
}

/** Replaces the user's recovery codes: the old ones stop working. */
export async function replaceRecoveryCodes(
  db: Kysely<Database>,
  userId: string,
  hashes: string[],
  at: number,
  audit?: AuditEvent,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await insertRecoveryCodes(trx, userId, hashes, at);
    await insertAuditOfUser(trx, userId, audit);
  });
}

async function insertRecoveryCodes(trx: Transaction<Database>, userId: string, hashes: string[], at: number): Promise<void> {
  await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
  if (hashes.length === 0) return;
  await trx
    .insertInto('recovery_codes')
    .values(hashes.map((code_hash) => ({ user_id: userId, code_hash, created_at: at })))
    .execute();
}

/**
 * Records that a TOTP code of `step` was used, if no code of this step or a later one was:
 * one conditional update, so two nodes given the same code cannot both accept it.
 */
export async function useTotpStep(db: Kysely<Database>, userId: string, step: number): Promise<boolean> {
  const updated = await db
    .updateTable('users')
    .set({ totp_last_step: step })
    .where('id', '=', userId)
    .where('totp_secret', 'is not', null)
    .where((eb) => eb.or([eb('totp_last_step', 'is', null), eb('totp_last_step', '<', step)]))
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) === 1;
}

/** Uses up one unused recovery code of the user; false when there is no such code. */
export async function useRecoveryCode(db: Kysely<Database>, userId: string, codeHash: string, at: number): Promise<boolean> {
  const updated = await db
    .updateTable('recovery_codes')
    .set({ used_at: at })
    .where('user_id', '=', userId)
    .where('code_hash', '=', codeHash)
    .where('used_at', 'is', null)
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) === 1;
}

export async function countRecoveryCodes(db: Kysely<Database>, userId: string): Promise<number> {
  const row = await db
    .selectFrom('recovery_codes')
    .select((eb) => eb.fn.countAll().as('count'))
    .where('user_id', '=', userId)
    .where('used_at', 'is', null)
    .executeTakeFirst();
  return Number(row?.count ?? 0);
}
