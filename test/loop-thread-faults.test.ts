/**
 * LoopThread faults, with real worker threads: modules that cannot be loaded, threads that die
 * mid-call (exit, uncaught error, terminate, out of memory), values that cannot be cloned,
 * names that are not exported functions, close(), and the lifetime of the process.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  type ConcurrentFuture,
  type EventLoop,
  type Future,
  LoopThread,
  RuntimeError,
  gather,
  getRunningLoop,
  newEventLoop,
  run,
  TimeoutError,
  setEventLoop,
  sleep,
  type Coroutine,
  type ExceptionContext,
  type LoopThreadOptions,
} from '../src/index.js';
import { runFixture } from './helpers/child-process.js';
import { Recorder, awaitPromise, errorOf, outcome, useThreads } from './helpers/loop-threads.js';
import { useFreshLoop } from './helpers/loops.js';

const SERVICE = new URL('./fixtures/lt-service.mjs', import.meta.url);
/** How an unknown name's message lists the functions of lt-service.mjs. */
const SERVICE_FUNCTIONS = "its functions: 'add', 'askParent', 'askParentBlocking', 'askParentDeep', 'askParentThenCancel' and 36 more";

let loop: EventLoop;
useFreshLoop(() => (loop = newEventLoop()), { current: true });
// Registered after the loop, so its threads end before the loop closes.
const threads = useThreads();

describe('LoopThread.start failures', () => {
  it("rejects with the module's own error when the module throws while it is imported", async () => {
    const error = await LoopThread.start(new URL('./fixtures/lt-import-error.mjs', import.meta.url)).then(
      () => null,
      (caught: unknown) => caught as RangeError & { code?: string },
    );
    expect(error).toBeInstanceOf(RangeError);
    expect(error!.message).toBe('the service is misconfigured');
    expect(error!.code).toBe('E_CONFIG');
    expect(error!.stack).toMatch(/^RangeError: the service is misconfigured\n\s+at .*lt-import-error\.mjs:\d+:\d+/);
  });

  it('rejects with the SyntaxError of a module that does not parse', async () => {
    const start = LoopThread.start(new URL('./fixtures/lt-syntax-error.mjs', import.meta.url));
    await expect(start).rejects.toThrow(SyntaxError);
    await expect(start).rejects.toThrow('Unexpected end of input');
  });

  it('rejects with ERR_MODULE_NOT_FOUND for a missing module', async () => {
    const missing = new URL('./fixtures/lt-missing.mjs', import.meta.url);
    const error = await LoopThread.start(missing).then(
      () => null,
      (caught: unknown) => caught as Error & { code?: string; url?: string },
    );
    expect(error).toBeInstanceOf(Error);
    expect(error!.code).toBe('ERR_MODULE_NOT_FOUND');
    expect(error!.url).toBe(missing.href);
    expect(error!.message).toMatch(new RegExp(`^Cannot find module '${fileURLToPath(missing)}' imported from `));
  });

  it('refuses a relative path or a value that is not a URL', async () => {
    await expect(LoopThread.start('./fixtures/lt-service.mjs')).rejects.toThrow(
      new TypeError("LoopThread.start() needs an absolute path or a file: URL, got './fixtures/lt-service.mjs'"),
    );
    await expect(LoopThread.start(42 as never)).rejects.toThrow(
      new TypeError('LoopThread.start() needs an absolute path or a file: URL, got 42'),
    );
  });
});

