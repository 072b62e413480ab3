import { describe, expect, it } from 'vitest';
import {
  type EventLoop,
  KeyboardInterrupt,
  RuntimeError,
  SystemExit,
  Task,
  type TimerHandle,
  copyContext,
  getRunningLoop,
  logger,
  newEventLoop,
  sleep,
  type Coroutine,
  type ExceptionContext,
  type TaskFactory,
} from '../src/index.js';
import { runFixture } from './helpers/child-process.js';
import { expectError, reasonOf, thrownBy } from './helpers/errors.js';
import { captureErrors, restoreLogger } from './helpers/logger.js';
import { trackLoops, useFreshLoop } from './helpers/loops.js';
import { VirtualLoop, runOnce } from './helpers/virtual-loop.js';

restoreLogger();
/** Every loop a test creates on the side, closed after the test. */
const track = trackLoops();
let loop: VirtualLoop;
useFreshLoop(() => (loop = new VirtualLoop()), { leaveRunning: true });

describe('EventLoop iteration phases', () => {
  it('runs callbacks added during an iteration in the next iteration', async () => {
    const log: string[] = [];
    loop.callSoon(() => {
      log.push('a');
      loop.callSoon(() => log.push('c'));
    });
    await runOnce(loop);
    expect(log).toEqual(['a']);
    await runOnce(loop);
    expect(log).toEqual(['a', 'c']);
  });

  it('appends due timers to the end of the ready queue, in deadline order', async () => {
    const log: string[] = [];
    loop.callAt(-1, () => log.push('timer-1'));
    loop.callSoon(() => log.push('soon-1'));
    loop.callAt(-2, () => log.push('timer-2'));
    loop.callSoon(() => log.push('soon-2'));
    await runOnce(loop);
    expect(log).toEqual(['soon-1', 'soon-2', 'timer-2', 'timer-1']);
  });

  it('leaves a callback scheduled by a due timer for the next iteration', async () => {
    const log: string[] = [];
    loop.callAt(0, () => {
      log.push('timer');
      loop.callSoon(() => log.push('x'));
    });
    await runOnce(loop);
    expect(log).toEqual(['timer']);
    await runOnce(loop);
    expect(log).toEqual(['timer', 'x']);
  });

  it('moves a zero-delay timer scheduled during an iteration behind the callbacks queued with it', async () => {
    const log: string[] = [];
    loop.callSoon(() => {
      loop.callLater(0, () => log.push('timer'));
      loop.callSoon(() => log.push('soon'));
    });
    await runOnce(loop);
    expect(log).toEqual([]);
    await runOnce(loop);
    expect(log).toEqual(['soon', 'timer']);
  });

  it('does not wait for a timer while callbacks are ready', async () => {
    const log: string[] = [];
    loop.callLater(5, () => {
      log.push(`timer@${loop.time()}`);
      loop.stop();
    });
    let count = 0;
    function again(): void {
      log.push(`soon@${loop.time()}`);
      if (++count < 3) loop.callSoon(again);
    }
    loop.callSoon(again);
    await loop.runForever();
    expect(log).toEqual(['soon@0', 'soon@0', 'soon@0', 'timer@5']);
    expect(loop.jumps).toBe(1);
  });

  it('waits for the earliest live timer, skipping a cancelled one at the head', async () => {
    const fired: number[] = [];
    loop.callLater(1, () => fired.push(1)).cancel();
    loop.callLater(3, () => {
      fired.push(loop.time());
      loop.stop();
    });
    await loop.runForever();
    expect(fired).toEqual([3]);
    expect(loop.jumps).toBe(1);
  });

  it('runs a timer due now without moving the clock', async () => {
    loop.advance(7);
    const fired: number[] = [];
    loop.callAt(loop.time(), () => {
      fired.push(loop.time());
      loop.stop();
    });
    await loop.runForever();
    expect(fired).toEqual([7]);
    expect(loop.jumps).toBe(0);
  });
});

describe('EventLoop.callSoon', () => {
  it('runs callbacks FIFO with their arguments, each once', async () => {
    const calls: unknown[][] = [];
    function cb(...args: unknown[]): void {
      calls.push(['cb', ...args]);
    }
    function cb2(): void {
      calls.push(['cb2']);
    }
    loop.callSoon(cb, 'hello', 'world');
    loop.callSoon(cb2);
    loop.callSoon(() => loop.stop());
    await loop.runForever();
    expect(calls).toEqual([['cb', 'hello', 'world'], ['cb2']]);
  });

  it('rejects a non-function callback with TypeError, debug mode or not', () => {
    expectError(thrownBy(() => loop.callSoon(1 as never)), TypeError, 'a callable object was expected by callSoon(), got 1');
    expectError(thrownBy(() => loop.callSoon('abc' as never)), TypeError, "a callable object was expected by callSoon(), got 'abc'");
    loop.setDebug(true);
    expectError(thrownBy(() => loop.callSoon(null as never)), TypeError, 'a callable object was expected by callSoon(), got null');
  });
});

