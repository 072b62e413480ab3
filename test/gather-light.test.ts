/**
 * gather runs coroutines without a Task each until one is needed (src/gather.ts). Each scenario
 * runs twice, once with gather's own children and once with a task factory that makes a plain
 * Task per child (asyncio's way: `create_task` for every coroutine), and the two traces must be
 * the same: the order of steps and callbacks, task names, what `currentTask()` and `allTasks()`
 * answer, contexts, cancellations, errors and results. Eager scenarios compare
 * `eagerTaskFactory` with `createEagerTaskFactory(Task)` (which makes its Tasks the usual way).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ContextVar,
  KeyboardInterrupt,
  Task,
  allTasks,
  createEagerTaskFactory,
  createTask,
  currentTask,
  eagerTaskFactory,
  gather,
  getRunningLoop,
  isCoroutine,
  newEventLoop,
  sleep,
  type Coroutine,
  type EventLoop,
  type TaskFactory,
} from '../src/index.js';
import { snapshotThisThread } from '../src/internal/snapshot.js';

type Mode = 'light' | 'tasks' | 'eager-light' | 'eager-tasks';

const plainTasks: TaskFactory = (loop, coro, options) => new Task(coro, { ...options, loop });
const eagerPlainTasks = createEagerTaskFactory(Task);

function factoryOf(mode: Mode): TaskFactory | null {
  if (mode === 'tasks') return plainTasks;
  if (mode === 'eager-light') return eagerTaskFactory;
  if (mode === 'eager-tasks') return eagerPlainTasks;
  return null;
}

/** Run `scenario` on a fresh loop in `mode`; task names are given relative to a task made first. */
async function traceOf(mode: Mode, scenario: (log: (line: string) => void, name: (task: Task<unknown> | null) => string) => Coroutine<unknown>): Promise<string[]> {
  const loop = newEventLoop();
  const lines: string[] = [];
  const log = (line: string): void => {
    lines.push(line);
  };
  function* marker(): Coroutine<void> {}
  const base = Number(new Task(marker(), { loop }).getName().slice('Task-'.length));
  const name = (task: Task<unknown> | null): string => {
    if (task === null) return 'none';
    const match = /^Task-(\d+)$/.exec(task.getName());
    return match === null ? task.getName() : `T+${Number(match[1]) - base}`;
  };
  loop.setTaskFactory(factoryOf(mode));
  try {
    const result = await loop.runUntilComplete(scenario(log, name));
    log(`result ${JSON.stringify(result)}`);
  } catch (error) {
    log(`error ${(error as Error).name}: ${(error as Error).message}`);
  } finally {
    loop.close();
  }
  return lines;
}

async function expectSameLazy(scenario: Parameters<typeof traceOf>[1]): Promise<string[]> {
  const light = await traceOf('light', scenario);
  expect(light).toEqual(await traceOf('tasks', scenario));
  return light;
}

async function expectSameEager(scenario: Parameters<typeof traceOf>[1]): Promise<string[]> {
  const light = await traceOf('eager-light', scenario);
  expect(light).toEqual(await traceOf('eager-tasks', scenario));
  return light;
}

async function expectSameBoth(scenario: Parameters<typeof traceOf>[1]): Promise<void> {
  await expectSameLazy(scenario);
  await expectSameEager(scenario);
}

