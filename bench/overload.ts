import { Agent, request } from 'node:http';
import { monotonicMs } from './clock.js';
import type { LoadTarget } from './closed-loop.js';
import type { OpenLoopResult } from './open-loop.js';
import { startOpenLoopProcess, type OpenLoopProcessOptions } from './open-loop-process.js';
import { sleep } from './processes.js';

export interface OverloadResult extends OpenLoopResult {
  /** Seconds from dropping the load to the first of a run of 202s to light probes; null if none came. */
  recoverySeconds: number | null;
  probes: number;
}

const PROBE_PAUSE_MS = 50;
const PROBE_TIMEOUT_MS = 5_000;
const RECOVERED_AFTER_RUN_OF = 10;
const RECOVERY_WINDOW_MS = 15_000;

/**
 * Offers more than the service can take (the open loop in its own process), then stops and
 * probes at a light rate from this one (one request at a time, 50 ms apart, on a connection
 * of their own, as a sender arriving after the burst would) until 202s come back.
 */
export async function runOverload(target: LoadTarget, options: OpenLoopProcessOptions): Promise<OverloadResult> {
  const load = startOpenLoopProcess(target, options);
  const droppedAt = await load.loadStopped;
  const [result, recovery] = await Promise.all([load.finished, probeUntilRecovered(target, droppedAt)]);
  return { ...result, ...recovery };
}

async function probeUntilRecovered(
  target: LoadTarget,
  droppedAt: number,
): Promise<{ recoverySeconds: number | null; probes: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let probes = 0;
  let runStartedAt: number | null = null;
  let runLength = 0;
  try {
    // On the clock the generator's process stamped the load's stop with (clock.ts).
    while (monotonicMs() - droppedAt < RECOVERY_WINDOW_MS) {
      probes++;
      const status = await probe(agent, target);
      if (status === 202) {
        runStartedAt ??= monotonicMs();
        if (++runLength >= RECOVERED_AFTER_RUN_OF) {
          return { recoverySeconds: Math.round(runStartedAt - droppedAt) / 1000, probes };
        }
      } else {
        runStartedAt = null;
        runLength = 0;
      }
      await sleep(PROBE_PAUSE_MS);
    }
    return { recoverySeconds: null, probes };
  } finally {
    agent.destroy();
  }
}

/** The answer's status, or 0 when the request failed or timed out. */
function probe(agent: Agent, target: LoadTarget): Promise<number> {
  const url = new URL(target.url);
  const headers = { ...target.headers, 'content-length': String(target.body.length) };
  return new Promise((resolve) => {
    const options = { agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers };
    const req = request(options, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.setTimeout(PROBE_TIMEOUT_MS, () => req.destroy());
    req.on('error', () => resolve(0));
    req.end(target.body);
  });
}