/** Arrays nested `depth` deep around 'leaf'. */
function deepArray(depth: number): unknown {
  let value: unknown = 'leaf';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** How a test makes the thread die while calls are pending. */
type Killer = (thread: LoopThread, pending: Array<Future<unknown>>) => void;

interface Death {
  thread: LoopThread;
  /** The error of every call that was pending. */
  errors: Error[];
  /** For each pending call, whether all of them were done when its done callback ran. */
  allDoneAtEach: boolean[];
}

/** Start a thread, park three calls in it, let `kill` end it, and collect how the calls ended. */
function dieMidCall(name: string, kill: Killer, options: LoopThreadOptions = {}): Promise<Death> {
  const recorder = new Recorder();
  return loop.runUntilComplete(
    (function* (): Coroutine<Death> {
      const thread = yield* threads.start(SERVICE, { name, expose: { record: recorder.record }, ...options });
      const pending: Array<Future<unknown>> = [thread.call('park', 'a'), thread.call('park', 'b'), thread.call('slowAdd', 1, 2, 3600)];
      yield* recorder.until('b: started');
      kill(thread, pending);
      const allDoneAtEach: boolean[] = [];
      for (const future of pending) future.addDoneCallback(() => allDoneAtEach.push(pending.every((f) => f.done())));
      const results = yield* gather(pending, { returnExceptions: true });
      // The done callbacks were scheduled before gather's wake-up; let them all run.
      yield;
      return { thread, errors: results as Error[], allDoneAtEach };
    })(),
  );
}

/** Check that every pending call failed with `message`, at once, and that later calls fail at once. */
function expectDead({ thread, errors, allDoneAtEach }: Death, message: string): void {
  expect(allDoneAtEach).toEqual(errors.map(() => true));
  for (const error of errors) {
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toBe(message);
  }
  expect(thread.isDead()).toBe(true);
  const later = thread.call('add', 1, 2);
  expect(later.getLoop()).toBe(loop);
  expect(later.done()).toBe(true);
  expect(later.exception()).toBeInstanceOf(RuntimeError);
  expect(later.exception()!.message).toBe(message);
  expect(() => thread.callSoonThreadsafe('add', 1, 2)).toThrow(new RuntimeError(message));
}

describe('a LoopThread that dies mid-call', () => {
  it('fails every pending call at once when the thread calls process.exit(code)', async () => {
    const death = await dieMidCall('exiting', (thread, pending) => pending.push(thread.call('exitNow', 3)));
    expect(death.errors).toHaveLength(4);
    expectDead(death, `LoopThread 'exiting' (thread ${death.thread.threadId}) died: it exited with code 3`);
  });

  it('fails every pending call at once on an uncaught error, which becomes the cause', async () => {
    const death = await dieMidCall('crashing', (thread) => thread.callSoonThreadsafe('crashLater'));
    expectDead(death, `LoopThread 'crashing' (thread ${death.thread.threadId}) died: uncaught Error: boom in a timer`);
    const cause = death.errors[0]!.cause as Error;
    expect(cause).toBeInstanceOf(Error);
    expect(cause.message).toBe('boom in a timer');
    expect(cause.stack).toMatch(/^Error: boom in a timer\n\s+at Timeout\._onTimeout .*lt-service\.mjs/);
  });

  it('fails every pending call at once when the thread is terminated', async () => {
    const ended: Array<Promise<void>> = [];
    const death = await dieMidCall('terminated', (thread) => ended.push(thread.terminate()));
    await Promise.all(ended);
    expectDead(death, `LoopThread 'terminated' (thread ${death.thread.threadId}) died: it was terminated`);
  });

  it('fails every pending call at once when the thread runs out of memory', async () => {
    const death = await dieMidCall('hungry', (thread, pending) => pending.push(thread.call('hog')), {
      resourceLimits: { maxOldGenerationSizeMb: 16 },
    });
    expect(death.errors).toHaveLength(4);
    expectDead(death, `LoopThread 'hungry' (thread ${death.thread.threadId}) died: it ran out of memory (resourceLimits exceeded)`);
  });

  it('fails the calls of every loop that called it, and close() still resolves', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'shared' });
    const other = newEventLoop();
    try {
      // A call of another loop, left pending while that loop is stopped.
      // Futures are thenables: they travel out of runUntilComplete inside an object.
      const { call: stranded } = await other.runUntilComplete(
        (function* () {
          const call = thread.call('slowAdd', 1, 1, 3600);
          yield* thread.call('add', 0, 0);
          return { call };
        })(),
      );
      const { call: mine } = await loop.runUntilComplete(
        (function* () {
          const call = thread.call('slowAdd', 2, 2, 3600);
          yield* outcome(thread.call('exitNow', 9));
          return { call };
        })(),
      );
      const message = `LoopThread 'shared' (thread ${thread.threadId}) died: it exited with code 9`;
      expect(mine.exception()!.message).toBe(message);
      expect(stranded.exception()!.message).toBe(message);
      await thread.close();
      expect(thread.isDead()).toBe(true);
    } finally {
      other.close();
    }
  });
});

