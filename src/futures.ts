/**
 * Future: the eventual result of an operation, bound to one loop (asyncio.futures.Future).
 *
 * States: pending → finished (a result), failed (an error) or cancelled. Done callbacks are
 * always scheduled with the loop's `callSoon`, never called inline and never through
 * microtasks. A Future is awaited with `yield*` inside a coroutine and with `await` from an
 * async function while its loop runs.
 */
import { Context, _currentVars, type VarMap } from './contextvars.js';
import { _FUTURE, _awaiting } from './coroutines.js';
import { CancelledError, InvalidStateError, RuntimeError } from './exceptions.js';
import { INSPECT, describeCallback, repr } from './internal/format.js';
import { _getEventLoop } from './internal/running.js';
import { captureSuspension } from './internal/suspension.js';
import type { EventLoop, ExceptionContext } from './base-events.js';

/** @internal */
export const PENDING = 0;
/** @internal */
export const CANCELLED = 1;
/** @internal */
export const FINISHED = 2;
/** @internal A finished future that holds an error. */
export const FAILED = 3;

const STATE_NAMES = ['PENDING', 'CANCELLED', 'FINISHED', 'FINISHED'] as const;

/** Options that name the loop an object binds to. */
export interface LoopOption {
  /** The loop to use instead of the running (or current) one. */
  loop?: EventLoop;
}

/** @internal Who waits through a future's done-callback entry without a callback: a Task (woken through its own handle), or a gather. */
export interface Waiter {
  _wakeupFrom(future: Future<unknown>): void;
  /** How a waited-on future's repr names the entry (asyncio names the callback). */
  _waiterName(): string;
}

type DoneCallback = (future: never) => void;
type Entry = DoneCallback | Waiter;

interface NeverRetrieved {
  loop: EventLoop;
  message: string;
  exception: unknown;
  description: string;
  /** The future's entry in its loop's list of unretrieved failures. */
  ref: WeakRef<Future<unknown>>;
}

/**
 * Failed futures whose error nobody retrieved yet, with their entry in their loop's list. The
 * report comes when the future is collected, or when its loop closes, whichever is first.
 */
const unretrieved = new WeakMap<object, WeakRef<Future<unknown>>>();
/**
 * The messages of cancellations that carried one, kept aside rather than in a field of every
 * future: few futures are cancelled, fewer with a message, and every field costs each of the
 * many pending tasks a program holds.
 */
const cancelMessages = new WeakMap<object, string>();

/** Reports errors that nobody retrieved once their future is collected. */
const neverRetrieved = new FinalizationRegistry<NeverRetrieved>((held) => {
  held.loop._unretrieved?.delete(held.ref);
  const context: ExceptionContext = {
    message: held.message,
    exception: held.exception as Error,
    futureDescription: held.description,
  };
  held.loop.callExceptionHandler(context);
});

/**
 * Report, through `loop`'s exception handler, every failed future of `loop` whose error nobody
 * retrieved and that is still alive; the loop calls this as it closes (asyncio reports them
 * when the last reference goes, which in CPython is at the latest when the loop is dropped).
 *
 * @internal
 */
export function _reportUnretrieved(loop: EventLoop): void {
  const refs = loop._unretrieved;
  if (refs === null) return;
  loop._unretrieved = null;
  for (const ref of refs) {
    const future = ref.deref();
    if (future === undefined || !unretrieved.has(future)) continue;
    const exception = future._result;
    future._retrieved();
    loop.callExceptionHandler({ message: `${future._kind()} exception was never retrieved`, exception: exception as Error, future });
  }
}

/** What a plain future waits for, shared: snapshots ask every parked task's future. */
const AWAITS_NOTHING: ReadonlyArray<Future<unknown>> = Object.freeze([]);

/**
 * The eventual result of an operation, bound to one loop (asyncio.Future).
 *
 * @example
 * ```ts
 * function* main(): Coroutine<number> {
 *   const fut = getRunningLoop().createFuture<number>();
 *   getRunningLoop().callLater(0.1, () => fut.setResult(42));
 *   return yield* fut; // 42
 * }
 * ```
 */
