import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ContextVar,
  Event,
  ExceptionGroup,
  KeyboardInterrupt,
  RuntimeError,
  SystemExit,
  copyContext,
  eagerTaskFactory,
  shield,
  sleep,
  type Coroutine,
  type ExceptionContext,
  type Future,
  type Task,
} from '../src/index.js';
import { TaskGroup } from '../src/taskgroups.js';
import { raisedBy, self } from './helpers/coroutines.js';
import { expectError } from './helpers/errors.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

class ZeroDivisionError extends Error {
  override name = 'ZeroDivisionError';
}

class MyExc extends Error {
  override name = 'MyExc';
}

let loop: VirtualLoop;
const { run } = useFreshLoop(() => (loop = new VirtualLoop()));

function* returnAfter<T>(delay: number, value: T): Coroutine<T> {
  yield* sleep(delay);
  return value;
}

function* crashAfter(delay: number, error: Error = new ZeroDivisionError('division by zero')): Coroutine<never> {
  yield* sleep(delay);
  throw error;
}

function names(group: unknown): string[] {
  return (group as ExceptionGroup).exceptions.map((e) => e.name);
}

describe('TaskGroup waiting', () => {
  it('waits for every child before the block exits', async () => {
    function* main(): Coroutine<unknown[]> {
      const [t1, t2] = yield* new TaskGroup().run(function* (tg) {
        return [tg.createTask(returnAfter(0.1, 42)), tg.createTask(returnAfter(0.2, 11))];
      });
      return [t1?.result(), t2?.result(), loop.time()];
    }
    expect(await run(main())).toEqual([42, 11, 0.2]);
  });

  it('waits for a child created late in the body', async () => {
    function* main(): Coroutine<unknown[]> {
      const [t1, t2] = yield* new TaskGroup().run(function* (tg) {
        const first = tg.createTask(returnAfter(0.1, 42));
        yield* sleep(0.25);
        return [first, tg.createTask(returnAfter(0.5, 11))];
      });
      return [t1?.result(), t2?.result(), loop.time()];
    }
    expect(await run(main())).toEqual([42, 11, 0.75]);
  });

  it('waits for children that children create in the group', async () => {
    const log: string[] = [];
    function* main(): Coroutine<number> {
      yield* new TaskGroup().run(function* (tg) {
        function* grandchild(): Coroutine<void> {
          yield* sleep(0.5);
          log.push(`grandchild at ${loop.time()}`);
        }
        function* child(): Coroutine<void> {
          yield* sleep(0.25);
          tg.createTask(grandchild());
          log.push(`child at ${loop.time()}`);
        }
        tg.createTask(child());
      });
      return loop.time();
    }
    expect(await run(main())).toBe(0.75);
    expect(log).toEqual(['child at 0.25', 'grandchild at 0.75']);
  });

  it('is not affected by a child cancelled on its own, and drops finished children', async () => {
    function* main(): Coroutine<unknown[]> {
      const reprs: string[] = [];
      const [t1, t2] = yield* new TaskGroup().run(function* (tg) {
        const a = tg.createTask(returnAfter(0.1, 42));
        const b = tg.createTask(returnAfter(0.2, 11));
        reprs.push(String(tg));
        yield* sleep(0);
        a.cancel();
        yield* sleep(0.15);
        reprs.push(String(tg));
        return [a, b];
      });
      return [t1?.cancelled(), t2?.result(), reprs, self().cancelling(), loop.time()];
    }
    expect(await run(main())).toEqual([
      true,
      11,
      ['<TaskGroup tasks=2 entered>', '<TaskGroup tasks=1 entered>'],
      0,
      0.2,
    ]);
  });

  it('returns the body result at once when there are no children', async () => {
    function* main(): Coroutine<unknown[]> {
      const tg = new TaskGroup();
      const value = yield* tg.run(function* () {
        return 'body';
      });
      return [value, String(tg), loop.time()];
    }
    expect(await run(main())).toEqual(['body', '<TaskGroup entered>', 0]);
  });
});

