import { afterEach, describe, expect, it } from 'vitest';
import {
  CancelledError,
  ContextVar,
  type EventLoop,
  EventLoopPolicy,
  Runner,
  RuntimeError,
  type Task,
  copyContext,
  createTask,
  currentTask,
  getEventLoop,
  getEventLoopPolicy,
  getRunningLoop,
  newEventLoop,
  run,
  setEventLoopPolicy,
  sleep,
  type Context,
  type Coroutine,
  type ExceptionContext,
} from '../src/index.js';
import { runFixture, startFixture } from './helpers/child-process.js';
import { expectError, reasonOf, thrownBy } from './helpers/errors.js';
import { trackLoops } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

const NO_CURRENT_LOOP = "There is no current event loop in thread 'MainThread'.";

const track = trackLoops();
afterEach(() => setEventLoopPolicy(null));

/** A loop factory on the virtual clock that records the loops it made. */
function virtualFactory(): (() => VirtualLoop) & { made: VirtualLoop[]; calls: unknown[][] } {
  const made: VirtualLoop[] = [];
  const calls: unknown[][] = [];
  const factory = (...args: unknown[]): VirtualLoop => {
    calls.push(args);
    const loop = track(new VirtualLoop());
    made.push(loop);
    return loop;
  };
  return Object.assign(factory, { made, calls });
}