describe('a LoopThread that dies during submit()', () => {
  it('fails a pending submitted call with the same error', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'submitted' });
    const submitted = thread.submit('slowAdd', 1, 2, 3600);
    const done = new Promise<void>((resolve) => submitted.addDoneCallback(() => resolve()));
    await thread.terminate();
    await done;
    const error = submitted.exception();
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error!.message).toBe(`LoopThread 'submitted' (thread ${thread.threadId}) died: it was terminated`);
    const later = thread.submit('add', 1, 2);
    expect(later.done()).toBe(true);
    expect(later.exception()!.message).toBe(error!.message);
  });

  it('wakes a caller blocked in result(timeout) when the thread exits meanwhile', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'blocked' });
    const submitted = thread.submit('exitNow', 4);
    let caught: unknown = null;
    try {
      // Far longer than an exit takes: a caller that is not woken sees TimeoutError instead.
      submitted.result(10);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(RuntimeError);
    expect((caught as Error).message).toBe(`LoopThread 'blocked' (thread ${thread.threadId}) died: it exited with code 4`);
    // Known at once, before the worker's 'exit' event could be delivered to this blocked thread.
    expect(thread.isDead()).toBe(true);
  }, 30_000);

  it('names the uncaught error that ended the thread to a caller blocked in result(timeout)', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'crashing' });
    thread.callSoonThreadsafe('crashLater');
    const submitted = thread.submit('slowAdd', 1, 2, 3600);
    let caught: unknown = null;
    try {
      submitted.result(10);
    } catch (error) {
      caught = error;
    }
    expect(thread.isDead()).toBe(true);
    expect(caught).toBeInstanceOf(RuntimeError);
    const message = `LoopThread 'crashing' (thread ${thread.threadId}) died: uncaught Error: boom in a timer`;
    expect((caught as Error).message).toBe(message);
    expect(((caught as Error).cause as Error).message).toBe('boom in a timer');
    // The worker's own events, arriving later, change nothing.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(thread.call('add', 1, 2).exception()!.message).toBe(message);
  }, 30_000);

  it('says what is known when no answer came in time from a thread that ran out of memory', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'hungry', resourceLimits: { maxOldGenerationSizeMb: 16 } });
    const submitted = thread.submit('hog');
    expect(() => submitted.result(0.5)).toThrow(
      new TimeoutError(
        "no answer from LoopThread 'hungry' within 0.5 seconds: the call may still run there, or the thread ended " +
          'without running JavaScript (terminated, or out of memory)',
      ),
    );
  }, 30_000);
});

describe('messages the other thread cannot read', () => {
  it('fails only the call whose result the caller cannot read; its batch-mates arrive', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'deep' });
    const seen = await loop.runUntilComplete(
      (function* () {
        // One iteration: the three results travel back in one batch.
        const calls = [thread.call('add', 1, 2), thread.call('deep', 8000), thread.call('add', 3, 4)];
        const outcomes = [];
        for (const call of calls) outcomes.push(yield* outcome(call));
        return { outcomes, after: yield* thread.call('add', 5, 6) };
      })(),
    );
    expect(seen.outcomes[0]).toEqual({ value: 3 });
    expect(seen.outcomes[2]).toEqual({ value: 7 });
    const error = errorOf(seen.outcomes[1]!);
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      "the result of 'deep' could not be read by a loop of the parent thread (RangeError: Maximum call stack size exceeded)",
    );
    expect((error.cause as Error).name).toBe('RangeError');
    expect(seen.after).toBe(11);
  });

  it('fails only the call whose arguments the thread cannot read, and keeps the names first sent beside it', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'small-stack', resourceLimits: { stackSizeMb: 0.5 } });
    const contexts: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => contexts.push(context));
    const seen = await loop.runUntilComplete(
      (function* () {
        // One batch: 'depthOf', 'add' and 'count' are first named in it, beside the unreadable argument.
        const deepArg = thread.call('depthOf', deepArray(3000));
        const add = thread.call('add', 1, 2);
        thread.callSoonThreadsafe('inc', deepArray(3000));
        const count = thread.call('count');
        const outcomes = [yield* outcome(deepArg), yield* outcome(add), yield* outcome(count)];
        return { outcomes, again: [yield* thread.call('add', 2, 2), yield* thread.call('depthOf', deepArray(10))] };
      })(),
    );
    const error = errorOf(seen.outcomes[0]!);
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      "LoopThread 'small-stack' could not read the arguments of call 'depthOf' (RangeError: Maximum call stack size exceeded)",
    );
    expect(seen.outcomes.slice(1)).toEqual([{ value: 3 }, { value: 0 }]);
    expect(seen.again).toEqual([4, { depth: 10, leaf: 'leaf' }]);
    expect(contexts.map((context) => context.message)).toEqual([
      "LoopThread 'small-stack' could not read the arguments of callSoonThreadsafe 'inc' (RangeError: Maximum call stack size exceeded)",
    ]);
  });

  it('fails a blocked result(timeout) whose reply the blocked thread cannot read, with the reason', async () => {
    const recorder = new Recorder();
    const seen = await loop.runUntilComplete(
      (function* () {
        const thread = yield* threads.start(SERVICE, {
          name: 'small-blocked',
          resourceLimits: { stackSizeMb: 0.5 },
          expose: { record: recorder.record, makeDeep: (depth: number) => deepArray(depth) },
        });
        return [yield* thread.call('askParentDeep', 3000, 10), yield* thread.call('askParentDeep', 10, 10)];
      })(),
    );
    expect(seen).toEqual([
      "RangeError: the result of 'makeDeep' could not be read by LoopThread 'small-blocked' (RangeError: Maximum call stack size exceeded)",
      { depth: 10, leaf: 'leaf' },
    ]);
  });
});

