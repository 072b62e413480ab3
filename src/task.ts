/**
 * Task: a Future that drives a coroutine (asyncio.tasks.Task).
 *
 * A step resumes the generator with `next()` or `throw(error)`, exactly as asyncio's
 * `Task.__step` sends into or throws into a coroutine. What the coroutine yields decides what
 * happens next: a bare `yield` schedules the next step, a future yielded through `yield*`
 * parks the task until the future is done, anything else is thrown back in as RuntimeError.
 *
 * Invariant: either `_futWaiter` is set, or a step is scheduled, never both. So a Task needs
 * no Handle: it sits in the ready queue itself, and when it runs, a set `_futWaiter` means the
 * run is the wake-up from that future (asyncio's `__wakeup`), else a step (`__step`).
 */
import type { AsyncResource } from 'node:async_hooks';
import { _setSteppingTask, adoptFirstStore, asyncContextInUse, captureAsyncContext, runInTaskScope } from './internal/als/scope.js';
import { _getRunningLoop } from './internal/running.js';
import { awaitedThrough } from './internal/awaited-by.js';
import { _setStepper, suspendedAt, suspension } from './internal/suspension.js';
import { PROMISE_NOTE } from './internal/introspect.js';
import { Context, _beginLazy, _currentVars, _endLazy, _enter, _exit, _runNested, _servesOwner, _switchTo, type VarMap } from './contextvars.js';
import { _awaiting, _isGenerator, _isThenable, isCoroutine, type Awaitable, type Coroutine } from './coroutines.js';
import { CancelledError, InvalidStateError, RuntimeError, _isEscaping } from './exceptions.js';
import { CANCELLED, FAILED, Future, PENDING, type LoopOption } from './futures.js';
import type { Runnable } from './handles.js';
import { repr } from './internal/format.js';
import { generatorLocation, generatorName } from './internal/generators.js';
import { getEventLoop, getRunningLoop } from './events.js';
import type { EventLoop, TaskFactory, TaskOptions } from './base-events.js';

/** Marks a step that throws nothing into the coroutine. */
const NO_ERROR: unique symbol = Symbol('NO_ERROR');

let taskCounter = 0;
/** The bit of `Task._cancels` that says a cancellation waits for the next step. */
const MUST_CANCEL = 1;

/**
 * A Future that drives a coroutine (asyncio.Task); it cannot be completed with
 * `setResult`/`setException`.
 *
 * @example
 * ```ts
 * function* child(): Coroutine<string> { yield* sleep(0.1); return 'done'; }
 * function* main(): Coroutine<void> {
 *   const task = createTask(child(), { name: 'child' });
 *   console.log(yield* task); // 'done'
 * }
 * ```
 */
export class Task<T = unknown> extends Future<T> implements Runnable {
  /** @internal The coroutine; null once a task that finished in its eager first step let it go. */
  _coro: Coroutine<T> | null;
  /**
   * @internal The context the task runs in: a Context once one was given or asked for, until
   * then just the variables (an immutable map), which a copy of the creator's context shares.
   */
  _context: Context | VarMap;
  /**
   * @internal The AsyncLocalStorage stores the task runs in (those in force where it was made),
   * once any store was used in the process; null until then (internal/als/scope.ts).
   */
  _asyncScope: AsyncResource | null;
  /** @internal The name, or the number behind the default name `Task-<n>`. */
  _name: string | number;
  /** @internal The future this task is parked on. */
  _futWaiter: Future<unknown> | null = null;
  /**
   * @internal Cancellation requests, packed in one small integer (one field less per task):
   * twice the number of requests (cancelling()), plus 1 while a cancellation was requested that
   * no future could take (asyncio's `_must_cancel`).
   */
  _cancels = 0;
  /** @internal Neighbours in the loop's list of pending tasks. */
  _prevTask: Task<unknown> | null = null;
  /** @internal */
  _nextTask: Task<unknown> | null = null;

