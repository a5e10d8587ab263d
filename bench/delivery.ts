import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import type { ClosedLoopHooks, LoadTarget } from './closed-loop.js';
import { percentiles, type OpenLoopResult, type Percentiles } from './open-loop.js';
import type { Receiver } from './receiver.js';
import { SECRETS_ENV, sleep } from './processes.js';

/*
 * What the benchmark needs of destinations: one made straight in the store (the bench
 * compiles apart from src/, so the service's modules are loaded from dist/ at run time and
 * typed here by the little the bench uses), its backlog read from the database, the
 * receiver's records, and the lag from each 202 to the first request the receiver saw.
 */

/** The store methods the bench calls, as dist/store/open-store.js provides them. */
interface DistStore {
  createDestination(companyId: string, destination: Record<string, unknown>, audit: Record<string, unknown>, maxLive: number): Promise<{ id: string } | undefined>;
  destinationStats(
    companyId: string,
    destinationId: string,
    query: { since: number; until: number; bucketMs: number; now: number },
  ): Promise<{ backlog: { pending: number; held: number; inFlight: number } }>;
  deleteDestination(companyId: string, destinationId: string, at: number, audit: Record<string, unknown>): Promise<boolean>;
  reconcileHeldDeliveries(now: number, limit: number): Promise<number>;
  close(): Promise<void>;
}

/** What a destination is made of, as the store takes it. */
type NewDestination = Record<string, unknown> & { id: string };

/**
 * How long the backlog may take to empty after a load before what is left is cancelled, so
 * that the next load starts on an empty outbox and no deliveries run beside another
 * target's measurement.
 */
export const DRAIN_MAX_MS = 15_000;
/** How often the backlog is read while waiting for it to drain. */
const DRAIN_POLL_MS = 100;
/** Deliveries of a deleted destination cancelled per transaction. */
const CANCEL_BATCH = 10_000;

/** One destination of the bench, in the service's database. */
export class BenchDestination {
  private id = '';

  private constructor(
    private readonly store: DistStore,
    readonly companyId: string,
    /** A new destination's settings, a new id each time. */
    private readonly make: () => NewDestination,
  ) {}

  /**
   * Creates a destination of `companyId` for one integration, every event (`*`), to `url`,
   * with the API's default timeout (15 s) but no rate limit (the API's default is 100 a
   * second: the bench measures how fast intake delivers) and `maxInFlight` (the API's
   * default is 100), and a signing secret sealed with the run's key.
   */
  static async create(
    root: string,
    databaseUrl: string,
    target: { companyId: string; integrationId: string; url: string; maxInFlight: number },
  ): Promise<BenchDestination> {
    const dist = (path: string) => import(pathToFileURL(`${root}/dist/${path}`).href);
    const { openStore } = (await dist('store/open-store.js')) as { openStore(url: string, options: { poolSize: number }): DistStore };
    const { SecretBox, parseSecretsKeys } = (await dist('domain/secret-box.js')) as {
      SecretBox: new (keys: Buffer[]) => { seal(plaintext: string): string };
      parseSecretsKeys(value: string): Buffer[];
    };
    const { newSigningSecret } = (await dist('destinations/signing.js')) as { newSigningSecret(): string };
    const { newId } = (await dist('domain/ids.js')) as { newId(prefix: string): string };

    const store = openStore(databaseUrl, { poolSize: 2 });
    const box = new SecretBox(parseSecretsKeys(SECRETS_ENV.INTAKE_SECRETS_KEY));
    const destination = new BenchDestination(store, target.companyId, () => ({
      id: newId('dst'),
      name: 'bench receiver',
      url: target.url,
      integrationIds: [target.integrationId],
      eventPatterns: ['*'],
      headersSealed: null,
      headerNames: [],
      timeoutMs: 15_000,
      ratePerSecond: null,
      maxInFlight: target.maxInFlight,
      secretSealed: box.seal(newSigningSecret()),
      // The rules' own cost is its bench's (rules-delivery.ts): none here.
      rules: { filter: null, transformation: null, deduplicate: null, delayMs: 0, retry: null },
      createdAt: Date.now(),
    }));
    await destination.replace();
    return destination;
  }

