import { mkdirSync, writeFileSync } from 'node:fs';
import { describeThreadsBusy, type ClosedLoopRound, type CurvePoint, type summarize } from './closed-loop.js';
import type { DeliveryRound, DrainResult, LagResult } from './delivery.js';
import type { OpenLoopResult, Percentiles } from './open-loop.js';
import type { OverloadResult } from './overload.js';

type Summary = ReturnType<typeof summarize>;

/** Everything one run measured; written as JSON beside the others in bench/results/. */
export interface BenchResults {
  date: string;
  store: 'sqlite' | 'postgres';
  machine: {
    cpus: number;
    cpuModel: string;
    node: string;
    busyBeforeStartPercent: number;
    /** Over the whole run (machine-load.ts), in percent of every core: busy, and busy with others' work. */
    busyDuringPercent?: number;
    othersDuringPercent?: number;
  };
  body: { source: string; event: string; bytes: number };
  settings: {
    /** The closed loop's load generator (before wrk: autocannon, in the bench's process). */
    generator: string;
    rounds: number;
    seconds: number;
    connections: number;
    warmupSeconds: number;
    curveConnections: number[];
    curveSeconds: number;
  };
  closedLoop: {
    rounds: ClosedLoopRound[];
    /** The durable floor (floor.ts), on the run's kind of database; every figure is read against it. */
    floor: Summary;
    service: Summary;
    baseline: Summary;
    serviceToFloor: number;
    baselineToFloor: number;
    serviceToBaseline: number;
    /** The same load on a github source (signature, no key): what verification costs. */
    githubSource?: Summary;
    githubSourceToService?: number;
    /** The same load on an integration that redacts five paths before storing (issue 40). */
    redacting?: Summary;
    redactingToService?: number;
    servicePeakRssMb: number;
    floorPeakRssMb: number;
    baselinePeakRssMb: number;
  };
  /** One short round per target (the floor and the service) at each of settings.curveConnections. */
  curve: CurvePoint[];
  /** The floor and the service at settings.connections, each request on a new connection (absent before 2026-11-29's r24). */
  newConnectionEach?: CurvePoint[];
  openLoop: OpenLoopResult;
  /** The floor at the same rate as openLoop (absent before 2026-11-28's r21). */
  floorOpenLoop?: OpenLoopResult;
  /** Intake with one destination per integration, and the deliveries to a local receiver. */
  destinations?: {
    /** The destination's requests in flight at most (`--max-in-flight`). */
    maxInFlight: number;
    /** How long the run waits for a backlog to empty before cancelling it. */
    drainMaxSeconds: number;
    /** The closed loop on the integration that has a destination. */
    closedLoop: Summary;
    /** Its median throughput over the service's (an integration without one). */
    toService: number;
    rounds: DeliveryRound[];
    /** Medians over the rounds. */
    deliveredPerSecond: number;
    deliveredToAccepted: number;
    maxPendingAtStop: number;
    /** The longest wait for the backlog to empty after a round; null if one did not. */
    slowestDrainSeconds: number | null;
    /** The open loop at half the service's maximum on the integration with a destination. */
    lagLoad: OpenLoopResult;
    lag: LagResult & { drain: DrainResult; claimsShed: number };
    /** Requests the receiver got in the whole run. */
    receivedTotal: number;
    /** The peak RSS over the closed loop of the process serving this target (a process of its own since 2026-11-28's r20). */
    peakRssMb?: number;
  };
  overload: OverloadResult & {
    /** Percent of the requests scheduled: 202, 503, timeout, and the rest (other answers, failed connections, not sent). */
    shares: OverloadShares;
    peakRssMb: number;
    aliveAfter: boolean;
  };
  serviceExitCode: number | null;
}

interface Row {
  measure: string;
  result: string;
  target: string;
  pass?: boolean;
}