  /**
   * Wrap `coro`; its first step is scheduled with `callSoon` on `options.loop` or the
   * running/current loop. With `eagerStart` on a running loop the first step runs now, inside
   * the constructor (asyncio 3.12's eager_start): the task is the current task and its context
   * is entered meanwhile, then whatever ran before is current again. A coroutine that returns or
   * throws there gives a task already done, which never went through the loop's ready queue
   * (and lets its coroutine go: `getCoro()` is null); one that waits is scheduled as usual. A
   * subclass's own fields are set only once this constructor returns, after that first step.
   *
   * @example
   * ```ts
   * const task = new Task(lookup(key), { eagerStart: true });
   * if (task.done()) console.log('answered without waiting:', task.result());
   * ```
   */
  constructor(coro: Coroutine<T>, options?: LoopOption & TaskOptions) {
    super(options);
    if (options === promotion) {
      // A child gather ran without a Task so far (`_promotedTask`): neither scheduled nor listed.
      this._coro = coro;
      this._name = promotion.number;
      this._context = promotion.vars as VarMap;
      this._asyncScope = null;
      this._result = NO_ERROR;
      return;
    }
    if (!isCoroutine(coro)) {
      throw new TypeError(`a coroutine was expected, got ${repr(coro)}`);
    }
    this._coro = coro;
    const name = options?.name;
    this._name = name === undefined || name === null ? ++taskCounter : String(name);
    this._context = options?.context ?? _currentVars();
    this._asyncScope = asyncContextInUse ? captureAsyncContext(this as Task<unknown>) : null;
    this._result = NO_ERROR;
    const loop = this._loop;
    if (options?.eagerStart === true && loop.isRunning()) {
      eagerStart(this as Task<unknown>);
      return;
    }
    loop._scheduleHandle(this);
    loop._addTask(this as Task<unknown>);
  }

  /** The task's name (default `Task-<n>`) (get_name). */
  getName(): string {
    const name = this._name;
    return typeof name === 'number' ? `Task-${name}` : name;
  }

  /** Rename the task; the name is converted to a string (set_name). */
  setName(name: unknown): void {
    this._name = String(name);
  }

  /** The wrapped coroutine; null for a task that finished in its eager first step (get_coro). */
  getCoro(): Coroutine<T> | null {
    return this._coro;
  }

  /** The context the task runs in (get_context). */
  getContext(): Context {
    const held = this._context;
    if (held instanceof Context) return held;
    const context = new Context();
    context._owner = this;
    if (_servesOwner(this)) {
      // Asked from inside the task's own step: the rest of the step runs in the new object.
      context._vars = _currentVars();
      _switchTo(context);
    } else {
      context._vars = held;
    }
    this._context = context;
    return context;
  }

  /**
   * Request cancellation: CancelledError is thrown in at the current `yield*`. Returns true
   * while the task is not done; each request counts in `cancelling()` (cancel).
   *
   * @example
   * ```ts
   * task.cancel('shutting down');
   * ```
   */
  override cancel(msg?: string): boolean {
    this._retrieved();
    if (this._state !== PENDING) return false;
    this._cancels += 2;
    const waiter = this._futWaiter;
    if (waiter !== null && waiter.cancel(msg)) {
      // Keep _futWaiter: it may be a Task that swallows the cancellation and must be
      // cancelled again later.
      return true;
    }
    this._cancels |= MUST_CANCEL;
    this._cancelMessage = msg ?? null;
    return true;
  }

  /** The number of pending cancellation requests (cancelling). */
  cancelling(): number {
    return this._cancels >> 1;
  }

  /**
   * Decrement the count of pending cancellation requests; returns the new count, never below
   * 0. At 0 a cancellation not yet delivered is withdrawn (uncancel).
   */
  uncancel(): number {
    if (this._cancels >= 2) {
      this._cancels -= 2;
      if (this._cancels < 2) this._cancels = 0;
    }
    return this._cancels >> 1;
  }

  /** Tasks are completed by their coroutine: RuntimeError (set_result). */
  override setResult(_value: T): void {
    throw new RuntimeError('Task does not support setResult operation');
  }

  /** Tasks are completed by their coroutine: RuntimeError (set_exception). */
  override setException(_exception: Error | (new () => Error)): void {
    throw new RuntimeError('Task does not support setException operation');
  }

  override toString(): string {
    const info = this._reprInfo();
    if (this._state === PENDING && this._cancels >= 2) info[0] = 'cancelling';
    info.splice(1, 0, `name=${repr(this.getName())}`);
    if (this._coro !== null) info.splice(2, 0, `coro=<${this._coroName()}>`);
    if (this._futWaiter !== null) info.splice(this._coro === null ? 2 : 3, 0, `wait_for=${this._futWaiter}`);
    return `<${this.constructor.name} ${info.join(' ')}>`;
  }

