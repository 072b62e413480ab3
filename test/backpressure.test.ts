/**
 * Back-pressure between threads (LoopThreadOptions.maxCallsInFlight), on real threads: a sender
 * that never yields is held once the other side has that many of its calls not taken in, in
 * both directions, with every call delivered once and in order; two threads flooding each other
 * both finish; a side that takes nothing for a while stops holding the sender; bad options are
 * refused naming the option.
 */
import { describe, expect, it } from 'vitest';
import { LoopThread, LoopThreadPool, gather, run, type Coroutine, type Future } from '../src/index.js';
import { _setStallMs } from '../src/internal/link.js';

const SERVICE = new URL('./fixtures/backpressure-service.mjs', import.meta.url);
const BOUND = 4096;
const FLOOD = 200_000;
/**
 * How far a receiver may be behind its sender: the batch being filled (up to 2,048 operations),
 * what is in flight (posted and not yet dispatched by the receiver's loop: under the bound when
 * the last batch was posted, so up to the bound plus a batch) and what the receiver's iteration
 * dispatched and is running (as much again).
 */
const MOST_BEHIND = 2 * BOUND + 3 * 2048;
/** Iterations of work per call: enough that a sender that never yields outruns the receiver. */
const COST = 200;

/** The parent's side of a flood: the same counting as the fixture's. */
function counting(): { expose: Record<string, (...args: never[]) => unknown>; counter: SharedArrayBuffer; report: () => { received: number; maxBacklog: number; ordered: boolean } } {
  const counter = new SharedArrayBuffer(4);
  const sent = new Int32Array(counter);
  let received = 0;
  let maxBacklog = 0;
  let ordered = true;
  let sink = 0;
  const tick = (i: number): void => {
    if (i !== received) ordered = false;
    received++;
    maxBacklog = Math.max(maxBacklog, Atomics.load(sent, 0) - received);
    for (let k = 0; k < COST; k++) sink += Math.sqrt(k + i);
  };
  return { expose: { tick, sink: () => sink }, counter, report: () => ({ received, maxBacklog, ordered }) };
}

