/**
 * A ThreadQueue gives back the memory a burst of large items made it take: once they drained,
 * its items move to a new, small shared buffer, and every thread that holds the queue (a
 * LoopThread, a pool thread blocked in getSync meanwhile, the thread that made it) goes on with
 * them there. Sizes, counts and orders are asserted, never durations.
 */
import { describe, expect, it } from 'vitest';
import { ThreadQueue, run, sleep, toThread, workerFn } from '../src/index.js';
import { PUTS, _waitingOn } from '../src/internal/threads/queue-memory.js';
import { useThreads } from './helpers/loop-threads.js';

const SERVICE = new URL('./fixtures/thread-queue-shrink.mjs', import.meta.url);
const threads = useThreads();

const SMALL = 4096;
const MiB = 1 << 20;

type Stats = { dataBytes: number; moves: number };
type Mixed = { got: Array<[string, number]>; bad: number };
type Relayed = ['big', number, boolean] | number;

const syncRelay = workerFn<[ThreadQueue<string | number>, ThreadQueue<Relayed>, ThreadQueue<string>], Stats>(SERVICE, 'syncRelay');
const syncConsumeMixed = workerFn<[ThreadQueue<unknown>, ThreadQueue<string>], Mixed>(SERVICE, 'syncConsumeMixed');

/** A string of `size` characters that says whose it is all along (as the fixture's textOf). */
function textOf(tag: string, i: number, size: number): string {
  const unit = `${tag}.${i};`;
  return unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
}

/** The queue's control words, without leaving it counted as on its way to another thread. */
function controlOf(queue: ThreadQueue<never>): Int32Array {
  const handle = queue._toWire();
  ThreadQueue._fromWire(handle);
  return new Int32Array(handle.buffers.control);
}

