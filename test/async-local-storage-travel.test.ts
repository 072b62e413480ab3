/**
 * registerAsyncLocalStorage: the store in force in the caller travels (structured-cloned) with
 * calls to LoopThreads (call, callSoonThreadsafe), pool calls and executor jobs; the callee runs
 * inside `run()` with it, a coroutine as a Task keeping it, an async function across its awaits;
 * nothing comes back; a store that cannot cross fails that call naming the storage. The threads
 * run dist/, this test src/: both register the storage under the same name.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { ContextVar, LoopThread, LoopThreadPool, createTask, gather, registerAsyncLocalStorage, registerContextVar, run, sleep, toThread, workerFn, type Coroutine } from '../src/index.js';

const SERVICE = new URL('./fixtures/als-service.mjs', import.meta.url);
const request = registerAsyncLocalStorage(new AsyncLocalStorage<Record<string, unknown>>(), { name: 'request' });

describe('registerAsyncLocalStorage', () => {
  it('refuses two storages under one name, one under two, a name a context variable holds, and bad arguments', () => {
    expect(() => registerAsyncLocalStorage(new AsyncLocalStorage(), { name: 'request' })).toThrow(
      new TypeError("registerAsyncLocalStorage(): another AsyncLocalStorage is registered as 'request' (a name stands for one storage in every thread)"),
    );
    expect(() => registerAsyncLocalStorage(request, { name: 'other' })).toThrow(new TypeError("registerAsyncLocalStorage(): this AsyncLocalStorage is registered already, as 'request'"));
    expect(registerAsyncLocalStorage(request, { name: 'request' })).toBe(request);
    const variable = registerContextVar(new ContextVar('als-test-variable'));
    expect(() => registerAsyncLocalStorage(new AsyncLocalStorage(), { name: 'als-test-variable' })).toThrow(
      new TypeError("registerAsyncLocalStorage(): a context variable (<ContextVar name='als-test-variable'>) is registered as 'als-test-variable' (a name stands for one storage in every thread)"),
    );
    expect(() => registerContextVar(new ContextVar('request'))).toThrow(
      new TypeError("registerContextVar(): an AsyncLocalStorage is registered as 'request' (a name stands for one variable in every thread)"),
    );
    expect(variable.name).toBe('als-test-variable');
    expect(() => registerAsyncLocalStorage({} as never, { name: 'x' })).toThrow(new TypeError('registerAsyncLocalStorage() needs an AsyncLocalStorage, got object'));
    expect(() => registerAsyncLocalStorage(new AsyncLocalStorage(), undefined as never)).toThrow(new TypeError('registerAsyncLocalStorage() options must be an object with a name'));
    expect(() => registerAsyncLocalStorage(new AsyncLocalStorage(), { name: '' })).toThrow(new TypeError("registerAsyncLocalStorage() options.name must be a non-empty string, got ''"));
    expect(() => registerAsyncLocalStorage(new AsyncLocalStorage(), { name: 7 } as never)).toThrow(new TypeError('registerAsyncLocalStorage() options.name must be a non-empty string, got number'));
  });

  it('carries the store of each of three concurrent tasks with lt.call and callSoonThreadsafe; a coroutine and an async function keep it; nothing comes back', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const lt = yield* LoopThread.start(SERVICE);
        try {
          const none = yield* lt.call('seen');
          function* handle(rid: string): Coroutine<unknown[]> {
            const first = yield* lt.call('seen');
            yield* sleep(0);
            const later = yield* lt.call('seenLater');
            const afterAwait = yield* lt.call('seenAfterAwait');
            lt.callSoonThreadsafe('note');
            return [rid, first, later, afterAwait, request.getStore()];
          }
          const handled = yield* gather(...['A', 'B', 'C'].map((rid) => request.run({ rid }, () => createTask(handle(rid)))));
          const notes = (yield* lt.call('notesSoFar')) as unknown[];
          const mine = { rid: 'mine' };
          const changed = yield* request.run(mine, () => lt.call('change'));
          const after = yield* lt.call('seen');
          return { none, handled, notes, changed, mine, after };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(out.none).toBe('unset');
    expect(out.handled).toEqual(['A', 'B', 'C'].map((rid) => [rid, { rid }, { rid }, { rid }, { rid }]));
    expect((out.notes as Array<{ rid: string }>).map((note) => note.rid).sort()).toEqual(['A', 'B', 'C']);
    expect(out.changed).toEqual({ rid: 'entered-in-thread' });
    expect(out.mine).toEqual({ rid: 'mine' });
    expect(out.after).toBe('unset');
  });

  it('carries it with pool calls and executor jobs, for the whole of an async job', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2 });
        try {
          const pooled = yield* request.run({ rid: 'pool' }, () => pool.call('seenLater'));
          const job = yield* request.run({ rid: 'job' }, () => toThread(workerFn<[], unknown>(SERVICE, 'seen')));
          const asyncJob = yield* request.run({ rid: 'async-job' }, () => toThread(workerFn<[], unknown>(SERVICE, 'seenAfterAwait')));
          const noStore = yield* toThread(workerFn<[], unknown>(SERVICE, 'seen'));
          return { pooled, job, asyncJob, noStore };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    expect(out).toEqual({ pooled: { rid: 'pool' }, job: { rid: 'job' }, asyncJob: { rid: 'async-job' }, noStore: 'unset' });
  });

  it('fails the call whose store cannot cross, naming the storage; the next call goes', async () => {
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const lt = yield* LoopThread.start(SERVICE);
        try {
          const outcome = request.run({ rid: 'bad', callback: () => 'a function' }, () => lt.call('seen'));
          let error: unknown = null;
          try {
            yield* outcome;
          } catch (caught) {
            error = caught;
          }
          const job = request.run({ rid: 'bad', callback: () => 'a function' }, () => toThread(workerFn<[], unknown>(SERVICE, 'seen')));
          let jobError: unknown = null;
          try {
            yield* job;
          } catch (caught) {
            jobError = caught;
          }
          const next = yield* request.run({ rid: 'good' }, () => lt.call('seen'));
          return { error, jobError, next };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(out.error).toBeInstanceOf(TypeError);
    expect((out.error as Error).message).toMatch(
      /^cannot send call 'seen' to LoopThread 'LoopThread-\d+': AsyncLocalStorage 'request' cannot go to another thread: its store\.callback is a function, which cannot be cloned$/,
    );
    expect(out.jobError).toBeInstanceOf(TypeError);
    expect((out.jobError as Error).message).toMatch(/AsyncLocalStorage 'request' cannot go to another thread: its store\.callback is a function, which cannot be cloned$/);
    expect(out.next).toEqual({ rid: 'good' });
  });
});
