import type { PageCursor } from '../../domain/cursor.js';
import type { AuditEvent } from '../audit-store.js';
import type { DestinationStore, RedeliveryFinish, RedeliveryRecord } from '../destination-store.js';
import type {
  AttemptResult,
  ClaimOptions,
  DedupeClaim,
  Delivery,
  DeliveryAttempt,
  DeliveryBacklog,
  DeliveryState,
  DeliveryQuery,
  Destination,
  DestinationChanges,
  DestinationStats,
  FeedItem,
  FeedCursor,
  FeedQuery,
  FeedStart,
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
} from '../destination-types.js';
import * as deliveries from '../queries/deliveries.js';
import { readWebhookBodies } from '../queries/delivery-claims.js';
import { deliveryBacklog, destinationStats } from '../queries/delivery-stats.js';
import * as deliveryWork from '../queries/delivery-work.js';
import * as destinations from '../queries/destinations.js';
import * as destinationRules from '../queries/destination-rules.js';
import { readFeed } from '../queries/feed.js';
import * as redeliveries from '../queries/redeliveries.js';
import { KyselyStoreBase } from './store-base.js';

/**
 * Destinations and deliveries on Kysely (the DestinationStore part of KyselyStore): each
 * method a call of queries/destinations.ts, deliveries.ts, delivery-work.ts and their kin.
 */
export class KyselyDestinationStore extends KyselyStoreBase implements DestinationStore {
  exchangeDeliveries(results: AttemptResult[], now: number, claim: ClaimOptions | null, disableAfterMs: number) {
    return deliveryWork.exchangeDeliveries(this.db, this.types, this.groupRows, results, now, claim, disableAfterMs);
  }
  readWebhookBodies(refs: WebhookRef[]): Promise<Array<WebhookBody & { uuid: string }>> {
    return readWebhookBodies(this.db, refs);
  }
  readDestinationRules(refs: Array<{ destinationId: string; version: number }>) {
    return destinationRules.readDestinationRules(this.db, refs);
  }
  claimDedupeKeys(claims: DedupeClaim[], now: number) {
    return destinationRules.claimDedupeKeys(this.db, claims, now);
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
  replayStep(
    companyId: string,
    lease: RedeliveryLease,
    ids: readonly string[],
    startedBefore: number,
    finish: RedeliveryFinish | undefined,
    state?: DeliveryState,
    named?: boolean,
  ): Promise<RedeliveryStep> {
    return redeliveries.replayStep(this.db, this.types, companyId, lease, ids, startedBefore, finish, state, named);
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
  feedStart(companyId: string, start: FeedStart): Promise<FeedCursor> {
    return this.types.feedStart(this.db, companyId, start);
  }

  // Operator lookup for the CLI, which is given bare ids: which company owns this?
  async companyOfDestination(destinationId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('destinations')
      .select('company_id')
      .where('id', '=', destinationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row?.company_id;
  }
}
