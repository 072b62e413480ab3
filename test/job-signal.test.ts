import { afterEach, describe, expect, it } from 'vitest';
import { wrapFuture, type ConcurrentFuture } from '../src/concurrent.js';
import type { Coroutine } from '../src/coroutines.js';
import { newEventLoop } from '../src/events.js';
import { RuntimeError } from '../src/exceptions.js';
import { PiscinaExecutor } from '../src/executor.js';
import { jobSignal } from '../src/job-signal.js';
import { sleep } from '../src/tasks.js';
import { workerFn } from '../src/worker-fn.js';
import { HOLD, flagsOf, release } from './helpers/pool-flags.js';
import { trackLoops } from './helpers/loops.js';

const signalUrl = new URL('./fixtures/job-signal.mjs', import.meta.url);
const waitForAbort = workerFn<[Int32Array, number], string>(signalUrl, 'waitForAbort');
const askLate = workerFn<[Int32Array, number, number], boolean>(signalUrl, 'askLate');
const sameSignal = workerFn<[], [boolean, boolean]>(signalUrl, 'sameSignal');
const signalAfterAwait = workerFn<[], boolean>(signalUrl, 'signalAfterAwait');

let executors: PiscinaExecutor[] = [];

function executor(): PiscinaExecutor {
  const made = new PiscinaExecutor({ maxThreads: 1 });
  executors.push(made);
  return made;
}

afterEach(async () => {
  const pending = executors.map((made) => made.shutdown(false));
  executors = [];
  await Promise.all(pending);
});
const track = trackLoops();

/** Wait until flags[slot] is set (a job reached a point); fails after 20 s rather than hang. */
async function reached(flags: Int32Array, slot: number): Promise<void> {
  for (let waited = 0; Atomics.load(flags, slot) < 1; waited += 5) {
    if (waited > 20_000) throw new Error(`flags[${slot}] never set`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function resultOf<T>(future: ConcurrentFuture<T>): Promise<T> {
  return new Promise((resolve, reject) =>
    future.addDoneCallback((done) => {
      try {
        resolve(done.result());
      } catch (error) {
        reject(error as Error);
      }
    }),
  );
}

describe('jobSignal', () => {
  it('throws RuntimeError outside a job', () => {
    expect(() => jobSignal()).toThrow(RuntimeError);
    expect(() => jobSignal()).toThrow(/^jobSignal\(\) was called outside a job/);
  });

  it('gives a pool job one signal, not aborted while nobody cancels', async () => {
    const made = executor();
    expect(await resultOf(made.submit(sameSignal))).toEqual([true, false]);
    expect(await resultOf(made.submit(signalAfterAwait))).toBe(false);
  });

  it("aborts a running pool job's signal when its future is cancelled; the job runs on and returns", async () => {
    const made = executor();
    const flags = flagsOf();
    const running = made.submit(waitForAbort, flags, 0);
    await reached(flags, 0);
    expect(running.cancel()).toBe(false);
    expect(await resultOf(running)).toBe('CancelledError: the caller cancelled the job');
    // The thread's next job has a signal of its own.
    expect(await resultOf(made.submit(sameSignal))).toEqual([true, false]);
  });

  it('gives an aborted signal to a job that asks for it only after the cancel', async () => {
    const made = executor();
    const flags = flagsOf();
    const running = made.submit(askLate, flags, 0, HOLD);
    await reached(flags, 0);
    expect(running.cancel()).toBe(false);
    release(flags);
    expect(await resultOf(running)).toBe(true);
  });

  it("aborts it when the loop Future of runInExecutor is cancelled", async () => {
    const made = executor();
    const flags = flagsOf();
    const loop = track(newEventLoop());
    const running = made.submit(waitForAbort, flags, 0);
    function* main(): Coroutine<boolean> {
      const future = wrapFuture(running, { loop });
      yield* sleep(0);
      while (Atomics.load(flags, 0) === 0) yield* sleep(0.005);
      future.cancel();
      yield* sleep(0);
      return future.cancelled();
    }
    expect(await loop.runUntilComplete(main())).toBe(true);
    expect(await resultOf(running)).toBe('CancelledError: the caller cancelled the job');
  });
});
