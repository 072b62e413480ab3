/**
 * LoopThread with real worker threads: starting, calls both ways, results and errors,
 * cancellation across threads, callSoonThreadsafe (THR-01 across threads), the typed proxy,
 * parentLoop(), loops that stop between runs, and move().
 * Faults (dying threads, bad values, bad names, close) are in loop-thread-faults.test.ts.
 */
import { threadId as mainThreadId } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ConcurrentFuture,
  type EventLoop,
  Future,
  LoopThread,
  QueueEmpty,
  RuntimeError,
  Task,
  TimeoutError,
  allTasks,
  currentTask,
  getEventLoop,
  getRunningLoop,
  newEventLoop,
  parentLoop,
  run,
  wrapFuture,
  type Coroutine,
} from '../src/index.js';
import { move } from '../src/transfer.js';
import { Recorder, awaitPromise, errorOf, outcome, useThreads } from './helpers/loop-threads.js';
import { useFreshLoop } from './helpers/loops.js';

const SERVICE = new URL('./fixtures/lt-service.mjs', import.meta.url);
const TYPED = new URL('./fixtures/lt-typed.mjs', import.meta.url);

let loop: EventLoop;
// Current: calls made outside the running loop (e.g. `loop.runUntilComplete(lt.call(...))`) belong to it.
useFreshLoop(() => (loop = newEventLoop()), { current: true });
// Registered after the loop, so its threads end before the loop closes.
const threads = useThreads();

describe('LoopThread.start', () => {
  it("starts a thread whose own loop hosts the module; the caller's loop is untouched", async () => {
    const seen = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE);
        const there = yield* lt.call('whereAmI');
        return { there, threadId: lt.threadId, running: getRunningLoop(), current: getEventLoop() };
      })(),
    );
    expect(seen.threadId).not.toBe(mainThreadId);
    expect(seen.there).toEqual({
      threadId: seen.threadId,
      isMainThread: false,
      runningIsCurrent: true,
      hasParent: true,
      inTask: false,
    });
    expect(seen.running).toBe(loop);
    expect(seen.current).toBe(loop);
  });

  it('names the thread LoopThread-<n> by default, or with options.name', async () => {
    const [unnamed, named] = await loop.runUntilComplete(
      (function* () {
        return [yield* threads.start(SERVICE), yield* threads.start(SERVICE, { name: 'svc' })];
      })(),
    );
    expect(unnamed!.name).toMatch(/^LoopThread-\d+$/);
    expect(named!.name).toBe('svc');
    expect(named!.moduleUrl).toBe(SERVICE.href);
    expect(String(named)).toBe(`<LoopThread name='svc' thread=${named!.threadId}>`);
    expect(named!.isDead()).toBe(false);
  });

  it('takes the module as a URL, a file: URL string or an absolute path', async () => {
    const sums = await loop.runUntilComplete(
      (function* () {
        const sums: number[] = [];
        for (const where of [SERVICE, SERVICE.href, SERVICE.pathname]) {
          const lt = yield* awaitPromise(LoopThread.start(where));
          sums.push(yield* lt.call<number>('add', 1, 2));
          yield* awaitPromise(lt.close());
        }
        return sums;
      })(),
    );
    expect(sums).toEqual([3, 3, 3]);
  });

  it('works outside a running loop; the thread then has no parent loop', async () => {
    const lt = await threads.startOutside(SERVICE);
    expect(await loop.runUntilComplete(lt.call('hasParent'))).toBe(false);
  });
});

