/**
 * The task helpers of asyncio.tasks: sleep, gather, wait, waitFor, shield, asCompleted.
 *
 * gather and shield return Futures; wait, waitFor and sleep are coroutines; asCompleted is an
 * iterator of Futures, also async-iterable. Hand-overs between futures go through done
 * callbacks, hence through the loop's `callSoon`; an asCompleted Future awaited while a
 * completion waits takes it at once, as asyncio's `Queue.get()` returns at once then.
 */
import { awaitedThrough } from './internal/awaited-by.js';
import type { EventLoop } from './base-events.js';
import { _isGenerator, isCoroutine, type Awaitable, type Coroutine } from './coroutines.js';
import { getEventLoop, getRunningLoop } from './events.js';
import { CancelledError, RuntimeError, TimeoutError } from './exceptions.js';
import type { Context } from './contextvars.js';
import { CANCELLED, FAILED, FINISHED, Future, PENDING, type Waiter } from './futures.js';
import type { TimerHandle } from './handles.js';
import { Deque } from './internal/deque.js';
import { typeName } from './internal/format.js';
import { WaitNote } from './internal/introspect.js';
import { _ensureFutureOn, currentTask, ensureFuture } from './task.js';

function setResultUnlessCancelled<T>(future: Future<T>, result: T): void {
  if (!future.done()) future.setResult(result);
}

/** The type name asyncio puts in "expect ... not X" messages. */
function describeType(value: unknown): string {
  return isCoroutine(value) ? 'coroutine' : typeName(value);
}

function isIterable(value: unknown): value is Iterable<unknown> {
  return value !== null && value !== undefined && typeof (value as Iterable<unknown>)[Symbol.iterator] === 'function';
}

// ─────────────────────────────────── sleep ───────────────────────────────────

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
  // Snapshots (ps) read what a pending future waits for from its result slot, unused until it is done.
  future._result = timer;
  try {
    return yield* future;
  } finally {
    timer.cancel();
  }
}

export { gather, type GatherOptions, type GatherResults, type GatherResultsOrErrors } from './gather.js';

// ─────────────────────────────────── shield ───────────────────────────────────

/**
 * Protect an awaitable from cancellation (asyncio.shield): cancelling the returned Future
 * leaves the inner one running, while the inner's result, error or cancellation reaches the
 * returned Future. An inner already done is returned as is. A coroutine becomes a Task; the
 * loop keeps every pending Task referenced, so a shielded Task runs to its end even when
 * nobody holds it any more.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   try {
 *     yield* shield(saveState()); // a cancel of main does not stop saveState
 *   } catch (e) {
 *     if (e instanceof CancelledError) console.log('cancelled, still saving');
 *     throw e;
 *   }
 * }
 * ```
 */
export function shield<T>(aw: Awaitable<T>): Future<T> {
  const inner = ensureFuture(aw);
  if (inner.done()) return inner;
  const outer = inner.getLoop().createFuture<T>();
  const onInnerDone = (): void => {
    if (outer.cancelled()) {
      // The outer was cancelled in the same iteration: nobody will look at the inner's error.
      if (!inner.cancelled()) inner.exception();
      return;
    }
    if (inner._state === CANCELLED) outer.cancel();
    else if (inner._state === FAILED) outer._setExceptionUnchecked(inner.exception());
    else outer._setResultUnchecked(inner._result as T);
  };
  const onOuterDone = (): void => {
    if (!inner.done()) inner.removeDoneCallback(onInnerDone);
  };
  inner.addDoneCallback(onInnerDone);
  awaitedThrough(onInnerDone, outer);
  outer.addDoneCallback(onOuterDone);
  return outer;
}

// ─────────────────────────────────── wait ───────────────────────────────────

/**
 * Return when the first future finishes or is cancelled (asyncio.FIRST_COMPLETED).
 *
 * @example
 * ```ts
 * const [done] = yield* wait(tasks, { returnWhen: FIRST_COMPLETED });
 * ```
 */
export const FIRST_COMPLETED = 'FIRST_COMPLETED';
/**
 * Return when the first future fails, else when all are done (asyncio.FIRST_EXCEPTION).
 *
 * @example
 * ```ts
 * const [done, pending] = yield* wait(tasks, { returnWhen: FIRST_EXCEPTION });
 * ```
 */
export const FIRST_EXCEPTION = 'FIRST_EXCEPTION';
/**
 * Return when all futures are done, the default (asyncio.ALL_COMPLETED).
 *
 * @example
 * ```ts
 * const [done] = yield* wait(tasks, { returnWhen: ALL_COMPLETED });
 * ```
 */