  /**
   * @internal The coroutine as reprs show it: `fetchUser()` (`generator` when its function cannot
   * be known); in debug mode, while pending, with where it is suspended: `fetchUser() running at
   * /app/users.ts:12`, as asyncio's repr.
   */
  _coroName(): string {
    const coro = this._coro as unknown;
    if (typeof coro !== 'object' || coro === null) return 'generator';
    const name = generatorName(coro) ?? 'generator';
    if (this._state !== PENDING || !this._loop.getDebug()) return name;
    const where = generatorLocation(coro);
    return where === null ? name : `${name} running at ${where}`;
  }

  /** @internal */
  override _kind(): string {
    return 'Task';
  }

  /** @internal Schedule the wake-up that follows `_futWaiter` being done (asyncio's `__wakeup`). */
  _wakeupFrom(_future: Future<unknown>): void {
    this._loop._scheduleHandle(this);
  }

  /** @internal How a waited-on future's repr names this task's entry. */
  _waiterName(): string {
    return 'Task.wakeup()';
  }

  /**
   * Run the scheduled step or wake-up in the task's context; errors escaping the step go to
   * the exception handler as a Handle's would.
   *
   * @internal
   */
  _run(): void {
    if (asyncContextInUse) runInTaskScope(this as Task<unknown>, runTask);
    else {
      runTask(this as Task<unknown>);
      // The step used the process's first AsyncLocalStorage store.
      if (asyncContextInUse) adoptFirstStore(this as Task<unknown>);
    }
  }

  /** @internal */
  _describe(): string {
    return String(this);
  }
}

/**
 * Run the scheduled step or wake-up of `task` in its context; errors escaping the step go to
 * the exception handler as a Handle's would.
 */
function runTask(task: Task<unknown>): void {
  const context = task._context;
  const explicit = context instanceof Context;
  let previous: Context | null = null;
  try {
    if (explicit) previous = _enter(context);
    else _beginLazy(task);
    const waiter = task._futWaiter;
    if (waiter !== null) {
      wakeupTask(task, waiter);
    } else {
      const error = task._result;
      task._result = NO_ERROR;
      stepTask(task, error);
    }
  } catch (error) {
    if (_isEscaping(error)) throw error;
    task._loop.callExceptionHandler({
      message: `Exception in callback ${task._describe()}`,
      exception: error as Error,
      task: task,
    });
  } finally {
    if (!explicit) _endLazy(task);
    else if (previous !== null) _exit(previous);
  }
}

_setSteppingTask(() => _getRunningLoop()?._runningTask() ?? null);

const futureAddDoneCallback = Future.prototype.addDoneCallback;

function scheduleStep(task: Task<unknown>, error: unknown): void {
  task._result = error;
  task._loop._scheduleHandle(task);
}

function wakeupTask(task: Task<unknown>, future: Future<unknown>): void {
  if (future._state === FAILED || future._state === CANCELLED) {
    let error: unknown;
    try {
      future.result();
    } catch (caught) {
      error = caught;
    }
    stepTask(task, error);
  } else {
    stepTask(task, NO_ERROR);
  }
}

/** Run one step of `task` (asyncio's `Task.__step`), throwing `error` in unless it is NO_ERROR. */
function stepTask(task: Task<unknown>, error: unknown): void {
  if (task._state !== PENDING) {
    if (task._result === NO_ERROR) {
      // Settled from outside (Future.prototype.setResult.call(task, v)) while this step was
      // scheduled: the slot of the step's error held the outcome, which stays the task's.
      task._result = error;
      error = NO_ERROR;
    }
    throw new InvalidStateError(`_step(): already done: ${task}, ${error === NO_ERROR ? 'None' : repr(error)}`);
  }
  if ((task._cancels & MUST_CANCEL) !== 0) {
    if (!(error instanceof CancelledError)) error = task._makeCancelledError();
    task._cancels &= ~MUST_CANCEL;
  }
  task._futWaiter = null;
  const loop = task._loop;
  _enterTask(loop, task);
  try {
    runStep(task, error);
  } finally {
    _leaveTask(loop, task);
  }
}

// Call graphs read a suspended coroutine's frames down to this function (suspension.ts).
_setStepper(runStep.name, import.meta.url);

function runStep(task: Task<unknown>, error: unknown): void {
  let step: IteratorResult<unknown, unknown>;
  // A pending task always holds its coroutine; only a done one may have let it go.
  const coro = task._coro as Coroutine<unknown>;
  try {
    step = error === NO_ERROR ? coro.next() : coro.throw(error);
  } catch (thrown) {
    _stepThrew(task, thrown);
    return;
  }
  _stepReturned(task, step);
}