describe('TaskGroup errors', () => {
  it('cancels the siblings and the body on the first failure and groups the error', async () => {
    const log: string[] = [];
    let sibling: Task<unknown> | null = null;
    function* sleeper(): Coroutine<void> {
      try {
        yield* sleep(5);
      } catch (e) {
        log.push(`sibling got ${(e as Error).name} at ${loop.time()}`);
        throw e;
      }
    }
    function* main(): Coroutine<unknown[]> {
      const crash = new ZeroDivisionError('division by zero');
      const error = yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(crashAfter(0.1, crash));
          sibling = tg.createTask(sleeper());
          try {
            yield* sleep(10);
          } catch (e) {
            log.push(`body got ${(e as Error).name}`);
            throw e;
          }
          log.push('not reached');
        }),
      );
      const group = error as ExceptionGroup;
      return [
        group instanceof ExceptionGroup,
        group.message,
        group.exceptions.length,
        group.exceptions[0] === crash,
        group.errors[0] === crash,
        group.cause,
        self().cancelling(),
        loop.time(),
      ];
    }
    expect(await run(main())).toEqual([true, 'unhandled errors in a TaskGroup', 1, true, true, undefined, 0, 0.1]);
    expect(log).toEqual(['sibling got CancelledError at 0.1', 'body got CancelledError']);
    expect((sibling as Task<unknown> | null)?.cancelled()).toBe(true);
  });

  it('groups every error of children failing together, in the order they failed', async () => {
    function* main(): Coroutine<unknown[]> {
      const errors = [new ZeroDivisionError('a'), new ZeroDivisionError('b'), new ZeroDivisionError('c')];
      const group = yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          for (const e of errors) tg.createTask(crashAfter(0.1, e));
          tg.createTask(sleep(1));
          yield* sleep(10);
        }),
      );
      return [(group as ExceptionGroup).exceptions.every((e, i) => e === errors[i]), (group as ExceptionGroup).exceptions.length, loop.time()];
    }
    expect(await run(main())).toEqual([true, 3, 0.1]);
  });

  it('raises the group when a child fails after the body returned', async () => {
    function* main(): Coroutine<unknown[]> {
      const group = yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(crashAfter(0.1));
          tg.createTask(sleep(1));
          yield* sleep(0);
        }),
      );
      return [names(group), self().cancelling(), loop.time()];
    }
    expect(await run(main())).toEqual([['ZeroDivisionError'], 0, 0.1]);
  });

  it('nests the group of an inner TaskGroup inside the outer group', async () => {
    const crash = new ZeroDivisionError('inner');
    function* middle(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        tg.createTask(crashAfter(0.1, crash));
        yield* sleep(10);
      });
    }
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(middle());
          yield* sleep(10);
        }),
      );
    }
    const outer = (await run(main())) as ExceptionGroup;
    expect(outer).toBeInstanceOf(ExceptionGroup);
    expect(outer.exceptions).toHaveLength(1);
    const inner = outer.exceptions[0] as ExceptionGroup;
    expect(inner).toBeInstanceOf(ExceptionGroup);
    expect(inner.message).toBe('unhandled errors in a TaskGroup');
    expect(inner.exceptions).toEqual([crash]);
  });

  it('groups the body error and cancels the children when the body raises', async () => {
    const log: string[] = [];
    function* sleeper(name: string): Coroutine<void> {
      try {
        yield* sleep(10);
      } catch (e) {
        log.push(`${name} ${(e as Error).name} at ${loop.time()}`);
        throw e;
      }
    }
    function* main(): Coroutine<unknown[]> {
      const crash = new ZeroDivisionError('body');
      const group = yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(sleeper('a'));
          tg.createTask(sleeper('b'));
          yield* sleep(0.1);
          throw crash;
        }),
      );
      return [(group as ExceptionGroup).exceptions[0] === crash, names(group), self().cancelling()];
    }
    expect(await run(main())).toEqual([true, ['ZeroDivisionError'], 0]);
    expect(log).toEqual(['a CancelledError at 0.1', 'b CancelledError at 0.1']);
  });

  it('groups the body error raised before the first wait', async () => {
    function* main(): Coroutine<unknown[]> {
      const group = yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(sleep(10));
          throw new ZeroDivisionError('now');
        }),
      );
      return [names(group), loop.time()];
    }
    expect(await run(main())).toEqual([['ZeroDivisionError'], 0]);
  });

  it('groups a child error and the error of the body cleanup it caused', async () => {
    function* nested(): Coroutine<void> {
      try {
        yield* sleep(10);
      } finally {
        throw new MyExc('cleanup');
      }
    }
    function* main(): Coroutine<unknown[]> {
      const group = yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(crashAfter(0.1));
          yield* nested();
        }),
      );
      return [names(group), self().cancelling()];
    }
    expect(await run(main())).toEqual([['ZeroDivisionError', 'MyExc'], 0]);
  });

  it('groups an error class of any kind: JavaScript has no BaseExceptionGroup', async () => {
    class MyBaseExc extends Error {
      override name = 'MyBaseExc';
    }
    function* main(): Coroutine<unknown[]> {
      const group = yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(crashAfter(0.1));
          try {
            yield* sleep(10);
          } finally {
            throw new MyBaseExc();
          }
        }),
      );
      return [group instanceof ExceptionGroup, names(group)];
    }
    expect(await run(main())).toEqual([true, ['ZeroDivisionError', 'MyBaseExc']]);
  });

  it('reports a child that fails after its parent task completed', async () => {
    const contexts: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => contexts.push(context));
    const crash = new ZeroDivisionError('late');
    let child: Task<unknown> | null = null;
    let parent: Task<unknown> | null = null;
    function* main(): Coroutine<string> {
      parent = self();
      // Driving the scope by hand leaves it entered when the parent returns.
      const scoped = new TaskGroup().run(function* (tg) {
        child = tg.createTask(crashAfter(0.1, crash));
        yield* sleep(10);
      });
      scoped.next();
      return 'parent done';
    }
    await run(main());
    await run(sleep(1));
    expect(contexts).toHaveLength(1);
    const [context] = contexts;
    expect(context?.message).toBe(`Task ${child} has errored out but its parent task ${parent} is already completed`);
    expect(context?.exception).toBe(crash);
    expect(context?.task).toBe(child);
  });
});

