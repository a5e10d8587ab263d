import { readFileSync } from 'node:fs';
import {
  DefaultIntrinsics,
  type CustomizeVariantOptions,
  newQuickJSWASMModule,
  newVariant,
  RELEASE_SYNC,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten';
import { failed, outcomeOf, type TransformContext, type TransformOutcome, type TransformRequest } from './request.js';

/**
 * One transformation run in QuickJS compiled to WebAssembly (quickjs-emscripten): an
 * interpreter of its own with its own heap inside the module's linear memory, so nothing of
 * Node's (require, process, timers, fetch, the file system) exists in it, and no object
 * crosses: the request goes in as JSON text and the result comes out as JSON text.
 *
 * Two ways to run:
 * - `run` and `check` (a rules preview, a save's check): a new QuickJS runtime and context
 *   for the one call, gone after it, so nothing of an earlier run is seen.
 * - `runWarm` (deliveries): the code's context is kept for the next run of the same owner (a
 *   company) and code, as a serverless function's instance is: making a runtime and a
 *   context, the prelude and the code's top level cost about 0.3 ms, four to ten times a
 *   small transform's own call (bench/transform-sandbox.ts). Each context has a runtime of
 *   its own, so one owner's globals are never another's; within an owner, what the code
 *   leaves in its globals may be seen by a later delivery, or not (a context is dropped after
 *   an error, a time or memory limit, MAX_WARM_RUNS runs, when it holds more than
 *   WARM_HEAP_BYTES, or to make room): docs/destinations.md says not to rely on either.
 *
 * Synchronous and CPU-bound: it runs on a pool's worker thread (worker.ts), never on the
 * event loop. The CPU limit is QuickJS's interrupt handler checking the time the run has
 * taken: first the wall clock, and once that passes the limit, the thread's own CPU time
 * (threadCpuMs: on a loaded machine a run of a few milliseconds of CPU can take more than
 * 50 ms of wall time, and was refused as out of time), up to a hard wall-clock bound. QuickJS calls it every ten thousand or so operations (calls, loop
 * turns, regular-expression steps), so a few costly built-in calls (JSON.stringify of a
 * large value, a loop of megabyte-sized allocations) can run past the limit between two
 * calls: the pool's wall-clock bound stops those by replacing the worker.
 *
 * The convention for the code (docs/destinations.md, "Transformation"): it declares a top-level function
 * named `transform`, or the whole code is a function expression, such as
 * `(request, context) => request`; `transform` wins when both are there. Its top level runs
 * once per context, within the same limits. It returns the request (changed or new), or
 * undefined/null to drop the delivery. No `Date`: `context.receivedAt` is the time, and no
 * `Math.random`, so a redelivery produces the same request.
 */

export interface SandboxLimits {
  cpuMs: number;
  memoryMb: number;
}

/** The part of WebAssembly's API used here (the service's lib has no DOM types, where it is declared). */
declare const WebAssembly: { Memory: new (descriptor: { initial: number; maximum: number }) => WasmMemory };
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}

const MB = 1024 * 1024;
const PAGE_BYTES = 64 * 1024;
/** What QuickJS's module takes for itself (its data, its stack, the allocator): its initial memory. */
const MODULE_BYTES = 16 * MB;
/** QuickJS's own stack bound. Larger ones let deep recursion exhaust the thread's stack first, which traps the module. */
const STACK_BYTES = 256 * 1024;
/** Warm contexts a sandbox keeps at most, the least recently used dropped first. */
export const MAX_WARM = 16;
/** A warm context holding more of QuickJS's heap than this after a batch is dropped: MAX_WARM of them fit beside a run's limit. */
const WARM_HEAP_BYTES = 1 * MB;
/** Runs of one warm context before it is made again, so what a code keeps in its globals cannot grow without end. */
const MAX_WARM_RUNS = 10_000;
/**
 * Longer code is refused before QuickJS parses it: parsing never calls the interrupt handler
 * (2.2 MB took 0.6 s here), and this much takes about 35 ms. The API's own bound is lower.
 */
export const MAX_CODE_CHARS = 128 * 1024;
const CODE_FILE = 'transform.js';
const LINE = /transform\.js:(\d+)(?::(\d+))?/;

