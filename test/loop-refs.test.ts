/**
 * Loops passed between threads, on real threads: a LoopThread given to another arrives as a
 * LoopRef over a link of its own (the call goes while the thread that introduced them is
 * blocked), parentLoop() and a pool cross the same way, a pool job can use one, and the death of
 * the loop's thread fails the sibling's calls at once.
 */
import { describe, expect, it } from 'vitest';
import { LoopThread, LoopThreadPool, RuntimeError, run, sleep, toThread, waitFor, workerFn, type Coroutine, type Future } from '../src/index.js';

const SERVICE = new URL('./fixtures/sibling-service.mjs', import.meta.url);

/** Wait until `check` holds, a loop iteration at a time (bounded). */
function* until(check: () => boolean, what: string): Coroutine<void> {
  for (let i = 0; i < 4000; i++) {
    if (check()) return;
    yield* sleep(0.005);
  }
  throw new Error(`never happened: ${what}`);
}

/** The error `future` fails with; a bounded wait, so that a call that hangs fails the test instead. */
function* failureOf(future: Future<unknown>): Coroutine<unknown> {
  try {
    yield* waitFor(future, 10);
  } catch (error) {
    return error;
  }
  return null;
}

/**
 * Make `thread` busy for good (its loop never turns again, so it takes no link), hand it to
 * `holder` as a LoopRef, then terminate it: the error its own calls fail with.
 */
function* terminateBusy(thread: LoopThread, hand: () => Future<unknown>): Coroutine<Error> {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const spinning = thread.call('spin', flag);
  yield* until(() => Atomics.load(flag, 0) === 1, 'the thread spins');
  yield* hand();
  yield* thread.terminate();
  return (yield* failureOf(spinning)) as Error;
}

