import type { Kysely } from 'kysely';
import { matchesEvent } from '../../domain/event-patterns.js';
import { newTimeOrderedId } from '../../domain/ids.js';
import type { GroupRowWriter, NewDeliveryRow } from '../group-rows.js';
import type { Database } from '../schema.js';
import type { PendingWebhook } from '../store.js';

/**
 * The outbox: inside commitBatch's transaction, one delivery row per (accepted webhook,
 * destination of its company that it matches). Read here, in the transaction, rather than
 * from a cache: a destination created a moment before a webhook is committed gets it.
 * A destination that is paused or disabled gets its rows `held`, to be sent once resumed.
 * A source test's sample gets none. Returns the uuids of the webhooks that have a delivery
 * due now (not held, not delayed by the destination's rules).
 */
export async function insertDeliveries(trx: Kysely<Database>, accepted: readonly PendingWebhook[], writer: GroupRowWriter): Promise<Set<string>> {
  const due = new Set<string>();
  // A source test's sample is for the panel, not for the company's systems.
  accepted = accepted.filter((webhook) => webhook.sourceTest !== true);
  if (accepted.length === 0) return due;
  const companies = [...new Set(accepted.map((webhook) => webhook.companyId))];
  const destinations = await trx
    .selectFrom('destinations')
    .select(['id', 'company_id', 'integration_ids', 'event_patterns', 'status', 'delay_ms'])
    .where('company_id', 'in', companies)
    .where('deleted_at', 'is', null)
    .execute();
  if (destinations.length === 0) return due;
  const filters = destinations.map((row) => ({
    id: row.id,
    companyId: row.company_id,
    integrationIds: row.integration_ids === null ? null : new Set(JSON.parse(row.integration_ids) as string[]),
    patterns: JSON.parse(row.event_patterns) as string[],
    active: row.status === 'active',
    delayMs: row.delay_ms,
  }));
  const rows = accepted.flatMap((webhook): NewDeliveryRow[] =>
    filters
      .filter(
        (d) =>
          d.companyId === webhook.companyId &&
          (d.integrationIds === null || d.integrationIds.has(webhook.integrationId)) &&
          matchesEvent(d.patterns, webhook.event),
      )
      .map((d) => ({
        id: newTimeOrderedId('dlv', webhook.receivedAt),
        company_id: webhook.companyId,
        destination_id: d.id,
        webhook_uuid: webhook.uuid,
        webhook_received_at: webhook.receivedAt,
        integration_id: webhook.integrationId,
        event: webhook.event,
        state: d.active ? 'pending' : 'held',
        // The rules' delay: first due that long after the webhook arrived.
        next_attempt_at: d.active ? webhook.receivedAt + d.delayMs : null,
        created_at: webhook.receivedAt,
        updated_at: webhook.receivedAt,
      })),
  );
  await writer.insertDeliveries(trx, rows);
  for (const row of rows) if (row.state === 'pending' && row.next_attempt_at === row.webhook_received_at) due.add(row.webhook_uuid);
  return due;
}
