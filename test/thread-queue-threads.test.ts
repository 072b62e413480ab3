/**
 * ThreadQueue across real threads: LoopThreads that put and get, pool jobs (threads with no
 * loop) that block in getSync/putSync, threads that die while they wait or while they drain, and
 * a queue whose creating thread ends. Counts and orders are asserted, never durations.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import {
  QueueShutDown,
  RuntimeError,
  ThreadQueue,
  gather,
  run,
  sleep,
  toThread,
  createTask,
  newEventLoop,
  workerFn,
  type Coroutine,
  type Future,
  type LoopThread,
} from '../src/index.js';
import { toWire } from '../src/internal/wire.js';
import { PUTS, _setStuckLockMs, _waitingOn } from '../src/internal/threads/queue-memory.js';
import { expectError } from './helpers/errors.js';
import { awaitPromise, errorOf, outcome, useThreads } from './helpers/loop-threads.js';

const SERVICE = new URL('./fixtures/thread-queue-service.mjs', import.meta.url);
const RAW_WORKER = new URL('./fixtures/thread-queue-raw-worker.mjs', import.meta.url);
const threads = useThreads();

type Item = [string, number];

interface SyncOutcome {
  got: number[];
  error: string;
  message: string;
}
const syncWorker = workerFn<[ThreadQueue<number>, ThreadQueue<number>, ThreadQueue<string> | null, number | null], SyncOutcome>(SERVICE, 'syncWorker');
const syncPutFull = workerFn<[ThreadQueue<string>, number], { error: string | null; message?: string; isTimeout?: boolean }>(SERVICE, 'syncPutFull');

/** Start `count` LoopThreads hosting the service. */
function* start(count: number): Coroutine<LoopThread[]> {
  const started: LoopThread[] = [];
  for (let i = 0; i < count; i++) started.push(yield* threads.start(SERVICE, { name: `tq-${i}` }));
  return started;
}

/** Wait until `ready` says, `count` times, that a waiter is about to wait (then give it a moment to be asleep). */
function* waiting(ready: ThreadQueue<string>, count: number): Coroutine<void> {
  for (let i = 0; i < count; i++) expect(yield* ready.get()).toBe('waiting');
  yield* sleep(0.05);
}