describe('TaskGroup and cancellation', () => {
  it('ends in a plain CancelledError when the parent is cancelled from outside', async () => {
    const log: string[] = [];
    let bodyError: unknown = null;
    function* child(name: string): Coroutine<void> {
      try {
        yield* sleep(10);
      } finally {
        log.push(`${name} done at ${loop.time()}`);
      }
    }
    function* runner(): Coroutine<void> {
      try {
        yield* new TaskGroup().run(function* (tg) {
          tg.createTask(child('a'));
          tg.createTask(child('b'));
          try {
            yield* sleep(10);
          } catch (e) {
            bodyError = e;
            throw e;
          }
        });
      } catch (e) {
        log.push(`runner got ${(e as Error).name} ${e === bodyError ? '(same)' : '(other)'}`);
        throw e;
      }
    }
    function* main(): Coroutine<unknown[]> {
      const r = loop.createTask(runner());
      yield* sleep(0.1);
      r.cancel('stop');
      const error = yield* raisedBy(() => r[Symbol.iterator]());
      return [error instanceof CancelledError, (error as Error).message, r.cancelled(), r.cancelling()];
    }
    expect(await run(main())).toEqual([true, 'stop', true, 1]);
    expect(log).toEqual(['a done at 0.1', 'b done at 0.1', 'runner got CancelledError (same)']);
  });

  it('propagates a cancellation that arrives while waiting for the children', async () => {
    const log: string[] = [];
    function* runner(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        tg.createTask(
          (function* () {
            try {
              yield* sleep(10);
            } finally {
              log.push(`child done at ${loop.time()}`);
            }
          })(),
        );
      });
      log.push('not reached');
    }
    function* main(): Coroutine<unknown[]> {
      const r = loop.createTask(runner());
      yield* sleep(0.5);
      r.cancel();
      const error = yield* raisedBy(() => r[Symbol.iterator]());
      return [error instanceof CancelledError, r.cancelled()];
    }
    expect(await run(main())).toEqual([true, true]);
    expect(log).toEqual(['child done at 0.5']);
  });

  it('raises the children errors from their cleanup when the parent is cancelled', async () => {
    function* foo(): Coroutine<void> {
      try {
        yield* sleep(10);
      } finally {
        throw new ZeroDivisionError('division by zero');
      }
    }
    function* runner(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        for (let i = 0; i < 5; i++) tg.createTask(foo());
        yield* sleep(10);
      });
    }
    function* main(): Coroutine<unknown[]> {
      const r = loop.createTask(runner());
      yield* sleep(0.1);
      const doneBefore = r.done();
      r.cancel();
      const group = yield* raisedBy(() => r[Symbol.iterator]());
      return [doneBefore, group instanceof ExceptionGroup, names(group), r.cancelled()];
    }
    expect(await run(main())).toEqual([false, true, Array(5).fill('ZeroDivisionError'), false]);
  });

  it('lets a child error win over the cancellation the body was handling', async () => {
    function* runner(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        tg.createTask(crashAfter(0.3));
        try {
          yield* sleep(10);
        } catch (e) {
          yield* sleep(0.5);
          throw e;
        }
      });
    }
    function* main(): Coroutine<unknown[]> {
      const r = loop.createTask(runner());
      yield* sleep(0.1);
      r.cancel();
      const group = yield* raisedBy(() => r[Symbol.iterator]());
      return [names(group), loop.time()];
    }
    expect(await run(main())).toEqual([['ZeroDivisionError'], 0.3]);
  });

  it('lets a child error win when the group runs in a nested task', async () => {
    function* inner(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        tg.createTask(crashAfter(0.3));
        try {
          yield* sleep(10);
        } catch (e) {
          yield* sleep(0.5);
          throw e;
        }
      });
    }
    function* runner(): Coroutine<void> {
      const t = loop.createTask(inner());
      yield* t;
    }
    function* main(): Coroutine<unknown[]> {
      const r = loop.createTask(runner());
      yield* sleep(0.1);
      r.cancel();
      const group = yield* raisedBy(() => r[Symbol.iterator]());
      return [names(group), loop.time()];
    }
    expect(await run(main())).toEqual([['ZeroDivisionError'], 0.3]);
  });

  it('groups the error the body turned its cancellation into, and keeps the outside cancel pending', async () => {
    const log: string[] = [];
    function* runner(): Coroutine<void> {
      try {
        yield* new TaskGroup().run(function* (tg) {
          tg.createTask(sleep(10));
          try {
            yield* sleep(10);
          } catch {
            throw new MyExc('converted');
          }
        });
      } catch (e) {
        log.push(`${names(e).join()} cancelling=${self().cancelling()}`);
      }
      try {
        yield* sleep(1);
      } catch (e) {
        log.push(`then ${(e as Error).name}`);
        throw e;
      }
    }
    function* main(): Coroutine<unknown[]> {
      const r = loop.createTask(runner());
      yield* sleep(0.1);
      r.cancel();
      yield* raisedBy(() => r[Symbol.iterator]());
      return [r.cancelled(), loop.time()];
    }
    expect(await run(main())).toEqual([true, 0.1]);
    expect(log).toEqual(['MyExc cancelling=1', 'then CancelledError']);
  });

  it('raises the group and keeps an external cancel that raced with a child error', async () => {
    const log: string[] = [];
    let started: Future<void> | null = null;
    function* raiseError(): Coroutine<void> {
      (started as Future<void> | null)?.setResult(undefined);
      yield* sleep(0);
      throw new RuntimeError('child failed');
    }
    function* inner(): Coroutine<void> {
      try {
        yield* new TaskGroup().run(function* (tg) {
          tg.createTask(raiseError());
          yield* sleep(1);
          log.push('not reached: body');
        });
      } catch (e) {
        log.push(`${names(e).join()} cancelling=${self().cancelling()}`);
      }
      log.push(`after cancelling=${self().cancelling()}`);
      yield* sleep(1);
      log.push('not reached: after');
    }
    function* main(): Coroutine<unknown[]> {
      started = loop.createFuture<void>();
      const t = loop.createTask(inner());
      yield* started;
      const before = t.cancelling();
      t.cancel();
      const after = t.cancelling();
      const error = yield* raisedBy(() => t[Symbol.iterator]());
      return [before, after, error instanceof CancelledError, t.cancelled(), loop.time()];
    }
    expect(await run(main())).toEqual([0, 1, true, true, 0]);
    expect(log).toEqual(['RuntimeError cancelling=1', 'after cancelling=1']);
  });

  it('returns the parent cancelling() to its earlier level after a child failure', async () => {
    function* main(): Coroutine<unknown[]> {
      const levels: number[] = [];
      yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(crashAfter(0.1));
          try {
            yield* sleep(10);
          } finally {
            levels.push(self().cancelling());
          }
        }),
      );
      levels.push(self().cancelling());
      yield* sleep(1);
      return [levels, loop.time()];
    }
    expect(await run(main())).toEqual([[1, 0], 1.1]);
  });
});