describe('LoopThread.call', () => {
  it("calls a plain function there and returns a Future of the caller's loop", async () => {
    const lt = await threads.startOutside(SERVICE);
    const result = await loop.runUntilComplete(
      (function* () {
        const future = lt.call<number>('add', 40, 2);
        expect(future).toBeInstanceOf(Future);
        expect(future).not.toBeInstanceOf(Task);
        expect(future.getLoop()).toBe(loop);
        expect(future.done()).toBe(false);
        return yield* future;
      })(),
    );
    expect(result).toBe(42);
  });

  it("runs a coroutine export as a Task of the thread's loop", async () => {
    const lt = await threads.startOutside(SERVICE);
    const info = await loop.runUntilComplete(lt.call('taskInfo'));
    expect(info).toEqual({
      threadId: lt.threadId,
      isTask: true,
      sameTaskAfterYield: true,
      taskLoopIsRunning: true,
      pending: true,
    });
  });

  it('waits for a Promise or a Future that the export returns', async () => {
    const lt = await threads.startOutside(SERVICE);
    const results = await loop.runUntilComplete(
      (function* () {
        return [yield* lt.call('asyncDouble', 21), yield* lt.call('futureLater', 'x'), yield* lt.call('slowAdd', 1, 2, 0.001)];
      })(),
    );
    expect(results).toEqual([42, 'later x', 3]);
  });

  it('copies arguments and results by structured clone', async () => {
    const lt = await threads.startOutside(SERVICE);
    const value = {
      map: new Map([[1, 'one']]),
      set: new Set(['a']),
      date: new Date(0),
      big: 10n ** 20n,
      nested: [[1, [2, [3]]], null, undefined],
      bytes: new Uint8Array([1, 2, 3]),
    };
    const copy = await loop.runUntilComplete(lt.call<typeof value>('echo', value));
    expect(copy).toEqual(value);
    expect(copy).not.toBe(value);
    expect(copy.map).toBeInstanceOf(Map);
    expect(copy.bytes).toBeInstanceOf(Uint8Array);
  });

  it('passes no argument, one argument or many', async () => {
    const lt = await threads.startOutside(SERVICE);
    const results = await loop.runUntilComplete(
      (function* () {
        yield* lt.call('inc');
        yield* lt.call('inc', 10);
        const afterInc = yield* lt.call('count');
        return [afterInc, yield* lt.call('echo'), yield* lt.call('add', 'a', 'b')];
      })(),
    );
    expect(results).toEqual([11, undefined, 'ab']);
  });
});

describe('LoopThread.call errors', () => {
  it('arrive with their class, message, stack, cause and own enumerable properties', async () => {
    const lt = await threads.startOutside(SERVICE);
    const result = await loop.runUntilComplete(outcome(lt.call('failWithCause')));
    const error = errorOf(result) as RangeError & { code?: string; details?: unknown };
    expect(error).toBeInstanceOf(RangeError);
    expect(error.name).toBe('RangeError');
    expect(error.message).toBe('invalid request');
    expect(error.stack).toMatch(/^RangeError: invalid request\n\s+at failWithCause \(.*lt-service\.mjs:\d+:\d+\)/);
    expect({ ...error }).toEqual({ code: 'E_INVALID', details: { limit: 10, seen: [11, 12] } });
    const cause = error.cause as TypeError & { field?: string };
    expect(cause).toBeInstanceOf(TypeError);
    expect(cause.message).toBe('bad size');
    expect(cause.field).toBe('size');
    expect(cause.stack).toMatch(/^TypeError: bad size\n\s+at failWithCause /);
  });

  it('of a class the library does not know arrive as the nearest known class, with their name', async () => {
    const lt = await threads.startOutside(SERVICE);
    const result = await loop.runUntilComplete(outcome(lt.call('failCustom')));
    const error = errorOf(result) as Error & { retries?: number };
    expect(error.constructor).toBe(Error);
    expect(error.name).toBe('ServiceError');
    expect(error.message).toBe('service unavailable');
    expect(error.retries).toBe(3);
    expect(error.stack).toMatch(/^ServiceError: service unavailable\n\s+at failCustom /);
  });

  it("of multiloop's own classes arrive as the same classes", async () => {
    const lt = await threads.startOutside(SERVICE);
    const [empty, expired] = await loop.runUntilComplete(
      (function* () {
        return [yield* outcome(lt.call('emptyQueue')), yield* outcome(lt.call('timesOut'))];
      })(),
    );
    const emptyError = errorOf(empty!);
    expect(emptyError).toBeInstanceOf(QueueEmpty);
    expect(emptyError.name).toBe('QueueEmpty');
    const timeoutError = errorOf(expired!);
    expect(timeoutError).toBeInstanceOf(TimeoutError);
    expect(timeoutError.cause).toBeInstanceOf(CancelledError);
  });

  it('of a thrown value that is not an Error arrive as that value', async () => {
    const lt = await threads.startOutside(SERVICE);
    const result = await loop.runUntilComplete(outcome(lt.call('throwString')));
    expect(result).toEqual({ error: 'plain failure' });
  });

  it('leave the thread serving later calls', async () => {
    const lt = await threads.startOutside(SERVICE);
    const results = await loop.runUntilComplete(
      (function* () {
        const failed = yield* outcome(lt.call('fail', 'first'));
        return [errorOf(failed).message, yield* lt.call('add', 2, 3)];
      })(),
    );
    expect(results).toEqual(['first', 5]);
  });
});