  /**
   * Deletes the destination (when there is one) and makes a new one in its place, so the
   * next load starts from an empty outbox. The deleted one's backlog is cancelled here at
   * once, by the store's own reconciliation: the service's worker would take a second per
   * 1,000 rows, and until then its claims would step over them.
   */
  private async replace(): Promise<void> {
    if (this.id !== '') {
      await this.store.deleteDestination(this.companyId, this.id, Date.now(), this.audit('destination.delete', this.id));
      let cancelled: number;
      do cancelled = await this.store.reconcileHeldDeliveries(Date.now(), CANCEL_BATCH);
      while (cancelled > 0);
    }
    const destination = this.make();
    // 50: the service's cap (MAX_DESTINATIONS); the bench keeps one.
    await this.store.createDestination(this.companyId, destination, this.audit('destination.create', destination.id), 50);
    this.id = destination.id;
  }

  private audit(action: string, targetId: string): Record<string, unknown> {
    return { actor: { type: 'cli', id: 'bench', ip: null }, action, targetType: 'destination', targetId, at: Date.now() };
  }

  /** Deliveries not yet settled (waiting or in flight), from the database. */
  async pending(): Promise<number> {
    const now = Date.now();
    // An empty range of attempts: only the backlog is read.
    const stats = await this.store.destinationStats(this.companyId, this.id, { since: now, until: now, bucketMs: 1000, now });
    return stats.backlog.pending;
  }