describe('gather without a Task per child', () => {
  it('runs the children where their Tasks would run, between the callbacks around them', async () => {
    const trace = await expectSameLazy(function* (log) {
      const loop = currentTask()!.getLoop();
      loop.callSoon(() => log('callback before'));
      function* child(i: number): Coroutine<number> {
        log(`child ${i}`);
        loop.callSoon(() => log(`callback of child ${i}`));
        return i * 10;
      }
      const gathered = gather(child(0), child(1), child(2));
      // Without a task factory the children are light: no Task yet, the gather waits in the queue.
      if (loop.getTaskFactory() === null) expect(loop._lightGathers?.size).toBe(1);
      loop.callSoon(() => log('callback after'));
      const results = yield* gathered;
      log('gathered');
      return results;
    });
    expect(trace).toEqual([
      'callback before',
      'child 0',
      'child 1',
      'child 2',
      'callback after',
      'callback of child 0',
      'callback of child 1',
      'callback of child 2',
      'gathered',
      'result [0,10,20]',
    ]);
  });

  it('runs eager children inside gather, in order, before gather returns', async () => {
    const trace = await expectSameEager(function* (log) {
      function* child(i: number): Coroutine<number> {
        log(`child ${i}`);
        // With eagerTaskFactory the child runs light: no Task unless asked for.
        const loop = getRunningLoop();
        if (loop.getTaskFactory() === eagerTaskFactory) expect([loop._currentTask, loop._lightParent === null]).toEqual([null, false]);
        return i;
      }
      const gathered = gather([child(1), child(2)]);
      log(`gather returned, done: ${gathered.done()}`);
      return yield* gathered;
    });
    expect(trace).toEqual(['child 1', 'child 2', 'gather returned, done: true', 'result [1,2]']);
  });

  it('gives a child asking for currentTask() the Task createTask would have made, the same in its later steps', async () => {
    await expectSameBoth(function* (log, name) {
      function* child(i: number): Coroutine<string> {
        const mine = currentTask();
        log(`child ${i} is ${name(mine)}, done ${mine?.done()}`);
        yield* sleep(0);
        log(`child ${i} again ${currentTask() === mine}`);
        return name(mine);
      }
      function* quiet(): Coroutine<string> {
        return 'quiet';
      }
      const results = yield* gather(quiet(), child(1), quiet(), child(2));
      const after = createTask(quiet());
      log(`made after: ${name(after)}`);
      yield* after;
      return results;
    });
  });

  it('lists the children not started yet, and the one running, in allTasks()', async () => {
    await expectSameBoth(function* (log, name) {
      function* lister(): Coroutine<void> {
        const names = [...allTasks()].map((task) => name(task)).sort();
        log(`listed by ${name(currentTask())}: ${names.join(' ')}`);
      }
      function* quiet(): Coroutine<number> {
        return 1;
      }
      yield* gather(quiet(), lister(), quiet(), lister(), quiet());
      log(`after: ${[...allTasks()].map((task) => name(task)).join(' ')}`);
    });
  });

  it('keeps what a child sets in its context to that child', async () => {
    const level = new ContextVar<string>('level', { default: 'outer' });
    await expectSameBoth(function* (log, name) {
      level.set('main');
      function* setter(i: number): Coroutine<string> {
        log(`child ${i} reads ${level.get()}`);
        const token = level.set(`child ${i}`);
        log(`child ${i} set, task ${name(currentTask())}`);
        yield* sleep(0);
        log(`child ${i} reads ${level.get()} after a step`);
        level.reset(token);
        return level.get();
      }
      function* reader(i: number): Coroutine<string> {
        return `${i}:${level.get()}`;
      }
      const results = yield* gather(setter(1), reader(2), setter(3), reader(4));
      log(`main reads ${level.get()}`);
      return results;
    });
  });

  it('gives a child that waits its Task, and the gather its result once it is back', async () => {
    await expectSameBoth(function* (log, name) {
      function* waits(i: number, delay: number): Coroutine<number> {
        log(`child ${i} starts`);
        yield* sleep(delay);
        log(`child ${i} ends as ${name(currentTask())}`);
        return i;
      }
      function* bare(): Coroutine<string> {
        yield;
        return 'yielded once';
      }
      return yield* gather(waits(1, 0.002), bare(), waits(2, 0.001));
    });
  });

  it('fails the gather with the first error and leaves the others running; returnExceptions lists them', async () => {
    await expectSameBoth(function* (log) {
      function* fails(message: string): Coroutine<never> {
        throw new RangeError(message);
      }
      function* later(): Coroutine<string> {
        yield* sleep(0.001);
        log('later finished anyway');
        return 'later';
      }
      const outcomes = yield* gather([fails('first'), later(), fails('second')], { returnExceptions: true });
      log(outcomes.map((outcome) => (outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : String(outcome))).join(', '));
      try {
        yield* gather(fails('only'), later());
      } catch (error) {
        log(`caught ${(error as Error).message}`);
      }
      yield* sleep(0.005);
    });
  });

  it('delivers a cancellation of the gather to children that have not started', async () => {
    const trace = await expectSameLazy(function* (log, name) {
      function* child(i: number): Coroutine<number> {
        try {
          log(`child ${i} runs`);
          yield* sleep(1);
          return i;
        } catch (error) {
          log(`child ${i} ${(error as Error).name} in ${name(currentTask())}`);
          throw error;
        }
      }
      const gathered = gather(child(1), child(2));
      log(`cancel: ${gathered.cancel('enough')}`);
      try {
        yield* gathered;
      } catch (error) {
        log(`gather: ${(error as Error).name} ${(error as Error).message}`);
      }
      return 'done';
    });
    expect(trace).toContain('gather: CancelledError enough');
  });

  it('answers a cancellation from inside a child that is running its first step', async () => {
    await expectSameBoth(function* (log) {
      let gathered: ReturnType<typeof gather> | null = null;
      function* canceller(): Coroutine<string> {
        log(`cancelled by a child: ${gathered?.cancel()}`);
        return 'returned';
      }
      function* other(): Coroutine<string> {
        yield* sleep(0);
        return 'other';
      }
      gathered = gather(other(), canceller(), other());
      try {
        log(`gathered ${JSON.stringify(yield* gathered)}`);
      } catch (error) {
        log(`gather: ${(error as Error).name}`);
      }
    });
  });

  it('starts nested gathers inside a child as Tasks would start, the outer child listed meanwhile', async () => {
    await expectSameBoth(function* (log, name) {
      function* inner(i: number): Coroutine<string> {
        log(`inner ${i} in ${name(currentTask())}; tasks ${[...allTasks()].map((task) => name(task)).sort().join(' ')}`);
        return `inner ${i}`;
      }
      function* outer(i: number): Coroutine<string[]> {
        const results = yield* gather(inner(i * 10), inner(i * 10 + 1));
        log(`outer ${i} in ${name(currentTask())}`);
        return results;
      }
      return yield* gather(outer(1), outer(2));
    });
  });

  it('leaves the children an escaping error interrupted at the front of the queue for the next run', async () => {
    for (const mode of ['light', 'tasks'] as const) {
      const loop = newEventLoop();
      loop.setTaskFactory(factoryOf(mode));
      const lines: string[] = [];
      function* child(i: number): Coroutine<number> {
        lines.push(`child ${i}`);
        if (i === 1) throw new KeyboardInterrupt('stop here');
        return i;
      }
      let gathered: ReturnType<typeof gather> | null = null;
      function* main(): Coroutine<void> {
        gathered = gather([child(0), child(1), child(2), child(3)]);
        yield* sleep(0.01);
      }
      lines.push(await loop.runUntilComplete(main()).then(() => 'finished', (error: Error) => error.name));
      loop.callSoon(() => lines.push('callback of the second run'));
      await loop.runUntilComplete(sleep(0));
      const outcome = gathered as unknown as ReturnType<typeof gather>;
      lines.push(`gathered: ${outcome.done() ? String(outcome.exception()) : 'pending'}`);
      for (const task of allTasks(loop)) task.cancel();
      await loop.runUntilComplete(sleep(0));
      loop.close();
      expect(lines, mode).toEqual(['child 0', 'child 1', 'KeyboardInterrupt', 'child 2', 'child 3', 'callback of the second run', 'gathered: KeyboardInterrupt: stop here']);
    }
  });

  it('shows children not started yet as tasks of the loop in a snapshot', async () => {
    const loop = newEventLoop();
    function* child(): Coroutine<number> {
      return 1;
    }
    function* main(): Coroutine<number[]> {
      const gathered = gather(child(), child(), child());
      const names = snapshotThisThread()
        .tasks.map((row) => row.name)
        .sort();
      expect(names).toHaveLength(4);
      expect(names).toContain(currentTask()!.getName());
      return yield* gathered;
    }
    expect(await loop.runUntilComplete(main())).toEqual([1, 1, 1]);
    loop.close();
  });

  it('makes a Task per child under debug mode, a task factory, or a createTask of its own', async () => {
    const loop = newEventLoop();
    const made: string[] = [];
    class Counting extends (loop.constructor as new () => EventLoop) {
      override createTask<T>(coro: Coroutine<T>, options?: Parameters<EventLoop['createTask']>[1]): Task<T> {
        made.push('createTask');
        return super.createTask(coro, options);
      }
    }
    const own = new Counting();
    function* child(): Coroutine<number> {
      return 2;
    }
    function* main(): Coroutine<number[]> {
      return yield* gather(child(), child());
    }
    expect(await own.runUntilComplete(main())).toEqual([2, 2]);
    expect(made).toEqual(['createTask', 'createTask', 'createTask']);
    own.close();
    loop.close();
  });

  it('runs callbacks a child adds to its own Task in its first step before the gather hears of it', async () => {
    await expectSameBoth(function* (log, name) {
      function* child(i: number, waits: boolean): Coroutine<number> {
        currentTask()!.addDoneCallback((task) => log(`callback of ${name(task as Task<unknown>)}`));
        if (waits) yield* sleep(0);
        return i;
      }
      function* quiet(): Coroutine<number> {
        return 0;
      }
      const gathered = gather(quiet(), child(1, true), child(2, false));
      gathered.addDoneCallback(() => log('gather done'));
      const results = yield* gathered;
      log(`results ${results.join(',')}`);
    });
  });

  it('numbers tasks made inside children as they would be numbered among Tasks', async () => {
    await expectSameBoth(function* (log, name) {
      function* leaf(): Coroutine<string> {
        return name(currentTask());
      }
      function* maker(i: number): Coroutine<string> {
        const made = createTask(leaf());
        log(`child ${i} made ${name(made)}`);
        return yield* made;
      }
      return yield* gather(maker(1), leaf(), maker(2));
    });
  });

  it('returns an independent list: the array given stays as it was', async () => {
    const loop = newEventLoop();
    function* child(i: number): Coroutine<number> {
      return i + 1;
    }
    const given = [child(1), child(2)];
    const copy = [...given];
    function* main(): Coroutine<number[]> {
      return yield* gather(given);
    }
    expect(await loop.runUntilComplete(main())).toEqual([2, 3]);
    expect(given).toEqual(copy);
    loop.close();
  });

  it('reports a cancelled gather with the message of the cancellation, children finished or not', async () => {
    await expectSameBoth(function* (log) {
      function* quick(): Coroutine<number> {
        return 1;
      }
      function* slow(): Coroutine<number> {
        yield* sleep(1);
        return 2;
      }
      const gathered = gather(quick(), slow(), quick());
      yield* sleep(0);
      log(`cancel: ${gathered.cancel('stop')}`);
      try {
        yield* gathered;
      } catch (error) {
        log(`${(error as Error).name}: ${(error as Error).message} ${error instanceof CancelledError}`);
      }
    });
  });
});

