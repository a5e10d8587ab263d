import { mkdirSync, writeFileSync } from 'node:fs';
import type { ClosedLoopRound, summarize } from './closed-loop.js';
import type { OpenLoopResult, Percentiles } from './open-loop.js';
import type { OverloadResult } from './overload.js';

type Summary = ReturnType<typeof summarize>;

/** Everything one run measured; written as JSON beside the others in bench/results/. */
export interface BenchResults {
  date: string;
  store: 'sqlite' | 'postgres';
  machine: { cpus: number; cpuModel: string; node: string; busyBeforeStartPercent: number };
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
    `${machine.cpus} cores, ${machine.busyBeforeStartPercent}% busy before start`;
  return [title, line(header), ...table.map(line)].join('\n');
}

/** Writes bench/results/<date>-<store>.json and returns its path. */
export function writeResults(root: string, results: BenchResults): string {
  const directory = `${root}/bench/results`;
  mkdirSync(directory, { recursive: true });
  const path = `${directory}/${results.date}-${results.store}.json`;
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