describe('values that cannot be cloned', () => {
  it.each([
    ['a function', () => 1, 'Function'],
    ['a symbol', Symbol('s'), 'symbol'],
    ['a WeakMap', new WeakMap(), 'WeakMap'],
    ['an object holding a function', { callback: () => 1 }, 'Object'],
  ])('as an argument (%s): the call fails with a TypeError naming its type; both loops go on', async (_what, value, type) => {
    const thread = await threads.startOutside(SERVICE, { name: 'svc' });
    const seen = await loop.runUntilComplete(
      (function* () {
        const failed = yield* outcome(thread.call('echo', 'fine', value));
        return { failed: errorOf(failed), next: yield* thread.call('add', 1, 2) };
      })(),
    );
    expect(seen.failed).toBeInstanceOf(TypeError);
    expect(seen.failed.message).toMatch(
      new RegExp(`^cannot send call 'echo' to LoopThread 'svc': argument 2 \\(${type}\\) cannot be cloned \\(.+\\)$`),
    );
    expect(seen.next).toBe(3);
  });

  it('fails only that call among the calls of the same burst', async () => {
    const thread = await threads.startOutside(SERVICE);
    const results = await loop.runUntilComplete(
      (function* () {
        const calls = [thread.call('echo', 'first'), thread.call('echo', () => 1), thread.call('echo', 'third')];
        return yield* gather(calls, { returnExceptions: true });
      })(),
    );
    expect(results[0]).toBe('first');
    expect(results[1]).toBeInstanceOf(TypeError);
    expect(results[2]).toBe('third');
  });

  it('as a result: the call fails with a TypeError naming its type; the thread goes on', async () => {
    const thread = await threads.startOutside(SERVICE);
    const seen = await loop.runUntilComplete(
      (function* () {
        const failed = yield* outcome(thread.call('uncloneable'));
        return { failed: errorOf(failed), next: yield* thread.call('add', 1, 2) };
      })(),
    );
    expect(seen.failed).toBeInstanceOf(TypeError);
    expect(seen.failed.message).toMatch(/^the result of 'uncloneable' cannot be sent to .+: Function cannot be cloned \(.+\)$/);
    expect(seen.next).toBe(3);
  });

  it('as an argument of callSoonThreadsafe: the TypeError goes to the exception handler', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'svc' });
    const contexts: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => contexts.push(context));
    const next = await loop.runUntilComplete(
      (function* () {
        thread.callSoonThreadsafe('push', () => 1);
        return yield* thread.call('add', 1, 2);
      })(),
    );
    expect(next).toBe(3);
    expect(contexts).toHaveLength(1);
    const error = contexts[0]!.exception as Error;
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/^cannot send callSoonThreadsafe 'push' to LoopThread 'svc': argument 1 \(Function\) cannot be cloned \(.+\)$/);
    expect(contexts[0]!.message).toBe(error.message);
  });
});

