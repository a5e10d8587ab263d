import type { ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { loadConfig } from '../../src/config.js';
import { parseSecretsKeys, SecretBox } from '../../src/domain/secret-box.js';
import { newSigningSecret } from '../../src/destinations/signing.js';
import { Management } from '../../src/services/management.js';
import type { NewDestination } from '../../src/store/store.js';
import type { TestDatabase } from './databases.js';
import { sleep, startServer, TEST_SECRETS_KEY, type Exited, type ServerProcess } from './processes.js';
import { addDestination } from './deliveries.js';
import { startReceiver, type Receiver, type Received } from './receivers.js';
import { WebhookLoad } from './webhook-load.js';

/**
 * Delivery under kill -9 (issue 15, Tests: "Crash"), for any database: a node with two
 * destinations on loopback receivers that answer slowly, concurrent webhooks of a mix of
 * events, SIGKILL while deliveries are in flight, restart on the same database, again, then
 * wait until every delivery settled. What it checks: every webhook the node stored (each
 * one it acknowledged among them) reached every destination it matches, byte for byte and
 * signed, and no other; every request a receiver got is either the attempt recorded for its
 * delivery or one whose result died with the node (the lease left at the kill); so every
 * duplicate is explained by a kill. Nothing here imports Vitest: a run returns its figures
 * and problems, and `boundProblems` says which guarantee failed.
 */

/** One request as a tracking receiver saw it. */
export interface TrackedRequest {
  received: Received;
  /** Date.now() when its body had arrived (the server's clock: rate windows are on it). */
  arrivedAt: number;
  /** `open` until answered; `aborted` when the connection closed first (its sender died). */
  state: 'open' | 'answered' | 'aborted';
}

/** A receiver that holds each request for `holdMs()` before its 200, and counts what is open. */
export interface TrackingReceiver extends Receiver {
  requests: TrackedRequest[];
  /** Requests received and not yet answered nor cut. */
  readonly open: number;
  /** The most requests open at once so far. */
  readonly maxOpen: number;
}

/** A receiver on loopback that answers 200 to each request once `holdMs()` has passed. */
export async function trackingReceiver(holdMs: () => number): Promise<TrackingReceiver> {
  const requests: TrackedRequest[] = [];
  let open = 0;
  let maxOpen = 0;
  const receiver = await startReceiver((response: ServerResponse, received) => {
    const tracked: TrackedRequest = { received, arrivedAt: Date.now(), state: 'open' };
    requests.push(tracked);
    open++;
    maxOpen = Math.max(maxOpen, open);
    const end = (state: 'answered' | 'aborted') => {
      if (tracked.state !== 'open') return;
      tracked.state = state;
      open--;
    };
    response.on('finish', () => end('answered'));
    response.on('close', () => end(response.writableFinished ? 'answered' : 'aborted'));
    setTimeout(() => {
      if (!response.destroyed) response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    }, holdMs());
  });
  return {
    url: receiver.url,
    port: receiver.port,
    received: receiver.received,
    requests,
    get connections() {
      return receiver.connections;
    },
    get open() {
      return open;
    },
    get maxOpen() {
      return maxOpen;
    },
    close: () => receiver.close(),
  };
}

/** Seals as every server of the tests opens (processes.ts's TEST_SECRETS_KEY); helpers.ts would bring Vitest in. */
const BOX = new SecretBox(parseSecretsKeys(TEST_SECRETS_KEY));

/** A uniform hold between `min` and `max` milliseconds. */
export function holdBetween(min: number, max: number): () => number {
  return () => min + Math.random() * (max - min);
}

/** A company with one integration, and the integration's key in plaintext. */
export interface DeliveryTenant {
  companyId: string;
  integrationId: string;
  integrationKey: string;
  apiKey: string;
}

/** Makes the tenant in the store as the CLI would (the servers started later read it there). */
export async function createDeliveryTenant(database: TestDatabase): Promise<DeliveryTenant> {
  const config = loadConfig({ LOG_LEVEL: 'silent' });
  const management = new Management(
    database.store,
    { environment: config.environment, baseUrl: config.baseUrl, defaultBodyLimit: config.defaultBodyLimit, secrets: BOX },
    { type: 'cli', id: 'test', ip: null },
  );
  const company = await management.createCompany('Delivery test');
  const created = await management.createIntegration(company.id, { name: 'Delivery test' });
  return {
    companyId: company.id,
    integrationId: created.integration.id,
    integrationKey: created.integration.integrationKey,
    apiKey: created.apiKey,
  };
}

/**
 * A destination made directly in the store (the API is tested on its own), its secret
 * sealed with the tests' key, which every server of the tests shares. Returns its id and
 * signing secret.
 */
export async function createStoreDestination(
  database: TestDatabase,
  companyId: string,
  settings: Partial<NewDestination> & { url: string },
): Promise<{ id: string; secret: string }> {
  const secret = newSigningSecret();
  const id = await addDestination(database.store, companyId, {
    name: 'Receiver',
    timeoutMs: 5000,
    maxInFlight: 1000,
    secretSealed: BOX.seal(secret),
    ...settings,
  });
  return { id, secret };
}

/** Raw SQL with `?` placeholders, numbered for PostgreSQL. */
export function query<T>(database: TestDatabase, sql: string, params: unknown[] = []): Promise<T[]> {
  let n = 0;
  return database.query<T>(database.dialect === 'postgres' ? sql.replace(/\?/g, () => `$${++n}`) : sql, params);
}

/** A `deliveries` row, as the checks read it. */
export interface DeliveryRow {
  id: string;
  destination_id: string;
  webhook_uuid: string;
  state: string;
  attempts: number;
}

/** A `delivery_attempts` row, as the checks read it. */
export interface AttemptRow {
  delivery_id: string;
  number: number;
  status: number | null;
  error: string | null;
}

/** Every delivery row of the company, settled or not. */
export function deliveryRows(database: TestDatabase, companyId: string): Promise<DeliveryRow[]> {
  return query<DeliveryRow>(database, 'select id, destination_id, webhook_uuid, state, attempts from deliveries where company_id = ?', [companyId]);
}

/** Every delivery attempt row of the company. */
export function attemptRows(database: TestDatabase, companyId: string): Promise<AttemptRow[]> {
  return query<AttemptRow>(database, 'select delivery_id, number, status, error from delivery_attempts where company_id = ?', [companyId]);
}

/** How many of the company's deliveries are not settled yet (pending or held). */
export async function unsettledCount(database: TestDatabase, companyId: string): Promise<number> {
  const [row] = await query<{ n: number | string }>(
    database,
    "select count(*) as n from deliveries where company_id = ? and state in ('pending', 'held')",
    [companyId],
  );
  return Number(row!.n);
}

/** Polls until `probe` holds, every `intervalMs`; throws past the bound. */
export async function until(probe: () => boolean | Promise<boolean>, what: string, timeoutMs: number, intervalMs = 20): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await probe())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** The filtered destination of a crash run (the other takes `*`): `*` spans dots, so `*.1` takes crash.test.1. */
const SOME_PATTERNS = ['*.1', 'crash.test.3'];
/** The expectation, written apart from the matcher under test (the load's events are crash.test.0 to .3). */
const SOME_MATCHES = (event: string) => event === 'crash.test.1' || event === 'crash.test.3';