describe('EventLoop.callLater and callAt', () => {
  it('fire timers in deadline order, each at its deadline', async () => {
    const fired: string[] = [];
    loop.callLater(3, () => {
      fired.push(`c@${loop.time()}`);
      loop.stop();
    });
    loop.callLater(1, () => fired.push(`a@${loop.time()}`));
    loop.callAt(2, () => fired.push(`b@${loop.time()}`));
    await loop.runForever();
    expect(fired).toEqual(['a@1', 'b@2', 'c@3']);
  });

  it('fire timers with past deadlines at once, in deadline order', async () => {
    loop.advance(100);
    const fired: string[] = [];
    loop.callAt(50, () => fired.push('at-50'));
    loop.callLater(-5, () => fired.push('at-95'));
    loop.callAt(10, () => fired.push('at-10'));
    loop.callAt(-1e9, () => fired.push('long-ago'));
    await runOnce(loop);
    expect(fired).toEqual(['long-ago', 'at-10', 'at-50', 'at-95']);
    expect(loop.time()).toBe(100);
  });

  it('fire equal deadlines first-in first-out, in the same iteration', async () => {
    const fired: Array<number | string> = [];
    loop.callAt(5, () => fired.push('earlier'));
    for (let i = 0; i < 12; i++) {
      loop.callAt(10, () => {
        fired.push(i);
        // Queued during the iteration that runs all twelve, so it runs after them.
        if (i === 0) loop.callSoon(() => fired.push('next-iteration'));
      });
    }
    loop.callAt(10.5, () => {
      fired.push('later');
      loop.stop();
    });
    await loop.runForever();
    expect(fired).toEqual(['earlier', 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 'next-iteration', 'later']);
  });

  it('order equal deadlines by scheduling, whichever method scheduled them', async () => {
    const fired: string[] = [];
    loop.callAt(10, () => fired.push('a'));
    loop.callAt(5, () => fired.push('x'));
    loop.callLater(10, () => fired.push('b'));
    loop.callAt(10, () => {
      fired.push('c');
      loop.stop();
    });
    await loop.runForever();
    expect(fired).toEqual(['x', 'a', 'b', 'c']);
  });

  it('never run a timer cancelled by an earlier timer', async () => {
    const fired: string[] = [];
    const victim = loop.callLater(2, () => fired.push('victim'));
    loop.callLater(1, () => {
      fired.push('canceller');
      victim.cancel();
    });
    loop.callLater(3, () => {
      fired.push('last');
      loop.stop();
    });
    await loop.runForever();
    expect(fired).toEqual(['canceller', 'last']);
  });

  it('drop cancelled timers lazily, only while they are at the head of the heap', async () => {
    const head = loop.callLater(10, () => undefined);
    const live = loop.callLater(20, () => undefined);
    const inner = loop.callLater(30, () => undefined);
    loop.callLater(40, () => loop.stop());
    head.cancel();
    inner.cancel();
    await runOnce(loop);
    expect(head._scheduled).toBe(false);
    expect(inner._scheduled).toBe(true);
    expect(live._scheduled).toBe(true);
    // Once the live timer fired, the cancelled one behind it reaches the head and goes.
    await loop.runForever();
    expect(live._scheduled).toBe(false);
    expect(inner._scheduled).toBe(false);
  });

  it('purge every cancelled timer at once when more than 100 are scheduled and over half are cancelled', async () => {
    const fired: number[] = [];
    const timers: TimerHandle[] = [];
    for (let i = 0; i < 200; i++) timers.push(loop.callLater(i + 1, () => fired.push(i)));
    // Keep every fourth timer, including the earliest, so nothing is dropped at the head.
    const kept = timers.filter((_, i) => i % 4 === 0);
    const cancelled = timers.filter((_, i) => i % 4 !== 0);
    for (const timer of cancelled) timer.cancel();
    expect(cancelled).toHaveLength(150);
    await runOnce(loop);
    expect(cancelled.filter((timer) => timer._scheduled)).toEqual([]);
    expect(kept.every((timer) => timer._scheduled)).toBe(true);

    loop.callLater(1000, () => loop.stop());
    await loop.runForever();
    expect(fired).toEqual(kept.map((_, k) => 4 * k));
    expect(kept.every((timer) => !timer._scheduled)).toBe(true);
  });

  it('do not purge with exactly 100 scheduled timers, however many are cancelled', async () => {
    const timers: TimerHandle[] = [];
    for (let i = 0; i < 100; i++) timers.push(loop.callLater(i + 1, () => undefined));
    for (const timer of timers.slice(1)) timer.cancel();
    await runOnce(loop);
    expect(timers.slice(1).every((timer) => timer._scheduled)).toBe(true);
  });

  it('do not purge when exactly half of the scheduled timers are cancelled', async () => {
    const timers: TimerHandle[] = [];
    for (let i = 0; i < 200; i++) timers.push(loop.callLater(i + 1, () => undefined));
    const cancelled = timers.filter((_, i) => i % 2 === 1);
    for (const timer of cancelled) timer.cancel();
    await runOnce(loop);
    expect(cancelled.every((timer) => timer._scheduled)).toBe(true);
  });

  it('purge at 101 scheduled timers with 51 cancelled', async () => {
    const timers: TimerHandle[] = [];
    for (let i = 0; i < 101; i++) timers.push(loop.callLater(i + 1, () => undefined));
    const cancelled = timers.slice(50);
    for (const timer of cancelled) timer.cancel();
    expect(cancelled).toHaveLength(51);
    await runOnce(loop);
    expect(cancelled.some((timer) => timer._scheduled)).toBe(false);
    expect(timers.slice(0, 50).every((timer) => timer._scheduled)).toBe(true);
  });

  it('reject a delay or deadline that is not a number, or NaN', () => {
    const cb = (): void => undefined;
    expectError(thrownBy(() => loop.callLater(Number.NaN, cb)), RangeError, 'Invalid delay: NaN (not a number)');
    expectError(thrownBy(() => loop.callLater('1' as never, cb)), TypeError, 'delay must be a number, got string');
    expectError(thrownBy(() => loop.callLater(null as never, cb)), TypeError, 'delay must be a number, got null');
    expectError(thrownBy(() => loop.callAt(Number.NaN, cb)), RangeError, 'Invalid when: NaN (not a number)');
    expectError(thrownBy(() => loop.callAt(undefined as never, cb)), TypeError, 'when must be a number, got undefined');
  });

  it('reject a non-function callback with TypeError naming the method', () => {
    expectError(thrownBy(() => loop.callLater(1, 1 as never)), TypeError, 'a callable object was expected by callLater(), got 1');
    expectError(thrownBy(() => loop.callAt(1, 1 as never)), TypeError, 'a callable object was expected by callAt(), got 1');
  });
});

