import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { LoadTarget } from './closed-loop.js';
import { startOpenLoop, type OpenLoopOptions, type OpenLoopResult } from './open-loop.js';

interface VictimWorkerData {
  victimLoad: true;
  target: LoadTarget;
  options: OpenLoopOptions;
}

/**
 * Runs the victim's open loop (bench/open-loop.ts) on a worker thread of its own, so the
 * attacker's clients on the main thread (fifty streams reading megabytes) cannot delay the
 * generator's schedule and pass their own lag off as the service's.
 */
export function runVictimLoad(target: LoadTarget, options: OpenLoopOptions): Promise<OpenLoopResult> {
  const data: VictimWorkerData = { victimLoad: true, target, options };
  const worker = new Worker(new URL(import.meta.url), { workerData: data });
  return new Promise((resolve, reject) => {
    worker.once('message', (result: OpenLoopResult) => resolve(result));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the victim's load worker exited with ${code} before its result`)));
  });
}

if (!isMainThread && (workerData as VictimWorkerData | undefined)?.victimLoad) {
  const { target, options } = workerData as VictimWorkerData;
  // A Buffer arrives as a plain Uint8Array after the structured clone.
  const result = await startOpenLoop({ ...target, body: Buffer.from(target.body) }, options).finished;
  parentPort?.postMessage(result);
}
