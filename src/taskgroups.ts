/**
 * Structured concurrency (asyncio.taskgroups): `TaskGroup`.
 *
 * A group is entered once with `.run(body)`, runs the body in its parent task, and on the way
 * out waits for every child. The first child that fails cancels the other children and the
 * parent task (so the body stops at its current `yield*`); the group later withdraws that
 * cancellation with `uncancel()`, leaving the parent's `cancelling()` where it was. Errors of
 * the children and of the body surface together as one
 * `ExceptionGroup('unhandled errors in a TaskGroup', [...])`.
 *
 * Python splits groups into ExceptionGroup and BaseExceptionGroup; JavaScript has a single
 * error hierarchy, so every group here is an `ExceptionGroup`. What Python keeps out of
 * groups stays out here too: a CancelledError never goes into a group, and KeyboardInterrupt
 * and SystemExit bypass grouping and propagate as themselves.
 */
import { awaitedThrough } from './internal/awaited-by.js';
import { isCoroutine, type Coroutine } from './coroutines.js';
import { getRunningLoop } from './events.js';
import { CancelledError, ExceptionGroup, RuntimeError, _isEscaping } from './exceptions.js';
import { Future } from './futures.js';
import { INSPECT, repr } from './internal/format.js';
import { currentTask, type Task } from './task.js';
import type { EventLoop, TaskOptions } from './base-events.js';

/** Whether the body is still running, returned, or threw. */
const RUNNING = 0;
const RETURNED = 1;
const RAISED = 2;

/**
 * A scope that owns tasks and waits for all of them; the first error cancels the rest
 * (asyncio.TaskGroup).
 *
 * @example
 * ```ts
 * function* main(): Coroutine<string> {
 *   const [a, b] = yield* new TaskGroup().run(function* (tg) {
 *     return [tg.createTask(fetchPage('a')), tg.createTask(fetchPage('b'))];
 *   });
 *   // Both children are done here; had one failed, an ExceptionGroup would be raised.
 *   return a.result() + b.result();
 * }
 * ```
 */
export class TaskGroup {
  #entered = false;
  #exiting = false;
  #aborting = false;
  #loop: EventLoop | null = null;
  #parentTask: Task<unknown> | null = null;
  /** Set once a child's error made the group cancel its parent; `#exit` must then uncancel. */
  #parentCancelRequested = false;
  /** The children not done yet; finished ones leave as they finish. */
  #tasks = new Set<Task<unknown>>();
  #errors: unknown[] = [];
  /** The first KeyboardInterrupt or SystemExit seen; it wins over everything else. */
  #baseError: unknown = null;
  #onCompleted: Future<boolean> | null = null;
  /** Set by a `cancel()` before the group was entered: entering cancels it. */
  #cancelOnEnter = false;

