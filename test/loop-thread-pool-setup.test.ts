/**
 * LoopThreadPool across real threads, what a pool gives each of its threads and how it picks
 * one: a cancelled call counts in flight until its task in the thread has ended; a thread whose
 * loop a callback blocks gets no new calls while the other can take them.
 */
import { describe, expect, it } from 'vitest';
import { LoopThreadPool, gather, run, sleep, type Coroutine } from '../src/index.js';

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
