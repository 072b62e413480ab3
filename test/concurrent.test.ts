/**
 * ConcurrentFuture, wrapFuture and runCoroutineThreadsafe in one thread (THR-05), on the
 * virtual clock. Submissions come from outside the loop's callbacks: before the loop runs, or
 * from a Node timer while it runs.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ConcurrentFuture,
  Future,
  InvalidStateError,
  Task,
  TimeoutError,
  allTasks,
  currentTask,
  newEventLoop,
  runCoroutineThreadsafe,
  sleep,
  wrapFuture,
  type Coroutine,
  type ExceptionContext,
} from '../src/index.js';
import { captureErrors, restoreLogger } from './helpers/logger.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
useFreshLoop(() => (loop = new VirtualLoop()));
restoreLogger();

function* add(a: number, b: number): Coroutine<number> {
  yield* sleep(0.05);
  return a + b;
}

function* fail(message: string): Coroutine<never> {
  yield* sleep(0.05);
  throw new RangeError(message);
}

/** Run `loop` until `future` is done, without awaiting it (so its error is not thrown here). */
async function runUntilDone<T>(future: Future<T> | ConcurrentFuture<T>): Promise<void> {
  const done: Future<T> = future instanceof Future ? future : wrapFuture(future, { loop });
  const waiter = loop.createFuture<void>();
  done.addDoneCallback(() => waiter.setResult(undefined));
  await loop.runUntilComplete(waiter);
}

describe('runCoroutineThreadsafe (THR-05)', () => {
  it("returns a pending ConcurrentFuture that gets the coroutine's result", async () => {
    const cf = runCoroutineThreadsafe(add(1, 2), loop);
    expect(cf).toBeInstanceOf(ConcurrentFuture);
    expect(cf.done()).toBe(false);
    expect(() => cf.result()).toThrow(TimeoutError);
    const seen: Array<ConcurrentFuture<number>> = [];
    cf.addDoneCallback((future) => seen.push(future));
    expect(await loop.runUntilComplete(wrapFuture(cf, { loop }))).toBe(3);
    expect(cf.done()).toBe(true);
    expect(cf.cancelled()).toBe(false);
    expect(cf.result()).toBe(3);
    expect(cf.exception()).toBeNull();
    expect(seen).toEqual([cf]);
  });

  it('accepts a submission from a Node callback while the loop waits, and wakes it', async () => {
    const result = await loop.runUntilComplete(
      (function* () {
        const submitted = loop.createFuture<ConcurrentFuture<number>>();
        setTimeout(() => {
          const cf = runCoroutineThreadsafe(add(20, 22), loop);
          loop.callSoonThreadsafe(() => submitted.setResult(cf));
        }, 0);
        const cf = yield* submitted;
        return yield* wrapFuture(cf);
      })(),
    );
    expect(result).toBe(42);
  });

  it("runs the coroutine as a Task of the target loop", async () => {
    function* whoAmI(): Coroutine<boolean> {
      const task = currentTask();
      yield* sleep(0);
      return task instanceof Task && task.getLoop() === loop;
    }
    expect(await loop.runUntilComplete(wrapFuture(runCoroutineThreadsafe(whoAmI(), loop), { loop }))).toBe(true);
  });

  it('sets the error of a failing coroutine: result() throws it, exception() returns it', async () => {
    const cf = runCoroutineThreadsafe(fail('Fail!'), loop);
    await runUntilDone(cf);
    const error = cf.exception();
    expect(error).toBeInstanceOf(RangeError);
    expect(error!.message).toBe('Fail!');
    expect(() => cf.result()).toThrow(error!);
    let thrown: unknown;
    try {
      cf.result();
    } catch (caught) {
      thrown = caught;
    }
    expect(thrown).toBe(error);
  });

  it('cancelling the ConcurrentFuture cancels the task, which sees CancelledError and runs its finally', async () => {
    const log: string[] = [];
    const started = loop.createFuture<void>();
    const finished = loop.createFuture<void>();
    function* waitLong(): Coroutine<void> {
      log.push('started');
      started.setResult(undefined);
      try {
        yield* sleep(3600);
        log.push('slept');
      } catch (error) {
        log.push(`caught ${(error as Error).name}`);
        throw error;
      } finally {
        log.push('finally');
        finished.setResult(undefined);
      }
    }
    const cf = runCoroutineThreadsafe(waitLong(), loop);
    await loop.runUntilComplete(started);
    expect(() => cf.result()).toThrow(TimeoutError);
    expect(cf.cancel()).toBe(true);
    expect(cf.cancelled()).toBe(true);
    await loop.runUntilComplete(finished);
    expect(log).toEqual(['started', 'caught CancelledError', 'finally']);
    expect(allTasks(loop).size).toBe(0);
    expect(() => cf.result()).toThrow(CancelledError);
    expect(() => cf.exception()).toThrow(CancelledError);
  });

  it('cancelled before the loop took the submission: the task is cancelled at its first wait', async () => {
    const log: string[] = [];
    function* waitLong(): Coroutine<void> {
      log.push('started');
      try {
        yield* sleep(3600);
      } finally {
        log.push('finally');
      }
    }
    const cf = runCoroutineThreadsafe(waitLong(), loop);
    expect(cf.cancel()).toBe(true);
    await loop.runUntilComplete(sleep(1));
    expect(log).toEqual(['started', 'finally']);
    expect(allTasks(loop).size).toBe(0);
    expect(cf.cancelled()).toBe(true);
  });

  it('follows a task that cancels itself: result() throws CancelledError', async () => {
    function* cancelSelf(): Coroutine<number> {
      currentTask()!.cancel();
      yield* sleep(0);
      return 1;
    }
    const cf = runCoroutineThreadsafe(cancelSelf(), loop);
    await runUntilDone(cf);
    expect(cf.cancelled()).toBe(true);
    expect(() => cf.result()).toThrow(CancelledError);
  });

  it.each([
    ['a coroutine function', add],
    ['a number', 42],
    ['a Promise', Promise.resolve(1)],
    ['null', null],
  ])('refuses %s: TypeError("A coroutine object is required")', (_what, value) => {
    expect(() => runCoroutineThreadsafe(value as never, loop)).toThrow(new TypeError('A coroutine object is required'));
  });

  it('refuses a Future: it is not a coroutine', () => {
    expect(() => runCoroutineThreadsafe(loop.createFuture() as never, loop)).toThrow(
      new TypeError('A coroutine object is required'),
    );
  });

  it('a task factory that throws: the error is set on the future and goes to the exception handler once', async () => {
    const boom = new RangeError('no tasks today');
    loop.setTaskFactory(() => {
      throw boom;
    });
    const contexts: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => contexts.push(context));
    const cf = runCoroutineThreadsafe(add(1, 2), loop);
    await runUntilDone(cf);
    expect(cf.exception()).toBe(boom);
    expect(() => cf.result()).toThrow(boom);
    expect(contexts).toHaveLength(1);
    expect(contexts[0]!.exception).toBe(boom);
  });
});

