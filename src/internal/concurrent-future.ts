/**
 * ConcurrentFuture (concurrent.futures.Future): a future completed from outside any loop's
 * callbacks. It depends on nothing but the error classes, so that every module (executors,
 * links) can build on it without import cycles.
 */
import { CancelledError, InvalidStateError, TimeoutError, _isEscaping } from '../exceptions.js';
import { INSPECT, repr } from './format.js';
import { logger } from '../log.js';

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
  /** @internal Says what is known when a blocking wait of `timeout` seconds ended without an answer. */
  _describeTimeout: ((timeout: number | null) => string) | null = null;
  /** @internal Told once the call this future follows in another thread has ended there (see link.ts `onCallEnded`). */
  _ended: (() => void) | null = null;

  /** @internal What the future stands for, in snapshots (`job add of file:///srv/math.js in the pool, running`); null when nothing is known. */
  _describeWork(): string | null {
    return null;
  }

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
    if (this.#state !== FINISHED) throw this.#timedOut(timeout);
    if (this.#failed) throw this.#exception;
    return this.#result as T;
  }

  /** The error or null; throws CancelledError if cancelled, TimeoutError if not done yet; `timeout` as for `result`. */
  exception(timeout?: number | null): Error | null {
    if (timeout !== undefined) this.#wait(timeout);
    if (this.#state === CANCELLED_STATE) throw new CancelledError();
    if (this.#state !== FINISHED) throw this.#timedOut(timeout);
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

  /** The repr, also in `util.inspect` and console.log. */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    const state = STATE_NAMES[this.#state].toLowerCase();
    if (this.#state !== FINISHED) return `<ConcurrentFuture state=${state}>`;
    return this.#failed
      ? `<ConcurrentFuture state=finished raised ${repr(this.#exception)}>`
      : `<ConcurrentFuture state=finished returned ${repr(this.#result)}>`;
  }

  /** The TimeoutError of a future not done: saying what is known when a wait for another thread ended. */
  #timedOut(timeout: number | null | undefined): TimeoutError {
    const describe = this._describeTimeout;
    return timeout === undefined || describe === null || this._blocker === null ? new TimeoutError() : new TimeoutError(describe(timeout));
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
