/**
 * Eager tasks (asyncio 3.12; `eager_start` through `create_task` in 3.14): CPython 3.13's
 * test_eager_task_factory, its main branch's additions (test_name, test_eager_start_false), the
 * eager cases of test_tasks (test_eager_start_true/false), the TaskGroup tests CPython runs with
 * the eager factory, and what asyncio does when an eager task starts inside another task's step.
 * Orders checked against CPython 3.13.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  Context,
  ContextVar,
  ExceptionGroup,
  KeyboardInterrupt,
  RuntimeError,
  Task,
  TaskGroup,
  allTasks,
  copyContext,
  createEagerTaskFactory,
  createTask,
  currentTask,
  eagerTaskFactory,
  gather,
  sleep,
  type Coroutine,
  type EventLoop,
  type Future,
  type TaskFactory,
  type TaskOptions,
} from '../src/index.js';
import { staggeredRace } from '../src/staggered.js';
import { expectError, reasonOf, thrownBy } from './helpers/errors.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
const { run } = useFreshLoop(() => (loop = new VirtualLoop()));

/** The name of the task running now, or null. */
function currentName(): string | null {
  return currentTask()?.getName() ?? null;
}

/** How many callbacks and steps wait in the loop's ready queue. */
function readyCount(target: EventLoop): number {
  return target._stats().ready;
}

