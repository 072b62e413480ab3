/**
 * The task helpers of asyncio.tasks: sleep, and (with the toolkit) gather, wait, waitFor,
 * shield, asCompleted.
 */
import type { Coroutine } from './coroutines.js';
import { getRunningLoop } from './events.js';
import type { Future } from './futures.js';

function setResultUnlessCancelled<T>(future: Future<T>, result: T): void {
  if (!future.done()) future.setResult(result);
}

/** Suspend for `delay` seconds; `sleep(0)` gives up exactly one iteration (asyncio.sleep). */
export function sleep(delay: number): Coroutine<void>;
/** Suspend for `delay` seconds, then return `result` (asyncio.sleep). */
export function sleep<T>(delay: number, result: T): Coroutine<T>;
/**
 * Suspend the current task for `delay` seconds and return `result`. A delay of 0 or less
 * gives up exactly one loop iteration; NaN is a RangeError (asyncio.sleep).
 *
 * @example
 * ```ts
 * function* main(): Coroutine<string> {
 *   yield* sleep(0.5);
 *   return yield* sleep(0.1, 'done');
 * }
 * ```
 */
export function* sleep<T>(delay: number, result?: T): Coroutine<T | undefined> {
  if (typeof delay !== 'number') throw new TypeError(`delay must be a number, got ${typeof delay}`);
  if (Number.isNaN(delay)) throw new RangeError('Invalid delay: NaN (not a number)');
  if (delay <= 0) {
    yield;
    return result;
  }
  const loop = getRunningLoop();
  const future = loop.createFuture<T | undefined>();
  const timer = loop.callLater(delay, setResultUnlessCancelled, future, result);
  try {
    return yield* future;
  } finally {
    timer.cancel();
  }
}
