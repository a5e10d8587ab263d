import { resolveIdempotency } from '../queries/idempotency.js';
import * as logs from '../queries/logs.js';
import { insertDeliveries } from '../queries/outbox.js';
import * as webhooks from '../queries/webhooks.js';
import {
  durationMsSince,
  preciseNow,
  requestLogOf,
  type CommitOutcome,
  type PendingWebhook,
  type RequestLogEntry,
  type RequestLogQuery,
  type StoredWebhook,
  type UsageBucket,
  type UsageQuery,
  type WebhookHead,
  type WebhookHeadQuery,
  type WebhookPage,
  type WebhookQuery,
  type WebhookSearch,
  type WebhookStore,
  type WebhookSummary,
} from '../webhook-store.js';
import { KyselyStoreBase } from './store-base.js';

/** Webhooks and the request log on Kysely: the group commit and the reads (the WebhookStore part of KyselyStore). */
export class KyselyWebhookStore extends KyselyStoreBase implements WebhookStore {
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
    trace_id: w.log.traceId ?? null,
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
    trace_id: r.traceId ?? null,
  };
}