describe('EagerTaskFactoryLoopTests (test_eager_task_factory)', () => {
  class MyTask<T> extends Task<T> {}
  let factory: TaskFactory;
  const setUp = (): void => {
    factory = createEagerTaskFactory(MyTask);
    loop.setTaskFactory(factory);
  };

  it('test_eager_task_factory_set: tasks are made by the factory with the given class', async () => {
    setUp();
    expect(loop.getTaskFactory()).toBe(factory);
    function* noop(): Coroutine<void> {}
    function* main(): Coroutine<boolean> {
      const t = loop.createTask(noop());
      yield* t;
      return t instanceof MyTask;
    }
    expect(await run(main())).toBe(true);
  });

  it('test_await_future_during_eager_step: the eager step completes the task', async () => {
    setUp();
    function* setResult(fut: Future<string>, value: string): Coroutine<void> {
      fut.setResult(value);
    }
    function* main(): Coroutine<[boolean, string]> {
      const fut = loop.createFuture<string>();
      const t = loop.createTask(setResult(fut, 'my message'));
      const done = t.done();
      return [done, yield* fut];
    }
    expect(await run(main())).toEqual([true, 'my message']);
  });

  it('test_eager_completion: a coroutine that returns gives a done task', async () => {
    setUp();
    function* coro(): Coroutine<string> {
      return 'hello';
    }
    function* main(): Coroutine<[boolean, string]> {
      const t = loop.createTask(coro());
      const done = t.done();
      return [done, yield* t];
    }
    expect(await run(main())).toEqual([true, 'hello']);
  });

  it('test_block_after_eager_step: a coroutine that waits is pending until it finishes', async () => {
    setUp();
    function* coro(): Coroutine<string> {
      yield* sleep(0.1);
      return 'finished after blocking';
    }
    function* main(): Coroutine<[boolean, string, boolean]> {
      const t = loop.createTask(coro());
      const before = t.done();
      const result = yield* t;
      return [before, result, t.done()];
    }
    expect(await run(main())).toEqual([false, 'finished after blocking', true]);
  });

  it('test_cancellation_after_eager_completion: a finished task cannot be cancelled', async () => {
    setUp();
    function* coro(): Coroutine<string> {
      return 'finished without blocking';
    }
    function* main(): Coroutine<[boolean, string, boolean]> {
      const t = loop.createTask(coro());
      const accepted = t.cancel();
      const result = yield* t;
      return [accepted, result, t.cancelled()];
    }
    expect(await run(main())).toEqual([false, 'finished without blocking', false]);
  });

  it('test_cancellation_after_eager_step_blocks: the cancellation reaches the wait of the first step', async () => {
    setUp();
    let cancelling = 0;
    function* coro(): Coroutine<string> {
      yield* sleep(0.1);
      return 'finished after blocking';
    }
    function* main(): Coroutine<string> {
      const t = loop.createTask(coro());
      t.cancel('cancellation message');
      cancelling = t.cancelling();
      return yield* t;
    }
    expectError(await reasonOf(run(main())), CancelledError, 'cancellation message');
    expect(cancelling).toBe(1);
    expect(loop.time()).toBe(0);
  });

  it('test_current_task: the task is the current task during its eager step and after it blocked', async () => {
    setUp();
    let captured: Task<unknown> | null = null;
    let later: Task<unknown> | null = null;
    function* coro(): Coroutine<void> {
      captured = currentTask();
      yield* sleep(0.1);
      later = currentTask();
    }
    function* main(): Coroutine<boolean> {
      const t = loop.createTask(coro());
      const same = captured === t;
      yield* t;
      return same;
    }
    expect(await run(main())).toBe(true);
    expect(later).toBe(captured);
  });

  it('test_all_tasks_with_eager_completion: listed during its eager step, gone once it finished there', async () => {
    setUp();
    let captured = new Set<Task<unknown>>();
    function* coro(): Coroutine<void> {
      captured = allTasks();
    }
    function* main(): Coroutine<[boolean, boolean]> {
      const t = loop.createTask(coro());
      return [captured.has(t), allTasks().has(t)];
    }
    expect(await run(main())).toEqual([true, false]);
  });

  it('test_all_tasks_with_blocking: a task that waits stays listed until it finishes', async () => {
    setUp();
    let captured = new Set<Task<unknown>>();
    function* coro(fut1: Future<void>, fut2: Future<void>): Coroutine<void> {
      captured = allTasks();
      yield* fut1;
      fut2.setResult(undefined);
    }
    function* main(): Coroutine<boolean[]> {
      const fut1 = loop.createFuture<void>();
      const fut2 = loop.createFuture<void>();
      const t = loop.createTask(coro(fut1, fut2));
      const seen = [captured.has(t), allTasks().has(t)];
      fut1.setResult(undefined);
      yield* fut2;
      return [...seen, allTasks().has(t)];
    }
    expect(await run(main())).toEqual([true, true, false]);
  });

  it('test_context_vars: the first step runs in a copy of the creator context; the creator keeps its value', async () => {
    setUp();
    const cv = new ContextVar<number>('cv', { default: 0 });
    const log: string[] = [];
    function* coro(): Coroutine<void> {
      log.push(`first step sees ${cv.get()}`);
      cv.set(2);
      log.push(`first step set ${cv.get()}`);
      yield* sleep(0.1);
      log.push(`second step sees ${cv.get()}`);
      cv.set(3);
      log.push(`second step set ${cv.get()}`);
    }
    function* main(): Coroutine<void> {
      cv.set(1);
      const t = loop.createTask(coro());
      log.push(`creator sees ${cv.get()}`);
      yield* t;
      log.push(`creator sees ${cv.get()}`);
    }
    await run(main());
    expect(log).toEqual([
      'first step sees 1',
      'first step set 2',
      'creator sees 1',
      'second step sees 2',
      'second step set 3',
      'creator sees 1',
    ]);
  });

  it('test_staggered_race_with_eager_tasks', async () => {
    setUp();
    function* fail(): Coroutine<never> {
      yield* sleep(0);
      throw new RangeError('no good');
    }
    function* blocked(): Coroutine<string> {
      return yield* loop.createFuture<string>();
    }
    const [winner, index, excs] = await run(
      staggeredRace<string>([() => blocked(), () => sleep(1, 'sleep1'), () => fail()], 0.25),
    );
    expect(winner).toBe('sleep1');
    expect(index).toBe(1);
    expect(excs[1]).toBeNull();
    expect(excs[0]).toBeInstanceOf(CancelledError);
    expectError(excs[2], RangeError, 'no good');
  });

  it('test_staggered_race_with_eager_tasks_no_delay', async () => {
    setUp();
    function* fail(): Coroutine<never> {
      throw new RangeError('no good');
    }
    const [winner, index, excs] = await run(
      staggeredRace<string>([() => fail(), () => sleep(1, 'sleep1'), () => sleep(0, 'sleep0')], null),
    );
    expect(winner).toBe('sleep1');
    expect(index).toBe(1);
    expect(excs[1]).toBeNull();
    expectError(excs[0], RangeError, 'no good');
    expect(excs).toHaveLength(2);
  });

  it('staggeredRace with eager tasks: each attempt waits until it is listed (gh-124309), so a cancel reaches them in start order', async () => {
    setUp();
    const log: string[] = [];
    function* attempt(name: string): Coroutine<string> {
      log.push(`${name} start ${loop.time()}`);
      try {
        yield* sleep(10);
      } catch (e) {
        log.push(`${name} ${(e as Error).name} ${loop.time()}`);
        throw e;
      }
      return name;
    }
    function* main(): Coroutine<unknown> {
      const race = loop.createTask(staggeredRace([() => attempt('a'), () => attempt('b')], 0.5));
      yield* sleep(0.75);
      race.cancel('enough');
      return yield* race;
    }
    expectError(await reasonOf(run(main())), CancelledError, 'enough');
    expect(log).toEqual(['a start 0', 'b start 0.5', 'a CancelledError 0.75', 'b CancelledError 0.75']);
  });

  it('test_eager_start_false: an explicit eagerStart: false schedules the task', async () => {
    setUp();
    let name: string | null = null;
    function* asyncfn(): Coroutine<void> {
      name = currentName();
    }
    function* main(): Coroutine<[boolean, string | null]> {
      const t = loop.createTask(asyncfn(), { eagerStart: false, name: 'example' });
      const seen: [boolean, string | null] = [t.done(), name];
      yield* t;
      return seen;
    }
    expect(await run(main())).toEqual([false, null]);
    expect(name).toBe('example');
  });

  it('test_issue122332: a task that finished in its eager step lets its coroutine go', async () => {
    setUp();
    function* coro(): Coroutine<void> {}
    let task: Task<void> | undefined;
    function* main(): Coroutine<void> {
      task = loop.createTask(coro());
      yield* task;
    }
    await run(main());
    expect(task?.getCoro()).toBeNull();
    // asyncio's repr leaves the coroutine out once it is gone.
    expect(String(task)).toMatch(/^<MyTask finished name='Task-\d+' result=undefined>$/);
  });

  it('test_name: the name is in place during the eager step', async () => {
    setUp();
    let name: string | null = null;
    function* coro(): Coroutine<void> {
      name = currentName();
    }
    function* main(): Coroutine<string | null> {
      loop.createTask(coro(), { name: 'test name' });
      return name;
    }
    expect(await run(main())).toBe('test name');
  });
});

