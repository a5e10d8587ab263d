import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoadTarget } from './closed-loop.js';
import { AcceptedLog } from './delivery.js';
import { startOpenLoop, type OpenLoopOptions, type OpenLoopResult, type OpenLoopRun } from './open-loop.js';

/*
 * The open loop (open-loop.ts) in a child process of its own, so that its schedule shares
 * no event loop with the orchestration (the recovery probes that run beside the overload's
 * last answers, the reads of the receiver, the outbox and /metrics between loads). Its
 * latencies still run from the time each request was due, measured in the child.
 */

/** The open loop's options but the answers' callback, which cannot cross to another process. */
export type OpenLoopProcessOptions = Omit<OpenLoopOptions, 'onAnswer'>;

/** Marks the forked process as the generator (the module is also imported by the bench). */
const CHILD_ARGUMENT = '--open-loop-child';

interface Start {
  target: LoadTarget;
  options: OpenLoopProcessOptions;
  keepAccepted: boolean;
}

type ChildMessage =
  | { kind: 'loadStopped'; at: number }
  | { kind: 'finished'; result: OpenLoopResult; accepted: Array<[string, number]> };

/**
 * Starts the open loop in a child process. With `accepted`, the child keeps each 202's uuid
 * and the time it came back (clock.ts), and they are added to it before `finished` resolves.
 */
export function startOpenLoopProcess(target: LoadTarget, options: OpenLoopProcessOptions, accepted?: AcceptedLog): OpenLoopRun {
  const child = fork(fileURLToPath(import.meta.url), [CHILD_ARGUMENT], {
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const failed = new Promise<never>((_, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the open loop's process exited with ${code} before its result`)));
  });
  const loadStopped = Promise.race([
    new Promise<number>((resolve) =>
      child.on('message', (message: ChildMessage) => {
        if (message.kind === 'loadStopped') resolve(message.at);
      }),
    ),
    failed,
  ]);
  const finished = Promise.race([
    new Promise<OpenLoopResult>((resolve) =>
      child.on('message', (message: ChildMessage) => {
        if (message.kind !== 'finished') return;
        for (const [uuid, answeredAt] of message.accepted) accepted?.answeredAt.set(uuid, answeredAt);
        resolve(message.result);
      }),
    ),
    failed,
  ]);
  // The child exits after its result too; and a caller may await only one of the two, while
  // a failure rejects all three alike: none may count as unhandled.
  for (const promise of [failed, loadStopped, finished]) promise.catch(() => {});
  // What the generator needs of the target: the CPU counter stays in this process.
  const { name, url, headers, body } = target;
  child.send({ target: { name, url, headers, body }, options, keepAccepted: accepted !== undefined } satisfies Start);
  return { loadStopped, finished };
}

if (process.argv[2] === CHILD_ARGUMENT) {
  // The bench gone, the load has no one to report to.
  process.once('disconnect', () => process.exit(1));
  process.once('message', (start: Start) => {
    const accepted = new AcceptedLog();
    // A Buffer arrives as a plain Uint8Array after the structured clone.
    const target = { ...start.target, body: Buffer.from(start.target.body) };
    const run = startOpenLoop(target, { ...start.options, onAnswer: start.keepAccepted ? accepted.onAnswer : undefined });
    const send = (message: ChildMessage, then?: () => void) => process.send?.(message, undefined, undefined, then);
    void run.loadStopped.then((at) => send({ kind: 'loadStopped', at }));
    void run.finished.then((result) => send({ kind: 'finished', result, accepted: [...accepted.answeredAt] }, () => process.exit(0)));
  });
}

