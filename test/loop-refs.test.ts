/**
 * Loops passed between threads, on real threads: a LoopThread given to another arrives as a
 * LoopRef over a link of its own (the call goes while the thread that introduced them is
 * blocked), parentLoop() and a pool cross the same way, a pool job can use one, and the death of
 * the loop's thread fails the sibling's calls at once.
 */
import { describe, expect, it } from 'vitest';
import { LoopThread, LoopThreadPool, RuntimeError, run, toThread, workerFn, type Coroutine } from '../src/index.js';

const SERVICE = new URL('./fixtures/sibling-service.mjs', import.meta.url);

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

  it("fails the sibling's call at once when the loop's thread dies", async () => {
    const error = await run(
      (function* (): Coroutine<unknown> {
        const a = yield* LoopThread.start(SERVICE, { name: 'sib-waiter' });
        const b = yield* LoopThread.start(SERVICE, { name: 'sib-dying' });
        try {
          yield* a.call('keep', b);
          const waiting = a.call('waitOnSibling');
          yield* a.call('hold', 0.05);
          yield* b.terminate();
          try {
            yield* waiting;
            return null;
          } catch (caught) {
            return caught;
          }
        } finally {
          yield* a.close();
        }
      })(),
    );
    expect(error).toBeInstanceOf(RuntimeError);
    // Terminated, it ran no JavaScript to say why: its end of the link closed.
    expect((error as Error).message).toBe("LoopThread 'sib-dying' is gone: its end of the link closed");
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
});
