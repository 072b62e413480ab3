/**
 * toThread and the loop's executor methods (runInExecutor, setDefaultExecutor,
 * shutdownDefaultExecutor) with real pool threads. The pool runs dist/workers/pool-worker.js:
 * build first (`npx tsc -p tsconfig.json`; `npm test` does).
 */
import { threadId } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EventLoop } from '../src/base-events.js';
import type { Coroutine } from '../src/coroutines.js';
import { newEventLoop } from '../src/events.js';
import { RuntimeError } from '../src/exceptions.js';
import { PiscinaExecutor, type Executor } from '../src/executor.js';
import { run } from '../src/runners.js';
import { gather, sleep } from '../src/tasks.js';
import { toThread } from '../src/threads.js';
import { workerFn, type WorkerFn } from '../src/worker-fn.js';
import { HOLD, flagsOf, release } from './helpers/pool-flags.js';

const mathUrl = new URL('./fixtures/pool-math.mjs', import.meta.url);
const controlUrl = new URL('./fixtures/pool-control.mjs', import.meta.url);
const faultsUrl = new URL('./fixtures/pool-faults.mjs', import.meta.url);

const add = workerFn<[number, number], number>(mathUrl, 'add');
const slowAdd = workerFn<[number, number, number], number>(mathUrl, 'slowAdd');
const whichThread = workerFn<[], number>(mathUrl, 'whichThread');
/** visit(flags, slot, holdSlot): counts a run in flags[slot], then holds until flags[holdSlot] != 0 (-1: no hold). */
const visit = workerFn<[Int32Array, number, number], number>(controlUrl, 'visit');
const spin = workerFn<[Int32Array, number], never>(controlUrl, 'spin');

let loops: EventLoop[] = [];
let executors: PiscinaExecutor[] = [];

function loopOf(): EventLoop {
  const loop = newEventLoop();
  loops.push(loop);
  return loop;
}

function executor(maxThreads = 1): PiscinaExecutor {
  const made = new PiscinaExecutor({ maxThreads });
  executors.push(made);
  return made;
}

afterEach(async () => {
  for (const loop of loops) {
    if (loop.isRunning()) continue;
    if (!loop.isClosed()) await loop.runUntilComplete(loop.shutdownDefaultExecutor(5));
    loop.close();
  }
  loops = [];
  const pending = executors.map((made) => made.shutdown(true, { cancelFutures: true }));
  executors = [];
  await Promise.all(pending);
});

/** Wait in a coroutine until flags[slot] >= value; fails after 20 s rather than hang. */
function* reached(flags: Int32Array, slot: number, value = 1): Coroutine<void> {
  for (let waited = 0; Atomics.load(flags, slot) < value; waited += 0.005) {
    if (waited > 20) throw new Error(`flags[${slot}] never reached ${value}`);
    yield* sleep(0.005);
  }
}

describe('toThread', () => {
  it('runs the function in a pool thread and gives its result', async () => {
    function* main(): Coroutine<[number, number]> {
      return [yield* toThread(add, 40, 2), yield* toThread(whichThread)];
    }
    const [sum, thread] = await run(main());
    expect(sum).toBe(42);
    expect(thread).not.toBe(threadId);
  });

  it("raises the function's error", async () => {
    const failQuota = workerFn<[number], never>(faultsUrl, 'failQuota');
    function* main(): Coroutine<unknown> {
      try {
        return yield* toThread(failQuota, 3);
      } catch (error) {
        return error;
      }
    }
    const error = (await run(main())) as Error & { limit?: number };
    expect(error).toBeInstanceOf(RangeError);
    expect([error.name, error.message, error.limit]).toEqual(['QuotaError', 'quota of 3 exceeded', 3]);
  });

  it('calls the function exactly once', async () => {
    const flags = flagsOf();
    function* main(): Coroutine<number> {
      return yield* toThread(visit, flags, 0, -1);
    }
    await run(main());
    expect(flags[0]).toBe(1);
  });

  it('runs ten concurrent calls, each with its own arguments', async () => {
    function* main(): Coroutine<number[]> {
      return yield* gather(...Array.from({ length: 10 }, (_, i) => toThread(slowAdd, i, 100, 1)));
    }
    expect(await run(main())).toEqual([100, 101, 102, 103, 104, 105, 106, 107, 108, 109]);
  });

  it('throws RuntimeError outside a running loop', () => {
    expect(() => toThread(add, 1, 2)).toThrow(new RuntimeError('no running event loop'));
  });

  it('refuses a hand-made WorkerFn naming a data: or node: module, naming toThread()', async () => {
    const forged = [
      { moduleUrl: 'data:text/javascript,export default () => process.exit(9)', exportName: 'default' },
      { moduleUrl: 'node:fs', exportName: 'readFileSync' },
    ] as unknown as Array<WorkerFn<[string], unknown>>;
    function* main(): Coroutine<string[]> {
      const messages: string[] = [];
      for (const fn of forged) {
        try {
          yield* toThread(fn, '/etc/passwd');
        } catch (error) {
          messages.push((error as TypeError).message);
        }
      }
      return messages;
    }
    expect(await run(main())).toEqual([
      "toThread() needs an absolute path or a file: URL, got 'data:text/javascript,export default () => process.exit(9)'",
      "toThread() needs an absolute path or a file: URL, got 'node:fs'",
    ]);
  });
});