export const ALL_COMPLETED = 'ALL_COMPLETED';

/**
 * Name one of the three moments `wait` may return at (wait's return_when).
 *
 * @example
 * ```ts
 * const when: ReturnWhen = FIRST_EXCEPTION;
 * ```
 */
export type ReturnWhen = typeof FIRST_COMPLETED | typeof FIRST_EXCEPTION | typeof ALL_COMPLETED;

/**
 * Configure `wait`: a timeout in seconds and when to return (wait's keywords).
 *
 * @example
 * ```ts
 * const [done, pending] = yield* wait(tasks, { timeout: 0.5 });
 * ```
 */
export interface WaitOptions {
  /** Return after this many seconds at most (never raises on timeout). */
  timeout?: number | null;
  /** When to return (default ALL_COMPLETED). */
  returnWhen?: ReturnWhen;
}

/**
 * Wait for futures and tasks until `returnWhen` is met or `timeout` seconds pass, and return
 * `[done, pending]` (asyncio.wait). Membership is decided by `done()` when it returns. It
 * never raises for the members' errors, never cancels them, and a timeout simply returns.
 * Duplicates count once; coroutines are refused (wrap them with `createTask`). Coroutines are
 * generator objects, so a generator object is refused too: pass an array, a Set or another
 * iterable.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   const tasks = [createTask(fetchA()), createTask(fetchB())];
 *   const [done, pending] = yield* wait(tasks, { timeout: 5, returnWhen: FIRST_COMPLETED });
 *   for (const t of pending) t.cancel();
 * }
 * ```
 */
export function* wait<F extends Future<unknown>>(
  fs: Iterable<F>,
  options?: WaitOptions,
): Coroutine<[done: Set<F>, pending: Set<F>]> {
  if (fs instanceof Future || isCoroutine(fs) || !isIterable(fs)) {
    throw new TypeError(`expect a list of futures, not ${describeType(fs)}`);
  }
  const futures = new Set<F>(fs);
  if (futures.size === 0) throw new RangeError('Set of Tasks/Futures is empty.');
  const returnWhen = options?.returnWhen === undefined ? ALL_COMPLETED : options.returnWhen;
  if (returnWhen !== FIRST_COMPLETED && returnWhen !== FIRST_EXCEPTION && returnWhen !== ALL_COMPLETED) {
    throw new RangeError(`Invalid return_when value: ${String(returnWhen)}`);
  }
  for (const item of futures as Set<unknown>) {
    if (isCoroutine(item)) throw new TypeError('Passing coroutines is forbidden, use tasks explicitly.');
    if (!(item instanceof Future)) throw new TypeError(`wait() expects Futures or Tasks, got ${describeType(item)}`);
  }
  const timeout = options?.timeout ?? null;
  const loop = getRunningLoop();
  const waiter = loop.createFuture<void>();
  waiter._result = new WaitNote(`wait for ${futures.size} (${returnWhen})`, false);
  const timer = timeout === null ? null : loop.callLater(timeout, setResultUnlessCancelled, waiter, undefined);
  let counter = futures.size;
  const onCompletion = (f: Future<unknown>): void => {
    counter--;
    if (
      counter <= 0 ||
      returnWhen === FIRST_COMPLETED ||
      (returnWhen === FIRST_EXCEPTION && !f.cancelled() && f.exception() !== null)
    ) {
      timer?.cancel();
      if (!waiter.done()) waiter.setResult(undefined);
    }
  };
  for (const f of futures) f.addDoneCallback(onCompletion);
  try {
    yield* waiter;
  } finally {
    timer?.cancel();
    for (const f of futures) f.removeDoneCallback(onCompletion);
  }
  const done = new Set<F>();
  const pending = new Set<F>();
  for (const f of futures) (f.done() ? done : pending).add(f);
  return [done, pending];
}

// ─────────────────────────────────── waitFor ───────────────────────────────────

/**
 * Await `aw` for at most `timeout` seconds (asyncio.wait_for). On expiry the awaited work is
 * cancelled, waitFor waits until it has finished, then raises TimeoutError with the
 * CancelledError as its cause; if the work swallows the cancellation and returns a value,
 * that value is returned. `null` waits forever. With `timeout <= 0` an already done future
 * gives its result and anything else is cancelled before it gets to run.
 *
 * As in asyncio 3.12+, a coroutine runs inside the calling task, and only waitFor's own
 * cancellation becomes a TimeoutError (judged by `cancelling()` against its level on entry):
 * a cancel from outside always propagates, even when it races with completion or expiry.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   try {
 *     const page = yield* waitFor(download(url), 10);
 *   } catch (e) {
 *     if (e instanceof TimeoutError) console.log('gave up after 10 s');
 *   }
 * }
 * ```
 */
