/**
 * AsyncLocalStorage, Node's context, across tasks, threads and processes.
 *
 * A Task runs each step in the AsyncLocalStorage stores in force where it was created, as it runs
 * in a copy of its creator's ContextVar context (internal/als/scope.ts); registering a storage
 * lets its store travel with calls and jobs, as `registerContextVar` does for a variable.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { useAsyncContext } from './internal/als/scope.js';
import { registerTravellingStorage } from './internal/travel.js';

/**
 * Let `als`'s store travel with calls and jobs to other threads and processes under
 * `options.name`, as `registerContextVar` does for a ContextVar: register it in every thread that
 * sends or receives it (in a module both sides import). A call or job (`lt.call`,
 * `callSoonThreadsafe`, `submit`, pool calls, `runInExecutor`/`toThread`, BullMQ jobs) carries
 * the store in force in the caller, structured-cloned; the callee runs inside `als.run()` with
 * that copy (a coroutine as a Task that keeps it in every step). Changes there do not come back;
 * no store in force stays none there. A store that cannot cross fails that call with a TypeError
 * naming the storage; one name stands for one storage or context variable (a TypeError otherwise).
 *
 * @example
 * ```ts
 * export const requestContext = registerAsyncLocalStorage(new AsyncLocalStorage<{ rid: string }>(), { name: 'request' });
 * // in a handler: requestContext.run({ rid }, () => createTask(handle(req)));
 * // handle(): yield* worker.call('process', job); // the worker sees requestContext.getStore()?.rid
 * ```
 */
export function registerAsyncLocalStorage<T>(als: AsyncLocalStorage<T>, options: { name: string }): AsyncLocalStorage<T> {
  if (!(als instanceof AsyncLocalStorage)) throw new TypeError(`registerAsyncLocalStorage() needs an AsyncLocalStorage, got ${als === null ? 'null' : typeof als}`);
  if (options === null || typeof options !== 'object') throw new TypeError('registerAsyncLocalStorage() options must be an object with a name');
  const name: unknown = options.name;
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(`registerAsyncLocalStorage() options.name must be a non-empty string, got ${typeof name === 'string' ? "''" : typeof name}`);
  }
  registerTravellingStorage(als as AsyncLocalStorage<unknown>, name);
  // A store travels from the task that makes the call: tasks must hold their stores from now on.
  useAsyncContext();
  return als;
}
