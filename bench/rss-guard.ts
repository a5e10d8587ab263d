import { readFileSync } from 'node:fs';

const POLL_MS = 100;

/** A watch on a process's resident memory; stop() says whether it ever passed the cap. */
export interface RssGuard {
  stop(): { capHit: boolean };
}

/**
 * Calls onCap once when the process's resident memory passes capMb. The attacks it guards
 * can pin gigabytes on the code before the fix, and the machine is shared: the phase's
 * attacks end there instead of the machine running out of memory.
 */
export function guardRss(pid: number, capMb: number, onCap: () => void): RssGuard {
  let capHit = false;
  const timer = setInterval(() => {
    if (capHit || residentMb(pid) <= capMb) return;
    capHit = true;
    onCap();
  }, POLL_MS);
  return {
    stop() {
      clearInterval(timer);
      return { capHit };
    },
  };
}

/** The process's resident memory now, in MB (0 once it has exited). */
function residentMb(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Math.round(Number(match?.[1] ?? 0) / 1024);
  } catch {
    return 0;
  }
}