/**
 * Runs first in every context: keeps JSON's functions before the code can replace them,
 * replaces Math.random by one that says why it is not there, and gives the host `invoke`
 * (call the transform, return its result as JSON text) and `describe` (what was thrown, as
 * JSON text), both run inside the sandbox.
 */
const PRELUDE = `(() => {
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const NativePromise = Promise;
  const NativeError = Error;
  Math.random = () => {
    throw new TypeError('Math.random is not available: a transform gives the same request for the same delivery');
  };
  const invoke = (transform, request, context) => {
    const returned = transform(parse(request), parse(context));
    if (returned === undefined || returned === null) return undefined;
    if (returned instanceof NativePromise) {
      throw new TypeError('the transform returned a Promise: it must return the request itself, not async');
    }
    const text = stringify(returned);
    if (typeof text !== 'string') throw new TypeError('the transform returned a ' + typeof returned + ', which is not JSON');
    return text;
  };
  const describe = (thrown) => {
    if (thrown instanceof NativeError) {
      return stringify({ name: String(thrown.name), message: String(thrown.message), stack: String(thrown.stack) });
    }
    let value;
    try { value = stringify(thrown); } catch { value = undefined; }
    return stringify({ value: typeof value === 'string' ? value : String(thrown) });
  };
  return [invoke, describe];
})()`;

const FIND = `typeof transform === 'function' ? transform : undefined`;

const NO_FUNCTION =
  'the code defines no function: declare `function transform(request, context) { … }`, or make the whole code a function expression such as `(request, context) => request`';

/** What went wrong in a run, as the sandbox said it. */
type Thrown = { name: string; message: string; stack: string } | { value: string };

/** Thrown when QuickJS's module itself failed (a trap in its WebAssembly): the module must be replaced. */
export class SandboxBroken extends Error {
  constructor(cause: unknown) {
    // The cause (an assertion in QuickJS's C source, say) is the service's to read, not the company's.
    super('the sandbox failed while running the transform, and was restarted', { cause });
    this.name = 'SandboxBroken';
  }
}

/** The clock of the run under way in a context, read by its runtime's interrupt handler. */
interface RunClock {
  started: number;
  cpuAtStart: number | null;
  exceeded: boolean;
}

/** A code made ready in a runtime and context of its own: its function found, the prelude's helpers held. */
interface Prepared {
  runtime: QuickJSRuntime;
  vm: QuickJSContext;
  handles: QuickJSHandle[];
  transform: QuickJSHandle;
  invoke: QuickJSHandle;
  describe: QuickJSHandle;
  clock: RunClock;
  runs: number;
}

/**
 * QuickJS's module, loaded once per worker thread (about 50 ms), and the limits of every run
 * in it.
 *
 * The memory limit is the module's own memory, capped at the limit plus what the module
 * needs for itself and what warm contexts may hold: QuickJS's memory limit alone counts each
 * allocation's size only when it is made, not what stays allocated (this build has no
 * malloc_usable_size), so a loop of 1 MB arrays passed a 32 MB limit up to WebAssembly's
 * 2 GB. At the cap an allocation fails and QuickJS throws. A run that reached the cap leaves
 * the module `spent`: the worker loads a fresh one, which gives the memory back and starts
 * the next run below the cap again.
 */
export class Sandbox {
  /** Warm contexts by owner and code, least recently used first. */
  private readonly warm = new Map<string, Prepared>();
  /** Warm contexts run since the last `settle`. */
  private readonly touched = new Set<string>();
  /** The last run failed for want of memory (at the cap, or below it when what is free cannot hold the allocation). */
  ranOutOfMemory = false;

  private constructor(
    private readonly module: QuickJSWASMModule,
    private readonly memory: WasmMemory,
    private readonly limits: SandboxLimits,
  ) {}

  /** A new module in a memory of its own, capped for these limits. */
  static async load(limits: SandboxLimits): Promise<Sandbox> {
    const memory = new WebAssembly.Memory({ initial: MODULE_BYTES / PAGE_BYTES, maximum: capOf(limits) / PAGE_BYTES });
    // What the module prints (an assertion's text when one fails) would let a transform
    // write to the service's stderr. Emscripten reads print and printErr, which the
    // package's types leave out.
    const quiet: NonNullable<CustomizeVariantOptions['emscriptenModule']> & { print(): void; printErr(): void } = { print: () => {}, printErr: () => {} };
    return new Sandbox(await newQuickJSWASMModule(newVariant(RELEASE_SYNC, { wasmMemory: memory, emscriptenModule: quiet })), memory, limits);
  }