/** How a crash run loads and kills its node. */
export interface DeliveryCrashOptions {
  /** A fresh, migrated database; the run makes its own tenant and destinations in it. */
  database: TestDatabase;
  cycles: number;
  /** INTAKE_DELIVERY_CONCURRENCY: the bound on what one kill can leave unrecorded. */
  deliveryConcurrency: number;
  /** INTAKE_DELIVERY_LEASE_SECONDS: how long a dead node's claims outlive the timeout. */
  leaseSeconds: number;
  /** The destinations' timeout; a claim of the dead node is free timeout + lease after it was made. */
  timeoutMs: number;
  /** Each cycle kills once at least this many (up to twice as many) 202s came in it. */
  minAcksPerCycle: number;
  /** Concurrent senders of webhooks. */
  senders: number;
}

/** What one kill left behind. */
export interface KillFigures {
  cycle: number;
  /** 202s received in this cycle. */
  acknowledged: number;
  /** Requests open at the receivers when SIGKILL was sent. */
  openAtKill: number;
  /** Claims of the dead node still leased in the database after the kill (results never written). */
  leasedAtKill: number;
  /** Of those, how many had reached their receiver: each is one duplicate once sent again. */
  lostButReceived: number;
  /** Milliseconds from spawning the node to its /healthz answering. */
  startMs: number;
  /** Milliseconds from the node answering to the kill. */
  runMs: number;
}