  /**
   * Reads the backlog when called (the load just stopped), then until it is zero, at most
   * `maxMs`: what was pending at the stop, and the seconds it took to reach zero (null if
   * it did not within `maxMs`; `left` says how many were still pending then, and those are
   * cancelled, see replace).
   */
  async drain(maxMs: number): Promise<DrainResult> {
    const stoppedAt = performance.now();
    const atStop = await this.pending();
    let left = atStop;
    while (left > 0 && performance.now() - stoppedAt < maxMs) {
      await sleep(DRAIN_POLL_MS);
      left = await this.pending();
    }
    if (left > 0) await this.replace();
    return { pendingAtStop: atStop, drainedSeconds: left === 0 ? round2((performance.now() - stoppedAt) / 1000) : null, left };
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/** One closed-loop round on the destination's integration, as the receiver and the outbox saw it. */
export interface DeliveryRound extends DrainResult {
  round: number;
  /** Intake's 2xx per second in the round. */
  acceptedPerSecond: number;
  /** Requests per second the receiver got while the load lasted. */
  deliveredPerSecond: number;
  deliveredToAccepted: number;
  /** Claims the delivery worker skipped during the load because intake was near a bound. */
  claimsShed: number;
}

export interface DrainResult {
  pendingAtStop: number;
  /** Null when the backlog was not zero after the wait. */
  drainedSeconds: number | null;
  /** Still pending after the wait, then cancelled. */
  left: number;
}

/**
 * How many times the service's delivery worker skipped a claim because intake was near one
 * of its bounds (`intake_delivery_claims_shed_total` in /metrics): deliveries wait first.
 */
export async function claimsShed(servicePort: number): Promise<number> {
  const metrics = await (await fetch(`http://127.0.0.1:${servicePort}/metrics`)).text();
  const match = /^intake_delivery_claims_shed_total (\d+)$/m.exec(metrics);
  if (!match?.[1]) throw new Error('no intake_delivery_claims_shed_total in /metrics');
  return Number(match[1]);
}

/**
 * The 202s of an open loop, by uuid, with the time each came back: wall-clock ms, as the
 * receiver (nginx) stamps its arrivals.
 */
export class AcceptedLog {
  readonly answeredAt = new Map<string, number>();

  /** An open loop's onAnswer: keeps the 202s' uuids. */
  readonly onAnswer = (status: number, body: Buffer): void => {
    const at = Date.now();
    if (status !== 202) return;
    const uuid = (JSON.parse(body.toString('utf8')) as { uuid?: string }).uuid;
    if (uuid) this.answeredAt.set(uuid, at);
  };
}

export interface LagResult {
  /** Webhooks answered 202. */
  accepted: number;
  /** Of those, how many reached the receiver by the end of the wait. */
  delivered: number;
  /** Requests the receiver saw beyond the first for the same webhook (at-least-once). */
  duplicates: number;
  /**
   * From the 202 reaching the generator to the first request reaching the receiver, over
   * every accepted webhook; one never delivered counts as infinitely late, so when more
   * than 1 % were missing p99 is Infinity (JSON: null).
   */
  lagMs: Percentiles;
  /** Negative when a delivery overtook its own 202 on the way back. */
  minMs: number;
  /**
   * The lag of the webhooks answered in each second of the load (from its first 202): where
   * in the run the late ones were, a stall or a backlog that grew.
   */
  bySecond: Array<{ second: number; accepted: number; p50: number; p99: number }>;
}

/** Sets each accepted webhook's 202 against its first arrival at the receiver. */
export function lagOf(accepted: AcceptedLog, arrivals: { ids: string[]; arrivedAt: number[] }): LagResult {
  const first = new Map<string, number>();
  let duplicates = 0;
  arrivals.ids.forEach((id, index) => {
    if (!accepted.answeredAt.has(id)) return;
    if (first.has(id)) duplicates++;
    else first.set(id, arrivals.arrivedAt[index] ?? Number.NaN);
  });
  let start = Number.POSITIVE_INFINITY;
  for (const answeredAt of accepted.answeredAt.values()) start = Math.min(start, answeredAt);
  const lags: number[] = [];
  const seconds: number[][] = [];
  for (const [uuid, answeredAt] of accepted.answeredAt) {
    const arrivedAt = first.get(uuid);
    const lag = arrivedAt === undefined ? Number.POSITIVE_INFINITY : arrivedAt - answeredAt;
    lags.push(lag);
    (seconds[Math.floor((answeredAt - start) / 1000)] ??= []).push(lag);
  }
  const bySecond = seconds.flatMap((inSecond, second) => {
    if (inSecond === undefined) return [];
    const { p50, p99 } = percentiles(inSecond);
    return [{ second, accepted: inSecond.length, p50, p99 }];
  });
  return {
    bySecond,
    accepted: accepted.answeredAt.size,
    delivered: first.size,
    duplicates,
    lagMs: percentiles(lags),
    minMs: round2(lags.reduce((min, lag) => Math.min(min, lag), Number.POSITIVE_INFINITY)),
  };
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

/**
 * Around each load on the destination's integration: how many requests the receiver saw
 * while it lasted, then the outbox's backlog when it stopped and the wait until it is empty
 * (so the next target is measured without deliveries still running beside it).
 */
export function measureDeliveries(
  target: LoadTarget,
  servicePort: number,
  receiver: Receiver,
  destination: BenchDestination,
  into: DeliveryRound[],
): ClosedLoopHooks {
  let countBefore = 0;
  let shedBefore = 0;
  let startedAt = 0;
  return {
    async beforeFire(fired) {
      if (fired !== target) return;
      countBefore = receiver.count();
      shedBefore = await claimsShed(servicePort);
      startedAt = performance.now();
    },
    async afterFire(fired, round, result) {
      if (fired !== target) return;
      const seconds = (performance.now() - startedAt) / 1000;
      const deliveredPerSecond = (receiver.count() - countBefore) / seconds;
      const shed = (await claimsShed(servicePort)) - shedBefore;
      const drain = await destination.drain(DRAIN_MAX_MS);
      const drained =
        drain.drainedSeconds === null ? `${drain.left} left after ${DRAIN_MAX_MS / 1000} s, cancelled` : `empty after ${drain.drainedSeconds} s`;
      process.stdout.write(
        `    receiver ${Math.round(deliveredPerSecond)}/s, claims shed ${shed}; ${drain.pendingAtStop} pending at the stop, ${drained}\n`,
      );
      if (result === null) return;
      into.push({
        round,
        acceptedPerSecond: result.requestsPerSecond,
        deliveredPerSecond: Math.round(deliveredPerSecond),
        deliveredToAccepted: Math.round((deliveredPerSecond / Math.max(1, result.requestsPerSecond)) * 100) / 100,
        claimsShed: shed,
        ...drain,
      });
    },
  };
}

/**
 * The lag phase: `load` runs an open loop on the destination's integration, keeping its
 * 202s in the log it is given; then the backlog is drained and each accepted webhook's 202
 * is set against its first arrival at the receiver.
 */
export async function measureLag(
  receiver: Receiver,
  destination: BenchDestination,
  load: (accepted: AcceptedLog) => Promise<OpenLoopResult>,
): Promise<{ load: OpenLoopResult; drain: DrainResult; lag: LagResult }> {
  const accepted = new AcceptedLog();
  const arrivalsFrom = receiver.count();
  const loaded = await load(accepted);
  const drain = await destination.drain(DRAIN_MAX_MS);
  return { load: loaded, drain, lag: lagOf(accepted, receiver.arrivals(arrivalsFrom)) };
}

/** A lag phase in a line: delivered, duplicates, percentiles and the p99 by second. */
export function describeLag(lag: LagResult): string {
  return (
    `${lag.delivered} of ${lag.accepted} delivered (${lag.duplicates} twice), lag p50 ${lag.lagMs.p50} ms, p99 ${lag.lagMs.p99} ms; ` +
    `p99 by second ${lag.bySecond.map((second) => Math.round(second.p99)).join(' ')} ms`
  );
}