export function* waitFor<T>(aw: Awaitable<T>, timeout: number | null): Coroutine<T> {
  if (timeout === null || timeout === undefined) return yield* awaitable(aw);
  if (typeof timeout !== 'number') throw new TypeError(`timeout must be a number or null, got ${typeName(timeout)}`);
  const loop = getRunningLoop();
  if (timeout <= 0) {
    // Cancelled before its first step, a coroutine never starts (a zero timeout() would let it).
    const fut = ensureFuture(aw);
    if (fut.done()) return fut.result();
    yield* cancelAndWait(fut, loop);
    try {
      return fut.result();
    } catch (error) {
      if (error instanceof CancelledError) throw new TimeoutError(undefined, { cause: error });
      throw error;
    }
  }
  const task = currentTask(loop);
  if (task === null) throw new RuntimeError('Timeout should be used inside a task');
  const level = task.cancelling();
  let expired = false;
  const timer = loop.callLater(timeout, () => {
    expired = true;
    task.cancel();
  });
  let result: T;
  try {
    result = yield* awaitable(aw);
  } catch (error) {
    timer.cancel();
    // uncancel() runs whenever the timer fired; a level above ours means a cancel from outside.
    if (expired && task.uncancel() <= level && error instanceof CancelledError) {
      throw new TimeoutError(undefined, { cause: error });
    }
    throw error;
  }
  timer.cancel();
  if (expired) task.uncancel();
  return result;
}

/** What `yield*` can await in place: a Future or generator as is, anything else as a Future. */
function awaitable<T>(aw: Awaitable<T>): Future<T> | Coroutine<T> {
  return aw instanceof Future || _isGenerator(aw) ? (aw as Coroutine<T>) : ensureFuture(aw);
}

/** Cancel `fut` and wait until it is done, staying cancellable while waiting (asyncio's `_cancel_and_wait`). */
function* cancelAndWait(fut: Future<unknown>, loop: EventLoop): Coroutine<void> {
  const waiter = loop.createFuture<void>();
  const release = (): void => setResultUnlessCancelled(waiter, undefined);
  fut.addDoneCallback(release);
  try {
    fut.cancel();
    yield* waiter;
  } finally {
    fut.removeDoneCallback(release);
  }
}

// ─────────────────────────────────── asCompleted ───────────────────────────────────

/** What a handed-out Future settles with: the input's outcome (the plain form), or the input itself. */
const OUTCOME = 0;
const ORIGINAL = 1;

/**
 * A Future handed out by `asCompleted` (asyncio 3.13's `_wait_for_one()` coroutines): it takes
 * the next input to complete only when it is awaited (`yield*`, `await`, a done callback, as
 * `wait`/`gather` add), not when it is handed out, so the first one awaited gets the first
 * completion whatever order they were handed out in. Until then it is pending and takes nothing;
 * cancelled before, it never takes anything.
 */
class NextCompletion<T> extends Future<T> {
  #source: AsCompletedSource<unknown> | null;
  readonly #mode: number;

  constructor(source: AsCompletedSource<unknown>, mode: number) {
    super({ loop: source.loop });
    this.#source = source;
    this.#mode = mode;
  }

  /** @internal Awaited with `yield*`: claim a completion first. */
  override next(): IteratorResult<unknown, T> {
    this._claim();
    return super.next();
  }

  /** Awaited from async code: claim a completion first. */
  override then<R1 = T, R2 = never>(
    onfulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    this._claim();
    return super.then(onfulfilled, onrejected);
  }

  /** Waited for through a done callback (`wait`, `gather`...): claim a completion first. */
  override addDoneCallback(callback: (future: this) => void, options?: { context?: Context }): void {
    this._claim();
    super.addDoneCallback(callback, options);
  }

  /** @internal A Task or gather waits on it: claim a completion first. */
  override _addWaiter(waiter: Waiter): void {
    this._claim();
    super._addWaiter(waiter);
  }