describe('EventLoop.stop', () => {
  it('finishes the current iteration, then runForever returns; the next run starts with what was queued', async () => {
    const log: string[] = [];
    loop.callSoon(() => {
      log.push('a');
      loop.callSoon(() => log.push('c'));
    });
    loop.callSoon(() => loop.stop());
    loop.callSoon(() => log.push('b'));
    await loop.runForever();
    expect(log).toEqual(['a', 'b']);
    loop.callSoon(() => loop.stop());
    await loop.runForever();
    expect(log).toEqual(['a', 'b', 'c']);
  });

  it('called before runForever makes it run exactly one iteration without waiting', async () => {
    const log: string[] = [];
    loop.callLater(10, () => log.push('timer'));
    loop.stop();
    loop.callSoon(() => {
      log.push('x');
      loop.callSoon(() => log.push('next-iteration'));
    });
    await loop.runForever();
    expect(log).toEqual(['x']);
    expect(loop.time()).toBe(0);
    expect(loop.jumps).toBe(0);
    expect(loop.isRunning()).toBe(false);
  });

  it('called before runForever on an idle loop still lets runForever return', async () => {
    const real = track(newEventLoop());
    real.stop();
    await real.runForever();
    expect(real.isRunning()).toBe(false);
  });

  it('leaves no stale stop request behind an interrupted runUntilComplete', async () => {
    function* interrupted(): Coroutine<void> {
      throw new KeyboardInterrupt();
    }
    expect(await reasonOf(loop.runUntilComplete(interrupted()))).toBeInstanceOf(KeyboardInterrupt);
    const log: string[] = [];
    function func(): void {
      log.push('func');
      loop.stop();
    }
    loop.callSoon(() => {
      log.push('first');
      loop.callSoon(func);
    });
    await loop.runForever();
    expect(log).toEqual(['first', 'func']);
  });
});

