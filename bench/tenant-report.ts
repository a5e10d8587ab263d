import { mkdirSync, writeFileSync } from 'node:fs';
import type { OpenLoopResult } from './open-loop.js';
import type { AttackOutcome } from './tenant-attacks.js';

/** One phase: the victim's intake under one attack (or none), and what the attacker got. */
export interface PhaseResult {
  phase: string;
  /**
   * Seconds the service took to answer /healthz again after the previous phase (and 2 s of
   * quiet); null when it did not within a minute: this phase began on a still busy service.
   */
  settleSeconds: number | null;
  /** How busy the machine's CPUs were in the second before the phase, this run idle: others' load. */
  machineBusyBeforePercent: number;
  victim: OpenLoopResult;
  /** The service's peak resident memory during the phase. */
  peakRssMb: number;
  /** The attacks were ended early because the service passed --max-rss-mb. */
  rssCapHit: boolean;
  /** The attacker's big webhooks sent during the phase, final answers by status. */
  bigWebhooks: Record<string, number> | null;
  attacker: AttackOutcome[];
  serviceAliveAfter: boolean;
}

/** Everything one run measured; written as JSON beside the other results. */
export interface TenantResults {
  date: string;
  store: 'sqlite' | 'postgres';
  label: string | null;
  code: { dist: string; commit: string; uncommittedChanges: boolean | null };
  machine: { cpus: number; cpuModel: string; node: string; busyBeforeStartPercent: number };
  settings: Record<string, number | string>;
  reader: { kind: string; note: string | null };
  victimBodyBytes: number;
  bigWebhookBytes: number;
  /** The attacker's webhooks stored before the search and export phases, by status. */
  storedForReads: Record<string, number>;
  phases: PhaseResult[];
  serviceExitCode: number | null;
}

/** The victim's answers in the table's columns. */
export function victimCounts(victim: OpenLoopResult) {
  const { statuses } = victim;
  const errors = Object.entries(statuses).filter(([key]) => key.startsWith('error'));
  const other = Object.entries(statuses).filter(([key]) => !['202', '503', 'timeout'].includes(key) && !key.startsWith('error'));
  return {
    sent: victim.scheduled - victim.abandoned,
    accepted: statuses['202'] ?? 0,
    shed: statuses['503'] ?? 0,
    other: other.reduce((sum, [, count]) => sum + count, 0),
    timeouts: statuses.timeout ?? 0,
    errors: errors.reduce((sum, [, count]) => sum + count, 0),
    notSent: victim.abandoned,
  };
}

/** The victim's table, then the attacker's outcome phase by phase. */
export function formatTable(results: TenantResults): string {
  const header = ['phase', 'sent', '202', '503', 'other', 'timeout', 'error', 'not sent', 'p50 ms', 'p99 ms', 'p99.9 ms', 'peak RSS', 'CPU busy before'];
  const table = results.phases.map((phase) => {
    const counts = victimCounts(phase.victim);
    const unanswered = (counts.timeouts + counts.errors + counts.notSent) / Math.max(1, phase.victim.scheduled);
    const { latencyMs } = phase.victim;
    return [
      phase.settleSeconds === null ? `${phase.phase} *` : phase.phase,
      int(counts.sent),
      int(counts.accepted),
      int(counts.shed),
      int(counts.other),
      int(counts.timeouts),
      int(counts.errors),
      int(counts.notSent),
      Number.isNaN(latencyMs.p50) ? '-' : String(latencyMs.p50),
      // Percentiles are of answered requests: past 1% (0.1%) unanswered, the true one is the timeout or worse.
      unanswered > 0.01 ? `>= ${results.settings.timeoutMs}` : String(latencyMs.p99),
      unanswered > 0.001 ? `>= ${results.settings.timeoutMs}` : String(latencyMs.p99_9),
      `${phase.peakRssMb} MB${phase.rssCapHit ? ' (cap)' : ''}`,
      `${phase.machineBusyBeforePercent}%`,
    ];
  });
  const widths = header.map((_, column) => Math.max(...[header, ...table].map((cells) => cells[column]?.length ?? 0)));
  const line = (cells: string[]) => cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd();
  const { store, date, machine, settings, code, reader } = results;
  const title =
    `intake tenants bench, ${store}, ${date}, ${code.commit}${code.uncommittedChanges ? ' + uncommitted changes' : ''} ` +
    `(${code.dist}): the victim at ${settings.rate}/s for ${settings.seconds} s a phase; ` +
    `${machine.cpus} cores, ${machine.busyBeforeStartPercent}% busy before start; the attacker reads as a ${reader.kind}`;
  const attacker = results.phases.flatMap((phase) => attackerLines(phase));
  return [
    title,
    ...(reader.note ? [`  (${reader.note})`] : []),
    line(header),
    ...table.map(line),
    ...(results.phases.some((phase) => phase.settleSeconds === null)
      ? ['* began while the service was still busy with the previous phase (no /healthz answer within a minute)']
      : []),
    '',
    "the attacker's reads:",
    ...attacker,
  ].join('\n');
}

function attackerLines(phase: PhaseResult): string[] {
  const lines = phase.attacker.map((outcome) => `  ${phase.phase}: ${outcome.attack}: ${describe(outcome.statuses)}; ${describe(outcome.detail)}`);
  if (phase.bigWebhooks) lines.push(`  ${phase.phase}: big webhooks posted: ${describe(phase.bigWebhooks)}`);
  if (phase.rssCapHit) lines.push(`  ${phase.phase}: attacks ended early: the service passed the RSS cap`);
  if (!phase.serviceAliveAfter) lines.push(`  ${phase.phase}: THE SERVICE DIED`);
  return lines;
}

/** Writes bench/results/<date>-tenants-<store>[-<label>].json and returns its path. */
export function writeResults(root: string, results: TenantResults): string {
  const directory = `${root}/bench/results`;
  mkdirSync(directory, { recursive: true });
  const suffix = results.label ? `-${results.label}` : '';
  const path = `${directory}/${results.date}-tenants-${results.store}${suffix}.json`;
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`);
  return path;
}

function describe(counts: Record<string, number>): string {
  const entries = Object.entries(counts).sort(([a], [b]) => a.localeCompare(b));
  return entries.length === 0 ? 'nothing' : entries.map(([key, count]) => `${key}: ${int(count)}`).join(', ');
}

function int(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}