describe('gather without a Task per child, AsyncLocalStorage first used inside a child', () => {
  // Last in this file: the first use of a store turns async contexts on for the whole process.
  it('gives the child its Task and store, its siblings none, as Tasks would', async () => {
    const storage = new AsyncLocalStorage<string>();
    const scenario = (tag: string) =>
      function* (log: (line: string) => void): Coroutine<void> {
        function* child(i: number): Coroutine<void> {
          if (i === 0) storage.enterWith(`${tag}-zero`);
          log(`child ${i} first step: ${storage.getStore()}`);
          yield* sleep(0);
          log(`child ${i} later: ${storage.getStore()}`);
        }
        yield* gather(child(0), child(1), child(2));
        log(`main: ${storage.getStore()}`);
      };
    const light = await traceOf('light', scenario('x'));
    expect(light).toEqual(await traceOf('tasks', scenario('x')));
    expect(light).toContain('child 0 later: x-zero');
    expect(light).toContain('child 1 later: undefined');
    expect(light).toContain('main: undefined');
  });
});

describe('isCoroutine', () => {
  it('knows generator objects, coroutine-like objects, and nothing else', () => {
    function* plain(): Coroutine<number> {
      return 1;
    }
    async function* asyncGenerator(): AsyncGenerator<number> {
      yield 1;
    }
    const like = { next: () => ({ done: true, value: 1 }), throw: () => ({ done: true, value: 1 }), return: () => ({ done: true, value: 1 }) };
    const loop = newEventLoop();
    expect(isCoroutine(plain())).toBe(true);
    expect(isCoroutine(like)).toBe(true);
    expect(isCoroutine(asyncGenerator())).toBe(true);
    expect(isCoroutine(Object.create(null))).toBe(false);
    expect(isCoroutine(Object.create(Object.create(null)))).toBe(false);
    expect(isCoroutine(loop.createFuture())).toBe(false);
    expect(isCoroutine(plain)).toBe(false);
    expect(isCoroutine([1, 2])).toBe(false);
    expect(isCoroutine(null)).toBe(false);
    loop.close();
  });
});
