import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  Future,
  KeyboardInterrupt,
  RuntimeError,
  SystemExit,
  Task,
  TimeoutError,
  type TimerHandle,
  allTasks,
  createTask,
  currentTask,
  ensureFuture,
  getRunningLoop,
  isFuture,
  newEventLoop,
  setEventLoop,
  sleep,
  type Coroutine,
  type ExceptionContext,
} from '../src/index.js';
import { _enterTask, _leaveTask } from '../src/task.js';
import { expectThrow, thrownBy } from './helpers/errors.js';
import { collectUntil, drainFinalizers } from './helpers/gc.js';
import { useFreshLoop } from './helpers/loops.js';
import { waitOn } from './fixtures/suspended.mjs';
import { VirtualLoop, runBriefly, runOnce } from './helpers/virtual-loop.js';

/** A virtual-clock loop that remembers every timer it schedules. */
class TimerSpyLoop extends VirtualLoop {
  readonly timers = new Set<TimerHandle>();

  override callLater<A extends unknown[]>(delay: number, callback: (...args: A) => void, ...args: A): TimerHandle {
    const timer = super.callLater(delay, callback, ...args);
    this.timers.add(timer);
    return timer;
  }

  override callAt<A extends unknown[]>(when: number, callback: (...args: A) => void, ...args: A): TimerHandle {
    const timer = super.callAt(when, callback, ...args);
    this.timers.add(timer);
    return timer;
  }
}

/** The reason `promise` rejects with; fails the test when it resolves. */
async function rejection(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject');
}

/** A task's repr with the coroutine's description left out (asyncio shows file and line there). */
function shown(task: Task<unknown>): string {
  return String(task).replace(/ coro=<[^>]*>/, ' coro=<…>');
}

let loop: TimerSpyLoop;
useFreshLoop(() => (loop = new TimerSpyLoop()), { clearCurrent: true, leaveRunning: true });

describe('Task basics (TASK-01)', () => {
  it('runs a coroutine to its return value; a Task is a Future of its loop', async () => {
    function* coro(): Coroutine<string> {
      return 'ok';
    }
    const gen = coro();
    const task = loop.createTask(gen);
    expect(task).toBeInstanceOf(Task);
    expect(task).toBeInstanceOf(Future);
    expect(isFuture(task)).toBe(true);
    expect(task.getLoop()).toBe(loop);
    expect(task.getCoro()).toBe(gen);
    await expect(loop.runUntilComplete(task)).resolves.toBe('ok');
    expect(task.result()).toBe('ok');
  });

  it('takes the future a coroutine returns as its result, without awaiting it', async () => {
    const fut = loop.createFuture<number>();
    function* coro(): Coroutine<Future<number>> {
      return fut;
    }
    const task = loop.createTask(coro());
    await runOnce(loop);
    expect(task.done()).toBe(true);
    expect(task.result()).toBe(fut);
    expect(fut.done()).toBe(false);
  });

  it("throws TypeError('a coroutine was expected, got 123') from the constructor and createTask", () => {
    expectThrow(() => new Task(123 as never, { loop }), TypeError, 'a coroutine was expected, got 123');
    expectThrow(() => loop.createTask(123 as never), TypeError, 'a coroutine was expected, got 123');
  });

  it('refuses a coroutine function that was not called', () => {
    function* coro(): Coroutine<void> {}
    const error = thrownBy(() => loop.createTask(coro as never));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/^a coroutine was expected, got /);
  });

  it('accepts a coroutine-like object with next, throw and return', async () => {
    const like = {
      next: (): IteratorResult<unknown, number> => ({ done: true, value: 42 }),
      throw: (error: unknown): never => {
        throw error;
      },
      return: (value: number): IteratorResult<unknown, number> => ({ done: true, value }),
    };
    const task = loop.createTask(like as unknown as Coroutine<number>);
    await runOnce(loop);
    expect(task.result()).toBe(42);
  });

  it('names unnamed tasks Task-<n> with strictly increasing n', () => {
    function* coro(): Coroutine<void> {}
    const numbers = [loop.createTask(coro()), new Task(coro(), { loop }), loop.createTask(coro())].map((task) => {
      const match = /^Task-(\d+)$/.exec(task.getName());
      expect(match).not.toBeNull();
      return Number(match?.[1]);
    });
    expect(numbers[1]).toBeGreaterThan(numbers[0] as number);
    expect(numbers[2]).toBeGreaterThan(numbers[1] as number);
  });

  it('keeps an explicit name and converts names set later to strings', () => {
    function* coro(): Coroutine<void> {}
    const task = loop.createTask(coro(), { name: 'No-op' });
    expect(task.getName()).toBe('No-op');
    task.setName(6 as never);
    expect(task.getName()).toBe('6');
    task.setName({ toString: () => '{6}' } as never);
    expect(task.getName()).toBe('{6}');
  });

  it('refuses createTask() without a running loop', () => {
    function* coro(): Coroutine<void> {}
    expectThrow(() => createTask(coro()), RuntimeError, 'no running event loop');
  });

  it('refuses setResult and setException: a task is completed by its coroutine', () => {
    function* coro(): Coroutine<number> {
      return 1;
    }
    const task = loop.createTask(coro());
    expectThrow(() => task.setResult(1), RuntimeError, 'Task does not support setResult operation');
    expectThrow(
      () => task.setException(new RuntimeError('x')),
      RuntimeError,
      'Task does not support setException operation',
    );
    expect(task.done()).toBe(false);
  });

  it('can be awaited from an async function while the loop runs', async () => {
    const fut = loop.createFuture<string>();
    function* coro(): Coroutine<string> {
      return `${yield* fut}!`;
    }
    const task = loop.createTask(coro());
    const running = loop.runForever();
    const awaited = (async (): Promise<string> => {
      const value = await task;
      loop.stop();
      return value;
    })();
    await Promise.resolve();
    expect(task.done()).toBe(false);
    loop.callSoonThreadsafe(() => fut.setResult('hi'));
    await expect(awaited).resolves.toBe('hi!');
    await running;
  });
});