describe('EventLoop.runUntilComplete', () => {
  it('wraps a coroutine in a Task and resolves with its result', async () => {
    function* value(v: number): Coroutine<number> {
      yield* sleep(0);
      return v;
    }
    function* outer(): Coroutine<number> {
      const a = yield* value(42);
      const b = yield* value(1000);
      return a + b;
    }
    await expect(loop.runUntilComplete(outer())).resolves.toBe(1042);
  });

  it('returns after the iteration that runs its done callback: r1 runs, r2 waits', async () => {
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

  it('resolves with the result of a Future completed by a timer', async () => {
    const fut = loop.createFuture<string>();
    loop.callLater(2, () => fut.setResult('late'));
    await expect(loop.runUntilComplete(fut)).resolves.toBe('late');
    expect(loop.time()).toBe(2);
  });

  it("rejects with the coroutine's own error", async () => {
    const error = new RangeError('spam');
    function* fails(): Coroutine<void> {
      yield* sleep(1);
      throw error;
    }
    expect(await reasonOf(loop.runUntilComplete(fails()))).toBe(error);
  });

  it('rejects with CancelledError when the future is cancelled', async () => {
    const fut = loop.createFuture<void>();
    loop.callSoon(() => fut.cancel('gone'));
    const error = await reasonOf(loop.runUntilComplete(fut));
    expect((error as Error).name).toBe('CancelledError');
    expect((error as Error).message).toBe('gone');
  });

  it('settles with a Promise that a Node callback resolves', async () => {
    const promise = new Promise<number>((resolve) => setTimeout(() => resolve(7), 1));
    await expect(loop.runUntilComplete(promise)).resolves.toBe(7);
  });

  it("rejects with RuntimeError('Event loop stopped before Future completed.') and leaves the future alone", async () => {
    const fut = loop.createFuture<number>();
    loop.callSoon(() => loop.stop());
    expectError(await reasonOf(loop.runUntilComplete(fut)), RuntimeError, 'Event loop stopped before Future completed.');
    expect(fut.done()).toBe(false);
    // Its stopping done-callback was removed: completing the future later stops nothing.
    loop.callLater(1, () => fut.setResult(1));
    loop.callLater(2, () => loop.stop());
    await loop.runForever();
    expect(loop.time()).toBe(2);
  });

  it('rejects anything that is not awaitable with TypeError', async () => {
    expectError(
      await reasonOf(loop.runUntilComplete('blah' as never)),
      TypeError,
      'An asyncio.Future, a coroutine or an awaitable is required',
    );
  });

  it("rejects another loop's future with RangeError", async () => {
    const other = track(new VirtualLoop());
    expectError(
      await reasonOf(other.runUntilComplete(loop.createFuture())),
      RangeError,
      'The future belongs to a different loop than the one specified as the loop argument',
    );
  });
});

describe('EventLoop and escaping errors (KeyboardInterrupt, SystemExit)', () => {
  it('lets SystemExit out of runUntilComplete, bypassing the exception handler; the next run works', async () => {
    const handled: ExceptionContext[] = [];
    loop.setExceptionHandler((_, context) => handled.push(context));
    const exit = new SystemExit(3);
    loop.callSoon(() => {
      throw exit;
    });
    expect(await reasonOf(loop.runUntilComplete(sleep(0.1)))).toBe(exit);
    expect(exit.code).toBe(3);
    expect(loop.isRunning()).toBe(false);
    // The first call's task still finishes at 0.1, but no longer stops the loop.
    await expect(loop.runUntilComplete(sleep(0.2, 'second'))).resolves.toBe('second');
    expect(loop.time()).toBeCloseTo(0.2, 12);
    expect(handled).toEqual([]);
  });

  it('lets KeyboardInterrupt out of runUntilComplete and marks the wrapping task retrieved', async () => {
    const handled: ExceptionContext[] = [];
    loop.setExceptionHandler((_, context) => handled.push(context));
    const created: Task<unknown>[] = [];
    loop.setTaskFactory((target, coro, options) => {
      const task = new Task(coro, { loop: target, ...options });
      created.push(task);
      return task;
    });
    const interrupt = new KeyboardInterrupt();
    function* interrupted(): Coroutine<void> {
      yield;
      throw interrupt;
    }
    expect(await reasonOf(loop.runUntilComplete(interrupted()))).toBe(interrupt);
    expect(created).toHaveLength(1);
    expect(created[0]?._logTraceback).toBe(false);
    expect(created[0]?.exception()).toBe(interrupt);
    await expect(loop.runUntilComplete(sleep(1, 'ok'))).resolves.toBe('ok');
    expect(handled).toEqual([]);
  });

  it('keeps the rest of the interrupted iteration for the next run', async () => {
    const log: string[] = [];
    const interrupt = new KeyboardInterrupt();
    loop.callSoon(() => log.push('a'));
    loop.callSoon(() => {
      throw interrupt;
    });
    loop.callSoon(() => log.push('b'));
    expect(await reasonOf(loop.runForever())).toBe(interrupt);
    expect(log).toEqual(['a']);
    expect(loop.isRunning()).toBe(false);
    expectError(thrownBy(getRunningLoop), RuntimeError, 'no running event loop');
    await runOnce(loop);
    expect(log).toEqual(['a', 'b']);
  });
});

describe('EventLoop running state', () => {
  it('is running, and the running loop of the thread, only between start and stop', async () => {
    const seen: Array<[boolean, boolean]> = [];
    let count = 0;
    function tick(): void {
      seen.push([loop.isRunning(), getRunningLoop() === loop]);
      if (++count < 10) loop.callSoon(tick);
      else loop.stop();
    }
    loop.callSoon(tick);
    expect(loop.isRunning()).toBe(false);
    await loop.runForever();
    expect(seen).toEqual(Array.from({ length: 10 }, () => [true, true]));
    expect(loop.isRunning()).toBe(false);
    expectError(thrownBy(getRunningLoop), RuntimeError, 'no running event loop');
  });

  it('refuses to run again while running, and refuses a second loop in the same thread', async () => {
    const other = track(new VirtualLoop());
    const outcomes: Array<Promise<unknown>> = [];
    let innerRan = false;
    function* inner(): Coroutine<void> {
      innerRan = true;
    }
    function* main(): Coroutine<string> {
      outcomes.push(reasonOf(loop.runUntilComplete(inner())));
      outcomes.push(reasonOf(loop.runForever()));
      outcomes.push(reasonOf(other.runForever()));
      outcomes.push(reasonOf(other.runUntilComplete(other.createFuture())));
      yield;
      return 'main done';
    }
    await expect(loop.runUntilComplete(main())).resolves.toBe('main done');
    const errors = await Promise.all(outcomes);
    expectError(errors[0], RuntimeError, 'This event loop is already running');
    expectError(errors[1], RuntimeError, 'This event loop is already running');
    expectError(errors[2], RuntimeError, 'Cannot run the event loop while another loop is running');
    expectError(errors[3], RuntimeError, 'Cannot run the event loop while another loop is running');
    expect(innerRan).toBe(false);
    expect(other.isRunning()).toBe(false);
  });

  it('round-trips the debug flag', () => {
    expect(loop.getDebug()).toBe(false);
    loop.setDebug(true);
    expect(loop.getDebug()).toBe(true);
    loop.setDebug(false);
    expect(loop.getDebug()).toBe(false);
  });
});

describe('EventLoop.close', () => {
  it("makes every scheduling method throw RuntimeError('Event loop is closed')", async () => {
    const cb = (): void => undefined;
    loop.close();
    expect(loop.isClosed()).toBe(true);
    expectError(thrownBy(() => loop.callSoon(cb)), RuntimeError, 'Event loop is closed');
    expectError(thrownBy(() => loop.callSoonThreadsafe(cb)), RuntimeError, 'Event loop is closed');
    expectError(thrownBy(() => loop.callLater(1, cb)), RuntimeError, 'Event loop is closed');
    expectError(thrownBy(() => loop.callAt(1, cb)), RuntimeError, 'Event loop is closed');
    expectError(await reasonOf(loop.runForever()), RuntimeError, 'Event loop is closed');
    expectError(await reasonOf(loop.runUntilComplete(loop.createFuture())), RuntimeError, 'Event loop is closed');
  });

  it('closes the coroutine given to createTask on a closed loop', () => {
    const log: string[] = [];
    function* work(): Coroutine<void> {
      log.push('started');
      try {
        yield;
        log.push('resumed');
      } finally {
        log.push('finally');
      }
    }
    loop.close();
    const fresh = work();
    expectError(thrownBy(() => loop.createTask(fresh)), RuntimeError, 'Event loop is closed');
    expect(fresh.next()).toEqual({ done: true, value: undefined });

    const started = work();
    started.next();
    expectError(thrownBy(() => loop.createTask(started)), RuntimeError, 'Event loop is closed');
    expect(log).toEqual(['started', 'finally']);
    expect(started.next()).toEqual({ done: true, value: undefined });
  });

  it('refuses to close a running loop, which goes on running', async () => {
    let error: unknown;
    const log: string[] = [];
    loop.callSoon(() => {
      error = thrownBy(() => loop.close());
      loop.callSoon(() => {
        log.push('still running');
        loop.stop();
      });
    });
    await loop.runForever();
    expectError(error, RuntimeError, 'Cannot close a running event loop');
    expect(log).toEqual(['still running']);
    expect(loop.isClosed()).toBe(false);
  });

  it('is a no-op the second time', () => {
    loop.close();
    loop.close();
    expect(loop.isClosed()).toBe(true);
  });
});

describe('EventLoop debug mode', () => {
  it('rejects generator functions (coroutine functions) in every scheduling method', () => {
    function* coroutineFunction(): Coroutine<void> {}
    loop.setDebug(true);
    expectError(thrownBy(() => loop.callSoon(coroutineFunction)), TypeError, 'coroutines cannot be used with callSoon()');
    expectError(
      thrownBy(() => loop.callSoonThreadsafe(coroutineFunction)),
      TypeError,
      'coroutines cannot be used with callSoonThreadsafe()',
    );
    expectError(thrownBy(() => loop.callLater(1, coroutineFunction)), TypeError, 'coroutines cannot be used with callLater()');
    expectError(thrownBy(() => loop.callAt(1, coroutineFunction)), TypeError, 'coroutines cannot be used with callAt()');
  });

  it('rejects a coroutine object as a non-callable', () => {
    function* coroutineFunction(): Coroutine<void> {}
    loop.setDebug(true);
    const error = thrownBy(() => loop.callSoon(coroutineFunction() as never));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/^a callable object was expected by callSoon\(\), got /);
  });

  it('accepts generator functions when debug mode is off', async () => {
    let called = 0;
    function* coroutineFunction(): Coroutine<void> {
      called++;
    }
    loop.callSoon(() => {
      called += 10;
    });
    expect(loop.callSoon(coroutineFunction).cancelled()).toBe(false);
    await runOnce(loop);
    // Calling a generator function only creates the generator: its body never runs.
    expect(called).toBe(10);
  });

  it('reports a callback that runs longer than slowCallbackDuration, naming it', async () => {
    const warnings: string[] = [];
    logger.warning = (message) => {
      warnings.push(message);
    };
    loop.setDebug(true);
    function slowCallback(_n: number, _s: string): void {
      loop.advance(0.5);
    }
    function quickCallback(): void {
      loop.advance(0.05);
    }
    loop.callSoon(slowCallback, 1, 'a');
    loop.callSoon(quickCallback);
    await runOnce(loop);
    expect(warnings).toEqual(["Executing slowCallback(1, 'a') took 0.500 seconds (thread 'MainThread')"]);

    loop.slowCallbackDuration = 0.01;
    loop.callSoon(quickCallback);
    await runOnce(loop);
    expect(warnings).toEqual(["Executing slowCallback(1, 'a') took 0.500 seconds (thread 'MainThread')", "Executing quickCallback() took 0.050 seconds (thread 'MainThread')"]);
  });

  it('reports no slow callbacks when debug mode is off', async () => {
    const warnings: string[] = [];
    logger.warning = (message) => {
      warnings.push(message);
    };
    loop.callSoon(() => loop.advance(5));
    await runOnce(loop);
    expect(warnings).toEqual([]);
  });
});

describe('EventLoop.setTaskFactory', () => {
  class MyTask<T> extends Task<T> {}
  function* coro(): Coroutine<string> {
    yield;
    return 'value';
  }

  it("rejects a non-callable with TypeError('task factory must be a callable or null')", () => {
    expectError(thrownBy(() => loop.setTaskFactory(1 as never)), TypeError, 'task factory must be a callable or null');
    expect(loop.getTaskFactory()).toBeNull();
  });

  it('creates tasks through the factory, which gets the options (3.14), and null restores plain Tasks', async () => {
    const calls: unknown[][] = [];
    const factory: TaskFactory = (target, c, options) => {
      calls.push([target, options]);
      return new MyTask(c, { loop: target, ...options });
    };
    loop.setTaskFactory(factory);
    expect(loop.getTaskFactory()).toBe(factory);

    const options = { name: 'test_task' };
    const named = loop.createTask(coro(), options);
    expect(named).toBeInstanceOf(MyTask);
    expect(named.getName()).toBe('test_task');
    expect(calls).toEqual([[loop, { name: 'test_task' }]]);
    // Options of its own, as asyncio's factory gets **kwargs of its own.
    expect(calls[0]?.[1]).not.toBe(options);
    loop.createTask(coro()).cancel();
    expect(calls[1]).toEqual([loop, undefined]);
    await expect(loop.runUntilComplete(named)).resolves.toBe('value');

    loop.setTaskFactory(null);
    expect(loop.getTaskFactory()).toBeNull();
    const plain = loop.createTask(coro(), { name: 'plain' });
    expect(plain).toBeInstanceOf(Task);
    expect(plain).not.toBeInstanceOf(MyTask);
    expect(plain.getName()).toBe('plain');
    await loop.runUntilComplete(plain);
    expect(calls).toHaveLength(2);
  });

  it('leaves the name to the factory (3.14): a factory that drops it gives the default name', async () => {
    loop.setTaskFactory((target, c) => new Task(c, { loop: target }));
    const task = loop.createTask(coro(), { name: 'dropped' });
    expect(task.getName()).toMatch(/^Task-\d+$/);
    await loop.runUntilComplete(task);
  });

  it('hands an explicit context to the factory', async () => {
    const contexts: unknown[] = [];
    loop.setTaskFactory((target, c, options) => {
      contexts.push(options?.context);
      return new Task(c, { loop: target, ...options });
    });
    const context = copyContext();
    const task = loop.createTask(coro(), { context });
    expect(contexts).toEqual([context]);
    expect(task.getContext()).toBe(context);
    await loop.runUntilComplete(task);
  });
});

describe('EventLoop exception handler', () => {
  function zeroError(): void {
    throw new RangeError('division by zero');
  }

  it('receives exactly message, exception and handle for a failing callback; the loop goes on', async () => {
    const calls: Array<[EventLoop, ExceptionContext]> = [];
    const log: string[] = [];
    loop.setExceptionHandler((target, context) => calls.push([target, context]));
    const handle = loop.callSoon(zeroError);
    loop.callSoon(() => log.push('after'));
    await runOnce(loop);
    expect(calls).toHaveLength(1);
    const [target, context] = calls[0] as [EventLoop, ExceptionContext];
    expect(target).toBe(loop);
    expect(Object.keys(context).sort()).toEqual(['exception', 'handle', 'message']);
    expect(context.message).toMatch(/^Exception in callback .*zeroError/);
    expect(context.exception).toBeInstanceOf(RangeError);
    expect(context.exception?.message).toBe('division by zero');
    expect(context.handle).toBe(handle);
    expect(log).toEqual(['after']);
  });

  it('receives the TimerHandle of a failing timer callback', async () => {
    const contexts: ExceptionContext[] = [];
    loop.setExceptionHandler((_, context) => contexts.push(context));
    const timer = loop.callLater(1, zeroError);
    loop.callLater(2, () => loop.stop());
    await loop.runForever();
    expect(contexts).toHaveLength(1);
    expect(Object.keys(contexts[0] as ExceptionContext).sort()).toEqual(['exception', 'handle', 'message']);
    expect(contexts[0]?.message).toMatch(/^Exception in callback .*zeroError/);
    expect(contexts[0]?.handle).toBe(timer);
  });

  it('defaults to logging the message and the error through logger.error', async () => {
    const logged = captureErrors();
    const error = new RangeError('division by zero');
    loop.callSoon(() => {
      throw error;
    });
    function namedFailure(): void {
      throw error;
    }
    loop.callSoon(namedFailure);
    await runOnce(loop);
    expect(logged).toHaveLength(2);
    expect(logged[1]?.[0].split('\n')[0]).toBe('Exception in callback namedFailure()');
    expect(logged[0]?.[1]).toBe(error);
    expect(logged[1]?.[1]).toBe(error);
  });

  it('is null by default, returns what was set, and null restores the default', async () => {
    expect(loop.getExceptionHandler()).toBeNull();
    const handler = (): void => undefined;
    loop.setExceptionHandler(handler);
    expect(loop.getExceptionHandler()).toBe(handler);
    loop.setExceptionHandler(null);
    expect(loop.getExceptionHandler()).toBeNull();
    const logged = captureErrors();
    loop.callSoon(zeroError);
    await runOnce(loop);
    expect(logged).toHaveLength(1);
  });

  it("rejects a non-callable handler: TypeError(\"A callable object or null is expected, got 'spam'\")", () => {
    expectError(
      thrownBy(() => loop.setExceptionHandler('spam' as never)),
      TypeError,
      "A callable object or null is expected, got 'spam'",
    );
    expect(loop.getExceptionHandler()).toBeNull();
  });

  it("routes a failing custom handler's error to the default handler with the original context", async () => {
    class RecordingLoop extends VirtualLoop {
      defaults: ExceptionContext[] = [];
      override defaultExceptionHandler(context: ExceptionContext): void {
        this.defaults.push(context);
        super.defaultExceptionHandler(context);
      }
    }
    const recording = track(new RecordingLoop());
    const logged = captureErrors();
    const handlerError = new TypeError('broken handler');
    const seen: ExceptionContext[] = [];
    recording.setExceptionHandler((_, context) => {
      seen.push(context);
      throw handlerError;
    });
    const log: string[] = [];
    recording.callSoon(zeroError);
    recording.callSoon(() => log.push('after'));
    await runOnce(recording);
    expect(recording.defaults).toHaveLength(1);
    const reported = recording.defaults[0] as ExceptionContext;
    expect(Object.keys(reported).sort()).toEqual(['context', 'exception', 'message']);
    expect(reported.message).toBe('Unhandled error in exception handler');
    expect(reported.exception).toBe(handlerError);
    expect(reported.context).toBe(seen[0]);
    expect(logged).toHaveLength(1);
    expect(logged[0]?.[0].split('\n')[0]).toBe('Unhandled error in exception handler');
    expect(logged[0]?.[1]).toBe(handlerError);
    expect(log).toEqual(['after']);
  });

  it('logs a failing default handler, alone or after a failing custom handler, and goes on', async () => {
    const defaultError = new Error('broken default');
    class BrokenDefaultLoop extends VirtualLoop {
      override defaultExceptionHandler(_context: ExceptionContext): void {
        throw defaultError;
      }
    }
    const broken = track(new BrokenDefaultLoop());
    const logged = captureErrors();
    const log: string[] = [];
    broken.callSoon(zeroError);
    broken.callSoon(() => log.push('after default'));
    await runOnce(broken);
    expect(logged).toEqual([['Exception in default exception handler', defaultError]]);

    broken.setExceptionHandler(() => {
      throw new TypeError('broken handler');
    });
    broken.callSoon(zeroError);
    broken.callSoon(() => log.push('after both'));
    await runOnce(broken);
    expect(logged).toEqual([
      ['Exception in default exception handler', defaultError],
      [
        'Exception in default exception handler while handling an unexpected error in custom exception handler',
        defaultError,
      ],
    ]);
    expect(log).toEqual(['after default', 'after both']);
  });

  it('lets KeyboardInterrupt thrown by a handler escape the loop', async () => {
    const interrupt = new KeyboardInterrupt();
    loop.setExceptionHandler(() => {
      throw interrupt;
    });
    loop.callSoon(zeroError);
    expect(await reasonOf(loop.runForever())).toBe(interrupt);
    expect(loop.isRunning()).toBe(false);
  });

  it('can be called directly with any context', () => {
    const contexts: ExceptionContext[] = [];
    loop.setExceptionHandler((_, context) => contexts.push(context));
    const context = { message: 'lost a connection', peer: 'x' };
    loop.callExceptionHandler(context);
    expect(contexts).toEqual([context]);
    expect(contexts[0]).toBe(context);
  });
});

describe('EventLoop.callSoonThreadsafe', () => {
  it('shares the FIFO ready queue with callSoon', async () => {
    const log: string[] = [];
    function cb(word: string): void {
      log.push(word);
      if (log.length === 2) loop.stop();
    }
    loop.callSoonThreadsafe(cb, 'hello');
    loop.callSoon(cb, 'world');
    await loop.runForever();
    expect(log).toEqual(['hello', 'world']);
  });

  it('wakes a loop that sleeps on a distant timer, from a Node timer', async () => {
    const real = track(newEventLoop());
    const log: string[] = [];
    real.callLater(3600, () => log.push('distant'));
    setTimeout(() => {
      real.callSoonThreadsafe((word: string) => {
        log.push(word);
        real.stop();
      }, 'woken');
    }, 5);
    await real.runForever();
    expect(log).toEqual(['woken']);
  });

  it('wakes a loop that sleeps on a distant timer, from a Promise reaction', async () => {
    const real = track(newEventLoop());
    const log: string[] = [];
    real.callLater(3600, () => log.push('distant'));
    const stopped = real.runForever();
    // The reaction runs after runForever returned, while the loop sleeps.
    void Promise.resolve().then(() => {
      real.callSoonThreadsafe(() => {
        log.push('woken');
        real.stop();
      });
    });
    await stopped;
    expect(log).toEqual(['woken']);
  });

  it('wakes the loop with plain callSoon made outside its callbacks too', async () => {
    const real = track(newEventLoop());
    const log: string[] = [];
    real.callLater(3600, () => log.push('distant'));
    setImmediate(() => {
      real.callSoon(() => {
        log.push('woken');
        real.stop();
      });
    });
    await real.runForever();
    expect(log).toEqual(['woken']);
  });

  it("throws RuntimeError('Event loop is closed') on a closed loop", () => {
    loop.close();
    expectError(thrownBy(() => loop.callSoonThreadsafe(() => undefined)), RuntimeError, 'Event loop is closed');
  });

  it('rejects a non-function callback with TypeError', () => {
    expectError(
      thrownBy(() => loop.callSoonThreadsafe(1 as never)),
      TypeError,
      'a callable object was expected by callSoonThreadsafe(), got 1',
    );
  });
});

describe('EventLoop on top of Node', () => {
  it('gives Node a turn while callbacks keep coming', async () => {
    const real = track(newEventLoop());
    let iterations = 0;
    function spin(): void {
      iterations++;
      real.callSoon(spin);
    }
    real.callSoon(spin);
    const stopped = real.runForever();
    // Only runs if the loop yields to libuv between its time slices.
    setImmediate(() => real.stop());
    await stopped;
    expect(iterations).toBeGreaterThan(0);
    expect(real.isRunning()).toBe(false);
  });

  it('keeps the process alive while it runs, though its only work is a timer', async () => {
    const exit = await runFixture('runners-lifetime.mjs', 'running');
    expect(exit).toEqual({ code: 0, signal: null, stdout: 'fired\nstopped\n', stderr: '' });
  });

  it('holds nothing open when it was never run, whatever is scheduled', async () => {
    const exit = await runFixture('runners-lifetime.mjs', 'never-run');
    expect(exit).toEqual({ code: 0, signal: null, stdout: 'scheduled\n', stderr: '' });
  });

  it('holds nothing open once stopped, even with a distant timer left and without close()', async () => {
    const exit = await runFixture('runners-lifetime.mjs', 'stopped');
    expect(exit).toEqual({ code: 0, signal: null, stdout: 'stopped\n', stderr: '' });
  });

  it('holds nothing open once closed', async () => {
    const exit = await runFixture('runners-lifetime.mjs', 'closed');
    expect(exit).toEqual({ code: 0, signal: null, stdout: 'closed\n', stderr: '' });
  });
});

describe('EventLoop checks', () => {
  it('reports a closed loop before a bad callback, as asyncio checks closed first', () => {
    const loop = newEventLoop();
    loop.close();
    const bad = 1 as unknown as () => void;
    expect(() => loop.callSoon(bad)).toThrow(new RuntimeError('Event loop is closed'));
    expect(() => loop.callSoonThreadsafe(bad)).toThrow(new RuntimeError('Event loop is closed'));
    expect(() => loop.callLater(1, bad)).toThrow(new RuntimeError('Event loop is closed'));
    expect(() => loop.callAt(1, bad)).toThrow(new RuntimeError('Event loop is closed'));
  });
});
