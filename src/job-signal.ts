/**
 * `jobSignal()`: inside a job run for an executor — a pool thread's or a distributed worker's —
 * the AbortSignal its caller aborts by cancelling the job's Future (no asyncio counterpart: a
 * Python thread cannot be told to stop either, but it can be asked).
 *
 * Which job is "the current one" depends on how the job runs, so it is found three ways, first
 * match wins:
 * - a coroutine job runs as a Task of a loop: a ContextVar of the Task's context names it;
 * - a plain or async function run by a distributed worker, several at once: an
 *   AsyncLocalStorage (made on first use, so processes that never serve jobs never pay for it);
 * - a pool thread runs one job at a time: the pool's runner names it (see pool-job.ts).
 *
 * A job's signal is made the first time the job asks for it; a job that never asks costs nothing.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { ContextVar, copyContext, type Context } from './contextvars.js';
import { RuntimeError } from './exceptions.js';
import { _getRunningLoop } from './internal/running.js';

/**
 * @internal The running job, seen from inside: it makes the job's signal when first asked.
 */
export interface JobSignalSource {
  signal(): AbortSignal;
}

/** The job a Task runs for (set in the context of a coroutine job's Task). */
const taskJob = new ContextVar<JobSignalSource | null>('multiloop.job', { default: null });

/** The job a plain or async function runs for, in a distributed worker. */
let functionJob: AsyncLocalStorage<JobSignalSource> | null = null;

/** The signal of the job this pool thread runs, or null outside one (installed by pool-job.ts). */
let poolJob: () => AbortSignal | null = () => null;

/**
 * Return the AbortSignal of the job running here: aborted when the caller cancels the job's
 * Future (its reason a CancelledError). A job that never looks at it runs on, as in asyncio;
 * one that passes it to `fetch`, `setTimeout` of `timers/promises`, a stream... stops them.
 * Works in pool jobs (`runInExecutor`, `toThread`) and in jobs of `serveBullMQ` workers, for
 * plain, async and coroutine functions. Outside a job: RuntimeError.
 *
 * @example
 * ```ts
 * // jobs.ts, run with loop.runInExecutor(executor, workerFn('./jobs.js', 'download'), url)
 * export async function download(url: string): Promise<string> {
 *   const response = await fetch(url, { signal: jobSignal() });
 *   return response.text();
 * }
 * ```
 */
export function jobSignal(): AbortSignal {
  const loop = _getRunningLoop();
  // Inside a loop iteration code runs for a Task or a callback, never as an async function's
  // continuation (those run after the iteration): only the Task's context can tell.
  if (loop !== null && loop._inDrive()) {
    const source = taskJob.get();
    if (source !== null) return source.signal();
  } else {
    const source = functionJob?.getStore();
    if (source !== undefined) return source.signal();
  }
  const pooled = poolJob();
  if (pooled !== null) return pooled;
  throw new RuntimeError(
    'jobSignal() was called outside a job: it works inside a function run by an executor (runInExecutor, toThread, a serveBullMQ worker)',
  );
}

/**
 * @internal Call `fn()` as part of the job `source`: `jobSignal()` finds it there, and in every
 * async continuation `fn` starts.
 */
export function _runAsJob<R>(source: JobSignalSource, fn: () => R): R {
  functionJob ??= new AsyncLocalStorage<JobSignalSource>();
  return functionJob.run(source, fn);
}

/** @internal A copy of the current context in which `jobSignal()` finds `source`: for the Task of a coroutine job. */
export function _jobContext(source: JobSignalSource): Context {
  const context = copyContext();
  context.run(() => taskJob.set(source));
  return context;
}

/** @internal Install how `jobSignal()` finds the job of this pool thread. */
export function _setPoolJobSignal(lookup: () => AbortSignal | null): void {
  poolJob = lookup;
}