/** The targets of the performance issue, each beside what this run measured; figures read against the floor. */
export function rows(results: BenchResults): Row[] {
  const { closedLoop, openLoop, overload } = results;
  const { floor } = closedLoop;
  const overloadOther = Object.entries(overload.statuses).filter(([status]) => status !== '202' && status !== '503');
  return [
    { measure: `closed loop: floor req/s (median, ${results.store})`, result: int(floor.requestsPerSecond), target: '' },
    { measure: 'closed loop: service req/s (median)', result: throughputOfFloor(closedLoop.service, floor), target: '' },
    { measure: 'closed loop: baseline req/s (median)', result: throughputOfFloor(closedLoop.baseline, floor), target: '' },
    ...cpuRows(results),
    // The goal of the issue before the floor (docs/performance-history.md, "before issue 16"), whose
    // figures now read against the floor: shown, no longer judged.
    { measure: 'throughput service/baseline', result: closedLoop.serviceToBaseline.toFixed(2), target: '' },
    ...(closedLoop.githubSource && closedLoop.githubSourceToService !== undefined
      ? [
          {
            measure: 'closed loop: github source req/s (median)',
            result: throughputOfFloor(closedLoop.githubSource, floor),
            target: '',
          },
          {
            measure: 'throughput github source/api_key',
            result: closedLoop.githubSourceToService.toFixed(2),
            target: '>= 0.90',
            pass: closedLoop.githubSourceToService >= 0.9,
          },
        ]
      : []),
    ...(closedLoop.redacting && closedLoop.redactingToService !== undefined
      ? [
          {
            measure: 'closed loop: five redaction paths req/s (median)',
            result: throughputOfFloor(closedLoop.redacting, floor),
            target: '',
          },
          {
            measure: 'throughput redacting/none',
            result: closedLoop.redactingToService.toFixed(2),
            target: '>= 0.90',
            pass: closedLoop.redactingToService >= 0.9,
          },
        ]
      : []),
    ...destinationRows(results),
    ...newConnectionRows(results),
    { measure: 'closed loop: floor p50/p99/p99.9', result: latencies(floor), target: '' },
    { measure: 'closed loop: service p50/p99/p99.9', result: latenciesOfFloor(closedLoop.service, floor), target: '' },
    { measure: 'closed loop: baseline p50/p99/p99.9', result: latenciesOfFloor(closedLoop.baseline, floor), target: '' },
    {
      measure: 'closed loop: non-2xx/errors: service, floor',
      result: `${closedLoop.service.non2xx}/${closedLoop.service.errors}, ${floor.non2xx}/${floor.errors}`,
      target: '',
    },
    {
      measure: 'peak RSS at max load (the service; the destination target has a process of its own)',
      result: `${closedLoop.servicePeakRssMb} MB`,
      target: '<= 200 MB',
      pass: closedLoop.servicePeakRssMb <= 200,
    },
    {
      measure: 'peak RSS at max load: floor, baseline',
      result: `${closedLoop.floorPeakRssMb} MB, ${closedLoop.baselinePeakRssMb} MB`,
      target: '',
    },
    {
      measure: `open loop @ ${int(openLoop.ratePerSecond)}/s (50%) p50/p99/p99.9`,
      result:
        latencies(openLoop.latencyMs) +
        (results.floorOpenLoop ? ` (p99 ${ratio(openLoop.latencyMs.p99, results.floorOpenLoop.latencyMs.p99)}x floor)` : ''),
      target: 'p99 <= 10 ms',
      pass: openLoop.latencyMs.p99 <= 10,
    },
    ...(results.floorOpenLoop
      ? [{ measure: 'open loop: floor at the same rate p50/p99/p99.9', result: latencies(results.floorOpenLoop.latencyMs), target: '' }]
      : []),
    { measure: 'open loop: answers', result: statuses(openLoop), target: '' },
    { measure: 'open loop: generator lag p99', result: `${openLoop.generatorLagMs.p99} ms`, target: '' },
    warmupRow('open loop', openLoop),
    {
      measure: `overload @ ${int(overload.ratePerSecond)}/s (2x): answers`,
      result: statuses(overload),
      target: 'only 202/503',
      pass: overloadOther.length === 0,
    },
    {
      measure: 'overload: share of scheduled',
      result: Object.entries(overload.shares)
        .map(([outcome, percent]) => `${outcome} ${percent}%`)
        .join(', '),
      target: '',
    },
    { measure: 'overload: p50/p99/p99.9', result: latencies(overload.latencyMs), target: '' },
    { measure: 'overload: generator lag p99', result: `${overload.generatorLagMs.p99} ms`, target: '' },
    {
      measure: 'overload: peak RSS',
      result: `${overload.peakRssMb} MB`,
      target: '<= 300 MB',
      pass: overload.peakRssMb <= 300,
    },
    {
      measure: 'overload: recovery',
      result: overload.recoverySeconds === null ? 'none in 15 s' : `${overload.recoverySeconds} s`,
      target: '<= 5 s',
      pass: overload.recoverySeconds !== null && overload.recoverySeconds <= 5,
    },
    {
      measure: 'no crash (alive after, exit code)',
      result: `${overload.aliveAfter ? 'alive' : 'DEAD'}, exit ${results.serviceExitCode}`,
      target: 'alive, exit 0',
      pass: overload.aliveAfter && results.serviceExitCode === 0,
    },
  ];
}

