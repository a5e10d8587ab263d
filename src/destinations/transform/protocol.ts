import type { TransformContext, TransformOutcome, TransformRequest } from './request.js';

/** One delivery's transformation in a batch. */
export interface TransformRun {
  code: string;
  request: TransformRequest;
  context: TransformContext;
}

/**
 * What the pool posts to a worker thread: one task at a time. `runs` is a batch of one
 * owner's runs in its warm contexts: the worker starts no run once `budgetMs` has passed
 * since the batch began (the first always runs), and those it did not start come back null.
 */
export type WorkerTask =
  | { kind: 'run'; id: number; code: string; request: TransformRequest; context: TransformContext }
  | { kind: 'runs'; id: number; owner: string; runs: TransformRun[]; budgetMs: number }
  | { kind: 'check'; id: number; code: string };

/** What a worker thread posts back: `ready` once its sandbox is loaded, then one reply per task. */
export type WorkerReply =
  /** `threadId`: the worker thread's id in the kernel (Linux), so the pool can read its CPU time; null elsewhere. */
  | { kind: 'ready'; threadId: number | null }
  | { kind: 'outcome'; id: number; outcome: TransformOutcome }
  | { kind: 'outcomes'; id: number; outcomes: Array<TransformOutcome | null>; usedMs: number }
  | { kind: 'checked'; id: number; problem: string | null };

/**
 * What the worker shares with the pool without a message (workerData's `progress`): the
 * number of runs of the current batch finished, so a batch whose worker is stopped for
 * overrunning blames the run that was under way, not the ones before or after it.
 */
export const PROGRESS_SLOT = 0;