describe('run', () => {
  it("resolves with the main coroutine's result", async () => {
    function* main(): Coroutine<number> {
      yield* sleep(0);
      return 42;
    }
    await expect(run(main())).resolves.toBe(42);
  });

  it("rejects with the main coroutine's own error and still closes the loop", async () => {
    const factory = virtualFactory();
    const error = new RangeError('spam');
    function* main(): Coroutine<void> {
      yield* sleep(1);
      throw error;
    }
    expect(await reasonOf(run(main(), { loopFactory: factory }))).toBe(error);
    expect(factory.made[0]?.isClosed()).toBe(true);
  });

  it('rejects what is not awaitable with TypeError, closing the loop it made first (test_asyncio_run_only_coro, 3.14)', async () => {
    const factory = virtualFactory();
    expectError(await reasonOf(run(1 as never, { loopFactory: factory })), TypeError, 'An asyncio.Future, a coroutine or an awaitable is required');
    function* main(): Coroutine<void> {}
    expectError(await reasonOf(run(main as never, { loopFactory: factory })), TypeError, 'An asyncio.Future, a coroutine or an awaitable is required');
    expect(factory.made.map((loop) => loop.isClosed())).toEqual([true, true]);
  });

  it('runs any awaitable (3.14): a Promise, a thenable, a Future of a loop of its own', async () => {
    await expect(run(Promise.resolve('from a promise'))).resolves.toBe('from a promise');
    const thenable: PromiseLike<string> = { then: (resolve) => Promise.resolve('from a thenable').then(resolve) };
    await expect(run(thenable)).resolves.toBe('from a thenable');
    expectError(await reasonOf(run(Promise.reject(new RangeError('rejected')))), RangeError, 'rejected');
    const other = newEventLoop();
    try {
      const foreign = other.createFuture<string>();
      const error = await reasonOf(run(foreign));
      expect(error).toBeInstanceOf(RuntimeError);
      expect((error as Error).message).toMatch(/^Task <Task pending name='Task-\d+' coro=<wrapAwaitable\(\)> cb=\[runUntilCompleteCallback\(\)\]> got Future <Future pending> attached to a different loop$/);
    } finally {
      other.close();
    }
  });

  it('sets the debug mode of the loop; without the option it stays off', async () => {
    function* debugFlag(): Coroutine<boolean> {
      yield;
      return getRunningLoop().getDebug();
    }
    await expect(run(debugFlag(), { debug: true })).resolves.toBe(true);
    await expect(run(debugFlag(), { debug: false })).resolves.toBe(false);
    await expect(run(debugFlag())).resolves.toBe(false);
  });

  it('refuses to run inside a running loop, leaving the coroutine unrun', async () => {
    const loop = track(new VirtualLoop());
    let innerRan = false;
    function* inner(): Coroutine<void> {
      innerRan = true;
    }
    let rejected: Promise<unknown> | null = null;
    function* main(): Coroutine<void> {
      rejected = reasonOf(run(inner()));
      yield;
    }
    await loop.runUntilComplete(main());
    expectError(await rejected, RuntimeError, 'asyncio.run() cannot be called from a running event loop');
    expect(innerRan).toBe(false);
  });

  it('calls loopFactory once with no arguments and runs main on its loop, without making it current', async () => {
    const factory = virtualFactory();
    let running: EventLoop | null = null;
    let currentError: unknown;
    function* main(): Coroutine<string> {
      running = getRunningLoop();
      currentError = thrownBy(() => getEventLoopPolicy().getEventLoop());
      yield* sleep(3600);
      return 'slept';
    }
    await expect(run(main(), { loopFactory: factory })).resolves.toBe('slept');
    expect(factory.calls).toEqual([[]]);
    expect(running).toBe(factory.made[0]);
    expect(factory.made[0]?.time()).toBe(3600);
    expect(factory.made[0]?.isClosed()).toBe(true);
    expectError(currentError, RuntimeError, NO_CURRENT_LOOP);
  });

  it('makes its own loop the current one during the run, and clears it afterwards', async () => {
    const seen: Array<[current: EventLoop, running: EventLoop]> = [];
    function* main(): Coroutine<void> {
      yield;
      seen.push([getEventLoopPolicy().getEventLoop(), getRunningLoop()]);
    }
    await run(main());
    expect(seen).toHaveLength(1);
    const [current, running] = seen[0] as [EventLoop, EventLoop];
    expect(current).toBe(running);
    expect(current.isClosed()).toBe(true);
    expectError(thrownBy(getEventLoop), RuntimeError, NO_CURRENT_LOOP);
  });

  it('cancels leftover tasks after main returns and waits for their cleanup', async () => {
    const log: string[] = [];
    const leftovers: Array<Task<void>> = [];
    function* leftover(): Coroutine<void> {
      try {
        yield* sleep(3600);
        log.push('leftover woke');
      } finally {
        log.push('leftover finally');
      }
    }
    function* main(): Coroutine<string> {
      leftovers.push(createTask(leftover()));
      yield;
      log.push('main returns');
      return 'main';
    }
    await expect(run(main())).resolves.toBe('main');
    expect(log).toEqual(['main returns', 'leftover finally']);
    expect(leftovers.map((task) => task.cancelled())).toEqual([true]);
  });

  it('reports a leftover that fails while being cancelled with exactly message, exception and task', async () => {
    const contexts: ExceptionContext[] = [];
    const boom = new Error('boom while cancelled');
    const tasks: Array<Task<unknown>> = [];
    function* raises(): Coroutine<void> {
      try {
        yield* sleep(3600);
      } catch {
        throw boom;
      }
    }
    function* swallows(): Coroutine<string> {
      try {
        yield* sleep(3600);
      } catch {
        return 'swallowed';
      }
      return 'slept';
    }
    function* complies(): Coroutine<void> {
      yield* sleep(3600);
    }
    function* main(): Coroutine<void> {
      getRunningLoop().setExceptionHandler((_, context) => contexts.push(context));
      tasks.push(createTask(complies()), createTask(raises()), createTask(swallows()));
      yield;
    }
    await run(main());
    expect(contexts).toHaveLength(1);
    const context = contexts[0] as ExceptionContext;
    expect(Object.keys(context).sort()).toEqual(['exception', 'message', 'task']);
    expect(context.message).toBe('unhandled exception during asyncio.run() shutdown');
    expect(context.exception).toBe(boom);
    expect(context.task).toBe(tasks[1]);
    expect(tasks.map((task) => task.done())).toEqual([true, true, true]);
    expect(tasks[0]?.cancelled()).toBe(true);
    expect(tasks[2]?.result()).toBe('swallowed');
  });

  it('tears down in order: leftovers, async generators, default executor, current loop, close', async () => {
    const log: string[] = [];
    class RecordingLoop extends VirtualLoop {
      override shutdownAsyncgens(): ReturnType<EventLoop['shutdownAsyncgens']> {
        log.push('shutdownAsyncgens');
        return super.shutdownAsyncgens();
      }
      override shutdownDefaultExecutor(timeout: number | null = null): ReturnType<EventLoop['shutdownDefaultExecutor']> {
        log.push(`shutdownDefaultExecutor(${timeout})`);
        return super.shutdownDefaultExecutor(timeout);
      }
      override close(): void {
        log.push(`close running=${this.isRunning()}`);
        super.close();
      }
    }
    class RecordingPolicy extends EventLoopPolicy {
      override newEventLoop(): EventLoop {
        log.push('newEventLoop');
        return track(new RecordingLoop());
      }
      override setEventLoop(loop: EventLoop | null): void {
        log.push(loop === null ? 'setEventLoop(null)' : 'setEventLoop(loop)');
        super.setEventLoop(loop);
      }
    }
    setEventLoopPolicy(new RecordingPolicy());
    function* leftover(): Coroutine<void> {
      try {
        yield* sleep(3600);
      } finally {
        log.push('leftover finally');
      }
    }
    function* main(): Coroutine<string> {
      createTask(leftover());
      yield;
      log.push('main returns');
      return 'done';
    }
    await expect(run(main())).resolves.toBe('done');
    expect(log).toEqual([
      'newEventLoop',
      'setEventLoop(loop)',
      'main returns',
      'leftover finally',
      'shutdownAsyncgens',
      'shutdownDefaultExecutor(300)',
      'setEventLoop(null)',
      'close running=false',
    ]);
  });

  it('rejects with CancelledError when the main task is cancelled by the program', async () => {
    function* main(): Coroutine<void> {
      currentTask()?.cancel('from the program');
      yield;
    }
    const error = await reasonOf(run(main()));
    expectError(error, CancelledError, 'from the program');
  });

  it('listens for SIGINT only while it runs', async () => {
    const before = process.listenerCount('SIGINT');
    let during = -1;
    function* main(): Coroutine<void> {
      during = process.listenerCount('SIGINT');
      yield;
    }
    await run(main());
    expect(before).toBe(0);
    expect(during).toBe(1);
    expect(process.listenerCount('SIGINT')).toBe(0);
  });
});