describe('ThreadQueue across threads', () => {
  it('gives each of 2 × 5,000 items from 2 producer threads to exactly one of 2 consumer threads, each producer in order', async () => {
    const [seen, left] = await run(
      (function* (): Coroutine<[Item[][], number]> {
        const [p1, p2, c1, c2] = (yield* start(4)) as [LoopThread, LoopThread, LoopThread, LoopThread];
        const q = new ThreadQueue<Item>({ maxsize: 64, name: 'work' });
        const consumers = [c1.call<Item[]>('consume', q), c2.call<Item[]>('consume', q)];
        yield* gather(p1.call('produce', q, 'a', 5000), p2.call('produce', q, 'b', 5000));
        yield* q.join();
        q.shutdown();
        return [yield* gather(...consumers), q.qsize()];
      })(),
    );
    expect(left).toBe(0);
    const all = seen.flat();
    expect(all.length).toBe(10_000);
    const keys = new Set(all.map(([tag, i]) => `${tag}${i}`));
    expect(keys.size).toBe(10_000);
    for (const consumer of seen) {
      // Each consumer saw each producer's items in the order they were put.
      for (const tag of ['a', 'b']) {
        const mine = consumer.filter(([t]) => t === tag).map(([, i]) => i);
        expect(mine).toEqual([...mine].sort((x, y) => x - y));
      }
    }
    // Both consumers took part (5,000 items each way through a queue of 64).
    expect(seen.every((consumer) => consumer.length > 0)).toBe(true);
  });

  it('arrives in another thread as the same queue, and comes back as the very object that left', async () => {
    const same = await run(
      (function* (): Coroutine<boolean> {
        const [t] = (yield* start(1)) as [LoopThread];
        const q = new ThreadQueue({ name: 'round-trip' });
        return (yield* t.call('echo', q)) === q;
      })(),
    );
    expect(same).toBe(true);
  });

  it('carries a Buffer item from another thread as a Buffer', async () => {
    const got = await run(
      (function* (): Coroutine<unknown> {
        const [t] = (yield* start(1)) as [LoopThread];
        const made = (yield* t.call('make', 0, 'made-there')) as ThreadQueue<unknown>;
        yield* t.call('putHere', Buffer.from('from there'));
        return yield* made.get();
      })(),
    );
    expect(Buffer.isBuffer(got)).toBe(true);
    expect(String(got)).toBe('from there');
  });

  it('waits in join until items were marked done in other threads', async () => {
    const done = await run(
      (function* (): Coroutine<number[]> {
        const [c1, c2] = (yield* start(2)) as [LoopThread, LoopThread];
        const q = new ThreadQueue<Item>({ name: 'join' });
        for (let i = 0; i < 200; i++) q.putNowait(['x', i]);
        const consumers = [c1.call<Item[]>('consume', q), c2.call<Item[]>('consume', q)];
        yield* q.join();
        const unfinishedAfterJoin = String(q).includes('tasks=') ? 1 : 0;
        q.shutdown();
        const got = yield* gather(...consumers);
        return [unfinishedAfterJoin, got.flat().length];
      })(),
    );
    expect(done).toEqual([0, 200]);
  });

  it('holds a producer thread put on a full queue while its other tasks run, until gets free slots', async () => {
    const result = await run(
      (function* (): Coroutine<{ before: { ticks: number; putDone: boolean }; later: { ticks: number; putDone: boolean }; got: number[] }> {
        const [p] = (yield* start(1)) as [LoopThread];
        const q = new ThreadQueue<number>({ maxsize: 2, name: 'pressure' });
        const produced = p.call<number>('pressure', q, 5);
        while (!q.full()) yield* sleep(0.005);
        const before = yield* p.call<{ ticks: number; putDone: boolean }>('progress');
        yield* sleep(0.05);
        const later = yield* p.call<{ ticks: number; putDone: boolean }>('progress');
        expect(q.qsize()).toBe(2);
        const got: number[] = [];
        for (let i = 0; i < 5; i++) got.push(yield* q.get());
        yield* produced;
        return { before, later, got };
      })(),
    );
    expect(result.before.putDone).toBe(false);
    expect(result.later.putDone).toBe(false);
    // The producer's thread kept running its other task while its put waited.
    expect(result.later.ticks).toBeGreaterThan(result.before.ticks);
    expect(result.got).toEqual([0, 1, 2, 3, 4]);
  });

  it('reads with for await in another thread until shut down and drained', async () => {
    const got = await run(
      (function* (): Coroutine<string[]> {
        const [t] = (yield* start(1)) as [LoopThread];
        const q = new ThreadQueue<string>({ name: 'lines' });
        const collected = t.call<string[]>('collect', q);
        for (const line of ['one', 'two', 'three']) yield* q.put(line);
        yield* sleep(0.02);
        q.putNowait('four');
        q.shutdown();
        return yield* collected;
      })(),
    );
    expect(got).toEqual(['one', 'two', 'three', 'four']);
  });
});

