import type { Kysely } from 'kysely';
import type { GroupRowWriter } from '../group-rows.js';
import { KyselyStore } from '../kysely-store.js';
import type { DialectTypes } from '../migrations/index.js';
import type { Database } from '../schema.js';
import type { Store, StoreThreadBusy } from '../store.js';
import type { SqliteThread } from './store-thread.js';
import type { ThreadMethod } from './thread-protocol.js';

type Args<M extends ThreadMethod> = Parameters<Store[M]>;

/**
 * The embedded store as the server runs it: intake's writes (commits, last use, retention)
 * on the commit thread, the API's heavy reads on the read thread (THREAD_METHODS lists
 * both), everything else on the event loop's connection.
 */
export class ThreadedSqliteStore extends KyselyStore {
  constructor(
    db: Kysely<Database>,
    types: DialectTypes,
    /** Not used here (commits and exchanges run on the commit thread); the base class asks for one. */
    groupRows: GroupRowWriter,
    private readonly commitThread: SqliteThread<'commit'>,
    private readonly readThread: SqliteThread<'read'>,
  ) {
    super('sqlite', db, types, groupRows);
  }

  /**
   * The commit thread starts once the schema exists, so it is ready before the first
   * webhook. The read thread starts with the first heavy read (see IDLE_STOP_MS).
   */
  override async migrate(): Promise<string[]> {
    const applied = await super.migrate();
    await this.commitThread.call('ping');
    return applied;
  }

  /**
   * Readiness covers the connections intake uses: webhooks are written on the commit
   * thread's. Not the read thread's: a balancer's probes would keep it running for
   * nothing, and would wait behind a viewer's long search; a read thread that died is
   * started again by the next read.
   */
  override async ping(): Promise<void> {
    await super.ping();
    await this.commitThread.call('ping');
  }

  override threadsBusySeconds(): StoreThreadBusy[] {
    return [
      { thread: 'sqlite_commit', seconds: this.commitThread.busySeconds() },
      { thread: 'sqlite_read', seconds: this.readThread.busySeconds() },
    ];
  }

  override async close(): Promise<void> {
    await Promise.all([this.commitThread.close(), this.readThread.close()]);
    await super.close();
  }

  // --- the commit thread ---
  override commitBatch(...args: Args<'commitBatch'>) {
    return this.commitThread.call('commitBatch', ...args);
  }
  override recordKeyUsage(...args: Args<'recordKeyUsage'>) {
    return this.commitThread.call('recordKeyUsage', ...args);
  }
  override purgeExpired(...args: Args<'purgeExpired'>) {
    return this.commitThread.call('purgeExpired', ...args);
  }
  override exchangeDeliveries(...args: Args<'exchangeDeliveries'>) {
    return this.commitThread.call('exchangeDeliveries', ...args);
  }
  override reconcileHeldDeliveries(...args: Args<'reconcileHeldDeliveries'>) {
    return this.commitThread.call('reconcileHeldDeliveries', ...args);
  }
  override claimDedupeKeys(...args: Args<'claimDedupeKeys'>) {
    return this.commitThread.call('claimDedupeKeys', ...args);
  }
  override replayDelivery(...args: Args<'replayDelivery'>) {
    return this.commitThread.call('replayDelivery', ...args);
  }
  override beginRedelivery(...args: Args<'beginRedelivery'>) {
    return this.commitThread.call('beginRedelivery', ...args);
  }
  override replayStep(...args: Args<'replayStep'>) {
    return this.commitThread.call('replayStep', ...args);
  }
  override sendStep(...args: Args<'sendStep'>) {
    return this.commitThread.call('sendStep', ...args);
  }
  override endRedelivery(...args: Args<'endRedelivery'>) {
    return this.commitThread.call('endRedelivery', ...args);
  }

  // --- the read thread ---
  override readWebhookBodies(...args: Args<'readWebhookBodies'>) {
    return this.readThread.call('readWebhookBodies', ...args);
  }
  override listWebhooks(...args: Args<'listWebhooks'>) {
    return this.readThread.call('listWebhooks', ...args);
  }
  override getWebhook(...args: Args<'getWebhook'>) {
    return this.readThread.call('getWebhook', ...args);
  }
  override listRequestLog(...args: Args<'listRequestLog'>) {
    return this.readThread.call('listRequestLog', ...args);
  }
  override listCompanyWebhooks(...args: Args<'listCompanyWebhooks'>) {
    return this.readThread.call('listCompanyWebhooks', ...args);
  }
  override exportCompanyWebhooks(...args: Args<'exportCompanyWebhooks'>) {
    return this.readThread.call('exportCompanyWebhooks', ...args);
  }
  override getCompanyWebhook(...args: Args<'getCompanyWebhook'>) {
    return this.readThread.call('getCompanyWebhook', ...args);
  }
  override listCompanyWebhookHeads(...args: Args<'listCompanyWebhookHeads'>) {
    return this.readThread.call('listCompanyWebhookHeads', ...args);
  }
  override getCompanyWebhookHead(...args: Args<'getCompanyWebhookHead'>) {
    return this.readThread.call('getCompanyWebhookHead', ...args);
  }
  override getCompanyWebhookSummaries(...args: Args<'getCompanyWebhookSummaries'>) {
    return this.readThread.call('getCompanyWebhookSummaries', ...args);
  }
  override listCompanyRequestLog(...args: Args<'listCompanyRequestLog'>) {
    return this.readThread.call('listCompanyRequestLog', ...args);
  }
  override countUsage(...args: Args<'countUsage'>) {
    return this.readThread.call('countUsage', ...args);
  }
  override listAuditLog(...args: Args<'listAuditLog'>) {
    return this.readThread.call('listAuditLog', ...args);
  }
  override listKeyCallers(...args: Args<'listKeyCallers'>) {
    return this.readThread.call('listKeyCallers', ...args);
  }
  override countKeyRequests(...args: Args<'countKeyRequests'>) {
    return this.readThread.call('countKeyRequests', ...args);
  }
  override listDeliveries(...args: Args<'listDeliveries'>) {
    return this.readThread.call('listDeliveries', ...args);
  }
  override listDeliveryAttempts(...args: Args<'listDeliveryAttempts'>) {
    return this.readThread.call('listDeliveryAttempts', ...args);
  }
  override destinationStats(...args: Args<'destinationStats'>) {
    return this.readThread.call('destinationStats', ...args);
  }
  override checkpointAfterErasure(...args: Args<'checkpointAfterErasure'>) {
    return this.commitThread.call('checkpointAfterErasure', ...args);
  }
  override erasureStep(...args: Args<'erasureStep'>) {
    return this.commitThread.call('erasureStep', ...args);
  }
  override scanErasure(...args: Args<'scanErasure'>) {
    return this.readThread.call('scanErasure', ...args);
  }
  override countErasureLinks(...args: Args<'countErasureLinks'>) {
    return this.readThread.call('countErasureLinks', ...args);
  }
  override scanReplay(...args: Args<'scanReplay'>) {
    return this.readThread.call('scanReplay', ...args);
  }
  override scanSend(...args: Args<'scanSend'>) {
    return this.readThread.call('scanSend', ...args);
  }
  override readFeed(...args: Args<'readFeed'>) {
    return this.readThread.call('readFeed', ...args);
  }
}