describe('Runner', () => {
  it('runs several coroutines on one loop, created lazily by loopFactory', async () => {
    const factory = virtualFactory();
    const runner = new Runner({ loopFactory: factory });
    expect(factory.calls).toEqual([]);
    const loop = runner.getLoop();
    expect(factory.calls).toEqual([[]]);
    function* runningLoop(): Coroutine<EventLoop> {
      yield;
      return getRunningLoop();
    }
    await expect(runner.run(runningLoop())).resolves.toBe(loop);
    await expect(runner.run(runningLoop())).resolves.toBe(loop);
    expect(runner.getLoop()).toBe(loop);
    expect(factory.calls).toHaveLength(1);
    expect(loop.isClosed()).toBe(false);
    await runner.close();
    expect(loop.isClosed()).toBe(true);
  });

  it('lets tasks left by one run go on during the next', async () => {
    const runner = new Runner({ loopFactory: virtualFactory() });
    const background: Array<Task<string>> = [];
    function* first(): Coroutine<void> {
      background.push(createTask(sleep(10, 'background done')));
      yield;
    }
    function* second(): Coroutine<string> {
      return yield* background[0] as Task<string>;
    }
    await runner.run(first());
    expect(background.map((task) => task.done())).toEqual([false]);
    await expect(runner.run(second())).resolves.toBe('background done');
    await runner.close();
  });

  it('keeps one context across run() calls; an explicit context leaves it untouched', async () => {
    const cvar = new ContextVar<number>('cvar', { default: -1 });
    function* f(value: number): Coroutine<number> {
      const old = cvar.get();
      yield* sleep(0);
      cvar.set(value);
      return old;
    }
    function* getContext(): Coroutine<Context> {
      yield;
      return copyContext();
    }
    const runner = new Runner();
    try {
      await expect(runner.run(f(1))).resolves.toBe(-1);
      await expect(runner.run(f(2))).resolves.toBe(1);
      const context = await runner.run(getContext());
      expect(context.get(cvar)).toBe(2);
      const explicit = copyContext();
      await expect(runner.run(f(3), { context: explicit })).resolves.toBe(-1);
      expect(explicit.get(cvar)).toBe(3);
      await expect(runner.run(f(4))).resolves.toBe(2);
      expect(cvar.get()).toBe(-1);
    } finally {
      await runner.close();
    }
  });

  it('rejects what is not awaitable with TypeError (test_run_non_coro, 3.14)', async () => {
    const runner = new Runner({ loopFactory: virtualFactory() });
    expectError(await reasonOf(runner.run(123 as never)), TypeError, 'An asyncio.Future, a coroutine or an awaitable is required');
    expectError(await reasonOf(runner.run({ then: 1 } as never)), TypeError, 'An asyncio.Future, a coroutine or an awaitable is required');
    await runner.close();
  });

  it('runs a Future of its loop (test_run_future, 3.14) and a thenable (test_run_awaitable), in its context', async () => {
    const runner = new Runner({ loopFactory: virtualFactory() });
    try {
      const fut = runner.getLoop().createFuture<string>();
      fut.setResult('done');
      await expect(runner.run(fut)).resolves.toBe('done');
      const cvar = new ContextVar<string>('cvar', { default: 'unset' });
      const seen: PromiseLike<string> = { then: (resolve) => Promise.resolve(cvar.get()).then(resolve) };
      await expect(runner.run(seen)).resolves.toBe('unset');
      const pending = runner.getLoop().createFuture<number>();
      runner.getLoop().callLater(1, () => pending.setResult(42));
      await expect(runner.run(pending)).resolves.toBe(42);
    } finally {
      await runner.close();
    }
  });

  it('refuses run() from inside its own running loop and closes the coroutine unrun', async () => {
    const runner = new Runner({ loopFactory: virtualFactory() });
    let innerRan = false;
    function* inner(): Coroutine<void> {
      innerRan = true;
    }
    const innerCoro = inner();
    let rejected: Promise<unknown> | null = null;
    function* main(): Coroutine<string> {
      rejected = reasonOf(runner.run(innerCoro));
      yield;
      return 'outer done';
    }
    await expect(runner.run(main())).resolves.toBe('outer done');
    expectError(await rejected, RuntimeError, 'Runner.run() cannot be called from a running event loop');
    expect(innerRan).toBe(false);
    expect(innerCoro.next()).toEqual({ done: true, value: undefined });
    await runner.close();
  });

  it("throws RuntimeError('Runner is closed') after close(), which may be called again", async () => {
    const runner = new Runner({ loopFactory: virtualFactory() });
    function* main(): Coroutine<number> {
      yield;
      return 1;
    }
    await expect(runner.run(main())).resolves.toBe(1);
    await runner.close();
    await runner.close();
    expectError(await reasonOf(runner.run(main())), RuntimeError, 'Runner is closed');
    expectError(thrownBy(() => runner.getLoop()), RuntimeError, 'Runner is closed');
  });

  it('does nothing on close() before first use', async () => {
    const factory = virtualFactory();
    const runner = new Runner({ loopFactory: factory });
    await runner.close();
    expect(factory.calls).toEqual([]);
  });

  it('applies the debug option to its loop', () => {
    const runner = new Runner({ debug: true, loopFactory: virtualFactory() });
    expect(runner.getLoop().getDebug()).toBe(true);
    return runner.close();
  });
});