  /** True once a run reached the memory cap: load a new Sandbox before the next run. */
  get spent(): boolean {
    return this.memory.buffer.byteLength >= capOf(this.limits);
  }

  /** True when a warm context of another owner than this one is held. */
  holdsOthersThan(owner: string): boolean {
    for (const key of this.warm.keys()) if (!key.startsWith(`${owner}\n`)) return true;
    return false;
  }

  /** Runs the transformation in a context of its own, gone after; throws only SandboxBroken. */
  run(code: string, request: TransformRequest, context: TransformContext): TransformOutcome {
    const prepared = this.prepare(code);
    if (!('vm' in prepared)) return prepared;
    try {
      return this.call(prepared, JSON.stringify(request), JSON.stringify(context)).outcome;
    } finally {
      dispose(prepared);
    }
  }

  /**
   * Runs the transformation in `owner`'s warm context for this code, made when there is
   * none; a run that fails drops its context. Throws only SandboxBroken.
   */
  runWarm(owner: string, code: string, request: TransformRequest, context: TransformContext): TransformOutcome {
    const key = `${owner}\n${code}`;
    let prepared = this.warm.get(key);
    if (prepared === undefined) {
      const made = this.prepare(code);
      if (!('vm' in made)) return made;
      prepared = made;
      while (this.warm.size >= MAX_WARM) this.drop(this.warm.keys().next().value!);
    } else {
      // Most recently used last.
      this.warm.delete(key);
    }
    this.warm.set(key, prepared);
    let sound = false;
    try {
      const { outcome, clean } = this.call(prepared, JSON.stringify(request), JSON.stringify(context));
      sound = clean && ++prepared.runs < MAX_WARM_RUNS;
      if (sound) this.touched.add(key);
      return outcome;
    } finally {
      if (!sound) this.drop(key);
    }
  }

  /**
   * After a batch: warm contexts it ran that now hold more than WARM_HEAP_BYTES are dropped,
   * so what one owner keeps does not take the memory another's run is promised. QuickJS's
   * count is an estimate (it leaves out, for one, strings held in arrays' elements): a run
   * that reached the cap while other owners' contexts were warm is run again in a fresh
   * module by the worker, so it is never another's keeping that fails it. Throws only SandboxBroken.
   */
  settle(): void {
    for (const key of this.touched) {
      const prepared = this.warm.get(key);
      if (prepared !== undefined && heapBytes(prepared) > WARM_HEAP_BYTES) this.drop(key);
    }
    this.touched.clear();
  }

  /** Null when the code compiles and defines a function, else what is wrong (with its line); throws only SandboxBroken. */
  check(code: string): string | null {
    const prepared = this.prepare(code);
    if (!('vm' in prepared)) return prepared.kind === 'error' ? prepared.message : null;
    dispose(prepared);
    return null;
  }

  private drop(key: string): void {
    const prepared = this.warm.get(key);
    this.warm.delete(key);
    this.touched.delete(key);
    if (prepared !== undefined) dispose(prepared);
  }