describe('ConcurrentFuture', () => {
  it('calls done callbacks once with the future, at once when already done, in order', async () => {
    const cf = runCoroutineThreadsafe(add(1, 1), loop);
    const log: string[] = [];
    cf.addDoneCallback((f) => log.push(`first ${f.result()}`));
    cf.addDoneCallback((f) => log.push(`second ${f.result()}`));
    await runUntilDone(cf);
    expect(log).toEqual(['first 2', 'second 2']);
    cf.addDoneCallback((f) => log.push(`late ${f === cf}`));
    expect(log).toEqual(['first 2', 'second 2', 'late true']);
  });

  it('logs an error thrown by a done callback, and runs the next callbacks', async () => {
    const reports = captureErrors();
    const cf = runCoroutineThreadsafe(add(2, 3), loop);
    const oops = new Error('oops');
    const log: string[] = [];
    cf.addDoneCallback(() => {
      throw oops;
    });
    cf.addDoneCallback(() => log.push('next ran'));
    await runUntilDone(cf);
    expect(log).toEqual(['next ran']);
    expect(reports).toEqual([['exception calling callback for <ConcurrentFuture state=finished returned 5>', oops]]);
  });

  it('refuses a done callback that is not a function', () => {
    const cf = runCoroutineThreadsafe(add(1, 1), loop);
    expect(() => cf.addDoneCallback(42 as never)).toThrow(
      new TypeError('a callable object was expected by addDoneCallback(), got 42'),
    );
    cf.cancel();
  });

  it('cancel(): true while pending and once cancelled, false once finished', async () => {
    const pending = runCoroutineThreadsafe(add(1, 1), loop);
    expect(pending.cancel()).toBe(true);
    expect(pending.cancel()).toBe(true);
    expect(pending.done()).toBe(true);
    const finished = runCoroutineThreadsafe(add(1, 1), loop);
    await runUntilDone(finished);
    expect(finished.cancel()).toBe(false);
    expect(finished.cancelled()).toBe(false);
    expect(finished.result()).toBe(2);
  });

  it('result() and exception() throw TimeoutError while pending, never blocking', () => {
    const cf = runCoroutineThreadsafe(add(1, 1), loop);
    expect(() => cf.result()).toThrow(TimeoutError);
    expect(() => cf.exception()).toThrow(TimeoutError);
    cf.cancel();
  });

  it('cannot be cancelled once running, and refuses a second outcome', () => {
    const cf = ConcurrentFuture._create<number>();
    expect(cf._setRunningOrNotifyCancel()).toBe(true);
    expect(cf.running()).toBe(true);
    expect(cf.cancel()).toBe(false);
    cf._setResult(7);
    expect(() => cf._setResult(8)).toThrow(InvalidStateError);
    expect(() => cf._setException(new Error('late'))).toThrow(InvalidStateError);
    expect(cf.result()).toBe(7);
    const cancelled = ConcurrentFuture._create<number>();
    cancelled.cancel();
    expect(cancelled._setRunningOrNotifyCancel()).toBe(false);
  });

  it('describes its state', () => {
    // @ts-expect-error the constructor is protected: executors and runCoroutineThreadsafe make them
    const construct = (): ConcurrentFuture => new ConcurrentFuture();
    void construct;
    const cf = ConcurrentFuture._create<number>();
    expect(String(cf)).toBe('<ConcurrentFuture state=pending>');
    cf._setRunningOrNotifyCancel();
    expect(String(cf)).toBe('<ConcurrentFuture state=running>');
    cf._setException(new RangeError('bad'));
    expect(String(cf)).toBe("<ConcurrentFuture state=finished raised RangeError('bad')>");
    const cancelled = ConcurrentFuture._create<number>();
    cancelled.cancel();
    expect(String(cancelled)).toBe('<ConcurrentFuture state=cancelled>');
  });
});

