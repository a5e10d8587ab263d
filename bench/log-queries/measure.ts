import { performance } from 'node:perf_hooks';

/** One query of the benchmark: `run(i)` sends its i-th variant and returns the rows it got. */
export interface QueryCase {
  name: string;
  /** The target for p95, ms; none for the queries it sets no target for. */
  targetMs?: number;
  run(i: number): Promise<number>;
}

export interface QueryResult {
  name: string;
  runs: number;
  p50: number;
  p95: number;
  max: number;
  mean: number;
  /** Rows returned per run, on average: a page that came back short would show here. */
  rowsPerRun: number;
  targetMs: number | null;
  pass: boolean | null;
}

/**
 * Times `runs` calls of the case, one at a time, after `warmup` calls that are not counted
 * (JIT, the database's caches). Each run is a new variant (another integration, event,
 * window or search term), so no single page is measured from a cache alone.
 */
export async function measure(query: QueryCase, runs: number, warmup: number): Promise<QueryResult> {
  for (let i = 0; i < warmup; i++) await query.run(runs + i);
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    rows += await query.run(i);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const p95 = percentile(times, 0.95);
  return {
    name: query.name,
    runs,
    p50: ms(percentile(times, 0.5)),
    p95: ms(p95),
    max: ms(times.at(-1) ?? 0),
    mean: ms(times.reduce((a, b) => a + b, 0) / runs),
    rowsPerRun: Math.round((rows / runs) * 10) / 10,
    targetMs: query.targetMs ?? null,
    pass: query.targetMs === undefined ? null : p95 <= query.targetMs,
  };
}

/** Nearest rank: the smallest value at or above the fraction `p` of the sorted values. */
function percentile(sorted: number[], p: number): number {
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? 0;
}

function ms(value: number): number {
  return Math.round(value * 100) / 100;
}

/** One plain-text table: query, p50, p95, max (ms), rows per run, target, verdict. */
export function formatTable(title: string, results: QueryResult[]): string {
  const header = ['query', 'p50 ms', 'p95 ms', 'max ms', 'rows', 'target p95', ''];
  const table = results.map((r) => [
    r.name,
    r.p50.toFixed(2),
    r.p95.toFixed(2),
    r.max.toFixed(2),
    String(r.rowsPerRun),
    r.targetMs === null ? '' : `≤ ${r.targetMs} ms`,
    r.pass === null ? '' : r.pass ? 'pass' : 'FAIL',
  ]);
  const widths = header.map((_, column) => Math.max(...[header, ...table].map((cells) => (cells[column] ?? '').length)));
  const numeric = new Set([1, 2, 3, 4]);
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (numeric.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0)))
      .join('  ')
      .trimEnd();
  return [title, line(header), ...table.map(line)].join('\n');
}
