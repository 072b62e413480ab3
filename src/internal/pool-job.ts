/**
 * What travels between an executor and its pool threads, and the pool thread's side of it.
 *
 * Jobs travel in batches: one piscina task carries one or many jobs. Each batch has a
 * SharedArrayBuffer with one Int32 slot per job, the job's state; both sides move a slot with
 * `Atomics.compareExchange`, so a job cancelled while queued is skipped by the thread, and the
 * main thread knows whether a job already runs when it is cancelled:
 *
 *   QUEUED ──thread──▶ RUNNING ──thread──▶ DONE
 *     └──────main────▶ CANCELLED
 */
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Transferable } from 'node:worker_threads';
import { move as piscinaMove, transferableSymbol, valueSymbol } from 'piscina';
import { collectTransfers } from '../transfer.js';
import { encodeError, type EncodedError } from './errors.js';
import { typeName } from './format.js';
import { describeUncloneable, findUncloneable } from './uncloneable.js';

/** The job waits: the thread has not reached it. */
export const QUEUED = 0;
/** The thread started the job. */
export const RUNNING = 1;
/** The main thread cancelled the job before it started; the thread skips it. */
export const CANCELLED = 2;
/** The thread finished the job; its outcome is in the batch's response. */
export const DONE = 3;

/**
 * Carry a batch of jobs to a pool thread: the payload of one piscina task.
 *
 * @example
 * ```ts
 * const request: BatchRequest = { fns: [url, 'add'], jobs: Int32Array.of(0, 2), args: [40, 2], slots };
 * ```
 */
export interface BatchRequest {
  /** The batch's distinct functions, flattened: module URL, export name, module URL, ... */
  readonly fns: string[];
  /**
   * Per job, two numbers: the position of its function in `fns` (counted in pairs) and how
   * many arguments it has. A typed array crosses as one copy of its bytes.
   */
  readonly jobs: Int32Array;
  /** The arguments of all jobs, one after the other: one flat array clones far faster than an array per job. */
  readonly args: unknown[];
  /** Per job, its state slot, over a SharedArrayBuffer. */
  readonly slots: Int32Array;
}

/**
 * Carry a batch's outcomes back from a pool thread.
 *
 * @example
 * ```ts
 * const { values, failedAt, errors } = (await pool.run(request)) as BatchResponse;
 * ```
 */
export interface BatchResponse {
  /** Per job, its result (a hole for jobs that failed or were skipped). */
  readonly values: unknown[];
  /** The positions of the jobs that failed, ascending; null when none did. */
  readonly failedAt: number[] | null;
  /** The encoded errors of those jobs, in the same order. */
  readonly errors: EncodedError[] | null;
  /** How many jobs ran (skipped ones excluded). */
  readonly ran: number;
  /** Milliseconds the jobs took, module loading excluded. */
  readonly ms: number;
}

/** A module namespace, as `import()` gives it. */
type Namespace = Record<string, unknown>;
/** A job's function. */
type JobFunction = (...args: unknown[]) => unknown;

/** Modules imported by this thread, by URL: each is imported once. */
const modules = new Map<string, Namespace>();
/** Resolved functions, by module URL and export name. */
const functions = new Map<string, JobFunction>();

/** Milliseconds this thread spent importing during the current batch. */
let importMs = 0;

function pathOf(url: string): string {
  try {
    return fileURLToPath(url);
  } catch {
    return url;
  }
}

async function importModule(url: string, exportName: string): Promise<Namespace> {
  const started = performance.now();
  try {
    const namespace = (await import(url)) as Namespace;
    modules.set(url, namespace);
    return namespace;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    // Only the module itself being absent is reworded; a missing import inside it keeps its own message.
    if (code === 'ERR_MODULE_NOT_FOUND' && String((error as Error).message).includes(pathOf(url))) {
      const missing = new Error(`cannot run ${exportName} of ${url}: the module was not found`, { cause: error });
      (missing as Error & { code: string }).code = code;
      throw missing;
    }
    throw error;
  } finally {
    importMs += performance.now() - started;
  }
}

