import { describe, expect, it } from 'vitest';
import {
  BrokenBarrierError,
  CancelledError,
  RuntimeError,
  createTask,
  sleep,
  type Coroutine,
  type Future,
  type Task,
} from '../src/index.js';
import { Barrier, BoundedSemaphore, Condition, Event, Lock, Semaphore } from '../src/locks.js';
import { caught, settle } from './helpers/coroutines.js';
import { expectError } from './helpers/errors.js';
import { runOnFreshLoop, useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
const { run } = useFreshLoop(() => (loop = new VirtualLoop()));

/** Give up `n` loop iterations. */
function* iterations(n: number): Coroutine<void> {
  for (let i = 0; i < n; i++) yield* sleep(0);
}

describe('Lock', () => {
  it('is acquired and released, with asyncio reprs', async () => {
    const lock = new Lock();
    const log: string[] = [];
    await run(function* () {
      log.push(String(lock));
      log.push(`acquire=${yield* lock.acquire()}`);
      log.push(`${lock.locked()} ${lock}`);
      const waiter = createTask(lock.acquire());
      yield* sleep(0);
      log.push(String(lock));
      lock.release();
      yield* sleep(0);
      log.push(`${waiter.result()} ${lock}`);
      lock.release();
      log.push(`${lock.locked()} ${lock}`);
    });
    expect(log).toEqual([
      '<Lock [unlocked]>',
      'acquire=true',
      'true <Lock [locked]>',
      '<Lock [locked, waiters:1]>',
      'true <Lock [locked]>',
      'false <Lock [unlocked]>',
    ]);
  });

  it('refuses to release an unlocked lock', () => {
    const lock = new Lock();
    expect(() => lock.release()).toThrow(RuntimeError);
    expect(() => lock.release()).toThrow('Lock is not acquired.');
  });

  it('holds the lock for the body of run() and releases it after', async () => {
    const lock = new Lock();
    const log: string[] = [];
    const result = await run(function* () {
      const value = yield* lock.run(function* () {
        log.push(`inside locked=${lock.locked()}`);
        yield* sleep(0);
        return 42;
      });
      log.push(`after locked=${lock.locked()}`);
      const error = yield* caught(
        lock.run(function* () {
          throw new RangeError('boom');
        }),
      );
      log.push(`${(error as Error).message} locked=${lock.locked()}`);
      return value;
    });
    expect(result).toBe(42);
    expect(log).toEqual(['inside locked=true', 'after locked=false', 'boom locked=false']);
  });

  it('rejects a body that is not a function, or that returns no coroutine', async () => {
    const lock = new Lock();
    expect(() => lock.run(42 as never)).toThrow(TypeError);
    expect(() => lock.run(42 as never)).toThrow('run() expects a function returning a coroutine, got 42');
    const error = await run(function* () {
      return yield* caught(lock.run((() => 7) as never));
    });
    expectError(error, TypeError, 'run() body must return a coroutine, got 7');
    expect(lock.locked()).toBe(false);
  });

  it('cannot be awaited itself and stays unlocked', async () => {
    const lock = new Lock();
    const error = await run(function* () {
      return yield* caught(
        (function* () {
          yield* lock as unknown as Coroutine<unknown>;
        })(),
      );
    });
    expectError(error, TypeError, "object Lock can't be used in 'await' expression");
    expect(lock.locked()).toBe(false);
  });

  it('hands the lock over FIFO and never lets a newcomer barge past a waiter (LCK-02)', async () => {
    const lock = new Lock();
    const result: number[] = [];
    const snapshots: string[] = [];
    function* take(n: number): Coroutine<boolean> {
      if (yield* lock.acquire()) result.push(n);
      return true;
    }
    await run(function* () {
      expect(yield* lock.acquire()).toBe(true);
      const t1 = createTask(take(1));
      const t2 = createTask(take(2));
      yield* sleep(0);
      snapshots.push(JSON.stringify(result));
      lock.release();
      yield* sleep(0);
      snapshots.push(JSON.stringify(result));
      yield* sleep(0);
      snapshots.push(JSON.stringify(result));
      // t3's first step runs before t2's wake-up and finds the lock free: it must still queue.
      const t3 = createTask(take(3));
      lock.release();
      yield* sleep(0);
      snapshots.push(JSON.stringify(result));
      lock.release();
      yield* sleep(0);
      snapshots.push(JSON.stringify(result));
      expect([t1.done(), t2.done(), t3.done()]).toEqual([true, true, true]);
      expect(lock.locked()).toBe(true);
    });
    expect(snapshots).toEqual(['[]', '[1]', '[1]', '[1,2]', '[1,2,3]']);
  });

  it('takes a free lock at once when every queued waiter is cancelled', async () => {
    const lock = new Lock();
    await run(function* () {
      yield* lock.acquire();
      const waiter = createTask(lock.acquire());
      yield* sleep(0);
      waiter.cancel();
      lock.release();
      // The cancelled waiter has not run yet, so it is still queued: it does not count.
      expect(String(lock)).toBe('<Lock [unlocked, waiters:1]>');
      expect(yield* lock.acquire()).toBe(true);
      expect(String(lock)).toBe('<Lock [locked, waiters:1]>');
      yield* sleep(0);
      expect(waiter.cancelled()).toBe(true);
      expect(String(lock)).toBe('<Lock [locked]>');
    });
  });

  it('passes the lock on when a woken waiter is cancelled before it runs (LCK-04)', async () => {
    const lock = new Lock();
    const log: string[] = [];
    function* lockit(name: string, blocker: Future<void> | null): Coroutine<void> {
      yield* lock.acquire();
      log.push(`${name} acquired`);
      try {
        if (blocker !== null) yield* blocker;
      } finally {
        lock.release();
        log.push(`${name} released`);
      }
    }
    await run(function* () {
      const fa = loop.createFuture<void>();
      const ta = createTask(lockit('A', fa));
      yield* sleep(0);
      const tb = createTask(lockit('B', null));
      yield* sleep(0);
      const tc = createTask(lockit('C', null));
      yield* sleep(0);
      expect(String(lock)).toBe('<Lock [locked, waiters:2]>');
      fa.setResult(undefined);
      tb.cancel();
      yield* sleep(0);
      expect(lock.locked()).toBe(false);
      expect(ta.done()).toBe(true);
      expect(tb.cancelled()).toBe(true);
      yield* tc;
    });
    expect(log).toEqual(['A acquired', 'A released', 'C acquired', 'C released']);
  });

  it('never gives the lock to two waiters when one is cancelled as the lock is released (LCK-04)', async () => {
    const lock = new Lock();
    let lockCount = 0;
    let callCount = 0;
    function* lockit(): Coroutine<void> {
      callCount++;
      yield* lock.acquire();
      lockCount++;
    }
    await run(function* () {
      yield* lock.acquire();
      const t1 = createTask(lockit());
      const t2 = createTask(lockit());
      const t3 = createTask(lockit());
      yield* sleep(0);
      loop.callSoon(() => {
        t1.cancel();
        lock.release();
      });
      expect(yield* caught(t1)).toBeInstanceOf(CancelledError);
      expect(lockCount).toBe(1);
      expect(callCount).toBe(3);
      expect(t1.cancelled()).toBe(true);
      expect(t2.done()).toBe(true);
      expect(t3.done()).toBe(false);
      t3.cancel();
      yield* sleep(0);
      expect(t3.cancelled()).toBe(true);
      expect(String(lock)).toBe('<Lock [locked]>');
    });
  });

  it('binds to the loop of its first wait', async () => {
    const lock = new Lock();
    await run(function* () {
      yield* lock.acquire();
      const waiter = createTask(lock.acquire());
      yield* sleep(0);
      lock.release();
      yield* waiter;
    });
    const error = await runOnFreshLoop(() => caught(lock.acquire()));
    expectError(error, RuntimeError, '<Lock [locked]> is bound to a different event loop');
  });

  it('can be used without waiting from several loops, as in asyncio', async () => {
    const lock = new Lock();
    for (let i = 0; i < 2; i++) await runOnFreshLoop(() => lock.run(function* () {}));
    expect(lock.locked()).toBe(false);
  });
});

describe('Event', () => {
  it('is set, cleared and shown as asyncio shows it', async () => {
    const event = new Event();
    const log: string[] = [];
    await run(function* () {
      log.push(`${event.isSet()} ${event}`);
      const waiter = createTask(event.wait());
      yield* sleep(0);
      log.push(String(event));
      event.set();
      log.push(`${event.isSet()} ${event}`);
      yield* sleep(0);
      log.push(`${waiter.result()} ${event}`);
      event.clear();
      log.push(`${event.isSet()} ${event}`);
    });
    expect(log).toEqual([
      'false <Event [unset]>',
      '<Event [unset, waiters:1]>',
      'true <Event [set, waiters:1]>',
      'true <Event [set]>',
      'false <Event [unset]>',
    ]);
  });

  it('wakes waiters behind work already queued (EVT-01)', async () => {
    const event = new Event();
    const result: number[] = [];
    function* waiter(n: number): Coroutine<boolean> {
      const value = yield* event.wait();
      result.push(n);
      return value;
    }
    await run(function* () {
      const t1 = createTask(waiter(1));
      const t2 = createTask(waiter(2));
      yield* sleep(0);
      expect(result).toEqual([]);
      const t3 = createTask(waiter(3));
      event.set();
      yield* sleep(0);
      expect(result).toEqual([3, 1, 2]);
      expect([t1.result(), t2.result(), t3.result()]).toEqual([true, true, true]);
    });
  });

  it('returns at once when set, and waits again after clear()', async () => {
    const event = new Event();
    const log: string[] = [];
    await run(function* () {
      event.set();
      event.set();
      log.push(`immediate ${yield* event.wait()}`);
      event.clear();
      const waiter = createTask(event.wait());
      yield* iterations(3);
      log.push(`waiting ${waiter.done()}`);
      event.set();
      yield* waiter;
      log.push(`woken ${waiter.result()}`);
    });
    expect(log).toEqual(['immediate true', 'waiting false', 'woken true']);
  });

  it('forgets a cancelled waiter', async () => {
    const event = new Event();
    await run(function* () {
      const waiter = createTask(event.wait());
      yield* sleep(0);
      waiter.cancel('stop');
      yield* sleep(0);
      expect(waiter.cancelled()).toBe(true);
      expect(String(event)).toBe('<Event [unset]>');
      event.set();
      expect(String(event)).toBe('<Event [set]>');
    });
  });

  it('cannot be awaited itself', async () => {
    const error = await run(function* () {
      return yield* caught(
        (function* () {
          yield* new Event() as unknown as Coroutine<unknown>;
        })(),
      );
    });
    expectError(error, TypeError, "object Event can't be used in 'await' expression");
  });

  it('binds to the loop of its first wait', async () => {
    const event = new Event();
    await run(function* () {
      const waiter = createTask(event.wait());
      yield* sleep(0);
      waiter.cancel();
      yield* sleep(0);
    });
    const error = await runOnFreshLoop(() => caught(event.wait()));
    expectError(error, RuntimeError, '<Event [unset]> is bound to a different event loop');
  });
});

describe('Condition', () => {
  it('wakes notified waiters only when the lock is released, one at a time (CND-01)', async () => {
    const cond = new Condition();
    const result: number[] = [];
    const steps: string[] = [];
    function* waiter(n: number): Coroutine<boolean> {
      yield* cond.acquire();
      if (yield* cond.wait()) result.push(n);
      return true;
    }
    function snap(): void {
      steps.push(`${JSON.stringify(result)} ${cond.locked() ? 'locked' : 'unlocked'}`);
    }
    await run(function* () {
      const tasks = [createTask(waiter(1)), createTask(waiter(2)), createTask(waiter(3))];
      yield* sleep(0);
      snap();
      expect(String(cond)).toBe('<Condition [unlocked, waiters:3]>');
      expect(yield* cond.acquire()).toBe(true);
      cond.notify();
      yield* sleep(0);
      snap();
      cond.release();
      yield* sleep(0);
      snap();
      cond.notify(2);
      yield* sleep(0);
      snap();
      cond.release();
      yield* sleep(0);
      snap();
      cond.release();
      yield* sleep(0);
      snap();
      expect(tasks.map((task) => task.result())).toEqual([true, true, true]);
    });
    expect(steps).toEqual(['[] unlocked', '[] locked', '[1] locked', '[1] locked', '[1,2] locked', '[1,2,3] locked']);
  });

  it('requires the lock to wait or notify (CND-02)', async () => {
    const cond = new Condition();
    expect(() => cond.notify()).toThrow(RuntimeError);
    expect(() => cond.notify()).toThrow('cannot notify on un-acquired lock');
    expect(() => cond.notifyAll()).toThrow('cannot notify on un-acquired lock');
    expect(() => cond.notify('2' as never)).toThrow("n must be a number, got '2'");
    const errors = await run(function* () {
      return [yield* caught(cond.wait()), yield* caught(cond.waitFor(() => false))];
    });
    expectError(errors[0], RuntimeError, 'cannot wait on un-acquired lock');
    expectError(errors[1], RuntimeError, 'cannot wait on un-acquired lock');
    expect(cond.locked()).toBe(false);
  });

  it('returns from waitFor without the lock when the predicate already holds (CND-02)', async () => {
    const cond = new Condition();
    const value = await run(function* () {
      return yield* cond.waitFor(() => [1, 2, 3]);
    });
    expect(value).toEqual([1, 2, 3]);
  });

  it('re-checks the predicate after every wake-up and returns its value (CND-02)', async () => {
    const cond = new Condition();
    let presses = 0;
    let checks = 0;
    const log: string[] = [];
    function* watcher(): Coroutine<void> {
      yield* cond.acquire();
      const value = yield* cond.waitFor(() => {
        checks++;
        return presses === 3 ? `pressed ${presses}` : '';
      });
      log.push(`${value} after ${checks} checks, locked=${cond.locked()}`);
      cond.release();
    }
    await run(function* () {
      const task = createTask(watcher());
      yield* sleep(0);
      for (let i = 0; i < 3; i++) {
        yield* cond.run(function* () {
          presses++;
          cond.notify();
        });
        yield* sleep(0);
      }
      yield* task;
    });
    expect(log).toEqual(['pressed 3 after 4 checks, locked=true']);
  });

  it('wakes n waiters with notify(n) and all with notifyAll() (CND-02)', async () => {
    const cond = new Condition();
    const result: number[] = [];
    function* waiter(n: number): Coroutine<void> {
      yield* cond.run(function* () {
        yield* cond.wait();
        result.push(n);
      });
    }
    const steps: string[] = [];
    await run(function* () {
      const tasks = [1, 2, 3].map((n) => createTask(waiter(n)));
      yield* sleep(0);
      yield* cond.run(function* () {
        cond.notify(1);
      });
      yield* iterations(2);
      steps.push(JSON.stringify(result));
      yield* cond.run(function* () {
        cond.notify(2048);
      });
      yield* iterations(3);
      steps.push(JSON.stringify(result));
      const more = [4, 5].map((n) => createTask(waiter(n)));
      yield* sleep(0);
      yield* cond.run(function* () {
        cond.notifyAll();
      });
      yield* settle([...tasks, ...more]);
      steps.push(JSON.stringify(result));
    });
    expect(steps).toEqual(['[1]', '[1,2,3]', '[1,2,3,4,5]']);
  });

  it('shares a lock given to it (CND-02)', async () => {
    const lock = new Lock();
    const cond = new Condition(lock);
    await run(function* () {
      yield* lock.acquire();
      expect(cond.locked()).toBe(true);
      cond.release();
      expect(lock.locked()).toBe(false);
      yield* cond.acquire();
      expect(lock.locked()).toBe(true);
      lock.release();
    });
    expect(() => new Condition({} as Lock)).toThrow(TypeError);
    expect(() => new Condition({} as Lock)).toThrow('lock must be a Lock, got {}');
  });

  it('re-acquires the lock and re-raises the same CancelledError when cancelled while waiting (CND-04)', async () => {
    const cond = new Condition();
    let raised: unknown = null;
    let lockedInHandler = false;
    function* func(): Coroutine<void> {
      yield* cond.run(function* () {
        try {
          yield* cond.waitFor(() => false);
        } catch (error) {
          raised = error;
          lockedInHandler = cond.locked();
          throw error;
        }
      });
    }
    const error = await run(function* () {
      const task = createTask(func());
      yield* sleep(0);
      task.cancel('foo');
      return yield* caught(task);
    });
    expectError(error, CancelledError, 'foo');
    expect(error).toBe(raised);
    expect(lockedInHandler).toBe(true);
    expect(cond.locked()).toBe(false);
  });

  it('re-raises the same CancelledError when cancelled while re-acquiring the lock (CND-04)', async () => {
    const cond = new Condition();
    let wake = false;
    let raised: unknown = null;
    function* func(): Coroutine<void> {
      yield* cond.run(function* () {
        try {
          yield* cond.waitFor(() => wake);
        } catch (error) {
          raised = error;
          throw error;
        }
      });
    }
    const error = await run(function* () {
      const task = createTask(func());
      yield* sleep(0);
      yield* cond.acquire();
      wake = true;
      cond.notify();
      yield* sleep(0);
      // The task now waits for the lock inside wait(): cancel it there.
      task.cancel('foo');
      cond.release();
      return yield* caught(task);
    });
    expectError(error, CancelledError, 'foo');
    expect(error).toBe(raised);
    expect(cond.locked()).toBe(false);
  });

  for (const when of ['before it runs', 'while it re-acquires the lock'] as const) {
    it(`passes a notification on when the notified waiter is cancelled ${when} (CND-04)`, async () => {
      const cond = new Condition();
      let state = 0;
      const consumed: number[] = [];
      function* consumer(id: number): Coroutine<void> {
        yield* cond.run(function* () {
          for (;;) {
            yield* cond.waitFor(() => state !== 0);
            if (state < 0) return;
            state--;
            consumed.push(id);
            cond.notify();
          }
        });
      }
      await run(function* () {
        const consumers = [createTask(consumer(0)), createTask(consumer(1))];
        yield* sleep(0);
        yield* cond.acquire();
        state++;
        cond.notify(1);
        if (when === 'while it re-acquires the lock') yield* sleep(0);
        consumers[0]!.cancel();
        // If the notification were lost, nobody would consume the item before the deadline.
        const watcher = createTask(cond.run(() => cond.waitFor(() => state === 0)));
        cond.release();
        const deadline = loop.callLater(0.01, () => watcher.cancel());
        yield* caught(watcher);
        deadline.cancel();
        yield* cond.acquire();
        expect(state).toBe(0);
        expect(watcher.cancelled()).toBe(false);
        state = -1;
        cond.notifyAll();
        cond.release();
        yield* settle(consumers);
        expect(consumers[0]!.cancelled()).toBe(true);
        expect(consumers[1]!.result()).toBe(undefined);
      });
      expect(consumed).toEqual([1]);
    });
  }

  it('is shown as asyncio shows it, and cannot be awaited itself', async () => {
    const cond = new Condition();
    const log: string[] = [String(cond)];
    const error = await run(function* () {
      const waiter = createTask(cond.run(() => cond.wait()));
      yield* sleep(0);
      log.push(String(cond));
      yield* cond.acquire();
      log.push(String(cond));
      cond.release();
      waiter.cancel();
      yield* sleep(0);
      expect(waiter.cancelled()).toBe(true);
      return yield* caught(
        (function* () {
          yield* cond as unknown as Coroutine<unknown>;
        })(),
      );
    });
    expect(log).toEqual(['<Condition [unlocked]>', '<Condition [unlocked, waiters:1]>', '<Condition [locked, waiters:1]>']);
    expect(String(cond)).toBe('<Condition [unlocked]>');
    expectError(error, TypeError, "object Condition can't be used in 'await' expression");
  });
});

describe('Semaphore', () => {
  it('validates its initial value and is shown as asyncio shows it (SEM-01)', async () => {
    expect(new Semaphore(0).locked()).toBe(true);
    expect(() => new Semaphore(-1)).toThrow(RangeError);
    expect(() => new Semaphore(-1)).toThrow('Semaphore initial value must be >= 0');
    expect(() => new Semaphore('2' as never)).toThrow("Semaphore value must be a number, got '2'");
    expect(() => new Semaphore(1.5)).toThrow('Semaphore value must be an integer, got 1.5');
    const sem = new Semaphore();
    const log: string[] = [String(sem)];
    await run(function* () {
      yield* sem.acquire();
      log.push(String(sem));
      const waiter = createTask(sem.acquire());
      yield* sleep(0);
      log.push(String(sem));
      sem.release();
      yield* waiter;
      log.push(String(sem));
      sem.release();
      sem.release();
      log.push(String(sem));
    });
    expect(log).toEqual([
      '<Semaphore [unlocked, value:1]>',
      '<Semaphore [locked]>',
      '<Semaphore [locked, waiters:1]>',
      '<Semaphore [locked]>',
      '<Semaphore [unlocked, value:2]>',
    ]);
    expect(String(new BoundedSemaphore(3))).toBe('<BoundedSemaphore [unlocked, value:3]>');
  });

  it('refuses to release a BoundedSemaphore above its initial value (SEM-01)', async () => {
    const sem = new BoundedSemaphore();
    expect(() => sem.release()).toThrow(RangeError);
    expect(() => sem.release()).toThrow('BoundedSemaphore released too many times');
    await run(function* () {
      yield* sem.acquire();
      const waiter = createTask(sem.acquire());
      yield* sleep(0);
      // The permit goes straight to the waiter, so this release is within bounds.
      sem.release();
      yield* waiter;
      sem.release();
    });
    expect(() => sem.release()).toThrow('BoundedSemaphore released too many times');
    expect(String(sem)).toBe('<BoundedSemaphore [unlocked, value:1]>');
  });

  it('hands released permits straight to waiters in FIFO order (SEM-02)', async () => {
    const sem = new Semaphore(3);
    const result: number[] = [];
    function* take(n: number): Coroutine<boolean> {
      yield* sem.acquire();
      result.push(n);
      return true;
    }
    await run(function* () {
      expect(yield* sem.acquire()).toBe(true);
      expect(yield* sem.acquire()).toBe(true);
      expect(sem.locked()).toBe(false);
      const t1 = createTask(take(1));
      const t2 = createTask(take(2));
      const t3 = createTask(take(3));
      yield* sleep(0);
      expect(result).toEqual([1]);
      expect(sem.locked()).toBe(true);
      expect(String(sem)).toBe('<Semaphore [locked, waiters:2]>');
      expect(sem._value).toBe(0);
      const t4 = createTask(take(4));
      sem.release();
      sem.release();
      expect(sem._value).toBe(0);
      yield* sleep(0);
      expect(result).toEqual([1, 2, 3]);
      expect(sem._value).toBe(0);
      expect(String(sem)).toBe('<Semaphore [locked, waiters:1]>');
      expect([t1.done(), t2.done(), t3.done(), t4.done()]).toEqual([true, true, true, false]);
      sem.release();
      yield* t4;
      expect(result).toEqual([1, 2, 3, 4]);
    });
  });

  it('does not let a newcomer take a permit reserved for a woken waiter', async () => {
    const sem = new Semaphore(1);
    const log: string[] = [];
    function* take(name: string): Coroutine<void> {
      yield* sem.acquire();
      log.push(name);
    }
    await run(function* () {
      yield* sem.acquire();
      createTask(take('waiter'));
      yield* sleep(0);
      sem.release();
      const newcomer = createTask(take('newcomer'));
      yield* sleep(0);
      expect(log).toEqual(['waiter']);
      sem.release();
      yield* newcomer;
    });
    expect(log).toEqual(['waiter', 'newcomer']);
  });

  it('stays locked while a woken waiter has not run, even with a free permit (SEM-01)', async () => {
    const sem = new Semaphore(0);
    const log: string[] = [];
    function* take(name: string): Coroutine<void> {
      yield* sem.acquire();
      log.push(name);
    }
    await run(function* () {
      const first = createTask(take('first'));
      yield* sleep(0);
      sem.release();
      sem.release();
      // One permit is reserved for `first`, the other is free, yet `first` must run first.
      expect(sem.locked()).toBe(true);
      expect(String(sem)).toBe('<Semaphore [locked, waiters:1]>');
      const second = createTask(take('second'));
      yield* settle([first, second]);
      expect(String(sem)).toBe('<Semaphore [locked]>');
    });
    expect(log).toEqual(['first', 'second']);
  });

  it('skips cancelled waiters when handing out a permit (SEM-04)', async () => {
    const sem = new Semaphore(0);
    await run(function* () {
      const tasks = [1, 2, 3, 4].map(() => createTask(sem.acquire()));
      yield* sleep(0);
      tasks[0]!.cancel();
      tasks[1]!.cancel();
      sem.release();
      yield* iterations(2);
      expect(tasks.map((task) => (task.cancelled() ? 'cancelled' : task.done() ? 'done' : 'waiting'))).toEqual([
        'cancelled',
        'cancelled',
        'done',
        'waiting',
      ]);
      expect(String(sem)).toBe('<Semaphore [locked, waiters:1]>');
      tasks[3]!.cancel();
      yield* sleep(0);
    });
  });

  it('gives the permit to the next waiter when the first is cancelled before the release (SEM-04)', async () => {
    const sem = new Semaphore(0);
    await run(function* () {
      const t1 = createTask(sem.acquire());
      const t2 = createTask(sem.acquire());
      yield* sleep(0);
      t1.cancel();
      sem.release();
      yield* iterations(2);
      expect(t1.cancelled()).toBe(true);
      expect(t2.done() && t2.result()).toBe(true);
      expect(sem.locked()).toBe(true);
      expect(String(sem)).toBe('<Semaphore [locked]>');
    });
  });

  it('gives back a permit handed to a waiter cancelled before it runs (SEM-04)', async () => {
    const sem = new Semaphore(1);
    const log: string[] = [];
    await run(function* () {
      let t2: Task<void> | null = null;
      function* c1(): Coroutine<void> {
        yield* sem.run(function* () {
          yield* sleep(0);
        });
        // The release above handed the permit to c2: cancel c2 before it can run.
        t2!.cancel();
        log.push('c1 done');
      }
      function* c2(): Coroutine<void> {
        yield* sem.run(function* () {
          log.push('c2 entered');
        });
      }
      const t1 = createTask(c1());
      t2 = createTask(c2());
      yield* settle([t1, t2]);
      expect(t1.result()).toBe(undefined);
      expect(t2.cancelled()).toBe(true);
      expect(sem.locked()).toBe(false);
      expect(String(sem)).toBe('<Semaphore [unlocked, value:1]>');
      expect(yield* sem.acquire()).toBe(true);
    });
    expect(log).toEqual(['c1 done']);
  });

  it('wakes waiters queued behind a cancelled woken waiter so no permit is stranded (SEM-04)', async () => {
    const sem = new Semaphore(0);
    const log: string[] = [];
    function* take(name: string): Coroutine<void> {
      yield* sem.acquire();
      log.push(name);
    }
    await run(function* () {
      const a = createTask(take('a'));
      const b = createTask(take('b'));
      const c = createTask(take('c'));
      yield* sleep(0);
      sem.release();
      sem.release();
      // a and b hold reserved permits; cancel both before they run.
      a.cancel();
      b.cancel();
      yield* iterations(2);
      expect(log).toEqual(['c']);
      expect([a.cancelled(), b.cancelled(), c.done()]).toEqual([true, true, true]);
      expect(String(sem)).toBe('<Semaphore [unlocked, value:1]>');
    });
  });

  it('runs a body holding a permit', async () => {
    const sem = new BoundedSemaphore(2);
    const log: string[] = [];
    await run(function* () {
      const value = yield* sem.run(function* () {
        log.push(String(sem));
        return 'ok';
      });
      log.push(`${value} ${sem}`);
      const error = yield* caught(
        (function* () {
          yield* sem as unknown as Coroutine<unknown>;
        })(),
      );
      expectError(error, TypeError, "object BoundedSemaphore can't be used in 'await' expression");
    });
    expect(log).toEqual(['<BoundedSemaphore [unlocked, value:1]>', 'ok <BoundedSemaphore [unlocked, value:2]>']);
  });

  it('binds to the loop of its first wait', async () => {
    const sem = new Semaphore(0);
    await run(function* () {
      const waiter = createTask(sem.acquire());
      yield* sleep(0);
      sem.release();
      yield* waiter;
    });
    const error = await runOnFreshLoop(() => caught(sem.acquire()));
    expectError(error, RuntimeError, '<Semaphore [locked]> is bound to a different event loop');
  });
});

describe('Barrier', () => {
  it('validates parties (BAR-01)', () => {
    expect(() => new Barrier(0)).toThrow(RangeError);
    expect(() => new Barrier(0)).toThrow('parties must be > 0');
    expect(() => new Barrier(-4)).toThrow('parties must be > 0');
    expect(() => new Barrier('3' as never)).toThrow("parties must be a number, got '3'");
    expect(() => new Barrier(2.5)).toThrow('parties must be an integer, got 2.5');
    const barrier = new Barrier(3);
    expect([barrier.parties, barrier.nWaiting, barrier.broken]).toEqual([3, 0, false]);
  });

  it('releases all parties together with their arrival indices (BAR-01)', async () => {
    const barrier = new Barrier(3);
    const log: string[] = [];
    function* party(name: string): Coroutine<number> {
      log.push(`${name} arrives`);
      const index = yield* barrier.wait();
      log.push(`${name} passes as ${index}`);
      return index;
    }
    await run(function* () {
      const a = createTask(party('a'));
      const b = createTask(party('b'));
      yield* sleep(0);
      expect(barrier.nWaiting).toBe(2);
      const c = createTask(party('c'));
      yield* settle([a, b, c]);
      expect([a.result(), b.result(), c.result()]).toEqual([0, 1, 2]);
      expect([barrier.nWaiting, barrier.broken]).toEqual([0, false]);
    });
    expect(log).toEqual(['a arrives', 'b arrives', 'c arrives', 'c passes as 2', 'a passes as 0', 'b passes as 1']);
  });

  it('lets a single party pass at once, and parties pass repeatedly (BAR-01)', async () => {
    const single = new Barrier(1);
    const barrier = new Barrier(3);
    const indices: number[][] = [[], []];
    function* twice(): Coroutine<void> {
      indices[0]!.push(yield* barrier.wait());
      indices[1]!.push(yield* barrier.run(function* (index) {
        return index;
      }));
    }
    await run(function* () {
      expect([yield* single.wait(), yield* single.wait()]).toEqual([0, 0]);
      yield* settle([createTask(twice()), createTask(twice()), createTask(twice())]);
    });
    expect(indices.map((round) => [...round].sort())).toEqual([
      [0, 1, 2],
      [0, 1, 2],
    ]);
    expect([barrier.nWaiting, barrier.broken]).toEqual([0, false]);
  });

  it('forgets a party cancelled while filling (BAR-01)', async () => {
    const barrier = new Barrier(3);
    await run(function* () {
      const t1 = createTask(barrier.wait());
      yield* sleep(0);
      expect(barrier.nWaiting).toBe(1);
      const t2 = createTask(barrier.wait());
      yield* sleep(0);
      expect(barrier.nWaiting).toBe(2);
      t1.cancel();
      yield* sleep(0);
      expect(t1.cancelled()).toBe(true);
      expect(barrier.nWaiting).toBe(1);
      const t3 = createTask(barrier.wait());
      const t4 = createTask(barrier.wait());
      yield* settle([t2, t3, t4]);
      // An index is the count of tasks inside at arrival: t2 keeps 1, t3 takes the freed slot.
      expect([t2.result(), t3.result(), t4.result()]).toEqual([1, 1, 2]);
      expect([barrier.nWaiting, barrier.broken]).toEqual([0, false]);
    });
  });

  it('shows filling, draining, resetting and broken states (BAR-02)', async () => {
    const barrier = new Barrier(3);
    const reprs: string[] = [String(barrier)];
    await run(function* () {
      const tasks: Array<Task<number>> = [];
      for (let i = 0; i < 2; i++) tasks.push(createTask(barrier.wait()));
      yield* sleep(0);
      reprs.push(String(barrier));
      tasks.push(createTask(barrier.wait()));
      yield* sleep(0);
      reprs.push(String(barrier));
      for (let i = 0; i < 2; i++) tasks.push(createTask(barrier.wait()));
      yield* sleep(0);
      yield* barrier.reset();
      reprs.push(String(barrier));
      for (let i = 0; i < 2; i++) tasks.push(createTask(barrier.wait()));
      yield* sleep(0);
      yield* barrier.abort();
      reprs.push(String(barrier));
      yield* settle(tasks);
      expect(tasks.map((task) => (task.exception() === null ? task.result() : task.exception()!.name))).toEqual([
        0,
        1,
        2,
        'BrokenBarrierError',
        'BrokenBarrierError',
        'BrokenBarrierError',
        'BrokenBarrierError',
      ]);
    });
    expect(reprs).toEqual([
      '<Barrier [filling, waiters:0/3]>',
      '<Barrier [filling, waiters:2/3]>',
      '<Barrier [draining, waiters:0/3]>',
      '<Barrier [resetting, waiters:0/3]>',
      '<Barrier [broken]>',
    ]);
  });

  it('is draining for all but the last task to leave (BAR-02)', async () => {
    const barrier = new Barrier(3);
    const seen: string[] = [];
    function* party(): Coroutine<void> {
      yield* barrier.run(function* (index) {
        seen.push(`${index}: ${barrier}`);
      });
    }
    await run(function* () {
      yield* settle([createTask(party()), createTask(party()), createTask(party())]);
    });
    expect(seen).toEqual([
      '2: <Barrier [draining, waiters:0/3]>',
      '0: <Barrier [draining, waiters:0/3]>',
      '1: <Barrier [filling, waiters:0/3]>',
    ]);
  });

  it('holds tasks that come back while draining for the next round (BAR-02)', async () => {
    const parties = 5;
    const rewait = 2;
    const barrier = new Barrier(parties);
    const others = new Barrier(parties - rewait);
    let rewaiting = rewait;
    const log: string[] = [];
    function* party(id: number): Coroutine<void> {
      yield* barrier.wait();
      if (rewaiting > 0) {
        rewaiting--;
        log.push(`${id} waits again`);
        yield* barrier.wait();
      } else {
        yield* others.wait();
        yield* barrier.wait();
      }
      log.push(`${id} done`);
    }
    await run(function* () {
      const tasks = [0, 1, 2, 3, 4].map((id) => createTask(party(id)));
      yield* settle(tasks);
      expect(tasks.every((task) => task.done() && task.exception() === null)).toBe(true);
    });
    expect(log.filter((line) => line.endsWith('waits again'))).toHaveLength(2);
    expect(log.filter((line) => line.endsWith('done'))).toHaveLength(5);
    expect([barrier.nWaiting, barrier.broken, others.nWaiting]).toEqual([0, false, 0]);
  });

  it('raises BrokenBarrierError in waiters on reset, then fills again', async () => {
    const barrier = new Barrier(3);
    await run(function* () {
      const waiters = [createTask(barrier.wait()), createTask(barrier.wait())];
      yield* sleep(0);
      yield* barrier.reset();
      yield* settle(waiters);
      for (const waiter of waiters) expectError(waiter.exception(), BrokenBarrierError, 'Abort or reset of barrier');
      expect(String(barrier)).toBe('<Barrier [filling, waiters:0/3]>');
      const again = [0, 1, 2].map(() => createTask(barrier.wait()));
      yield* settle(again);
      expect(again.map((task) => task.result())).toEqual([0, 1, 2]);
    });
  });

  it('breaks on abort(): waiters and later arrivals get BrokenBarrierError (BAR-04)', async () => {
    const barrier = new Barrier(3);
    await run(function* () {
      const waiter = createTask(barrier.wait());
      yield* sleep(0);
      yield* barrier.abort();
      expect([barrier.broken, barrier.nWaiting]).toEqual([true, 0]);
      yield* settle([waiter]);
      expectError(waiter.exception(), BrokenBarrierError, 'Abort or reset of barrier');
      expectError(yield* caught(barrier.wait()), BrokenBarrierError, 'Barrier aborted');
      const single = new Barrier(1);
      createTask(single.abort());
      yield* sleep(0);
      expect([single.broken, single.nWaiting]).toEqual([true, 0]);
    });
  });

  it('lets nobody pass when one party fails inside and aborts (BAR-04)', async () => {
    const parties = 3;
    const barrier = new Barrier(parties);
    const passed: string[] = [];
    const broken: string[] = [];
    function* party(): Coroutine<void> {
      try {
        yield* barrier.run(function* (index) {
          if (index === Math.floor(parties / 2)) throw new RangeError('bad party');
        });
        yield* barrier.run(function* () {
          passed.push('second barrier');
        });
      } catch (error) {
        if (error instanceof BrokenBarrierError) broken.push(error.message);
        else if (error instanceof RangeError) yield* barrier.abort();
        else throw error;
      }
    }
    await run(function* () {
      yield* settle([createTask(party()), createTask(party()), createTask(party())]);
    });
    expect(barrier.broken).toBe(true);
    expect(passed).toEqual([]);
    expect(broken).toHaveLength(parties - 1);
  });

  it('is usable again after an abort and a coordinated reset (BAR-04)', async () => {
    const parties = 3;
    const barrier1 = new Barrier(parties);
    const barrier2 = new Barrier(parties);
    const results1: boolean[] = [];
    const results2: boolean[] = [];
    const results3: boolean[] = [];
    function* party(): Coroutine<void> {
      try {
        const index = yield* barrier1.wait();
        if (index === Math.floor(parties / 2)) throw new RangeError('bad party');
        yield* barrier1.wait();
        results1.push(true);
      } catch (error) {
        if (error instanceof BrokenBarrierError) results2.push(true);
        else if (error instanceof RangeError) yield* barrier1.abort();
        else throw error;
      }
      const k = yield* barrier2.wait();
      if (k === Math.floor(parties / 2)) yield* barrier1.reset();
      yield* barrier2.wait();
      yield* barrier1.wait();
      results3.push(true);
    }
    await run(function* () {
      const tasks = [0, 1, 2].map(() => createTask(party()));
      yield* settle(tasks);
      expect(tasks.map((task) => task.exception())).toEqual([null, null, null]);
    });
    expect(barrier1.broken).toBe(false);
    expect([results1.length, results2.length, results3.length]).toEqual([0, parties - 1, parties]);
  });

  it('cannot be awaited itself, and binds to one loop', async () => {
    const barrier = new Barrier(2);
    const error = await run(function* () {
      const tasks = [createTask(barrier.wait()), createTask(barrier.wait())];
      yield* settle(tasks);
      expect(tasks.map((task) => task.result())).toEqual([0, 1]);
      return yield* caught(
        (function* () {
          yield* barrier as unknown as Coroutine<unknown>;
        })(),
      );
    });
    expectError(error, TypeError, "object Barrier can't be used in 'await' expression");
    const foreign = await runOnFreshLoop(() => caught(barrier.wait()));
    expectError(foreign, RuntimeError, '<Barrier [filling, waiters:0/2]> is bound to a different event loop');
  });
});
