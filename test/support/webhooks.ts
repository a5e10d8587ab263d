import { createHash } from 'node:crypto';
import { INTEGRATION_SCOPES, issueApiKey } from '../../src/domain/api-key.js';
import { newId, newIntegrationKey, newWebhookUuid } from '../../src/domain/ids.js';
import { preciseNow, type PendingLogEntry, type PendingWebhook, type RequestLogEntry, type Store } from '../../src/store/store.js';

export const DAY_MS = 24 * 60 * 60 * 1000;

/** Where a webhook or a request-log row belongs: a company and one of its integrations. */
export interface Owner {
  companyId: string;
  integrationId: string;
  keyId: string;
}

/** A company with this retention (days), made directly in the store. */
export async function createCompany(store: Store, retentionDays = 30, createdAt = Date.now()): Promise<string> {
  const id = newId('cmp');
  await store.createCompany({ id, name: `Retains ${retentionDays} days`, retentionDays, createdAt });
  return id;
}

/** An integration of the company and its key; `retentionDays` its own retention (null: the company's). */
export async function createIntegration(
  store: Store,
  companyId: string,
  createdAt = Date.now(),
  retentionDays: number | null = null,
): Promise<Owner> {
  const integrationId = newId('int');
  const issued = issueApiKey('development');
  const keyId = newId('key');
  await store.createIntegration(
    companyId,
    {
      id: integrationId,
      companyId,
      integrationKey: newIntegrationKey(),
      name: 'Billing',
      description: '',
      enabled: true,
      bodyLimitBytes: 1024 * 1024,
      rateLimitPerMinute: null,
      createdAt,
      updatedAt: createdAt,
      source: { type: 'api_key', config: {} },
      redaction: null,
      retentionDays,
    },
    {
      id: keyId,
      integrationId,
      scopes: [...INTEGRATION_SCOPES],
      prefix: issued.prefix,
      hash: issued.hash,
      createdAt,
      expiresAt: null,
    },
  );
  return { companyId, integrationId, keyId };
}

/** A company with this retention and one integration. */
export async function createTenant(store: Store, retentionDays = 30): Promise<Owner> {
  return createIntegration(store, await createCompany(store, retentionDays));
}

/** A request-log row of a rejected request (no webhook). */
export function logRow(owner: Owner, receivedAt: number): RequestLogEntry {
  return {
    id: newId('req'),
    companyId: owner.companyId,
    integrationId: owner.integrationId,
    receivedAt,
    method: 'POST',
    status: 401,
    errorCode: 'invalid_api_key',
    keyId: null,
    ip: '203.0.113.9',
    userAgent: 'curl/8.5.0',
    sizeBytes: 12,
    durationMs: 0.5,
    webhookUuid: null,
  };
}

/** A webhook as the intake path hands it to commitBatch; its request-log row has the status of its outcome. */
export function webhook(
  owner: Owner,
  receivedAt: number,
  options: { event?: string; body?: string; idempotencyKey?: string } = {},
): PendingWebhook {
  const event = options.event ?? 'invoice.paid';
  const rawBody = Buffer.from(options.body ?? JSON.stringify({ event, data: { at: receivedAt } }));
  // One id, so a test can name the row commitBatch writes for this request.
  const logId = newId('req');
  return {
    uuid: newWebhookUuid(),
    companyId: owner.companyId,
    integrationId: owner.integrationId,
    keyId: owner.keyId,
    event,
    receivedAt,
    rawBody,
    bodySha256: createHash('sha256').update(rawBody).digest('hex'),
    headers: JSON.stringify({ 'content-type': 'application/json' }),
    sourceIp: '198.51.100.4',
    idempotencyKey: options.idempotencyKey ?? null,
    log: { ...pendingLog(logRow(owner, receivedAt)), id: logId, keyId: owner.keyId },
  };
}

/** A request-log row as the intake path hands it over with a webhook: its outcome still to be decided. */
export function pendingLog(entry: RequestLogEntry): PendingLogEntry {
  const { status: _status, errorCode: _errorCode, webhookUuid: _webhookUuid, durationMs: _durationMs, ...row } = entry;
  return { ...row, startedAt: preciseNow() };
}