/** What one destination received over the run. */
export interface DestinationFigures {
  name: string;
  /** Deliveries the stored webhooks call for. */
  expected: number;
  /** Requests the receiver got, answered or cut. */
  requests: number;
  /** Distinct webhooks answered at least once. */
  delivered: number;
  /** Requests beyond the first, per webhook. */
  duplicates: number;
}

/** A crash run's figures, and the problems its checks found. */
export interface DeliveryCrashResult {
  kills: KillFigures[];
  acknowledged: number;
  /** Webhooks stored (the acknowledged ones and those whose 202 died with the node). */
  stored: number;
  destinations: DestinationFigures[];
  duplicates: number;
  /** From the last restart to every delivery settled. */
  settleMs: number;
  /** How the last node ended on SIGTERM. */
  exit: Exited;
  problems: string[];
}

/**
 * The whole crash run: `cycles` times a node under load killed while deliveries are in
 * flight, then one more node that settles everything, then the checks.
 */
export async function deliveryCrashRun(options: DeliveryCrashOptions): Promise<DeliveryCrashResult> {
  const { database } = options;
  const problems: string[] = [];
  const receivers: TrackingReceiver[] = [];
  let server: ServerProcess | undefined;
  try {
    const tenant = await createDeliveryTenant(database);
    const every = await trackingReceiver(holdBetween(50, 150));
    const some = await trackingReceiver(holdBetween(50, 150));
    receivers.push(every, some);
    const base = { timeoutMs: options.timeoutMs, maxInFlight: 1000 };
    const destinations = [
      {
        name: 'every event',
        receiver: every,
        matches: () => true,
        ...(await createStoreDestination(database, tenant.companyId, { ...base, url: every.url, eventPatterns: ['*'] })),
      },
      {
        name: 'some events',
        receiver: some,
        matches: SOME_MATCHES,
        ...(await createStoreDestination(database, tenant.companyId, { ...base, url: some.url, eventPatterns: SOME_PATTERNS })),
      },
    ];
    const env = {
      LOG_LEVEL: 'warn',
      INTAKE_DESTINATION_ALLOW: '127.0.0.1/32',
      INTAKE_DELIVERY_CONCURRENCY: String(options.deliveryConcurrency),
      INTAKE_DELIVERY_LEASE_SECONDS: String(options.leaseSeconds),
    };
    const open = () => receivers.reduce((sum, receiver) => sum + receiver.open, 0);

    const acked = new Map<string, string>();
    const kills: Array<Omit<KillFigures, 'lostButReceived'> & { lost: Set<string> }> = [];
    /** `delivery id/attempt` of every claim that died with its node. */
    const lostClaims = new Set<string>();
    for (let cycle = 1; cycle <= options.cycles; cycle++) {
      const startedAt = performance.now();
      server = await startServer({ databaseUrl: database.databaseUrl, env });
      const node = server;
      const startMs = Math.round(performance.now() - startedAt);
      const load = new WebhookLoad({
        concurrency: options.senders,
        targets: [{ address: node.url(`/api/webhooks/${tenant.integrationKey}`), apiKey: tenant.apiKey }],
      });
      const wanted = options.minAcksPerCycle + Math.floor(Math.random() * options.minAcksPerCycle);
      let loadEnded = false;
      void load.done.then(() => (loadEnded = true));
      await until(() => load.acked.size >= wanted || loadEnded, `${wanted} acknowledgements`, 20_000);
      if (loadEnded) throw new Error(`the senders stopped before ${wanted} 202s: ${JSON.stringify(load.failures.slice(0, 3))}; ${node.describe()}`);
      await sleep(Math.random() * 200);
      // The point of the cycle: the kill comes while the node has requests open at the receivers.
      await until(() => open() > 0, 'deliveries in flight at the receivers', 10_000);
      load.stop();
      const openAtKill = open();
      node.child.kill('SIGKILL');
      const runMs = Math.round(performance.now() - startedAt) - startMs;
      await node.kill();
      await load.done;
      for (const [uuid, body] of load.acked) acked.set(uuid, body);
      if (node.exitInfo?.signal !== 'SIGKILL') problems.push(`cycle ${cycle}: the node was not killed by SIGKILL: ${node.describe()}`);
      // PostgreSQL applies or rolls back what the dead node had sent before it sees the socket close.
      await sleep(300);

      const leased = await query<{ id: string; attempts: number }>(
        database,
        "select id, attempts from deliveries where company_id = ? and state = 'pending' and lease_token is not null",
        [tenant.companyId],
      );
      // A claim left by an earlier kill may still be leased: it was counted then.
      const lost = new Set(leased.map((row) => `${row.id}/${row.attempts}`).filter((claim) => !lostClaims.has(claim)));
      for (const claim of lost) lostClaims.add(claim);
      kills.push({ cycle, acknowledged: load.acked.size, openAtKill, leasedAtKill: lost.size, lost, startMs, runMs });
    }

    const restartedAt = performance.now();
    server = await startServer({ databaseUrl: database.databaseUrl, env });
    const settleBound = options.timeoutMs + options.leaseSeconds * 1000 + 30_000;
    // A query opens a connection of its own: every 100 ms is enough, and keeps the receivers' process free.
    await until(async () => open() === 0 && (await unsettledCount(database, tenant.companyId)) === 0, 'every delivery settled', settleBound, 100);
    const settleMs = Math.round(performance.now() - restartedAt);
    const exit = await server.stop();

    const stored = await query<{ uuid: string; event: string; raw_body: Buffer }>(
      database,
      'select uuid, event, raw_body from webhooks where company_id = ?',
      [tenant.companyId],
    );
    const rows = await deliveryRows(database, tenant.companyId);
    const attempts = await attemptRows(database, tenant.companyId);
    const figures = destinations.map((destination) =>
      checkDestination(destination, {
        stored,
        acked,
        rows: rows.filter((row) => row.destination_id === destination.id),
        attempts,
        lostClaims,
        problems,
      }),
    );

    const storedUuids = new Set(stored.map((webhook) => webhook.uuid));
    const lost = [...acked.keys()].filter((uuid) => !storedUuids.has(uuid));
    if (lost.length > 0) problems.push(`${lost.length} acknowledged webhooks are not stored, e.g. ${lost[0]}`);
    const known = new Set(destinations.map((destination) => destination.id));
    const strays = rows.filter((row) => !known.has(row.destination_id));
    if (strays.length > 0) problems.push(`${strays.length} delivery rows of no destination of the run`);

    const sent = new Set(receivers.flatMap((receiver) => receiver.requests.map((request) => claimOf(request.received))));
    return {
      kills: kills.map(({ lost, ...kill }) => ({ ...kill, lostButReceived: [...lost].filter((claim) => sent.has(claim)).length })),
      acknowledged: acked.size,
      stored: stored.length,
      destinations: figures,
      duplicates: figures.reduce((sum, figure) => sum + figure.duplicates, 0),
      settleMs,
      exit,
      problems,
    };
  } finally {
    await server?.kill();
    await Promise.all(receivers.map((receiver) => receiver.close()));
  }
}

