import { Migrator, type Kysely, type Transaction } from 'kysely';
import type { PageCursor } from '../domain/cursor.js';
import type { Scope } from '../domain/api-key.js';
import { AppError } from '../errors.js';
import type { Database } from './schema.js';
import { IntakeMigrations, type DialectTypes } from './migrations/index.js';
import type { GroupRowWriter } from './group-rows.js';
import { insertAudit, listAuditLog } from './queries/audit.js';
import * as integrations from './queries/integrations.js';
import * as logs from './queries/logs.js';
import { resolveIdempotency } from './queries/idempotency.js';
import * as webhooks from './queries/webhooks.js';
import * as deliveries from './queries/deliveries.js';
import * as redeliveries from './queries/redeliveries.js';
import * as deliveryWork from './queries/delivery-work.js';
import { deliveryBacklog, destinationStats } from './queries/delivery-stats.js';
import * as destinations from './queries/destinations.js';
import { readFeed } from './queries/feed.js';
import { insertDeliveries } from './queries/outbox.js';
import { readWebhookBodies } from './queries/delivery-claims.js';
import type {
  AttemptResult,
  ClaimedDelivery,
  ClaimOptions,
  Delivery,
  DeliveryAttempt,
  DeliveryBacklog,
  DeliveryQuery,
  Destination,
  DestinationChanges,
  DestinationStats,
  DisabledDestination,
  FeedItem,
  FeedQuery,
  NewDestination,
  RedeliveryBudget,
  RedeliveryLease,
  RedeliveryStart,
  RedeliveryStep,
  ReplayFilter,
  ReplayScan,
  SendCandidate,
  SendScan,
  SendSelection,
  SingleReplay,
  WebhookBody,
  WebhookRef,
} from './destination-types.js';
import type {
  RequestLogQuery,
  UsageBucket,
  UsageQuery,
  WebhookHead,
  WebhookHeadQuery,
  WebhookPage,
  WebhookSearch,
  WebhookSummary,
} from './store.js';
import * as keys from './queries/keys.js';
import * as accounts from './queries/accounts.js';
import * as invitations from './queries/invitations.js';
import * as members from './queries/members.js';
import * as sessions from './queries/sessions.js';
import * as sources from './queries/sources.js';
import type { NewSourceSecret, RedeliveryFinish, RedeliveryRecord, SealedValue, SourceSecretChange, SourceSecretInfo } from './store.js';
import type { AcceptOutcome, CompanyChanges, InviteOutcome, Member, MemberChange, NewCompany, NewInvitation, NewSession } from './store.js';
import {
  DEFAULT_RETENTION_DAYS,
  IDEMPOTENCY_WINDOW_MS,
  requestLogOf,
  durationMsSince,
  preciseNow,
  type ApiKeyRecord,
  type AuditEvent,
  type AuditQuery,
  type AuditRecord,
  type IntegrationChanges,
  type SessionRecord,
  type CommitOutcome,
  type Company,
  type ConnectionPoolState,
  type StoreThreadBusy,
  type Integration,
  type IntegrationRoute,
  type KeyGrant,
  type KeyUsage,
  type NewApiKey,
  type NewUser,
  type PendingWebhook,
  type RequestLogEntry,
  type Role,
  type PurgeReport,
  type Store,
  type StoredWebhook,
  type WebhookQuery,
} from './store.js';

/** Rows per retention DELETE: short transactions that never hold the writer up for long. */
const PURGE_BATCH = 1000;
const DAY_MS = 24 * 60 * 60 * 1000;
/** auth_changes rows older than this are history nobody polls for. */
const AUTH_CHANGES_KEPT_MS = 60 * 60 * 1000;


/**
 * The store on any SQL database Kysely speaks. Each dialect's module opens the connection
 * and passes what differs (column types); the queries are the same on every dialect.
 */
export class KyselyStore implements Store {
  constructor(
    readonly dialect: 'sqlite' | 'postgres',
    protected readonly db: Kysely<Database>,
    private readonly types: DialectTypes,
    private readonly groupRows: GroupRowWriter,
  ) {}

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