describe('run reports what nobody retrieved', () => {
  it('reports the error of a task nobody awaited before the process ends, once', async () => {
    const exit = await runFixture('runners-report.mjs', 'unretrieved');
    expect(exit.code).toBe(0);
    expect(exit.stdout).toBe('main done\n');
    const reports = exit.stderr.split('Task exception was never retrieved').length - 1;
    expect(reports).toBe(1);
    expect(exit.stderr).toMatch(/^Task exception was never retrieved\nfuture: <Task finished name='forgotten' coro=<[^\n]*exception=RangeError\('nobody awaits me'\)>\nRangeError: nobody awaits me\n\s+at failing \(.*runners-report\.mjs:\d+:\d+\)/);
  });
});

describe('run and SIGINT', () => {
  it.each([
    [
      'cancels the main task on the first SIGINT, and run() rejects with KeyboardInterrupt',
      'cancel',
      'ready\nrejected KeyboardInterrupt awaited-cancelled=true\n',
    ],
    [
      'rejects with CancelledError when the program also cancelled the main task',
      'user-cancel',
      'ready\nrejected CancelledError awaited-cancelled=true\n',
    ],
  ])('%s', async (_name, mode, stdout) => {
    const child = startFixture('runners-sigint.mjs', mode);
    await child.printed('ready\n');
    child.child.kill('SIGINT');
    await expect(child.exited).resolves.toEqual({ code: 0, signal: null, stdout, stderr: '' });
  });

  it('ends the process with exit code 130 on a second SIGINT when the task swallowed the first', async () => {
    const child = startFixture('runners-sigint.mjs', 'second');
    await child.printed('ready\n');
    child.child.kill('SIGINT');
    await child.printed('caught CancelledError\n');
    child.child.kill('SIGINT');
    await expect(child.exited).resolves.toEqual({
      code: 130,
      signal: null,
      stdout: 'ready\ncaught CancelledError\n',
      stderr: '',
    });
  });

  it('ends the process with exit code 130 when the KeyboardInterrupt of run() is not caught, as Python does', async () => {
    const child = startFixture('runners-report.mjs', 'interrupt');
    await child.printed('ready\n');
    child.child.kill('SIGINT');
    const exit = await child.exited;
    expect(exit.code).toBe(130);
    expect(exit.stderr).toMatch(/^KeyboardInterrupt\n\s+at (Runner\.)?#?run /m);
  });
});
