/**
 * PiscinaExecutor with real pool threads. The pool runs dist/workers/pool-worker.js: build first
 * (`npx tsc -p tsconfig.json`; `npm test` does). Jobs live in test/fixtures/pool-*.mjs; those
 * that must be seen running or not report through an Int32Array over a SharedArrayBuffer.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { threadId } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
// executor.js before concurrent.js: entered first, concurrent.js reaches executor.js (through events.js
// and base-events.js) before ConcurrentFuture exists.
import { PiscinaExecutor, createDefaultExecutor, type PiscinaExecutorOptions } from '../src/executor.js';
import { type ConcurrentFuture, wrapFuture } from '../src/concurrent.js';
import { newEventLoop } from '../src/events.js';
import { RuntimeError } from '../src/exceptions.js';
import { sleep } from '../src/tasks.js';
import { move } from '../src/transfer.js';
import { workerFn, type WorkerFn } from '../src/worker-fn.js';
import type { Coroutine } from '../src/coroutines.js';
import { trackLoops } from './helpers/loops.js';
import { HOLD, flagsOf, release } from './helpers/pool-flags.js';

const mathUrl = new URL('./fixtures/pool-math.mjs', import.meta.url);
const controlUrl = new URL('./fixtures/pool-control.mjs', import.meta.url);
const faultsUrl = new URL('./fixtures/pool-faults.mjs', import.meta.url);

const add = workerFn<[number, number], number>(mathUrl, 'add');
const echo = workerFn<[unknown], unknown>(mathUrl, 'echo');
const whichThread = workerFn<[], number>(mathUrl, 'whichThread');
/** visit(flags, slot, holdSlot): counts a run in flags[slot], then holds until flags[holdSlot] != 0 (-1: no hold). */
const visit = workerFn<[Int32Array, number, number], number>(controlUrl, 'visit');
const spin = workerFn<[Int32Array, number], never>(controlUrl, 'spin');
const exitIf = workerFn<[boolean, number, number], number>(faultsUrl, 'exitIf');

let executors: PiscinaExecutor[] = [];

function executor(options: PiscinaExecutorOptions = { maxThreads: 2 }): PiscinaExecutor {
  const made = new PiscinaExecutor(options);
  executors.push(made);
  return made;
}

afterEach(async () => {
  // A test that failed half-way may leave a job held: release it, then end what still runs.
  const pending = executors.map(async (made) => {
    const joined = made.shutdown(true, { cancelFutures: true });
    const timer = setTimeout(() => void made.shutdown(false), 2000);
    await joined;
    clearTimeout(timer);
  });
  executors = [];
  await Promise.all(pending);
});
// Registered after the executors' hook, so the loops close before the executors shut down.
const track = trackLoops();