  /** @internal Settle with `input`'s outcome, or `input` itself, or TimeoutError for `null`. */
  _take(input: Future<unknown> | null): void {
    if (input === null) this._setExceptionUnchecked(new TimeoutError());
    else if (this.#mode === ORIGINAL) this._setResultUnchecked(input as T);
    else settleLike(this as Future<unknown>, input);
  }

  /** @internal Take the next completion now, or queue for one; once only. */
  _claim(): void {
    const source = this.#source;
    if (source === null) return;
    this.#source = null;
    if (this._state === PENDING) source.claim(this as NextCompletion<unknown>);
  }
}

/**
 * The state shared by an `asCompleted` iterator's forms: the inputs not done yet, the ones done
 * and not yet taken (`null` stands for "timed out"), and the handed-out Futures that were
 * awaited and wait for a completion, in the order they were awaited (asyncio 3.13's queue).
 */
class AsCompletedSource<T> {
  readonly loop: EventLoop;
  #todo: Set<Future<T>>;
  #done = new Deque<Future<T> | null>(4);
  #claims = new Deque<NextCompletion<unknown>>(4);
  /** How many completions are still to be handed out. */
  left: number;
  #timer: TimerHandle | null = null;

  constructor(aws: Iterable<Awaitable<T>>, timeout: number | null) {
    const loop = getEventLoop();
    const todo = new Set<Future<T>>();
    for (const aw of new Set(aws)) todo.add(ensureFuture(aw, { loop }));
    for (const f of todo) f.addDoneCallback(this.#onCompletion);
    if (todo.size > 0 && timeout !== null) this.#timer = loop.callLater(timeout, this.#onTimeout);
    this.loop = loop;
    this.#todo = todo;
    this.left = todo.size;
  }

  /** A handed-out Future is awaited: give it the next completion, or queue it for one. */
  claim(future: NextCompletion<unknown>): void {
    const done = this.#done.shift();
    if (done === undefined) this.#claims.push(future);
    else future._take(done);
  }

  #onCompletion = (f: Future<T>): void => {
    // After a timeout every outcome is a TimeoutError already.
    if (this.#todo.size === 0) return;
    this.#todo.delete(f);
    this.#deliver(f);
    if (this.#todo.size === 0) this.#timer?.cancel();
  };

  #onTimeout = (): void => {
    for (const f of this.#todo) {
      f.removeDoneCallback(this.#onCompletion);
      this.#deliver(null);
    }
    this.#todo.clear();
  };

  #deliver(input: Future<T> | null): void {
    // A claimant its awaiter cancelled takes nothing: the completion goes to the next one.
    for (let claimant = this.#claims.shift(); claimant !== undefined; claimant = this.#claims.shift()) {
      if (!claimant.done()) {
        claimant._take(input);
        return;
      }
    }
    this.#done.push(input);
  }
}

/**
 * One of `asCompleted`'s inputs as `for await` hands it out: the Task or Future itself, done
 * (read it with `result()`, compare it with `===`). The type leaves `then` out because
 * TypeScript types what `for await` gives as the result of anything thenable; at run time it is
 * the input itself, which `await` still resolves to its result. (TypeScript 5.9 types `for await`
 * over a value that is also iterable from its `for...of` form when that form of the same type
 * was checked first: there, iterate `asCompleted(aws) as AsyncIterable<CompletedInput<T>>`.)
 *
 * @example
 * ```ts
 * for await (const input of asCompleted([ipv4, ipv6])) {
 *   if (input === ipv6) console.log('IPv6 first:', input.result());
 * }
 * ```
 */
export type CompletedInput<T> = Omit<Future<T>, 'then'>;

/**
 * The iterator `asCompleted` returns, in its three forms (asyncio 3.13's `_AsCompletedIterator`),
 * which share one count of completions: iterated with `for...of` it hands out Futures that give
 * the outcome of the next input to complete; with `for await` (async code) it gives the inputs
 * themselves in the order they complete; `originals()` is that second form for coroutines.
 *
 * @example
 * ```ts
 * for (const next of asCompleted(tasks)) console.log(yield* next);     // results, fastest first
 * for await (const task of asCompleted(tasks)) console.log(task.result()); // the tasks, done
 * ```
 */
export interface AsCompletedIterator<T> extends IterableIterator<Future<T>>, AsyncIterable<CompletedInput<T>> {
  /**
   * Futures that, awaited, give the next input to complete itself (its Task or Future, done,
   * not its result): what `for await` gives async code, for coroutines, which cannot `for await`.
   * Each takes the next completion when it is awaited; TimeoutError once the timeout passed.
   *
   * @example
   * ```ts
   * for (const next of asCompleted([ipv4, ipv6]).originals()) {
   *   const first = yield* next; // ipv4 or ipv6, whichever finished first
   *   if (first === ipv6) console.log('IPv6 connected first');
   * }
   * ```
   */
  originals(): IterableIterator<Future<Future<T>>>;
}

/** The iterator behind `asCompleted`. */
class AsCompleted<T> implements AsCompletedIterator<T> {
  readonly #source: AsCompletedSource<T>;

