/**
 * ThreadQueue faults across real threads: items a getter's thread cannot rebuild; a process
 * paused (SIGSTOP) while its threads wait on a held lock, against a lock holder that died.
 * Counts, orders and messages are asserted, never durations.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ThreadQueue, registerClass, run, waitFor, type Coroutine, type LoopThread } from '../src/index.js';
import { useThreads } from './helpers/loop-threads.js';

const FAULTS = new URL('./fixtures/thread-queue-faults.mjs', import.meta.url);
const PAUSE = new URL('./fixtures/thread-queue-pause.mjs', import.meta.url);
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

interface PauseReport {
  waiter: string;
  traffic: Array<{ rounds: number; error: string | null }>;
  left: unknown[] | null;
  after: string | null;
}

/**
 * Run the pause fixture in a child process: with `pause`, send SIGCONT `pauseMs` after it
 * stopped itself (again every 100 ms until it goes on). Its report.
 */
async function pausedChild(mode: 'pause' | 'dead', pauseMs = 0): Promise<PauseReport> {
  const child = spawn(process.execPath, [fileURLToPath(PAUSE), mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let resumer: NodeJS.Timeout | null = null;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    out += chunk;
    if (resumer !== null) {
      clearInterval(resumer);
      resumer = null;
    }
    if (out === 'stopping\n') {
      setTimeout(() => {
        child.kill('SIGCONT');
        resumer = setInterval(() => child.kill('SIGCONT'), 100);
      }, pauseMs);
    }
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (resumer !== null) clearInterval(resumer);
  expect(code).toBe(0);
  const lines = out.trim().split('\n');
  return JSON.parse(lines.at(-1) as string) as PauseReport;
}

describe('ThreadQueue in a process that is paused', () => {
  const broken = "ThreadQueue 'paused' is broken: a thread ended while it held the queue's lock (in the middle of a put or get), so its state cannot be trusted; make a new queue";

  it('keeps working after a SIGSTOP longer than the broken-lock limit while threads waited on a held lock', async () => {
    // The limit is 2 s in the child; it stays stopped 3 s, its waiters asleep on the lock.
    const report = await pausedChild('pause', 3000);
    expect(report).toEqual({
      waiter: 'put',
      traffic: [
        { rounds: 2000, error: null },
        { rounds: 2000, error: null },
      ],
      left: expect.any(Array) as unknown,
      after: null,
    });
    expect(report.left).toHaveLength(2);
  });

  it('is still broken, in every waiting thread, when the lock holder\'s thread ended holding it', async () => {
    const report = await pausedChild('dead');
    expect(report).toEqual({
      waiter: broken,
      traffic: [
        { rounds: 0, error: broken },
        { rounds: 0, error: broken },
      ],
      left: null,
      after: broken,
    });
  });
});