export class Future<T = unknown> implements PromiseLike<T> {
  /** @internal */
  _state = PENDING;
  /**
   * @internal The result of a finished future, the error (any thrown value) of a failed one, the
   * CancelledError a cancelled Task re-raises once; while a Task is pending, what its next step
   * throws in. One slot, since a future is in one state at a time.
   */
  _result: unknown = undefined;
  /** @internal */
  _loop: EventLoop;
  /**
   * @internal The done callbacks: one entry alone (most futures have one at most, needing no
   * context), else [callback, context, callback, context, ...] in order.
   */
  _cb: Entry | Array<Entry | Context | VarMap> | null = null;

  /** Create a pending future on `options.loop`, else the running loop, else the current loop. */
  constructor(options?: LoopOption) {
    if (
      options !== undefined &&
      (options === null || typeof options !== 'object' || typeof (options as { callSoon?: unknown }).callSoon === 'function')
    ) {
      throw new TypeError(`Future() takes an options object, got ${repr(options)}`);
    }
    this._loop = options?.loop ?? _getEventLoop();
  }

  /** The loop this future is bound to (get_loop). */
  getLoop(): EventLoop {
    return this._loop;
  }

  /** Whether the future is done: finished with a result or an error, or cancelled (done). */
  done(): boolean {
    return this._state !== PENDING;
  }

  /** Whether the future was cancelled (cancelled). */
  cancelled(): boolean {
    return this._state === CANCELLED;
  }

  /**
   * The result; throws the stored error, CancelledError if cancelled, InvalidStateError if
   * pending (result).
   */
  result(): T {
    const state = this._state;
    if (state === FINISHED) return this._result as T;
    if (state === FAILED) {
      this._retrieved();
      throw this._result;
    }
    if (state === CANCELLED) throw this._makeCancelledError();
    throw new InvalidStateError('Result is not ready.');
  }

  /** The stored error or null; throws CancelledError if cancelled, InvalidStateError if pending (exception). */
  exception(): Error | null {
    const state = this._state;
    if (state === FINISHED) return null;
    if (state === FAILED) {
      this._retrieved();
      return this._result as Error;
    }
    if (state === CANCELLED) throw this._makeCancelledError();
    throw new InvalidStateError('Exception is not set.');
  }

  /** Mark done with a result; InvalidStateError when already done (set_result). */
  setResult(value: T): void {
    this._setResultUnchecked(value);
  }

  /**
   * Mark done with an error; InvalidStateError when already done (set_exception). An error
   * class is instantiated.
   */
  setException(exception: Error | (new () => Error)): void {
    this._setExceptionUnchecked(exception);
  }

  /**
   * Cancel; returns false when already done; `msg` becomes the CancelledError's message (cancel).
   *
   * @example
   * ```ts
   * fut.cancel('no longer needed'); // true
   * ```
   */
  cancel(msg?: string): boolean {
    return this._cancelFuture(msg ?? null);
  }

  /**
   * Call `callback(this)` via `callSoon` once done (at once scheduled when already done), in
   * `options.context` or a copy of the current context (add_done_callback).
   *
   * @example
   * ```ts
   * fut.addDoneCallback((f) => console.log('done:', f.result()));
   * ```
   */
  addDoneCallback(callback: (future: this) => void, options?: { context?: Context }): void {
    if (typeof callback !== 'function') {
      throw new TypeError(`a callable object was expected by addDoneCallback(), got ${repr(callback)}`);
    }
    const context = options?.context ?? _currentVars();
    if (this._state !== PENDING) this._schedule(callback as DoneCallback, context);
    else this._append(callback as DoneCallback, context);
  }

  /** Remove every registration of `callback`; returns how many were removed (remove_done_callback). */
  removeDoneCallback(callback: (future: this) => void): number {
    const entries = this._entries();
    const kept = entries.filter((entry) => entry[0] !== callback);
    const removed = entries.length - kept.length;
    if (removed > 0) this._storeEntries(kept);
    return removed;
  }

  /** Await the future inside a coroutine: `const v = yield* fut`. */
  [Symbol.iterator](): Generator<unknown, T, unknown> {
    return this as unknown as Generator<unknown, T, unknown>;
  }