describe('loops passed between threads', () => {
  it('a LoopThread passed to another reaches it directly: it answers while the thread that passed it is blocked', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-a' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-b' });
        try {
          const shown = yield* a.call<string>('keep', b);
          // This thread waits without running its loop: a relay through it could not answer.
          const answer = a.submit<number>('askSibling').result(10);
          return { shown, answer, b: b.threadId };
        } finally {
          yield* a.close();
          yield* b.close();
        }
      })(),
    );
    expect(out.shown).toBe("<LoopRef LoopThread 'sib-b'>");
    expect(out.answer).toBe(out.b);
  });

  it("fails the sibling's call at once when the loop's thread dies, with the death error the thread's own calls get", async () => {
    const { error, b: id } = await run(
      (function* (): Coroutine<{ error: unknown; b: number }> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-waiter' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-dying' });
        try {
          yield* a.call('keep', b);
          const waiting = a.call('waitOnSibling');
          yield* a.call('hold', 0.05);
          yield* b.terminate();
          try {
            yield* waiting;
            return { error: null, b: b.threadId };
          } catch (caught) {
            return { error: caught, b: b.threadId };
          }
        } finally {
          yield* a.close();
        }
      })(),
    );
    expect(error).toBeInstanceOf(RuntimeError);
    // Terminated, it ran no JavaScript to say why: its end of the link closed, and its starter had written why.
    expect((error as Error).message).toBe(`LoopThread 'sib-dying' (thread ${id}) died: it was terminated`);
  });

  it('passes parentLoop() on: a sibling calls the exposed functions of the loop that started the other thread', async () => {
    const out = await run(
      (function* (): Coroutine<unknown> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-parented', expose: { echoFromMain: (value: string) => `main got ${value}` } });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-other' });
        try {
          yield* a.call('keep', b);
          const shown = yield* a.call('introduceParent');
          const answer = yield* b.call('callKeptParent', 'hi');
          return { shown, answer };
        } finally {
          yield* a.close();
          yield* b.close();
        }
      })(),
    );
    expect(out).toEqual({ shown: "<LoopRef the loop that started LoopThread 'sib-parented'>", answer: 'main got hi' });
  });

  it('passes a pool on as a LoopRef that spreads calls over its threads, and a LoopThread into a pool job', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: 'sib-pool' });
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-user' });
        try {
          const shown = yield* a.call('keep', pool);
          const ids = yield* a.call<number[]>('askPool', 6);
          const fromJob = yield* toThread(workerFn<[LoopThread], number>(SERVICE, 'askInJob'), a);
          return { shown, ids: [...new Set(ids)].sort(), poolIds: pool.threads().map((t) => t.threadId).sort(), fromJob, a: a.threadId };
        } finally {
          yield* a.close();
          yield* pool.close();
        }
      })(),
    );
    expect(out.shown).toBe("<LoopRef of LoopThreadPool 'sib-pool', 2 threads>");
    expect(out.ids).toEqual(out.poolIds);
    expect(out.fromJob).toBe(out.a);
  });

  it('refuses to pass a thread that is gone, naming it', async () => {
    const message = await run(
      (function* (): Coroutine<string> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-alive' });
        const gone = yield* LoopThread.start(SERVICE, { name: 'sib-gone' });
        yield* gone.close();
        try {
          yield* a.call('keep', gone);
          return 'sent';
        } catch (error) {
          return (error as Error).message;
        } finally {
          yield* a.close();
        }
      })(),
    );
    expect(message).toMatch(/^cannot send call 'keep' to LoopThread 'sib-alive': argument 1 holds <LoopThread name='sib-gone' thread=\d+ dead>, whose thread is gone: LoopThread 'sib-gone' is closed$/);
  });

  it('fails a LoopRef to a thread terminated before it took the link, with the death error its own calls get', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-holder' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-busy' });
        try {
          const death = yield* terminateBusy(b, () => a.call('keep', b));
          const own = yield* failureOf(b.call('whoami'));
          const viaRef = yield* failureOf(a.call('askSibling'));
          const again = yield* failureOf(a.call('askSibling'));
          return { death, own, viaRef, again, b: b.threadId };
        } finally {
          yield* a.close();
        }
      })(),
    );
    const death = `LoopThread 'sib-busy' (thread ${out.b}) died: it was terminated`;
    expect((out.death as Error).message).toBe(death);
    expect((out.own as Error).message).toBe(death);
    expect(out.viaRef).toBeInstanceOf(RuntimeError);
    expect((out.viaRef as Error).message).toBe(death);
    expect((out.again as Error).message).toBe(death);
  }, 60_000);

  it("fails a pool's LoopRef whose thread was terminated before it took the link, with that thread's death error", async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-pool-holder' });
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 1, name: 'sib-busy-pool', restart: false });
        try {
          const [thread] = pool.threads() as [LoopThread];
          const death = yield* terminateBusy(thread, () => a.call('keep', pool));
          const viaRef = yield* failureOf(a.call('askSibling'));
          return { death, viaRef, id: thread.threadId };
        } finally {
          yield* a.close();
          yield* pool.close();
        }
      })(),
    );
    const death = `LoopThread 'sib-busy-pool-0' (thread ${out.id}) died: it was terminated`;
    expect((out.death as Error).message).toBe(death);
    expect(out.viaRef).toBeInstanceOf(RuntimeError);
    expect((out.viaRef as Error).message).toBe(death);
  }, 60_000);

  it('fails a LoopRef whose thread was terminated, busy, while the ref was on its way to a blocked thread', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-blocked' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-short' });
        try {
          const flag = new Int32Array(new SharedArrayBuffer(8));
          const blocked = a.call('blockUntilReleased', flag);
          yield* until(() => Atomics.load(flag, 0) === 1, 'the thread blocks');
          const spins = new Int32Array(new SharedArrayBuffer(4));
          const spinning = b.call('spin', spins);
          yield* until(() => Atomics.load(spins, 0) === 1, 'the other thread spins');
          // Both ends of the ref's link wait, unread, in messages: to the blocked thread, and to b until it ends.
          const kept = a.call('keep', b);
          yield* b.terminate();
          yield* failureOf(spinning);
          Atomics.store(flag, 1, 1);
          Atomics.notify(flag, 1);
          yield* blocked;
          yield* kept;
          const viaRef = yield* failureOf(a.call('askSibling'));
          return { viaRef, b: b.threadId };
        } finally {
          yield* a.close();
        }
      })(),
    );
    expect(out.viaRef).toBeInstanceOf(RuntimeError);
    expect((out.viaRef as Error).message).toBe(`LoopThread 'sib-short' (thread ${out.b}) died: it was terminated`);
  }, 60_000);

  it("fails the sibling's call with the death error of a thread that exits by itself, as the thread's own calls get it", async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-watcher' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-exiting' });
        try {
          yield* a.call('keep', b);
          const waiting = a.call('waitOnSibling');
          yield* a.call('hold', 0.05);
          const own = yield* failureOf(b.call('exitWith', 7));
          const viaRef = yield* failureOf(waiting);
          return { own, viaRef, b: b.threadId };
        } finally {
          yield* a.close();
        }
      })(),
    );
    const death = `LoopThread 'sib-exiting' (thread ${out.b}) died: it exited with code 7`;
    expect((out.own as Error).message).toBe(death);
    expect(out.viaRef).toBeInstanceOf(RuntimeError);
    expect((out.viaRef as Error).message).toBe(death);
  }, 60_000);

  it('passes a pool as the second argument of a call (its ports sit deep in the arguments)', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: 'sib-deep-pool' });
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-deep-user' });
        try {
          const shown = yield* a.call('keepWith', 'got', pool);
          const ids = yield* a.call<number[]>('askPool', 6);
          return { shown, ids: [...new Set(ids)].sort(), poolIds: pool.threads().map((t) => t.threadId).sort() };
        } finally {
          yield* a.close();
          yield* pool.close();
        }
      })(),
    );
    expect(out.shown).toBe("got <LoopRef of LoopThreadPool 'sib-deep-pool', 2 threads>");
    expect(out.ids).toEqual(out.poolIds);
  }, 60_000);

  it('passes on a LoopRef it received: a third thread reaches the loop directly, and learns of its death', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-first' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-target' });
        const c = yield* LoopThread.start(SERVICE, { name: 'sib-third' });
        try {
          yield* a.call('keep', b);
          const shown = yield* a.call('passOn', c);
          // The thread that passed it on is blocked: the third thread's call goes to b directly.
          const blocked = new Int32Array(new SharedArrayBuffer(8));
          const blocking = a.call('blockUntilReleased', blocked);
          yield* until(() => Atomics.load(blocked, 0) === 1, 'the first thread blocks');
          const answer = yield* c.call<number>('askSibling');
          const waiting = c.call('waitOnSibling');
          yield* c.call('hold', 0.05);
          yield* b.terminate();
          const death = yield* failureOf(waiting);
          Atomics.store(blocked, 1, 1);
          Atomics.notify(blocked, 1);
          yield* blocking;
          return { shown, answer, death, b: b.threadId };
        } finally {
          yield* a.close();
          yield* c.close();
        }
      })(),
    );
    expect(out.shown).toBe("<LoopRef LoopThread 'sib-target'>");
    expect(out.answer).toBe(out.b);
    expect(out.death).toBeInstanceOf(RuntimeError);
    expect((out.death as Error).message).toBe(`LoopThread 'sib-target' (thread ${out.b}) died: it was terminated`);
  }, 60_000);

  it("passes on a pool's LoopRef it received", async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2, name: 'sib-passed-pool' });
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-pool-first' });
        const c = yield* LoopThread.start(SERVICE, { name: 'sib-pool-third' });
        try {
          yield* a.call('keep', pool);
          const shown = yield* a.call('passOn', c);
          const ids = yield* c.call<number[]>('askPool', 6);
          return { shown, ids: [...new Set(ids)].sort(), poolIds: pool.threads().map((t) => t.threadId).sort() };
        } finally {
          yield* a.close();
          yield* c.close();
          yield* pool.close();
        }
      })(),
    );
    expect(out.shown).toBe("<LoopRef of LoopThreadPool 'sib-passed-pool', 2 threads>");
    expect(out.ids).toEqual(out.poolIds);
  }, 60_000);

  it('refuses to pass on a LoopRef whose loop is gone, naming it and its death', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-passer' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-ended' });
        const c = yield* LoopThread.start(SERVICE, { name: 'sib-receiver' });
        try {
          yield* a.call('keep', b);
          yield* a.call('askSibling');
          yield* b.terminate();
          yield* failureOf(a.call('askSibling'));
          const refused = yield* failureOf(a.call('passOn', c));
          return { refused, b: b.threadId };
        } finally {
          yield* a.close();
          yield* c.close();
        }
      })(),
    );
    expect(out.refused).toBeInstanceOf(TypeError);
    expect((out.refused as Error).message).toBe(
      `cannot send call 'keep' to LoopThread 'sib-receiver': argument 1 holds <LoopRef LoopThread 'sib-ended'>, whose loop is gone: ` +
        `LoopThread 'sib-ended' (thread ${out.b}) died: it was terminated`,
    );
  }, 60_000);
});