/** `delivery id/attempt number` of a request: which claim sent it. */
function claimOf(request: Received): string {
  return `${String(request.headers['x-intake-delivery-id'])}/${String(request.headers['x-intake-attempt'])}`;
}

/**
 * One destination against what was stored: the right webhooks, each answered at least
 * once, bodies, events and signatures as sent, one settled row and one recorded attempt
 * each, and every other request one whose claim died with a node.
 */
function checkDestination(
  destination: { name: string; id: string; secret: string; receiver: TrackingReceiver; matches: (event: string) => boolean },
  data: {
    stored: Array<{ uuid: string; event: string; raw_body: Buffer }>;
    acked: ReadonlyMap<string, string>;
    rows: DeliveryRow[];
    attempts: AttemptRow[];
    lostClaims: ReadonlySet<string>;
    problems: string[];
  },
): DestinationFigures {
  const { problems } = data;
  const problem = (text: string) => {
    if (problems.length < 40) problems.push(`${destination.name}: ${text}`);
  };
  const byUuid = new Map(data.stored.map((webhook) => [webhook.uuid, webhook]));
  const rowByUuid = new Map<string, DeliveryRow>();
  for (const row of data.rows) {
    if (rowByUuid.has(row.webhook_uuid)) problem(`two delivery rows for webhook ${row.webhook_uuid}`);
    rowByUuid.set(row.webhook_uuid, row);
    if (row.state !== 'succeeded') problem(`delivery ${row.id} ended ${row.state}`);
  }
  const rowIds = new Set(data.rows.map((row) => row.id));
  const recorded = new Map<string, AttemptRow[]>();
  for (const attempt of data.attempts) {
    if (!rowIds.has(attempt.delivery_id)) continue;
    recorded.set(attempt.delivery_id, [...(recorded.get(attempt.delivery_id) ?? []), attempt]);
  }
  for (const row of data.rows) {
    const [only, ...more] = recorded.get(row.id) ?? [];
    if (only === undefined || more.length > 0) {
      problem(`delivery ${row.id} has ${more.length + (only ? 1 : 0)} recorded attempts, not 1`);
      continue;
    }
    if (only.status === null || only.status < 200 || only.status > 299 || only.error !== null) {
      problem(`delivery ${row.id}'s attempt: status ${only.status}, error ${only.error}`);
    }
    if (Number(only.number) !== Number(row.attempts)) problem(`delivery ${row.id}: attempt row ${only.number} but ${row.attempts} attempts counted`);
  }

  const verifier = new Webhook(destination.secret);
  const perUuid = new Map<string, number>();
  const answered = new Set<string>();
  const claims = new Set<string>();
  for (const { received, state } of destination.receiver.requests) {
    const uuid = String(received.headers['webhook-id']);
    perUuid.set(uuid, (perUuid.get(uuid) ?? 0) + 1);
    if (state === 'answered') answered.add(uuid);
    const webhook = byUuid.get(uuid);
    if (!webhook) {
      problem(`received webhook-id ${uuid}, which is not a stored webhook`);
      continue;
    }
    if (!received.body.equals(Buffer.from(webhook.raw_body))) problem(`${uuid}: body differs from the stored raw body`);
    const sent = data.acked.get(uuid);
    if (sent !== undefined && !received.body.equals(Buffer.from(sent, 'utf8'))) problem(`${uuid}: body differs from the bytes sent`);
    if (received.headers['x-intake-event'] !== webhook.event) {
      problem(`${uuid}: x-intake-event ${received.headers['x-intake-event']}, stored ${webhook.event}`);
    }
    if (!destination.matches(webhook.event)) problem(`${uuid} (event ${webhook.event}) was sent to it, which does not match`);
    try {
      verifier.verify(received.body.toString('utf8'), received.headers as Record<string, string>);
    } catch (error) {
      problem(`${uuid}: signature does not verify (${(error as Error).message})`);
    }
    const claim = claimOf(received);
    if (claims.has(claim)) problem(`claim ${claim} was sent twice`);
    claims.add(claim);
    const row = rowByUuid.get(uuid);
    if (row === undefined || received.headers['x-intake-delivery-id'] !== row.id) {
      problem(`${uuid}: x-intake-delivery-id ${received.headers['x-intake-delivery-id']} is not its delivery row`);
      continue;
    }
    // Either the attempt its row records, or one whose node died before writing its result.
    if (Number(received.headers['x-intake-attempt']) !== Number(row.attempts) && !data.lostClaims.has(claim)) {
      problem(`${uuid}: attempt ${received.headers['x-intake-attempt']} is neither the recorded one (${row.attempts}) nor a claim lost in a kill`);
    }
  }

  let expected = 0;
  for (const webhook of data.stored) {
    const row = rowByUuid.get(webhook.uuid);
    if (destination.matches(webhook.event)) {
      expected++;
      if (!row) problem(`${webhook.uuid} (event ${webhook.event}) has no delivery row`);
      if (!answered.has(webhook.uuid)) {
        problem(`${webhook.uuid} (event ${webhook.event}${data.acked.has(webhook.uuid) ? ', acknowledged' : ''}) was never delivered`);
      }
    } else if (row) {
      problem(`${webhook.uuid} (event ${webhook.event}) has a delivery row but does not match`);
    }
  }
  const duplicates = [...perUuid.values()].reduce((sum, n) => sum + n - 1, 0);
  return { name: destination.name, expected, requests: destination.receiver.requests.length, delivered: answered.size, duplicates };
}