function exportOf(namespace: Namespace, url: string, exportName: string, key: string): JobFunction {
  if (!Object.hasOwn(namespace, exportName)) {
    throw new TypeError(`cannot run ${exportName} of ${url}: the module has no export named '${exportName}'`);
  }
  const fn = namespace[exportName];
  if (typeof fn !== 'function') {
    throw new TypeError(`cannot run ${exportName} of ${url}: the export is not a function (it is ${typeName(fn)})`);
  }
  functions.set(key, fn as JobFunction);
  return fn as JobFunction;
}

/** Call `fn` with `argc` arguments from `args[first]` on, without an array for the usual few. */
function call(fn: JobFunction, args: unknown[], first: number, argc: number): unknown {
  switch (argc) {
    case 0:
      return fn();
    case 1:
      return fn(args[first]);
    case 2:
      return fn(args[first], args[first + 1]);
    case 3:
      return fn(args[first], args[first + 1], args[first + 2]);
    default:
      return fn(...args.slice(first, first + argc));
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** The batch this thread runs or last ran: the next one starts after it. */
let previous: Promise<unknown> = Promise.resolve();

/**
 * Run a batch in this pool thread (the pool worker's task handler): each job not cancelled
 * meanwhile is run in order, awaited when it returns a thenable, and its result or encoded
 * error recorded. Moved buffers in results are transferred back.
 *
 * A thread holds up to two batches; the second starts once the first is done, so a thread runs
 * one job at a time, as a thread of ThreadPoolExecutor does, even while an async job awaits.
 *
 * @example
 * ```ts
 * // workers/pool-worker.ts
 * export default runBatch;
 * ```
 */
export function runBatch(request: BatchRequest): Promise<unknown> {
  const run = previous.then(() => runJobs(request));
  previous = run.catch(() => undefined);
  return run;
}

async function runJobs(request: BatchRequest): Promise<unknown> {
  const { fns, jobs, args, slots } = request;
  const count = slots.length;
  const values = new Array<unknown>(count);
  const transfer: Transferable[] = [];
  let failedAt: number[] | null = null;
  let errors: EncodedError[] | null = null;
  let ran = 0;
  importMs = 0;
  const started = performance.now();
  const resolved = new Array<JobFunction | undefined>(fns.length >> 1);
  let next = 0;
  for (let i = 0; i < count; i++) {
    const at = jobs[i * 2] as number;
    const argc = jobs[i * 2 + 1] as number;
    const first = next;
    next += argc;
    if (Atomics.compareExchange(slots, i, QUEUED, RUNNING) !== QUEUED) continue;
    ran++;
    const url = fns[at * 2] as string;
    const exportName = fns[at * 2 + 1] as string;
    try {
      let fn = resolved[at];
      if (fn === undefined) {
        const key = `${exportName}\0${url}`;
        fn = functions.get(key);
        if (fn === undefined) {
          const namespace = modules.get(url) ?? (await importModule(url, exportName));
          fn = exportOf(namespace, url, exportName, key);
        }
        resolved[at] = fn;
      }
      let result = call(fn, args, first, argc);
      if (isThenable(result)) result = await result;
      if (result !== null && typeof result !== 'number' && typeof result !== 'string' && typeof result !== 'boolean') {
        const found = findUncloneable(result, 'result');
        if (found !== null) {
          throw new TypeError(`cannot send the result of ${exportName} of ${url} back from the pool thread: ${describeUncloneable(found)}`);
        }
        collectTransfers(result, transfer);
      }
      values[i] = result;
    } catch (error) {
      (failedAt ??= []).push(i);
      (errors ??= []).push(encodeError(error));
    }
    Atomics.store(slots, i, DONE);
  }
  const response: BatchResponse = { values, failedAt, errors, ran, ms: performance.now() - started - importMs };
  if (transfer.length === 0) return response;
  // piscina transfers what a movable wrapper lists, and sends the value it wraps.
  return piscinaMove({ [transferableSymbol]: transfer, [valueSymbol]: response } as never);
}