describe('ThreadQueue memory', () => {
  it('gives back the memory of a burst of large items once they drained, and then carries items both ways between threads', async () => {
    const out = await run(
      (function* () {
        const worker = yield* threads.start(SERVICE, { name: 'shrink' });
        const q = new ThreadQueue<string | number>({ name: 'burst' });
        const start = q._memoryStats();
        // 8 items of 1 MiB each, put in the worker while nobody gets: the ring grows past 8 MiB.
        yield* worker.call('putBig', q, 'big', 8, MiB);
        const grown = q._memoryStats();
        const big: boolean[] = [];
        for (let i = 0; i < 8; i++) big.push((yield* q.get()) === textOf('big', i, MiB));
        const drained = q._memoryStats();
        const inWorker = yield* worker.call<Stats>('memoryStats', q);
        // Both ways on the queue that moved: from here to the worker, and back.
        const there = worker.call<Array<string | number>>('take', q, 100);
        for (let i = 0; i < 100; i++) yield* q.put(i % 2 === 0 ? i : `item ${i}`);
        const taken = yield* there;
        const back = Array.from({ length: 100 }, (_, i) => (i % 3 === 0 ? `back ${i}` : i * 10));
        yield* worker.call('putAll', q, back);
        const returned: Array<string | number> = [];
        for (let i = 0; i < 100; i++) returned.push(yield* q.get());
        return { start, grown, big, drained, inWorker, taken, back, returned, after: q._memoryStats() };
      })(),
    );
    expect(out.start).toEqual({ dataBytes: SMALL, moves: 0 });
    expect(out.grown.dataBytes).toBeGreaterThan(8 * MiB);
    expect(out.big).toEqual(Array.from({ length: 8 }, () => true));
    expect(out.drained).toEqual({ dataBytes: SMALL, moves: 1 });
    expect(out.inWorker).toEqual({ dataBytes: SMALL, moves: 1 });
    expect(out.taken).toEqual(Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? i : `item ${i}`)));
    expect(out.returned).toEqual(out.back);
    expect(out.after).toEqual({ dataBytes: SMALL, moves: 1 });
  });

  it('moves a pool thread blocked in getSync to the new buffer: it gets what comes next, nothing lost or twice', async () => {
    // Each round, while the pool thread sleeps in getSync, this thread puts an item of 1 MiB (the
    // ring grows) and gets it back at once: the get that empties the ring moves it to a new
    // buffer while the pool thread sleeps, unless the pool thread woke first and took the item
    // (then it moved the ring itself). Rounds go on until this thread won 3 of them.
    const out = await run(
      (function* () {
        const jobs = new ThreadQueue<string | number>({ name: 'jobs' });
        const relayed = new ThreadQueue<Relayed>({ name: 'relayed' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        const control = controlOf(jobs as ThreadQueue<never>);
        const worker = toThread(syncRelay, jobs, relayed, ready);
        expect(yield* ready.get()).toBe('waiting');
        const here: number[] = [];
        const there: Array<[number, boolean]> = [];
        const sizes: number[] = [];
        let round = 0;
        for (; here.length < 3 && round < 60; round++) {
          while (_waitingOn(control, PUTS) === 0) yield* sleep(0.005);
          jobs.putNowait(textOf('big', round, MiB));
          let mine: string | number | null = null;
          try {
            mine = jobs.getNowait();
          } catch {
            // The pool thread took it: it says so on `relayed`.
            const [, n, intact] = (yield* relayed.get()) as ['big', number, boolean];
            there.push([n, intact]);
          }
          if (mine !== null) {
            expect(mine === textOf('big', round, MiB)).toBe(true);
            here.push(round);
          }
          sizes.push(jobs._memoryStats().dataBytes);
        }
        // Then small items through the pool thread, which moved to the new buffer as it woke.
        for (let i = 0; i < 200; i++) jobs.putNowait(i);
        const small: Relayed[] = [];
        for (let i = 0; i < 200; i++) small.push(yield* relayed.get());
        jobs.shutdown();
        const workerStats = yield* worker;
        return { here, there, rounds: round, sizes, small, workerStats, stats: jobs._memoryStats() };
      })(),
    );
    expect(out.here).toHaveLength(3);
    expect(out.there.every(([, intact]) => intact)).toBe(true);
    expect([...out.here, ...out.there.map(([n]) => n)].sort((a, b) => a - b)).toEqual(Array.from({ length: out.rounds }, (_, i) => i));
    expect(out.sizes).toEqual(Array.from({ length: out.rounds }, () => SMALL));
    expect(out.small).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(out.stats).toEqual({ dataBytes: SMALL, moves: out.rounds });
    expect(out.workerStats).toEqual({ dataBytes: SMALL, moves: out.rounds });
  });

  it('delivers every item of mixed sizes once, in each producer order, while the ring grows and moves again and again', async () => {
    // In each of 5 rounds two LoopThreads put 240 items each, now and then one of 700,000 bytes
    // (the ring grows past 1 MiB), and two threads get them: a LoopThread with get() and a pool
    // thread blocked in getSync. A round ends when every item was got and done: the ring emptied
    // while large, so it moved at least once in each round. Each item says whose it is in every
    // byte, so an item read from the wrong buffer or place would not be intact.
    const ROUNDS = 5;
    const PER = 240;
    const out = await run(
      (function* () {
        const [p1, p2, c1] = [yield* threads.start(SERVICE, { name: 'p1' }), yield* threads.start(SERVICE, { name: 'p2' }), yield* threads.start(SERVICE, { name: 'c1' })];
        const q = new ThreadQueue<unknown>({ maxsize: 64, name: 'mixed' });
        const ready = new ThreadQueue<string>({ name: 'ready' });
        const consumers = [c1.call<Mixed>('consumeMixed', q, ready), toThread(syncConsumeMixed, q, ready)];
        // Both have the queue (a handle on its way keeps the ring where it is: see the last test).
        for (const _ of consumers) expect(yield* ready.get()).toBe('consuming');
        const moves: number[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          const producers = [p1.call('produceMixed', q, 'a', round * PER, PER), p2.call('produceMixed', q, 'b', round * PER, PER)];
          for (const producer of producers) yield* producer;
          yield* q.join();
          moves.push(q._memoryStats().moves);
        }
        q.shutdown();
        const results: Mixed[] = [];
        for (const consumer of consumers) results.push(yield* consumer);
        return { results, moves, stats: q._memoryStats() };
      })(),
    );
    const all = out.results.flatMap((result) => result.got);
    expect(out.results.map((result) => result.bad)).toEqual([0, 0]);
    expect(all).toHaveLength(2 * ROUNDS * PER);
    for (const tag of ['a', 'b']) {
      const numbers = all.filter(([t]) => t === tag).map(([, i]) => i);
      expect(numbers.sort((x, y) => x - y)).toEqual(Array.from({ length: ROUNDS * PER }, (_, i) => i));
      // Each consumer got each producer's items in the order they were put.
      for (const result of out.results) {
        const mine = result.got.filter(([t]) => t === tag).map(([, i]) => i);
        expect(mine).toEqual([...mine].sort((x, y) => x - y));
      }
    }
    // At least one move more in every round.
    expect(out.moves.every((moves, round) => moves > (round === 0 ? 0 : (out.moves[round - 1] as number)))).toBe(true);
    // Rings under 256 KiB stay where they are (items of 20,000 bytes may have grown it since the last move).
    expect(out.stats.dataBytes).toBeLessThan(256 * 1024);
  });

  it('never moves once its memory was pinned (handed out as a plain value, for any number of threads)', () => {
    const q = new ThreadQueue<string>({ name: 'pinned' });
    q._pin();
    for (let round = 0; round < 2; round++) {
      q.putNowait(textOf('x', round, MiB));
      expect(q.getNowait() === textOf('x', round, MiB)).toBe(true);
    }
    const stats = q._memoryStats();
    expect(stats.moves).toBe(0);
    expect(stats.dataBytes).toBeGreaterThan(MiB);
  });

  it('does not move while a handle of the queue is on its way to another thread, and moves once it arrived', async () => {
    const out = await run(
      (function* () {
        const q = new ThreadQueue<string>({ name: 'travelling' });
        q.putNowait(textOf('x', 0, MiB));
        const handle = q._toWire();
        q.getNowait();
        const whileAway = q._memoryStats();
        ThreadQueue._fromWire(handle);
        q.putNowait(textOf('x', 1, MiB));
        const got = q.getNowait();
        return { whileAway, got: got === textOf('x', 1, MiB), after: q._memoryStats() };
      })(),
    );
    expect(out.whileAway.moves).toBe(0);
    expect(out.whileAway.dataBytes).toBeGreaterThan(MiB);
    expect(out.got).toBe(true);
    expect(out.after).toEqual({ dataBytes: SMALL, moves: 1 });
  });
});