/** @internal The end of a step whose coroutine threw `thrown`: the task fails, or is cancelled. */
export function _stepThrew(task: Task<unknown>, thrown: unknown): void {
  task._loop._removeTask(task);
  if (thrown instanceof CancelledError) {
    // Kept for the first result()/exception() to re-raise, as asyncio's `_cancelled_exc`.
    task._result = thrown;
    task._cancelFuture(null);
  } else {
    task._setExceptionUnchecked(thrown === undefined || thrown === null ? new TypeError(`a coroutine threw ${thrown}`) : thrown);
    if (_isEscaping(thrown)) throw thrown;
  }
}

/** @internal The end of a step whose coroutine returned or yielded: the task finishes, or waits for what it yielded. */
export function _stepReturned(task: Task<unknown>, step: IteratorResult<unknown, unknown>): void {
  if (step.done === true) {
    task._loop._removeTask(task);
    if ((task._cancels & MUST_CANCEL) !== 0) {
      // Cancelled right before the coroutine returned.
      task._cancels &= ~MUST_CANCEL;
      task._cancelFuture(task._cancelMessage);
    } else {
      task._setResultUnchecked(step.value);
    }
    return;
  }
  const yielded = step.value;
  if (yielded === undefined) {
    // A bare yield gives up control for one iteration.
    scheduleStep(task, NO_ERROR);
  } else if (yielded instanceof Future) {
    const blocking = _awaiting.future === yielded;
    if (blocking) _awaiting.future = null;
    // Debug mode: where the coroutine chain is suspended, read by the future's next().
    const frames = suspension.frames;
    if (frames !== null) suspension.frames = null;
    if (yielded._loop !== task._loop) {
      scheduleStep(task, new RuntimeError(`Task ${task} got Future ${yielded} attached to a different loop`));
    } else if (!blocking) {
      scheduleStep(task, new RuntimeError(`yield was used instead of yield* in task ${task}: use yield* (not yield) to await ${yielded}`));
    } else if (yielded === task) {
      scheduleStep(task, new RuntimeError(`Task cannot await on itself: ${task}`));
    } else {
      task._futWaiter = yielded;
      // While parked, the slot of the next step's error is free: it holds when the wait began
      // (ps() says how long a task waits; a wake-up reads the future, not this slot).
      task._result = task._loop._tick;
      if (frames !== null) suspendedAt.set(task, frames);
      // A subclass that overrides addDoneCallback is called through it, as asyncio's Task calls
      // add_done_callback of anything but an exact Future; the wake-up then runs as that callback.
      if (yielded.addDoneCallback === futureAddDoneCallback) yielded._addWaiter(task);
      else {
        const wakeup = (): void => task._run();
        awaitedThrough(wakeup, task);
        yielded.addDoneCallback(wakeup);
      }
      if ((task._cancels & MUST_CANCEL) !== 0 && yielded.cancel(task._cancelMessage ?? undefined)) task._cancels &= ~MUST_CANCEL;
    }
  } else if (_isGenerator(yielded)) {
    const what = generatorName(yielded as object) ?? 'a coroutine';
    scheduleStep(task, new RuntimeError(`yield was used instead of yield* for a generator in task ${task}: use yield* (not yield) to await ${what}`));
  } else {
    scheduleStep(task, new RuntimeError(`Task got bad yield: ${repr(yielded)}`));
  }
}

/**
 * Run the first step of `task` now, from inside whatever runs (asyncio's `Task.__eager_start`):
 * `task` is the current task of its loop and one of its tasks meanwhile, then the task that was
 * current before (if any) is again. A task done after that step lets its coroutine go, as
 * asyncio's does.
 */
function eagerStart(task: Task<unknown>): void {
  const loop = task._loop;
  // Inside a child gather runs without a Task (gather.ts), that child gets its Task first.
  const outer = loop._runningTask();
  loop._currentTask = task;
  try {
    if (asyncContextInUse) runInTaskScope(task, nestedEagerStep);
    else {
      _runNested(task, eagerStep);
      if (asyncContextInUse) adoptFirstStore(task);
    }
  } finally {
    loop._currentTask = outer;
    if (task._state !== PENDING) task._coro = null;
  }
}

/** The first step of an eager task in its async context (AsyncLocalStorage stores). */
function nestedEagerStep(task: Task<unknown>): void {
  _runNested(task, eagerStep);
}

/** The first step of an eager task, its context entered: listed among the loop's tasks from now on, until done. */
function eagerStep(task: Task<unknown>): void {
  task._loop._addTask(task);
  runStep(task, NO_ERROR);
}