describe('TaskGroup with KeyboardInterrupt and SystemExit', () => {
  it('re-raises KeyboardInterrupt from the body cleanup as itself although a child failed', async () => {
    const interrupt = new KeyboardInterrupt();
    function* nested(): Coroutine<void> {
      try {
        yield* sleep(10);
      } finally {
        throw interrupt;
      }
    }
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(crashAfter(0.1));
          yield* nested();
        }),
      );
    }
    expect(await run(main())).toBe(interrupt);
  });

  it('re-raises SystemExit from the body as itself after waiting for the children', async () => {
    const exit = new SystemExit(3);
    const log: string[] = [];
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(
            (function* () {
              try {
                yield* sleep(10);
              } finally {
                log.push(`child cancelled at ${loop.time()}`);
              }
            })(),
          );
          yield* sleep(0.5);
          throw exit;
        }),
      );
    }
    expect(await run(main())).toBe(exit);
    expect(log).toEqual(['child cancelled at 0.5']);
  });

  it('re-raises a child KeyboardInterrupt as itself instead of grouping it', async () => {
    const interrupt = new KeyboardInterrupt();
    function* main(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        tg.createTask(crashAfter(0.1, interrupt));
        tg.createTask(crashAfter(0.1));
        yield* sleep(10);
      });
    }
    const task = loop.createTask(main());
    // The child's KeyboardInterrupt escapes the loop first, as in asyncio.
    await expect(loop.runUntilComplete(task)).rejects.toBe(interrupt);
    expect(task.done()).toBe(false);
    // Run on: the group sees the failed child and raises the interrupt from its parent.
    await expect(loop.runUntilComplete(task)).rejects.toBe(interrupt);
    expect(task.exception()).toBe(interrupt);
  });
});

