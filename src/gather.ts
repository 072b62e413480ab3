/**
 * gather (asyncio.gather): run awaitables concurrently and collect their results in order.
 *
 * The coroutines given to gather become Tasks as asyncio's do, with one difference nobody can
 * observe: a Task is made for a child only once something needs one. A child that returns in
 * its first step, with nothing asking for its Task meanwhile, never gets one; its result goes
 * straight into gather's list. A child gets its Task, identical to the one `createTask` would
 * have made (its number, its context, its place among the loop's tasks), when it is asked for
 * (`currentTask()`, `allTasks()`, a snapshot), when its context changes, when it waits or
 * fails, or when the gather is cancelled. Meanwhile the loop runs the child's first step where
 * the Task's would have run: from the ready queue, in the same order (the gather is one entry
 * standing for the Tasks' entries, which would have been queued one after the other), or inside
 * gather with an eager task factory.
 */
import { adoptFirstStore, asyncContextInUse } from './internal/als/scope.js';
import { awaitedThrough } from './internal/awaited-by.js';
import { LIGHT_EAGER, LIGHT_NONE, type EventLoop, type LightParent } from './base-events.js';
import { _againNested, _beginLazy, _beginNested, _currentVars, _endLazy, _endNested, _replaceLazyOwner, type Context, type NestedState, type VarMap } from './contextvars.js';
import { isCoroutine, type Awaitable, type AwaitedResult, type Coroutine } from './coroutines.js';
import { getEventLoop } from './events.js';
import { CancelledError, _isEscaping } from './exceptions.js';
import { CANCELLED, FAILED, FINISHED, Future, PENDING, type Waiter } from './futures.js';
import type { Runnable } from './handles.js';
import { Task, _ensureFutureOn, _promotedTask, _stepReturned, _stepThrew, _takeTaskNumbers } from './task.js';

/**
 * Map a tuple of awaitables to their results, element by element (the list gather builds).
 *
 * @example
 * ```ts
 * type R = GatherResults<[Future<number>, Coroutine<string>]>; // [number, string]
 * ```
 */
export type GatherResults<A extends readonly unknown[]> = { -readonly [K in keyof A]: AwaitedResult<A[K]> };

/**
 * Map a tuple of awaitables to their results or errors (gather with return_exceptions=True).
 *
 * @example
 * ```ts
 * type R = GatherResultsOrErrors<[Future<number>]>; // [number | Error]
 * ```
 */
export type GatherResultsOrErrors<A extends readonly unknown[]> = {
  -readonly [K in keyof A]: AwaitedResult<A[K]> | Error;
};

/**
 * Configure the array form of `gather` (gather's return_exceptions keyword).
 *
 * @example
 * ```ts
 * const outcomes = yield* gather([a(), b()], { returnExceptions: true });
 * ```
 */
export interface GatherOptions {
  /** Deliver errors (and CancelledErrors of cancelled children) as results instead of failing. */
  returnExceptions?: boolean;
}


const futureAddDoneCallback = Future.prototype.addDoneCallback;

/**
 * The Future `gather` returns (asyncio's `_GatheringFuture`). Cancelling it cancels the
 * children instead of itself; it then finishes with a CancelledError once they are done.
 *
 * asyncio gives every child a done callback, run through `call_soon`. The callback of a child
 * that finished with a result and is not the last to finish does nothing anyone can see (it
 * counts), so here such a child is counted the moment it finishes and schedules nothing; a
 * child that failed or was cancelled, and the last one, run their callback through the loop as
 * asyncio's do, in the order they finished. Children are watched through the future's own
 * waiter entry (no callback, no context, no handle per child), except a Future subclass that
 * overrides `addDoneCallback`, which is called as asyncio calls it.
 *
 * Children that are coroutines may be light (see the module's comment): `#children` holds null
 * for them (or is null while none has a Task) and `#light` their coroutine, until they get a
 * Task or return (then `#light` holds what they returned). Lazily, the gather is the ready
 * queue's entry for the children's first steps, run in order: `#started` counts them.
 */