  constructor(aws: Iterable<Awaitable<T>>, timeout: number | null) {
    this.#source = new AsCompletedSource(aws, timeout);
  }

  next(): IteratorResult<Future<T>, undefined> {
    return this.#hand<T>(OUTCOME);
  }

  [Symbol.iterator](): this {
    return this;
  }

  originals(): IterableIterator<Future<Future<T>>> {
    const originals: IterableIterator<Future<Future<T>>> = {
      next: () => this.#hand<Future<T>>(ORIGINAL),
      [Symbol.iterator]: () => originals,
    };
    return originals;
  }

  [Symbol.asyncIterator](): AsyncIterator<CompletedInput<T>, undefined> {
    const next = (): Promise<IteratorResult<CompletedInput<T>, undefined>> => {
      const step = this.#hand<Future<T>>(ORIGINAL);
      if (step.done === true) return Promise.resolve(step);
      const claim = step.value as NextCompletion<Future<T>>;
      // Not through claim.then(): a Promise resolved with the input (a thenable) would adopt
      // its result, and for await must give the input itself.
      return new Promise((resolve, reject) => {
        const settle = (): void => {
          if (claim._state === FINISHED) resolve({ done: false, value: claim._result as Future<T> });
          else reject(claim._state === CANCELLED ? claim._makeCancelledError() : claim.exception());
        };
        claim._claim();
        if (claim._state !== PENDING) settle();
        else claim.addDoneCallback(settle);
      });
    };
    return { next };
  }

  #hand<R>(mode: number): IteratorResult<Future<R>, undefined> {
    const source = this.#source;
    if (source.left === 0) return { done: true, value: undefined };
    source.left--;
    return { done: false, value: new NextCompletion<R>(source as AsCompletedSource<unknown>, mode) };
  }
}

/** Settle `future` as `source` ended. */
function settleLike<T>(future: Future<T>, source: Future<T>): void {
  if (source._state === CANCELLED) future._cancelFuture(source._makeCancelledError().message);
  else if (source._state === FAILED) future._setExceptionUnchecked(source.exception());
  else future._setResultUnchecked(source._result as T);
}

/**
 * Iterate the outcomes of `aws` in the order they complete (asyncio.as_completed, as in 3.13).
 * Coroutines and Promises become Tasks and Futures; duplicates count once. With a `timeout`,
 * whatever is still awaited when it expires fails with TimeoutError; the inputs are not
 * cancelled. A single Future or coroutine (any generator object: coroutines are generators)
 * instead of an iterable is a TypeError.
 *
 * Three ways to iterate, which share one count of completions:
 * - `for (const next of asCompleted(aws))`: Futures that give the outcome (result, error or
 *   cancellation) of the next input to complete. Each takes a completion when it is awaited,
 *   not when it is handed out: the first one awaited gets the first completion.
 * - `for await (const input of asCompleted(aws))` in async code: the inputs themselves (the
 *   Tasks and Futures, done, unawaited) in completion order; TimeoutError ends the loop.
 * - `for (const next of asCompleted(aws).originals())` in coroutines: the same, each Future
 *   giving the next input to complete when awaited with `yield*`.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   for (const next of asCompleted([fetch('a'), fetch('b')], { timeout: 5 })) {
 *     console.log(yield* next); // fastest first; TimeoutError after 5 s
 *   }
 *   const ipv4 = createTask(connect('127.0.0.1')), ipv6 = createTask(connect('::1'));
 *   for (const next of asCompleted([ipv4, ipv6]).originals()) {
 *     const first = yield* next; // the Task itself
 *     if (first === ipv6) console.log('IPv6 first');
 *   }
 * }
 * async function viaPromises(tasks: Task<string>[]): Promise<void> {
 *   for await (const task of asCompleted(tasks)) console.log(task.getName(), task.result());
 * }
 * ```
 */
export function asCompleted<T>(aws: Iterable<Awaitable<T>>, options?: { timeout?: number | null }): AsCompletedIterator<T> {
  if (aws instanceof Future || isCoroutine(aws) || !isIterable(aws)) {
    throw new TypeError(`expects an iterable of awaitables, not ${describeType(aws)}`);
  }
  return new AsCompleted(aws, options?.timeout ?? null);
}