describe('wrapFuture', () => {
  it('returns a multiloop Future as is, and refuses one of another loop', () => {
    const future = loop.createFuture();
    expect(wrapFuture(future)).toBe(future);
    expect(wrapFuture(future, { loop })).toBe(future);
    const other = newEventLoop();
    try {
      expect(() => wrapFuture(future, { loop: other })).toThrow(
        new RangeError('The future belongs to a different loop than the one specified as the loop argument'),
      );
    } finally {
      other.close();
    }
  });

  it('refuses what is not a future', () => {
    expect(() => wrapFuture(42 as never, { loop })).toThrow(new TypeError('concurrent.futures.Future is expected, got 42'));
    expect(() => wrapFuture(Promise.resolve(1) as never, { loop })).toThrow(TypeError);
  });

  it('copies the outcome into a Future of the loop through callSoonThreadsafe, never inline', async () => {
    const cf = ConcurrentFuture._create<string>();
    const wrapped = wrapFuture(cf, { loop });
    expect(wrapped).toBeInstanceOf(Future);
    expect(wrapped.getLoop()).toBe(loop);
    cf._setRunningOrNotifyCancel();
    cf._setResult('done');
    expect(wrapped.done()).toBe(false);
    expect(await loop.runUntilComplete(wrapped)).toBe('done');
  });

  it('copies an error', async () => {
    const cf = ConcurrentFuture._create<string>();
    const wrapped = wrapFuture(cf, { loop });
    const error = new RangeError('bad');
    cf._setRunningOrNotifyCancel();
    cf._setException(error);
    await runUntilDone(wrapped);
    expect(wrapped.exception()).toBe(error);
  });

  it('wraps into the loop that is given, also after the source finished in another loop', async () => {
    const other = new VirtualLoop();
    try {
      const cf = runCoroutineThreadsafe(add(3, 4), other);
      await other.runUntilComplete(wrapFuture(cf, { loop: other }));
      const wrapped = wrapFuture(cf, { loop });
      expect(wrapped.getLoop()).toBe(loop);
      expect(await loop.runUntilComplete(wrapped)).toBe(7);
    } finally {
      other.close();
    }
  });

  it('cancelling the wrapped Future cancels the ConcurrentFuture and the task behind it', async () => {
    const log: string[] = [];
    function* waitLong(): Coroutine<void> {
      try {
        yield* sleep(3600);
      } finally {
        log.push('finally');
      }
    }
    const cf = runCoroutineThreadsafe(waitLong(), loop);
    const wrapped = wrapFuture(cf, { loop });
    await loop.runUntilComplete(sleep(1));
    expect(wrapped.cancel()).toBe(true);
    await loop.runUntilComplete(sleep(1));
    expect(cf.cancelled()).toBe(true);
    expect(log).toEqual(['finally']);
    expect(allTasks(loop).size).toBe(0);
  });

  it('a cancelled ConcurrentFuture cancels the wrapped Future', async () => {
    const cf = ConcurrentFuture._create<string>();
    const wrapped = wrapFuture(cf, { loop });
    cf.cancel();
    await runUntilDone(wrapped);
    expect(wrapped.cancelled()).toBe(true);
  });
});
