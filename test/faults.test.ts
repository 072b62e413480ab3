/**
 * Fault injection, with real threads: into a 2,000-call burst, at a random point, a message the
 * other thread cannot read, a crash (process.exit, an uncaught error, out of memory) or a
 * terminate(), on each link (calls from this loop to a LoopThread, and from a LoopThread to this
 * loop) and on the pool. Every call must settle exactly once, with its right value or an error
 * naming the cause, and no call that finished (it marks itself in shared memory as it ends)
 * may lose its result where the library promises it: always in the pool; on a link, whenever
 * the thread ran its exit hook (exit, uncaught error).
 *
 * The random points come from one seed, printed at the start: FAULT_SEED=<seed> replays a run.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  LoopThread,
  PiscinaExecutor,
  allTasks,
  ensureFuture,
  gather,
  newEventLoop,
  setEventLoop,
  sleep,
  workerFn,
  type Coroutine,
  type EventLoop,
  type Future,
  type LoopThreadOptions,
  type PiscinaExecutorOptions,
} from '../src/index.js';
import { mulberry32 } from './helpers/prng.js';

const SERVICE = new URL('./fixtures/faults-service.mjs', import.meta.url);
const CALLS = 2000;

const seed = process.env.FAULT_SEED === undefined ? Date.now() % 2 ** 31 : Number(process.env.FAULT_SEED);
const random = mulberry32(seed);

beforeAll(() => {
  console.log(`fault injection seed ${seed} (replay with FAULT_SEED=${seed})`);
});

/** A random point of the burst, away from its very ends. */
function somewhere(): number {
  return 50 + Math.floor(random() * (CALLS - 100));
}

function expected(i: number): unknown {
  return i % 2 === 0 ? i * 2 : { double: i * 2 };
}