describe('LoopThread.call cancellation', () => {
  it('cancelling the local Future cancels the remote Task at its yield*, and its finally runs', async () => {
    const recorder = new Recorder();
    const seen = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, { expose: { record: recorder.record } });
        const call = lt.call('waitForever', 'w');
        const parked = lt.call('park', 'p');
        yield* recorder.until('p: started');
        expect(call.cancel('stop now')).toBe(true);
        expect(call.cancelled()).toBe(true);
        const awaited = yield* outcome(call);
        yield* recorder.until('w: finally');
        return { awaited, parked: parked.done(), tasks: yield* lt.call('taskCount') };
      })(),
    );
    const error = errorOf(seen.awaited);
    expect(error).toBeInstanceOf(CancelledError);
    expect(error.message).toBe('stop now');
    expect(recorder.lines).toEqual(['p: started', 'w: cancelled (stop now)', 'w: finally']);
    expect(seen.parked).toBe(false);
    expect(seen.tasks).toBe(1);
  });

  it('cancelling before the call started there: the coroutine never runs', async () => {
    const recorder = new Recorder();
    const seen = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, { expose: { record: recorder.record } });
        const call = lt.call('park', 'never');
        call.cancel();
        // The reply to a later call comes after anything the cancelled call could have sent.
        yield* lt.call('add', 0, 0);
        return { cancelled: call.cancelled(), tasks: yield* lt.call('taskCount') };
      })(),
    );
    expect(seen).toEqual({ cancelled: true, tasks: 0 });
    expect(recorder.lines).toEqual([]);
  });

  it('a remote cancellation arrives as a cancelled Future with its message', async () => {
    const lt = await threads.startOutside(SERVICE);
    const seen = await loop.runUntilComplete(
      (function* () {
        const call = lt.call('cancelSelf', 'given up');
        const awaited = yield* outcome(call);
        return { cancelled: call.cancelled(), awaited };
      })(),
    );
    expect(seen.cancelled).toBe(true);
    const error = errorOf(seen.awaited);
    expect(error).toBeInstanceOf(CancelledError);
    expect(error.message).toBe('given up');
  });

  it('cancel() of a call that already finished returns false and keeps the result', async () => {
    const lt = await threads.startOutside(SERVICE);
    const seen = await loop.runUntilComplete(
      (function* () {
        const call = lt.call<number>('add', 1, 1);
        yield* call;
        return { cancelled: call.cancel(), result: call.result() };
      })(),
    );
    expect(seen).toEqual({ cancelled: false, result: 2 });
  });
});

describe('LoopThread.callSoonThreadsafe (THR-01 across threads)', () => {
  it('runs the calls of one burst there, in order, and returns undefined', async () => {
    const lt = await threads.startOutside(SERVICE);
    const values = await loop.runUntilComplete(
      (function* () {
        for (let i = 0; i < 100; i++) expect(lt.callSoonThreadsafe('push', i)).toBeUndefined();
        return yield* lt.call('pushedValues');
      })(),
    );
    expect(values).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });

  it('keeps the order of calls made from outside the loop and inside it', async () => {
    const lt = await threads.startOutside(SERVICE);
    lt.callSoonThreadsafe('push', 'before the run');
    const values = await loop.runUntilComplete(
      (function* () {
        lt.callSoonThreadsafe('push', 'in the run');
        return yield* lt.call('pushedValues');
      })(),
    );
    expect(values).toEqual(['before the run', 'in the run']);
  });

  it('from the thread, wakes a loop that waits for a distant timer', async () => {
    const recorder = new Recorder();
    const lines = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, { expose: { record: recorder.record } });
        const distant = getRunningLoop().callLater(3600, () => recorder.record('timer'));
        lt.callSoonThreadsafe('notifyParentFromTimer', 'record', 'hello');
        yield* recorder.until('hello');
        distant.cancel();
        return recorder.lines;
      })(),
    );
    expect(lines).toEqual(['hello']);
  });

  it("from the thread, shares the FIFO ready queue with callSoon: 'hello' then 'world'", async () => {
    const recorder = new Recorder();
    const lines = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, { expose: { record: recorder.record } });
        // The notification travels before the reply, so it is queued before 'world'.
        yield* lt.call('notifyParent', 'record', 'hello');
        getRunningLoop().callSoon(recorder.record, 'world');
        yield* recorder.until('world');
        return recorder.lines;
      })(),
    );
    expect(lines).toEqual(['hello', 'world']);
  });
});

