/**
 * High-level offloading of blocking work (asyncio.threads).
 */
import { getRunningLoop } from './events.js';
import type { Future } from './futures.js';
import type { WorkerFn } from './worker-fn.js';

/**
 * Run `fn(...args)` in the default executor of the running loop and return a Future of its
 * result (asyncio.to_thread).
 *
 * `fn` is a WorkerFn: threads share no heap, so the function is named by module and export and
 * imported by the pool thread, and arguments and result cross by structured clone (buffers
 * marked with `move()` are transferred). asyncio copies the caller's contextvars into the
 * thread; that cannot be done here: a ContextVar lives in one thread's heap, so the job sees
 * the pool thread's own values, and whatever it needs must be passed as an argument.
 * Cancelling the Future of a job still queued removes it; a running job runs on. Outside a
 * running loop: RuntimeError('no running event loop').
 *
 * @example
 * ```ts
 * // hash.js: export function sha256(bytes) { return createHash('sha256').update(bytes).digest('hex'); }
 * const sha256 = workerFn<[Uint8Array], string>(new URL('./hash.js', import.meta.url), 'sha256');
 * const digest = yield* toThread(sha256, move(bytes));
 * ```
 */
export function toThread<A extends unknown[], R>(fn: WorkerFn<A, R>, ...args: A): Future<R> {
  return getRunningLoop()._runInExecutor(null, fn, args, 'toThread()');
}
