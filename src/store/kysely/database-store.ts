import { Migrator, sql, type Kysely } from 'kysely';
import { DEFAULT_RETENTION_DAYS } from '../company-store.js';
import type { ConnectionPoolState, DatabaseStore, PurgeReport, StoreThreadBusy } from '../database-store.js';
import { IntakeMigrations } from '../migrations/index.js';
import { IDEMPOTENCY_WINDOW_MS } from '../webhook-store.js';
import { KyselyStoreBase } from './store-base.js';

/** Rows per retention DELETE: short transactions that never hold the writer up for long. */
const PURGE_BATCH = 1000;
const DAY_MS = 24 * 60 * 60 * 1000;
/** auth_changes rows older than this are history nobody polls for. */
const AUTH_CHANGES_KEPT_MS = 60 * 60 * 1000;

/** The database as a whole on Kysely: migrations, health, and retention across companies (the DatabaseStore part of KyselyStore). */
export class KyselyDatabaseStore extends KyselyStoreBase implements DatabaseStore {
  async migrate(): Promise<string[]> {
    const migrator = new Migrator({
      db: this.db,
      provider: new IntakeMigrations(this.types),
      migrationTableSchema: await this.migrationTableSchema(),
    });
    const { error, results = [] } = await migrator.migrateToLatest();
    if (error) throw error;
    return results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
  }

  async ping(): Promise<void> {
    await this.db.selectFrom('auth_changes').select('id').limit(1).execute();
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }

  connectionPool(): ConnectionPoolState | undefined {
    return undefined;
  }

  threadsBusySeconds(): StoreThreadBusy[] {
    return [];
  }

  /** Where Kysely keeps its migration table; undefined for a database without schemas. */
  protected async migrationTableSchema(): Promise<string | undefined> {
    return undefined;
  }

  async checkpointAfterErasure(): Promise<boolean> {
    if (this.dialect !== 'sqlite') return true;
    const result = await sql<{ busy: number }>`pragma wal_checkpoint(TRUNCATE)`.execute(this.db);
    return result.rows[0]?.busy === 0;
  }

  async purgeExpired(now: number): Promise<PurgeReport> {
    const report: PurgeReport = { webhooks: 0, requestLog: 0, idempotencyKeys: 0, deliveries: 0, partitionsDropped: [] };
    const companies = await this.db.selectFrom('companies').select(['id', 'retention_days']).execute();
    // An integration keeps at most its company's retention, so the longest company's is past
    // every row: whole partitions go by that rule alone.
    const longest = Math.max(DEFAULT_RETENTION_DAYS, ...companies.map((c) => c.retention_days));
    report.partitionsDropped = await this.dropPartitionsBefore(now - longest * DAY_MS);
    // Before their companies: an integration's deliveries are found through its webhooks,
    // which the company's purge would otherwise delete first.
    for (const integration of await this.integrationsKeepingLess()) {
      const cutoff = now - integration.retention_days * DAY_MS;
      const purged = await this.purgeIntegrationWebhooks(integration.id, cutoff);
      report.webhooks += purged.webhooks;
      report.deliveries += purged.deliveries;
      report.requestLog += await this.purgeRows('request_log', 'id', { column: 'integration_id', id: integration.id }, cutoff);
    }
    for (const company of companies) {
      const cutoff = now - company.retention_days * DAY_MS;
      report.webhooks += await this.purgeRows('webhooks', 'uuid', { column: 'company_id', id: company.id }, cutoff);
      report.requestLog += await this.purgeRows('request_log', 'id', { column: 'company_id', id: company.id }, cutoff);
      report.deliveries += await this.purgeDeliveries(company.id, cutoff);
    }
    const claimCutoff = now - IDEMPOTENCY_WINDOW_MS;
    report.idempotencyKeys = await this.purgeInBatches(() =>
      this.db
        .deleteFrom('idempotency_keys')
        .where('created_at', '<', claimCutoff)
        .where((eb) =>
          eb(
            eb.refTuple('integration_id', 'idempotency_key'),
            'in',
            eb
              .selectFrom('idempotency_keys')
              .select(['integration_id', 'idempotency_key'])
              .where('created_at', '<', claimCutoff)
              .limit(PURGE_BATCH)
              .$asTuple('integration_id', 'idempotency_key'),
          ),
        )
        .executeTakeFirst(),
    );
    // Keep the newest row whatever its age: latestAuthChange must never go backwards.
    await this.db
      .deleteFrom('auth_changes')
      .where('changed_at', '<', now - AUTH_CHANGES_KEPT_MS)
      .where('id', '<', (eb) => eb.selectFrom('auth_changes').select((f) => f.fn.max('id').as('latest')))
      .execute();
    return report;
  }

  /**
   * Drops whole time partitions that end before `cutoff`, which no company keeps; a
   * database without partitions has nothing to drop and purges row by row.
   */
  protected async dropPartitionsBefore(_cutoff: number): Promise<string[]> {
    return [];
  }