describe('back-pressure between threads', () => {
  it('holds a thread that floods its parent loop without yielding, every call delivered in order', async () => {
    const { expose, counter, report } = counting();
    const got = await run(
      (function* (): Coroutine<{ sent: number; seen: ReturnType<typeof report> }> {
        const lt = yield* LoopThread.start(SERVICE, { expose, maxCallsInFlight: BOUND });
        try {
          const sent = yield* lt.call<number>('flood', FLOOD, counter);
          return { sent, seen: report() };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(got.sent).toBe(FLOOD);
    expect(got.seen.received).toBe(FLOOD);
    expect(got.seen.ordered).toBe(true);
    expect(got.seen.maxBacklog).toBeLessThanOrEqual(MOST_BEHIND);
  });

  it('holds a parent loop that floods its thread without yielding, calls and callSoonThreadsafe alike', async () => {
    const got = await run(
      (function* (): Coroutine<{ results: number; last: number; seen: { received: number; maxBacklog: number; ordered: boolean } }> {
        const lt = yield* LoopThread.start(SERVICE, { maxCallsInFlight: BOUND });
        try {
          const counter = new SharedArrayBuffer(4);
          const made = new Int32Array(counter);
          yield* lt.call('setUp', counter, COST);
          const calls: Array<Future<number>> = [];
          for (let i = 0; i < FLOOD; i++) {
            Atomics.store(made, 0, i + 1);
            if (i % 2 === 0) lt.callSoonThreadsafe('tick', i);
            else calls.push(lt.call<number>('tick', i));
          }
          const results = yield* gather(...calls);
          return { results: results.length, last: results.at(-1) as number, seen: yield* lt.call<{ received: number; maxBacklog: number; ordered: boolean }>('report') };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(got.results).toBe(FLOOD / 2);
    expect(got.last).toBe(FLOOD - 1);
    expect(got.seen.received).toBe(FLOOD);
    expect(got.seen.ordered).toBe(true);
    expect(got.seen.maxBacklog).toBeLessThanOrEqual(MOST_BEHIND);
  });

  it('lets two threads that flood each other both finish', async () => {
    const { expose, counter: towardsParent, report } = counting();
    const got = await run(
      (function* (): Coroutine<{ sent: number; parentSaw: ReturnType<typeof report>; threadSaw: { received: number; ordered: boolean } }> {
        const lt = yield* LoopThread.start(SERVICE, { expose, maxCallsInFlight: BOUND });
        try {
          const counter = new SharedArrayBuffer(4);
          const made = new Int32Array(counter);
          yield* lt.call('setUp', counter, 0);
          const flooding = lt.call<number>('flood', FLOOD, towardsParent);
          for (let i = 0; i < FLOOD; i++) {
            Atomics.store(made, 0, i + 1);
            lt.callSoonThreadsafe('tick', i);
          }
          const sent = yield* flooding;
          return { sent, parentSaw: report(), threadSaw: yield* lt.call<{ received: number; ordered: boolean }>('report') };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(got.sent).toBe(FLOOD);
    expect(got.parentSaw.received).toBe(FLOOD);
    expect(got.parentSaw.ordered).toBe(true);
    expect(got.threadSaw).toMatchObject({ received: FLOOD, ordered: true });
  });

  it('holds a sender while its peer takes nothing, until the stall time, then stops holding it', async () => {
    /** Block the thread `ms`, flood it with 50,000 calls meanwhile; how many were sent when it woke, and what it saw. */
    function* floodBlocked(ms: number): Coroutine<{ sentWhileBlocked: number; seen: { received: number; ordered: boolean } }> {
      const lt = yield* LoopThread.start(SERVICE, { maxCallsInFlight: 64 });
      try {
        const counter = new SharedArrayBuffer(4);
        const made = new Int32Array(counter);
        yield* lt.call('setUp', counter, 0);
        const blocked = lt.call<number>('block', ms, counter);
        for (let i = 0; i < 50_000; i++) {
          Atomics.store(made, 0, i + 1);
          lt.callSoonThreadsafe('tick', i);
        }
        return { sentWhileBlocked: yield* blocked, seen: yield* lt.call<{ received: number; ordered: boolean }>('report') };
      } finally {
        yield* lt.close();
      }
    }
    // Blocked for less than the stall time: the sender waits for it.
    const held = await run(floodBlocked(300));
    // Blocked for longer: the sender waits 100 ms, then goes on.
    const before = _setStallMs(100);
    let released: typeof held;
    try {
      released = await run(floodBlocked(1500));
    } finally {
      _setStallMs(before);
    }
    // Batches of up to 2,048 calls: what the thread took in before it blocked, and one more in flight.
    expect(held.sentWhileBlocked).toBeLessThanOrEqual(4 * 2048);
    expect(released.sentWhileBlocked).toBe(50_000);
    for (const { seen } of [held, released]) expect(seen).toMatchObject({ received: 50_000, ordered: true });
  });

  it('refuses a bound that is not a whole number from 1 to 2^30, naming the option', async () => {
    const refusals = await run(
      (function* (): Coroutine<string[]> {
        const out: string[] = [];
        for (const bad of [0, -1, 1.5, 2 ** 31, '10'] as unknown[]) {
          try {
            yield* LoopThread.start(SERVICE, { maxCallsInFlight: bad as number });
            out.push('started');
          } catch (error) {
            out.push(`${(error as Error).name}: ${(error as Error).message}`);
          }
        }
        try {
          yield* LoopThreadPool.start(SERVICE, { size: 1, maxCallsInFlight: 0 });
        } catch (error) {
          out.push(`${(error as Error).name}: ${(error as Error).message}`);
        }
        return out;
      })(),
    );
    expect(refusals).toEqual([
      'RangeError: LoopThread.start(): maxCallsInFlight must be a whole number from 1 to 2^30, got 0',
      'RangeError: LoopThread.start(): maxCallsInFlight must be a whole number from 1 to 2^30, got -1',
      'RangeError: LoopThread.start(): maxCallsInFlight must be a whole number from 1 to 2^30, got 1.5',
      'RangeError: LoopThread.start(): maxCallsInFlight must be a whole number from 1 to 2^30, got 2147483648',
      'TypeError: LoopThread.start(): maxCallsInFlight must be a number, got string',
      'RangeError: LoopThreadPool.start() options: maxCallsInFlight must be a whole number from 1 to 2^30, got 0',
    ]);
  });
});
