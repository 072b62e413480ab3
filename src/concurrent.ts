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
import { CancelledError, InvalidStateError, TimeoutError, _isEscaping } from './exceptions.js';
import { CANCELLED, FAILED, Future, type LoopOption } from './futures.js';
import { repr } from './internal/format.js';
import { logger } from './log.js';
import { ensureFuture } from './task.js';

const PENDING = 0;
const RUNNING = 1;
const CANCELLED_STATE = 2;
const FINISHED = 3;
const STATE_NAMES = ['PENDING', 'RUNNING', 'CANCELLED', 'FINISHED'] as const;

/**
 * A thread-safe future, as made by executors and `runCoroutineThreadsafe`
 * (concurrent.futures.Future). Its methods never block: `result()` of a pending future throws
 * TimeoutError.
 *
 * @example
 * ```ts
 * const cf = runCoroutineThreadsafe(compute(), loop);
 * cf.addDoneCallback((f) => console.log(f.result()));
 * ```
 */
export class ConcurrentFuture<T = unknown> {
  #state = PENDING;
  #result: T | undefined = undefined;
  #exception: unknown = null;
  #failed = false;
  #callbacks: Array<(future: ConcurrentFuture<T>) => void> = [];
  /** @internal Blocks this thread until the future may be done or `timeout` seconds passed (futures of other threads). */
  _blocker: ((timeout: number | null) => void) | null = null;

  /** Executors and `runCoroutineThreadsafe` create these; use `ConcurrentFuture._create()` inside the library. */
  protected constructor() {}

  /** @internal Create a pending future. */
  static _create<T>(): ConcurrentFuture<T> {
    return new ConcurrentFuture<T>();
  }

  /** Whether the future is done: finished or cancelled. */
  done(): boolean {
    return this.#state === FINISHED || this.#state === CANCELLED_STATE;
  }

  /** Whether the future was cancelled. */
  cancelled(): boolean {
    return this.#state === CANCELLED_STATE;
  }

  /** Whether the work behind the future is running now (it can no longer be cancelled). */
  running(): boolean {
    return this.#state === RUNNING;
  }

  /**
   * The result; throws the error, CancelledError if cancelled, TimeoutError if not done yet.
   * Without `timeout` it never blocks. With one (seconds, or null for no limit), a future that
   * another thread completes (`ref.submit()`) blocks this thread until it is done, waiting on
   * Atomics; a future completed in this thread cannot be waited for that way (it would never
   * complete while the thread blocks): TimeoutError at once.
   */
  result(timeout?: number | null): T {
    if (timeout !== undefined) this.#wait(timeout);
    if (this.#state === CANCELLED_STATE) throw new CancelledError();
    if (this.#state !== FINISHED) throw new TimeoutError();
    if (this.#failed) throw this.#exception;
    return this.#result as T;
  }

  /** The error or null; throws CancelledError if cancelled, TimeoutError if not done yet; `timeout` as for `result`. */
  exception(timeout?: number | null): Error | null {
    if (timeout !== undefined) this.#wait(timeout);
    if (this.#state === CANCELLED_STATE) throw new CancelledError();
    if (this.#state !== FINISHED) throw new TimeoutError();
    return this.#failed ? (this.#exception as Error) : null;
  }

  /** Cancel unless running or done; returns whether the future is cancelled (cancel). */
  cancel(): boolean {
    if (this.#state === RUNNING || this.#state === FINISHED) return false;
    if (this.#state === CANCELLED_STATE) return true;
    this.#state = CANCELLED_STATE;
    this.#invokeCallbacks();
    return true;
  }

  /**
   * Call `callback(this)` once done, at once when already done (add_done_callback). An error
   * thrown by the callback is logged, never raised.
   */
  addDoneCallback(callback: (future: ConcurrentFuture<T>) => void): void {
    if (typeof callback !== 'function') {
      throw new TypeError(`a callable object was expected by addDoneCallback(), got ${repr(callback)}`);
    }
    if (this.done()) this.#call(callback);
    else this.#callbacks.push(callback);
  }

  /**
   * Mark the work as started unless the future was cancelled; returns false when it was
   * (set_running_or_notify_cancel).
   *
   * @internal
   */
  _setRunningOrNotifyCancel(): boolean {
    if (this.#state === CANCELLED_STATE) return false;
    if (this.#state !== PENDING) throw new InvalidStateError(`Future in unexpected state: ${STATE_NAMES[this.#state]}`);
    this.#state = RUNNING;
    return true;
  }

  /** @internal Complete with a result; InvalidStateError when done. */
  _setResult(value: T): void {
    this.#checkSettable();
    this.#result = value;
    this.#state = FINISHED;
    this.#invokeCallbacks();
  }

  /** @internal Complete with an error; InvalidStateError when done. */
  _setException(error: unknown): void {
    this.#checkSettable();
    this.#exception = error;
    this.#failed = true;
    this.#state = FINISHED;
    this.#invokeCallbacks();
  }

  toString(): string {
    const state = STATE_NAMES[this.#state].toLowerCase();
    if (this.#state !== FINISHED) return `<ConcurrentFuture state=${state}>`;
    return this.#failed
      ? `<ConcurrentFuture state=finished raised ${repr(this.#exception)}>`
      : `<ConcurrentFuture state=finished returned ${repr(this.#result)}>`;
  }

  #wait(timeout: number | null): void {
    if (timeout !== null && (typeof timeout !== 'number' || Number.isNaN(timeout))) {
      throw new TypeError(`timeout must be a number of seconds or null, got ${repr(timeout)}`);
    }
    if (!this.done() && this._blocker !== null) this._blocker(timeout);
  }

  #checkSettable(): void {
    if (this.#state === CANCELLED_STATE || this.#state === FINISHED) {
      throw new InvalidStateError(`${STATE_NAMES[this.#state]}: ${this}`);
    }
  }

  #invokeCallbacks(): void {
    const callbacks = this.#callbacks;
    this.#callbacks = [];
    for (const callback of callbacks) this.#call(callback);
  }

  #call(callback: (future: ConcurrentFuture<T>) => void): void {
    try {
      callback(this);
    } catch (error) {
      if (_isEscaping(error)) throw error;
      logger.error(`exception calling callback for ${this}`, error);
    }
  }
}

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
  destination.addDoneCallback((done) => {
    if (done.cancelled()) source.cancel();
  });
  source.addDoneCallback((completed) => {
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