/** The round with a new connection for each request, read against the floor's. */
function newConnectionRows(results: BenchResults): Row[] {
  const at = (target: string) => results.newConnectionEach?.find((point) => point.target === target);
  const floor = at('floor');
  const service = at('service');
  if (!floor || !service) return [];
  return [
    {
      measure: `a new connection each (Connection: close), ${results.settings.connections} connections: service, floor req/s`,
      result: `${int(service.requestsPerSecond)} (${ratio(service.requestsPerSecond, floor.requestsPerSecond)} of floor), ${int(floor.requestsPerSecond)}`,
      target: '',
    },
  ];
}

/** Percent of an overload's scheduled requests by outcome, with one decimal. */
export type OverloadShares = Record<'202' | '503' | 'timeout' | 'other', number>;

/** What became of the requests an overload scheduled; `other` holds other statuses, failed connections and the never sent. */
export function overloadShares(overload: OpenLoopResult): OverloadShares {
  const percent = (count: number) => Math.round((count / Math.max(1, overload.scheduled)) * 1000) / 10;
  const accepted = overload.statuses['202'] ?? 0;
  const shed = overload.statuses['503'] ?? 0;
  const timeout = overload.statuses.timeout ?? 0;
  return {
    '202': percent(accepted),
    '503': percent(shed),
    timeout: percent(timeout),
    other: percent(overload.scheduled - accepted - shed - timeout),
  };
}

/**
 * CPU time per 2xx of each target's server (and the database server's on PostgreSQL), as a
 * multiple of the floor's: the rate moves with the shared machine's speed, this much less.
 */
function cpuRows(results: BenchResults): Row[] {
  const { closedLoop, destinations } = results;
  const floorCpu = closedLoop.floor.cpuPerRequestUs;
  // Results written before the bench measured CPU have none.
  if (floorCpu == null) return [];
  const targets: Array<[string, { cpuPerRequestUs?: number | null } | undefined]> = [
    ['service', closedLoop.service],
    ['service + destination', destinations?.closedLoop],
    ['github source', closedLoop.githubSource],
    ['baseline', closedLoop.baseline],
  ];
  const measured = targets.flatMap(([name, summary]) =>
    summary?.cpuPerRequestUs == null ? [] : [`${name} ${int(summary.cpuPerRequestUs)} (${(summary.cpuPerRequestUs / floorCpu).toFixed(2)}x)`],
  );
  return [
    { measure: `closed loop: CPU µs a request (floor ${int(floorCpu)})`, result: measured.join(', '), target: '' },
    ...threadRows(results),
  ];
}

/**
 * The share of each round the service's threads were busy (medians): a thread near 1 is
 * what limits the rate; none near 1 and the rate is the latency of the group commit's
 * pipeline at this many connections, or the machine's shared CPU.
 */
