/**
 * Promises and AbortSignal, both ways: a Future whose cancellation aborts the operation behind a
 * Promise (`fromAbortable`), and an AbortSignal that cancels a run (`{ signal }` on `run`,
 * `Runner.run` and `loop.runUntilComplete`). Node's `{ signal }` APIs (fetch, fs.promises,
 * timers/promises, events.once, stream.pipeline, child_process) stop when their signal aborts,
 * which no Promise can be made to do from outside.
 */
import type { EventLoop } from './base-events.js';
import { CancelledError } from './exceptions.js';
import { Future, type LoopOption } from './futures.js';
import { repr } from './internal/format.js';
import { _getEventLoop } from './internal/running.js';

/** Options that tie a run to an AbortSignal. */
export interface SignalOption {
  /**
   * Aborting it cancels the task; once the task ended cancelled (its `finally` blocks ran) the
   * Promise rejects with `signal.reason`. An already-aborted signal: the coroutine never starts.
   */
  signal?: AbortSignal;
}

/** A Future whose cancellation aborts the signal handed to the operation it follows. */
class AbortableFuture<T> extends Future<T> {
  readonly #controller: AbortController;

  constructor(loop: EventLoop, controller: AbortController) {
    super({ loop });
    this.#controller = controller;
  }

  override cancel(msg?: string): boolean {
    const cancelled = super.cancel(msg);
    if (cancelled) this.#controller.abort(new CancelledError(msg ?? ''));
    return cancelled;
  }
}

/**
 * Call `start(signal)` at once with a fresh AbortSignal and return a Future of `options.loop`
 * (else the running or current loop) that settles as the Promise it returns. Cancelling the
 * Future aborts the signal (its reason: the CancelledError), so the operation really stops: a
 * `fetch`, a file read, a timer, anything that takes `{ signal }`. What the Promise does after
 * that is ignored and never reported as an unhandled rejection. `start` throwing fails the
 * Future with that error; `start` returning something that is not a Promise (a thenable) fails
 * it with a TypeError.
 *
 * Put the whole operation in `start`: for a download, the fetch and the reading of its body,
 * which a later `response.text()` outside would go on with, whatever became of the Future.
 *
 * @example
 * ```ts
 * const page = yield* waitFor(fromAbortable(async (signal) => (await fetch(url, { signal })).text()), 5);
 * // past 5 seconds: TimeoutError here, and the download is aborted, headers or body, its socket closed
 * ```
 */
export function fromAbortable<T>(start: (signal: AbortSignal) => PromiseLike<T>, options?: LoopOption): Future<T> {
  if (typeof start !== 'function') throw new TypeError(`fromAbortable() needs a function that takes an AbortSignal, got ${repr(start)}`);
  const loop = options?.loop ?? _getEventLoop();
  const controller = new AbortController();
  const future = new AbortableFuture<T>(loop, controller);
  let promise: PromiseLike<T>;
  try {
    promise = start(controller.signal);
  } catch (error) {
    future._setExceptionUnchecked(error);
    return future;
  }
  if (promise === null || (typeof promise !== 'object' && typeof promise !== 'function') || typeof promise.then !== 'function') {
    future._setExceptionUnchecked(new TypeError(`fromAbortable() start must return a Promise, got ${repr(promise)}`));
    return future;
  }
  // Both handlers always: a rejection after the abort is expected, never unhandled.
  promise.then(
    (value) => settle(loop, future, false, value),
    (error: unknown) => settle(loop, future, true, error),
  );
  return future;
}

/** Settle `future` from a Promise reaction, in a loop iteration; nothing when it is done or its loop closed. */
function settle<T>(loop: EventLoop, future: Future<T>, failed: boolean, outcome: unknown): void {
  if (future.done() || loop.isClosed()) return;
  loop.callSoonThreadsafe(() => {
    if (future.done()) return;
    if (!failed) future._setResultUnchecked(outcome as T);
    else future._setExceptionUnchecked(outcome ?? new TypeError(`a Promise rejected with ${String(outcome)}`));
  });
}

/**
 * Cancel `future` when `signal` aborts, from wherever the abort comes (another callback, a Promise
 * reaction); returns what stops watching. An already-aborted signal cancels it at once.
 *
 * @internal
 */
export function _cancelOnAbort(future: Future<unknown>, signal: AbortSignal): () => void {
  const loop = future.getLoop();
  const onAbort = (): void => {
    if (future.done() || loop.isClosed()) return;
    loop.callSoonThreadsafe(() => {
      future.cancel();
    });
  };
  if (signal.aborted) {
    future.cancel();
    return () => undefined;
  }
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

/**
 * @internal Check the `signal` option of `caller` (`'run()'`...): an AbortSignal or nothing.
 */
export function _checkSignal(signal: unknown, caller: string): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) throw new TypeError(`${caller} options.signal must be an AbortSignal, got ${repr(signal)}`);
  return signal;
}
