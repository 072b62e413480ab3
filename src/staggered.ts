/**
 * Racing coroutines with staggered start times (asyncio.staggered): `staggeredRace`.
 *
 * Each attempt runs in its own task, which first waits for its predecessor to fail (or for
 * `delay` seconds), then starts the task of the next attempt, then runs its own coroutine.
 * Built on the loop's futures and tasks alone, with this module's own one-shot flag in the
 * role of asyncio's Event.
 */
import type { Coroutine } from './coroutines.js';
import { getRunningLoop } from './events.js';
import { CancelledError, ExceptionGroup, RuntimeError, TimeoutError, _isEscaping } from './exceptions.js';
import { repr, typeName } from './internal/format.js';
import { currentTask, type Task } from './task.js';
import { timeout } from './timeouts.js';
import type { EventLoop } from './base-events.js';
import type { Future } from './futures.js';

/**
 * Race coroutine factories with staggered start times and return the first success
 * (asyncio.staggered.staggered_race).
 *
 * The first factory is called at once. The next one starts when the previous attempt fails,
 * or after `delay` seconds, whichever comes first (with `delay` null: only when it fails).
 * The first attempt that returns wins and every other attempt is cancelled. The result is
 * `[winnerResult, winnerIndex, exceptions]`: `exceptions` has one entry per attempt started,
 * in order: the error it failed with, the CancelledError of an attempt cancelled because
 * another won, null for the winner (winner result and index are null when all failed).
 * Cancelling the race cancels every attempt, waits for them, and raises CancelledError.
 *
 * @example
 * ```ts
 * function* connectFirst(hosts: string[]): Coroutine<Connection> {
 *   const [conn, index, errors] = yield* staggeredRace(hosts.map((h) => () => connect(h)), 0.25);
 *   if (index === null) throw new ExceptionGroup('all attempts failed', errors as Error[]);
 *   return conn as Connection;
 * }
 * ```
 */
export function* staggeredRace<T>(
  coroFns: Iterable<() => Coroutine<T>>,
  delay: number | null,
): Coroutine<[winnerResult: T | null, winnerIndex: number | null, exceptions: Array<Error | null>]> {
  const loop = getRunningLoop();
  if (delay !== null) {
    if (typeof delay !== 'number') throw new TypeError(`delay must be a number or null, got ${typeName(delay)}`);
    if (Number.isNaN(delay)) throw new RangeError('Invalid delay: NaN (not a number)');
  }
  const iterable = coroFns as Partial<Iterable<() => Coroutine<T>>> | null | undefined;
  if (iterable === null || iterable === undefined || typeof iterable[Symbol.iterator] !== 'function') {
    throw new TypeError(`coroFns must be an iterable of coroutine functions, got ${repr(coroFns)}`);
  }
  const factories = (iterable as Iterable<() => Coroutine<T>>)[Symbol.iterator]();
  let started = 0;
  let winnerResult: T | null = null;
  let winnerIndex: number | null = null;
  const exceptions: Array<Error | null> = [];
  const unhandled: unknown[] = [];
  const running = new Set<Task<void>>();
  let onCompleted: Future<void> | null = null;

  const taskDone = (task: Task<void>): void => {
    running.delete(task);
    if (onCompleted !== null && !onCompleted.done() && running.size === 0) onCompleted.setResult(undefined);
    if (task.cancelled()) return;
    const error = task.exception();
    if (error !== null) unhandled.push(error);
  };

  const startAttempt = (previousFailed: Flag | null): void => {
    const okToStart = new Flag();
    const task = loop.createTask(runOne(okToStart, previousFailed));
    running.add(task);
    task.addDoneCallback(taskDone);
    okToStart.set();
  };

  function* runOne(okToStart: Flag, previousFailed: Flag | null): Coroutine<void> {
    // An eager task (eagerTaskFactory) would otherwise run ahead of its entry in `running`, and
    // a winner could miss it when it cancels the others (asyncio's gh-124309); a task started
    // later passes at once, without yielding.
    yield* okToStart.wait(loop);
    if (previousFailed !== null) yield* waitForFailure(loop, previousFailed, delay);
    const next = factories.next();
    if (next.done === true) return;
    const index = started++;
    const coroFn = next.value;
    const failed = new Flag();
    // The next attempt's task exists before this one starts, so it can time its own start.
    startAttempt(failed);
    exceptions.push(null);
    let result: T;
    try {
      result = yield* coroFn();
    } catch (error) {
      if (_isEscaping(error)) throw error;
      exceptions[index] = error as Error;
      failed.set();
      return;
    }
    if (winnerIndex !== null) {
      // asyncio asserts here: a cancelled attempt swallowed its cancellation and returned.
      throw new RuntimeError(`staggeredRace: attempt ${index} returned after attempt ${winnerIndex} had won`);
    }
    winnerIndex = index;
    winnerResult = result;
    // Not this task: cancelling it would leave a task that returned yet raises CancelledError.
    const current = currentTask(loop);
    for (const task of running) if (task !== current) task.cancel();
  }

  let propagateCancellation: CancelledError | null = null;
  startAttempt(null);
  // No attempt outlives the race, however it ends.
  while (running.size > 0) {
    onCompleted = loop.createFuture<void>();
    try {
      yield* onCompleted;
    } catch (error) {
      if (!(error instanceof CancelledError)) throw error;
      propagateCancellation = error;
      const message = error.message === '' ? undefined : error.message;
      for (const task of running) task.cancel(message);
    }
    onCompleted = null;
  }
  if (unhandled.length > 0) {
    // A failure of the race's own machinery (or KeyboardInterrupt/SystemExit from an attempt,
    // which Python cannot group and which propagate as themselves here).
    const escaping = unhandled.find(_isEscaping);
    if (escaping !== undefined) throw escaping;
    throw new ExceptionGroup('staggered race failed', unhandled as Error[]);
  }
  if (propagateCancellation !== null) throw propagateCancellation;
  return [winnerResult, winnerIndex, exceptions];
}

/** Wait until `flag` is set, for `delay` seconds at most (asyncio: `wait_for(event.wait(), delay)`, TimeoutError suppressed). */
function* waitForFailure(loop: EventLoop, flag: Flag, delay: number | null): Coroutine<void> {
  if (delay === null) {
    yield* flag.wait(loop);
  } else if (delay <= 0) {
    // wait_for with a non-positive timeout wraps the wait in a task, cancels it at once and
    // waits for it to end; the start of the next attempt keeps that timing.
    const waitTask = loop.createTask(flag.wait(loop));
    const waiter = loop.createFuture<void>();
    const release = (): void => {
      if (!waiter.done()) waiter.setResult(undefined);
    };
    waitTask.addDoneCallback(release);
    try {
      waitTask.cancel();
      yield* waiter;
    } finally {
      waitTask.removeDoneCallback(release);
    }
  } else {
    try {
      yield* timeout(delay).run(() => flag.wait(loop));
    } catch (error) {
      if (!(error instanceof TimeoutError)) throw error;
    }
  }
}

/** A one-shot flag with at most one waiter: the part of asyncio.Event an attempt needs. */
class Flag {
  #set = false;
  #waiter: Future<boolean> | null = null;

  set(): void {
    this.#set = true;
    const waiter = this.#waiter;
    if (waiter !== null && !waiter.done()) waiter.setResult(true);
  }

  *wait(loop: EventLoop): Coroutine<boolean> {
    if (this.#set) return true;
    const waiter = loop.createFuture<boolean>();
    this.#waiter = waiter;
    try {
      return yield* waiter;
    } finally {
      if (this.#waiter === waiter) this.#waiter = null;
    }
  }
}