function threadRows(results: BenchResults): Row[] {
  const targets: Array<[string, { threadsBusy?: Record<string, number> } | undefined]> = [
    ['service', results.closedLoop.service],
    ['service + destination', results.destinations?.closedLoop],
  ];
  // Results written before the service counted its threads' busy time have none.
  return targets.flatMap(([name, summary]) =>
    summary?.threadsBusy ? [{ measure: `closed loop: ${name}'s threads busy (share of the round)`, result: describeThreadsBusy(summary.threadsBusy), target: '' }] : [],
  );
}

/**
 * The open loop's first seconds, left out of its figures (open-loop.ts: the generator
 * starting): shown, so that the start's tail stays in sight.
 */
function warmupRow(name: string, { warmup }: OpenLoopResult): Row {
  return {
    measure: `${name}: its ${int(warmup.scheduled)} warm-up requests, p50/p99/p99.9 (not in the lines above)`,
    result: warmup.scheduled > 0 ? latencies(warmup.latencyMs) : 'none',
    target: '',
  };
}

/** Intake beside its deliveries: the cost to intake, whether delivery keeps up, and the lag. */
function destinationRows(results: BenchResults): Row[] {
  const destinations = results.destinations;
  if (!destinations) return [];
  const { lag, lagLoad } = destinations;
  const missing = lag.accepted - lag.delivered;
  return [
    {
      measure: 'closed loop: service + destination req/s (median)',
      result: throughputOfFloor(destinations.closedLoop, results.closedLoop.floor),
      target: '',
    },
    {
      measure: 'throughput service + destination/service',
      result: destinations.toService.toFixed(2),
      target: '>= 0.80',
      pass: destinations.toService >= 0.8,
    },
    {
      measure: `delivery (${destinations.maxInFlight} in flight): receiver req/s in rounds`,
      result: `${int(destinations.deliveredPerSecond)} (${destinations.deliveredToAccepted.toFixed(2)} of intake's 2xx)`,
      target: '>= 0.95 of intake',
      pass: destinations.deliveredToAccepted >= 0.95,
    },
    {
      measure: 'delivery: claims shed under pressure (rounds, lag phase)',
      result: `${int(destinations.rounds.reduce((sum, round) => sum + round.claimsShed, 0))}, ${int(lag.claimsShed)}`,
      target: '',
    },
    {
      measure: 'delivery: backlog at load stop, emptied in',
      result:
        `${int(destinations.maxPendingAtStop)} pending (max), ` +
        (destinations.slowestDrainSeconds === null
          ? `NOT emptied in ${destinations.drainMaxSeconds} s`
          : `${destinations.slowestDrainSeconds} s (slowest)`),
      target: 'empties',
      pass: destinations.slowestDrainSeconds !== null,
    },
    {
      measure: `open loop + destination @ ${int(lagLoad.ratePerSecond)}/s: p50/p99/p99.9`,
      result: latencies(lagLoad.latencyMs),
      target: '',
    },
    { measure: 'open loop + destination: answers', result: statuses(lagLoad), target: '' },
    warmupRow('open loop + destination', lagLoad),
    {
      measure: 'lag 202 -> first attempt p50/p99/p99.9',
      result: latencies(lag.lagMs),
      target: 'p99 <= 250 ms',
      pass: lag.lagMs.p99 <= 250,
    },
    {
      measure: 'lag: delivered of accepted, duplicates',
      result: `${int(lag.delivered)} of ${int(lag.accepted)}${missing > 0 ? ` (${int(missing)} missing)` : ''}, ${int(lag.duplicates)} dup.`,
      target: 'all',
      pass: missing === 0,
    },
    ...(destinations.peakRssMb === undefined
      ? []
      : [{ measure: 'peak RSS at max load: service + destination (a process of its own)', result: `${destinations.peakRssMb} MB`, target: '' }]),
  ];
}

