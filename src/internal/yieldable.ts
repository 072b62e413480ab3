/**
 * Promises a coroutine can `yield*` (YieldablePromise): a native Promise whose prototype adds an
 * iterator that awaits it as a Future of the running loop. The Promise itself stays native (its
 * `constructor` is Promise, so `then` makes plain Promises and `await` takes its fast path); no
 * second Promise is made to carry the iterator.
 */
import type { YieldablePromise } from '../coroutines.js';
import { ensureFuture } from '../task.js';

const YIELDABLE: object = Object.create(Promise.prototype, {
  [Symbol.iterator]: {
    *value(this: Promise<unknown>): Generator<unknown, unknown, unknown> {
      return yield* ensureFuture(this);
    },
    writable: true,
    configurable: true,
  },
});

/**
 * `promise`, made `yield*`-able in a coroutine (the same object, returned as a YieldablePromise).
 *
 * @example
 * ```ts
 * static start(url: string): YieldablePromise<LoopThread> {
 *   return yieldable(LoopThread.#start(url));
 * }
 * ```
 */
export function yieldable<T>(promise: Promise<T>): YieldablePromise<T> {
  Object.setPrototypeOf(promise, YIELDABLE);
  return promise as YieldablePromise<T>;
}