describe('Task scheduling order (TASK-02)', () => {
  it('runs the first step via callSoon and wakes a waiting task through a scheduled callback', async () => {
    const log: string[] = [];
    const fut = loop.createFuture<string>();
    function* waiter(): Coroutine<void> {
      log.push('w-start');
      const value = yield* fut;
      log.push(`w-resumed:${value}`);
    }
    const task = loop.createTask(waiter());
    log.push('created');
    loop.callSoon(() => log.push('cb1'));
    await runOnce(loop);
    expect(log).toEqual(['created', 'w-start', 'cb1']);
    fut.setResult('x');
    log.push('after set');
    loop.callSoon(() => log.push('cb2'));
    await runOnce(loop);
    expect(log).toEqual(['created', 'w-start', 'cb1', 'after set', 'w-resumed:x', 'cb2']);
    expect(task.done()).toBe(true);
  });

  it("runs a task's own done callbacks one iteration after it completes", async () => {
    const log: string[] = [];
    function* quick(): Coroutine<void> {
      log.push('q');
    }
    const task = loop.createTask(quick());
    task.addDoneCallback(() => log.push('t-done-cb'));
    loop.callSoon(() => log.push('after-create'));
    await runOnce(loop);
    expect(log).toEqual(['q', 'after-create']);
    expect(task.done()).toBe(true);
    await runOnce(loop);
    expect(log).toEqual(['q', 'after-create', 't-done-cb']);
  });

  it('wakes every task awaiting the same future, in the order they started waiting', async () => {
    const log: string[] = [];
    const fut = loop.createFuture<number>();
    function* waiter(name: string): Coroutine<void> {
      const value = yield* fut;
      log.push(`${name}:${value}`);
    }
    loop.createTask(waiter('a'));
    loop.createTask(waiter('b'));
    loop.createTask(waiter('c'));
    await runOnce(loop);
    expect(String(fut)).toMatch(/^<Future pending cb=\[[^,]+, <1 more>, [^,]+\]>$/);
    fut.setResult(3);
    await runOnce(loop);
    expect(log).toEqual(['a:3', 'b:3', 'c:3']);
  });

  it('registers exactly one done callback on the future it awaits', async () => {
    const fut = loop.createFuture();
    function* waiter(): Coroutine<void> {
      yield* fut;
    }
    loop.createTask(waiter());
    await runOnce(loop);
    expect(String(fut)).toMatch(/^<Future pending cb=\[[^,]+\]>$/);
  });
});

describe('Iteration snapshot and stop() around futures and tasks (§23 item 2)', () => {
  it('returns from runUntilComplete of a done future after the iteration that ran its callback', async () => {
    const log: string[] = [];
    const fut = loop.createFuture<number>();
    fut.setResult(5);
    loop.callSoon(() => log.push('r1'));
    loop.callSoon(() => loop.callSoon(() => log.push('r2')));
    await expect(loop.runUntilComplete(fut)).resolves.toBe(5);
    expect(log).toEqual(['r1']);
    await runOnce(loop);
    expect(log).toEqual(['r1', 'r2']);
  });

  it('finishes the current iteration after a task calls stop(), and no more', async () => {
    const log: string[] = [];
    function* stopper(): Coroutine<void> {
      log.push('task');
      getRunningLoop().stop();
      yield;
      log.push('task again');
    }
    loop.createTask(stopper());
    loop.callSoon(() => {
      log.push('a');
      loop.callSoon(() => log.push('c'));
    });
    loop.callSoon(() => log.push('b'));
    await loop.runForever();
    expect(log).toEqual(['task', 'a', 'b']);
    await runOnce(loop);
    expect(log).toEqual(['task', 'a', 'b', 'task again', 'c']);
  });

  it('runs exactly one iteration, one task step, when stopped before runForever', async () => {
    const log: string[] = [];
    function* stepper(): Coroutine<void> {
      for (let step = 1; step <= 3; step++) {
        log.push(`step ${step}`);
        yield;
      }
    }
    loop.createTask(stepper());
    loop.stop();
    await loop.runForever();
    expect(log).toEqual(['step 1']);
    loop.stop();
    await loop.runForever();
    expect(log).toEqual(['step 1', 'step 2']);
  });
});

describe('Task.cancel before the first step (TASK-03)', () => {
  it('never runs the body and ends cancelled with the message', async () => {
    const log: string[] = [];
    function* body(): Coroutine<void> {
      log.push('body ran');
      yield* sleep(1);
    }
    const task = loop.createTask(body());
    expect(task.cancel('my message')).toBe(true);
    expect(task.cancelling()).toBe(1);
    expect(task.cancelled()).toBe(false);
    expect(task.done()).toBe(false);
    await runOnce(loop);
    expect(log).toEqual([]);
    expect(task.cancelled()).toBe(true);
    const error = thrownBy(() => task.exception());
    expect(error).toBeInstanceOf(CancelledError);
    expect((error as Error).message).toBe('my message');
    expect((error as Error).cause).toBeUndefined();
  });
});