describe('eager tasks (test_tasks)', () => {
  it('test_eager_start_true: the Task constructor runs the first step, with the name given', async () => {
    let name: string | null = null;
    function* asyncfn(): Coroutine<void> {
      name = currentName();
    }
    function* main(): Coroutine<[boolean, string | null]> {
      const t = new Task(asyncfn(), { loop, eagerStart: true, name: 'example' });
      const seen: [boolean, string | null] = [t.done(), name];
      yield* t;
      return seen;
    }
    expect(await run(main())).toEqual([true, 'example']);
  });

  it('test_eager_start_false: the Task constructor schedules the first step', async () => {
    let name: string | null = null;
    function* asyncfn(): Coroutine<void> {
      name = currentName();
    }
    function* main(): Coroutine<[boolean, string | null]> {
      const t = new Task(asyncfn(), { loop, eagerStart: false, name: 'example' });
      const seen: [boolean, string | null] = [t.done(), name];
      yield* t;
      return seen;
    }
    expect(await run(main())).toEqual([false, null]);
    expect(name).toBe('example');
  });

  it('createTask(coro, { eagerStart: true }) starts eagerly without a factory (3.14)', async () => {
    const log: string[] = [];
    function* child(): Coroutine<number> {
      log.push('child');
      return 7;
    }
    function* main(): Coroutine<number> {
      const t = createTask(child(), { eagerStart: true });
      log.push(`created, done=${t.done()}`);
      return yield* t;
    }
    expect(await run(main())).toBe(7);
    expect(log).toEqual(['child', 'created, done=true']);
  });

  it('starts lazily when the loop is not running, as asyncio does', async () => {
    const log: string[] = [];
    function* child(): Coroutine<void> {
      log.push('child');
    }
    loop.setTaskFactory(eagerTaskFactory);
    const t = loop.createTask(child());
    const direct = new Task(child(), { loop, eagerStart: true });
    expect(log).toEqual([]);
    expect([t.done(), direct.done()]).toEqual([false, false]);
    await loop.runUntilComplete(gather(t, direct));
    expect(log).toEqual(['child', 'child']);
    expect(t.getCoro()).not.toBeNull();
  });

  it('a task that finishes in its eager step never enters the ready queue; one that yields enters it once', async () => {
    const counts: number[] = [];
    function* finishes(): Coroutine<number> {
      return 1;
    }
    function* parks(fut: Future<void>): Coroutine<void> {
      yield* fut;
    }
    function* yields(): Coroutine<void> {
      yield;
    }
    function* main(): Coroutine<void> {
      const fut = loop.createFuture<void>();
      counts.push(readyCount(loop));
      loop.createTask(finishes(), { eagerStart: true });
      counts.push(readyCount(loop));
      loop.createTask(parks(fut), { eagerStart: true });
      counts.push(readyCount(loop));
      loop.createTask(yields(), { eagerStart: true });
      counts.push(readyCount(loop));
      loop.createTask(finishes());
      counts.push(readyCount(loop));
      fut.setResult(undefined);
    }
    await run(main());
    expect(counts).toEqual([0, 0, 0, 1, 2]);
  });

  it('keeps the coroutine of an eager task that finished in a later step, and of a lazy one', async () => {
    loop.setTaskFactory(eagerTaskFactory);
    function* waits(): Coroutine<void> {
      yield* sleep(0);
    }
    const coros: Array<Coroutine<void>> = [];
    function* main(): Coroutine<Array<Coroutine<void> | null>> {
      const eager = loop.createTask((coros[0] = waits()));
      const lazy = loop.createTask((coros[1] = waits()), { eagerStart: false });
      yield* gather(eager, lazy);
      return [eager.getCoro(), lazy.getCoro()];
    }
    expect(await run(main())).toEqual(coros);
  });

  it('runs the next steps of a task that waited in the order the loop schedules them', async () => {
    // CPython 3.13 (order1.py): ['P step1', 'C step1', 'P after C', 'main after P', 'A', 'C step2', 'B', 'end'].
    loop.setTaskFactory(eagerTaskFactory);
    const log: string[] = [];
    function* child(): Coroutine<void> {
      log.push(`C step1 current=${currentName()}`);
      yield* sleep(0);
      log.push('C step2');
    }
    function* parent(): Coroutine<void> {
      log.push(`P step1 current=${currentName()}`);
      const t = loop.createTask(child(), { name: 'C' });
      log.push(`P after C current=${currentName()}`);
      yield* t;
    }
    function* main(): Coroutine<void> {
      loop.callSoon(() => log.push('A'));
      const t = loop.createTask(parent(), { name: 'P' });
      log.push(`main after P current=${currentName()}`);
      loop.callSoon(() => log.push('B'));
      yield* t;
      log.push('end');
    }
    await loop.runUntilComplete(loop.createTask(main(), { name: 'main' }));
    expect(log).toEqual([
      'P step1 current=P',
      'C step1 current=C',
      'P after C current=P',
      'main after P current=main',
      'A',
      'C step2',
      'B',
      'end',
    ]);
  });
});