describe('ThreadQueue and threads with no loop (pool jobs)', () => {
  it('serves getSync and putSync in a pool thread, which blocks until items come and times out when none does', async () => {
    const out = await run(
      (function* (): Coroutine<{ worker: SyncOutcome; results: number[] }> {
        const jobs = new ThreadQueue<number>({ name: 'jobs' });
        const results = new ThreadQueue<number>({ maxsize: 2, name: 'results' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        const worker = toThread(syncWorker, jobs, results, ready, 0.5);
        yield* waiting(ready, 1);
        // The pool thread is blocked in getSync; each put wakes it.
        const got: number[] = [];
        for (let i = 1; i <= 5; i++) {
          yield* jobs.put(i);
          got.push(yield* results.get());
        }
        return { worker: yield* worker, results: got };
      })(),
    );
    expect(out.results).toEqual([2, 4, 6, 8, 10]);
    expect(out.worker.got).toEqual([1, 2, 3, 4, 5]);
    expect(out.worker.error).toBe('TimeoutError');
    expect(out.worker.message).toBe("no item in ThreadQueue 'jobs' within 0.5 seconds");
  });

  it('hands 5,000 items one at a time to a pool thread blocked in getSync, and back through a full queue: every wait woken', async () => {
    // Each side sleeps on every item (the pool thread in getSync and putSync, the loop in get),
    // so a change that did not wake its sleeper would stop the exchange: the pool thread's
    // getSync would time out early, and its results would be fewer.
    const count = 5_000;
    const out = await run(
      (function* (): Coroutine<{ worker: SyncOutcome; sum: number }> {
        const jobs = new ThreadQueue<number>({ maxsize: 1, name: 'jobs' });
        const results = new ThreadQueue<number>({ maxsize: 1, name: 'results' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        const worker = toThread(syncWorker, jobs, results, ready, 2);
        yield* waiting(ready, 1);
        let sum = 0;
        for (let i = 1; i <= count; i++) {
          yield* jobs.put(i);
          sum += yield* results.get();
        }
        return { worker: yield* worker, sum };
      })(),
    );
    expect(out.sum).toBe(count * (count + 1));
    expect(out.worker.got).toHaveLength(count);
    expect(out.worker.error).toBe('TimeoutError');
  });

  it('takes a woken sleeper off the count in the put that woke it: the puts after it notify nobody', async () => {
    // A getSync counts itself among the sleepers of PUTS before it sleeps; the put that wakes it
    // takes it off at once (not the sleeper once it runs again), so the next puts, made while it
    // has not taken its item yet, find nobody counted and notify nobody. A sleeper that counted
    // itself but was not asleep yet when the put came (a loaded machine) is woken by nobody and
    // takes itself off once it runs: such a round reads 1 after the put, so rounds go on, each
    // giving the sleeper longer to fall asleep, until one reads 0. Counted as before (the sleeper
    // took itself off when it ran again), every round reads 1 after the put.
    const ROUNDS = 8;
    const out = await run(
      (function* (): Coroutine<{ counts: Array<[number, number]>; worker: SyncOutcome }> {
        const jobs = new ThreadQueue<number>({ name: 'jobs' });
        const results = new ThreadQueue<number>({ name: 'results' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        const control = new Int32Array(jobs._toWire().buffers.control);
        const worker = toThread(syncWorker, jobs, results, ready, 30);
        yield* waiting(ready, 1);
        const counts: Array<[number, number]> = [];
        for (let round = 1; round <= ROUNDS; round++) {
          while (_waitingOn(control, PUTS) === 0) yield* sleep(0.005);
          yield* sleep(0.02 * round * round);
          const before = _waitingOn(control, PUTS);
          jobs.putNowait(round);
          counts.push([before, _waitingOn(control, PUTS)]);
          expect(yield* results.get()).toBe(round * 2);
          if (counts.at(-1)![1] === 0) break;
        }
        jobs.shutdown();
        return { counts, worker: yield* worker };
      })(),
    );
    expect(out.counts.map(([before]) => before)).toEqual(out.counts.map(() => 1));
    expect(out.counts.at(-1)).toEqual([1, 0]);
    expect(out.worker.got).toEqual(out.counts.map((_, i) => i + 1));
    expect(out.worker.error).toBe('QueueShutDown');
  }, 60_000);

  it('times out putSync on a full queue in a pool thread, leaving the queue as it was', async () => {
    const out = await run(
      (function* (): Coroutine<[{ error: string | null; message?: string; isTimeout?: boolean }, number]> {
        const q = new ThreadQueue<string>({ maxsize: 1, name: 'full' });
        q.putNowait('only');
        const result = yield* toThread(syncPutFull, q, 0.05);
        return [result, q.qsize()];
      })(),
    );
    expect(out).toEqual([{ error: 'TimeoutError', message: "no free slot in ThreadQueue 'full' within 0.05 seconds", isTimeout: true }, 1]);
  });
});

describe('ThreadQueue when threads die', () => {
  it('loses no item to a consumer thread terminated while it waits in get', async () => {
    const got = await run(
      (function* (): Coroutine<[unknown, number[]]> {
        const [doomed, other] = (yield* start(2)) as [LoopThread, LoopThread];
        const q = new ThreadQueue<number>({ name: 'survives' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        const lost = doomed.call('getOne', q, ready);
        yield* waiting(ready, 1);
        yield* doomed.terminate();
        const died = yield* outcome(lost as Future<unknown>);
        for (let i = 0; i < 3; i++) yield* q.put(i);
        q.shutdown();
        return [errorOf(died).name, yield* other.call<number[]>('consume', q)];
      })(),
    );
    expect(got).toEqual(['RuntimeError', [0, 1, 2]]);
  });

  it('loses no item and no slot to a thread that exits (process.exit) while its task waits, or that is terminated in put', async () => {
    const got = await run(
      (function* (): Coroutine<{ exited: unknown; items: number[]; afterPutter: number[] }> {
        const [exiting, putter, other] = (yield* start(3)) as [LoopThread, LoopThread, LoopThread];
        const q = new ThreadQueue<number>({ maxsize: 1, name: 'slots' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        const exitCall = exiting.call('exitWhileGetting', q, ready);
        yield* waiting(ready, 1);
        const exited = yield* outcome(exitCall);
        q.putNowait(1);
        const items = [yield* other.call<number>('getOne', q, ready)];
        yield* ready.get();
        // A full queue and a putter thread waiting for its slot, terminated.
        q.putNowait(2);
        const putCall = putter.call('putOne', q, ready, 99);
        yield* waiting(ready, 1);
        yield* putter.terminate();
        yield* outcome(putCall);
        items.push(q.getNowait());
        // The slot it waited for is free: a put fits, and nothing of the dead putter's is there.
        q.putNowait(3);
        const afterPutter = [q.getNowait(), q.qsize()];
        return { exited: errorOf(exited).message, items, afterPutter };
      })(),
    );
    expect(got.exited).toMatch(/exited with code 3/);
    expect(got.items).toEqual([1, 2]);
    expect(got.afterPutter).toEqual([3, 0]);
  });

  it('never hangs on a consumer thread terminated while it drains: every item is got by it or by others, none twice', async () => {
    const TOTAL = 200_000;
    const seen = new SharedArrayBuffer(TOTAL);
    const result = await run(
      (function* (): Coroutine<{ kills: number; missing: number; twice: number }> {
        const q = new ThreadQueue<number>({ name: 'drained' });
        for (let i = 0; i < TOTAL; i++) q.putNowait(i);
        let kills = 0;
        // Kill consumers at whatever moment they are in, several times over.
        while (q.qsize() > TOTAL / 2 && kills < 6) {
          const [doomed] = (yield* start(1)) as [LoopThread];
          const draining = doomed.call('drainMarking', q, seen);
          const before = q.qsize();
          while (q.qsize() === before) yield* sleep(0.001);
          yield* doomed.terminate();
          yield* outcome(draining);
          kills++;
        }
        const marks = new Uint8Array(seen);
        let twice = 0;
        let missing = 0;
        for (;;) {
          let item: number;
          try {
            item = q.getNowait();
          } catch {
            break;
          }
          if (marks[item] === 1) twice++;
          marks[item] = 2;
        }
        for (let i = 0; i < TOTAL; i++) if (marks[i] === 0) missing++;
        return { kills, missing, twice };
      })(),
    );
    expect(result.kills).toBeGreaterThan(0);
    expect(result.twice).toBe(0);
    // An item got in the instant before a kill may not have been marked yet: at most one per kill.
    expect(result.missing).toBeLessThanOrEqual(result.kills);
  });

  it('never hangs on producer threads terminated while they put: what each put is there once, in its order', async () => {
    const result = await run(
      (function* (): Coroutine<{ rounds: number; items: number; inOrder: boolean; counted: boolean }> {
        const q = new ThreadQueue<Item>({ maxsize: 5000, name: 'filled' });
        const counts: SharedArrayBuffer[] = [];
        const ROUNDS = 6;
        for (let round = 0; round < ROUNDS; round++) {
          const [doomed] = (yield* start(1)) as [LoopThread];
          const put = new SharedArrayBuffer(4);
          counts.push(put);
          const filling = doomed.call('fillCounting', q, `p${round}`, put);
          while (Atomics.load(new Int32Array(put), 0) < 100 * (round + 1)) yield* sleep(0.001);
          yield* doomed.terminate();
          yield* outcome(filling);
          // Room for the next producer, taken from the front.
          while (q.qsize() > 1000) q.getNowait();
        }
        const left: Item[] = [];
        while (!q.empty()) left.push(q.getNowait());
        let inOrder = true;
        let counted = true;
        for (let round = 0; round < ROUNDS; round++) {
          const mine = left.filter(([tag]) => tag === `p${round}`).map(([, i]) => i);
          for (let k = 1; k < mine.length; k++) if (mine[k] !== (mine[k - 1] as number) + 1) inOrder = false;
          // Its last item counted as put is there, unless taken from the front; one more may be (killed before counting it).
          const last = Atomics.load(new Int32Array(counts[round] as SharedArrayBuffer), 0) - 1;
          if (mine.length > 0 && !((mine.at(-1) as number) === last || (mine.at(-1) as number) === last + 1)) counted = false;
        }
        q.putNowait(['after', 0]);
        return { rounds: ROUNDS, items: q.qsize(), inOrder, counted };
      })(),
    );
    expect(result).toEqual({ rounds: 6, items: 1, inOrder: true, counted: true });
  });

  it('fails every operation and waiter, in every thread, once a thread ended unguarded while it held the lock', async () => {
    const before = _setStuckLockMs(200);
    try {
      const got = await run(
        (function* (): Coroutine<{ attempts: number; workerErrors: unknown[]; shutdown: unknown; put: unknown; get: unknown; joiner: unknown }> {
          const q = new ThreadQueue<number>({ maxsize: 4, name: 'fragile' });
          q.putNowait(0);
          const control = new Int32Array(q._toWire().buffers.control);
          let attempts = 0;
          const workerErrors: unknown[] = [];
          // A plain worker (no LoopThread guard) terminated at some moment: now and then inside a put, lock held.
          while (control[0] === 0 && control[16] === 0 && attempts < 200) {
            attempts++;
            const worker = new Worker(RAW_WORKER, { workerData: { queue: toWire(q, 'the queue') } });
            worker.on('error', (error) => workerErrors.push(error));
            yield* awaitPromise(new Promise((resolve) => worker.once('message', resolve)));
            yield* sleep(0.001 + Math.random() * 0.004);
            yield* awaitPromise(worker.terminate());
          }
          const [joiner] = (yield* start(1)) as [LoopThread];
          const ready = new ThreadQueue<string>();
          const joining = joiner.call('joinOne', q, ready);
          yield* ready.get();
          // Shutting down takes both locks: it meets the one held, waits, and finds its holder gone.
          let shutdown: unknown = null;
          try {
            q.shutdown(true);
          } catch (error) {
            shutdown = error;
          }
          return {
            attempts,
            workerErrors,
            shutdown,
            put: errorOf(yield* outcome(ensurePut(q))),
            get: errorOf(yield* outcome(ensureGet(q))),
            joiner: errorOf(yield* outcome(joining)),
          };
        })(),
      );
      expect(got.attempts).toBeLessThan(200);
      expect(got.workerErrors).toEqual([]);
      const broken = "ThreadQueue 'fragile' is broken: a thread ended while it held the queue's lock (in the middle of a put or get), so its state cannot be trusted; make a new queue";
      expectError(got.shutdown, RuntimeError, broken);
      expectError(got.put, RuntimeError, broken);
      expectError(got.get, RuntimeError, broken);
      expect((got.joiner as Error).message).toBe(broken);
    } finally {
      _setStuckLockMs(before);
    }
  });

  it('keeps working for the other threads when the thread that made it ends', async () => {
    const got = await run(
      (function* (): Coroutine<{ first: number[]; rest: number[] }> {
        const [maker, consumer] = (yield* start(2)) as [LoopThread, LoopThread];
        const q = (yield* maker.call('make', 4, 'orphan')) as ThreadQueue<number>;
        yield* maker.call('putHere', 1, 2);
        yield* maker.terminate();
        const first = [yield* q.get(), q.getNowait()];
        const consumed = consumer.call<number[]>('consume', q);
        for (let i = 3; i <= 6; i++) yield* q.put(i);
        q.shutdown();
        return { first, rest: yield* consumed };
      })(),
    );
    expect(got).toEqual({ first: [1, 2], rest: [3, 4, 5, 6] });
  });
});

describe('ThreadQueue waiters whose loop was closed, across threads', () => {
  it("drops them: another thread's putNowait succeeds, and a live loop of this thread gets the item", async () => {
    const q = new ThreadQueue<number>({ name: 'jobs' });
    const dead = newEventLoop();
    try {
      // Long enough for the loop to give libuv turns with the getters waiting (it arms the watch).
      await dead.runUntilComplete(
        (function* (): Coroutine<void> {
          createTask(q.get());
          createTask(q.get());
          yield* sleep(0.05);
        })(),
      );
    } finally {
      dead.close();
    }
    const out = await run(
      (function* (): Coroutine<[unknown, number, unknown, number]> {
        const [producer] = (yield* start(1)) as [LoopThread];
        const getter = createTask(q.get());
        yield* sleep(0);
        const first = yield* producer.call('putNowait', q, 7);
        const got = yield* getter;
        // Nobody waits here now: the item stays for the next get.
        const second = yield* producer.call('putNowait', q, 8);
        return [first, got, second, yield* q.get()];
      })(),
    );
    expect(out).toEqual(['put', 7, 'put', 8]);
    expect(String(q)).toBe("<ThreadQueue 'jobs' maxsize=0 qsize=0 tasks=2>");
  });
});

describe('ThreadQueue.shutdown across threads', () => {
  it('wakes getters, putters, joiners and a blocked getSync in several threads at once', async () => {
    const got = await run(
      (function* (): Coroutine<unknown[]> {
        const [g, p, j] = (yield* start(3)) as [LoopThread, LoopThread, LoopThread];
        const q = new ThreadQueue<number>({ maxsize: 1, name: 'ending' });
        const empty = new ThreadQueue<number>({ name: 'empty' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        q.putNowait(0);
        const getter = g.call('getOutcome', empty, ready);
        const putter = p.call('putOutcome', q, ready, 1);
        const joiner = j.call('joinOne', q, ready);
        const blocked = toThread(syncWorker, empty, new ThreadQueue<number>(), ready, null);
        yield* waiting(ready, 4);
        q.shutdown(true);
        empty.shutdown(true);
        return [yield* getter, yield* putter, yield* joiner, (yield* blocked).error];
      })(),
    );
    expect(got).toEqual(['QueueShutDown', 'QueueShutDown', 'joined', 'QueueShutDown']);
    expect(QueueShutDown.name).toBe('QueueShutDown');
  });
});

/** A put as a Future of this loop (its error, if any, to inspect). */
function ensurePut(q: ThreadQueue<number>): Future<void> {
  return createTask(q.put(1));
}

function ensureGet(q: ThreadQueue<number>): Future<number> {
  return createTask(q.get());
}