class GatheringFuture extends Future<unknown[]> implements Waiter, Runnable, LightParent {
  /** The children in argument order, duplicates included; null for a light child, or for all until one has a Task. */
  #children: Array<Future<unknown> | null> | null;
  /** How many distinct children there are. */
  #count: number;
  /** How many distinct children have finished. */
  #finished = 0;
  /** The child whose finishing made every child finished, once one did: its callback decides the outcome. */
  #last: Future<unknown> | null = null;
  /**
   * Whether a light child was that child (it returned in its first step; `#last` stays null).
   * Not `#last` set to a marker: a field that holds one kind of value keeps the code that reads it.
   */
  #lastLight = false;
  #returnExceptions: boolean;
  /** Set when `cancel()` reached at least one child: the outcome is then a CancelledError. */
  #cancelRequested = false;
  /** Per light child, its coroutine until it has a Task or returned, then what it returned; null without light children. */
  #light: unknown[] | null = null;
  /** The variables light children start with (each Task's copy of the context gather was called in). */
  #vars: VarMap = null;
  /** Whether light children run as eager Tasks would (their first steps inside gather). */
  #eager = false;
  /** Lazily: how many children have had their first step (or their Task's) run from the gather's entry in the ready queue. */
  #started = 0;
  /** The task number before the first child's (lazily), or the number of the child stepping now (eagerly). */
  #number = 0;
  /** Whether children are watched: a Task made for a light child from then on is watched at once. */
  #watching = false;
  /**
   * @internal The variables of the light child stepping now, as contextvars reads a task's (the
   * gather stands in for the child's Task until it has one: its first change makes one).
   */
  _context: Context | VarMap = null;

  private constructor(loop: EventLoop, children: Array<Future<unknown>> | null, count: number, returnExceptions: boolean) {
    super({ loop });
    this.#children = children;
    this.#count = count;
    this.#returnExceptions = returnExceptions;
  }

  /** Gather `children` (Futures), `distinct` holding each of the `count` distinct ones once. */
  static _of(children: Array<Future<unknown>>, distinct: Iterable<Future<unknown>>, count: number, returnExceptions: boolean): GatheringFuture {
    const gathering = new GatheringFuture((children[0] as Future<unknown>)._loop, children, count, returnExceptions);
    gathering.#watch(distinct);
    return gathering;
  }

  /** Gather `coros` (distinct coroutines, an array gather may keep) as light children, run as lazy or eager Tasks of `loop` would run. */
  static _light(loop: EventLoop, coros: unknown[], returnExceptions: boolean, mode: number): GatheringFuture {
    const gathering = new GatheringFuture(loop, null, coros.length, returnExceptions);
    gathering.#light = coros;
    if (mode === LIGHT_EAGER) gathering.#startEagerly();
    else gathering.#startLazily();
    return gathering;
  }