  /**
   * Create a task in this group (TaskGroup.create_task). RuntimeError when the group was not
   * entered, is finished, or is shutting down after an error; the refused coroutine is closed.
   *
   * @example
   * ```ts
   * yield* new TaskGroup().run(function* (tg) {
   *   tg.createTask(worker(1), { name: 'worker-1' });
   * });
   * ```
   */
  createTask<T>(coro: Coroutine<T>, options?: TaskOptions): Task<T> {
    if (!this.#entered) {
      closeCoroutine(coro);
      throw new RuntimeError(`TaskGroup ${this} has not been entered`);
    }
    if (this.#exiting && this.#tasks.size === 0) {
      closeCoroutine(coro);
      throw new RuntimeError(`TaskGroup ${this} is finished`);
    }
    if (this.#aborting) {
      closeCoroutine(coro);
      throw new RuntimeError(`TaskGroup ${this} is shutting down`);
    }
    const task = (this.#loop as EventLoop).createTask(coro, options);
    this.#tasks.add(task as Task<unknown>);
    task.addDoneCallback(this.#onTaskDone);
    // An eager task can abort the group in its first step, before it is one of the group's tasks
    // (asyncio's gh-155418): it is cancelled now, as the others were.
    if (this.#aborting && !task.done()) task.cancel();
    return task;
  }

  /**
   * Cancel the group (asyncio 3.15's TaskGroup.cancel): every child not done yet and the body
   * are cancelled, and the group then ends without an error of its own: `run()` returns once
   * the children are done, as if the body had returned (a CancelledError the body caught and
   * replaced, or a child's error, still surface as usual). Called before the group is entered,
   * it cancels the group as it enters; called once the group is done, it does nothing; calling
   * it again changes nothing.
   *
   * @example
   * ```ts
   * const found = yield* new TaskGroup().run(function* (tg) {
   *   let first: string | null = null;
   *   for (const mirror of mirrors) {
   *     tg.createTask((function* () { first ??= yield* fetchFrom(mirror); tg.cancel(); })());
   *   }
   *   yield* sleep(30); // ends at the first answer: the group is cancelled, not failed
   *   return first;
   * });
   * ```
   */
  cancel(): void {
    if (!this.#entered) {
      this.#cancelOnEnter = true;
      return;
    }
    if (this.#exiting && this.#tasks.size === 0) return;
    if (this.#aborting) return;
    this.#abort();
    const parent = this.#parentTask;
    if (parent !== null && !this.#parentCancelRequested) {
      this.#parentCancelRequested = true;
      parent.cancel();
    }
  }

  /**
   * Run `body(this)` in the current task, then wait for every child; return the body's result
   * (Python's `async with`). Errors of the children and the body raise one ExceptionGroup;
   * a cancellation from outside ends in a plain CancelledError once the children are done.
   * A body that `cancel()` stopped gives no result: `run()` then returns undefined.
   *
   * @example
   * ```ts
   * function* main(): Coroutine<number[]> {
   *   const tasks = yield* new TaskGroup().run(function* (tg) {
   *     return [1, 2, 3].map((n) => tg.createTask(square(n)));
   *   });
   *   return tasks.map((t) => t.result()); // every child is done here
   * }
   * ```
   */
  *run<R>(body: (group: TaskGroup) => Coroutine<R>): Coroutine<R> {
    if (typeof body !== 'function') {
      throw new TypeError(`TaskGroup.run() expects a generator function, got ${repr(body)}`);
    }
    this.#enter();
    let outcome = RUNNING;
    let result: R | undefined;
    let error: unknown;
    try {
      result = yield* startBody(body, this);
      outcome = RETURNED;
    } catch (caught) {
      outcome = RAISED;
      error = caught;
    } finally {
      if (outcome === RUNNING) {
        // Closed with return() while suspended in the body: nothing can be awaited any more,
        // so the children are cancelled and left to finish on their own.
        this.#exiting = true;
        if (!this.#aborting) this.#abort();
      }
    }
    yield* this.#exit(outcome === RAISED, error);
    // Only the cancellation of a group cancelled with cancel() ends here without an error: the
    // body gave no result. #exit raises for any other error; this keeps it should that change.
    if (outcome === RAISED && !(error instanceof CancelledError)) throw error;
    return result as R;
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    let info = '';
    if (this.#tasks.size > 0) info += ` tasks=${this.#tasks.size}`;
    if (this.#errors.length > 0) info += ` errors=${this.#errors.length}`;
    if (this.#aborting) info += ' cancelling';
    else if (this.#entered) info += ' entered';
    return `<TaskGroup${info}>`;
  }

  /** asyncio's `__aenter__`. */
  #enter(): void {
    if (this.#entered) throw new RuntimeError(`TaskGroup ${this} has already been entered`);
    this.#loop ??= getRunningLoop();
    const parent = currentTask(this.#loop);
    if (parent === null) throw new RuntimeError(`TaskGroup ${this} cannot determine the parent task`);
    this.#parentTask = parent;
    awaitedThrough(this.#onTaskDone, parent);
    this.#entered = true;
    if (this.#cancelOnEnter) this.cancel();
  }

  /** asyncio's `__aexit__`; `raised` tells whether the body threw `error`. */
  *#exit(raised: boolean, error: unknown): Coroutine<void> {
    try {
      yield* this.#waitAndRaise(raised, error);
    } finally {
      // Errors can hold large object graphs; the group keeps none once it is done.
      this.#errors = [];
      this.#baseError = null;
    }
  }

  *#waitAndRaise(raised: boolean, error: unknown): Coroutine<void> {
    this.#exiting = true;
    if (raised && _isEscaping(error) && this.#baseError === null) this.#baseError = error;
    let propagateCancellation: CancelledError | null = raised && error instanceof CancelledError ? error : null;
    // The body failed or its task is being cancelled: the children must stop too.
    if (raised && !this.#aborting) this.#abort();

    const loop = this.#loop as EventLoop;
    let pendingCancellation: CancelledError | null = null;
    // A loop, because the parent task may be cancelled again (or repeatedly) while it waits.
    while (this.#tasks.size > 0) {
      this.#onCompleted ??= loop.createFuture<boolean>();
      try {
        yield* this.#onCompleted;
      } catch (caught) {
        if (!(caught instanceof CancelledError)) throw caught;
        pendingCancellation = caught;
        if (!this.#aborting) {
          // The parent task is cancelled from outside while the children still run.
          propagateCancellation = caught;
          this.#abort();
        }
      }
      this.#onCompleted = null;
    }

    if (this.#baseError !== null) throw this.#baseError;

    const parent = this.#parentTask as Task<unknown>;
    // The group's own cancellation of its parent must be withdrawn; only when nobody else
    // asked for one does the CancelledError stop here, and one that somebody else asked for
    // while the group waited is not dropped (asyncio's gh-155433).
    if (this.#parentCancelRequested) {
      if (parent.uncancel() === 0) propagateCancellation = null;
      else propagateCancellation ??= pendingCancellation;
    }
    // Errors win over a cancellation.
    if (propagateCancellation !== null && this.#errors.length === 0) throw propagateCancellation;

    if (raised && !(error instanceof CancelledError)) this.#errors.push(error);
    if (this.#errors.length > 0) {
      // A cancellation from outside stays pending, with the count where it was.
      if (parent.cancelling() > 0) {
        parent.uncancel();
        parent.cancel();
      }
      throw new ExceptionGroup('unhandled errors in a TaskGroup', this.#errors as Error[]);
    }
  }

  #abort(): void {
    this.#aborting = true;
    for (const task of this.#tasks) if (!task.done()) task.cancel();
  }

  /** The done callback of every child (asyncio's `_on_task_done`). */
  #onTaskDone = (task: Task<unknown>): void => {
    this.#tasks.delete(task);
    const onCompleted = this.#onCompleted;
    if (onCompleted !== null && this.#tasks.size === 0 && !onCompleted.done()) onCompleted.setResult(true);
    if (task.cancelled()) return;
    const error = task.exception();
    if (error === null) return;

    this.#errors.push(error);
    if (_isEscaping(error) && this.#baseError === null) this.#baseError = error;

    const parent = this.#parentTask as Task<unknown>;
    if (parent.done()) {
      (this.#loop as EventLoop).callExceptionHandler({
        message: `Task ${task} has errored out but its parent task ${parent} is already completed`,
        exception: error,
        task,
      });
      return;
    }
    if (!this.#aborting && !this.#parentCancelRequested) {
      // Stop whatever the body awaits now; #exit withdraws this cancellation again.
      this.#abort();
      this.#parentCancelRequested = true;
      parent.cancel();
    }
  };
}

/** Close a coroutine the group refused, as asyncio's `coro.close()` (a started one runs its finally). */
function closeCoroutine(coro: unknown): void {
  if (isCoroutine(coro)) coro.return(undefined);
}

/** Call the body of a scope and check that it gave something `yield*` can await. */
function startBody<S, R>(body: (scope: S) => Coroutine<R>, scope: S): Coroutine<R> {
  const coro: unknown = body(scope);
  if (!isCoroutine(coro) && !(coro instanceof Future)) {
    throw new TypeError(`the body of a scope must return a coroutine, got ${repr(coro)}`);
  }
  return coro as Coroutine<R>;
}