describe('eager tasks started inside other code (reentrancy)', () => {
  it('an eager task started from a callback is the current task during its step; none is current after', async () => {
    const log: string[] = [];
    function* child(): Coroutine<void> {
      log.push(`D step1 current=${currentName()}`);
      yield* sleep(0);
      log.push('D step2');
    }
    loop.callSoon(() => {
      loop.createTask(child(), { name: 'D', eagerStart: true });
      log.push(`callback after D current=${currentName()}`);
    });
    await loop.runUntilComplete(sleep(0.1));
    expect(log).toEqual(['D step1 current=D', 'callback after D current=null', 'D step2']);
  });

  it('the outer task is current again after an eager step that threw, and the error is the task’s', async () => {
    function* fails(): Coroutine<never> {
      throw new RangeError('first step failed');
    }
    function* main(): Coroutine<[string | null, boolean, unknown]> {
      const t = loop.createTask(fails(), { eagerStart: true });
      return [currentName(), t.done(), t.exception()];
    }
    const [current, done, error] = await loop.runUntilComplete(loop.createTask(main(), { name: 'outer' }));
    expect(current).toBe('outer');
    expect(done).toBe(true);
    expectError(error, RangeError, 'first step failed');
  });

  it('KeyboardInterrupt in an eager step leaves createTask, the task failed with it, the outer task current again', async () => {
    const interrupt = new KeyboardInterrupt();
    let inner: Task<unknown> | undefined;
    function* interrupted(): Coroutine<never> {
      inner = currentTask() ?? undefined;
      throw interrupt;
    }
    function* main(): Coroutine<[unknown, string | null]> {
      const error = thrownBy(() => loop.createTask(interrupted(), { eagerStart: true }));
      return [error, currentName()];
    }
    const [error, current] = await loop.runUntilComplete(loop.createTask(main(), { name: 'outer' }));
    expect(error).toBe(interrupt);
    expect(current).toBe('outer');
    expect(inner?.exception()).toBe(interrupt);
    expect(inner?.getCoro()).toBeNull();
  });

  it('nested eager tasks each see themselves as current, and the enclosing one again when they return', async () => {
    const log: string[] = [];
    function* level3(): Coroutine<void> {
      log.push(`in 3: ${currentName()}`);
    }
    function* level2(): Coroutine<void> {
      log.push(`in 2: ${currentName()}`);
      loop.createTask(level3(), { name: '3', eagerStart: true });
      log.push(`back in 2: ${currentName()}`);
      yield* sleep(0);
      log.push(`2 resumed: ${currentName()}`);
    }
    function* main(): Coroutine<void> {
      const t = loop.createTask(level2(), { name: '2', eagerStart: true });
      log.push(`back in 1: ${currentName()}`);
      yield* t;
    }
    await loop.runUntilComplete(loop.createTask(main(), { name: '1' }));
    expect(log).toEqual(['in 2: 2', 'in 3: 3', 'back in 2: 2', 'back in 1: 1', '2 resumed: 2']);
  });

  it('context variables: the eager step’s changes stay its own; each side’s tokens reset only its own changes', async () => {
    // CPython 3.13: ['T2 sees 1', 'T2 set 2', 'main sees 1', 'main after reset sees 0', 'T2 later sees 2'],
    // and T2 resetting the creator's token: ValueError('... was created in a different Context').
    const cv = new ContextVar<number>('cv', { default: 0 });
    const log: string[] = [];
    function* setter(): Coroutine<void> {
      log.push(`T2 sees ${cv.get()}`);
      cv.set(2);
      log.push('T2 set 2');
      yield* sleep(0);
      log.push(`T2 later sees ${cv.get()}`);
    }
    function* main(): Coroutine<unknown> {
      const token = cv.set(1);
      const t2 = loop.createTask(setter(), { eagerStart: true });
      log.push(`main sees ${cv.get()}`);
      cv.reset(token);
      log.push(`main after reset sees ${cv.get()}`);
      yield* t2;
      const outerToken = cv.set(5);
      function* bad(): Coroutine<unknown> {
        return thrownBy(() => cv.reset(outerToken));
      }
      const t3 = loop.createTask(bad(), { eagerStart: true });
      cv.reset(outerToken);
      return t3.result();
    }
    const error = await run(main());
    expect(log).toEqual(['T2 sees 1', 'T2 set 2', 'main sees 1', 'main after reset sees 0', 'T2 later sees 2']);
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toMatch(/^<Token var=<ContextVar name='cv'>> was created in a different Context$/);
  });

  it('context variables: a callback’s context is intact after an eager step that changed its own', async () => {
    const cv = new ContextVar<string>('cv', { default: 'none' });
    const seen: string[] = [];
    function* child(): Coroutine<void> {
      cv.set('child');
      seen.push(`child: ${cv.get()}`);
      yield* sleep(0);
      seen.push(`child later: ${cv.get()}`);
    }
    loop.callSoon(() => {
      cv.set('callback');
      loop.createTask(child(), { eagerStart: true });
      seen.push(`callback: ${cv.get()}`);
    });
    await loop.runUntilComplete(sleep(0.1));
    expect(seen).toEqual(['child: child', 'callback: callback', 'child later: child']);
  });

  it('an explicit context is entered for the eager step and keeps its changes', async () => {
    const cv = new ContextVar<number>('cv', { default: 0 });
    const ctx = copyContext();
    function* child(): Coroutine<number> {
      cv.set(42);
      return cv.get();
    }
    function* main(): Coroutine<[number, number, number, boolean]> {
      const t = loop.createTask(child(), { context: ctx, eagerStart: true });
      return [t.result(), ctx.get(cv) ?? -1, cv.get(), t.getContext() === ctx];
    }
    expect(await run(main())).toEqual([42, 42, 0, true]);
  });

  it('a context already entered cannot run the eager step: RuntimeError, the coroutine never starts, no task is left', async () => {
    // CPython raises the same RuntimeError from Task(); its C Task then leaves the wrong current task behind.
    const ctx = new Context();
    let started = false;
    function* child(): Coroutine<void> {
      started = true;
    }
    function* main(): Coroutine<[unknown, string | null, number]> {
      const error = thrownBy(() => ctx.run(() => loop.createTask(child(), { context: ctx, eagerStart: true })));
      return [error, currentName(), allTasks().size];
    }
    const [error, current, tasks] = await loop.runUntilComplete(loop.createTask(main(), { name: 'outer' }));
    expectError(error, RuntimeError, 'cannot enter context: <Context vars=0> is already entered');
    expect(started).toBe(false);
    expect(current).toBe('outer');
    expect(tasks).toBe(1);
  });
});