/** Plain-text tables: measure, result, target, verdict; then the curve over concurrency. */
export function formatTable(results: BenchResults): string {
  const table = rows(results).map((row) => [
    row.measure,
    row.result,
    row.target,
    row.pass === undefined ? '' : row.pass ? 'pass' : 'FAIL',
  ]);
  const { store, date, body, machine, settings } = results;
  const title =
    `intake bench, ${store}, ${date}: ${body.event} event of ${body.bytes} B (${body.source}), ` +
    `${machine.cpus} cores, ${machine.busyBeforeStartPercent}% busy before start` +
    (machine.othersDuringPercent === undefined ? '' : `, ${machine.othersDuringPercent}% busy with other work during the run`);
  const curveTitle = `curve over concurrency: ${settings.generator}, one round of ${settings.curveSeconds} s per target and level`;
  return [title, ...columns(['measure', 'result', 'target', ''], table), '', curveTitle, ...curveColumns(results)].join('\n');
}

/** Per number of connections: each target's req/s and p99, then each one's over the floor's. */
function curveColumns(results: BenchResults): string[] {
  const { curve, settings } = results;
  const targets = [...new Set(curve.map((point) => point.target))];
  const others = targets.filter((target) => target !== 'floor');
  const header = [
    'connections',
    ...targets.map((target) => `${target} req/s, p99`),
    ...others.map((target) => `${target}/floor req/s, p99`),
    'non-2xx/errors',
  ];
  const table = settings.curveConnections.map((connections) => {
    const at = (target: string) => curve.find((point) => point.target === target && point.connections === connections);
    const floor = at('floor');
    const failures = targets.flatMap((target) => {
      const point = at(target);
      return point && point.non2xx + point.errors > 0 ? [`${target} ${point.non2xx}/${point.errors}`] : [];
    });
    return [
      String(connections),
      ...targets.map((target) => {
        const point = at(target);
        return point ? `${int(point.requestsPerSecond)}, ${point.p99} ms` : '';
      }),
      ...others.map((target) => {
        const point = at(target);
        return point && floor ? `${ratio(point.requestsPerSecond, floor.requestsPerSecond)}, ${ratio(point.p99, floor.p99)}` : '';
      }),
      failures.join(', '),
    ];
  });
  return columns(header, table);
}

/** Lines of cells padded to their column's widest. */
function columns(header: string[], table: string[][]): string[] {
  const widths = header.map((_, column) => Math.max(...[header, ...table].map((cells) => cells[column]?.length ?? 0)));
  const line = (cells: string[]) => cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd();
  return [line(header), ...table.map(line)];
}

/** Writes bench/results/<date>-<store>[-<label>].json and returns its path. */
export function writeResults(root: string, results: BenchResults, label?: string): string {
  const directory = `${root}/bench/results`;
  mkdirSync(directory, { recursive: true });
  const path = `${directory}/${results.date}-${results.store}${label ? `-${label}` : ''}.json`;
  const targets = rows(results).filter((row) => row.pass !== undefined);
  writeFileSync(path, `${JSON.stringify({ ...results, targets }, null, 2)}\n`);
  return path;
}

function latencies(values: Pick<Percentiles, 'p50' | 'p99' | 'p99_9'>): string {
  return `${values.p50} / ${values.p99} / ${values.p99_9} ms`;
}

function throughputOfFloor(summary: Summary, floor: Summary): string {
  return `${int(summary.requestsPerSecond)} (${ratio(summary.requestsPerSecond, floor.requestsPerSecond)} of floor)`;
}

function latenciesOfFloor(summary: Summary, floor: Summary): string {
  return `${latencies(summary)} (p99 ${ratio(summary.p99, floor.p99)}x floor)`;
}

function ratio(value: number, floor: number): string {
  return (value / floor).toFixed(2);
}

function statuses(result: OpenLoopResult): string {
  const answered = Object.entries(result.statuses)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, count]) => `${status}: ${int(count)}`);
  if (result.abandoned > 0) answered.push(`not sent: ${int(result.abandoned)}`);
  return answered.join(', ');
}

function int(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}
