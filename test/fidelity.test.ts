/**
 * Fidelity misses found by asyncio's own tests and by running the same programs in CPython and
 * in multiloop (issue 15), each with the behaviour CPython shows.
 */
import { describe, expect, it } from 'vitest';
import { CancelledError, Future, InvalidStateError, getRunningLoop, run, sleep, type Coroutine, type ExceptionContext } from '../src/index.js';

describe('a Task awaiting a Future subclass', () => {
  it("calls the subclass's own addDoneCallback, as asyncio's Task does for anything but an exact Future", async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const calls: string[] = [];
        class Traced<T> extends Future<T> {
          override addDoneCallback(callback: (future: this) => void, options?: Parameters<Future<T>['addDoneCallback']>[1]): void {
            calls.push('addDoneCallback');
            super.addDoneCallback(callback, options);
          }
        }
        const traced = new Traced<number>({ loop });
        loop.callLater(0.001, () => traced.setResult(42));
        const value = yield* traced;
        // Cancellation reaches the task through the same callback.
        const other = new Traced<number>({ loop });
        const waiting = loop.createTask(
          (function* (): Coroutine<string> {
            try {
              yield* other;
              return 'not cancelled';
            } catch (error) {
              return error instanceof CancelledError ? 'cancelled' : 'other error';
            }
          })(),
        );
        yield* sleep(0);
        waiting.cancel();
        return { value, cancelled: yield* waiting, calls, otherCancelled: other.cancelled() };
      })(),
    );
    expect(seen).toEqual({ value: 42, cancelled: 'cancelled', calls: ['addDoneCallback', 'addDoneCallback'], otherCancelled: true });
  });
});

describe("Future's setters called on a pending Task", () => {
  function* pendingTask(): Coroutine<string> {
    yield* sleep(0.01);
    return 'natural';
  }

  it('the same with the task just created (its first step scheduled): the result is v, not an internal value', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const contexts: ExceptionContext[] = [];
        loop.setExceptionHandler((_loop, context) => contexts.push(context));
        const task = loop.createTask(pendingTask());
        Future.prototype.setResult.call(task, 'forced early');
        yield* sleep(0);
        const value = task.result();
        const failing = loop.createTask(pendingTask());
        Future.prototype.setException.call(failing, new RangeError('forced early'));
        yield* sleep(0);
        let raised: unknown = null;
        try {
          yield* failing;
        } catch (error) {
          raised = error;
        }
        return { value, raised: (raised as Error).message, errors: contexts.filter((c) => c.exception instanceof InvalidStateError).length };
      })(),
    );
    expect(seen).toEqual({ value: 'forced early', raised: 'forced early', errors: 2 });
  });

  it('Future.prototype.setResult.call(task, v): the task resolves with v; its next step reports InvalidStateError once', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const contexts: ExceptionContext[] = [];
        loop.setExceptionHandler((_loop, context) => contexts.push(context));
        const task = loop.createTask(pendingTask());
        yield* sleep(0);
        Future.prototype.setResult.call(task, 'forced');
        const value = yield* task;
        yield* sleep(0.03);
        return { value, errors: contexts.map((c) => [c.exception instanceof InvalidStateError, (c.exception as Error).message.startsWith('_step(): already done:')]) };
      })(),
    );
    expect(seen).toEqual({ value: 'forced', errors: [[true, true]] });
  });

  it('Future.prototype.setException.call(task, e): awaiting the task raises e; its next step reports InvalidStateError once', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const contexts: ExceptionContext[] = [];
        loop.setExceptionHandler((_loop, context) => contexts.push(context));
        const task = loop.createTask(pendingTask());
        yield* sleep(0);
        Future.prototype.setException.call(task, new RangeError('forced'));
        let raised: unknown = null;
        try {
          yield* task;
        } catch (error) {
          raised = error;
        }
        yield* sleep(0.03);
        return { raised: (raised as Error).message, isRange: raised instanceof RangeError, errors: contexts.filter((c) => c.exception instanceof InvalidStateError).length };
      })(),
    );
    expect(seen).toEqual({ raised: 'forced', isRange: true, errors: 1 });
  });
});

describe("run()'s teardown", () => {
  it('gives the loop as many iterations as asyncio.run: a task spawned while leftovers are cancelled gets 6 steps (CPython 3.11: 6)', async () => {
    const steps: number[] = [];
    function* counter(): Coroutine<void> {
      for (;;) {
        steps.push(steps.length);
        yield* sleep(0);
      }
    }
    function* leftover(): Coroutine<void> {
      try {
        yield* sleep(3600);
      } catch (error) {
        if (error instanceof CancelledError) getRunningLoop().createTask(counter());
        throw error;
      }
    }
    await run(
      (function* () {
        getRunningLoop().createTask(leftover());
        yield* sleep(0);
      })(),
    );
    // The same program under CPython 3.11's asyncio.run counts 6 (it then warns the task was destroyed pending).
    expect(steps.length).toBe(6);
  });
});