describe('createEagerTaskFactory', () => {
  it('passes name and context through, and an explicit eagerStart wins', async () => {
    const made: TaskOptions[] = [];
    class Recording<T> extends Task<T> {
      constructor(coro: Coroutine<T>, options: TaskOptions & { loop: EventLoop }) {
        made.push({ ...options, context: options.context === undefined ? undefined : ('ctx' as never) });
        super(coro, options);
      }
    }
    loop.setTaskFactory(createEagerTaskFactory(Recording));
    const ctx = copyContext();
    function* noop(): Coroutine<void> {}
    function* main(): Coroutine<string[]> {
      const a = loop.createTask(noop());
      const b = loop.createTask(noop(), { name: 'b', context: ctx });
      const c = loop.createTask(noop(), { name: 'c', eagerStart: false });
      yield* c;
      return [a.getName().startsWith('Task-') ? 'default' : a.getName(), b.getName(), c.getName()];
    }
    expect(await run(main())).toEqual(['default', 'b', 'c']);
    expect(made.slice(1)).toEqual([
      { loop, eagerStart: true },
      { name: 'b', context: 'ctx', loop, eagerStart: true },
      { name: 'c', loop, eagerStart: false },
    ]);
  });

  it('refuses what is not a constructor', () => {
    expectError(
      thrownBy(() => createEagerTaskFactory(42 as never)),
      TypeError,
      'customTaskConstructor must be a Task class, got 42',
    );
  });
});

