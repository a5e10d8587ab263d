import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { failed, type TransformOutcome } from './request.js';
import { Sandbox, SandboxBroken, type SandboxLimits } from './sandbox.js';
import { PROGRESS_SLOT, type TransformRun, type WorkerReply, type WorkerTask } from './protocol.js';

/**
 * A transform pool's worker thread (pool.ts): one sandbox, one task at a time. After a task
 * that broke QuickJS's module or filled its memory, the module is loaded again before the
 * reply goes out, so the next task finds a sound one.
 */

/** Linux's nice for sandbox threads: 10 gives a thread about a tenth of the weight of one at 0 when they compete. */
const SANDBOX_NICE = 10;

const { progress: progressBuffer, ...limits } = workerData as SandboxLimits & { progress: SharedArrayBuffer };
const progress = new Int32Array(progressBuffer);
const threadId = kernelThreadId();
lowerThreadPriority(threadId);
const port = parentPort!;
let sandbox = await Sandbox.load(limits);

port.on('message', (task: WorkerTask) => void serve(task));
port.postMessage({ kind: 'ready', threadId } satisfies WorkerReply);

async function serve(task: WorkerTask): Promise<void> {
  let reply: WorkerReply;
  let broken = false;
  try {
    if (task.kind === 'runs') {
      const done = await runBatch(task.owner, task.runs, task.budgetMs);
      broken = done.broken;
      reply = { kind: 'outcomes', id: task.id, outcomes: done.outcomes, usedMs: done.usedMs };
    } else {
      reply =
        task.kind === 'run'
          ? { kind: 'outcome', id: task.id, outcome: sandbox.run(task.code, task.request, task.context) }
          : { kind: 'checked', id: task.id, problem: sandbox.check(task.code) };
    }
  } catch (error) {
    if (!(error instanceof SandboxBroken)) throw error;
    broken = true;
    reply = task.kind === 'check' ? { kind: 'checked', id: task.id, problem: error.message } : { kind: 'outcome', id: task.id, outcome: failed(error.message) };
  }
  if (broken || sandbox.spent) sandbox = await Sandbox.load(limits);
  port.postMessage(reply);
}

/**
 * The batch's runs one after another while its budget lasts; a run that broke the module
 * or filled its memory ends the batch (the module is replaced before the next). A run that
 * filled the memory while other owners' warm contexts were held is run once more in a fresh
 * module first: what others kept may be what filled it.
 */
async function runBatch(owner: string, runs: TransformRun[], budgetMs: number): Promise<{ outcomes: Array<TransformOutcome | null>; usedMs: number; broken: boolean }> {
  const started = performance.now();
  const outcomes: Array<TransformOutcome | null> = runs.map(() => null);
  let broken = false;
  for (let index = 0; index < runs.length; index++) {
    if (index > 0 && performance.now() - started >= budgetMs) break;
    const { code, request, context } = runs[index]!;
    try {
      const others = sandbox.holdsOthersThan(owner);
      outcomes[index] = sandbox.runWarm(owner, code, request, context);
      if (sandbox.ranOutOfMemory && others) {
        sandbox = await Sandbox.load(limits);
        outcomes[index] = sandbox.runWarm(owner, code, request, context);
      }
    } catch (error) {
      if (!(error instanceof SandboxBroken)) throw error;
      outcomes[index] = failed(error.message);
      broken = true;
    }
    Atomics.store(progress, PROGRESS_SLOT, index + 1);
    if (broken || sandbox.spent) break;
  }
  if (!broken && !sandbox.spent) {
    try {
      sandbox.settle();
    } catch (error) {
      if (!(error instanceof SandboxBroken)) throw error;
      broken = true;
    }
  }
  return { outcomes, usedMs: performance.now() - started, broken };
}

/** This thread's id in the kernel, from /proc/thread-self (Linux); null elsewhere. */
function kernelThreadId(): number | null {
  try {
    const id = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(id) && id > 0 ? id : null;
  } catch {
    return null;
  }
}

/**
 * This thread's scheduling priority, lowered below intake's own threads (nice SANDBOX_NICE):
 * on a busy machine a company's transformations then take the CPU intake's event loop and
 * commit thread leave, not theirs, so one company's code slows another's intake less. On
 * Linux a thread's id names that thread alone to setpriority. A thread so lowered can wait
 * for the CPU longer than a run's limit: the limits count its CPU time, not the wall clock
 * (sandbox.ts, and the pool's bound).
 */
function lowerThreadPriority(id: number | null): void {
  if (id === null) return;
  try {
    setPriority(id, SANDBOX_NICE);
  } catch {
    // Not allowed here: the default priority.
  }
}
