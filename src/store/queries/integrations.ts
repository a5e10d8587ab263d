import type { Kysely, Selectable } from 'kysely';
import type { PageCursor } from '../../domain/cursor.js';
import type { Database, IntegrationsTable } from '../schema.js';
import type { Redaction } from '../../domain/redaction.js';
import type { SourceConfig, SourceType } from '../../domain/source-types.js';
import type { Integration, IntegrationChanges } from '../store.js';

export function integrationOfRow(row: Selectable<IntegrationsTable>): Integration {
  return {
    id: row.id,
    companyId: row.company_id,
    integrationKey: row.integration_key,
    name: row.name,
    description: row.description,
    enabled: row.enabled === 1,
    bodyLimitBytes: row.body_limit_bytes,
    rateLimitPerMinute: row.rate_limit_per_minute,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    source: { type: row.source_type as SourceType, config: JSON.parse(row.source_config) as SourceConfig },
    redaction: row.redaction === null ? null : (JSON.parse(row.redaction) as Redaction),
    retentionDays: row.retention_days,
  };
}

/** The company's integration with this id, unless it was deleted. */
export async function findLiveIntegration(
  db: Kysely<Database>,
  companyId: string,
  integrationId: string,
): Promise<Integration | undefined> {
  const row = await db
    .selectFrom('integrations')
    .selectAll()
    .where('company_id', '=', companyId)
    .where('id', '=', integrationId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return row && integrationOfRow(row);
}

/** The company's live integrations, newest first. */
export async function listIntegrations(
  db: Kysely<Database>,
  companyId: string,
  query: { limit: number; cursor?: PageCursor },
): Promise<Integration[]> {
  let select = db.selectFrom('integrations').selectAll().where('company_id', '=', companyId).where('deleted_at', 'is', null);
  const cursor = query.cursor;
  if (cursor) {
    select = select.where((eb) =>
      eb.or([eb('created_at', '<', cursor.at), eb.and([eb('created_at', '=', cursor.at), eb('id', '<', cursor.id)])]),
    );
  }
  const rows = await select.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  return rows.map(integrationOfRow);
}

/**
 * The newest received_at per integration: one max() per integration, each answered from the
 * (integration_id, received_at) index without reading the rows.
 */
export async function lastWebhookTimes(
  db: Kysely<Database>,
  companyId: string,
  integrationIds: readonly string[],
): Promise<Map<string, number>> {
  if (integrationIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('integrations')
    .where('company_id', '=', companyId)
    .where('id', 'in', integrationIds)
    .select((eb) => [
      'id',
      eb
        .selectFrom('webhooks')
        .whereRef('webhooks.integration_id', '=', 'integrations.id')
        .select((inner) => inner.fn.max('webhooks.received_at').as('last'))
        .as('last'),
    ])
    .execute();
  return new Map(rows.filter((row) => row.last !== null).map((row) => [row.id, Number(row.last)]));
}

/** Applies `changes` to a live integration of the company; its state before and after, or undefined. */
export async function updateIntegration(
  trx: Kysely<Database>,
  companyId: string,
  integrationId: string,
  changes: IntegrationChanges,
  at: number,
): Promise<{ before: Integration; after: Integration } | undefined> {
  const before = await findLiveIntegration(trx, companyId, integrationId);
  if (!before) return undefined;
  const after: Integration = { ...before, ...changes, updatedAt: at };
  await trx
    .updateTable('integrations')
    .set({
      name: after.name,
      description: after.description,
      enabled: after.enabled ? 1 : 0,
      body_limit_bytes: after.bodyLimitBytes,
      rate_limit_per_minute: after.rateLimitPerMinute,
      source_type: after.source.type,
      source_config: JSON.stringify(after.source.config),
      redaction: after.redaction === null ? null : JSON.stringify(after.redaction),
      retention_days: after.retentionDays,
      updated_at: at,
    })
    .where('company_id', '=', companyId)
    .where('id', '=', integrationId)
    .execute();
  return { before, after };
}
