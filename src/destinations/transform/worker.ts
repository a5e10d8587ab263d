import { parentPort, workerData } from 'node:worker_threads';
import { failed } from './request.js';
import { Sandbox, SandboxBroken, type SandboxLimits } from './sandbox.js';
import type { WorkerReply, WorkerTask } from './protocol.js';

/**
 * A transform pool's worker thread (pool.ts): one sandbox, one task at a time. After a task
 * that broke QuickJS's module or filled its memory, the module is loaded again before the
 * reply goes out, so the next task finds a sound one.
 */

const limits = workerData as SandboxLimits;
const port = parentPort!;
let sandbox = await Sandbox.load(limits);

port.on('message', (task: WorkerTask) => void serve(task));
port.postMessage({ kind: 'ready' } satisfies WorkerReply);

async function serve(task: WorkerTask): Promise<void> {
  let reply: WorkerReply;
  try {
    reply =
      task.kind === 'run'
        ? { kind: 'outcome', id: task.id, outcome: sandbox.run(task.code, task.request, task.context) }
        : { kind: 'checked', id: task.id, problem: sandbox.check(task.code) };
  } catch (error) {
    if (!(error instanceof SandboxBroken)) throw error;
    reply = task.kind === 'run' ? { kind: 'outcome', id: task.id, outcome: failed(error.message) } : { kind: 'checked', id: task.id, problem: error.message };
    sandbox = await Sandbox.load(limits);
  }
  if (sandbox.spent) sandbox = await Sandbox.load(limits);
  port.postMessage(reply);
}
