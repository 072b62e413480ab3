/**
 * LoopThreadPool across real threads: calls go to the thread with the fewest in flight (cancelled
 * calls counted out), broadcast reaches every thread in order, a thread that exits mid-call fails
 * only its own calls and is replaced, the restart budget runs out (a failing restart counts),
 * restart: false shrinks the pool, bad options and a closed pool say what is wrong.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CancelledError, LoopThreadPool, RuntimeError, gather, getRunningLoop, move, pstree, run, sleep, type Coroutine, type LoopThread } from '../src/index.js';

const SERVICE = new URL('./fixtures/pool-service.mjs', import.meta.url);
const scratch = mkdtempSync(join(tmpdir(), 'multiloop-pool-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Wait until `check` holds, a loop iteration at a time (bounded). */
function* until(check: () => boolean, what: string): Coroutine<void> {
  for (let i = 0; i < 2000; i++) {
    if (check()) return;
    yield* sleep(0.005);
  }
  throw new Error(`never happened: ${what}`);
}

describe('LoopThreadPool', () => {
  it('sends each call to the thread with the fewest calls in flight, counts cancelled calls out, and broadcasts in slot order', async () => {
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: 'least' });
        try {
          const ids = pool.threads().map((thread) => thread.threadId);
          const first = pool.call<number>('hold', 3600);
          const second = pool.call<number>('hold', 3600);
          const busy = pool.statistics().inFlight;
          first.cancel();
          yield* until(() => pool.statistics().inFlight[0] === 0, 'the cancelled call counted out');
          const third = pool.call<number>('hold', 0);
          const afterCancel = pool.statistics().inFlight;
          const thirdOn = yield* third;
          second.cancel();
          yield* until(() => pool.statistics().inFlight.every((n) => n === 0), 'every call counted out');
          const everyone = yield* pool.broadcast<number>('whoami');
          const names = (yield* pstree()).split('\n').filter((line) => line.startsWith('least-')).map((line) => line.split(' ')[0]).sort();
          let cancelled = false;
          try {
            yield* first;
          } catch (error) {
            cancelled = error instanceof CancelledError;
          }
          return { ids, busy, afterCancel, thirdOn, everyone, stats: pool.statistics(), names, cancelled };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    const ids = seen.ids as number[];
    expect(seen.busy).toEqual([1, 1]);
    // The slot whose call was cancelled is the free one: the next call goes there.
    expect(seen.afterCancel).toEqual([1, 1]);
    expect(seen.thirdOn).toBe(ids[0]);
    expect(seen.everyone).toEqual(ids);
    expect(seen.cancelled).toBe(true);
    expect(seen.stats).toEqual({ size: 2, inFlight: [0, 0], completed: 3, failed: 2, restarts: 0 });
    expect(seen.names).toEqual(['least-0', 'least-1']);
  });

  it('fails only the calls of a thread that exits mid-call, and replaces the thread', async () => {
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: 'healing' });
        try {
          const [a, b] = pool.threads().map((thread) => thread.threadId);
          const dying = pool.call('dieIn', 0.05, 7);
          const surviving = pool.call<number>('hold', 0.2);
          let death: unknown = null;
          try {
            yield* dying;
          } catch (error) {
            death = error;
          }
          const survivor = yield* surviving;
          yield* until(() => pool.statistics().size === 2, 'the replacement runs');
          const after = pool.threads().map((thread) => thread.threadId);
          const answers = yield* pool.broadcast<number>('whoami');
          return { a, b, death, survivor, after, answers, stats: pool.statistics() };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    expect(seen.death).toBeInstanceOf(RuntimeError);
    expect((seen.death as Error).message).toBe(`LoopThread 'healing-0' (thread ${seen.a}) died: it exited with code 7`);
    expect(seen.survivor).toBe(seen.b);
    const after = seen.after as number[];
    expect(after[1]).toBe(seen.b);
    expect(after[0]).not.toBe(seen.a);
    expect(seen.answers).toEqual(after);
    expect(seen.stats).toMatchObject({ size: 2, restarts: 1, completed: 3, failed: 1 });
  });

  it('breaks past its restart budget, a restart that fails counting too, and then fails every call at once naming the last cause', async () => {
    const marker = join(scratch, 'fail-imports');
    process.env.POOL_FAIL_MARKER = marker;
    try {
      const seen = await run(
        (function* (): Coroutine<Record<string, unknown>> {
          const pool = yield* LoopThreadPool.start(SERVICE, { size: 1, name: 'budget', restart: { max: 2, within: 60 } });
          try {
            // From now on a new thread cannot load the module: both replacements fail.
            writeFileSync(marker, '');
            pool.callSoonThreadsafe('dieIn', 0, 1);
            let broken: unknown = null;
            for (let i = 0; i < 2000 && broken === null; i++) {
              try {
                pool.callSoonThreadsafe('whoami');
              } catch (error) {
                if ((error as Error).message.includes('is broken')) broken = error;
              }
              yield* sleep(0.005);
            }
            let call: unknown = null;
            try {
              yield* pool.call('whoami');
            } catch (error) {
              call = error;
            }
            return { broken, call, stats: pool.statistics() };
          } finally {
            yield* pool.close();
          }
        })(),
      );
      expect(seen.broken).toBeInstanceOf(RuntimeError);
      expect((seen.broken as Error).message).toBe("LoopThreadPool 'budget' is broken: 2 threads replaced within 60 s, and another died; the last cause: the module cannot load now");
      expect(((seen.broken as Error).cause as Error).message).toBe('the module cannot load now');
      expect(seen.call).toBe(seen.broken);
      expect(seen.stats).toMatchObject({ size: 0, restarts: 2 });
    } finally {
      delete process.env.POOL_FAIL_MARKER;
      rmSync(marker, { force: true });
    }
  });

  it('with restart: false shrinks as its threads die, and breaks when none is left', async () => {
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: 'shrinking', restart: false });
        try {
          const [a, b] = pool.threads().map((thread) => thread.threadId);
          let first = 'returned';
          try {
            yield* pool.call('dieIn', 0, 0);
          } catch (error) {
            first = (error as Error).message;
          }
          yield* until(() => pool.statistics().size === 1, 'the pool shrinks');
          const survivor = yield* pool.call<number>('whoami');
          const again = yield* pool.call<number>('whoami');
          pool.callSoonThreadsafe('dieIn', 0, 0);
          let broken: unknown = null;
          for (let i = 0; i < 2000 && broken === null; i++) {
            try {
              pool.call('whoami').cancel();
            } catch (error) {
              broken = error;
            }
            yield* sleep(0.005);
          }
          return { a, b, first, survivor, again, broken, stats: pool.statistics() };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    expect(seen.first).toBe(`LoopThread 'shrinking-0' (thread ${seen.a}) died: it exited with code 0`);
    expect([seen.survivor, seen.again]).toEqual([seen.b, seen.b]);
    expect((seen.broken as Error).message).toBe(
      `LoopThreadPool 'shrinking' is broken: all its threads died (restart: false); the last cause: LoopThread 'shrinking-1' (thread ${seen.b}) died: it exited with code 0`,
    );
    expect(seen.stats).toMatchObject({ size: 0, restarts: 0 });
  });

  it('refuses bad options, naming them, and says a closed pool is closed', async () => {
    await expect(LoopThreadPool.start(SERVICE, { size: 0 })).rejects.toThrow(new RangeError('LoopThreadPool.start() options.size must be a positive integer, got 0'));
    await expect(LoopThreadPool.start(SERVICE, { restart: { max: -1 } })).rejects.toThrow(new RangeError('LoopThreadPool.start() options.restart.max must be a non-negative integer, got -1'));
    await expect(LoopThreadPool.start(SERVICE, { restart: { within: 0 } })).rejects.toThrow(new RangeError('LoopThreadPool.start() options.restart.within must be a positive number of seconds, got 0'));
    await expect(LoopThreadPool.start(SERVICE, { name: '' })).rejects.toThrow(new TypeError("LoopThreadPool.start() options.name must be a non-empty string, got ''"));
    await expect(LoopThreadPool.start(SERVICE, { restart: 'always' as never })).rejects.toThrow(TypeError);
    const message = await run(
      (function* (): Coroutine<string> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 1, name: 'closing' });
        yield* pool.close();
        try {
          pool.call('whoami');
          return 'no error';
        } catch (error) {
          return `${(error as Error).name}: ${(error as Error).message} (${String(getRunningLoop().isRunning())})`;
        }
      })(),
    );
    expect(message).toBe("RuntimeError: LoopThreadPool 'closing' is closed (true)");
  });

  it.each([
    ['exit', /^LoopThread 'resend-exit-\d' \(thread (\d+)\) died: it exited with code 7$/],
    ['throw', /^LoopThread 'resend-throw-\d' \(thread (\d+)\) died: uncaught Error: uncaught in a burst$/],
    ['terminate', /^LoopThread 'resend-terminate-\d' \(thread (\d+)\) died: it was terminated$/],
  ])('sends the calls a thread never started to another when it dies mid-burst (%s): none runs twice, none is lost', async (how, death) => {
    const n = 400;
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: `resend-${how}` });
        try {
          const runs = new Int32Array(new SharedArrayBuffer(4 * n));
          const flag = new Int32Array(new SharedArrayBuffer(8));
          // The first call goes to slot 0, then they alternate: slot 0 has some 200 calls behind the one that ends it.
          const dying = how === 'terminate' ? pool.call('spinForever', flag) : pool.call('dieNow', how);
          const calls = Array.from({ length: n }, (_, i) => pool.call<number>('mark', runs, i));
          if (how === 'terminate') {
            yield* until(() => Atomics.load(flag, 0) === 1, 'a thread spins');
            const spinning = pool.threads().find((thread) => thread.threadId === Atomics.load(flag, 1)) as LoopThread;
            yield* spinning.terminate();
          }
          const outcomes = yield* gather(calls, { returnExceptions: true });
          let error: unknown = null;
          try {
            yield* dying;
          } catch (caught) {
            error = caught;
          }
          // The pool tallies a call in a done callback of its Future, which runs at the loop's next
          // iteration (as asyncio's do); the death may have settled it in this one.
          yield* sleep(0);
          return { outcomes, runs: [...runs], error, stats: pool.statistics() };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    const error = seen.error as Error;
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toMatch(death);
    const dead = Number(death.exec(error.message)?.[1]);
    const outcomes = seen.outcomes as unknown[];
    // Each call ran once and returned: those the thread that died had started before it died (an
    // uncaught error ends it once the calls of the batch that threw have run), the others elsewhere.
    expect(outcomes.filter((outcome) => typeof outcome !== 'number')).toEqual([]);
    expect(seen.runs).toEqual(Array.from({ length: n }, () => 1));
    // Exiting in its first call, or terminated in it, it started none of the calls behind it.
    if (how !== 'throw') expect(outcomes.filter((outcome) => outcome === dead)).toEqual([]);
    expect(seen.stats).toMatchObject({ completed: n, failed: 1, inFlight: [0, 0] });
  }, 60_000);

  it('does not send again a call that moved a buffer (it went with the call): it fails with the death error', async () => {
    const seen = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: 'resend-moved' });
        try {
          const dying = pool.call('dieNow', 'exit');
          const held = [pool.call<number>('hold', 0.2), pool.call<number>('hold', 0.2)];
          // Slot 0 has the fewest calls in flight now: this one waits behind the call that ends its thread.
          const buffer = new ArrayBuffer(16);
          const moved = pool.call<number>('byteLength', move(buffer));
          // Behind it too (a tie goes to the slot used last): copied, it goes to the other thread.
          const copied = pool.call<number>('byteLength', new ArrayBuffer(8));
          const outcomes = yield* gather([dying, moved, copied, ...held], { returnExceptions: true });
          return { outcomes, detached: buffer.byteLength };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    const [death, moved, copied] = seen.outcomes as [Error, unknown, unknown];
    expect(death.message).toMatch(/^LoopThread 'resend-moved-0' \(thread \d+\) died: it exited with code 7$/);
    expect(moved).toBeInstanceOf(RuntimeError);
    expect((moved as Error).message).toBe(death.message);
    expect(copied).toBe(8);
    expect(seen.detached).toBe(0);
  }, 60_000);
});
