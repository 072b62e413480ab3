/**
 * A pool's initializer (concurrent.futures' `initializer`/`initargs`): an export of the hosted
 * module that each thread calls, replacements too, before it says it is ready, so that no call
 * reaches a thread that was not set up. Its arguments travel in the thread's workerData, made
 * ready to cross afresh for each thread (a LoopRef among them gets a link of its own in each). An
 * initializer that throws, rejects or is cancelled fails the thread's start, with an error that
 * names the export and why.
 */
import type { Transferable } from 'node:worker_threads';
import type { EventLoop } from '../../base-events.js';
import { _isThenable, isCoroutine } from '../../coroutines.js';
import { CancelledError, RuntimeError } from '../../exceptions.js';
import { ensureFuture } from '../../task.js';
import { collectTransfers } from '../../transfer.js';
import { quoteName } from '../module-ref.js';
import { fromWire, toWire } from '../wire.js';

/** An initializer as it travels to a thread: the export's name and its arguments as `toWire` made them. */
export interface InitializerData {
  name: string;
  args: unknown[];
}

/**
 * `[name, ...args]` made ready to travel to one thread; what it moves (ports of the LoopRefs
 * among the arguments) is added to `transfers`.
 */
export function encodeInitializer(initializer: readonly [string, ...unknown[]], transfers: Transferable[]): InitializerData {
  const [name, ...args] = initializer;
  const wire = args.map((arg, i) => toWire(arg, `initializer argument ${i + 1}`));
  collectTransfers(wire, transfers);
  return { name, args: wire };
}

/**
 * Call the initializer in `loop` (which runs): a coroutine runs as a Task there, a Promise or
 * Future is awaited. Null once it is done, else the error the thread's start fails with: a
 * TypeError when the export cannot be called, a RuntimeError naming the export and the cause
 * when it failed.
 */
export function runInitializer(
  loop: EventLoop,
  lookup: (name: string) => (...args: unknown[]) => unknown,
  initializer: InitializerData,
  threadName: string,
): Promise<Error | null> {
  const { name } = initializer;
  const failed = (cause: unknown): Error => {
    const why = cause instanceof Error ? `${cause.name}: ${cause.message}` : `${typeof cause === 'string' ? JSON.stringify(cause) : String(cause)} was thrown`;
    return new RuntimeError(`initializer ${quoteName(name)} failed in LoopThread '${threadName}': ${why}`, { cause });
  };
  return new Promise<Error | null>((resolve) => {
    // In a callback of the loop, as a call would run: the running loop is there for it.
    loop.callSoonThreadsafe(() => {
      let fn: (...args: unknown[]) => unknown;
      try {
        fn = lookup(name);
      } catch (error) {
        resolve(new TypeError(`initializer ${quoteName(name)} of LoopThread '${threadName}' cannot be called: ${(error as Error).message}`, { cause: error }));
        return;
      }
      let result: unknown;
      try {
        result = fn(...initializer.args.map(fromWire));
      } catch (error) {
        resolve(failed(error));
        return;
      }
      if (!isCoroutine(result) && !_isThenable(result)) {
        resolve(null);
        return;
      }
      ensureFuture(result as PromiseLike<unknown>, { loop }).addDoneCallback((done) => {
        if (done.cancelled()) resolve(failed(new CancelledError()));
        else resolve(done.exception() === null ? null : failed(done.exception()));
      });
    });
  });
}