  subscribeAuthChanges(_listener: () => void): () => void {
    return () => {};
  }

  async purgeExpired(now: number): Promise<PurgeReport> {
    const report: PurgeReport = { webhooks: 0, requestLog: 0, idempotencyKeys: 0, deliveries: 0, partitionsDropped: [] };
    const companies = await this.db.selectFrom('companies').select(['id', 'retention_days']).execute();
    const longest = Math.max(DEFAULT_RETENTION_DAYS, ...companies.map((c) => c.retention_days));
    report.partitionsDropped = await this.dropPartitionsBefore(now - longest * DAY_MS);
    for (const company of companies) {
      const cutoff = now - company.retention_days * DAY_MS;
      report.webhooks += await this.purgeCompanyRows('webhooks', 'uuid', company.id, cutoff);
      report.requestLog += await this.purgeCompanyRows('request_log', 'id', company.id, cutoff);
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

  /** Deletes a company's rows of a time-series table older than `cutoff`, a batch at a time. */
  private purgeCompanyRows(table: 'webhooks' | 'request_log', key: 'uuid' | 'id', companyId: string, cutoff: number) {
    // One query for either table: Kysely's types cannot follow a table chosen at run time.
    const db = this.db as unknown as Kysely<Record<typeof table, { company_id: string; received_at: number; uuid: string; id: string }>>;
    return this.purgeInBatches(() =>
      db
        .deleteFrom(table)
        .where('company_id', '=', companyId)
        .where('received_at', '<', cutoff)
        .where(key, 'in', (eb) =>
          eb.selectFrom(table).select(key).where('company_id', '=', companyId).where('received_at', '<', cutoff).limit(PURGE_BATCH),
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

  async findIntegrationByKey(integrationKey: string): Promise<IntegrationRoute | undefined> {
    const row = await this.db
      .selectFrom('integrations')
      .select(['id', 'company_id', 'enabled', 'body_limit_bytes', 'rate_limit_per_minute', 'source_type', 'source_config'])
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

  async commitBatch(webhooks: PendingWebhook[], logs: RequestLogEntry[]): Promise<CommitOutcome[]> {
    return this.db.transaction().execute(async (trx) => {
      const outcomes = await resolveIdempotency(trx, webhooks);
      // Each request's time to answer ends here, for its log record.
      const committedAt = preciseNow();
      const accepted = webhooks.filter((_, i) => outcomes[i]!.kind === 'accepted');
      // Feed positions in commit order (null: the database's column defaults number them).
      const firstSeq = accepted.length === 0 ? null : await this.types.reserveFeedSeqs(trx, accepted.length);
      const rows = accepted.map((webhook, i) => webhookRow(webhook, committedAt, firstSeq === null ? null : firstSeq + i));
      await this.groupRows.insertWebhooks(trx, rows);
      const deliveriesDue = await insertDeliveries(trx, accepted, this.groupRows);
      for (const outcome of outcomes) if (outcome.kind === 'accepted' && deliveriesDue.has(outcome.uuid)) outcome.deliveriesDue = true;
      // An accepted webhook's log record is its own row's (migration 0010); a replay's or a
      // conflict's stored nothing, and goes to the request log with the refusals.
      const allLogs = [...logs, ...webhooks.flatMap((w, i) => (outcomes[i]!.kind === 'accepted' ? [] : [requestLogOf(w.log, outcomes[i]!, committedAt)]))];
      if (allLogs.length > 0) await this.groupRows.insertRequestLogs(trx, allLogs.map(requestLogRow));
      return outcomes;
    });
  }

  async listWebhooks(companyId: string, integrationId: string, query: WebhookQuery): Promise<StoredWebhook[]> {
    let select = this.db
      .selectFrom('webhooks')
      .select(webhooks.WEBHOOK_COLUMNS)
      .where('company_id', '=', companyId)
      .where('integration_id', '=', integrationId);
    if (query.event !== undefined) select = select.where('event', '=', query.event);
    if (query.since !== undefined) select = select.where('received_at', '>=', query.since);
    if (query.until !== undefined) select = select.where('received_at', '<', query.until);
    const cursor = query.cursor;
    if (cursor) {
      // The first bound alone is implied by the second; it lets the index start at the
      // cursor instead of reading every newer row to filter it out.
      select = select.where('received_at', '<=', cursor.receivedAt);
      select = select.where((eb) =>
        eb.or([
          eb('received_at', '<', cursor.receivedAt),
          eb.and([eb('received_at', '=', cursor.receivedAt), eb('uuid', '<', cursor.uuid)]),
        ]),
      );
    }
    const rows = await select.orderBy('received_at', 'desc').orderBy('uuid', 'desc').limit(query.limit).execute();
    return rows.map(webhooks.webhookOfRow);
  }

  async getWebhook(companyId: string, integrationId: string, uuid: string): Promise<StoredWebhook | undefined> {
    const row = await this.db
      .selectFrom('webhooks')
      .select(webhooks.WEBHOOK_COLUMNS)
      .where('company_id', '=', companyId)
      .where('integration_id', '=', integrationId)
      .where('uuid', '=', uuid)
      .executeTakeFirst();
    return row && webhooks.webhookOfRow(row);
  }

  listRequestLog(companyId: string, integrationId: string, limit: number): Promise<RequestLogEntry[]> {
    return logs.listCompanyRequestLog(this.db, companyId, { integrationId, limit });
  }

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

  async recordAudit(companyId: string, audit: AuditEvent): Promise<void> {
    await insertAudit(this.db, companyId, audit);
  }

  listAuditLog(companyId: string, query: AuditQuery): Promise<AuditRecord[]> {
    return listAuditLog(this.db, companyId, query);
  }

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

  setPassword(userId: string, passwordHash: string, at: number, keepSession: string | null) {
    return accounts.setPassword(this.db, userId, passwordHash, at, keepSession);
  }

  createPasswordReset(userId: string, tokenHash: string, createdAt: number, expiresAt: number) {
    return accounts.createPasswordReset(this.db, userId, tokenHash, createdAt, expiresAt);
  }

  isPasswordResetUsable(tokenHash: string, now: number) {
    return accounts.isPasswordResetUsable(this.db, tokenHash, now);
  }

  resetPassword(tokenHash: string, now: number, passwordHash: string) {
    return accounts.resetPassword(this.db, tokenHash, now, passwordHash);
  }

  setPendingTwoFactor(userId: string, sealedSecret: string) {
    return accounts.setPendingTwoFactor(this.db, userId, sealedSecret);
  }

  enableTwoFactor(
    userId: string,
    change: { sealedSecret: string; step: number; recoveryCodeHashes: string[]; at: number; keepSession: string | null },
  ) {
    return accounts.enableTwoFactor(this.db, userId, change);
  }

  disableTwoFactor(userId: string) {
    return accounts.disableTwoFactor(this.db, userId);
  }

  replaceRecoveryCodes(userId: string, codeHashes: string[], at: number) {
    return accounts.replaceRecoveryCodes(this.db, userId, codeHashes, at);
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

  // --- management API: integrations and keys ---
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

  listIntegrations(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Integration[]> {
    return integrations.listIntegrations(this.db, companyId, query);
  }

  lastWebhookTimes(companyId: string, integrationIds: readonly string[]): Promise<Map<string, number>> {
    return integrations.lastWebhookTimes(this.db, companyId, integrationIds);
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

  // --- management API: webhooks, request log, usage ---
  listCompanyWebhooks(companyId: string, query: WebhookSearch): Promise<WebhookPage> {
    return webhooks.readWebhookPage(this.db, this.types, companyId, query, webhooks.SUMMARY);
  }

  exportCompanyWebhooks(companyId: string, query: WebhookSearch): Promise<WebhookPage<StoredWebhook>> {
    return webhooks.readWebhookPage(this.db, this.types, companyId, query, webhooks.WHOLE);
  }

  listCompanyWebhookHeads(companyId: string, query: WebhookHeadQuery): Promise<WebhookHead[]> {
    return webhooks.listWebhookHeads(this.db, this.types, companyId, query);
  }

  getCompanyWebhookHead(companyId: string, uuid: string): Promise<WebhookHead | undefined> {
    return webhooks.getWebhookHead(this.db, this.types, companyId, uuid);
  }

  getCompanyWebhookSummaries(companyId: string, heads: readonly WebhookHead[]): Promise<WebhookSummary[]> {
    return webhooks.readBodies(this.db, companyId, heads, webhooks.SUMMARY);
  }

  getCompanyWebhook(companyId: string, uuid: string): Promise<StoredWebhook | undefined> {
    return webhooks.getCompanyWebhook(this.db, companyId, uuid);
  }

  listCompanyRequestLog(companyId: string, query: RequestLogQuery): Promise<RequestLogEntry[]> {
    return logs.listCompanyRequestLog(this.db, companyId, query);
  }

  countUsage(companyId: string, query: UsageQuery): Promise<UsageBucket[]> {
    return logs.countUsage(this.db, companyId, query);
  }

  // --- management API: members and company settings ---
  listMembers(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Member[]> {
    return members.listMembers(this.db, companyId, query);
  }

  getMember(companyId: string, userId: string): Promise<Member | undefined> {
    return members.getMember(this.db, companyId, userId);
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

  async companyOfIntegration(integrationId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('integrations')
      .select('company_id')
      .where('id', '=', integrationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row?.company_id;
  }

  async companyOfDestination(destinationId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('destinations')
      .select('company_id')
      .where('id', '=', destinationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row?.company_id;
  }

  async companyOfKey(keyId: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('api_keys').select('company_id').where('id', '=', keyId).executeTakeFirst();
    return row?.company_id;
  }

  // --- destinations and deliveries (queries/destinations.ts, deliveries.ts, delivery-work.ts) ---
  exchangeDeliveries(results: AttemptResult[], now: number, claim: ClaimOptions | null, disableAfterMs: number) {
    return deliveryWork.exchangeDeliveries(this.db, this.types, this.groupRows, results, now, claim, disableAfterMs);
  }
  readWebhookBodies(refs: WebhookRef[]): Promise<Array<WebhookBody & { uuid: string }>> {
    return readWebhookBodies(this.db, refs);
  }
  reconcileHeldDeliveries(now: number, limit: number): Promise<number> {
    return deliveryWork.reconcileHeldDeliveries(this.db, now, limit);
  }
  vacuumDeliveries(): Promise<void> {
    return this.types.vacuumNow(this.db, 'deliveries');
  }
  createDestination(companyId: string, destination: NewDestination, audit: AuditEvent, maxLive: number): Promise<Destination | undefined> {
    return destinations.createDestination(this.db, companyId, destination, audit, maxLive);
  }
  listDestinations(companyId: string, query: { limit: number; cursor?: PageCursor }): Promise<Destination[]> {
    return destinations.listDestinations(this.db, companyId, query);
  }
  getDestination(companyId: string, destinationId: string): Promise<Destination | undefined> {
    return destinations.findLiveDestination(this.db, companyId, destinationId);
  }
  updateDestination(companyId: string, destinationId: string, changes: DestinationChanges, at: number, audit: AuditEvent) {
    return destinations.updateDestination(this.db, this.types, companyId, destinationId, changes, at, audit);
  }
  deleteDestination(companyId: string, destinationId: string, at: number, audit: AuditEvent): Promise<boolean> {
    return destinations.deleteDestination(this.db, companyId, destinationId, at, audit);
  }
  listDeliveries(companyId: string, query: DeliveryQuery): Promise<Delivery[]> {
    return deliveries.listDeliveries(this.db, companyId, query);
  }
  getDelivery(companyId: string, deliveryId: string): Promise<Delivery | undefined> {
    return deliveries.getDelivery(this.db, companyId, deliveryId);
  }
  listDeliveryAttempts(companyId: string, deliveryId: string, limit: number): Promise<DeliveryAttempt[]> {
    return deliveries.listDeliveryAttempts(this.db, companyId, deliveryId, limit);
  }
  replayDelivery(companyId: string, deliveryId: string, at: number, budget: RedeliveryBudget, audit: AuditEvent): Promise<SingleReplay> {
    return redeliveries.replayDelivery(this.db, this.types, companyId, deliveryId, at, budget, audit);
  }
  beginRedelivery(companyId: string, lease: Omit<RedeliveryLease, 'destinationId'>): Promise<RedeliveryStart> {
    return redeliveries.beginRedelivery(this.db, this.types, companyId, lease);
  }
  scanReplay(companyId: string, filter: ReplayFilter, startedBefore: number, limit: number, scanRows: number): Promise<ReplayScan> {
    return redeliveries.scanReplay(this.db, companyId, filter, startedBefore, limit, scanRows);
  }
  scanSend(companyId: string, destinationId: string, selection: SendSelection, limit: number): Promise<SendScan> {
    return redeliveries.scanSend(this.db, companyId, destinationId, selection, limit);
  }
  replayStep(companyId: string, lease: RedeliveryLease, ids: readonly string[], startedBefore: number, finish?: RedeliveryFinish): Promise<RedeliveryStep> {
    return redeliveries.replayStep(this.db, this.types, companyId, lease, ids, startedBefore, finish);
  }
  sendStep(companyId: string, lease: RedeliveryLease, webhooks: readonly SendCandidate[], finish?: RedeliveryFinish): Promise<RedeliveryStep> {
    return redeliveries.sendStep(this.db, this.types, this.groupRows, companyId, lease, webhooks, finish);
  }
  endRedelivery(companyId: string, token: string, record?: RedeliveryRecord): Promise<void> {
    return redeliveries.endRedelivery(this.db, companyId, token, record);
  }
  deliveryBacklog(now: number, cap: number): Promise<DeliveryBacklog> {
    return deliveryBacklog(this.db, now, cap);
  }
  destinationStats(
    companyId: string,
    destinationId: string,
    query: { since: number; until: number; bucketMs: number; now: number },
  ): Promise<DestinationStats> {
    return destinationStats(this.db, companyId, destinationId, query);
  }
  readFeed(companyId: string, query: FeedQuery): Promise<FeedItem[]> {
    return readFeed(this.db, this.types, companyId, query);
  }
}

async function insertApiKey(trx: Transaction<Database>, companyId: string, key: NewApiKey): Promise<void> {
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
async function recordAuthChange(trx: Transaction<Database>, at: number): Promise<void> {
  await trx.insertInto('auth_changes').values({ changed_at: at }).execute();
}

/** A webhook's row, with its request's log record (feed_seq null: the database's default numbers it). */
function webhookRow(w: PendingWebhook, committedAt: number, feedSeq: number | null) {
  return {
    uuid: w.uuid,
    company_id: w.companyId,
    integration_id: w.integrationId,
    event: w.event,
    received_at: w.receivedAt,
    raw_body: w.rawBody,
    headers: w.headers,
    source_ip: w.sourceIp,
    key_id: w.keyId,
    idempotency_key: w.idempotencyKey,
    payload_format: w.payloadFormat ?? 'envelope',
    feed_seq: feedSeq,
    request_id: w.log.id,
    user_agent: w.log.userAgent,
    duration_ms: durationMsSince(w.log.startedAt, committedAt),
  };
}

function requestLogRow(r: RequestLogEntry) {
  return {
    id: r.id,
    company_id: r.companyId,
    integration_id: r.integrationId,
    received_at: r.receivedAt,
    method: r.method,
    status: r.status,
    error_code: r.errorCode,
    key_id: r.keyId,
    ip: r.ip,
    user_agent: r.userAgent,
    size_bytes: r.sizeBytes,
    duration_ms: r.durationMs,
    webhook_uuid: r.webhookUuid,
    error_detail: r.errorDetail ?? null,
  };
}

function parseScopes(text: string): Scope[] {
  return text.split(' ').filter(Boolean) as Scope[];
}

function nullableNumber(value: number | null): number | null {
  return value === null ? null : Number(value);
}