describe('Task.cancel of a sleeping task (TASK-04)', () => {
  it('ends the task cancelled; a later cancel() returns false', async () => {
    function* body(): Coroutine<number> {
      yield* sleep(10);
      return 12;
    }
    const task = loop.createTask(body());
    loop.callSoon(() => task.cancel());
    const error = await rejection(loop.runUntilComplete(task));
    expect(error).toBeInstanceOf(CancelledError);
    expect(task.done()).toBe(true);
    expect(task.cancelled()).toBe(true);
    expect(task.cancel()).toBe(false);
  });

  it('lets a parent catch the cancellation of the child it awaits', async () => {
    let child: Task<void> | null = null;
    function* sleeper(): Coroutine<void> {
      yield* sleep(5000);
    }
    function* parent(): Coroutine<string> {
      child = createTask(sleeper());
      const task = child;
      getRunningLoop().callLater(0.1, () => task.cancel());
      try {
        yield* task;
        return 'not cancelled';
      } catch (error) {
        return error instanceof CancelledError ? `cancelled at ${getRunningLoop().time()}` : 'other error';
      }
    }
    await expect(loop.runUntilComplete(parent())).resolves.toBe('cancelled at 0.1');
    expect((child as Task<void> | null)?.cancelled()).toBe(true);
  });

  it("cancels the sleep's TimerHandle, so the loop never waits for it", async () => {
    function* body(): Coroutine<void> {
      yield* sleep(5000);
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    const sleepTimers = [...loop.timers];
    expect(sleepTimers).toHaveLength(1);
    expect(sleepTimers[0]?.when()).toBe(5000);
    expect(sleepTimers[0]?.cancelled()).toBe(false);
    task.cancel();
    await rejection(loop.runUntilComplete(task));
    expect(sleepTimers[0]?.cancelled()).toBe(true);
    expect(loop.time()).toBe(0);
    expect(loop.jumps).toBe(0);
  });
});

describe('Task cancel message (TASK-06)', () => {
  const cases: Array<{ label: string; args: [] | [string | undefined]; expected: string }> = [
    { label: 'cancel()', args: [], expected: '' },
    { label: 'cancel(undefined)', args: [undefined], expected: '' },
    { label: "cancel('my message')", args: ['my message'], expected: 'my message' },
  ];
  for (const { label, args, expected } of cases) {
    it(`delivers ${label} through result() and exception() as CancelledError('${expected}')`, async () => {
      for (const read of ['result', 'exception'] as const) {
        function* inner(): Coroutine<void> {
          yield* sleep(10);
        }
        const task = loop.createTask(inner());
        function* outer(): Coroutine<unknown> {
          const finished = getRunningLoop().createFuture<void>();
          task.addDoneCallback(() => finished.setResult(undefined));
          yield;
          task.cancel(...args);
          yield* finished;
          return read === 'result' ? task.result() : task.exception();
        }
        const error = await rejection(loop.runUntilComplete(outer()));
        expect(error).toBeInstanceOf(CancelledError);
        expect((error as Error).message).toBe(expected);
        expect((error as Error).cause).toBeUndefined();
      }
    });
  }

  it('chains the CancelledError as the cause of an error raised while handling it', async () => {
    function* inner(): Coroutine<void> {
      yield* sleep(10);
    }
    function* outer(): Coroutine<void> {
      const task = createTask(inner());
      getRunningLoop().callSoon(() => task.cancel('msg'));
      try {
        yield* task;
      } catch (error) {
        throw new RangeError('cancelled', { cause: error });
      }
    }
    const error = await rejection(loop.runUntilComplete(outer()));
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toBe('cancelled');
    const cause = (error as Error).cause;
    expect(cause).toBeInstanceOf(CancelledError);
    expect((cause as Error).message).toBe('msg');
    expect((cause as Error).cause).toBeUndefined();
  });
});

describe('Task cancellation and the awaited future (TASK-07a)', () => {
  it('cancels the awaited future at once and drops it once the task is cancelled', async () => {
    const fut = loop.createFuture();
    function* body(): Coroutine<void> {
      yield* fut;
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    expect(task._futWaiter).toBe(fut);
    expect(task.cancel()).toBe(true);
    expect(fut.cancelled()).toBe(true);
    await runOnce(loop);
    expect(task.cancelled()).toBe(true);
    expect(task._futWaiter).toBeNull();
  });

  it('throws CancelledError into the coroutine when the awaited future is cancelled', async () => {
    const log: string[] = [];
    const fut = loop.createFuture();
    function* body(): Coroutine<void> {
      try {
        yield* fut;
      } catch (error) {
        log.push(`caught ${(error as Error).name}`);
        throw error;
      }
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    fut.cancel();
    await runOnce(loop);
    expect(log).toEqual(['caught CancelledError']);
    expect(task.cancelled()).toBe(true);
  });

  it('ends cancelled when both the future and the task are cancelled', async () => {
    const fut = loop.createFuture();
    function* body(): Coroutine<void> {
      yield* fut;
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    expect(fut.cancel()).toBe(true);
    expect(task.cancel()).toBe(true);
    await runOnce(loop);
    expect(fut.cancelled()).toBe(true);
    expect(task.cancelled()).toBe(true);
    expect(task.cancelling()).toBe(1);
  });

  it('lets the CancelledError pass through nested coroutines that catch and handle it', async () => {
    let proof = 0;
    const waiter = loop.createFuture();
    function* inner(): Coroutine<void> {
      try {
        yield* waiter;
      } catch (error) {
        if (error instanceof CancelledError) proof += 1;
        throw error;
      }
    }
    function* outer(): Coroutine<string> {
      try {
        yield* inner();
      } catch (error) {
        if (error instanceof CancelledError) proof += 100;
      }
      return 'survived';
    }
    const task = loop.createTask(outer());
    await runOnce(loop);
    expect(task.cancel()).toBe(true);
    await expect(loop.runUntilComplete(task)).resolves.toBe('survived');
    expect(proof).toBe(101);
    expect(task.cancelled()).toBe(false);
    expect(waiter.cancelled()).toBe(true);
  });
});

describe('Task catching or ignoring cancellation (TASK-07b)', () => {
  it('returns a value after catching the cancellation; not cancelled, cancelling() stays 1', async () => {
    const fut1 = loop.createFuture<number>();
    const fut2 = loop.createFuture<number>();
    function* body(): Coroutine<number> {
      yield* fut1;
      try {
        yield* fut2;
      } catch (error) {
        if (error instanceof CancelledError) return 42;
        throw error;
      }
      return 0;
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    fut1.setResult(1);
    await runOnce(loop);
    expect(task._futWaiter).toBe(fut2);
    expect(task.cancel()).toBe(true);
    expect(fut2.cancelled()).toBe(true);
    await expect(loop.runUntilComplete(task)).resolves.toBe(42);
    expect(task.cancelled()).toBe(false);
    expect(task.cancelling()).toBe(1);
  });

  it('goes on to await another future after ignoring the cancellation', async () => {
    const fut1 = loop.createFuture<number>();
    const fut2 = loop.createFuture<number>();
    const fut3 = loop.createFuture<number>();
    function* body(): Coroutine<number> {
      yield* fut1;
      try {
        yield* fut2;
      } catch (error) {
        if (!(error instanceof CancelledError)) throw error;
      }
      return yield* fut3;
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    fut1.setResult(1);
    await runOnce(loop);
    expect(task.cancel()).toBe(true);
    await runOnce(loop);
    expect(task._futWaiter).toBe(fut3);
    expect(task.done()).toBe(false);
    fut3.setResult(42);
    await expect(loop.runUntilComplete(task)).resolves.toBe(42);
    expect(fut3.cancelled()).toBe(false);
    expect(task.cancelled()).toBe(false);
  });
});

describe('Task.cancel bookkeeping (§23 item 3)', () => {
  it('keeps the first message when a second cancel() arrives while the first is in flight', async () => {
    const seen: string[] = [];
    const fut = loop.createFuture();
    function* body(): Coroutine<void> {
      try {
        yield* fut;
      } catch (error) {
        seen.push((error as Error).message);
        throw error;
      }
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    expect(task.cancel('first')).toBe(true);
    expect(task.cancel('second')).toBe(true);
    expect(task.cancelling()).toBe(2);
    const error = await rejection(loop.runUntilComplete(task));
    expect(seen).toEqual(['first']);
    expect(error).toBeInstanceOf(CancelledError);
    expect((error as Error).message).toBe('first');
    expect(task.cancelled()).toBe(true);
  });

  it('delivers a cancel made after the awaited future completed at the next resumption', async () => {
    const log: string[] = [];
    const fut = loop.createFuture<number>();
    function* body(): Coroutine<string> {
      try {
        const value = yield* fut;
        log.push(`resumed with ${value}`);
      } catch (error) {
        log.push(`resumed with ${(error as Error).name}`);
      }
      return 'finished';
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    fut.setResult(1);
    expect(task.cancel()).toBe(true);
    expect(task.cancelling()).toBe(1);
    expect(fut.cancelled()).toBe(false);
    await runOnce(loop);
    expect(log).toEqual(['resumed with CancelledError']);
    expect(task.result()).toBe('finished');
  });

  it('returns true for every request on a pending task and counts each', async () => {
    function* body(): Coroutine<void> {
      yield* sleep(10);
    }
    const task = loop.createTask(body());
    expect([task.cancel(), task.cancel(), task.cancel()]).toEqual([true, true, true]);
    expect(task.cancelling()).toBe(3);
    await runOnce(loop);
    expect(task.cancelled()).toBe(true);
    expect(task.cancel()).toBe(false);
    expect(task.cancelling()).toBe(3);
  });
});

describe('Task.uncancel (TASK-09a)', () => {
  it('lets a task that swallowed a cancellation be cancelled again later', async () => {
    function* body(): Coroutine<void> {
      try {
        yield* sleep(10);
      } catch (error) {
        if (!(error instanceof CancelledError)) throw error;
        (currentTask() as Task<unknown>).uncancel();
        yield* sleep(10);
      }
    }
    const task = loop.createTask(body(), { name: 'U' });
    await runOnce(loop);
    task.cancel();
    expect(task.cancelling()).toBe(1);
    expect(shown(task)).toMatch(/^<Task cancelling name='U' /);
    expect(task.cancelled()).toBe(false);
    await runOnce(loop);
    expect(task.cancelling()).toBe(0);
    expect(shown(task)).toMatch(/^<Task pending name='U' /);
    expect(task.done()).toBe(false);
    task.cancel();
    await rejection(loop.runUntilComplete(task));
    expect(task.cancelled()).toBe(true);
  });

  it('returns the new count and never goes below 0, without affecting a finished task', async () => {
    function* body(): Coroutine<void> {
      yield* sleep(10);
    }
    const task = loop.createTask(body());
    task.cancel();
    expect(task.cancelling()).toBe(1);
    expect(task.uncancel()).toBe(0);
    expect(task.uncancel()).toBe(0);
    expect(task.cancelling()).toBe(0);
    const other = loop.createTask(body());
    other.cancel();
    await runOnce(loop);
    expect(other.cancelled()).toBe(true);
    expect(other.uncancel()).toBe(0);
    expect(other.cancelled()).toBe(true);
    expect(other.done()).toBe(true);
  });

  it('withdraws a cancellation not yet delivered when the count drops to 0', async () => {
    const log: string[] = [];
    function* body(): Coroutine<string> {
      log.push('body ran');
      yield;
      return 'done';
    }
    const task = loop.createTask(body());
    task.cancel();
    expect(task.uncancel()).toBe(0);
    await expect(loop.runUntilComplete(task)).resolves.toBe('done');
    expect(log).toEqual(['body ran']);
    expect(task.cancelled()).toBe(false);
  });
});

describe('Task structured cancellation (TASK-09b)', () => {
  interface Scope {
    timedOut: boolean;
  }

  /** A timeout built on cancel/uncancel, as asyncio's timeouts are. */
  function* withTimeout<T>(seconds: number, scope: Scope, body: Coroutine<T>): Coroutine<T> {
    const task = currentTask() as Task<unknown>;
    const handle = getRunningLoop().callLater(seconds, () => {
      scope.timedOut = true;
      task.cancel();
    });
    try {
      return yield* body;
    } catch (error) {
      if (scope.timedOut && task.uncancel() === 0 && error instanceof CancelledError) throw new TimeoutError();
      throw error;
    } finally {
      handle.cancel();
    }
  }

  function* main(blockSeconds: number, timeoutSeconds: number): Coroutine<Record<string, unknown>> {
    const scope: Scope = { timedOut: false };
    let blockFinished = false;
    let timeoutCaught = false;
    function* block(): Coroutine<void> {
      yield* sleep(blockSeconds);
      blockFinished = true;
    }
    try {
      yield* withTimeout(timeoutSeconds, scope, block());
    } catch (error) {
      if (!(error instanceof TimeoutError)) throw error;
      timeoutCaught = true;
    }
    yield* sleep(0);
    return {
      timedOut: scope.timedOut,
      blockFinished,
      timeoutCaught,
      reachedAfterBlock: true,
      cancelling: (currentTask() as Task<unknown>).cancelling(),
    };
  }

  it('turns its own cancellation into a TimeoutError and leaves cancelling() at 0', async () => {
    await expect(loop.runUntilComplete(main(10, 0.1))).resolves.toEqual({
      timedOut: true,
      blockFinished: false,
      timeoutCaught: true,
      reachedAfterBlock: true,
      cancelling: 0,
    });
    expect(loop.time()).toBe(0.1);
  });

  it('lets a block that finishes in time complete, with the timer cancelled', async () => {
    await expect(loop.runUntilComplete(main(0, 10))).resolves.toEqual({
      timedOut: false,
      blockFinished: true,
      timeoutCaught: false,
      reachedAfterBlock: true,
      cancelling: 0,
    });
    expect(loop.time()).toBe(0);
  });
});

describe('Task illegal awaits (TASK-10)', () => {
  it('throws "Task cannot await on itself" into the coroutine, where it can be caught', async () => {
    let self: Task<unknown> | null = null;
    function* body(): Coroutine<unknown> {
      try {
        yield* self as Task<unknown>;
        return 'no error';
      } catch (error) {
        return error;
      }
    }
    self = loop.createTask(body(), { name: 'selfish' });
    await runBriefly(loop);
    const error = self.result();
    expect(error).toBeInstanceOf(RuntimeError);
    expect((error as Error).message).toMatch(/^Task cannot await on itself: <Task pending name='selfish' coro=<.*>$/);
  });

  it('fails the task with that RuntimeError when it is not caught', async () => {
    let self: Task<unknown> | null = null;
    function* body(): Coroutine<unknown> {
      return yield* self as Task<unknown>;
    }
    self = loop.createTask(body(), { name: 'selfish' });
    const error = await rejection(loop.runUntilComplete(self));
    expect(error).toBeInstanceOf(RuntimeError);
    expect((error as Error).message).toMatch(/^Task cannot await on itself: <Task pending name='selfish' /);
  });

  it('throws RuntimeError for a future of another loop into the coroutine, where it can be caught', async () => {
    const other = newEventLoop();
    try {
      const foreign = other.createFuture();
      function* body(): Coroutine<unknown> {
        try {
          yield* foreign;
          return 'no error';
        } catch (error) {
          return error;
        }
      }
      const task = loop.createTask(body(), { name: 'x' });
      await runBriefly(loop);
      const error = task.result();
      expect(error).toBeInstanceOf(RuntimeError);
      expect((error as Error).message).toMatch(
        /^Task <Task pending name='x' .*> got Future <Future pending.*> attached to a different loop$/,
      );
    } finally {
      other.close();
    }
  });

  it('fails the task with the different-loop RuntimeError when it is not caught', async () => {
    const other = newEventLoop();
    try {
      const foreign = other.createFuture();
      function* body(): Coroutine<unknown> {
        return yield* foreign;
      }
      const error = await rejection(loop.runUntilComplete(body()));
      expect(error).toBeInstanceOf(RuntimeError);
      expect((error as Error).message).toMatch(/^Task .* got Future .* attached to a different loop$/);
    } finally {
      other.close();
    }
  });
});

describe('Task BaseException while handling cancellation (TASK-12)', () => {
  for (const [name, make] of [
    ['SystemExit', () => new SystemExit()],
    ['KeyboardInterrupt', () => new KeyboardInterrupt()],
  ] as const) {
    it(`lets a ${name} raised in the cancellation handler escape the loop`, async () => {
      let raised: Error | null = null;
      function* body(): Coroutine<void> {
        try {
          yield* sleep(10);
        } catch (error) {
          if (error instanceof CancelledError) {
            raised = make();
            throw raised;
          }
          throw error;
        }
      }
      const handled: ExceptionContext[] = [];
      loop.setExceptionHandler((_loop, context) => handled.push(context));
      const task = loop.createTask(body());
      await runOnce(loop);
      task.cancel();
      expect(task.done()).toBe(false);
      const error = await rejection(runBriefly(loop));
      expect(raised).not.toBeNull();
      expect(error).toBe(raised);
      expect(task.done()).toBe(true);
      expect(task.cancelled()).toBe(false);
      expect(task.exception()).toBe(raised);
      expect(handled).toEqual([]);
    });
  }
});

describe('currentTask and allTasks (TASK-13)', () => {
  it('is the running task inside a task, across resumptions', async () => {
    let task: Task<void> | null = null;
    const seen: boolean[] = [];
    function* body(): Coroutine<void> {
      seen.push(currentTask() === task, currentTask(loop) === task);
      yield;
      seen.push(currentTask() === task);
      yield* sleep(1);
      seen.push(currentTask() === task);
    }
    task = loop.createTask(body());
    await loop.runUntilComplete(task);
    expect(seen).toEqual([true, true, true, true]);
  });

  it('is null outside any task: between steps, and for a loop that is not running', async () => {
    let between: unknown = 'unset';
    loop.callSoon(() => {
      between = currentTask();
    });
    await runOnce(loop);
    expect(between).toBeNull();
    expect(currentTask(loop)).toBeNull();
    expectThrow(() => currentTask(), RuntimeError, 'no running event loop');
  });

  it('follows interleaving tasks: each sees itself', async () => {
    const log: string[] = [];
    const fut1 = loop.createFuture<boolean>();
    const fut2 = loop.createFuture<boolean>();
    const name = (): string => (currentTask() as Task<unknown>).getName();
    function* coro1(): Coroutine<void> {
      log.push(name());
      yield* fut1;
      log.push(name());
      fut2.setResult(true);
    }
    function* coro2(): Coroutine<void> {
      log.push(name());
      fut1.setResult(true);
      yield* fut2;
      log.push(name());
    }
    const one = loop.createTask(coro1(), { name: 'one' });
    const two = loop.createTask(coro2(), { name: 'two' });
    await loop.runUntilComplete(two);
    expect(one.done()).toBe(true);
    expect(log).toEqual(['one', 'two', 'one', 'two']);
  });

  it('lists the pending tasks of a loop, never the finished ones', async () => {
    const fut = loop.createFuture();
    function* quick(): Coroutine<number> {
      return 1;
    }
    function* waiting(): Coroutine<void> {
      yield* fut;
    }
    const q = loop.createTask(quick());
    const w = loop.createTask(waiting());
    const before = allTasks(loop);
    expect(before.size).toBe(2);
    expect(before.has(q)).toBe(true);
    expect(before.has(w)).toBe(true);
    await runOnce(loop);
    expect(q.done()).toBe(true);
    const after = allTasks(loop);
    expect(after.size).toBe(1);
    expect(after.has(w)).toBe(true);
    expectThrow(() => allTasks(), RuntimeError, 'no running event loop');
  });

  it('includes the current task when called inside it', async () => {
    function* body(): Coroutine<boolean> {
      const all = allTasks();
      return all.size === 1 && all.has(currentTask() as Task<unknown>);
    }
    await expect(loop.runUntilComplete(body())).resolves.toBe(true);
  });

  it('refuses to enter a task while another is current, or to leave one that is not', async () => {
    function* idle(): Coroutine<void> {}
    const other = loop.createTask(idle());
    const outcomes: string[] = [];
    function* body(): Coroutine<void> {
      const me = currentTask() as Task<unknown>;
      for (const attempt of [() => _enterTask(loop, other as Task<unknown>), () => _leaveTask(loop, other as Task<unknown>)]) {
        const error = thrownBy(attempt);
        outcomes.push(`${(error as Error).name}, current is me: ${currentTask() === me}`);
      }
    }
    await loop.runUntilComplete(body());
    expect(outcomes).toEqual(['RuntimeError, current is me: true', 'RuntimeError, current is me: true']);
  });
});

describe('ensureFuture (TASK-15)', () => {
  it('returns a Future or Task unchanged', () => {
    function* coro(): Coroutine<void> {}
    const fut = loop.createFuture();
    const task = loop.createTask(coro());
    expect(ensureFuture(fut)).toBe(fut);
    expect(ensureFuture(fut, { loop })).toBe(fut);
    expect(ensureFuture(task)).toBe(task);
  });

  it('refuses a future of another loop than the one given', () => {
    const other = newEventLoop();
    try {
      const fut = loop.createFuture();
      expectThrow(
        () => ensureFuture(fut, { loop: other }),
        RangeError,
        'The future belongs to a different loop than the one specified as the loop argument',
      );
    } finally {
      other.close();
    }
  });

  it('wraps a coroutine in a Task of the running loop', async () => {
    function* child(): Coroutine<number> {
      yield;
      return 7;
    }
    function* main(): Coroutine<string> {
      const task = ensureFuture(child());
      const value = yield* task;
      return `${task instanceof Task} ${task.getLoop() === loop} ${value}`;
    }
    await expect(loop.runUntilComplete(main())).resolves.toBe('true true 7');
  });

  it('wraps a coroutine in a Task of the current loop when none runs, else of the given loop', () => {
    function* coro(): Coroutine<void> {}
    setEventLoop(loop);
    const task = ensureFuture(coro());
    expect(task).toBeInstanceOf(Task);
    expect(task.getLoop()).toBe(loop);
    const other = newEventLoop();
    try {
      expect(ensureFuture(coro(), { loop: other }).getLoop()).toBe(other);
    } finally {
      other.close();
    }
  });

  it('refuses a coroutine without any loop, and closes it', () => {
    setEventLoop(null);
    function* coro(): Coroutine<number> {
      return 1;
    }
    const gen = coro();
    expectThrow(() => ensureFuture(gen), RuntimeError, "There is no current event loop in thread 'MainThread'.");
    expect(gen.next()).toEqual({ value: undefined, done: true });
  });

  it('wraps a Promise in a Future of the loop that settles with it', async () => {
    const fut = ensureFuture(Promise.resolve('ok'), { loop });
    expect(isFuture(fut)).toBe(true);
    expect(fut.getLoop()).toBe(loop);
    await expect(loop.runUntilComplete(fut)).resolves.toBe('ok');
  });

  it('fails the Future with the error a Promise rejects with', async () => {
    const error = new RangeError('nope');
    const fut = ensureFuture(Promise.reject(error), { loop });
    expect(await rejection(loop.runUntilComplete(fut))).toBe(error);
    expect(fut.exception()).toBe(error);
  });

  it('wraps any thenable', async () => {
    const thenable: PromiseLike<string> = {
      then: (onFulfilled) => Promise.resolve('ok').then(onFulfilled),
    };
    const fut = ensureFuture(thenable, { loop });
    await expect(loop.runUntilComplete(fut)).resolves.toBe('ok');
  });

  it("throws TypeError for 'ok'", () => {
    expectThrow(
      () => ensureFuture('ok' as never),
      TypeError,
      'An asyncio.Future, a coroutine or an awaitable is required',
    );
  });
});

describe('Task yield protocol (TASK-16)', () => {
  it('gives up exactly one iteration on a bare yield', async () => {
    const log: string[] = [];
    function* body(): Coroutine<void> {
      log.push('step 1');
      yield;
      log.push('step 2');
    }
    loop.createTask(body());
    loop.callSoon(() => {
      log.push('cb 1');
      loop.callSoon(() => log.push('cb 2'));
    });
    await runOnce(loop);
    expect(log).toEqual(['step 1', 'cb 1']);
    await runOnce(loop);
    expect(log).toEqual(['step 1', 'cb 1', 'step 2', 'cb 2']);
  });

  it('throws each invalid yield back into the coroutine as a RuntimeError, and the task goes on', async () => {
    const messages: string[] = [];
    function* generator(): Coroutine<void> {}
    function* body(): Coroutine<string> {
      const attempts: unknown[] = [getRunningLoop().createFuture(), generator(), 42];
      for (const value of attempts) {
        try {
          yield value;
          messages.push('no error');
        } catch (error) {
          messages.push(error instanceof RuntimeError ? error.message : `other: ${String(error)}`);
        }
      }
      return 'went on';
    }
    const task = loop.createTask(body(), { name: 'bad' });
    await expect(loop.runUntilComplete(task)).resolves.toBe('went on');
    expect(messages).toHaveLength(3);
    expect(messages[0]).toBe(
      "yield was used instead of yield* in task <Task pending name='bad' coro=<body()> cb=[runUntilCompleteCallback()]>: use yield* (not yield) to await <Future pending>",
    );
    expect(messages[1]).toBe(
      "yield was used instead of yield* for a generator in task <Task pending name='bad' coro=<body()> cb=[runUntilCompleteCallback()]>: use yield* (not yield) to await generator()",
    );
    expect(messages[2]).toBe('Task got bad yield: 42');
  });
});

describe('Task repr', () => {
  it("names the coroutine's function, as asyncio's coro=<...> does", () => {
    function* fetchUser(id: number): Coroutine<string> {
      return `user-${id}`;
    }
    const method = { *load(): Coroutine<void> {} };
    expect(String(loop.createTask(fetchUser(1), { name: 'fetch-1' }))).toBe("<Task pending name='fetch-1' coro=<fetchUser()>>");
    expect(String(loop.createTask(method.load(), { name: 'm' }))).toBe("<Task pending name='m' coro=<load()>>");
  });

  it('in debug mode, says where a pending coroutine is suspended, as asyncio does', async () => {
    loop.setDebug(true);
    const future = loop.createFuture<number>();
    const task = loop.createTask(waitOn(future), { name: 'suspended' });
    await runOnce(loop);
    const path = fileURLToPath(new URL('./fixtures/suspended.mjs', import.meta.url));
    // Line 3 of the file; vitest runs it under one wrapper line, which V8 counts.
    const shown = String(task);
    expect([3, 4].map((line) => `<Task pending name='suspended' coro=<waitOn() running at ${path}:${line}> wait_for=<Future pending cb=[Task.wakeup()]>>`)).toContain(shown);
    future.setResult(1);
    await runOnce(loop);
    await runOnce(loop);
    expect(String(task)).toBe("<Task finished name='suspended' coro=<waitOn()> result=1>");
  });

  it('shows pending, callbacks, wait_for, cancelling and cancelled', async () => {
    const fut = loop.createFuture();
    function* body(): Coroutine<void> {
      yield* fut;
    }
    function done(): void {}
    const task = loop.createTask(body(), { name: 'T' });
    expect(shown(task)).toBe("<Task pending name='T' coro=<…>>");
    task.addDoneCallback(done);
    expect(shown(task)).toBe("<Task pending name='T' coro=<…> cb=[done()]>");
    await runOnce(loop);
    expect(shown(task)).toMatch(/^<Task pending name='T' coro=<…> wait_for=<Future pending cb=\[[^,]+\]> cb=\[done\(\)\]>$/);
    task.cancel();
    expect(shown(task)).toBe("<Task cancelling name='T' coro=<…> wait_for=<Future cancelled> cb=[done()]>");
    await runOnce(loop);
    expect(shown(task)).toBe("<Task cancelled name='T' coro=<…>>");
  });

  it('shows the result or the error of a finished task', async () => {
    function* ok(): Coroutine<string> {
      return 'abc';
    }
    function* fails(): Coroutine<string> {
      throw new RuntimeError('x');
    }
    const good = loop.createTask(ok(), { name: 'good' });
    const bad = loop.createTask(fails(), { name: 'bad' });
    await runOnce(loop);
    bad.exception();
    expect(shown(good)).toBe("<Task finished name='good' coro=<…> result='abc'>");
    expect(shown(bad)).toBe("<Task finished name='bad' coro=<…> exception=RuntimeError('x')>");
  });
});

describe('sleep (SLP-01, SLP-02)', () => {
  it('lets a callback queued before sleep(0) run before resumption, and returns the result', async () => {
    let counter = 0;
    const observed: number[] = [];
    function inc(n: number): void {
      counter += n;
    }
    function* main(): Coroutine<void> {
      getRunningLoop().callSoon(inc, 1);
      observed.push(counter);
      const n = yield* sleep(0, 10);
      observed.push(counter);
      inc(n);
    }
    await loop.runUntilComplete(main());
    expect(observed).toEqual([0, 1]);
    expect(counter).toBe(11);
  });

  for (const delay of [0, -5]) {
    it(`gives up exactly one iteration for sleep(${delay}) without a timer`, async () => {
      const log: string[] = [];
      function* body(): Coroutine<void> {
        log.push('before');
        yield* sleep(delay);
        log.push('after');
      }
      loop.createTask(body());
      loop.callSoon(() => {
        log.push('cb 1');
        loop.callSoon(() => log.push('cb 2'));
      });
      await runOnce(loop);
      expect(log).toEqual(['before', 'cb 1']);
      await runOnce(loop);
      expect(log).toEqual(['before', 'cb 1', 'after', 'cb 2']);
      expect(loop.timers.size).toBe(0);
      expect(loop.time()).toBe(0);
    });
  }

  it('resumes at exact virtual times and returns the result', async () => {
    const log: unknown[] = [];
    function* main(): Coroutine<void> {
      yield* sleep(0.05);
      log.push(loop.time());
      const r = yield* sleep(0.05, 'yeah');
      log.push(r, loop.time());
      yield* sleep(3600);
      log.push(loop.time());
    }
    await loop.runUntilComplete(main());
    expect(log).toEqual([0.05, 'yeah', 0.1, 3600.1]);
  });

  it("throws RangeError('Invalid delay: NaN (not a number)') into the coroutine", async () => {
    function* main(): Coroutine<unknown> {
      try {
        yield* sleep(NaN);
        return 'slept';
      } catch (error) {
        return error;
      }
    }
    const error = await loop.runUntilComplete(main());
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toBe('Invalid delay: NaN (not a number)');
  });

  it('cancels its TimerHandle when the sleeping task is cancelled, so the callback never runs', async () => {
    function* body(): Coroutine<string> {
      return yield* sleep(10, 'woke');
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    const [timer] = [...loop.timers];
    expect(timer?.when()).toBe(10);
    loop.callLater(1, () => task.cancel());
    function* later(): Coroutine<void> {
      yield* sleep(20);
    }
    await loop.runUntilComplete(later());
    expect(timer?.cancelled()).toBe(true);
    expect(task.cancelled()).toBe(true);
    // The clock jumped to the cancel at 1 and the sleep's end at 20, never to the dropped 10.
    expect(loop.time()).toBe(20);
    expect(loop.jumps).toBe(2);
  });
});

describe('Task "exception was never retrieved" (EXC-04)', () => {
  /** Run a task whose coroutine throws `error`, let `use` look at it, keep only a weak reference. */
  async function failedTask(name: string, error: Error, use: (task: Task<unknown>) => unknown): Promise<WeakRef<Task<unknown>>> {
    function* body(): Coroutine<void> {
      throw error;
    }
    const task = loop.createTask(body(), { name });
    await runOnce(loop);
    use(task);
    return new WeakRef(task);
  }

  it('reports the error of a failed task nobody looked at once it is collected', async () => {
    const reports: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => reports.push(context));
    const error = new RuntimeError('boom');
    const ref = await failedTask('doomed', error, () => undefined);
    await collectUntil(() => ref.deref() === undefined && reports.length > 0);
    expect(reports).toHaveLength(1);
    expect(reports[0]?.message).toBe('Task exception was never retrieved');
    expect(reports[0]?.exception).toBe(error);
    expect(reports[0]?.futureDescription).toMatch(
      /^<Task finished name='doomed' coro=<[^>]*> exception=RuntimeError\('boom'\)>$/,
    );
  });

  it('reports nothing for a failed task that was read or cancelled after finishing', async () => {
    const reports: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => reports.push(context));
    const sentinel = new RuntimeError('sentinel');
    const refs = [
      await failedTask('sentinel', sentinel, () => undefined),
      await failedTask('read', new RuntimeError('read'), (task) => task.exception()),
      await failedTask('result', new RuntimeError('result'), (task) => thrownBy(() => task.result())),
      await failedTask('cancelled', new RuntimeError('cancelled'), (task) => expect(task.cancel()).toBe(false)),
    ];
    await collectUntil(() => refs.every((ref) => ref.deref() === undefined) && reports.length > 0);
    await drainFinalizers();
    expect(refs.map((ref) => ref.deref() === undefined)).toEqual([true, true, true, true]);
    expect(reports.map((report) => report.exception)).toEqual([sentinel]);
    expect(reports[0]?.exception).toBe(sentinel);
  });

  it('reports a failed task nobody looked at when its loop closes, once, though it is still referenced', async () => {
    const reports: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => reports.push(context));
    const error = new RuntimeError('closing');
    let kept: Task<unknown> | null = null;
    const ref = await failedTask('kept', error, (task) => (kept = task));
    const read = await failedTask('read', new RuntimeError('read'), (task) => task.exception());
    expect(reports).toEqual([]);
    loop.close();
    expect(reports).toHaveLength(1);
    expect(Object.keys(reports[0]!)).toEqual(['message', 'exception', 'future']);
    expect(reports[0]!.message).toBe('Task exception was never retrieved');
    expect(reports[0]!.exception).toBe(error);
    expect(reports[0]!.future).toBe(kept);
    expect(kept!._logTraceback).toBe(false);
    kept = null;
    await collectUntil(() => ref.deref() === undefined && read.deref() === undefined);
    await drainFinalizers();
    expect(reports).toHaveLength(1);
  });

  it('clears _logTraceback when a failed task is cancelled after finishing', async () => {
    function* body(): Coroutine<void> {
      throw new RuntimeError('boom');
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    expect(task._logTraceback).toBe(true);
    expect(task.cancel()).toBe(false);
    expect(task._logTraceback).toBe(false);
  });
});
