/**
 * A busy loop hears other threads within a round: a LoopThread whose every iteration is longer
 * than the time slice (hundreds of CPU-slicing tasks) takes in calls and cancellations at the
 * next iteration, as asyncio's select(0) does, not only when libuv gets a turn. Counted in the
 * busy loop's rounds, never in milliseconds.
 */
import { describe, expect, it } from 'vitest';
import { CancelledError, LoopThread, run, sleep, type Coroutine } from '../src/index.js';

const BUSY = new URL('./fixtures/busy-service.mjs', import.meta.url);
/** 200 tasks × 25 µs: every iteration is 5 ms, over twice the 2 ms slice. */
const TASKS = 200;
const MICROS = 25;

/** Start a LoopThread kept busy; slot 0 of the shared words is its current iteration. */
function* busyThread(): Coroutine<{ lt: LoopThread; words: Int32Array; shared: SharedArrayBuffer }> {
  const lt = yield* LoopThread.start(BUSY, { name: 'busy' });
  const shared = new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT);
  const words = new Int32Array(shared);
  yield* lt.call('startBusy', shared, TASKS, MICROS);
  while (Atomics.load(words, 0) < 3) yield* sleep(0.005);
  return { lt, words, shared };
}

describe('a busy loop and other threads', () => {
  it('runs a call sent to a loop whose iterations outlast the slice within two of its rounds', async () => {
    const rounds = await run(
      (function* (): Coroutine<number[]> {
        const { lt, words } = yield* busyThread();
        try {
          const seen: number[] = [];
          for (let i = 0; i < 6; i++) {
            const ran = lt.call<number>('iteration');
            // This loop posts the call when its iteration ends: read the busy loop's round once
            // the call is in its port, so how long this thread took to post it does not count.
            yield* sleep(0);
            const sentDuring = Atomics.load(words, 0);
            seen.push((yield* ran) - sentDuring);
          }
          return seen;
        } finally {
          yield* lt.call('stopBusy');
          yield* lt.close();
        }
      })(),
    );
    // Sent during iteration N, the call is taken in at N's end and runs in N + 1 (N + 2 when
    // it came just after that poll). It waited for libuv's turn before: every 8 iterations.
    for (const r of rounds) expect(r).toBeLessThanOrEqual(2);
  }, 60_000);

  it('cancels remote work in a busy loop within two of its steps', async () => {
    const out = await run(
      (function* (): Coroutine<{ stepsAfter: number; error: unknown }> {
        const { lt, words, shared } = yield* busyThread();
        try {
          const call = lt.call('work', shared, MICROS);
          while (Atomics.load(words, 1) < 3) yield* sleep(0.005);
          call.cancel();
          // The cancellation is posted when this loop's iteration ends: count the busy loop's
          // steps from when it is in that loop's port (a loaded machine may pause this thread
          // for a few of its rounds between the cancel and the post).
          yield* sleep(0);
          const stepsAtCancel = Atomics.load(words, 1);
          let error: unknown = null;
          try {
            yield* call;
          } catch (caught) {
            error = caught;
          }
          // The remote task has ended once its finally block wrote slot 2.
          while (Atomics.load(words, 2) === 0) yield* sleep(0.005);
          return { stepsAfter: Atomics.load(words, 1) - stepsAtCancel, error };
        } finally {
          yield* lt.call('stopBusy');
          yield* lt.close();
        }
      })(),
    );
    expect(out.error).toBeInstanceOf(CancelledError);
    expect(out.stepsAfter).toBeLessThanOrEqual(2);
  }, 60_000);
});
