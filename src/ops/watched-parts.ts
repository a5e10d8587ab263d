import { Counter, Gauge } from 'prom-client';
import type { SignIn } from '../admin/sign-in.js';
import type { DeliveryDispatcher } from '../destinations/dispatcher.js';
import type { AdmissionGate } from '../intake/admission.js';
import type { AuthFailureLimiter } from '../intake/auth-failures.js';
import type { GroupCommitWriter } from '../intake/group-commit.js';
import type { KeyCache } from '../intake/key-cache.js';
import type { ReadLimits } from '../intake/read-limits.js';
import type { Store } from '../store/store.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { RetentionJob } from './retention.js';
import type { ErasureRunner } from '../services/erasures.js';

/**
 * The metrics /metrics reads from the service's parts when it is scraped (queue depth, cache
 * hits, delivery attempts, the database's backlog): here, beside the app's wiring, because
 * they know the parts; what the parts observe as it happens is in src/telemetry/metrics.ts.
 */

/**
 * Registers in `metrics` what is read from the service's parts at each scrape. Called once
 * the app has built them; every metric here reads a number the part keeps anyway.
 */
export function watchParts(metrics: Metrics, parts: WatchedParts): void {
  const registers = [metrics.registry];
  const { writer, admission, keyCache, dispatcher, retention, signIn, erasures } = parts;

  gauge('intake_write_queue_depth', 'Webhooks waiting for their group commit.', () => writer.queued);
  gauge('intake_write_queue_bytes', 'Raw body bytes of the webhooks waiting for their group commit.', () => writer.bytesQueued);
  gauge(
    'intake_write_queue_oldest_seconds',
    'How long the oldest webhook waiting for its group commit has waited (0 when none waits); intake sheds past INTAKE_MAX_QUEUE_WAIT_MS.',
    () => writer.oldestWaitMs() / 1000,
  );
  counter(
    'intake_requests_shed_total',
    'Requests to the webhook addresses refused with 503 by an overload bound: event_loop_lag and queue_wait before authentication ' +
      '(not stored, not in the request log), queue_full after the body was read (in the request log).',
    ['bound'],
    () => [
      [{ bound: 'event_loop_lag' }, admission.shedBy.event_loop_lag],
      [{ bound: 'queue_wait' }, admission.shedBy.queue_wait],
      [{ bound: 'queue_full' }, writer.refusedFull],
    ],
  );
  counter(
    'intake_request_log_dropped_total',
    'Request-log rows of rejected requests dropped while the database fell behind or failed.',
    [],
    () => [[{}, writer.droppedLogs]],
  );
  counter(
    'intake_unknown_integration_requests_total',
    'Requests to webhook addresses that name no integration (not stored, not in any request log).',
    [],
    () => [[{}, parts.counters.unknownIntegrationRequests]],
  );
  counter(
    'intake_auth_rate_limited_unlogged_total',
    'Requests refused with 429 auth_rate_limited beyond the first of their address at an integration in a window (counted, not in the request log).',
    [],
    () => [[{}, parts.authFailures.unloggedRefusals]],
  );
  counter(
    'intake_key_cache_lookups_total',
    'Lookups in the key cache, by kind (key, integration) and result (hit: answered from memory; miss: read from the database).',
    ['kind', 'result'],
    () => [
      [{ kind: 'key', result: 'hit' }, keyCache.lookups.keyHits],
      [{ kind: 'key', result: 'miss' }, keyCache.lookups.keyMisses],
      [{ kind: 'integration', result: 'hit' }, keyCache.lookups.integrationHits],
      [{ kind: 'integration', result: 'miss' }, keyCache.lookups.integrationMisses],
    ],
  );
  counter(
    'intake_key_cache_invalidations_total',
    'Times the key cache forgot everything, by reason: change (the database told of a key or integration change), local (a change made ' +
      'through this node), unverified (the database did not answer its polls for too long), full.',
    ['reason'],
    () => Object.entries(keyCache.invalidations).map(([reason, count]) => [{ reason }, count]),
  );
  counter(
    'intake_sign_in_failures_total',
    'Refused sign-ins to the panel, by reason: invalid_credentials, invalid_two_factor_code, rate_limited (too many failures of the ' +
      'account or address), service_unavailable (password hashing busy).',
    ['reason'],
    () => Object.entries(signIn.failures).map(([reason, count]) => [{ reason }, count]),
  );
  gauge('intake_live_tail_streams', 'Live tails (GET /api/v1/webhooks/stream) open on this node.', () => parts.readLimits.streams.inUse);
  counter(
    'intake_retention_rows_purged_total',
    "Rows this node's retention purges deleted, by table (PostgreSQL drops whole expired day partitions too: intake_retention_partitions_dropped_total).",
    ['table'],
    () => [
      [{ table: 'webhooks' }, retention.purged.webhooks],
      [{ table: 'request_log' }, retention.purged.requestLog],
      [{ table: 'idempotency_keys' }, retention.purged.idempotencyKeys],
      [{ table: 'deliveries' }, retention.purged.deliveries],
    ],
  );
  counter(
    'intake_retention_partitions_dropped_total',
    "Expired day partitions this node's retention purges dropped (PostgreSQL).",
    [],
    () => [[{}, retention.purged.partitionsDropped]],
  );
  counter(
    'intake_retention_runs_total',
    "This node's retention purges, by outcome (completed, failed: logged, and tried again at the next interval).",
    ['outcome'],
    () => [
      [{ outcome: 'completed' }, retention.runs.completed],
      [{ outcome: 'failed' }, retention.runs.failed],
    ],
  );
  counter(
    'intake_erasure_runs_total',
    "Erasures and previews this node ran to their end, by outcome: completed (erased), previewed (counted), failed (logged), lost (another node took its lease and goes on).",
    ['outcome'],
    () => [
      [{ outcome: 'completed' }, erasures.runs.completed],
      [{ outcome: 'previewed' }, erasures.runs.previewed],
      [{ outcome: 'failed' }, erasures.runs.failed],
      [{ outcome: 'lost' }, erasures.runs.lost],
    ],
  );
  counter(
    'intake_delivery_attempts_total',
    'Delivery attempts made by this node, by outcome: succeeded, retry (failed, another attempt scheduled), failed (failed for good).',
    ['outcome'],
    () => [
      [{ outcome: 'succeeded' }, dispatcher.counts.succeeded],
      [{ outcome: 'retry' }, dispatcher.counts.retried],
      [{ outcome: 'failed' }, dispatcher.counts.failed],
    ],
  );
  counter(
    'intake_delivery_rule_outcomes_total',
    "Deliveries this node's workers settled by a destination's rules without an attempt (filtered, deduplicated), and attempts its transformations failed (transformation_error).",
    ['outcome'],
    () => [
      [{ outcome: 'filtered' }, dispatcher.counts.filtered],
      [{ outcome: 'deduplicated' }, dispatcher.counts.deduplicated],
      [{ outcome: 'transformation_error' }, dispatcher.counts.transformationErrors],
    ],
  );
  counter(
    'intake_transform_workers_replaced_total',
    "Transformation sandbox workers this node stopped and replaced: a run past the wall-clock bound (a built-in call that outran the CPU limit's checks, or a thread starved of CPU), or a worker that died.",
    [],
    () => [[{}, dispatcher.transformWorkersReplaced]],
  );
  counter(
    'intake_delivery_claims_shed_total',
    "Rounds in which this node's delivery worker claimed nothing because intake was near one of its bounds.",
    [],
    () => [[{}, dispatcher.counts.shed]],
  );
  counter(
    'intake_destinations_disabled_total',
    'Destinations this node disabled because they failed for INTAKE_DESTINATION_DISABLE_AFTER_HOURS or answered 410.',
    [],
    () => [[{}, dispatcher.counts.disabled]],
  );
  gauge('intake_deliveries_in_flight', 'Delivery requests this node is making now.', () => dispatcher.inFlightCount);
  counter(
    'intake_thread_busy_seconds_total',
    "Seconds each of the node's threads has been busy rather than waiting for work, by thread: event_loop (HTTP, authentication, " +
      "answers, deliveries' requests); on SQLite sqlite_commit (group commits and delivery exchanges, their fsyncs included) and " +
      "sqlite_read (the API's heavy reads). Its rate is the thread's utilisation: the thread near 1 is what limits the node.",
    ['thread'],
    () => [
      [{ thread: 'event_loop' }, performance.eventLoopUtilization().active / 1000],
      ...parts.store.threadsBusySeconds().map(({ thread, seconds }): [{ thread: string }, number] => [{ thread }, seconds]),
    ],
  );

  const backlog = new SharedRead(() => parts.store.deliveryBacklog(Date.now(), DELIVERY_BACKLOG_CAP), STORE_READ_TIMEOUT_MS);
  new Gauge({
    name: 'intake_delivery_backlog',
    help:
      `Deliveries of every company due and waiting for a worker (not being attempted, not held), counted up to ${DELIVERY_BACKLOG_CAP}; ` +
      'the same on every node sharing the database. Absent when the database did not answer within a second.',
    registers,
    async collect() {
      const read = await backlog.get();
      if (read === undefined) this.reset();
      else this.set(read.due);
    },
  });
  new Gauge({
    name: 'intake_delivery_backlog_oldest_seconds',
    help: 'How long the longest-waiting due delivery has waited for a worker (0 when none); absent when the database did not answer within a second.',
    registers,
    async collect() {
      const read = await backlog.get();
      if (read === undefined) this.reset();
      else this.set(read.oldestDueAt === null ? 0 : Math.max(0, Date.now() - read.oldestDueAt) / 1000);
    },
  });

  // PostgreSQL only: SQLite has no pool, and these are then absent.
  if (parts.store.connectionPool() !== undefined) {
    const pool = () => parts.store.connectionPool()!;
    gauge('intake_postgres_pool_connections', "Connections in this node's PostgreSQL pool, idle or in use.", () => pool().total);
    gauge('intake_postgres_pool_idle_connections', "Idle connections in this node's PostgreSQL pool.", () => pool().idle);
    gauge('intake_postgres_pool_waiting_queries', 'Queries waiting for a connection of the pool (all are in use).', () => pool().waiting);
    gauge('intake_postgres_pool_max_connections', 'The most connections the pool opens (INTAKE_DATABASE_POOL_SIZE).', () => pool().max);
  }

  function gauge(name: string, help: string, value: () => number): void {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(value());
      },
    });
  }

  /** A counter whose values a part keeps: set to them at each scrape. */
  function counter<L extends string>(name: string, help: string, labelNames: L[], values: () => Array<[Partial<Record<L, string>>, number]>): void {
    new Counter({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        for (const [labels, value] of values()) this.inc(labels, value);
      },
    });
  }
}