describe('EventLoop.runInExecutor', () => {
  it('runs the function in the executor given', async () => {
    const loop = loopOf();
    const made = executor();
    function* main(): Coroutine<number> {
      return yield* loop.runInExecutor(made, add, 20, 22);
    }
    expect(await loop.runUntilComplete(main())).toBe(42);
    expect(made.statistics().completed).toBe(1);
  });

  it('uses a default executor when given null, and the one set by setDefaultExecutor', async () => {
    const loop = loopOf();
    const made = executor();
    function* main(): Coroutine<number> {
      const first = yield* loop.runInExecutor(null, add, 1, 2);
      loop.setDefaultExecutor(made);
      return first + (yield* loop.runInExecutor(null, add, 3, 4));
    }
    expect(await loop.runUntilComplete(main())).toBe(10);
    expect(made.statistics().completed).toBe(1);
  });

  it('throws TypeError for a function that is not a WorkerFn', () => {
    const loop = loopOf();
    expect(() => loop.runInExecutor(null, (() => 1) as unknown as WorkerFn<[], number>)).toThrow(
      new TypeError('runInExecutor() needs a WorkerFn (workerFn(moduleUrl, exportName)), got anonymous()'),
    );
  });

  it('checks a hand-made WorkerFn before any executor sees it', () => {
    const loop = loopOf();
    const submitted: unknown[] = [];
    const spy: Executor = {
      submit: ((fn: unknown) => {
        submitted.push(fn);
        throw new Error('not reached');
      }) as Executor['submit'],
      shutdown: () => Promise.resolve(),
    };
    const forged = { moduleUrl: 'node:child_process', exportName: 'execSync' } as unknown as WorkerFn<[string], unknown>;
    expect(() => loop.runInExecutor(spy, forged, 'rm -rf /')).toThrow(
      new TypeError("runInExecutor() needs an absolute path or a file: URL, got 'node:child_process'"),
    );
    expect(submitted).toEqual([]);
  });

  it('removes a queued job when its Future is cancelled', async () => {
    const loop = loopOf();
    const made = executor();
    const flags = flagsOf();
    function* main(): Coroutine<boolean> {
      const holder = loop.runInExecutor(made, visit, flags, 0, HOLD);
      yield* reached(flags, 0);
      const queued = loop.runInExecutor(made, visit, flags, 1, -1);
      queued.cancel();
      yield* sleep(0);
      release(flags);
      yield* holder;
      yield* loop.runInExecutor(made, visit, flags, 2, -1);
      return queued.cancelled();
    }
    expect(await loop.runUntilComplete(main())).toBe(true);
    expect([flags[0], flags[1], flags[2]]).toEqual([1, 0, 1]);
  });

  it('throws RuntimeError once shutdownDefaultExecutor was called', async () => {
    const loop = loopOf();
    function* main(): Coroutine<void> {
      yield* loop.shutdownDefaultExecutor();
    }
    await loop.runUntilComplete(main());
    expect(() => loop.runInExecutor(null, add, 1, 2)).toThrow(new RuntimeError('Executor shutdown has been called'));
  });

  it('throws RuntimeError on a closed loop', () => {
    const loop = loopOf();
    loop.close();
    expect(() => loop.runInExecutor(null, add, 1, 2)).toThrow(new RuntimeError('Event loop is closed'));
  });
});

describe('EventLoop.setDefaultExecutor', () => {
  it('throws TypeError for something that is not an executor', () => {
    const loop = loopOf();
    expect(() => loop.setDefaultExecutor({ submit: () => null } as unknown as Executor)).toThrow(TypeError);
  });
});

describe('EventLoop.shutdownDefaultExecutor', () => {
  it('waits for the running job of the default executor', async () => {
    const loop = loopOf();
    function* main(): Coroutine<[boolean, number]> {
      const job = loop.runInExecutor(null, slowAdd, 1, 2, 50);
      yield* loop.shutdownDefaultExecutor();
      return [job.done(), yield* job];
    }
    expect(await loop.runUntilComplete(main())).toEqual([true, 3]);
  });

  it('warns and ends a stuck job when the timeout passes, instead of hanging', async () => {
    const loop = loopOf();
    const made = executor();
    const flags = flagsOf();
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      function* main(): Coroutine<unknown> {
        loop.setDefaultExecutor(made);
        const stuck = loop.runInExecutor(null, spin, flags, 0);
        yield* reached(flags, 0);
        yield* loop.shutdownDefaultExecutor(0.05);
        try {
          return yield* stuck;
        } catch (error) {
          return error;
        }
      }
      const error = (await loop.runUntilComplete(main())) as Error;
      expect(error).toBeInstanceOf(RuntimeError);
      expect(error.message).toBe(`the pool thread running spin of ${controlUrl.href} was ended by shutdown`);
      expect(warn).toHaveBeenCalledWith('The executor did not finishing joining its threads within 0.05 seconds.', 'RuntimeWarning');
    } finally {
      warn.mockRestore();
    }
  });
});