/** A factory that counts the tasks made without eagerStart (test_eager_task_factory's AsyncTaskCounter). */
function countingFactory(eager: boolean): { factory: TaskFactory; count: () => number } {
  let taskCount = 0;
  // A constructor called with `new`, as asyncio's CountingTask function is called.
  const CountingTask = function (coro: Coroutine<unknown>, options: TaskOptions & { loop: EventLoop }): Task<unknown> {
    if (options.eagerStart !== true) taskCount++;
    return new Task(coro, { ...options, eagerStart: options.eagerStart ?? false });
  } as unknown as new (coro: Coroutine<unknown>, options: TaskOptions & { loop: EventLoop }) => Task<unknown>;
  const factory: TaskFactory = eager
    ? createEagerTaskFactory(CountingTask)
    : (target, coro, options) => new CountingTask(coro, { ...options, loop: target });
  return { factory, count: () => taskCount };
}

function* awaitableChain(depth: number): Coroutine<number> {
  if (depth === 0) return 0;
  return 1 + (yield* awaitableChain(depth - 1));
}

function* recursiveTaskGroups(width: number, depth: number): Coroutine<void> {
  if (depth === 0) return;
  yield* new TaskGroup().run(function* (tg) {
    for (let i = 0; i < width; i++) tg.createTask(recursiveTaskGroups(width, depth - 1));
  });
}