  /**
   * A fresh runtime and context, the prelude and the code evaluated and its function found;
   * or the error outcome of why not (all it made disposed then).
   */
  private prepare(code: string): Prepared | TransformOutcome {
    if (code.length > MAX_CODE_CHARS) return failed(`the code is longer than ${MAX_CODE_CHARS} characters`);
    // Set again as the company's code starts: the runtime and the prelude are intake's time.
    const clock: RunClock = { started: performance.now(), cpuAtStart: recentThreadCpuMs(), exceeded: false };
    const over = overLimit(this.limits.cpuMs, clock);
    const handles: QuickJSHandle[] = [];
    const own = (handle: QuickJSHandle) => (handles.push(handle), handle);
    let runtime: QuickJSRuntime | undefined;
    let vm: QuickJSContext | undefined;
    let ready = false;
    try {
      runtime = this.module.newRuntime({
        // Refuses any one allocation larger than the limit at once; the cap bounds the sum.
        memoryLimitBytes: this.limits.memoryMb * MB,
        maxStackSizeBytes: STACK_BYTES,
        interruptHandler: () => (clock.exceeded ||= over()),
      });
      vm = runtime.newContext({ intrinsics: { ...DefaultIntrinsics, Date: false } });
      const context = vm;
      const prelude = context.evalCode(PRELUDE, 'sandbox.js');
      if (prelude.error) return this.explain(context, own(prelude.error), undefined, clock);
      const pair = own(prelude.value);
      const invoke = own(context.getProp(pair, 0));
      const describe = own(context.getProp(pair, 1));
      clock.started = performance.now();
      clock.cpuAtStart = recentThreadCpuMs();
      const evaluated = context.evalCode(code, CODE_FILE);
      if (evaluated.error) return this.explain(context, own(evaluated.error), describe, clock);
      const completion = own(evaluated.value);
      const found = context.evalCode(FIND, 'sandbox.js');
      if (found.error) return this.explain(context, own(found.error), describe, clock);
      const named = own(found.value);
      const transform = context.typeof(named) === 'function' ? named : context.typeof(completion) === 'function' ? completion : null;
      if (transform === null) return failed(NO_FUNCTION);
      ready = true;
      return { runtime, vm, handles, transform, invoke, describe, clock, runs: 0 };
    } catch (error) {
      throw new SandboxBroken(error);
    } finally {
      // A module that cannot free its runtime is broken, whatever the run returned.
      if (!ready) release(handles, vm, runtime);
    }
  }

  /** One call of a prepared transform; `clean` is false when it failed in any way (its context should go). */
  private call(prepared: Prepared, request: string, context: string): { outcome: TransformOutcome; clean: boolean } {
    const { vm, clock } = prepared;
    this.ranOutOfMemory = false;
    clock.started = performance.now();
    clock.cpuAtStart = recentThreadCpuMs();
    clock.exceeded = false;
    const handles: QuickJSHandle[] = [];
    const own = (handle: QuickJSHandle) => (handles.push(handle), handle);
    try {
      const result = vm.callFunction(prepared.invoke, vm.undefined, prepared.transform, own(vm.newString(request)), own(vm.newString(context)));
      if (result.error) return { outcome: this.explain(vm, own(result.error), prepared.describe, clock), clean: false };
      const value = own(result.value);
      const outcome = outcomeOf(vm.typeof(value) === 'string' ? vm.getString(value) : undefined);
      return { outcome, clean: outcome.kind !== 'error' };
    } catch (error) {
      throw new SandboxBroken(error);
    } finally {
      try {
        for (const handle of handles.reverse()) if (handle.alive) handle.dispose();
      } catch (error) {
        throw new SandboxBroken(error);
      }
    }
  }

  /** An error outcome for what the code threw, in the words of the limit it reached when it reached one. */
  private explain(vm: QuickJSContext, error: QuickJSHandle, describe: QuickJSHandle | undefined, clock: RunClock): TransformOutcome {
    // Read first: a getter of what was thrown may be what runs out of time.
    const thrown = describe === undefined || clock.exceeded ? undefined : readThrown(vm, error, describe);
    if (clock.exceeded) return failed(`the transform ran out of time: it used more than ${this.limits.cpuMs} ms of CPU time`);
    const at = thrown !== undefined && 'stack' in thrown ? lineOf(thrown.stack) : '';
    const outOfMemory = thrown !== undefined && 'name' in thrown && thrown.name === 'InternalError' && thrown.message === 'out of memory';
    // At the cap, QuickJS may have no memory left for the error: it throws null, or describing fails.
    if (outOfMemory || (this.spent && (thrown === undefined || ('value' in thrown && thrown.value === 'null')))) {
      this.ranOutOfMemory = true;
      return failed(`the transform ran out of memory: it used more than ${this.limits.memoryMb} MB${at}`);
    }
    if (thrown === undefined) return failed('the transform failed with an error that could not be read');
    if ('value' in thrown) return failed(`the transform threw ${thrown.value}`);
    if (thrown.name === 'InternalError' && thrown.message === 'stack overflow') {
      return failed(`the transform recursed too deeply (stack overflow)${at}`);
    }
    return failed(`${thrown.name}: ${thrown.message}${at}`);
  }
}

function dispose(prepared: Prepared): void {
  release(prepared.handles, prepared.vm, prepared.runtime);
}