describe('names that are not exported functions', () => {
  it.each(['missing', '__proto__', 'constructor', 'toString', 'hasOwnProperty', 'then'])(
    "refuses '%s' at call time with a TypeError",
    async (name) => {
      const thread = await threads.startOutside(SERVICE, { name: 'svc' });
      const message = `'${name}' is not a function exported by ${SERVICE.href} (LoopThread 'svc'; ${SERVICE_FUNCTIONS})`;
      expect(() => thread.call(name)).toThrow(new TypeError(message));
      expect(() => thread.callSoonThreadsafe(name)).toThrow(new TypeError(message));
      expect(await loop.runUntilComplete(thread.call('add', 1, 2))).toBe(3);
    },
  );

  it('refuses an export that is not a function', async () => {
    const thread = await threads.startOutside(SERVICE);
    const message = `'notAFunction' exported by ${SERVICE.href} is not a function`;
    expect(() => thread.call('notAFunction')).toThrow(new TypeError(message));
    expect(() => thread.callSoonThreadsafe('notAFunction')).toThrow(new TypeError(message));
  });

  it("refuses '' at once, also on a link that made no call yet", async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'svc' });
    const message = `'' is not a function exported by ${SERVICE.href} (LoopThread 'svc'; ${SERVICE_FUNCTIONS})`;
    expect(() => thread.call('')).toThrow(new TypeError(message));
    expect(() => thread.callSoonThreadsafe('')).toThrow(new TypeError(message));
    expect(() => thread.submit('')).toThrow(new TypeError(message));
  });

  it('cuts a huge name in the message, here and in the thread', async () => {
    const thread = await loop.runUntilComplete(threads.start(SERVICE, { name: 'svc', expose: {} }));
    const huge = 'n'.repeat(1 << 20);
    const shown = `'${'n'.repeat(80)}…' (1048576 characters)`;
    expect(() => thread.call(huge)).toThrow(new TypeError(`${shown} is not a function exported by ${SERVICE.href} (LoopThread 'svc'; ${SERVICE_FUNCTIONS})`));
    // The thread's own check, reached through the parent's exposed functions: callParent(huge).
    const error = errorOf(await loop.runUntilComplete(outcome(thread.call('callParent', huge))));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(`${shown} is not a function exported by the parent of LoopThread 'svc' (it has no functions)`);
  });

  it('refuses a name that is not a string', async () => {
    const thread = await threads.startOutside(SERVICE);
    expect(() => thread.call(42 as never)).toThrow(new TypeError('a function name must be a string, got number'));
    expect(() => thread.callSoonThreadsafe(Symbol.iterator as never)).toThrow(
      new TypeError('a function name must be a string, got symbol'),
    );
  });
});

describe('run() ending while calls are in flight', () => {
  it('cancels the Futures of calls nobody awaited, and the remote tasks, as the loop closes', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'left-open' });
    let left: Future<number> | null = null;
    let blocking: ConcurrentFuture<number> | null = null;
    function* main(): Coroutine<string> {
      left = thread.call<number>('slowAdd', 1, 2, 3600);
      blocking = thread.submit<number>('slowAdd', 3, 4, 3600);
      yield* sleep(0.01);
      return 'main done';
    }
    expect(await run(main())).toBe('main done');
    setEventLoop(loop);
    expect(left!.cancelled()).toBe(true);
    await expect(Promise.resolve(left!)).rejects.toThrow(new CancelledError('the loop that made the call is closing'));
    expect(blocking!.done()).toBe(true);
    expect(blocking!.exception()).toEqual(new RuntimeError("the link to LoopThread 'left-open' was closed"));
    // The remote tasks were cancelled too: the thread's loop has none left.
    let tasks = -1;
    for (let round = 0; round < 200 && tasks !== 0; round++) {
      tasks = await loop.runUntilComplete(thread.call<number>('taskCount'));
    }
    expect(tasks).toBe(0);
  });

  it('settles them when a loop is closed directly, so a later await does not hang', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'closed-directly' });
    const other = newEventLoop();
    // In a box: a Promise resolved with a Future would wait for it (Futures are thenables).
    const { future } = await other.runUntilComplete(
      (function* (): Coroutine<{ future: Future<number> }> {
        const future = thread.call<number>('slowAdd', 1, 2, 3600);
        yield* sleep(0);
        return { future };
      })(),
    );
    expect(future.done()).toBe(false);
    other.close();
    expect(future.cancelled()).toBe(true);
    await expect(Promise.resolve(future)).rejects.toThrow(CancelledError);
  });
});