function* recursiveGather(width: number, depth: number): Coroutine<void> {
  if (depth === 0) return;
  yield* gather(Array.from({ length: width }, () => recursiveGather(width, depth - 1)));
}

describe.each([
  ['NonEagerTests', false, 781],
  ['EagerTests', true, 0],
])('%s (test_eager_task_factory task counting)', (_name, eager, expected) => {
  it('test_awaitables_chain', async () => {
    const counter = countingFactory(eager);
    loop.setTaskFactory(counter.factory);
    expect(await loop.runUntilComplete(awaitableChain(100))).toBe(100);
    expect(counter.count()).toBe(eager ? 0 : 1);
  });

  it('test_recursive_taskgroups', async () => {
    const counter = countingFactory(eager);
    loop.setTaskFactory(counter.factory);
    await loop.runUntilComplete(recursiveTaskGroups(5, 4));
    expect(counter.count()).toBe(expected);
  });

  it('test_recursive_gather', async () => {
    const counter = countingFactory(eager);
    loop.setTaskFactory(counter.factory);
    await loop.runUntilComplete(recursiveGather(5, 4));
    expect(counter.count()).toBe(expected);
  });
});

describe('eager tasks with gather and TaskGroup', () => {
  it('gather of children that all finish eagerly is done at once', async () => {
    loop.setTaskFactory(eagerTaskFactory);
    function* value(n: number): Coroutine<number> {
      return n;
    }
    function* main(): Coroutine<[boolean, number[]]> {
      const outer = gather(value(1), value(2), value(3));
      const done = outer.done();
      return [done, yield* outer];
    }
    expect(await run(main())).toEqual([true, [1, 2, 3]]);
  });

  it('TaskGroup test_name: the child’s name is in place during its eager step', async () => {
    loop.setTaskFactory(eagerTaskFactory);
    let name: string | null = null;
    function* asyncfn(): Coroutine<void> {
      name = currentName();
    }
    await run(
      new TaskGroup().run(function* (tg) {
        tg.createTask(asyncfn(), { name: 'example name' });
      }),
    );
    expect(name).toBe('example name');
  });

  it('TaskGroup test_cancels_task_if_created_during_creation (gh-128550): an eager child that fails at once cancels its sibling at its first wait', async () => {
    loop.setTaskFactory(eagerTaskFactory);
    class MyError extends Error {}
    const log: string[] = [];
    const error = await reasonOf(
      run(
        new TaskGroup().run(function* (tg) {
          function* thirdTask(): Coroutine<never> {
            throw new MyError('third task failed');
          }
          function* secondTask(): Coroutine<void> {
            tg.createTask(thirdTask());
            try {
              yield* sleep(0); // eager tasks cancel here
              log.push('past the first sleep');
              yield* sleep(0); // lazy tasks cancel here
            } catch (e) {
              if (!(e instanceof CancelledError)) throw e;
              log.push('cancelled');
            }
          }
          tg.createTask(secondTask());
        }),
      ),
    );
    expect(log).toEqual(['cancelled']);
    expect(error).toBeInstanceOf(ExceptionGroup);
    expect((error as ExceptionGroup).exceptions).toHaveLength(1);
    expectError((error as ExceptionGroup).exceptions[0], MyError, 'third task failed');
  });
});
