/**
 * LoopThreadPool across real threads, what a pool gives each of its threads and how it picks
 * one: a cancelled call counts in flight until its task in the thread has ended; a thread whose
 * loop a callback blocks gets no new calls while the other can take them; the initializer runs
 * in every thread, replacements too, before its first call, and one that fails is a failed
 * start (counted against the restart budget); resourceLimits reach every thread; bad options
 * say what is wrong.
 */
import { describe, expect, it } from 'vitest';
import { LoopThreadPool, RuntimeError, gather, run, sleep, type Coroutine } from '../src/index.js';

const FIXTURE = new URL('./fixtures/pool-init.mjs', import.meta.url);

/** Wait until `check` holds, a loop iteration at a time (bounded). */
function* until(check: () => boolean, what: string): Coroutine<void> {
  for (let i = 0; i < 4000; i++) {
    if (check()) return;
    yield* sleep(0.005);
  }
  throw new Error(`never happened: ${what}`);
}

/** Shared counters for the fixture (see pool-init.mjs). */
function counters(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT));
}

interface Described {
  label: string;
  callsBefore: number;
  calls: number;
  threadId: number;
}

describe('LoopThreadPool statistics().inFlight', () => {
  it('counts a cancelled call until its task in the thread has ended', async () => {
    const n = 20;
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(FIXTURE, { size: 2, name: 'ending' });
        try {
          const counts = counters();
          const calls = Array.from({ length: n }, () => pool.call('stubborn', counts));
          const submitted = pool.submit('stubborn', counts);
          yield* until(() => Atomics.load(counts, 0) === n + 1, 'every call runs');
          const running = pool.statistics().inFlight;
          for (const call of calls) call.cancel();
          submitted.cancel();
          yield* until(() => Atomics.load(counts, 1) === n + 1, 'every task took its cancellation');
          // A round trip to each thread after that: whatever the cancellations made them send back has arrived.
          yield* pool.broadcast('whoami');
          const cancelled = pool.statistics().inFlight;
          const ended = Atomics.load(counts, 2);
          yield* pool.broadcast('release');
          yield* until(() => pool.statistics().inFlight.every((count) => count === 0), 'every call counted out');
          return { running, cancelled, ended, endedAfter: Atomics.load(counts, 2), stats: pool.statistics() };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    const running = seen.running as number[];
    expect(running.reduce((sum, count) => sum + count, 0)).toBe(n + 1);
    expect(running.every((count) => count > 0)).toBe(true);
    // Cancelled, and their tasks still running there: each still counts where it went.
    expect(seen.ended).toBe(0);
    expect(seen.cancelled).toEqual(running);
    expect(seen.endedAfter).toBe(n + 1);
    expect(seen.stats).toEqual({ size: 2, inFlight: [0, 0], completed: 4, failed: n + 1, restarts: 0 });
  });
});

describe('LoopThreadPool routing', () => {
  it('sends no new call to a thread whose loop a callback blocks while the other can take it, and again once it takes messages', async () => {
    const n = 200;
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(FIXTURE, { size: 2, name: 'blocked' });
        const gate = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));
        const open = (): void => {
          Atomics.store(gate, 0, 1);
          Atomics.notify(gate, 0);
        };
        const [first, second] = pool.threads();
        // Straight to the first thread, not through the pool: the pool has no call of its own there.
        const blocking = first!.call<number>('blockUntil', gate);
        try {
          yield* until(() => Atomics.load(gate, 1) === 1, 'the first thread blocks');
          // Longer than 100 ms: its loop has taken in nothing since before it blocked.
          yield* sleep(0.3);
          const burst = Array.from({ length: n }, () => pool.call<number>('whoami'));
          const inFlight = pool.statistics().inFlight;
          open();
          const ran = yield* gather(burst);
          yield* blocking;
          // Unblocked, it takes calls again (its loop's next turn tells the pool so).
          let again = false;
          for (let i = 0; i < 400 && !again; i++) {
            const pair = yield* gather([pool.call<number>('whoami'), pool.call<number>('whoami')]);
            again = pair.includes(first!.threadId);
            if (!again) yield* sleep(0.005);
          }
          return { first: first!.threadId, second: second!.threadId, inFlight, ran, again };
        } finally {
          open();
          yield* pool.close();
        }
      })(),
    );
    expect(seen.inFlight).toEqual([0, n]);
    expect(seen.ran).toEqual(Array.from({ length: n }, () => seen.second));
    expect(seen.again).toBe(true);
  });
});

