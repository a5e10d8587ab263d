import type { Transaction } from 'kysely';
import type { Scope } from '../../domain/api-key.js';
import type { PageCursor } from '../../domain/cursor.js';
import { AppError } from '../../errors.js';
import type { AuditEvent } from '../audit-store.js';
import type { ApiKeyRecord, KeyGrant, KeyStore, KeyUsage, NewApiKey } from '../key-store.js';
import { insertAudit } from '../queries/audit.js';
import * as keys from '../queries/keys.js';
import type { Database } from '../schema.js';
import { KyselyStoreBase } from './store-base.js';

/** API keys and what authentication asks of them, on Kysely (the KeyStore part of KyselyStore). */
export class KyselyKeyStore extends KyselyStoreBase implements KeyStore {
  subscribeAuthChanges(_listener: () => void): () => void {
    return () => {};
  }

  async findKeyByHash(keyHash: string): Promise<KeyGrant | undefined> {
    const row = await this.db
      .selectFrom('api_keys as k')
      .leftJoin('integrations as i', 'i.id', 'k.integration_id')
      .select(['k.id', 'k.key_hash', 'k.company_id', 'k.integration_id', 'k.scopes', 'k.expires_at'])
      .where('k.key_hash', '=', keyHash)
      .where('k.revoked_at', 'is', null)
      .where((eb) => eb.or([eb('k.integration_id', 'is', null), eb('i.deleted_at', 'is', null)]))
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      keyId: row.id,
      keyHash: row.key_hash,
      companyId: row.company_id,
      integrationId: row.integration_id,
      scopes: parseScopes(row.scopes),
      expiresAt: nullableNumber(row.expires_at),
    };
  }

  async latestAuthChange(): Promise<number> {
    const row = await this.db
      .selectFrom('auth_changes')
      .select((eb) => eb.fn.max('id').as('latest'))
      .executeTakeFirst();
    return Number(row?.latest ?? 0);
  }

  async recordKeyUsage(usages: KeyUsage[]): Promise<void> {
    if (usages.length === 0) return;
    // Sorted, so two nodes writing the same keys lock them in the same order.
    const sorted = [...usages].sort((a, b) => (a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0));
    await this.db.transaction().execute(async (trx) => {
      for (const usage of sorted) {
        await trx
          .updateTable('api_keys')
          .set({ last_used_at: usage.at, last_used_ip: usage.ip })
          .where('company_id', '=', usage.companyId)
          .where('id', '=', usage.keyId)
          .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', usage.at)]))
          .execute();
      }
    });
  }

  async createApiKey(companyId: string, key: NewApiKey, audit?: AuditEvent): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await insertApiKey(trx, companyId, key);
      await insertAudit(trx, companyId, audit);
    });
  }

  async rotateIntegrationKey(
    companyId: string,
    integrationId: string,
    newKey: NewApiKey,
    previousExpiresAt: number,
    audit?: AuditEvent,
  ): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('api_keys')
        .set({ expires_at: previousExpiresAt })
        .where('company_id', '=', companyId)
        .where('integration_id', '=', integrationId)
        .where('revoked_at', 'is', null)
        .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', previousExpiresAt)]))
        .execute();
      await insertApiKey(trx, companyId, newKey);
      await recordAuthChange(trx, newKey.createdAt);
      await insertAudit(trx, companyId, audit);
    });
  }

  async revokeApiKey(companyId: string, keyId: string, at: number, audit?: AuditEvent): Promise<number | undefined> {
    return this.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('api_keys')
        .set({ revoked_at: at })
        .where('company_id', '=', companyId)
        .where('id', '=', keyId)
        .where('revoked_at', 'is', null)
        .execute();
      const row = await trx
        .selectFrom('api_keys')
        .select('revoked_at')
        .where('company_id', '=', companyId)
        .where('id', '=', keyId)
        .executeTakeFirst();
      if (!row) return undefined;
      await recordAuthChange(trx, at);
      await insertAudit(trx, companyId, audit);
      return Number(row.revoked_at);
    });
  }

  async listApiKeys(companyId: string, integrationId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('company_id', '=', companyId)
      .where('integration_id', '=', integrationId)
      .orderBy('created_at', 'desc')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      companyId: r.company_id,
      integrationId: r.integration_id,
      scopes: parseScopes(r.scopes),
      prefix: r.prefix,
      createdAt: Number(r.created_at),
      expiresAt: nullableNumber(r.expires_at),
      revokedAt: nullableNumber(r.revoked_at),
      lastUsedAt: nullableNumber(r.last_used_at),
      lastUsedIp: r.last_used_ip,
    }));
  }

  // --- management API: keys ---
  listKeys(companyId: string, integrationId: string | null, query: { limit: number; cursor?: PageCursor }) {
    return keys.listKeys(this.db, companyId, integrationId, query);
  }

  getKey(companyId: string, integrationId: string | null, keyId: string) {
    return keys.getKey(this.db, companyId, integrationId, keyId);
  }

  async revokeKeyOf(companyId: string, integrationId: string | null, keyId: string, at: number, audit: AuditEvent) {
    return this.db.transaction().execute(async (trx) => {
      const revoked = await keys.revokeKey(trx, companyId, integrationId, keyId, at);
      if (revoked === undefined) return undefined;
      if (revoked) {
        await recordAuthChange(trx, at);
        await insertAudit(trx, companyId, audit);
      }
      return keys.getKey(trx, companyId, integrationId, keyId);
    });
  }

  countKeyRequests(companyId: string, integrationId: string, keyIds: string[], since: number) {
    return keys.countKeyRequests(this.db, companyId, integrationId, keyIds, since);
  }

  listKeyCallers(companyId: string, integrationId: string, keyId: string, query: { since: number; limit: number }) {
    return keys.listKeyCallers(this.db, companyId, integrationId, keyId, query);
  }

  async companyOfKey(keyId: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('api_keys').select('company_id').where('id', '=', keyId).executeTakeFirst();
    return row?.company_id;
  }
}

/** Inserts a key (an integration's only if the integration is the company's, and live) and tells every key cache. */
export async function insertApiKey(trx: Transaction<Database>, companyId: string, key: NewApiKey): Promise<void> {
  if (key.integrationId !== null) {
    const integration = await trx
      .selectFrom('integrations')
      .select('id')
      .where('company_id', '=', companyId)
      .where('id', '=', key.integrationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (!integration) throw new AppError('not_found', `No integration with id ${key.integrationId}.`);
  }
  await trx
    .insertInto('api_keys')
    .values({
      id: key.id,
      company_id: companyId,
      integration_id: key.integrationId,
      scopes: key.scopes.join(' '),
      prefix: key.prefix,
      key_hash: key.hash,
      created_at: key.createdAt,
      expires_at: key.expiresAt,
      revoked_at: null,
      last_used_at: null,
      last_used_ip: null,
      name: key.name ?? '',
    })
    .execute();
  await recordAuthChange(trx, key.createdAt);
}

/** Tells every node's key cache (in this and other processes) to forget what it holds. */
export async function recordAuthChange(trx: Transaction<Database>, at: number): Promise<void> {
  await trx.insertInto('auth_changes').values({ changed_at: at }).execute();
}

function parseScopes(text: string): Scope[] {
  return text.split(' ').filter(Boolean) as Scope[];
}

function nullableNumber(value: number | null): number | null {
  return value === null ? null : Number(value);
}