/** The parts of the app /metrics reads at each scrape. */
export interface WatchedParts {
  store: Pick<Store, 'connectionPool' | 'deliveryBacklog' | 'threadsBusySeconds'>;
  writer: Pick<GroupCommitWriter, 'queued' | 'bytesQueued' | 'oldestWaitMs' | 'droppedLogs' | 'refusedFull'>;
  admission: Pick<AdmissionGate, 'shedBy'>;
  authFailures: Pick<AuthFailureLimiter, 'unloggedRefusals'>;
  keyCache: Pick<KeyCache, 'lookups' | 'invalidations'>;
  counters: { unknownIntegrationRequests: number };
  signIn: Pick<SignIn, 'failures'>;
  readLimits: Pick<ReadLimits, 'streams'>;
  retention: Pick<RetentionJob, 'purged' | 'runs'>;
  erasures: Pick<ErasureRunner, 'runs'>;
  dispatcher: Pick<DeliveryDispatcher, 'counts' | 'inFlightCount' | 'transformWorkersReplaced'>;
}

/** Due deliveries counted at most per scrape: the count reads no more index entries than this. */
const DELIVERY_BACKLOG_CAP = 10_000;
/** A scrape does not wait longer than this for the database; the figures it reads are then absent. */
const STORE_READ_TIMEOUT_MS = 1000;

/** One read shared by the metrics a scrape collects at once, bounded in time; undefined when it failed or took too long. */
class SharedRead<T> {
  private pending: Promise<T | undefined> | undefined;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly timeoutMs: number,
  ) {}

  get(): Promise<T | undefined> {
    this.pending ??= this.readOnce().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  private async readOnce(): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.timeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([this.read().catch(() => undefined), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
