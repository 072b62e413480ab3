/**
 * Thread-safe futures and chaining (concurrent.futures.Future, asyncio.wrap_future,
 * asyncio.run_coroutine_threadsafe).
 *
 * A ConcurrentFuture is completed from outside any loop's callbacks: by an executor when a
 * pool thread answers, by a message from another thread, by a Task of a loop. Its done
 * callbacks run at once, in whatever code completed it; chaining into a loop's Future always
 * goes through that loop's `callSoonThreadsafe`, as asyncio's `_chain_future` does.
 */
import type { EventLoop } from './base-events.js';
import { isCoroutine, type Coroutine } from './coroutines.js';
import { getEventLoop } from './events.js';
import { CANCELLED, FAILED, Future, PENDING, type LoopOption } from './futures.js';
import { ConcurrentFuture } from './internal/concurrent-future.js';
import { repr } from './internal/format.js';
import { ensureFuture } from './task.js';

export { ConcurrentFuture };

/** Copy the outcome of a done asyncio Future into a pending ConcurrentFuture. */
function copyIntoConcurrent<T>(source: Future<T>, destination: ConcurrentFuture<T>): void {
  if (destination.done()) return;
  if (source._state === CANCELLED) {
    destination.cancel();
    return;
  }
  if (!destination._setRunningOrNotifyCancel()) return;
  if (source._state === FAILED) destination._setException(source.exception());
  else destination._setResult(source.result());
}

/** Copy the outcome of a done ConcurrentFuture into a Future, unless that was cancelled meanwhile. */
function copyIntoFuture<T>(destination: Future<T>, source: ConcurrentFuture<T>): void {
  if (destination.done()) return;
  if (source.cancelled()) {
    destination.cancel();
    return;
  }
  const error = source.exception();
  if (error !== null) destination._setExceptionUnchecked(error);
  else destination._setResultUnchecked(source.result());
}

/** Return a multiloop Future as is (wrap_future). */
export function wrapFuture<F extends Future<unknown>>(future: F, options?: LoopOption): F;
/** Wrap a ConcurrentFuture in a Future of `options.loop` (else the running/current loop) (wrap_future). */
export function wrapFuture<T>(future: ConcurrentFuture<T>, options?: LoopOption): Future<T>;
/**
 * Chain a ConcurrentFuture to a new Future of a loop (asyncio.wrap_future): its outcome is
 * copied into the Future through `callSoonThreadsafe`, and cancelling the Future cancels the
 * ConcurrentFuture. A multiloop Future is returned as is.
 *
 * @example
 * ```ts
 * const fut = wrapFuture(executor.submit(workerFn(url, 'hash'), data));
 * const digest = yield* fut;
 * ```
 */
export function wrapFuture(future: unknown, options?: LoopOption): Future<unknown> {
  if (future instanceof Future) {
    if (options?.loop !== undefined && options.loop !== future.getLoop()) {
      throw new RangeError('The future belongs to a different loop than the one specified as the loop argument');
    }
    return future;
  }
  if (!(future instanceof ConcurrentFuture)) {
    throw new TypeError(`concurrent.futures.Future is expected, got ${repr(future)}`);
  }
  const loop = options?.loop ?? getEventLoop();
  const destination = loop.createFuture<unknown>();
  chainConcurrent(future as ConcurrentFuture<unknown>, destination, loop);
  return destination;
}

/** @internal Chain `source` into `destination` of `loop` (asyncio's `_chain_future`, concurrent source). */
export function chainConcurrent<T>(source: ConcurrentFuture<T>, destination: Future<T>, loop: EventLoop): void {
  // Snapshots (ps) read what a pending future follows from its result slot, unused until it is done.
  if (destination._state === PENDING) destination._result = source;
  destination.addDoneCallback((done) => {
    if (done.cancelled()) source.cancel();
  });
  // A virtual clock waits for the other side rather than jumping past it.
  loop._holdClock();
  source.addDoneCallback((completed) => {
    loop._releaseClock();
    if (loop.isClosed() || destination.done()) return;
    loop.callSoonThreadsafe(copyIntoFuture<T>, destination, completed);
  });
}

/**
 * Submit a coroutine to `loop` from outside its callbacks (asyncio.run_coroutine_threadsafe):
 * it becomes a Task there on the loop's next iteration, and the returned ConcurrentFuture
 * follows it; cancelling the ConcurrentFuture cancels the Task.
 *
 * @example
 * ```ts
 * const cf = runCoroutineThreadsafe(fetchStatus(), loop);
 * cf.addDoneCallback((f) => console.log(f.result()));
 * ```
 */
export function runCoroutineThreadsafe<T>(coro: Coroutine<T>, loop: EventLoop): ConcurrentFuture<T> {
  if (!isCoroutine(coro)) throw new TypeError('A coroutine object is required');
  const future = ConcurrentFuture._create<T>();
  loop.callSoonThreadsafe(() => {
    let task: Future<T>;
    try {
      task = ensureFuture(coro, { loop });
    } catch (error) {
      if (future._setRunningOrNotifyCancel()) future._setException(error);
      throw error;
    }
    future.addDoneCallback((cf) => {
      if (cf.cancelled() && !task.done()) loop.callSoonThreadsafe(() => task.cancel());
    });
    task.addDoneCallback((done) => copyIntoConcurrent(done, future));
  });
  return future;
}
