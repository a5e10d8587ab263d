import type { Selectable } from 'kysely';
import type { AuditEvent } from '../audit-store.js';
import type { CliLogin, CliLoginDecision, CliLoginState, CliLoginStore, NewCliLogin } from '../cli-login-store.js';
import type { NewApiKey } from '../key-store.js';
import { insertAudit } from '../queries/audit.js';
import type { CliLoginsTable } from '../schema.js';
import { insertApiKey } from './key-store.js';
import { KyselyStoreBase } from './store-base.js';

/** Command-line sign-ins on Kysely (the CliLoginStore part of KyselyStore). */
export class KyselyCliLoginStore extends KyselyStoreBase implements CliLoginStore {
  async createCliLogin(login: NewCliLogin, maxPending: number) {
    return this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('cli_logins').where('expires_at', '<=', login.createdAt).execute();
      const waiting = await trx
        .selectFrom('cli_logins')
        .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.min('expires_at').as('first_expiry')])
        .where('state', '=', 'pending')
        .executeTakeFirstOrThrow();
      if (Number(waiting.count) >= maxPending) return { outcome: 'full' as const, retryAt: Number(waiting.first_expiry) };
      const inserted = await trx
        .insertInto('cli_logins')
        .values({
          device_code_hash: login.deviceCodeHash,
          user_code: login.userCode,
          name: login.name,
          requested_ip: login.requestedIp,
          created_at: login.createdAt,
          expires_at: login.expiresAt,
          last_polled_at: null,
          state: 'pending',
          company_id: null,
          decided_by: null,
          decided_ip: null,
          decided_at: null,
          key_id: null,
        })
        .onConflict((conflict) => conflict.column('user_code').doNothing())
        .returning('user_code')
        .executeTakeFirst();
      return { outcome: inserted === undefined ? ('taken' as const) : ('created' as const) };
    });
  }

  async findCliLoginByUserCode(userCode: string, now: number): Promise<CliLogin | undefined> {
    const row = await this.live(now).where('user_code', '=', userCode).executeTakeFirst();
    return row && loginOfRow(row);
  }

  async pollCliLogin(deviceCodeHash: string, now: number, minGapMs: number) {
    // Decided by the update itself, so two polls at once on two nodes are one poll and one too soon.
    const recorded = await this.db
      .updateTable('cli_logins')
      .set({ last_polled_at: now })
      .where('device_code_hash', '=', deviceCodeHash)
      .where('expires_at', '>', now)
      .where((eb) => eb.or([eb('last_polled_at', 'is', null), eb('last_polled_at', '<=', now - minGapMs)]))
      .executeTakeFirst();
    const row = await this.live(now).where('device_code_hash', '=', deviceCodeHash).executeTakeFirst();
    return row && { login: loginOfRow(row), tooSoon: recorded.numUpdatedRows === 0n };
  }

  approveCliLogin(companyId: string, userCode: string, decision: CliLoginDecision): Promise<boolean> {
    return this.decide(userCode, 'approved', companyId, decision);
  }

  denyCliLogin(userCode: string, decision: CliLoginDecision): Promise<boolean> {
    return this.decide(userCode, 'denied', null, decision);
  }

  async issueCliLoginKey(companyId: string, deviceCodeHash: string, key: NewApiKey, audit: AuditEvent, now: number): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      // First, and conditional: a second poll waits here for the first's commit, then finds it issued.
      const marked = await trx
        .updateTable('cli_logins')
        .set({ state: 'issued', key_id: key.id })
        .where('device_code_hash', '=', deviceCodeHash)
        .where('company_id', '=', companyId)
        .where('state', '=', 'approved')
        .where('expires_at', '>', now)
        .executeTakeFirst();
      if (marked.numUpdatedRows === 0n) return false;
      await insertApiKey(trx, companyId, key);
      await insertAudit(trx, companyId, audit);
      return true;
    });
  }

  private live(now: number) {
    return this.db.selectFrom('cli_logins').selectAll().where('expires_at', '>', now);
  }

  private async decide(userCode: string, state: CliLoginState, companyId: string | null, decision: CliLoginDecision): Promise<boolean> {
    const result = await this.db
      .updateTable('cli_logins')
      .set({ state, company_id: companyId, decided_by: decision.userId, decided_ip: decision.ip, decided_at: decision.at })
      .where('user_code', '=', userCode)
      .where('state', '=', 'pending')
      .where('expires_at', '>', decision.at)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }
}

function loginOfRow(row: Selectable<CliLoginsTable>): CliLogin {
  return {
    deviceCodeHash: row.device_code_hash,
    userCode: row.user_code,
    name: row.name,
    requestedIp: row.requested_ip,
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    lastPolledAt: nullableNumber(row.last_polled_at),
    state: row.state as CliLoginState,
    companyId: row.company_id,
    decidedBy: row.decided_by,
    decidedIp: row.decided_ip,
    decidedAt: nullableNumber(row.decided_at),
    keyId: row.key_id,
  };
}

function nullableNumber(value: number | null): number | null {
  return value === null ? null : Number(value);
}