describe('LoopThread calls from several loops', () => {
  it('serves two loops of the main thread, one after the other', async () => {
    const lt = await threads.startOutside(SERVICE);
    const first = await run(
      (function* () {
        yield* lt.call('inc', 5);
        return yield* lt.call('count');
      })(),
    );
    const second = await run(
      (function* () {
        const before = yield* lt.call('count');
        yield* lt.call('inc', 1);
        return [before, yield* lt.call('count')];
      })(),
    );
    expect(first).toBe(5);
    expect(second).toEqual([5, 6]);
  });

  it('keeps serving a second loop after the loop that started it closed', async () => {
    const lt = await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { expose: { double: (x: number) => x * 2 } });
        yield* lt.call('inc', 2);
        return lt;
      })(),
    );
    const seen = await loop.runUntilComplete(
      (function* () {
        return { count: yield* lt.call('count'), parent: yield* outcome(lt.call('callParent', 'double', 1)) };
      })(),
    );
    expect(seen.count).toBe(2);
    const error = errorOf(seen.parent);
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toBe('the parent loop is gone: its end of the link closed');
    expect(lt.isDead()).toBe(false);
  });
});

describe('LoopThread.proxy', () => {
  it('gives typed methods that return Futures of the result type', async () => {
    const lt = await threads.startOutside(TYPED);
    const results = await loop.runUntilComplete(
      (function* () {
        const typed = lt.proxy<typeof import('./fixtures/lt-typed.mjs')>();
        const sum: Future<number> = typed.add(1, 2);
        const greeting: Future<string> = typed.slowGreet('ada');
        const length: Future<number> = typed.lengthOf('four');
        // Compile-time checks only: this function is never called.
        const misuse = (): void => {
          // @ts-expect-error the arguments keep their types
          void typed.add('1', 2);
          // @ts-expect-error the result type is kept
          const wrong: Future<string> = typed.add(1, 2);
          // @ts-expect-error a non-function export is not a method
          void typed.version();
          void wrong;
        };
        void misuse;
        return [yield* sum, yield* greeting, yield* length];
      })(),
    );
    expect(results).toEqual([3, 'hello ada', 4]);
  });

  it('is not a thenable, and refuses names that are not exported functions at call time', async () => {
    const lt = await threads.startOutside(TYPED);
    const proxy = lt.proxy<Record<string, (...args: unknown[]) => unknown>>();
    expect((proxy as { then?: unknown }).then).toBeUndefined();
    expect(() => proxy.missing!()).toThrow(
      new TypeError(`'missing' is not a function exported by ${TYPED.href} (LoopThread '${lt.name}'; its functions: 'add', 'lengthOf', 'slowGreet')`),
    );
    expect(() => proxy.version!()).toThrow(new TypeError(`'version' exported by ${TYPED.href} is not a function`));
  });
});