  /**
   * The await protocol behind `yield*` (asyncio's `Future.__await__`): a pending future yields
   * itself once, flagged as blocking so the Task knows it came through `yield*`; resumed when
   * done, it returns the result. Resumed while still pending, it was not driven by a Task.
   * The future is its own iterator, so awaiting allocates nothing.
   *
   * @internal
   */
  next(): IteratorResult<unknown, T> {
    if (this._state === PENDING) {
      if (_awaiting.future === this) throw new RuntimeError("await wasn't used with future");
      _awaiting.future = this;
      if (this._loop.getDebug()) captureSuspension(this.next);
      return { value: this, done: false };
    }
    return { value: this.result(), done: true };
  }

  /** @internal An error thrown into a coroutine parked on this future surfaces at its `yield*`. */
  throw(error: unknown): IteratorResult<unknown, T> {
    throw error;
  }

  /** @internal Closing the coroutine while it is parked on this future. */
  return(value: T): IteratorResult<unknown, T> {
    return { value, done: true };
  }

  /**
   * Await the future from an async function while its loop runs in this thread. The Promise
   * settles from a done callback, so it needs the loop to run unless the future is done.
   */
  then<R1 = T, R2 = never>(
    onfulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    const promise = new Promise<T>((resolve, reject) => {
      const settle = (future: Future<T>): void => {
        try {
          resolve(future.result());
        } catch (error) {
          reject(error);
        }
      };
      if (this._state !== PENDING) settle(this);
      else this.addDoneCallback(settle);
    });
    return promise.then(onfulfilled, onrejected);
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    return `<${this.constructor.name} ${this._reprInfo().join(' ')}>`;
  }

  // ───────────────────────────── internals ─────────────────────────────

  /** @internal The words of the repr: state, result or error, callbacks. */
  _reprInfo(): string[] {
    const info: string[] = [this._state === CANCELLED ? 'cancelled' : this._state === PENDING ? 'pending' : 'finished'];
    if (this._state === FAILED) info.push(`exception=${repr(this._result)}`);
    else if (this._state === FINISHED) info.push(`result=${repr(this._result)}`);
    const names = this._entries().map(([entry]) =>
      typeof entry === 'function' ? describeCallback(entry) : entry._waiterName(),
    );
    if (names.length > 0) {
      const shown = names.length > 2 ? [names[0], `<${names.length - 2} more>`, names[names.length - 1]] : names;
      info.push(`cb=[${shown.join(', ')}]`);
    }
    return info;
  }

  /** @internal Set the result (what Task keeps of Future.set_result). */
  _setResultUnchecked(value: T): void {
    if (this._state !== PENDING) throw new InvalidStateError(`${STATE_NAMES[this._state]}: ${this}`);
    this._result = value;
    this._state = FINISHED;
    this._scheduleCallbacks();
  }

  /** @internal Set the error (what Task keeps of Future.set_exception). */
  _setExceptionUnchecked(exception: unknown): void {
    if (this._state !== PENDING) throw new InvalidStateError(`${STATE_NAMES[this._state]}: ${this}`);
    if (typeof exception === 'function' && (exception as { prototype?: unknown }).prototype instanceof Error) {
      exception = new (exception as new () => Error)();
    }
    if (exception === null || exception === undefined) {
      throw new TypeError(`exception must be an Error, got ${exception}`);
    }
    this._result = exception;
    this._state = FAILED;
    this._scheduleCallbacks();
    const ref = new WeakRef<Future<unknown>>(this);
    unretrieved.set(this, ref);
    (this._loop._unretrieved ??= new Set()).add(ref);
    neverRetrieved.register(
      this,
      {
        loop: this._loop,
        message: `${this._kind()} exception was never retrieved`,
        exception,
        description: String(this),
        ref,
      },
      this,
    );
  }

  /** @internal Cancel as a plain Future does (what Task keeps of Future.cancel). */
  _cancelFuture(msg: string | null): boolean {
    this._retrieved();
    if (this._state !== PENDING) return false;
    this._state = CANCELLED;
    this._cancelMessage = msg;
    this._scheduleCallbacks();
    return true;
  }

  /** @internal The futures this one waits for (a gather's children), for snapshots; none for a plain future. */
  _awaits(): ReadonlyArray<Future<unknown>> {
    return AWAITS_NOTHING;
  }