describe('LoopThread.close', () => {
  it('cancels the remote tasks, lets their finally run, cancels pending calls and ends the thread', async () => {
    const recorder = new Recorder();
    const seen = await loop.runUntilComplete(
      (function* () {
        const thread = yield* threads.start(SERVICE, { name: 'closing', expose: { record: recorder.record } });
        const parked = [thread.call('park', 'a'), thread.call('park', 'b')];
        yield* recorder.until('a: started');
        yield* recorder.until('b: started');
        const closing = thread.close();
        expect(thread.close()).toBe(closing);
        yield* awaitPromise(closing);
        // The thread's last notifications are queued behind the reply that ended the calls.
        yield* recorder.until('b: finally');
        return { thread, parked };
      })(),
    );
    expect(seen.parked.map((call) => call.cancelled())).toEqual([true, true]);
    expect([...recorder.lines].sort()).toEqual([
      'a: cancelled ()',
      'a: finally',
      'a: started',
      'b: cancelled ()',
      'b: finally',
      'b: started',
    ]);
    expect(seen.thread.isDead()).toBe(true);
    const message = "LoopThread 'closing' is closed";
    const later = seen.thread.call('add', 1, 2);
    expect(later.done()).toBe(true);
    expect(later.exception()).toEqual(new RuntimeError(message));
    expect(() => seen.thread.callSoonThreadsafe('add', 1, 2)).toThrow(new RuntimeError(message));
  });

  it('ends a call made while the thread closes: cancelled there, or refused as closed', async () => {
    const thread = await threads.startOutside(SERVICE, { name: 'closing' });
    const closing = thread.close();
    const late = thread.call('slowAdd', 1, 2, 3600);
    await closing;
    await loop.runUntilComplete(
      (function* () {
        yield* outcome(late);
      })(),
    );
    expect(late.done()).toBe(true);
    if (!late.cancelled()) expect(late.exception()).toEqual(new RuntimeError("LoopThread 'closing' is closed"));
  });

  it('is idempotent: every call returns the same Promise, also once the thread is gone', async () => {
    const thread = await threads.startOutside(SERVICE);
    const first = thread.close();
    expect(thread.close()).toBe(first);
    await first;
    expect(thread.isDead()).toBe(true);
    expect(thread.close()).toBe(first);
  });

  it('resolves for a thread that already died', async () => {
    const thread = await threads.startOutside(SERVICE);
    await thread.terminate();
    expect(thread.isDead()).toBe(true);
    await expect(thread.close()).resolves.toBeUndefined();
  });

  it('ends calls that were pending with CancelledError for the caller', async () => {
    const thread = await threads.startOutside(SERVICE);
    const result = await loop.runUntilComplete(
      (function* () {
        const call = thread.call('slowAdd', 1, 2, 3600);
        yield* thread.call('add', 0, 0);
        const closing = thread.close();
        const awaited = yield* outcome(call);
        yield* awaitPromise(closing);
        return { awaited, running: getRunningLoop() === loop };
      })(),
    );
    expect(errorOf(result.awaited)).toBeInstanceOf(CancelledError);
    expect(result.running).toBe(true);
  });
});

describe('the process', () => {
  it('exits once its main loop is done, though a LoopThread still runs', async () => {
    await expect(runFixture('lt-exit-child.mjs', 'left-running')).resolves.toEqual({
      code: 0,
      signal: null,
      stdout: 'sum 3\nmain done\n',
      stderr: '',
    });
  });

  it('exits though the thread keeps sending to the inbox of a stopped loop', async () => {
    await expect(runFixture('lt-exit-child.mjs', 'stopped-inbox')).resolves.toEqual({
      code: 0,
      signal: null,
      stdout: 'ticks arrive\nloop stopped\n',
      stderr: '',
    });
  });
});
