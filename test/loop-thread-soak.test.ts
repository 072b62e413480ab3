/**
 * Soak: 100k calls to a LoopThread, 1000 at a time, a seeded random share of them cancelled at
 * a random point (in the same iteration as the call, or a few iterations later, before or while
 * the call runs there). Every Future must settle exactly once, with the right outcome, and the
 * thread must be left without tasks.
 */
import { describe, expect, it } from 'vitest';
import { type EventLoop, type Future, gather, newEventLoop, type Coroutine } from '../src/index.js';
import { useThreads } from './helpers/loop-threads.js';
import { useFreshLoop } from './helpers/loops.js';
import { mulberry32 } from './helpers/prng.js';

const SOAK = new URL('./fixtures/lt-soak.mjs', import.meta.url);
const TOTAL = 100_000;
const BATCH = 1_000;
/** Cancellations happen 0 to MAX_DELAY iterations after the call. */
const MAX_DELAY = 6;

type Kind = 'double' | 'work' | 'failing' | 'park';

interface Planned {
  index: number;
  kind: Kind;
  future: Future<unknown>;
  /** Iterations after the call at which to cancel it, or -1 to let it finish. */
  cancelAt: number;
  /** Whether cancel() returned true. */
  cancelled: boolean;
}

let loop: EventLoop;
useFreshLoop(() => (loop = newEventLoop()));
// Registered after the loop, so its threads end before the loop closes.
const threads = useThreads();

describe('LoopThread soak', () => {
  it('settles each of 100k calls exactly once, with random cancellation, and leaves no task there', async () => {
    const next = mulberry32(0x5eed);
    const doneCounts = new Uint8Array(TOTAL);
    const problems: string[] = [];
    let cancelledCount = 0;

    function plan(index: number, thread: { call(name: string, ...args: unknown[]): Future<unknown> }): Planned {
      const roll = next();
      const kind: Kind = roll < 0.35 ? 'double' : roll < 0.7 ? 'work' : roll < 0.8 ? 'failing' : 'park';
      const future =
        kind === 'work' ? thread.call('work', index, Math.floor(next() * 4)) : thread.call(kind, index);
      future.addDoneCallback(() => doneCounts[index]++);
      // A parked call only ends when cancelled; a tenth of the others are cancelled too.
      const cancel = kind === 'park' || next() < 0.1;
      return { index, kind, future, cancelAt: cancel ? Math.floor(next() * (MAX_DELAY + 1)) : -1, cancelled: false };
    }

    function check(call: Planned): void {
      const { index, kind, future } = call;
      if (doneCounts[index] !== 1) problems.push(`call ${index}: ${doneCounts[index]} done callbacks`);
      if (call.cancelled) {
        if (!future.cancelled()) problems.push(`call ${index}: cancel() returned true but it is not cancelled`);
        return;
      }
      if (future.cancelled()) {
        problems.push(`call ${index} (${kind}): cancelled though cancel() was refused or never called`);
      } else if (kind === 'failing') {
        const error = future.exception();
        if (!(error instanceof RangeError) || error.message !== `bad ${index}`) problems.push(`call ${index}: wrong error ${String(error)}`);
      } else if (future.exception() !== null) {
        problems.push(`call ${index} (${kind}): failed with ${String(future.exception())}`);
      } else if (future.result() !== index * 2) {
        problems.push(`call ${index} (${kind}): result ${String(future.result())}`);
      }
    }

    const remoteTasks = await loop.runUntilComplete(
      (function* (): Coroutine<number> {
        const thread = yield* threads.start(SOAK, { name: 'soak' });
        for (let start = 0; start < TOTAL; start += BATCH) {
          const calls: Planned[] = [];
          for (let index = start; index < start + BATCH; index++) calls.push(plan(index, thread));
          for (let delay = 0; delay <= MAX_DELAY; delay++) {
            for (const call of calls) {
              if (call.cancelAt === delay && call.future.cancel()) {
                call.cancelled = true;
                cancelledCount++;
              }
            }
            yield;
          }
          yield* gather(
            calls.map((call) => call.future),
            { returnExceptions: true },
          );
          // The done callbacks of the last calls were queued beside gather's own.
          yield;
          for (const call of calls) check(call);
          if (problems.length > 0) break;
        }
        // A task cancelled there ends at its next step: one round trip later it is gone.
        yield* thread.call('double', 0);
        return yield* thread.call<number>('taskCount');
      })(),
    );

    expect(problems.slice(0, 10)).toEqual([]);
    // Late replies (to calls cancelled here after they ended there) settled nothing twice.
    expect(doneCounts.every((count) => count === 1)).toBe(true);
    expect(remoteTasks).toBe(0);
    // About 28% of the calls are cancelled (all parked ones, a tenth of the others), minus refused cancels.
    expect(cancelledCount).toBeGreaterThan(TOTAL * 0.2);
    expect(cancelledCount).toBeLessThan(TOTAL * 0.35);
  }, 120_000);

});