describe('LoopThread.submit and ConcurrentFuture.result(timeout)', () => {
  it('blocks the caller until the thread answers, with no loop running', async () => {
    const lt = await threads.startOutside(SERVICE);
    const quick = lt.submit<number>('add', 1, 2);
    expect(quick).toBeInstanceOf(ConcurrentFuture);
    expect(quick.result(10)).toBe(3);
    const slow = lt.submit<number>('slowAdd', 2, 3, 0.01);
    expect(() => slow.result()).toThrow(TimeoutError);
    expect(slow.result(null)).toBe(5);
    expect(loop.isRunning()).toBe(false);
  });

  it('raises the error of the call, and refuses a timeout that is not a number', async () => {
    const lt = await threads.startOutside(SERVICE);
    const failed = lt.submit('fail', 'submitted');
    expect(() => failed.result('soon' as never)).toThrow(new TypeError("timeout must be a number of seconds or null, got 'soon'"));
    const error = failed.exception(10) as RangeError & { code?: string };
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe('submitted');
    expect(error.code).toBe('E_FAIL');
    expect(() => failed.result(0)).toThrow(error);
  });

  it('from the thread, blocks on a call of its parent loop until the parent answers', async () => {
    const result = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, { expose: { double: (x: number) => x * 2 } });
        return yield* lt.call('askParentBlocking', 21, 10);
      })(),
    );
    expect(result).toBe(42);
  });

  it("from the thread, result(0) raises TimeoutError; cancelling then ends the parent's task (THR-05)", async () => {
    const log: string[] = [];
    const seen = await loop.runUntilComplete(
      (function* () {
        const never = getRunningLoop().createFuture<number>();
        const lt = yield* threads.start(SERVICE, {
          expose: {
            *slow(): Coroutine<number> {
              log.push('started');
              try {
                return yield* never;
              } finally {
                log.push('finally');
              }
            },
          },
        });
        const asked = yield* lt.call('askParentThenCancel', 'slow', 0);
        // The cancellation travelled before the reply; a round trip later its task is done.
        yield* lt.call('add', 0, 0);
        return { asked, others: [...allTasks()].filter((task) => task !== currentTask()).length };
      })(),
    );
    expect(seen.asked).toEqual({ outcome: 'TimeoutError', cancel: true, cancelled: true });
    expect(seen.others).toBe(0);
    // Cancelled before or after its first step, depending on when the cancellation arrived.
    expect([[], ['started', 'finally']]).toContainEqual(log);
  });

  it('cancelling the ConcurrentFuture cancels the remote task, which runs its finally', async () => {
    const recorder = new Recorder();
    const lines = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, { expose: { record: recorder.record } });
        const submitted = lt.submit('park', 's');
        yield* recorder.until('s: started');
        expect(submitted.cancel()).toBe(true);
        expect(() => submitted.result(0)).toThrow(CancelledError);
        yield* recorder.until('s: finally');
        return recorder.lines;
      })(),
    );
    expect(lines).toEqual(['s: started', 's: cancelled ()', 's: finally']);
  });

  it('a remote cancellation cancels the ConcurrentFuture', async () => {
    const lt = await threads.startOutside(SERVICE);
    const submitted = lt.submit('cancelSelf', 'gone');
    expect(() => submitted.result(10)).toThrow(CancelledError);
    expect(submitted.cancelled()).toBe(true);
  });

  it('chains into a Future of the loop with wrapFuture', async () => {
    const lt = await threads.startOutside(SERVICE);
    const result = await loop.runUntilComplete(
      (function* () {
        return yield* wrapFuture(lt.submit<number>('slowAdd', 20, 22, 0.001));
      })(),
    );
    expect(result).toBe(42);
  });
});