/** Wait until flags[slot] >= value (a job reached a point); fails after 20 s rather than hang. */
async function reached(flags: Int32Array, slot: number, value = 1): Promise<void> {
  for (let waited = 0; Atomics.load(flags, slot) < value; waited += 5) {
    if (waited > 20_000) throw new Error(`flags[${slot}] never reached ${value}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function settled<T>(future: ConcurrentFuture<T>): Promise<ConcurrentFuture<T>> {
  return new Promise((resolve) => future.addDoneCallback(resolve));
}

async function resultOf<T>(future: ConcurrentFuture<T>): Promise<T> {
  await settled(future);
  return future.result();
}

async function errorOf<T>(future: ConcurrentFuture<T>): Promise<Error> {
  await settled(future);
  const error = future.exception();
  if (error === null) throw new Error(`expected a failure, got ${String(future.result())}`);
  return error;
}

/** Run jobs of `fn` until its run time is known, so later bursts of it travel in batches. */
async function warmUp<A extends unknown[]>(made: PiscinaExecutor, fn: WorkerFn<A, unknown>, ...args: A): Promise<void> {
  for (let round = 0; round < 3; round++) {
    await Promise.all(Array.from({ length: 50 }, () => settled(made.submit(fn, ...args))));
  }
}

describe('PiscinaExecutor.submit', () => {
  it('runs a job in a pool thread and gives its result', async () => {
    const made = executor();
    expect(await resultOf(made.submit(add, 40, 2))).toBe(42);
    expect(await resultOf(made.submit(whichThread))).not.toBe(threadId);
  });

  it('calls the default export when the WorkerFn names none', async () => {
    expect(await resultOf(executor().submit(workerFn<[number], number>(mathUrl), 21))).toBe(42);
  });

  it('awaits a job that returns a promise', async () => {
    const slowAdd = workerFn<[number, number, number], number>(mathUrl, 'slowAdd');
    expect(await resultOf(executor().submit(slowAdd, 1, 2, 10))).toBe(3);
  });

  it('copies arguments and results by structured clone', async () => {
    const value = { list: [1, 'two', null], when: new Date(0), map: new Map([['k', 1n]]), nested: { deep: true } };
    expect(await resultOf(executor().submit(echo, value))).toEqual(value);
  });

  it('gives each job of a burst its own result', async () => {
    const made = executor();
    await warmUp(made, add, 0, 0);
    const futures = Array.from({ length: 3000 }, (_, i) => made.submit(add, i, 1000));
    const results = await Promise.all(futures.map(resultOf));
    expect(results).toEqual(Array.from({ length: 3000 }, (_, i) => i + 1000));
  });

  it('sends a burst of tiny jobs in batches, and a lone job alone', async () => {
    const made = executor();
    await warmUp(made, add, 0, 0);
    const before = made.statistics();
    await Promise.all(Array.from({ length: 2000 }, (_, i) => resultOf(made.submit(add, i, i))));
    const burst = made.statistics();
    expect(burst.jobsSent - before.jobsSent).toBe(2000);
    expect(burst.batches - before.batches).toBeLessThanOrEqual(200);

    expect(await resultOf(made.submit(add, 1, 1))).toBe(2);
    const lone = made.statistics();
    expect([lone.jobsSent - burst.jobsSent, lone.batches - burst.batches]).toEqual([1, 1]);
  });

  it('runs jobs on every thread at once', async () => {
    const made = executor({ maxThreads: 2 });
    const flags = flagsOf();
    const first = made.submit(visit, flags, 0, HOLD);
    const second = made.submit(visit, flags, 1, HOLD);
    // Both hold until released: each started only if both threads run.
    await reached(flags, 0);
    await reached(flags, 1);
    release(flags);
    const threads = new Set([await resultOf(first), await resultOf(second)]);
    expect(threads.size).toBe(2);
  });

  it('moves a job stuck behind a blocked job to a thread that is free, and runs it once', async () => {
    const made = executor({ maxThreads: 2 });
    const flags = flagsOf();
    // Four lone jobs, two per thread: one of the three short ones waits behind the held one.
    const futures = [0, 1, 2, 3].map((slot) => made.submit(visit, flags, slot, slot === 0 ? HOLD : -1));
    await reached(flags, 1);
    await reached(flags, 2);
    await reached(flags, 3);
    expect(futures[0]?.done()).toBe(false);
    expect(made.statistics().moved).toBeGreaterThanOrEqual(1);
    release(flags);
    await Promise.all(futures.map(settled));
    expect([flags[0], flags[1], flags[2], flags[3]]).toEqual([1, 1, 1, 1]);
  });

  it('throws TypeError for something that is not a WorkerFn', () => {
    const made = executor();
    expect(() => made.submit((() => 1) as unknown as WorkerFn)).toThrow(TypeError);
    expect(() => made.submit(null as unknown as WorkerFn)).toThrow('submit() needs a WorkerFn (workerFn(moduleUrl, exportName)), got null');
    const forged = { moduleUrl: 'data:text/javascript,export const x = () => 1', exportName: 'x' } as unknown as WorkerFn;
    expect(() => made.submit(forged)).toThrow(
      new TypeError("submit() needs an absolute path or a file: URL, got 'data:text/javascript,export const x = () => 1'"),
    );
  });
});

describe('move()', () => {
  it('never sends a job twice whose buffers moved, when a stuck batch is taken over by a free thread', async () => {
    const made = executor({ maxThreads: 2 });
    const sumBytes = workerFn<[Uint8Array], { sum: number; byteLength: number }>(mathUrl, 'sumBytes');
    await warmUp(made, sumBytes, new Uint8Array(4));
    await warmUp(made, echo, 0);
    const flags = flagsOf();
    const holder = made.submit(visit, flags, 0, HOLD);
    await reached(flags, 0);
    const movedBefore = made.statistics().moved;
    // A burst of moved and copied jobs: a batch of it waits behind the holder, until the free
    // thread takes over what can be taken (the copied jobs); the moved ones must wait there.
    const buffers = Array.from({ length: 60 }, (_, i) => new Uint8Array(256).fill(i % 7));
    const futures = buffers.map((bytes, i) => (i % 2 === 0 ? made.submit(sumBytes, move(bytes)) : made.submit(echo, i)));
    for (let waited = 0; made.statistics().moved === movedBefore; waited += 5) {
      if (waited > 20_000) throw new Error('no batch was ever taken over');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    release(flags);
    await Promise.all([...futures, holder].map((future) => settled(future as ConcurrentFuture<unknown>)));
    for (let i = 0; i < futures.length; i++) {
      const expected = i % 2 === 0 ? { sum: 256 * (i % 7), byteLength: 256 } : i;
      expect(futures[i]!.result()).toEqual(expected);
    }
    expect(buffers.filter((_, i) => i % 2 === 0).every((bytes) => bytes.byteLength === 0)).toBe(true);
  });

  it('transfers a moved argument buffer instead of copying it', async () => {
    const made = executor();
    const sumBytes = workerFn<[Uint8Array], { sum: number; byteLength: number }>(mathUrl, 'sumBytes');
    const moved = new Uint8Array(1024).fill(2);
    const copied = new Uint8Array(1024).fill(3);
    const first = made.submit(sumBytes, move(moved));
    const second = made.submit(sumBytes, copied);
    expect(await resultOf(first)).toEqual({ sum: 2048, byteLength: 1024 });
    expect(await resultOf(second)).toEqual({ sum: 3072, byteLength: 1024 });
    expect(moved.byteLength).toBe(0);
    expect(copied.byteLength).toBe(1024);
  });

  it('transfers a moved result buffer back', async () => {
    const made = executor({ maxThreads: 1 });
    const makeBytesKept = workerFn<[number, number], { bytes: Uint8Array }>(mathUrl, 'makeBytesKept');
    const { bytes } = await resultOf(made.submit(makeBytesKept, 4096, 9));
    expect(bytes).toBeInstanceOf(Uint8Array);
    expect([bytes.byteLength, bytes[0], bytes[4095]]).toEqual([4096, 9, 9]);
    // The thread's own view on the bytes was detached: they were moved, not copied.
    expect(await resultOf(made.submit(workerFn<[], number>(mathUrl, 'lastMadeLength')))).toBe(0);
  });
});

describe('PiscinaExecutor errors', () => {
  it("fails the future with the job's error: class, name, message, stack and own properties", async () => {
    const error = await errorOf(executor().submit(workerFn<[number], never>(faultsUrl, 'failQuota'), 5));
    expect(error).toBeInstanceOf(RangeError);
    expect([error.name, error.message]).toEqual(['QuotaError', 'quota of 5 exceeded']);
    expect({ ...error }).toEqual({ name: 'QuotaError', limit: 5, tags: ['disk', 'user'] });
    expect(error.stack).toContain('failQuota');
    expect(error.stack).toContain('pool-faults.mjs');
  });

  it('rebuilds library errors as their own class, with their cause', async () => {
    const error = await errorOf(executor().submit(workerFn<[], never>(faultsUrl, 'failRuntime')));
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toBe('pool job failed');
    expect(error.cause).toBeInstanceOf(TypeError);
    expect((error.cause as Error).message).toBe('bad size');
  });

  it('fails with the rejection of an async job', async () => {
    const error = await errorOf(executor().submit(workerFn<[], never>(faultsUrl, 'failAsync')));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('async job failed');
  });

  it('names module and export when the module is missing', async () => {
    const missing = new URL('./fixtures/pool-missing.mjs', import.meta.url);
    const error = await errorOf(executor().submit(workerFn(missing, 'compute')));
    expect(error.message).toBe(`cannot run compute of ${missing.href}: the module was not found`);
    expect((error as Error & { code?: string }).code).toBe('ERR_MODULE_NOT_FOUND');
  });

  it('names module and export when the export is missing or not a function', async () => {
    const made = executor();
    const missing = await errorOf(made.submit(workerFn(mathUrl, 'subtract')));
    expect(missing).toBeInstanceOf(TypeError);
    expect(missing.message).toBe(`cannot run subtract of ${mathUrl.href}: the module has no export named 'subtract'`);
    const notAFunction = await errorOf(made.submit(workerFn(mathUrl, 'answer')));
    expect(notAFunction).toBeInstanceOf(TypeError);
    expect(notAFunction.message).toBe(`cannot run answer of ${mathUrl.href}: the export is not a function (it is number)`);
  });

  it('fails the future of an uncloneable argument without throwing, and its burst goes on', async () => {
    const made = executor();
    const before = add as WorkerFn<[number, unknown], number>;
    const good = made.submit(add, 1, 2);
    const bad = made.submit(before, 1, { callback: () => 1 });
    const weak = made.submit(echo, [new WeakMap()]);
    const symbol = made.submit(echo, Symbol('s'));
    const after = made.submit(add, 3, 4);
    const badError = await errorOf(bad);
    expect(badError).toBeInstanceOf(TypeError);
    expect(badError.message).toBe(
      `cannot send add of ${mathUrl.href} to a pool thread: argument 2.callback is a function, which cannot be cloned`,
    );
    expect((await errorOf(weak)).message).toBe(
      `cannot send echo of ${mathUrl.href} to a pool thread: argument 1[0] is a WeakMap, which cannot be cloned`,
    );
    expect((await errorOf(symbol)).message).toBe(
      `cannot send echo of ${mathUrl.href} to a pool thread: argument 1 is a symbol, which cannot be cloned`,
    );
    expect([await resultOf(good), await resultOf(after)]).toEqual([3, 7]);
  });

  it('fails only the job whose batch-mates could be sent when an uncloneable value hides deep', async () => {
    const made = executor({ maxThreads: 1 });
    await warmUp(made, echo, 0);
    // The up-front check walks so many nodes, then trusts the rest: piscina's postMessage refuses it.
    const hidden = [...Array.from({ length: 2000 }, () => ({})), { deep: Symbol('deep') }];
    const futures = [made.submit(echo, 1), made.submit(echo, hidden), made.submit(echo, 3)];
    await Promise.all(futures.map(settled));
    const error = futures[1]?.exception() as Error;
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(new RegExp(`^cannot send echo of ${mathUrl.href} to a pool thread: .*could not be cloned`));
    expect([futures[0]?.result(), futures[2]?.result()]).toEqual([1, 3]);
  });

  it('fails the future of an uncloneable result, and the thread lives on', async () => {
    const made = executor({ maxThreads: 1 });
    const thread = await resultOf(made.submit(whichThread));
    const error = await errorOf(made.submit(workerFn(mathUrl, 'makeCallback')));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(
      `cannot send the result of makeCallback of ${mathUrl.href} back from the pool thread: result.callback is a function, which cannot be cloned`,
    );
    const weak = await errorOf(made.submit(workerFn(mathUrl, 'makeWeakMap')));
    expect(weak.message).toContain('result[1] is a WeakMap, which cannot be cloned');
    expect(await resultOf(made.submit(whichThread))).toBe(thread);
  });
});

describe('PiscinaExecutor faults', () => {
  it('fails the job whose thread exits, replaces the thread, and other jobs go on', async () => {
    const made = executor({ maxThreads: 2 });
    const exitNow = workerFn<[number], never>(faultsUrl, 'exitNow');
    const before = made.submit(add, 1, 1);
    const dying = made.submit(exitNow, 3);
    const after = made.submit(add, 2, 2);
    const error = await errorOf(dying);
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toBe(`the pool thread running exitNow of ${faultsUrl.href} exited with code 3`);
    expect((error.cause as Error).message).toBe('worker exited with code: 3');
    expect([await resultOf(before), await resultOf(after)]).toEqual([2, 4]);
    expect(await resultOf(made.submit(add, 5, 5))).toBe(10);
  });

  it('fails the job whose thread throws an uncaught error', async () => {
    const made = executor({ maxThreads: 1 });
    const thread = await resultOf(made.submit(whichThread));
    const error = await errorOf(made.submit(workerFn(faultsUrl, 'crashLater')));
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toBe(`the pool thread running crashLater of ${faultsUrl.href} crashed with an uncaught Error: kaboom`);
    expect((error.cause as Error).message).toBe('kaboom');
    const replacement = await resultOf(made.submit(whichThread));
    expect(replacement).not.toBe(thread);
  });

  it('in a batch, keeps the results of the jobs the dead thread finished and runs again those it never reached', async () => {
    const made = executor({ maxThreads: 1 });
    await warmUp(made, exitIf, false, 0, 0);
    // The thread holds two batches of six: it dies in the first, after finishing three jobs.
    const values = [1, 2, 3, -1, 5, 6, 7, 8, 9, 10, 11, 12];
    const futures = values.map((value) => made.submit(exitIf, value === -1, 7, value));
    await Promise.all(futures.map(settled));
    const outcomes = futures.map((future) => (future.exception() === null ? future.result() : future.exception()?.message));
    const died = `the pool thread running exitIf of ${faultsUrl.href} exited with code 7`;
    expect(outcomes).toEqual([1, 2, 3, died, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it.each([
    ['exit', 'exited with code 7'],
    ['throw', 'crashed with an uncaught Error: uncaught in a job'],
    ['hog', 'crashed with an uncaught Error: '],
  ])('loses no finished job, number or object, when a job of the batch ends its thread (%s)', async (how, cause) => {
    const made = executor({ maxThreads: 1, resourceLimits: { maxOldGenerationSizeMb: 24, maxYoungGenerationSizeMb: 4 } });
    const endIf = workerFn<[string, unknown], unknown>(faultsUrl, 'endIf');
    await warmUp(made, endIf, 'none', 0);
    // Numbers travel in shared memory, objects as messages: both must survive the thread.
    const inputs = Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? i : `s${i}`));
    const futures = inputs.map((value, i) => made.submit(endIf, i === 9 ? how : 'none', value));
    await Promise.all(futures.map(settled));
    for (let i = 0; i < inputs.length; i++) {
      const future = futures[i]!;
      if (i === 9) {
        expect(future.exception()!.message).toMatch(new RegExp(`^the pool thread running endIf of .*pool-faults\\.mjs ${cause.replace(/[.()]/g, '\\$&')}`));
      } else {
        expect(future.result()).toEqual(typeof inputs[i] === 'number' ? inputs[i] : { value: inputs[i] });
      }
    }
  });

  it('fails the job whose thread runs out of its resourceLimits heap', async () => {
    const made = executor({ maxThreads: 1, resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 } });
    const error = await errorOf(made.submit(workerFn(faultsUrl, 'hog')));
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toMatch(new RegExp(`^the pool thread running hog of ${faultsUrl.href} crashed with an uncaught Error: .*out of memory`));
    expect(await resultOf(made.submit(add, 1, 2))).toBe(3);
  });
});

describe('PiscinaExecutor outcomes that cannot be read', () => {
  it('fails only the job whose result this thread cannot read; its batch-mates arrive', async () => {
    const made = executor({ maxThreads: 1 });
    const deep = workerFn<[number], unknown>(mathUrl, 'deep');
    await warmUp(made, deep, 1);
    const futures = [made.submit(echo, 'before'), made.submit(deep, 8000), made.submit(echo, 'after')];
    await Promise.all(futures.map(settled));
    expect(futures[0]!.result()).toBe('before');
    expect(futures[2]!.result()).toBe('after');
    const error = futures[1]!.exception()!;
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      `the outcome of deep of ${mathUrl.href} could not be read in this thread (RangeError: Maximum call stack size exceeded)`,
    );
    expect(await resultOf(made.submit(add, 1, 2))).toBe(3);
  });

  it('refuses an argument nested deeper than a small-stack pool thread can read, and the thread goes on', async () => {
    const made = executor({ maxThreads: 1, resourceLimits: { stackSizeMb: 0.5 } });
    const depthOf = workerFn<[unknown], { depth: number; leaf: string }>(mathUrl, 'depthOf');
    const nest = (depth: number): unknown => {
      let value: unknown = 'leaf';
      for (let i = 0; i < depth; i++) value = [value];
      return value;
    };
    const error = await errorOf(made.submit(depthOf, nest(1000)));
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      `cannot send depthOf of ${mathUrl.href} to a pool thread: argument 1 is nested deeper than 409 levels, ` +
        'more than a pool thread can be sure to read with its stack (resourceLimits.stackSizeMb)',
    );
    expect(await resultOf(made.submit(depthOf, nest(400)))).toEqual({ depth: 400, leaf: 'leaf' });
  });
});

describe('PiscinaExecutor cancellation', () => {
  it('removes a queued job: cancel() is true and the job never runs', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const holder = made.submit(visit, flags, 0, HOLD);
    const second = made.submit(visit, flags, 3, -1);
    await reached(flags, 0);
    // The thread holds the first two jobs; the third waits in the executor.
    const queued = made.submit(visit, flags, 1, -1);
    expect(made.statistics().queueSize).toBe(1);
    expect(queued.cancel()).toBe(true);
    expect([queued.cancelled(), queued.done(), made.statistics().queueSize]).toEqual([true, true, 0]);
    release(flags);
    await Promise.all([settled(holder), settled(second)]);
    await resultOf(made.submit(visit, flags, 2, -1));
    expect([flags[0], flags[1], flags[2]]).toEqual([1, 0, 1]);
    expect(made.statistics().cancelled).toBe(1);
  });

  it('skips a job cancelled after its batch reached the thread, before it started', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const holder = made.submit(visit, flags, 0, HOLD);
    const next = made.submit(visit, flags, 1, -1);
    await reached(flags, 0);
    // The thread holds both batches: nothing waits in the executor.
    expect([made.statistics().queueSize, made.statistics().inFlight]).toEqual([0, 2]);
    expect(next.running()).toBe(false);
    expect(next.cancel()).toBe(true);
    release(flags);
    await settled(holder);
    expect(next.cancelled()).toBe(true);
    await resultOf(made.submit(visit, flags, 2, -1));
    expect([flags[0], flags[1], flags[2]]).toEqual([1, 0, 1]);
  });

  it('leaves a running job running: cancel() is false and its result arrives', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const running = made.submit(visit, flags, 0, HOLD);
    await reached(flags, 0);
    expect(running.running()).toBe(true);
    expect(running.cancel()).toBe(false);
    expect(running.cancelled()).toBe(false);
    release(flags);
    expect(typeof (await resultOf(running))).toBe('number');
    expect(running.cancel()).toBe(false);
  });

  it('removes a queued job when the loop Future wrapping it is cancelled', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const holder = made.submit(visit, flags, 0, HOLD);
    await reached(flags, 0);
    const loop = track(newEventLoop());
    const queued = made.submit(visit, flags, 1, -1);
    function* main(): Coroutine<boolean> {
      const future = wrapFuture(queued, { loop });
      future.cancel();
      yield* sleep(0);
      yield* sleep(0);
      return future.cancelled();
    }
    expect(await loop.runUntilComplete(main())).toBe(true);
    expect(queued.cancelled()).toBe(true);
    release(flags);
    await settled(holder);
    await resultOf(made.submit(visit, flags, 2, -1));
    expect([flags[0], flags[1], flags[2]]).toEqual([1, 0, 1]);
  });

  it('lets a running job finish when the loop Future wrapping it is cancelled', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const running = made.submit(visit, flags, 0, HOLD);
    await reached(flags, 0);
    const loop = track(newEventLoop());
    function* main(): Coroutine<boolean> {
      const future = wrapFuture(running, { loop });
      future.cancel();
      yield* sleep(0);
      yield* sleep(0);
      return future.cancelled();
    }
    expect(await loop.runUntilComplete(main())).toBe(true);
    expect(running.cancelled()).toBe(false);
    release(flags);
    expect(typeof (await resultOf(running))).toBe('number');
  });

  it('ends a running job and its thread with abortRunning; the pool goes on', async () => {
    const made = executor({ maxThreads: 1, abortRunning: true });
    const flags = flagsOf();
    const spinning = made.submit(spin, flags, 0);
    const queued = made.submit(visit, flags, 1, -1);
    await reached(flags, 0);
    expect(queued.cancel()).toBe(true);
    expect(spinning.cancel()).toBe(true);
    expect(spinning.cancelled()).toBe(true);
    expect(await resultOf(made.submit(add, 1, 2))).toBe(3);
    expect(flags[1]).toBe(0);
    expect(made.statistics().cancelled).toBe(2);
  });

  it('with abortRunning, still reports a finished job as not cancellable', async () => {
    const made = executor({ maxThreads: 1, abortRunning: true });
    const done = made.submit(add, 1, 2);
    expect(await resultOf(done)).toBe(3);
    expect(done.cancel()).toBe(false);
  });
});

describe('PiscinaExecutor.shutdown', () => {
  it('refuses new jobs afterwards with RuntimeError', async () => {
    const made = executor();
    await made.shutdown();
    expect(() => made.submit(add, 1, 2)).toThrow(new RuntimeError('cannot schedule new futures after shutdown'));
  });

  it('waits for every submitted job, the queued ones too', async () => {
    const made = executor({ maxThreads: 1 });
    const slowAdd = workerFn<[number, number, number], number>(mathUrl, 'slowAdd');
    const futures = [made.submit(slowAdd, 1, 1, 5), made.submit(slowAdd, 2, 2, 5), made.submit(slowAdd, 3, 3, 5)];
    await made.shutdown(true);
    expect(futures.map((future) => future.result())).toEqual([2, 4, 6]);
    expect(made.statistics().threads).toBe(0);
  });

  it('with cancelFutures cancels the waiting jobs and lets the running one finish', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const running = made.submit(visit, flags, 0, HOLD);
    await reached(flags, 0);
    const waiting = [made.submit(visit, flags, 1, -1), made.submit(visit, flags, 2, -1)];
    const closed = made.shutdown(true, { cancelFutures: true });
    expect(waiting.map((future) => future.cancelled())).toEqual([true, true]);
    expect(running.done()).toBe(false);
    release(flags);
    await closed;
    expect(typeof running.result()).toBe('number');
    expect([flags[0], flags[1], flags[2]]).toEqual([1, 0, 0]);
  });

  it('without wait returns at once, and the jobs still complete', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const running = made.submit(visit, flags, 0, HOLD);
    const queued = made.submit(add, 20, 22);
    await reached(flags, 0);
    await made.shutdown(false);
    expect(running.done()).toBe(false);
    release(flags);
    expect(await resultOf(queued)).toBe(42);
    expect(typeof (await resultOf(running))).toBe('number');
  });

  it('without wait, while a waiting shutdown is stuck, ends the running job', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const stuck = made.submit(spin, flags, 0);
    const queued = made.submit(add, 1, 1);
    await reached(flags, 0);
    const joined = made.shutdown(true);
    await made.shutdown(false);
    const error = await errorOf(stuck);
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toBe(`the pool thread running spin of ${controlUrl.href} was ended by shutdown`);
    expect(queued.cancelled()).toBe(true);
    await joined;
  });

  it('does not let an idle executor keep the process alive', () => {
    const child = spawnSync(process.execPath, [fileURLToPath(new URL('./fixtures/pool-lifetime.mjs', import.meta.url)), 'idle'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect([child.status, child.stdout.trim()]).toEqual([0, 'result 42']);
  });

  it('does not hang the process on a stuck job after a timed-out shutdown', () => {
    const child = spawnSync(process.execPath, [fileURLToPath(new URL('./fixtures/pool-lifetime.mjs', import.meta.url)), 'stuck'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect([child.status, child.stdout.trim()]).toEqual([
      0,
      `timed out; the pool thread running spin of ${controlUrl.href} was ended by shutdown`,
    ]);
  });
});

describe('PiscinaExecutor.statistics', () => {
  it('reports the queue, the jobs in flight and the threads', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    const holder = made.submit(visit, flags, 0, HOLD);
    await reached(flags, 0);
    const queued = [made.submit(add, 1, 1), made.submit(add, 2, 2), made.submit(add, 3, 3)];
    expect(made.statistics().queueSize).toBe(3);
    // The flush hands the thread a second batch (add is not measured yet: it travels alone).
    await null;
    const busy = made.statistics();
    expect([busy.queueSize, busy.inFlight, busy.threads, busy.maxThreads, busy.completed]).toEqual([2, 2, 1, 1, 0]);
    release(flags);
    await Promise.all([holder, ...queued].map(settled));
    const idle = made.statistics();
    expect([idle.queueSize, idle.inFlight, idle.completed, idle.jobsSent]).toEqual([0, 0, 4, 4]);
    expect(idle.batches).toBeGreaterThanOrEqual(2);
    expect(idle.utilization).toBeGreaterThan(0);
    expect(idle.utilization).toBeLessThanOrEqual(1);
    expect(idle.runTime.max).toBeGreaterThan(0);
    expect(idle.runTime.min).toBeLessThanOrEqual(idle.runTime.max);
    expect(idle.waitTime.mean).toBeGreaterThanOrEqual(0);
  });
});

describe('PiscinaExecutor options', () => {
  it('checks options up front', () => {
    const cases: Array<[PiscinaExecutorOptions, ErrorConstructor, string]> = [
      [{ maxThreads: 0 }, RangeError, 'options.maxThreads must be a positive integer'],
      [{ maxThreads: 1.5 }, TypeError, 'options.maxThreads must be a positive integer'],
      [{ minThreads: -1 }, RangeError, 'options.minThreads must be a non-negative integer'],
      [{ minThreads: 3, maxThreads: 2 }, RangeError, 'options.minThreads and options.maxThreads must not conflict'],
      [{ idleTimeout: -5 }, RangeError, 'options.idleTimeout must be a non-negative number of milliseconds'],
      [{ idleTimeout: '1s' as unknown as number }, TypeError, 'options.idleTimeout must be a non-negative number of milliseconds'],
      [{ maxQueue: -1 }, RangeError, "options.maxQueue must be a non-negative integer, Infinity or 'auto'"],
      [{ resourceLimits: null as unknown as object }, TypeError, 'options.resourceLimits must be an object'],
      [{ abortRunning: 'yes' as unknown as boolean }, TypeError, 'options.abortRunning must be a boolean'],
    ];
    for (const [options, type, message] of cases) {
      expect(() => new PiscinaExecutor(options)).toThrow(new type(message));
      expect(() => new PiscinaExecutor(options)).toThrow(type);
    }
  });

  it('fails the jobs past maxQueue, counting those the threads can still take', async () => {
    const made = executor({ maxThreads: 1, maxQueue: 2 });
    const flags = flagsOf();
    const holder = made.submit(visit, flags, 0, HOLD);
    await reached(flags, 0);
    // The thread takes one more batch; two more jobs may wait; the fourth is one too many.
    const futures = [1, 2, 3, 4].map((value) => made.submit(add, value, value));
    const error = await errorOf(futures[3] as ConcurrentFuture<number>);
    expect(error).toEqual(new RuntimeError("the executor's queue is full (maxQueue 2)"));
    release(flags);
    await settled(holder);
    expect(await Promise.all(futures.slice(0, 3).map(resultOf))).toEqual([2, 4, 6]);
  });

  it('keeps a thread turning between jobs, so what a job leaves pending goes on (atomics: async)', async () => {
    const made = executor({ maxThreads: 1 });
    const flags = flagsOf();
    expect(await resultOf(made.submit(workerFn<[Int32Array, number, number], string>(controlUrl, 'leaveTimer'), flags, 0, 20))).toBe('returned');
    // No job follows: a thread parked in Atomics.wait would never fire the timer.
    await reached(flags, 0);
    expect(flags[0]).toBe(1);
  });
});

describe('createDefaultExecutor', () => {
  it('makes a PiscinaExecutor with one thread per core', async () => {
    const made = createDefaultExecutor();
    expect(made).toBeInstanceOf(PiscinaExecutor);
    executors.push(made as PiscinaExecutor);
    expect((made as PiscinaExecutor).statistics().maxThreads).toBe(availableParallelism());
    expect(await resultOf(made.submit(add, 2, 3))).toBe(5);
  });
});