describe('TaskGroup.createTask', () => {
  it('refuses before entering and closes the coroutine', () => {
    const log: string[] = [];
    function* started(): Coroutine<void> {
      try {
        yield;
        log.push('resumed');
      } finally {
        log.push('closed');
      }
    }
    const tg = new TaskGroup();
    const coro = started();
    coro.next();
    expect(() => tg.createTask(coro)).toThrow(new RuntimeError('TaskGroup <TaskGroup> has not been entered'));
    expect(log).toEqual(['closed']);
    const fresh = started();
    expect(() => tg.createTask(fresh)).toThrow(RuntimeError);
    expect(fresh.next()).toEqual({ value: undefined, done: true });
  });

  it('refuses after the group finished', async () => {
    function* main(): Coroutine<unknown[]> {
      const tg = new TaskGroup();
      yield* tg.run(() => sleep(0));
      const coro = sleep(1);
      let error: unknown = null;
      try {
        tg.createTask(coro);
      } catch (e) {
        error = e;
      }
      return [error, coro.next().done];
    }
    const [error, closed] = await run(main());
    expect(error).toEqual(new RuntimeError('TaskGroup <TaskGroup entered> is finished'));
    expect(error).toBeInstanceOf(RuntimeError);
    expect(closed).toBe(true);
  });

  it('refuses while shutting down after a failure', async () => {
    let refused: unknown = null;
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(crashAfter(0.001));
          tg.createTask(
            (function* () {
              try {
                yield* sleep(1);
              } catch {
                try {
                  tg.createTask(crashAfter(0.001));
                } catch (e) {
                  refused = e;
                }
              }
            })(),
          );
        }),
      );
    }
    const group = await run(main());
    expect(names(group)).toEqual(['ZeroDivisionError']);
    expect(refused).toEqual(new RuntimeError('TaskGroup <TaskGroup tasks=1 errors=1 cancelling> is shutting down'));
    expect(refused).toBeInstanceOf(RuntimeError);
  });

  it('names the task and honours the given context', async () => {
    const color = new ContextVar<string>('color', { default: 'none' });
    function* readColor(): Coroutine<string> {
      yield* sleep(0);
      return color.get();
    }
    function* main(): Coroutine<unknown[]> {
      const context = copyContext();
      context.run(() => color.set('blue'));
      const [named, inContext, plain] = yield* new TaskGroup().run(function* (tg) {
        return [
          tg.createTask(readColor(), { name: 'yolo' }),
          tg.createTask(readColor(), { context }),
          tg.createTask(readColor()),
        ];
      });
      return [named?.getName(), named?.result(), inContext?.result(), plain?.result()];
    }
    expect(await run(main())).toEqual(['yolo', 'none', 'blue', 'none']);
  });
});