describe('LoopThreadPool initializer', () => {
  it('runs in every thread before its first call, and in each replacement before its first call', async () => {
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const flags = counters();
        const pool = yield* LoopThreadPool.start(FIXTURE, { size: 2, name: 'init', initializer: ['setupSlowly', flags, 'warm'] });
        try {
          const everyone = yield* pool.broadcast<Described>('describe');
          const old = pool.threads().map((thread) => thread.threadId);
          yield* gather(pool.threads().map((thread) => thread.terminate()));
          // No thread is alive now: the call waits for a replacement, set up before it takes the call.
          const waited = yield* pool.call<Described>('describe');
          yield* until(() => pool.statistics().size === 2, 'both replacements run');
          const replacements = yield* pool.broadcast<Described>('describe');
          return { everyone, old, waited, replacements, runs: Atomics.load(flags, 1), stats: pool.statistics() };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    const everyone = seen.everyone as Described[];
    expect(everyone.map(({ label, callsBefore, calls }) => ({ label, callsBefore, calls }))).toEqual([
      { label: 'warm', callsBefore: 0, calls: 1 },
      { label: 'warm', callsBefore: 0, calls: 1 },
    ]);
    const old = seen.old as number[];
    const waited = seen.waited as Described;
    expect(waited).toMatchObject({ label: 'warm', callsBefore: 0, calls: 1 });
    expect(old).not.toContain(waited.threadId);
    const replacements = seen.replacements as Described[];
    expect(replacements.map(({ label, callsBefore }) => ({ label, callsBefore }))).toEqual([
      { label: 'warm', callsBefore: 0 },
      { label: 'warm', callsBefore: 0 },
    ]);
    expect(replacements.every(({ threadId }) => !old.includes(threadId))).toBe(true);
    expect(seen.runs).toBe(4);
    expect(seen.stats).toMatchObject({ size: 2, restarts: 2 });
  });

  it('that fails fails the start, naming the export and why', async () => {
    const flags = counters();
    Atomics.store(flags, 0, 1);
    const failure = await LoopThreadPool.start(FIXTURE, { size: 1, name: 'init-fails', initializer: ['setup', flags, 'warm'] }).then(
      () => null,
      (error: unknown) => error as Error,
    );
    expect(failure).toBeInstanceOf(RuntimeError);
    expect(failure?.message).toBe("initializer 'setup' failed in LoopThread 'init-fails-0': Error: the database is down");
    expect((failure?.cause as Error).message).toBe('the database is down');
    expect(Atomics.load(flags, 2)).toBe(1);
  });

  it('that fails in a replacement counts against the restart budget, and past it names itself as the last cause', async () => {
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const flags = counters();
        const pool = yield* LoopThreadPool.start(FIXTURE, { size: 1, name: 'init-budget', restart: { max: 3, within: 60 }, initializer: ['setup', flags, 'warm'] });
        try {
          // The next replacement fails to set up; the one after it does.
          Atomics.store(flags, 0, 1);
          yield* pool.threads()[0]!.terminate();
          const recovered = yield* pool.call<Described>('describe');
          const afterOne = pool.statistics();
          // Every replacement fails from now on: the third is past the budget.
          Atomics.store(flags, 0, 100);
          yield* pool.threads()[0]!.terminate();
          let broken: unknown = null;
          try {
            yield* pool.call('describe');
          } catch (error) {
            broken = error;
          }
          return { recovered, afterOne, broken, failures: Atomics.load(flags, 2), stats: pool.statistics() };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    expect(seen.recovered).toMatchObject({ label: 'warm', callsBefore: 0, calls: 1 });
    expect(seen.afterOne).toMatchObject({ size: 1, restarts: 2 });
    const broken = seen.broken as Error;
    expect(broken).toBeInstanceOf(RuntimeError);
    expect(broken.message).toBe(
      "LoopThreadPool 'init-budget' is broken: 3 threads replaced within 60 s, and another died; the last cause: initializer 'setup' failed in LoopThread 'init-budget-0': Error: the database is down",
    );
    expect((broken.cause as Error).message).toBe("initializer 'setup' failed in LoopThread 'init-budget-0': Error: the database is down");
    expect(seen.failures).toBe(2);
    expect(seen.stats).toMatchObject({ size: 0, restarts: 3 });
  });

  it('refuses bad initializers and resource limits, naming the problem', async () => {
    const where = 'LoopThreadPool.start() options';
    await expect(LoopThreadPool.start(FIXTURE, { initializer: 'setup' as never })).rejects.toThrow(
      new TypeError(`${where}.initializer must be [exportName, ...args] (a non-empty name first), got 'setup'`),
    );
    await expect(LoopThreadPool.start(FIXTURE, { initializer: [42] as never })).rejects.toThrow(
      new TypeError(`${where}.initializer must be [exportName, ...args] (a non-empty name first), got [ 42 ]`),
    );
    await expect(LoopThreadPool.start(FIXTURE, { initializer: ['setup', () => 1] })).rejects.toThrow(
      new TypeError(`${where}.initializer: argument 1 is a function, which cannot be cloned (mark it with Comlink.proxy(fn) to let the other side call it back)`),
    );
    await expect(LoopThreadPool.start(FIXTURE, { resourceLimits: 64 as never })).rejects.toThrow(
      new TypeError(`${where}.resourceLimits must be an object of maxYoungGenerationSizeMb, maxOldGenerationSizeMb, codeRangeSizeMb, stackSizeMb, got 64`),
    );
    await expect(LoopThreadPool.start(FIXTURE, { resourceLimits: { maxOldGenerationSize: 64 } as never })).rejects.toThrow(
      new TypeError(`${where}.resourceLimits has no limit 'maxOldGenerationSize' (the limits: maxYoungGenerationSizeMb, maxOldGenerationSizeMb, codeRangeSizeMb, stackSizeMb)`),
    );
    await expect(LoopThreadPool.start(FIXTURE, { resourceLimits: { maxOldGenerationSizeMb: '64' as never } })).rejects.toThrow(
      new RangeError(`${where}.resourceLimits.maxOldGenerationSizeMb must be a positive number of MB, got '64'`),
    );
    const unknown = await LoopThreadPool.start(FIXTURE, { size: 1, name: 'init-unknown', initializer: ['setUp'] }).then(
      () => null,
      (error: unknown) => error as Error,
    );
    expect(unknown).toBeInstanceOf(TypeError);
    expect(unknown?.message).toMatch(/^initializer 'setUp' of LoopThread 'init-unknown-0' cannot be called: 'setUp' is not a function exported by file:\/\/\/.*\/pool-init\.mjs \(its functions: /);
  });
});

describe('LoopThreadPool resourceLimits', () => {
  it('reach every thread, replacements too: a thread past them dies out of memory and is replaced', async () => {
    const resourceLimits = { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 4 };
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(FIXTURE, { size: 1, name: 'limited', resourceLimits });
        try {
          const first = yield* pool.call<Record<string, number>>('limits');
          let death: unknown = null;
          try {
            yield* pool.call('hog');
          } catch (error) {
            death = error;
          }
          yield* until(() => pool.statistics().size === 1, 'the replacement runs');
          const replacement = yield* pool.call<Record<string, number>>('limits');
          return { first, death, replacement, stats: pool.statistics() };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    expect(seen.first).toMatchObject(resourceLimits);
    expect((seen.death as Error).message).toMatch(/^LoopThread 'limited-0' \(thread \d+\) died: it ran out of memory \(resourceLimits exceeded\)$/);
    expect(seen.replacement).toMatchObject(resourceLimits);
    expect(seen.stats).toMatchObject({ size: 1, restarts: 1 });
  }, 60_000);
});