describe('parentLoop', () => {
  it('is null in the main thread', () => {
    expect(parentLoop()).toBeNull();
  });

  it('lets the hosted module call the functions its parent exposed, in the parent loop', async () => {
    const loops: EventLoop[] = [];
    const doubled = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, {
          expose: {
            double: (x: number) => {
              loops.push(getRunningLoop());
              return x * 2;
            },
          },
        });
        return [yield* lt.call('askParent', 21), yield* lt.call('callParent', 'double', 5)];
      })(),
    );
    expect(doubled).toEqual([42, 10]);
    expect(loops).toHaveLength(2);
    expect(loops.every((where) => where === loop)).toBe(true);
  });

  it('lets work flow both ways: an exposed coroutine calls back into the thread', async () => {
    const holder: { lt: LoopThread | null } = { lt: null };
    const result = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, {
          expose: {
            *relay(x: number): Coroutine<number> {
              return yield* holder.lt!.call<number>('add', x, 1);
            },
          },
        });
        holder.lt = lt;
        return yield* lt.call('callParent', 'relay', 41);
      })(),
    );
    expect(result).toBe(42);
  });

  it('brings errors of exposed functions back to the thread, and names unknown ones', async () => {
    const seen = await loop.runUntilComplete(
      (function* () {
        const lt = yield* threads.start(SERVICE, {
          name: 'child',
          expose: {
            refuse: () => {
              throw new QueueEmpty('nothing here');
            },
          },
        });
        return [yield* outcome(lt.call('callParent', 'refuse')), yield* outcome(lt.call('callParent', 'nope'))];
      })(),
    );
    const refused = errorOf(seen[0]!);
    expect(refused).toBeInstanceOf(QueueEmpty);
    expect(refused.message).toBe('nothing here');
    const unknown = errorOf(seen[1]!);
    expect(unknown).toBeInstanceOf(TypeError);
    expect(unknown.message).toBe("'nope' is not a function exported by the parent of LoopThread 'child' (its functions: 'refuse')");
  });

  it('needs a running loop when functions are exposed', async () => {
    await expect(LoopThread.start(SERVICE, { expose: { record: () => undefined } })).rejects.toThrow(
      new RuntimeError('LoopThread.start() with expose needs a running loop: the exposed functions run in it'),
    );
  });
});

describe('a loop that is stopped', () => {
  it('keeps the operations sent to it for its next run', async () => {
    const recorder = new Recorder();
    const lt = await loop.runUntilComplete(threads.start(SERVICE, { expose: { record: recorder.record } }));
    // Observe the arrival itself, while the loop is stopped.
    const arrived = new Promise<void>((resolve) => {
      const deliver = loop._deliver.bind(loop);
      loop._deliver = (receiver, batch) => {
        deliver(receiver, batch);
        resolve();
      };
    });
    lt.callSoonThreadsafe('notifyParent', 'record', 'sent while stopped');
    await arrived;
    expect(loop.isRunning()).toBe(false);
    expect(recorder.lines).toEqual([]);
    await loop.runUntilComplete(recorder.until('sent while stopped'));
    expect(recorder.lines).toEqual(['sent while stopped']);
  });
});

describe('move', () => {
  it('moves an ArrayBuffer argument marked with move(): it arrives, and is detached here', async () => {
    const lt = await threads.startOutside(SERVICE);
    const buffer = new Uint8Array([1, 2, 3, 4]).buffer;
    const info = await loop.runUntilComplete(lt.call('byteInfo', move(buffer)));
    expect(info).toEqual({ type: 'ArrayBuffer', byteLength: 4, sum: 10 });
    expect(buffer.byteLength).toBe(0);
  });

  it("moves a typed array's buffer", async () => {
    const lt = await threads.startOutside(SERVICE);
    const bytes = new Uint8Array([5, 5, 5]);
    const info = await loop.runUntilComplete(lt.call('byteInfo', move(bytes)));
    expect(info).toEqual({ type: 'Uint8Array', byteLength: 3, sum: 15 });
    expect(bytes.byteLength).toBe(0);
  });

  it('copies an ArrayBuffer argument that was not marked', async () => {
    const lt = await threads.startOutside(SERVICE);
    const buffer = new Uint8Array([1, 2, 3, 4]).buffer;
    const info = await loop.runUntilComplete(lt.call('byteInfo', buffer));
    expect(info).toEqual({ type: 'ArrayBuffer', byteLength: 4, sum: 10 });
    expect(buffer.byteLength).toBe(4);
  });

  it('moves a result marked with move() in the thread, and copies one that was not', async () => {
    const lt = await threads.startOutside(SERVICE);
    const seen = await loop.runUntilComplete(
      (function* () {
        const moved = yield* lt.call<Uint8Array>('makeBytes', 8, 7, true);
        const movedLeft = yield* lt.call('madeBytesLength');
        const copied = yield* lt.call<Uint8Array>('makeBytes', 8, 9, false);
        const copiedLeft = yield* lt.call('madeBytesLength');
        return { moved, movedLeft, copied, copiedLeft };
      })(),
    );
    expect(seen.moved).toEqual(new Uint8Array(8).fill(7));
    expect(seen.movedLeft).toBe(0);
    expect(seen.copied).toEqual(new Uint8Array(8).fill(9));
    expect(seen.copiedLeft).toBe(8);
  });
});