  /** Watch the children; those already done count at once (asyncio 3.12+: an all-done gather is done). */
  #watch(distinct: Iterable<Future<unknown>>): void {
    this.#watching = true;
    for (const child of distinct) {
      if (child._state !== PENDING) {
        this.#tally(child);
        this.#childDone(child);
      } else if (child.addDoneCallback === futureAddDoneCallback) {
        child._addWaiter(this);
      } else {
        const callback = (done: Future<unknown>): void => {
          this.#tally(done);
          this.#childDone(done);
        };
        awaitedThrough(callback, this);
        child.addDoneCallback(callback);
      }
    }
  }

  /**
   * Queue the children's first steps, with the numbers their Tasks would take. `createTask`
   * would queue one entry per Task, one after the other with nothing between them (making a
   * lazy Task runs no code): the gather is one entry that runs them all, in order.
   */
  #startLazily(): void {
    const loop = this._loop;
    this.#vars = _currentVars();
    this.#number = _takeTaskNumbers(this.#count);
    (loop._lightGathers ??= new Set()).add(this);
    loop._scheduleHandle(this);
    this.#watching = true;
  }

  /**
   * @internal Run the children's first steps, each as the ready queue would run its Task's
   * (`runTask`: the context begun lazily, errors escaping a step to the exception handler): a
   * child with a Task (made meanwhile, or because debug mode or AsyncLocalStorage want one) runs
   * as that Task. An error escaping the loop leaves the rest at the front of the queue.
   */
  _run(): void {
    const loop = this._loop;
    const count = this.#count;
    this._context = this.#vars;
    loop._lightParent = this;
    _beginLazy(this);
    try {
      while (this.#started < count) {
        const index = this.#started++;
        if (this.#taskAt(index) === null) {
          if (!asyncContextInUse && !loop.getDebug()) {
            loop._lightIndex = index;
            this.#stepLazily(index);
            continue;
          }
          this.#promote(index, true);
        }
        // As the Task's own entry in the queue would run it, begun and ended as it begins and ends steps.
        loop._lightParent = null;
        _endLazy(this);
        (this.#taskAt(index) as Task<unknown>)._run();
        loop._lightParent = this;
        _beginLazy(this);
      }
    } catch (error) {
      if (this.#started < count) loop._scheduleFirst(this);
      throw error;
    } finally {
      loop._lightParent = null;
      _endLazy(this);
      this._context = null;
      if (this.#started === count) loop._lightGathers?.delete(this);
    }
  }

  /**
   * The first step of light child `index` from the ready queue, as `runTask` runs a Task's, its
   * context begun lazily by `_run` for every child: errors escaping the step go to the exception
   * handler; a child that made its Task leaves its context (and its store of AsyncLocalStorage)
   * as a Task's step does, and the next child begins afresh.
   */
  #stepLazily(index: number): void {
    const loop = this._loop;
    try {
      this.#stepLight(index);
    } catch (error) {
      loop._currentTask = null;
      if (_isEscaping(error)) {
        this.#endPromotedStep(index, null);
        throw error;
      }
      const task = this.#taskAt(index);
      loop._lightParent = null;
      loop.callExceptionHandler({
        message: `Exception in callback ${task === null ? String(this) : task._describe()}`,
        exception: error as Error,
        task: task ?? undefined,
      });
      loop._lightParent = this;
    }
    this.#endPromotedStep(index, null);
  }

  /**
   * After child `index`'s first step, if it made its Task: end that step as a Task's step ends
   * (its context left, its store of AsyncLocalStorage kept; an eager task done lets its coroutine
   * go), and stand in again for the next child: lazily at the top (`saved` null), eagerly inside
   * what `saved` holds.
   */
  #endPromotedStep(index: number, saved: NestedState | null): void {
    const task = this.#taskAt(index);
    if (task === null) return;
    this._loop._currentTask = null;
    _endLazy(task);
    if (saved === null) _beginLazy(this);
    else _againNested(saved, this);
    this._context = this.#vars;
    if (this.#eager && task._state !== PENDING) task._coro = null;
    if (asyncContextInUse) adoptFirstStore(task);
  }

  /** @internal The entry as debug mode's slow-callback warnings name it: the Task of the child run last. */
  _describe(): string {
    const child = this.#taskAt(this.#started - 1);
    return child instanceof Task ? child._describe() : String(this);
  }

  /**
   * Run each child's first step now, in order, as an eager Task's constructor runs it; then watch
   * the children as the Tasks of the eager path would be watched once made. Once AsyncLocalStorage
   * is in use, each Task captures the async context it is made in: the loop makes the rest.
   */
  #startEagerly(): void {
    const loop = this._loop;
    const light = this.#light as unknown[];
    const count = this.#count;
    this.#eager = true;
    this.#started = count;
    this.#vars = _currentVars();
    // A light child calling gather gets its Task first: current and listed while these run inside it.
    loop._runningTask();
    for (let i = asyncContextInUse ? 0 : this.#stepEagerly(); i < count; i++) {
      this.#setChild(i, loop.createTask(light[i] as Coroutine<unknown>));
      light[i] = undefined;
    }
    this.#watching = true;
    if (this.#children === null) {
      // Every child returned in its first step.
      this.#finished = count;
      this.#lastLight = true;
      this.#childDone(null);
      return;
    }
    for (let i = 0; i < count; i++) {
      const child = this.#taskAt(i);
      if (child === null) {
        if (++this.#finished === count) {
          this.#lastLight = true;
          this.#childDone(null);
        }
      } else if (child._state !== PENDING) {
        this.#tally(child);
        this.#childDone(child);
      } else child._addWaiter(this);
    }
  }

  /**
   * The children's first steps inside gather, as `eagerStart` runs a Task's, until AsyncLocalStorage
   * comes in use; returns how many ran. A child that made its Task may have changed its context:
   * the next one starts from the variables all start with.
   */
  #stepEagerly(): number {
    const loop = this._loop;
    const count = this.#count;
    const outerTask = loop._currentTask;
    const outerParent = loop._lightParent;
    const outerIndex = loop._lightIndex;
    this._context = this.#vars;
    const saved = _beginNested(this);
    loop._currentTask = null;
    loop._lightParent = this;
    let index = 0;
    try {
      while (index < count && !asyncContextInUse) {
        this.#number = _takeTaskNumbers(1) + 1;
        loop._lightIndex = index;
        this.#stepLight(index);
        this.#endPromotedStep(index++, saved);
      }
    } catch (error) {
      // An escaping error: the child it came from has its Task, which ends as eagerStart ends one.
      this.#endPromotedStep(index, saved);
      throw error;
    } finally {
      loop._currentTask = outerTask;
      loop._lightParent = outerParent;
      loop._lightIndex = outerIndex;
      _endNested(saved);
      this._context = null;
    }
    return index;
  }

  /** The first step of light child `index`, its context begun: it returns, or gets its Task to go on. */
  #stepLight(index: number): void {
    const coro = (this.#light as unknown[])[index] as Coroutine<unknown>;
    let step: IteratorResult<unknown, unknown>;
    try {
      step = coro.next();
    } catch (thrown) {
      _stepThrew(this.#taskAt(index) ?? this.#promote(index, true), thrown);
      return;
    }
    const task = this.#taskAt(index);
    if (task !== null) _stepReturned(task, step);
    else if (step.done === true) this.#returned(index, step.value);
    else _stepReturned(this.#promote(index, true), step);
  }

  /** @internal The stepping light child (`loop._lightIndex`) gets its Task, current for the rest of its step. */
  _promoteStepping(): Task<unknown> {
    const loop = this._loop;
    const task = this.#promote(loop._lightIndex, true);
    loop._currentTask = task;
    _replaceLazyOwner(this, task);
    return task;
  }

  /** @internal Every light child not started yet, and the one stepping now, gets its Task. */
  _promoteAll(): void {
    const loop = this._loop;
    if (loop._lightParent === this && loop._currentTask === null) this._promoteStepping();
    for (let i = this.#started; i < this.#count; i++) if (this.#taskAt(i) === null) this.#promote(i, true);
    loop._lightGathers?.delete(this);
  }

  /** The Task (a Future, for children that are no coroutines) of child `index`; null while it is light. */
  #taskAt(index: number): Task<unknown> | null {
    const children = this.#children;
    return children === null ? null : (children[index] as Task<unknown> | null);
  }

  /** Child `index` is `future` (a light child's Task) from now on. */
  #setChild(index: number, future: Future<unknown>): void {
    (this.#children ??= new Array<Future<unknown> | null>(this.#count).fill(null))[index] = future;
  }

  /** Make light child `index`'s Task: listed among the loop's tasks unless `listed` is false, watched once children are. */
  #promote(index: number, listed: boolean): Task<unknown> {
    const loop = this._loop;
    const light = this.#light as unknown[];
    const number = this.#eager ? this.#number : this.#number + index + 1;
    const task = _promotedTask(loop, light[index] as Coroutine<unknown>, number, this.#vars);
    light[index] = undefined;
    this.#setChild(index, task);
    if (listed) loop._addTask(task);
    if (this.#watching) task._addWaiter(this);
    return task;
  }

  /** Light child `index` returned `value` in its first step: counted as its Task would be as it finished. */
  #returned(index: number, value: unknown): void {
    (this.#light as unknown[])[index] = value;
    // Eagerly, children are counted once each has run its first step (read from #eager, set
    // before any step: #watching changes after them, which would cost the optimized steps).
    if (this.#eager) return;
    if (this.#tally(null)) this._loop._callSoonWith(this.#childDone, null, null, null);
  }

  /** @internal The children that are Futures, for snapshots (light children not started yet get their Tasks). */
  override _awaits(): ReadonlyArray<Future<unknown>> {
    if (this.#light !== null && !this.done()) this._promoteAll();
    const children = this.#children;
    return children === null ? [] : children.filter((child): child is Future<unknown> => child !== null);
  }

  /** Cancel every child; returns whether any accepted. The future itself finishes later (cancel). */
  override cancel(msg?: string): boolean {
    if (this.done()) return false;
    // Children not started yet get their Tasks, which the cancellation reaches at their first step.
    if (this.#light !== null) this._promoteAll();
    let accepted = false;
    for (const child of this.#children ?? []) {
      if (child !== null && child.cancel(msg)) accepted = true;
    }
    // A cancel that reached a child must surface as CancelledError even with returnExceptions.
    if (accepted) this.#cancelRequested = true;
    return accepted;
  }

  /** @internal A child finished: count it, and run its callback through the loop when it can matter. */
  _wakeupFrom(child: Future<unknown>): void {
    if (!this.#tally(child) && child._state === FINISHED) return;
    this._loop._callSoonWith(this.#childDone, child, null, null);
  }

  /** Count `child` (null: a light child) as finished; whether it was the last (whose callback then decides the outcome). */
  #tally(child: Future<unknown> | null): boolean {
    if (++this.#finished < this.#count) return false;
    if (child === null) this.#lastLight = true;
    else this.#last = child;
    return true;
  }

  /** @internal How the child's repr names this entry. */
  _waiterName(): string {
    return 'gather._done_callback()';
  }

  /**
   * asyncio's `_done_callback`, for a child that failed or was cancelled, or the last one (already
   * counted; null: a light child, which returned).
   */
  #childDone = (child: Future<unknown> | null): void => {
    if (this._state !== PENDING) {
      // Later failures are nobody's to report once the outcome is decided.
      if (child !== null && child._state !== CANCELLED) child.exception();
      return;
    }
    if (child !== null && !this.#returnExceptions) {
      if (child._state === CANCELLED) {
        this._setExceptionUnchecked(child._makeCancelledError());
        return;
      }
      if (child._state === FAILED) {
        this._setExceptionUnchecked(child.exception());
        return;
      }
    }
    if (child === null ? !this.#lastLight : child !== this.#last) return;
    const children = this.#children;
    const light = this.#light;
    if (this.#cancelRequested) {
      // asyncio takes the error from the last child in argument order.
      const final = this.#count - 1;
      const lastChild = children === null ? null : (children[final] as Future<unknown> | null);
      this._setExceptionUnchecked(lastChild === null ? returnedCancelledError((light as unknown[])[final]) : lastChild._makeCancelledError());
      return;
    }
    // The list of children (or of what light children returned) becomes the list of results:
    // nothing reads either once done.
    this.#children = null;
    this.#light = null;
    if (children === null) {
      this._setResultUnchecked(light as unknown[]);
      return;
    }
    const results = children as unknown[];
    for (let i = 0; i < children.length; i++) {
      const each = children[i] as Future<unknown> | null;
      // A fresh error per slot: the child's own saved CancelledError stays for its awaiters.
      if (each === null) results[i] = (light as unknown[])[i];
      else if (each._state === CANCELLED) results[i] = new CancelledError(each._cancelMessage ?? '');
      else if (each._state === FAILED) results[i] = each.exception();
      else results[i] = each._result;
    }
    this._setResultUnchecked(results);
  };
}

/** What `_makeCancelledError()` of the Task of a child that returned `value` gives (its saved CancelledError, else a new one). */
function returnedCancelledError(value: unknown): CancelledError {
  return value instanceof CancelledError ? value : new CancelledError('');
}


/** Whether every one of `values` is a coroutine. */
function allCoroutines(values: readonly unknown[]): boolean {
  for (let i = 0; i < values.length; i++) if (!isCoroutine(values[i])) return false;
  return true;
}

/** The loop `createTask` would make gather's Tasks on, or null where that fails (gather then fails as it does). */
function lightLoop(): EventLoop | null {
  try {
    return getEventLoop();
  } catch {
    return null;
  }
}

/** Up to this many awaitables, comparing each pair costs less than hashing them. */
const FEW_ARGS = 8;

/** Whether no element of `values` (a few) repeats. */
function allDistinct(values: readonly unknown[]): boolean {
  for (let i = 1; i < values.length; i++) {
    const value = values[i];
    for (let j = 0; j < i; j++) if (values[j] === value) return false;
  }
  return true;
}

/** Whether `value` can only be the options of the array form (it is no awaitable). */
function isGatherOptions(value: unknown): boolean {
  if (value === undefined) return true;
  return (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    !(value instanceof Future) &&
    !isCoroutine(value) &&
    typeof (value as PromiseLike<unknown>).then !== 'function'
  );
}

/** Run awaitables concurrently; the Future's result lists their results in argument order (gather). */
export function gather<A extends readonly Awaitable<unknown>[]>(...aws: A): Future<GatherResults<A>>;
/** Like `gather(...aws)`, with errors delivered as results (gather(..., return_exceptions=True)). */
export function gather<const A extends readonly Awaitable<unknown>[]>(
  aws: A,
  options: GatherOptions & { returnExceptions: true },
): Future<GatherResultsOrErrors<A>>;
/** Like `gather(...aws)`, the awaitables given as an array. */
export function gather<const A extends readonly Awaitable<unknown>[]>(
  aws: A,
  options?: GatherOptions & { returnExceptions?: false },
): Future<GatherResults<A>>;
/** Like `gather(...aws)`, the awaitables given as an array, `returnExceptions` not known statically. */
export function gather<const A extends readonly Awaitable<unknown>[]>(
  aws: A,
  options: GatherOptions,
): Future<GatherResultsOrErrors<A>>;
/**
 * Run awaitables concurrently and collect their results in argument order (asyncio.gather).
 * Coroutines become Tasks; the same object given twice runs once and fills both slots.
 *
 * Two call forms: `gather(arr, options?)` is the array form when `arr` is an Array and the
 * second argument is absent, `undefined`, or an options object (a plain object that is no
 * Future, coroutine or thenable); anything else is `gather(...aws)`, each argument an
 * awaitable.
 *
 * The first error (a cancelled child counts as a CancelledError) fails the returned Future at
 * once and leaves the other children running; with `returnExceptions: true` errors are
 * results, and a cancelled child gives `new CancelledError(itsMessage ?? '')`. Cancelling the
 * returned Future cancels the children and returns whether any accepted; the Future then
 * finishes (not cancelled) with a CancelledError, even with `returnExceptions`. No arguments:
 * an already finished Future of `[]`. Children of two loops: RangeError.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   const [n, s] = yield* gather(count(), name()); // n: number, s: string
 *   const outcomes = yield* gather([risky(), count()], { returnExceptions: true });
 *   for (const o of outcomes) if (o instanceof Error) console.log('failed:', o.message);
 * }
 * ```
 */
export function gather(...args: unknown[]): Future<unknown[]> {
  let aws: readonly unknown[] = args;
  let returnExceptions = false;
  if (Array.isArray(args[0]) && args.length <= 2 && isGatherOptions(args[1])) {
    aws = args[0] as unknown[];
    returnExceptions = Boolean((args[1] as GatherOptions | undefined)?.returnExceptions);
  }
  if (aws.length === 0) {
    const outer = getEventLoop().createFuture<unknown[]>();
    outer.setResult([]);
    return outer;
  }
  const count = aws.length;
  // The same awaitable given twice runs once and fills both slots. Telling whether any arg
  // repeats with one Set made at once, and dropped, costs less than a map kept per arg.
  let distinct: boolean;
  let coroutines = true;
  if (count <= FEW_ARGS) {
    distinct = allDistinct(aws);
    coroutines = allCoroutines(aws);
  } else {
    // One pass over the arguments for both questions: each is read from memory once.
    const seen = new Set<unknown>();
    for (let i = 0; i < count; i++) {
      const arg = aws[i];
      if (coroutines && !isCoroutine(arg)) coroutines = false;
      seen.add(arg);
    }
    distinct = seen.size === count;
  }
  if (distinct && coroutines) {
    const target = lightLoop();
    const mode = target === null ? LIGHT_NONE : target._lightMode();
    // The array becomes the list of results: gather's own rest array, or a copy of the caller's.
    if (mode !== LIGHT_NONE) return GatheringFuture._light(target as EventLoop, aws === args ? args : aws.slice(), returnExceptions, mode);
  }
  // Made at its full length: pushing 100k children grew (copied) it about twenty times.
  const children = new Array<Future<unknown>>(count);
  let loop: EventLoop | undefined;
  if (distinct) {
    for (let i = 0; i < count; i++) {
      const child = _ensureFutureOn(aws[i], loop);
      loop ??= child._loop;
      children[i] = child;
    }
    return GatheringFuture._of(children, children, count, returnExceptions);
  }
  const byArg = new Map<unknown, Future<unknown>>();
  for (let i = 0; i < count; i++) {
    const arg = aws[i];
    let child = byArg.get(arg);
    if (child === undefined) {
      child = _ensureFutureOn(arg, loop);
      loop ??= child._loop;
      byArg.set(arg, child);
    }
    children[i] = child;
  }
  return GatheringFuture._of(children, byArg.values(), byArg.size, returnExceptions);
}