describe('TaskGroup.run', () => {
  it('refuses a second entry while active and after use', async () => {
    function* main(): Coroutine<unknown[]> {
      const tg = new TaskGroup();
      const whileActive = yield* tg.run(function* (group) {
        return yield* raisedBy(() => group.run(() => sleep(0)));
      });
      const afterUse = yield* raisedBy(() => tg.run(() => sleep(0)));
      return [whileActive, afterUse];
    }
    const [whileActive, afterUse] = await run(main());
    expect(whileActive).toEqual(new RuntimeError('TaskGroup <TaskGroup entered> has already been entered'));
    expect(afterUse).toEqual(new RuntimeError('TaskGroup <TaskGroup entered> has already been entered'));
    expect(afterUse).toBeInstanceOf(RuntimeError);
  });

  it('needs a parent task, and stays not entered without one', async () => {
    const tg = new TaskGroup();
    let error: unknown = null;
    loop.callSoon(() => {
      try {
        tg.run(() => sleep(0)).next();
      } catch (e) {
        error = e;
      }
      loop.stop();
    });
    await loop.runForever();
    expect(error).toEqual(new RuntimeError('TaskGroup <TaskGroup> cannot determine the parent task'));
    expect(() => tg.createTask(sleep(0))).toThrow(new RuntimeError('TaskGroup <TaskGroup> has not been entered'));
    function* main(): Coroutine<number> {
      return yield* tg.run(() => returnAfter(0.1, 7));
    }
    expect(await run(main())).toBe(7);
  });

  it('rejects a body that is not a function', async () => {
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() => new TaskGroup().run('body' as never));
    }
    expect(await run(main())).toEqual(new TypeError("TaskGroup.run() expects a generator function, got 'body'"));
  });

  it('cancels the children when its coroutine is closed with return()', async () => {
    const log: string[] = [];
    function* main(): Coroutine<void> {
      const tg = new TaskGroup();
      const scoped = tg.run(function* (group) {
        group.createTask(
          (function* () {
            try {
              yield* sleep(10);
            } finally {
              log.push(`child ended at ${loop.time()}`);
            }
          })(),
        );
        yield* sleep(10);
      });
      scoped.next();
      yield* sleep(0.5);
      scoped.return(undefined);
      log.push(String(tg));
      yield* sleep(1);
    }
    await run(main());
    expect(log).toEqual(['<TaskGroup tasks=1 cancelling>', 'child ended at 0.5']);
  });
});

