import type { TransformContext, TransformOutcome, TransformRequest } from './request.js';

/** What the pool posts to a worker thread: one task at a time. */
export type WorkerTask =
  | { kind: 'run'; id: number; code: string; request: TransformRequest; context: TransformContext }
  | { kind: 'check'; id: number; code: string };

/** What a worker thread posts back: `ready` once its sandbox is loaded, then one reply per task. */
export type WorkerReply =
  | { kind: 'ready' }
  | { kind: 'outcome'; id: number; outcome: TransformOutcome }
  | { kind: 'checked'; id: number; problem: string | null };