  /**
   * Deletes a company's deliveries and attempts older than `cutoff`, destination by
   * destination (deleted ones too): each delete then walks its (company, destination, time)
   * index. Returns the deliveries deleted.
   */
  private async purgeDeliveries(companyId: string, cutoff: number): Promise<number> {
    const owned = await this.db.selectFrom('destinations').select('id').where('company_id', '=', companyId).execute();
    let deleted = 0;
    for (const { id } of owned) {
      deleted += await this.purgeInBatches(() =>
        this.db
          .deleteFrom('deliveries')
          .where('id', 'in', (eb) =>
            eb
              .selectFrom('deliveries')
              .select('id')
              .where('company_id', '=', companyId)
              .where('destination_id', '=', id)
              .where('created_at', '<', cutoff)
              .limit(PURGE_BATCH),
          )
          .executeTakeFirst(),
      );
      await this.purgeInBatches(() =>
        this.db
          .deleteFrom('delivery_attempts')
          .where('id', 'in', (eb) =>
            eb
              .selectFrom('delivery_attempts')
              .select('id')
              .where('company_id', '=', companyId)
              .where('destination_id', '=', id)
              .where('attempted_at', '<', cutoff)
              .limit(PURGE_BATCH),
          )
          .executeTakeFirst(),
      );
    }
    return deleted;
  }

  /**
   * Integrations (deleted ones too: their webhooks stay until retention) whose own retention
   * is shorter than their company's; a longer one yields to the company's.
   */
  private integrationsKeepingLess() {
    return this.db
      .selectFrom('integrations')
      .innerJoin('companies', 'companies.id', 'integrations.company_id')
      .select(['integrations.id', 'integrations.retention_days'])
      .where('integrations.retention_days', 'is not', null)
      .whereRef('integrations.retention_days', '<', 'companies.retention_days')
      .$narrowType<{ retention_days: number }>()
      .execute();
  }

  /**
   * Deletes an integration's webhooks older than `cutoff` with what hangs off them, a batch of
   * webhooks at a time: their deliveries' attempts, their deliveries, then the webhooks (an
   * accepted webhook's request-log record is its row). Deliveries are found by their webhook
   * (deliveries_webhook): the company's (company, destination, time) index would walk every
   * other integration's deliveries of those days as well. Idempotency claims need nothing
   * here: their 24 hours are within the shortest retention, a day.
   */
  private async purgeIntegrationWebhooks(integrationId: string, cutoff: number): Promise<{ webhooks: number; deliveries: number }> {
    const purged = { webhooks: 0, deliveries: 0 };
    for (;;) {
      const batch = await this.db
        .selectFrom('webhooks')
        .select('uuid')
        .where('integration_id', '=', integrationId)
        .where('received_at', '<', cutoff)
        .limit(PURGE_BATCH)
        .execute();
      if (batch.length === 0) return purged;
      const uuids = batch.map((row) => row.uuid);
      await this.purgeInBatches(() =>
        this.db
          .deleteFrom('delivery_attempts')
          .where('id', 'in', (eb) =>
            eb
              .selectFrom('delivery_attempts')
              .select('id')
              .where('delivery_id', 'in', eb.selectFrom('deliveries').select('id').where('webhook_uuid', 'in', uuids))
              .limit(PURGE_BATCH),
          )
          .executeTakeFirst(),
      );
      purged.deliveries += await this.purgeInBatches(() =>
        this.db
          .deleteFrom('deliveries')
          .where('id', 'in', (eb) => eb.selectFrom('deliveries').select('id').where('webhook_uuid', 'in', uuids).limit(PURGE_BATCH))
          .executeTakeFirst(),
      );
      const deleted = await this.db
        .deleteFrom('webhooks')
        .where('integration_id', '=', integrationId)
        .where('received_at', '<', cutoff)
        .where('uuid', 'in', uuids)
        .executeTakeFirst();
      purged.webhooks += Number(deleted.numDeletedRows);
      if (batch.length < PURGE_BATCH) return purged;
      // Let queued webhooks commit between batches.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Deletes the rows of a time-series table older than `cutoff` of one company, or of one
   * integration (through its own time index), a batch at a time.
   */
  private purgeRows(
    table: 'webhooks' | 'request_log',
    key: 'uuid' | 'id',
    owner: { column: 'company_id' | 'integration_id'; id: string },
    cutoff: number,
  ) {
    // One query for either table: Kysely's types cannot follow a table chosen at run time.
    const db = this.db as unknown as Kysely<
      Record<typeof table, { company_id: string; integration_id: string; received_at: number; uuid: string; id: string }>
    >;
    return this.purgeInBatches(() =>
      db
        .deleteFrom(table)
        .where(owner.column, '=', owner.id)
        .where('received_at', '<', cutoff)
        .where(key, 'in', (eb) =>
          eb.selectFrom(table).select(key).where(owner.column, '=', owner.id).where('received_at', '<', cutoff).limit(PURGE_BATCH),
        )
        .executeTakeFirst(),
    );
  }

  private async purgeInBatches(deleteBatch: () => Promise<{ numDeletedRows: bigint }>): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = Number((await deleteBatch()).numDeletedRows);
      total += deleted;
      if (deleted < PURGE_BATCH) return total;
      // Let queued webhooks commit between batches.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
