import { mkdirSync, writeFileSync } from 'node:fs';
import type { ClosedLoopRound, summarize } from './closed-loop.js';
import type { DrainResult, LagResult } from './delivery.js';
import type { OpenLoopResult, Percentiles } from './open-loop.js';
import type { OverloadResult } from './overload.js';

type Summary = ReturnType<typeof summarize>;

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
  settings: { rounds: number; seconds: number; connections: number; warmupSeconds: number };
  closedLoop: {
    rounds: ClosedLoopRound[];
    service: Summary;
    baseline: Summary;
    serviceToBaseline: number;
    /** The same load on a github source (signature, no key): what verification costs. */
    githubSource?: Summary;
    githubSourceToService?: number;
    servicePeakRssMb: number;
    baselinePeakRssMb: number;
  };
  openLoop: OpenLoopResult;
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
  };
  overload: OverloadResult & { peakRssMb: number; aliveAfter: boolean };
  serviceExitCode: number | null;
}

interface Row {
  measure: string;
  result: string;
  target: string;
  pass?: boolean;
}

/** The targets of the performance issue, each beside what this run measured. */
export function rows(results: BenchResults): Row[] {
  const { closedLoop, openLoop, overload } = results;
  const overloadOther = Object.entries(overload.statuses).filter(([status]) => status !== '202' && status !== '503');
  return [
    { measure: 'closed loop: service req/s (median)', result: int(closedLoop.service.requestsPerSecond), target: '' },
    { measure: 'closed loop: baseline req/s (median)', result: int(closedLoop.baseline.requestsPerSecond), target: '' },
    {
      measure: 'throughput service/baseline',
      result: closedLoop.serviceToBaseline.toFixed(2),
      target: '>= 0.80',
      pass: closedLoop.serviceToBaseline >= 0.8,
    },
    ...(closedLoop.githubSource && closedLoop.githubSourceToService !== undefined
      ? [
          { measure: 'closed loop: github source req/s (median)', result: int(closedLoop.githubSource.requestsPerSecond), target: '' },
          {
            measure: 'throughput github source/api_key',
            result: closedLoop.githubSourceToService.toFixed(2),
            target: '>= 0.90',
            pass: closedLoop.githubSourceToService >= 0.9,
          },
        ]
      : []),
    ...destinationRows(results),
    { measure: 'closed loop: service p50/p99/p99.9', result: latencies(closedLoop.service), target: '' },
    { measure: 'closed loop: baseline p50/p99/p99.9', result: latencies(closedLoop.baseline), target: '' },
    {
      measure: 'closed loop: service non-2xx/errors',
      result: `${closedLoop.service.non2xx}/${closedLoop.service.errors}`,
      target: '',
    },
    {
      measure: 'peak RSS at max load',
      result: `${closedLoop.servicePeakRssMb} MB`,
      target: '<= 200 MB',
      pass: closedLoop.servicePeakRssMb <= 200,
    },
    {
      measure: `open loop @ ${int(openLoop.ratePerSecond)}/s (50%) p50/p99/p99.9`,
      result: latencies(openLoop.latencyMs),
      target: 'p99 <= 10 ms',
      pass: openLoop.latencyMs.p99 <= 10,
    },
    { measure: 'open loop: answers', result: statuses(openLoop), target: '' },
    { measure: 'open loop: generator lag p99', result: `${openLoop.generatorLagMs.p99} ms`, target: '' },
    {
      measure: `overload @ ${int(overload.ratePerSecond)}/s (2x): answers`,
      result: statuses(overload),
      target: 'only 202/503',
      pass: overloadOther.length === 0,
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

/** Intake beside its deliveries: the cost to intake, whether delivery keeps up, and the lag. */
function destinationRows(results: BenchResults): Row[] {
  const destinations = results.destinations;
  if (!destinations) return [];
  const { lag, lagLoad } = destinations;
  const missing = lag.accepted - lag.delivered;
  return [
    { measure: 'closed loop: service + destination req/s (median)', result: int(destinations.closedLoop.requestsPerSecond), target: '' },
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
  ];
}

/** One plain-text table: measure, result, target, verdict. */
export function formatTable(results: BenchResults): string {
  const table = rows(results).map((row) => [
    row.measure,
    row.result,
    row.target,
    row.pass === undefined ? '' : row.pass ? 'pass' : 'FAIL',
  ]);
  const header = ['measure', 'result', 'target', ''];
  const widths = header.map((_, column) => Math.max(...[header, ...table].map((cells) => cells[column]?.length ?? 0)));
  const line = (cells: string[]) => cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd();
  const { store, date, body, machine } = results;
  const title =
    `intake bench, ${store}, ${date}: ${body.event} event of ${body.bytes} B (${body.source}), ` +
    `${machine.cpus} cores, ${machine.busyBeforeStartPercent}% busy before start` +
    (machine.othersDuringPercent === undefined ? '' : `, ${machine.othersDuringPercent}% busy with other work during the run`);
  return [title, line(header), ...table.map(line)].join('\n');
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
