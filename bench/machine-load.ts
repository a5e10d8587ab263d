import { readdirSync, readFileSync } from 'node:fs';

/*
 * How much of the machine others used while the run lasted: the CPU time the whole
 * machine was busy (/proc/stat) less what the run's own processes used (/proc/<pid>/stat).
 * A shared machine's figures move with that load; the 1 s sampled before the start says
 * nothing of a build that starts a minute later.
 */

/** A moment's counters, in clock ticks. */
export interface LoadSample {
  busy: number;
  total: number;
  ours: number;
}

/**
 * Reads the counters now. `pids`: the run's live processes besides this one (their worker
 * threads included); this one counts its children already reaped (the CLI calls).
 * `withPostgres`: every PostgreSQL process counts as the run's (its server's exited
 * backends through the postmaster's reaped children), so another user's PostgreSQL work
 * during a --postgres run counts as the run's too.
 */
export function sampleLoad(pids: number[], withPostgres: boolean): LoadSample {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((sum, value) => sum + value, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total, ours: cpuTicks('self') + ticksOf(pids, withPostgres) };
}

/** Between two samples, in percent of the whole machine (every core): busy, and busy with others' work. */
export function loadBetween(before: LoadSample, after: LoadSample): { busyPercent: number; othersPercent: number } {
  const total = Math.max(1, after.total - before.total);
  const busy = after.busy - before.busy;
  const others = Math.max(0, busy - (after.ours - before.ours));
  return { busyPercent: Math.round((100 * busy) / total), othersPercent: Math.round((100 * others) / total) };
}

/** Linux's clock tick (USER_HZ), which /proc counts CPU time in: 100 on every architecture Node runs on. */
const MICROSECONDS_PER_TICK = 10_000;

/**
 * CPU time used so far by these processes (every thread of each) and, with `withPostgres`,
 * by every PostgreSQL process, in µs: read before and after a load, the work it cost,
 * whatever the machine's speed at the time.
 */
export function cpuMicroseconds(pids: number[], withPostgres: boolean): number {
  return ticksOf(pids, withPostgres) * MICROSECONDS_PER_TICK;
}

function ticksOf(pids: number[], withPostgres: boolean): number {
  let ticks = 0;
  for (const pid of pids) ticks += cpuTicks(String(pid));
  if (withPostgres) for (const pid of postgresPids()) ticks += cpuTicks(pid);
  return ticks;
}

/** utime + stime (and the reaped children's) of a process; 0 once it is gone. */
function cpuTicks(pid: string): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command's closing parenthesis: state is the first, utime the 12th.
    const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    return (after[11] ?? 0) + (after[12] ?? 0) + (after[13] ?? 0) + (after[14] ?? 0);
  } catch {
    return 0;
  }
}

function postgresPids(): string[] {
  return readdirSync('/proc').filter((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      return readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres';
    } catch {
      return false;
    }
  });
}

/**
 * Seconds each thread of the service has been busy so far, by thread, from its /metrics
 * (`intake_thread_busy_seconds_total`): the event loop, and on SQLite the commit thread
 * (the read thread too once a heavy read started it). Read before and after a load, each
 * thread's share of it.
 */
export async function threadBusySeconds(metricsUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const busy: Record<string, number> = {};
  for (const [, thread, seconds] of text.matchAll(/^intake_thread_busy_seconds_total\{thread="(\w+)"\} (\S+)$/gm)) {
    busy[thread!] = Number(seconds);
  }
  if (busy.event_loop === undefined) throw new Error(`no intake_thread_busy_seconds_total in ${metricsUrl}`);
  return busy;
}
