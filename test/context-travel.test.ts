/**
 * registerContextVar: the caller's values of registered context variables travel with calls to
 * LoopThreads (call, callSoonThreadsafe, submit) and pool jobs; the callee runs in a copy of its
 * own context with them set, a coroutine as a Task keeping them; nothing comes back; unset stays
 * unset; a value that cannot cross fails that call naming the variable. The threads run dist/,
 * this test src/: both register variables under the same names (an app registers them once).
 */
import { describe, expect, it } from 'vitest';
import { ContextVar, LoopThread, copyContext, registerContextVar, run, toThread, workerFn, type Coroutine } from '../src/index.js';

const SERVICE = new URL('./fixtures/context-service.mjs', import.meta.url);
const requestId = registerContextVar(new ContextVar<string>('requestId'));
const user = registerContextVar(new ContextVar<unknown>('user'));

describe('registerContextVar', () => {
  it('refuses two variables under one name, one variable under two, and what is no ContextVar', () => {
    expect(() => registerContextVar(new ContextVar('requestId'))).toThrow(
      new TypeError("registerContextVar(): another context variable is registered as 'requestId' (a name stands for one variable in every thread)"),
    );
    expect(() => registerContextVar(requestId, { name: 'other' })).toThrow(new TypeError("registerContextVar(): <ContextVar name='requestId'> is registered already, as 'requestId'"));
    expect(registerContextVar(requestId)).toBe(requestId);
    expect(() => registerContextVar({} as never)).toThrow(new TypeError('registerContextVar() needs a ContextVar, got object'));
    expect(() => registerContextVar(new ContextVar('x'), { name: '' })).toThrow(new TypeError("registerContextVar() options.name must be a non-empty string, got ''"));
  });

  it('carries the caller’s values with lt.call, callSoonThreadsafe and submit; a coroutine keeps them; nothing comes back; unset stays unset', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const lt = yield* LoopThread.start(SERVICE);
        try {
          const none = yield* lt.call('seen');
          requestId.set('r-1');
          user.set({ name: 'ada', roles: ['admin'] });
          const both = yield* lt.call('seen');
          const later = yield* lt.call('seenLater');
          const changed = yield* lt.call('change');
          const after = requestId.get();
          lt.callSoonThreadsafe('note');
          requestId.set('r-2');
          lt.callSoonThreadsafe('note');
          const submitted = lt.submit('seen');
          const notes = yield* lt.call('notesSoFar');
          // A copy of the context with an unregistered variable set: the registered values still go, nothing else.
          const elsewhere = yield* copyContext().run(() => {
            const inner = new ContextVar<string>('unregistered');
            inner.set('stays here');
            return lt.call('seen');
          });
          return { none, both, later, changed, after, notes, submitted: submitted.result(5), elsewhere };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(out.none).toEqual({ requestId: 'unset', user: 'unset' });
    expect(out.both).toEqual({ requestId: 'r-1', user: { name: 'ada', roles: ['admin'] } });
    expect(out.later).toEqual(out.both);
    expect(out.changed).toEqual({ requestId: 'changed-in-thread', user: { name: 'ada', roles: ['admin'] } });
    expect(out.after).toBe('r-1');
    expect(out.notes).toEqual(['r-1', 'r-2']);
    expect(out.submitted).toEqual({ requestId: 'r-2', user: { name: 'ada', roles: ['admin'] } });
    expect(out.elsewhere).toEqual({ requestId: 'r-2', user: { name: 'ada', roles: ['admin'] } });
  });

  it('fails the call whose variable holds a value that cannot cross, naming the variable; the next call goes', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const lt = yield* LoopThread.start(SERVICE);
        try {
          const outcome = copyContext().run(() => {
            user.set(() => 'a function');
            return lt.call('seen');
          });
          let error: unknown = null;
          try {
            yield* outcome;
          } catch (caught) {
            error = caught;
          }
          const next = yield* lt.call('seen');
          return { error, next };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(out.error).toBeInstanceOf(TypeError);
    expect((out.error as Error).message).toMatch(
      /^cannot send call 'seen' to LoopThread 'LoopThread-\d+': context variable 'user' cannot go to another thread: its value is a function, which cannot be cloned$/,
    );
    expect(out.next).toEqual({ requestId: 'unset', user: 'unset' });
  });

  it('carries them into pool jobs (test_to_thread_contextvars), for the whole of an async job', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        requestId.set('pooled');
        const sync = yield* toThread(workerFn<[], unknown>(SERVICE, 'seen'));
        const later = yield* toThread(workerFn<[], unknown>(SERVICE, 'seenAfterAwait'));
        const bad = copyContext().run(() => {
          user.set(Symbol('no'));
          return toThread(workerFn<[], unknown>(SERVICE, 'seen'));
        });
        let error: unknown = null;
        try {
          yield* bad;
        } catch (caught) {
          error = caught;
        }
        return { sync, later, error };
      })(),
    );
    expect(out.sync).toEqual({ requestId: 'pooled', user: 'unset' });
    expect(out.later).toEqual({ requestId: 'pooled', user: 'unset' });
    expect((out.error as Error).message).toMatch(/context variable 'user' cannot go to another thread: its value is a symbol, which cannot be cloned$/);
  });
});