/** The bytes of QuickJS's heap a prepared context's runtime holds, as QuickJS counts them. */
function heapBytes(prepared: Prepared): number {
  try {
    const usage = prepared.runtime.computeMemoryUsage();
    const size = prepared.vm.getProp(usage, 'memory_used_size');
    const bytes = prepared.vm.getNumber(size);
    size.dispose();
    usage.dispose();
    return bytes;
  } catch (error) {
    throw new SandboxBroken(error);
  }
}

/** The module's memory cap for these limits. */
function capOf(limits: SandboxLimits): number {
  return MODULE_BYTES + limits.memoryMb * MB + MAX_WARM * WARM_HEAP_BYTES;
}

function release(handles: QuickJSHandle[], vm: QuickJSContext | undefined, runtime: QuickJSRuntime | undefined): void {
  try {
    for (const handle of handles.reverse()) if (handle.alive) handle.dispose();
    vm?.dispose();
    runtime?.dispose();
  } catch (error) {
    throw new SandboxBroken(error);
  }
}

/** What was thrown, read inside the sandbox (its getters run there, within the run's limits). */
function readThrown(vm: QuickJSContext, error: QuickJSHandle, describe: QuickJSHandle): Thrown | undefined {
  const described = vm.callFunction(describe, vm.undefined, error);
  if (described.error) {
    described.error.dispose();
    return undefined;
  }
  const text = vm.typeof(described.value) === 'string' ? vm.getString(described.value) : undefined;
  described.value.dispose();
  return text === undefined ? undefined : (JSON.parse(text) as Thrown);
}

/** ` (line L, column C)` of the first frame in the code, or '' when the stack names none. */
function lineOf(stack: string): string {
  const match = LINE.exec(stack);
  if (match === null) return '';
  return match[2] === undefined ? ` (line ${match[1]})` : ` (line ${match[1]}, column ${match[2]})`;
}

/**
 * The hard bound of a run's wall time, past which it stops whatever its CPU time: far above
 * the limit, because the worker thread runs at a lower priority than intake's own and on a
 * busy machine waits for the CPU; below the pool's bound for a thread that gets none, which
 * replaces the worker.
 */
function hardWallMs(cpuMs: number): number {
  return cpuMs * 40 + 2000;
}

/** How often, at most, a run past its wall time reads its thread's CPU time. */
const CPU_READ_EVERY_MS = 5;

/**
 * The interrupt handler's test: within the limit's wall time, on; past it, on while the
 * thread's CPU time is within the limit (read every few ms), off past the hard bound.
 */
function overLimit(cpuMs: number, clock: RunClock): () => boolean {
  let lastRead = 0;
  let lastAnswer = false;
  let run = clock.started;
  return () => {
    const { started, cpuAtStart } = clock;
    // A new run in a warm context: nothing of the last one's reading counts.
    if (started !== run) [run, lastRead, lastAnswer] = [started, 0, false];
    const now = performance.now();
    const wall = now - started;
    if (wall <= cpuMs) return false;
    if (wall > hardWallMs(cpuMs) || cpuAtStart === null) return true;
    if (now - lastRead < CPU_READ_EVERY_MS) return lastAnswer;
    lastRead = now;
    const cpu = threadCpuMs();
    lastAnswer = cpu === null || cpu - cpuAtStart > cpuMs;
    return lastAnswer;
  };
}

let lastCpuRead = { at: -Infinity, cpuMs: null as number | null };

/**
 * threadCpuMs, read again only when the last reading is CPU_READ_EVERY_MS old: a warm run
 * takes tens of microseconds, and the reading (clock ticks of 10 ms) about ten. A run's start
 * taken from an older reading counts up to that much more against its limit, never less.
 */
function recentThreadCpuMs(): number | null {
  const now = performance.now();
  if (now - lastCpuRead.at >= CPU_READ_EVERY_MS) lastCpuRead = { at: now, cpuMs: threadCpuMs() };
  return lastCpuRead.cpuMs;
}

/**
 * The CPU time of the calling thread, ms, from Linux's /proc/thread-self/stat (utime and
 * stime, in clock ticks of 10 ms); null where there is none. Node 20 has no per-thread CPU
 * clock (process.threadCpuUsage came in Node 23.9), and process.cpuUsage counts every thread.
 */
export function threadCpuMs(): number | null {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the name: state is field 3, utime 14 and stime 15 (proc(5)), so 11 and 12 here.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : null;
  } catch {
    return null;
  }
}