/** @internal Make `task` the current task of `loop` (asyncio's `_enter_task`). */
export function _enterTask(loop: EventLoop, task: Task<unknown>): void {
  const current = loop._currentTask;
  if (current !== null) {
    throw new RuntimeError(`Cannot enter into task ${task} while another task ${current} is being executed.`);
  }
  loop._currentTask = task;
}

/** @internal Clear the current task of `loop` (asyncio's `_leave_task`). */
export function _leaveTask(loop: EventLoop, task: Task<unknown>): void {
  const current = loop._currentTask;
  if (current !== task) {
    throw new RuntimeError(`Leaving task ${task} does not match the current task ${current}.`);
  }
  loop._currentTask = null;
}

/**
 * Schedule a coroutine as a Task on the running loop, or start it at once with `eagerStart`
 * (create_task; `eager_start` from asyncio 3.14).
 *
 * @example
 * ```ts
 * const task = createTask(worker(), { name: 'worker-1' });
 * const hit = createTask(cachedLookup(key), { eagerStart: true }); // done already when the cache answers
 * ```
 */
export function createTask<T>(coro: Coroutine<T>, options?: TaskOptions): Task<T> {
  let loop: EventLoop;
  try {
    loop = getRunningLoop();
  } catch (error) {
    (coro as { return?: (value?: unknown) => unknown } | null)?.return?.(undefined);
    throw error;
  }
  return loop.createTask(coro, options);
}

/** A Task class, or a constructor called like one, that `createEagerTaskFactory` builds tasks with. */
export type TaskConstructor = new (coro: Coroutine<unknown>, options: TaskOptions & { loop: EventLoop }) => Task<unknown>;

/**
 * Make a task factory whose tasks start eagerly (asyncio.create_eager_task_factory): each is
 * `new customTaskConstructor(coro, { ...options, loop, eagerStart: true })`, the options of
 * `createTask` passed through (`name`, `context`; an explicit `eagerStart: false` wins).
 * `customTaskConstructor` must accept `eagerStart`, as Task does.
 *
 * @example
 * ```ts
 * class TracedTask<T> extends Task<T> {}
 * loop.setTaskFactory(createEagerTaskFactory(TracedTask));
 * ```
 */
export function createEagerTaskFactory(customTaskConstructor: TaskConstructor): TaskFactory {
  if (typeof customTaskConstructor !== 'function') {
    throw new TypeError(`customTaskConstructor must be a Task class, got ${repr(customTaskConstructor)}`);
  }
  const exactTask = customTaskConstructor === Task;
  return (loop, coro, options) => {
    if (options === undefined && exactTask) return newEagerTask(loop, coro);
    return new customTaskConstructor(
      coro,
      options === undefined ? { loop, eagerStart: true } : { ...options, loop, eagerStart: options.eagerStart ?? true },
    );
  };
}

/**
 * The options of a Task made for a child that gather ran without one so far (gather.ts): the
 * constructor reads its name and variables from here, and neither schedules nor lists it.
 */
const promotion: { loop: EventLoop | undefined; number: number; vars: VarMap | null } = { loop: undefined, number: 0, vars: null };

/**
 * @internal The Task of a coroutine that gather ran so far without one, made when something needs
 * it (it is asked for, it waits, it failed): named `Task-<number>`, its context `vars`, not
 * scheduled and not among the loop's tasks (the caller decides both).
 */
export function _promotedTask(loop: EventLoop, coro: Coroutine<unknown>, number: number, vars: VarMap): Task<unknown> {
  promotion.loop = loop;
  promotion.number = number;
  promotion.vars = vars;
  try {
    return new Task(coro, promotion);
  } finally {
    promotion.loop = undefined;
    promotion.vars = null;
  }
}

/** @internal Take `count` task numbers, as that many Tasks made now would; returns the number before the first. */
export function _takeTaskNumbers(count: number): number {
  const before = taskCounter;
  taskCounter += count;
  return before;
}

/**
 * The options of the eager Tasks made with none given. A Task reads its options in its
 * constructor before its first step and keeps none of them, so one object serves every such
 * task (no allocation per task), its loop let go once the task is made.
 */
const eagerOptions: { loop: EventLoop | undefined; eagerStart: true } = { loop: undefined, eagerStart: true };

/** `new Task(coro, { loop, eagerStart: true })`, without an options object per task. */
function newEagerTask(loop: EventLoop, coro: Coroutine<unknown>): Task<unknown> {
  eagerOptions.loop = loop;
  try {
    return new Task(coro, eagerOptions);
  } finally {
    eagerOptions.loop = undefined;
  }
}