  /** @internal 'Future' or 'Task', for reports. */
  _kind(): string {
    return 'Future';
  }

  /** @internal The CancelledError to raise for a cancelled future; the saved one only once. */
  _makeCancelledError(): CancelledError {
    const saved = this._result;
    if (saved instanceof CancelledError) {
      this._result = undefined;
      return saved;
    }
    return new CancelledError(this._cancelMessage ?? '');
  }

  /** @internal Forget the "never retrieved" report (asyncio's `_log_traceback = False`). */
  _retrieved(): void {
    if (this._state !== FAILED) return;
    const ref = unretrieved.get(this);
    if (ref === undefined) return;
    unretrieved.delete(this);
    this._loop._unretrieved?.delete(ref);
    neverRetrieved.unregister(this);
  }

  /** Whether an unretrieved error would be reported when this future is collected (asyncio's `_log_traceback`). */
  get _logTraceback(): boolean {
    return unretrieved.has(this);
  }

  set _logTraceback(value: boolean) {
    if (value) throw new RangeError('_log_traceback can only be set to False');
    this._retrieved();
  }

  /** @internal The message of the last cancellation (asyncio's `_cancel_message`), or null. */
  get _cancelMessage(): string | null {
    return cancelMessages.get(this) ?? null;
  }

  set _cancelMessage(msg: string | null) {
    if (msg !== null) cancelMessages.set(this, msg);
    else cancelMessages.delete(this);
  }

  /** @internal Register a Task to wake when this future is done (its `__wakeup` done callback). */
  _addWaiter(waiter: Waiter): void {
    if (this._state !== PENDING) waiter._wakeupFrom(this);
    else this._append(waiter, null);
  }

  /** @internal Add a callback entry after the others. */
  _append(entry: Entry, context: Context | VarMap): void {
    const cb = this._cb;
    if (cb === null) this._cb = context === null ? entry : [entry, context];
    else if (Array.isArray(cb)) cb.push(entry, context);
    else this._cb = [cb, null, entry, context];
  }

  /** @internal */
  _scheduleCallbacks(): void {
    const cb = this._cb;
    if (cb === null) return;
    this._cb = null;
    if (!Array.isArray(cb)) {
      this._schedule(cb, null);
      return;
    }
    for (let i = 0; i < cb.length; i += 2) this._schedule(cb[i] as Entry, cb[i + 1] as Context | VarMap);
  }

  /** @internal */
  _schedule(entry: Entry, context: Context | VarMap): void {
    if (typeof entry !== 'function') entry._wakeupFrom(this as Future<unknown>);
    else if (context instanceof Context) this._loop._callSoonWith(entry, this, context, null);
    else this._loop._callSoonWith(entry, this, null, context);
  }

  /** @internal */
  _entries(): Array<[Entry, Context | VarMap]> {
    const cb = this._cb;
    if (cb === null) return [];
    if (!Array.isArray(cb)) return [[cb, null]];
    const entries: Array<[Entry, Context | VarMap]> = [];
    for (let i = 0; i < cb.length; i += 2) entries.push([cb[i] as Entry, cb[i + 1] as Context | VarMap]);
    return entries;
  }

  /** @internal How many done-callback entries there are; `_entryAt` reads them without copying them (snapshots read every task's). */
  _entryCount(): number {
    const cb = this._cb;
    return cb === null ? 0 : Array.isArray(cb) ? cb.length >> 1 : 1;
  }

  /** @internal The callback (or waiting Task or gather) of entry `index`, 0 ≤ index < `_entryCount()`. */
  _entryAt(index: number): Entry {
    const cb = this._cb;
    return (Array.isArray(cb) ? cb[index * 2] : cb) as Entry;
  }

  /** @internal */
  _storeEntries(entries: Array<[Entry, Context | VarMap]>): void {
    this._cb = null;
    for (const [entry, context] of entries) this._append(entry, context);
  }
}

(Future.prototype as unknown as Record<symbol, boolean>)[_FUTURE] = true;

/**
 * Whether `x` is a multiloop Future or Task (isfuture).
 *
 * @example
 * ```ts
 * isFuture(loop.createFuture()); // true
 * ```
 */
export function isFuture(x: unknown): x is Future<unknown> {
  return x instanceof Future;
}
