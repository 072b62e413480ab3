/**
 * ThreadQueue faults across real threads: items a getter's thread cannot rebuild.
 * Counts, orders and messages are asserted, never durations.
 */
import { describe, expect, it } from 'vitest';
import { ThreadQueue, registerClass, run, waitFor, type Coroutine, type LoopThread } from '../src/index.js';
import { useThreads } from './helpers/loop-threads.js';

const FAULTS = new URL('./fixtures/thread-queue-faults.mjs', import.meta.url);
const threads = useThreads();

/** Registered in this thread only: the fixture's threads do not know it. */
class Stranger {
  constructor(readonly id: number) {}
}
registerClass(Stranger);

/** Registered in both threads under this name; the fixture's deserializer throws. */
class Fragile {
  constructor(readonly id: number) {}
}
registerClass(Fragile, { name: 'Fragile' });

/** An item nested `depth` arrays deep. */
function nested(depth: number): unknown {
  let item: unknown = 'bottom';
  for (let i = 0; i < depth; i++) item = [item];
  return item;
}

interface GetOutcome {
  item?: unknown;
  error?: string;
  message?: string;
  cause?: string;
}

describe('ThreadQueue items the getter cannot rebuild', () => {
  it('fails that get with an error naming why, counts the item done (join() returns), and the next items come', async () => {
    const got = await run(
      (function* (): Coroutine<{ outcomes: GetOutcome[]; left: number }> {
        // A small stack: the nested item is put here and cannot be rebuilt there.
        const getter: LoopThread = yield* threads.start(FAULTS, { name: 'getter', resourceLimits: { stackSizeMb: 0.5 } });
        const q = new ThreadQueue<unknown>({ name: 'jobs' });
        for (const item of [new Stranger(1), 'one', new Fragile(2), 'two', nested(3000), 'three']) q.putNowait(item);
        const outcomes = yield* getter.call<GetOutcome[]>('getEach', q, 6);
        // Every item is accounted for: the three got are marked done, the three lost count as done.
        yield* waitFor(q.join(), 10);
        return { outcomes, left: q.qsize() };
      })(),
    );
    expect(got.left).toBe(0);
    const why = "cannot get from ThreadQueue 'jobs': the item could not be rebuilt in this thread";
    const done = 'it was taken from the queue and counted as done';
    expect(got.outcomes).toEqual([
      {
        error: 'TypeError',
        message: `${why} (an instance of class 'Stranger' arrived, but no class is registered as 'Stranger' in this thread: call registerClass() for it in a module this thread imports); ${done}`,
        cause: 'TypeError',
      },
      { item: 'one' },
      { error: 'TypeError', message: `${why} (Fragile refuses to be rebuilt here); ${done}`, cause: 'Error' },
      { item: 'two' },
      { error: 'TypeError', message: `${why} (it is nested deeper than this thread's stack allows: Maximum call stack size exceeded); ${done}`, cause: 'RangeError' },
      { item: 'three' },
    ]);
  });
});