/**
 * A task factory whose Tasks start eagerly (asyncio.eager_task_factory): the first step of a
 * coroutine runs inside `createTask`, and one that finishes there never waits for the loop.
 * Set it with `loop.setTaskFactory(eagerTaskFactory)`; `createTask`, `ensureFuture`, `gather`
 * and TaskGroups then start their tasks eagerly while the loop runs.
 *
 * @example
 * ```ts
 * getRunningLoop().setTaskFactory(eagerTaskFactory);
 * const task = createTask(cachedLookup(key)); // done at once on a cache hit
 * ```
 */
export const eagerTaskFactory: TaskFactory = createEagerTaskFactory(Task);

/**
 * The task running on `loop` (default: the running loop), or null (current_task).
 *
 * @example
 * ```ts
 * function* main() { console.log(currentTask()?.getName()); }
 * ```
 */
export function currentTask(loop?: EventLoop): Task<unknown> | null {
  return (loop ?? getRunningLoop())._runningTask();
}

/**
 * The tasks of `loop` (default: the running loop) that are not done yet (all_tasks).
 *
 * @example
 * ```ts
 * for (const task of allTasks()) task.cancel();
 * ```
 */
export function allTasks(loop?: EventLoop): Set<Task<unknown>> {
  const target = loop ?? getRunningLoop();
  target._promoteLight();
  const pending = new Set<Task<unknown>>();
  for (let task = target._taskList; task !== null; task = task._nextTask) {
    if (task._state === PENDING) pending.add(task);
  }
  return pending;
}

/** Return a Future/Task as is (ensure_future); RangeError when it belongs to another `loop`. */
export function ensureFuture<F extends Future<unknown>>(fut: F, options?: LoopOption): F;
/** Wrap a coroutine in a Task (ensure_future). */
export function ensureFuture<T>(coro: Coroutine<T>, options?: LoopOption): Task<T>;
/** Wrap a Promise/thenable in a Future that settles with it (ensure_future). */
export function ensureFuture<T>(thenable: PromiseLike<T>, options?: LoopOption): Future<T>;
export function ensureFuture<T>(aw: Awaitable<T>, options?: LoopOption): Future<T>;
/**
 * Turn an awaitable into a Future (ensure_future): a Future or Task is returned as is, a
 * coroutine is wrapped in a Task, a Promise or thenable in a Future that settles with it.
 * A Promise cannot be cancelled from outside: cancelling its Future leaves the Promise alone.
 *
 * @example
 * ```ts
 * const fut = ensureFuture(fetch(url)); // a Future of the running loop
 * ```
 */
export function ensureFuture(aw: unknown, options?: LoopOption): Future<unknown> {
  return _ensureFutureOn(aw, options?.loop);
}

/** @internal `ensureFuture(aw, { loop })`, without the options object. */
export function _ensureFutureOn(aw: unknown, loop: EventLoop | undefined): Future<unknown> {
  if (aw instanceof Future) {
    if (loop !== undefined && loop !== aw._loop) {
      throw new RangeError('The future belongs to a different loop than the one specified as the loop argument');
    }
    return aw;
  }
  if (isCoroutine(aw)) {
    let target: EventLoop;
    try {
      target = loop ?? getEventLoop();
    } catch (error) {
      aw.return(undefined);
      throw error;
    }
    return target.createTask(aw);
  }
  if (_isThenable(aw)) {
    const target = loop ?? getEventLoop();
    const future = target.createFuture<unknown>();
    // Snapshots (ps) read what a pending future follows from its result slot, unused until it is done.
    future._result = PROMISE_NOTE;
    // A virtual clock waits for the Promise rather than jumping past it.
    target._holdClock();
    (aw as PromiseLike<unknown>).then(
      (value) => {
        target._releaseClock();
        if (!future.done() && !target.isClosed()) target.callSoonThreadsafe(settleResult, future, value);
      },
      (error: unknown) => {
        target._releaseClock();
        if (!future.done() && !target.isClosed()) target.callSoonThreadsafe(settleError, future, error);
      },
    );
    return future;
  }
  throw new TypeError('An asyncio.Future, a coroutine or an awaitable is required');
}

function settleResult(future: Future<unknown>, value: unknown): void {
  if (!future.done()) future.setResult(value);
}

function settleError(future: Future<unknown>, error: unknown): void {
  if (!future.done()) future._setExceptionUnchecked(error === undefined || error === null ? new TypeError(`a Promise rejected with ${error}`) : error);
}
