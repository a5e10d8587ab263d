import type { PageCursor } from '../../domain/cursor.js';
import type { Redaction } from '../../domain/redaction.js';
import type { AuditEvent } from '../audit-store.js';
import type {
  Integration,
  IntegrationChanges,
  IntegrationRoute,
  IntegrationStore,
  NewSourceSecret,
  SealedValue,
  SourceSecretChange,
  SourceSecretInfo,
} from '../integration-store.js';
import type { NewApiKey } from '../key-store.js';
import { insertAudit } from '../queries/audit.js';
import * as integrations from '../queries/integrations.js';
import * as sources from '../queries/sources.js';
import { insertApiKey, recordAuthChange } from './key-store.js';
import { KyselyStoreBase } from './store-base.js';

/** Integrations, their sources and the sealed values, on Kysely (the IntegrationStore part of KyselyStore). */
export class KyselyIntegrationStore extends KyselyStoreBase implements IntegrationStore {
  async findIntegrationByKey(integrationKey: string): Promise<IntegrationRoute | undefined> {
    const row = await this.db
      .selectFrom('integrations')
      .select(['id', 'company_id', 'enabled', 'body_limit_bytes', 'rate_limit_per_minute', 'source_type', 'source_config', 'redaction'])
      .where('integration_key', '=', integrationKey)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      id: row.id,
      companyId: row.company_id,
      enabled: row.enabled === 1,
      bodyLimitBytes: row.body_limit_bytes,
      rateLimitPerMinute: row.rate_limit_per_minute,
      source: row.source_type === 'api_key' ? null : await sources.routeSource(this.db, row, Date.now()),
      redaction: row.redaction === null ? null : (JSON.parse(row.redaction) as Redaction),
    };
  }

  async createIntegration(
    companyId: string,
    integration: Integration,
    firstKey: NewApiKey,
    audit?: AuditEvent,
    firstSecret?: NewSourceSecret,
  ): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('integrations')
        .values({
          id: integration.id,
          company_id: companyId,
          integration_key: integration.integrationKey,
          name: integration.name,
          description: integration.description,
          enabled: integration.enabled ? 1 : 0,
          body_limit_bytes: integration.bodyLimitBytes,
          rate_limit_per_minute: integration.rateLimitPerMinute,
          source_type: integration.source.type,
          source_config: JSON.stringify(integration.source.config),
          redaction: integration.redaction === null ? null : JSON.stringify(integration.redaction),
          retention_days: integration.retentionDays,
          created_at: integration.createdAt,
          updated_at: integration.updatedAt,
          deleted_at: null,
        })
        .execute();
      await insertApiKey(trx, companyId, firstKey);
      if (firstSecret) await sources.insertSecret(trx, companyId, integration.id, firstSecret);
      await insertAudit(trx, companyId, audit);
    });
  }

  async getIntegration(companyId: string, integrationId: string): Promise<Integration | undefined> {
    return integrations.findLiveIntegration(this.db, companyId, integrationId);
  }

  async setIntegrationEnabled(
    companyId: string,
    integrationId: string,
    enabled: boolean,
    at: number,
    audit?: AuditEvent,
  ): Promise<boolean> {
    return (await this.updateIntegration(companyId, integrationId, { enabled }, at, audit)) !== undefined;
  }

  // --- management API: integrations ---
  listIntegrations(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Integration[]> {
    return integrations.listIntegrations(this.db, companyId, query);
  }

  lastWebhookTimes(companyId: string, integrationIds: readonly string[]): Promise<Map<string, number>> {
    return integrations.lastWebhookTimes(this.db, companyId, integrationIds);
  }

  awaitingSecret(companyId: string, integrationIds: readonly string[], now: number): Promise<Set<string>> {
    return sources.awaitingSecret(this.db, companyId, integrationIds, now);
  }

  async updateIntegration(
    companyId: string,
    integrationId: string,
    changes: IntegrationChanges,
    at: number,
    audit?: AuditEvent,
    secrets?: SourceSecretChange,
  ) {
    return this.db.transaction().execute(async (trx) => {
      const result = await integrations.updateIntegration(trx, companyId, integrationId, changes, at);
      if (!result) return undefined;
      if (secrets) await sources.rotateSecret(trx, companyId, integrationId, secrets);
      // The key cache holds enabled and the limits: every node must reload them.
      await recordAuthChange(trx, at);
      // What the caller adds to the record (a new secret's id) stays beside the rows.
      const after = audit?.after === undefined ? result.after : { ...result.after, ...(audit.after as object) };
      await insertAudit(trx, companyId, audit && { ...audit, before: result.before, after });
      return result;
    });
  }

  listSourceSecrets(companyId: string, integrationId: string, now: number): Promise<SourceSecretInfo[]> {
    return sources.listLiveSecrets(this.db, companyId, integrationId, now);
  }

  async rotateSourceSecret(companyId: string, integrationId: string, change: SourceSecretChange, audit?: AuditEvent): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      if (!(await integrations.findLiveIntegration(trx, companyId, integrationId))) return false;
      await sources.rotateSecret(trx, companyId, integrationId, change);
      // The key cache holds each address's secrets: every node must reload them.
      await recordAuthChange(trx, change.add?.createdAt ?? Date.now());
      await insertAudit(trx, companyId, audit);
      return true;
    });
  }

  async endSourceSecret(companyId: string, integrationId: string, secretId: string, at: number, audit?: AuditEvent): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      if (!(await sources.endSecret(trx, companyId, integrationId, secretId, at))) return false;
      await recordAuthChange(trx, at);
      await insertAudit(trx, companyId, audit);
      return true;
    });
  }

  listSealedValues(): Promise<SealedValue[]> {
    return sources.listSealedValues(this.db);
  }

  replaceSealedValues(values: Array<SealedValue & { resealed: string }>): Promise<number> {
    return this.db.transaction().execute((trx) => sources.replaceSealedValues(trx, values));
  }

  async deleteIntegration(companyId: string, integrationId: string, at: number, audit: AuditEvent): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      // The record keeps what was deleted, so the audit log can still name it.
      const before = await integrations.findLiveIntegration(trx, companyId, integrationId);
      const result = await trx
        .updateTable('integrations')
        .set({ deleted_at: at, enabled: 0, updated_at: at })
        .where('company_id', '=', companyId)
        .where('id', '=', integrationId)
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      if (result.numUpdatedRows === 0n) return false;
      await recordAuthChange(trx, at);
      await insertAudit(trx, companyId, { ...audit, before });
      return true;
    });
  }

  async companyOfIntegration(integrationId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('integrations')
      .select('company_id')
      .where('id', '=', integrationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row?.company_id;
  }
}