/** One line per kill and one for the run, for the record of each run. */
export function reportRun(name: string, result: DeliveryCrashResult): void {
  for (const kill of result.kills) {
    console.log(
      `${name} delivery crash, kill ${kill.cycle}: acknowledged ${kill.acknowledged}, open at the receivers ${kill.openAtKill}, ` +
        `claims left leased ${kill.leasedAtKill}, of which had reached the receiver (duplicates) ${kill.lostButReceived}, ` +
        `node healthy after ${kill.startMs} ms, killed ${kill.runMs} ms later`,
    );
  }
  const destinations = result.destinations
    .map((d) => `${d.name}: expected ${d.expected}, delivered ${d.delivered}, requests ${d.requests}, duplicates ${d.duplicates}`)
    .join('; ');
  console.log(
    `${name} delivery crash: acknowledged ${result.acknowledged}, stored ${result.stored}; ${destinations}; ` +
      `settled ${result.settleMs} ms after the last restart`,
  );
}

/**
 * The run's guarantees beyond its own checks: both destinations took part (the second
 * with only its events), every kill came while deliveries were in flight and left at most
 * `concurrency` claims unwritten (so at most that many duplicates), and every duplicate is
 * such a claim. Empty when all hold.
 */
export function boundProblems(result: DeliveryCrashResult, concurrency: number): string[] {
  const problems: string[] = [];
  if (result.exit.code !== 0 || result.exit.signal !== null) problems.push(`the last node ended ${JSON.stringify(result.exit)} on SIGTERM`);
  if (result.stored < result.acknowledged) problems.push(`${result.stored} stored < ${result.acknowledged} acknowledged`);
  for (const d of result.destinations) if (d.delivered !== d.expected) problems.push(`${d.name}: delivered ${d.delivered} of ${d.expected}`);
  const [every, some] = result.destinations;
  if (!(some!.expected > 0 && some!.expected < every!.expected)) {
    problems.push(`the filtered destination expected ${some!.expected}, the other ${every!.expected}: the filter was not exercised`);
  }
  for (const kill of result.kills) {
    if (kill.openAtKill === 0) problems.push(`kill ${kill.cycle}: no delivery was in flight`);
    if (kill.leasedAtKill > concurrency) {
      problems.push(`kill ${kill.cycle}: ${kill.leasedAtKill} claims left > INTAKE_DELIVERY_CONCURRENCY ${concurrency}`);
    }
  }
  const explained = result.kills.reduce((sum, kill) => sum + kill.lostButReceived, 0);
  if (result.duplicates !== explained) problems.push(`${result.duplicates} duplicates, ${explained} explained by claims lost in kills`);
  return problems;
}