/**
 * TaskGroup.cancel (asyncio 3.15), after the tests of CPython's main branch; each order checked
 * by running CPython main's TaskGroup on CPython 3.13, lazily and with the eager task factory.
 */
describe('TaskGroup.cancel', () => {
  function* sleeper(log: string[], name: string): Coroutine<void> {
    try {
      yield* sleep(10);
      log.push(`${name} slept`);
    } catch (e) {
      if (e instanceof CancelledError) log.push(`${name} cancelled`);
      throw e;
    }
  }

  it.each([
    ['lazily', false],
    ['eagerly', true],
  ])('cancels the children and the body, then ends without an error (%s)', async (_how, eager) => {
    if (eager) loop.setTaskFactory(eagerTaskFactory);
    const log: string[] = [];
    function* main(): Coroutine<void> {
      const result = yield* new TaskGroup().run(function* (tg) {
        tg.createTask(sleeper(log, 'c1'));
        tg.createTask(sleeper(log, 'c2'));
        yield* sleep(0);
        log.push('body cancels');
        tg.cancel();
        log.push('body after cancel');
        yield* sleep(0);
        log.push('body not cancelled');
        return 'unreached';
      });
      log.push(`after group result=${result} cancelling=${self().cancelling()} t=${loop.time()}`);
    }
    await run(main());
    expect(log).toEqual(['body cancels', 'body after cancel', 'c1 cancelled', 'c2 cancelled', 'after group result=undefined cancelling=0 t=0']);
  });

  it('cancels the body at its next wait, and a second cancel() changes nothing', async () => {
    function* main(): Coroutine<string> {
      let count = 0;
      yield* new TaskGroup().run(function* (tg) {
        tg.cancel();
        tg.cancel();
        count += 1;
        yield* sleep(0);
        count += 1;
      });
      return `count=${count} cancelling=${self().cancelling()}`;
    }
    expect(await run(main())).toBe('count=1 cancelling=0');
  });

  it('does nothing once the group is done', async () => {
    function* main(): Coroutine<string> {
      const tg = new TaskGroup();
      yield* tg.run(function* () {
        yield* sleep(0);
      });
      tg.cancel();
      yield* sleep(0);
      return `cancelling=${self().cancelling()} ${tg}`;
    }
    expect(await run(main())).toBe('cancelling=0 <TaskGroup entered>');
  });

  it('called before the group is entered, cancels it as it enters', async () => {
    function* main(): Coroutine<number> {
      const tg = new TaskGroup();
      tg.cancel();
      let count = 0;
      yield* tg.run(function* () {
        count += 1;
        yield* sleep(0);
        count += 1;
      });
      return count;
    }
    expect(await run(main())).toBe(1);
  });

  it.each([
    [
      'a child that cancels the group, then raises',
      function* (tg: TaskGroup): Coroutine<void> {
        tg.createTask(
          (function* (): Coroutine<never> {
            tg.cancel();
            throw new RangeError('child');
          })(),
        );
        yield* sleep(1);
      },
    ],
    [
      'a child that raises, then cancels the group',
      function* (tg: TaskGroup): Coroutine<void> {
        tg.createTask(
          (function* (): Coroutine<never> {
            try {
              throw new RangeError('child');
            } finally {
              tg.cancel();
            }
          })(),
        );
        yield* sleep(1);
      },
    ],
    [
      'a body that cancels the group, then raises',
      function* (tg: TaskGroup): Coroutine<void> {
        tg.cancel();
        throw new RangeError('body');
      },
    ],
    [
      'a body that raises, then cancels the group',
      function* (tg: TaskGroup): Coroutine<void> {
        try {
          throw new RangeError('body');
        } finally {
          tg.cancel();
        }
      },
    ],
  ])('keeps the errors: %s raises an ExceptionGroup of that error', async (_case, body) => {
    function* main(): Coroutine<[unknown, number]> {
      const error = yield* raisedBy(() => new TaskGroup().run(body));
      return [error, self().cancelling()];
    }
    const [error, cancelling] = await run(main());
    expect(error).toBeInstanceOf(ExceptionGroup);
    expectError(error, ExceptionGroup, 'unhandled errors in a TaskGroup');
    expect(names(error)).toEqual(['RangeError']);
    expect(cancelling).toBe(0);
  });

  it('lets the first of several racers win: the group ends at its cancel()', async () => {
    const log: string[] = [];
    const event = new Event();
    function* fn(n: number): Coroutine<number> {
      log.push(`${n} started`);
      yield* event.wait();
      log.push(`${n} finished`);
      return n;
    }
    function* race(...fns: Array<() => Coroutine<number>>): Coroutine<number | null> {
      let outcome: number | null = null;
      yield* new TaskGroup().run(function* (tg) {
        for (const f of fns) {
          tg.createTask(
            (function* (): Coroutine<void> {
              outcome = yield* f();
              tg.cancel();
            })(),
          );
        }
      });
      return outcome;
    }
    function* main(): Coroutine<number | null> {
      let outcome: number | null = null;
      yield* new TaskGroup().run(function* (outer) {
        outer.createTask(
          (function* (): Coroutine<void> {
            log.push('trigger');
            event.set();
          })(),
        );
        outcome = yield* race(
          () => fn(1),
          () => fn(2),
        );
      });
      return outcome;
    }
    expect(await run(main())).toBe(1);
    expect(log).toEqual(['trigger', '1 started', '1 finished']);
  });

  it('with eager tasks, a racer that wins in its eager step shuts the group before the next racer is created', async () => {
    // CPython main with eager_task_factory: RuntimeError('TaskGroup ... is shutting down') from create_task.
    loop.setTaskFactory(eagerTaskFactory);
    function* winner(tg: TaskGroup): Coroutine<void> {
      tg.cancel();
    }
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        new TaskGroup().run(function* (tg) {
          tg.createTask(winner(tg));
          tg.createTask(winner(tg));
        }),
      );
    }
    const error = await run(main());
    expect(error).toBeInstanceOf(ExceptionGroup);
    const [inner] = (error as ExceptionGroup).exceptions;
    expectError(inner, RuntimeError, 'TaskGroup <TaskGroup tasks=1 cancelling> is shutting down');
  });

  it('a cancel from outside that comes while the group waits for its children is not lost (gh-155433)', async () => {
    const log: string[] = [];
    function* slowCleanup(name: string): Coroutine<void> {
      try {
        yield* sleep(10);
      } catch (e) {
        log.push(`${name} cleaning up`);
        yield* shield(sleep(0.5));
        log.push(`${name} cleaned`);
        throw e;
      }
    }
    function* canceller(tg: TaskGroup): Coroutine<void> {
      yield* sleep(0.1);
      tg.cancel();
    }
    function* body(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        tg.createTask(slowCleanup('c'));
        tg.createTask(canceller(tg));
      });
      log.push('group exited normally');
      yield* sleep(0);
      log.push('after group');
    }
    function* main(): Coroutine<void> {
      const t = loop.createTask(body());
      yield* sleep(0.3);
      t.cancel('outer');
      const error = yield* raisedBy(() => t);
      log.push(`${(error as Error).name}: ${(error as Error).message} at ${loop.time()}`);
    }
    await run(main());
    expect(log).toEqual(['c cleaning up', 'c cleaned', 'CancelledError: outer at 0.6']);
  });

  it('an eager child that cancels the group in its first step is cancelled once it is one of the group’s tasks (gh-155418)', async () => {
    loop.setTaskFactory(eagerTaskFactory);
    const log: string[] = [];
    function* child(tg: TaskGroup): Coroutine<void> {
      tg.cancel();
      yield* sleeper(log, 'child');
    }
    function* main(): Coroutine<void> {
      yield* new TaskGroup().run(function* (tg) {
        tg.createTask(child(tg));
        log.push('body continues');
        yield* sleep(0);
        log.push('body not cancelled');
      });
      log.push(`done cancelling=${self().cancelling()} t=${loop.time()}`);
    }
    await run(main());
    expect(log).toEqual(['body continues', 'child cancelled', 'done cancelling=0 t=0']);
  });
});