function nest(depth: number): unknown {
  let value: unknown = 'leaf';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** How one call ended, and how many times its Future settled. */
interface Outcome {
  value?: unknown;
  error?: Error;
  cancelled?: boolean;
  settles: number;
}

/** Follow `futures`: each outcome, and every settling counted. */
function follow(futures: Array<Future<unknown>>): Outcome[] {
  return futures.map((future) => {
    const outcome: Outcome = { settles: 0 };
    future.addDoneCallback((done) => {
      outcome.settles++;
      if (done.cancelled()) outcome.cancelled = true;
      else if (done.exception() !== null) outcome.error = done.exception()!;
      else outcome.value = done.result();
    });
    return outcome;
  });
}

/** Wait until every Future is done, then a few more iterations (a second settling would show). */
function* settleAll(futures: Array<Future<unknown>>): Coroutine<void> {
  yield* gather(futures, { returnExceptions: true });
  for (let i = 0; i < 5; i++) yield* sleep(0);
}

/** The checks every fault shares; returns the indices of the calls that failed. */
function check(
  outcomes: Outcome[],
  done: Int32Array,
  options: { allowed: RegExp; finishedKeepResults: boolean; label: string; unreadable?: number; mayBeCaught?: Set<number> },
): number[] {
  const failed: number[] = [];
  for (let i = 0; i < outcomes.length; i++) {
    const outcome = outcomes[i]!;
    const where = `${options.label}, call ${i} (seed ${seed})`;
    expect(outcome.settles, where).toBe(1);
    if (outcome.error === undefined && outcome.cancelled !== true) {
      expect(outcome.value, where).toEqual(expected(i));
      continue;
    }
    failed.push(i);
    if (outcome.cancelled === true) {
      expect('cancelled', where).toMatch(options.allowed);
    } else {
      expect(outcome.error!.message, where).toMatch(options.allowed);
      // The one result that cannot be read finished too: it is the one that must fail.
      const caught = options.mayBeCaught?.has(i) === true;
      if (options.finishedKeepResults && Atomics.load(done, i) === 1 && i !== options.unreadable && !caught) {
        throw new Error(`${where} finished in its thread, but its result was lost: ${outcome.error!.message}`);
      }
    }
  }
  return failed;
}

/** A slot per call (1 once it finished), then one per thread: the last call it started, plus 1. */
function sharedFlags(): Int32Array {
  return new Int32Array(new SharedArrayBuffer((CALLS + 1024) * Int32Array.BYTES_PER_ELEMENT));
}

/**
 * The calls a thread may have finished without their outcome getting out: the last one each
 * thread started. Ended from outside at any instant (terminate), a thread can stop between a
 * call's last statement and the library taking its outcome; every call before it did get out,
 * since the next one started after.
 */
function lastStartedPerThread(done: Int32Array): Set<number> {
  const last = new Set<number>();
  for (let slot = CALLS; slot < done.length; slot++) {
    const started = Atomics.load(done, slot);
    if (started !== 0) last.add(started - 1);
  }
  return last;
}

let loop: EventLoop;
const threads: LoopThread[] = [];
const executors: PiscinaExecutor[] = [];

afterEach(async () => {
  await Promise.all(threads.splice(0).map((thread) => thread.terminate()));
  await Promise.all(executors.splice(0).map((executor) => executor.shutdown(false)));
  setEventLoop(null);
  if (!loop.isClosed()) loop.close();
});

function startLoop(): EventLoop {
  loop = newEventLoop();
  setEventLoop(loop);
  return loop;
}

function* startThread(options: LoopThreadOptions): Coroutine<LoopThread> {
  const thread = yield* ensureFuture(LoopThread.start(SERVICE, options));
  threads.push(thread);
  return thread;
}

describe('faults on the link from this loop to a LoopThread', () => {
  it.each([
    ['a result this loop cannot read', 'unreadable-result', {}, /^the result of 'work' could not be read by the parent loop \(RangeError: Maximum call stack size exceeded\)$/, true],
    ['an argument the thread cannot read', 'unreadable-argument', { resourceLimits: { stackSizeMb: 0.5 } }, /^LoopThread 'faulty' could not read the arguments of call 'work' \(RangeError: Maximum call stack size exceeded\)$/, true],
    ['process.exit', 'exit', {}, /^LoopThread 'faulty' \(thread \d+\) died: it exited with code 7$/, true],
    ['an uncaught error', 'throw', {}, /^LoopThread 'faulty' \(thread \d+\) died: uncaught Error: injected at \d+$/, true],
    ['running out of memory', 'hog', { resourceLimits: { maxOldGenerationSizeMb: 32 } }, /^LoopThread 'faulty' \(thread \d+\) died: it ran out of memory \(resourceLimits exceeded\)$/, false],
    ['terminate()', 'terminate', {}, /^LoopThread 'faulty' \(thread \d+\) died: it was terminated$/, false],
  ] as const)('%s: every call settles once, rightly or naming the cause', async (label, fault, options, allowed, finishedKeepResults) => {
    startLoop();
    const k = somewhere();
    const done = sharedFlags();
    const failed = await loop.runUntilComplete(
      (function* (): Coroutine<number[]> {
        const thread = yield* startThread({ name: 'faulty', ...options });
        const futures: Array<Future<unknown>> = [];
        for (let i = 0; i < CALLS; i++) {
          const injected = i === k && fault !== 'terminate' && fault !== 'unreadable-argument' ? fault : 'none';
          futures.push(thread.call('work', i, injected, done, i === k && fault === 'unreadable-argument' ? nest(3000) : null));
        }
        const outcomes = follow(futures);
        if (fault === 'terminate') {
          let arrived = 0;
          for (const future of futures) {
            future.addDoneCallback(() => {
              if (++arrived === k) void thread.terminate();
            });
          }
        }
        yield* settleAll(futures);
        return check(outcomes, done, { allowed, finishedKeepResults, label: `${label} at ${k}`, unreadable: fault === 'unreadable-result' ? k : -1 });
      })(),
    );
    if (fault === 'unreadable-result' || fault === 'unreadable-argument') {
      // Only the call that cannot be read fails; the thread goes on.
      expect(failed).toEqual([k]);
    } else if (fault !== 'terminate') {
      expect(failed).toContain(k);
    }
    expect(allTasks(loop).size).toBe(0);
  });
});

describe('faults on the link from a LoopThread to this loop', () => {
  it.each([
    ['an argument this loop cannot read', 'unreadable-argument', {}],
    ['a result the thread cannot read', 'unreadable-result', { resourceLimits: { stackSizeMb: 0.5 } }],
  ] as const)('%s: only that call fails, naming the reason', async (_label, fault, options) => {
    startLoop();
    const k = somewhere();
    const seen = await loop.runUntilComplete(
      (function* (): Coroutine<Array<{ value?: unknown; error?: string }>> {
        const thread = yield* startThread({
          name: 'caller',
          ...options,
          expose: { echoBack: (i: number, _payload: unknown, deep: boolean) => (deep ? nest(3000) : i * 3) },
        });
        return yield* thread.call<Array<{ value?: unknown; error?: string }>>('burstToParent', CALLS, k, fault);
      })(),
    );
    expect(seen).toHaveLength(CALLS);
    for (let i = 0; i < CALLS; i++) {
      if (i !== k) expect(seen[i], `call ${i} (seed ${seed})`).toEqual({ value: i * 3 });
    }
    expect(seen[k]!.error).toBe(
      fault === 'unreadable-argument'
        ? "RangeError: the parent loop could not read the arguments of call 'echoBack' (RangeError: Maximum call stack size exceeded)"
        : "RangeError: the result of 'echoBack' could not be read by LoopThread 'caller' (RangeError: Maximum call stack size exceeded)",
    );
  });

  it.each([
    ['the thread exits', 'exit', /^LoopThread 'caller' \(thread \d+\) died: it exited with code 7$/],
    ['the thread is terminated', 'terminate', /^LoopThread 'caller' \(thread \d+\) died: it was terminated$/],
  ] as const)('%s while its calls are in flight: nothing is left running or waiting here', async (_label, fault, allowed) => {
    startLoop();
    const k = somewhere();
    let arrived = 0;
    const outcome = await loop.runUntilComplete(
      (function* (): Coroutine<{ error?: Error }> {
        let thread: LoopThread | null = null;
        thread = yield* startThread({
          name: 'caller',
          expose: {
            // Half the calls are tasks here, still running when the thread goes.
            echoBack: function* (i: number): Coroutine<number> {
              if (++arrived === k && fault === 'terminate') void thread!.terminate();
              if (i % 2 === 1) yield* sleep(0.001);
              return i * 3;
            },
          },
        });
        try {
          yield* thread.call('burstToParent', CALLS, k, fault === 'exit' ? 'exit' : 'none');
          return {};
        } catch (error) {
          return { error: error as Error };
        }
      })(),
    );
    expect(outcome.error?.message).toMatch(allowed);
    // Every call the thread made here was cancelled with it, none left running.
    await loop.runUntilComplete(sleep(0.01));
    expect(allTasks(loop).size).toBe(0);
  });
});

describe('faults in the pool', () => {
  function executor(options: PiscinaExecutorOptions): PiscinaExecutor {
    const made = new PiscinaExecutor({ maxThreads: 2, ...options });
    executors.push(made);
    return made;
  }

  const work = workerFn<[number, string, Int32Array, unknown], unknown>(SERVICE, 'work');

  it.each([
    ['a result this loop cannot read', 'unreadable-result', {}, /^the outcome of work of .* could not be read in this thread \(RangeError: Maximum call stack size exceeded\)$/],
    ['an argument a pool thread cannot read', 'unreadable-argument', { resourceLimits: { stackSizeMb: 0.5 } }, /^cannot send work of .* to a pool thread: argument 4 is nested deeper than 409 levels/],
    ['process.exit', 'exit', {}, /^the pool thread running work of .* exited with code 7$/],
    ['an uncaught error', 'throw', {}, /^the pool thread running work of .* crashed with an uncaught Error: injected at \d+$/],
    ['running out of memory', 'hog', { resourceLimits: { maxOldGenerationSizeMb: 32 } }, /^the pool thread running work of .* crashed with an uncaught Error: .*out of memory/],
  ] as const)('%s: only that job fails, naming the cause; no finished job loses its result', async (label, fault, options, allowed) => {
    startLoop();
    const made = executor(options);
    const k = somewhere();
    const done = sharedFlags();
    const failed = await loop.runUntilComplete(
      (function* (): Coroutine<number[]> {
        // Known run times: the burst travels in batches, so the fault hits the jobs beside it.
        yield* gather(Array.from({ length: 200 }, (_, i) => loop.runInExecutor(made, work, i, 'none', sharedFlags(), null)));
        const futures: Array<Future<unknown>> = [];
        for (let i = 0; i < CALLS; i++) {
          const injected = i === k && fault !== 'unreadable-argument' ? fault : 'none';
          futures.push(loop.runInExecutor(made, work, i, injected, done, i === k && fault === 'unreadable-argument' ? nest(3000) : null));
        }
        const outcomes = follow(futures);
        yield* settleAll(futures);
        return check(outcomes, done, { allowed, finishedKeepResults: true, label: `${label} at ${k}`, unreadable: fault === 'unreadable-result' ? k : -1 });
      })(),
    );
    expect(failed).toEqual([k]);
    expect(made.statistics().batches).toBeLessThan(CALLS);
  });

  it('terminate() of the pool threads mid-burst (shutdown without waiting): no finished job loses its result', async () => {
    startLoop();
    const made = executor({});
    const k = somewhere();
    const done = sharedFlags();
    const allowed = /^cancelled$|^the pool thread running work of .* was ended by shutdown$/;
    await loop.runUntilComplete(
      (function* (): Coroutine<void> {
        yield* gather(Array.from({ length: 200 }, (_, i) => loop.runInExecutor(made, work, i, 'none', sharedFlags(), null)));
        const futures: Array<Future<unknown>> = [];
        for (let i = 0; i < CALLS; i++) futures.push(loop.runInExecutor(made, work, i, 'none', done, null));
        const outcomes = follow(futures);
        let arrived = 0;
        for (const future of futures) {
          future.addDoneCallback(() => {
            if (++arrived !== k) return;
            void made.shutdown(true);
            void made.shutdown(false);
          });
        }
        yield* settleAll(futures);
        check(outcomes, done, { allowed, finishedKeepResults: true, label: `terminate at ${k}`, mayBeCaught: lastStartedPerThread(done) });
      })(),
    );
  });
});
