/**
 * Small coroutines for tests that run inside a loop: catching what an awaited coroutine raised,
 * waiting for tasks whatever their end, and the current task.
 */
import { currentTask, type Coroutine, type Task } from '../../src/index.js';

/**
 * What `yield*` takes: a coroutine, or a Future or Task. (A Task is no Generator: with
 * @types/node 24+ a Generator is also Disposable.)
 */
export type Yieldable<T> = Iterable<unknown, T, unknown>;

/**
 * Await `coro` and return what it threw (null when it returned).
 *
 * @example
 * ```ts
 * expect(yield* caught(q.get())).toBeInstanceOf(QueueShutDown);
 * ```
 */
export function* caught(coro: Yieldable<unknown>): Coroutine<unknown> {
  try {
    yield* coro;
    return null;
  } catch (error) {
    return error;
  }
}

/**
 * Run `body` and return what it threw; fail the test when it returns.
 *
 * @example
 * ```ts
 * const error = yield* raisedBy(() => timeout(0.01).run(() => sleep(10)));
 * ```
 */
export function* raisedBy(body: () => Yieldable<unknown>): Coroutine<unknown> {
  try {
    yield* body();
  } catch (error) {
    return error;
  }
  throw new Error('expected the block to raise');
}

/**
 * Wait for every task, ignoring how each ended.
 *
 * @example
 * ```ts
 * yield* settle([reader, writer]);
 * ```
 */
export function* settle(tasks: Array<Task<unknown>>): Coroutine<void> {
  for (const task of tasks) yield* caught(task);
}

/**
 * Return the task running now (call it inside a coroutine that a loop runs).
 *
 * @example
 * ```ts
 * expect(self().cancelling()).toBe(0);
 * ```
 */
export function self(): Task<unknown> {
  return currentTask() as Task<unknown>;
}
