import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  Context,
  ContextVar,
  Future,
  InvalidStateError,
  RuntimeError,
  copyContext,
  isFuture,
  newEventLoop,
  setEventLoop,
  type Coroutine,
  type ExceptionContext,
} from '../src/index.js';
import { expectThrow, thrownBy } from './helpers/errors.js';
import { collectUntil, drainFinalizers } from './helpers/gc.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop, runOnce } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
useFreshLoop(() => (loop = new VirtualLoop()), { clearCurrent: true, leaveRunning: true });

describe('Future state machine (FUT-01)', () => {
  it('starts pending: neither done nor cancelled', () => {
    const fut = loop.createFuture();
    expect(fut.done()).toBe(false);
    expect(fut.cancelled()).toBe(false);
    expect(isFuture(fut)).toBe(true);
    expect(fut.getLoop()).toBe(loop);
  });

  it('cancels once: true, then false; done, cancelled, and every read or write refused', () => {
    const fut = loop.createFuture<number>();
    expect(fut.cancel()).toBe(true);
    expect(fut.cancelled()).toBe(true);
    expect(fut.done()).toBe(true);
    expectThrow(() => fut.result(), CancelledError, '');
    expectThrow(() => fut.exception(), CancelledError, '');
    expectThrow(() => fut.setResult(1), InvalidStateError, 'CANCELLED: <Future cancelled>');
    expectThrow(() => fut.setException(new RuntimeError('x')), InvalidStateError, 'CANCELLED: <Future cancelled>');
    expect(fut.cancel()).toBe(false);
  });

  it('raises the cancel message through result() and exception()', () => {
    const fut = loop.createFuture();
    fut.cancel('no longer needed');
    expectThrow(() => fut.result(), CancelledError, 'no longer needed');
    expectThrow(() => fut.exception(), CancelledError, 'no longer needed');
  });

  it('refuses result() and exception() while pending', () => {
    const fut = loop.createFuture();
    expect(thrownBy(() => fut.result())).toBeInstanceOf(InvalidStateError);
    expect(thrownBy(() => fut.exception())).toBeInstanceOf(InvalidStateError);
  });

  it('keeps a result: exception() is null, further sets and cancel refused', () => {
    const fut = loop.createFuture<number>();
    fut.setResult(1);
    expect(fut.result()).toBe(1);
    expect(fut.exception()).toBeNull();
    expect(fut.done()).toBe(true);
    expect(fut.cancelled()).toBe(false);
    expectThrow(() => fut.setResult(2), InvalidStateError, 'FINISHED: <Future finished result=1>');
    expectThrow(() => fut.setException(new RuntimeError()), InvalidStateError, 'FINISHED: <Future finished result=1>');
    expect(fut.cancel()).toBe(false);
    expect(fut.result()).toBe(1);
  });

  it('keeps an error: result() throws that same object, exception() returns it', () => {
    const fut = loop.createFuture<number>();
    const error = new RuntimeError('boom');
    fut.setException(error);
    expect(thrownBy(() => fut.result())).toBe(error);
    expect(fut.exception()).toBe(error);
    expect(fut.cancelled()).toBe(false);
    expect(fut.cancel()).toBe(false);
    expectThrow(
      () => fut.setResult(1),
      InvalidStateError,
      "FINISHED: <Future finished exception=RuntimeError('boom')>",
    );
  });

  it('instantiates an error class passed to setException', () => {
    const fut = loop.createFuture();
    fut.setException(RuntimeError);
    const error = fut.exception();
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error?.message).toBe('');
  });
});

describe('Future.addDoneCallback (FUT-04)', () => {
  it('schedules callbacks with callSoon, never inline, also when added after completion', async () => {
    const log: string[] = [];
    const fut = loop.createFuture<number>();
    fut.addDoneCallback(() => log.push('cb1'));
    fut.setResult(1);
    log.push('after set_result');
    fut.addDoneCallback(() => log.push('cb2'));
    log.push('after add');
    await runOnce(loop);
    expect(log).toEqual(['after set_result', 'after add', 'cb1', 'cb2']);
  });

  it('queues the callbacks behind handles already in the ready queue', async () => {
    const log: string[] = [];
    const fut = loop.createFuture<number>();
    fut.addDoneCallback(() => log.push('cb'));
    loop.callSoon(() => log.push('queued before'));
    fut.setResult(1);
    loop.callSoon(() => log.push('queued after'));
    await runOnce(loop);
    expect(log).toEqual(['queued before', 'cb', 'queued after']);
  });

  it('runs callbacks in registration order with the future as the only argument', async () => {
    const calls: unknown[][] = [];
    const fut = loop.createFuture<string>();
    fut.addDoneCallback((...args: unknown[]) => calls.push([42, ...args]));
    fut.addDoneCallback((...args: unknown[]) => calls.push([17, ...args]));
    fut.setException(new RuntimeError('x'));
    fut.exception();
    await runOnce(loop);
    // Futures are iterable: compare them by identity, never with a deep equality that iterates.
    expect(calls.map((call) => call.length)).toEqual([2, 2]);
    expect(calls.map((call) => call[0])).toEqual([42, 17]);
    expect(calls[0]?.[1]).toBe(fut);
    expect(calls[1]?.[1]).toBe(fut);
  });

  it('also schedules callbacks when the future is cancelled', async () => {
    const log: string[] = [];
    const fut = loop.createFuture();
    fut.addDoneCallback((f) => log.push(`cancelled=${f.cancelled()}`));
    fut.cancel();
    expect(log).toEqual([]);
    await runOnce(loop);
    expect(log).toEqual(['cancelled=true']);
  });

  it('rejects a callback that is not a function', () => {
    const fut = loop.createFuture();
    expect(thrownBy(() => fut.addDoneCallback(1 as never))).toBeInstanceOf(TypeError);
  });

  it('runs a callback in a snapshot of the context current at registration', async () => {
    const request = new ContextVar<string>('request');
    const seen: string[] = [];
    const fut = loop.createFuture();
    const ctx = copyContext();
    ctx.run(() => {
      request.set('at registration');
      fut.addDoneCallback(() => seen.push(request.get('unset')));
    });
    ctx.run(() => request.set('changed later'));
    request.set('root value');
    fut.setResult(null);
    await runOnce(loop);
    expect(seen).toEqual(['at registration']);
  });

  it('runs a callback in the context passed explicitly, where its changes stay', async () => {
    const request = new ContextVar<string>('request');
    const seen: string[] = [];
    const explicit = new Context();
    explicit.run(() => request.set('explicit'));
    const fut = loop.createFuture();
    fut.addDoneCallback(
      () => {
        seen.push(request.get('unset'));
        request.set('set by callback');
      },
      { context: explicit },
    );
    fut.setResult(null);
    await runOnce(loop);
    expect(seen).toEqual(['explicit']);
    expect(explicit.get(request)).toBe('set by callback');
    expect(request.get('unset')).toBe('unset');
  });
});

describe('Future.removeDoneCallback', () => {
  it('removes every registration of the callback and returns how many', async () => {
    const log: string[] = [];
    const fut = loop.createFuture();
    const twice = (): void => {
      log.push('twice');
    };
    const kept = (): void => {
      log.push('kept');
    };
    fut.addDoneCallback(twice);
    fut.addDoneCallback(kept);
    fut.addDoneCallback(twice);
    expect(fut.removeDoneCallback(twice)).toBe(2);
    expect(fut.removeDoneCallback(twice)).toBe(0);
    fut.setResult(null);
    await runOnce(loop);
    expect(log).toEqual(['kept']);
  });

  it('returns 0 for a callback that was never added', () => {
    const fut = loop.createFuture();
    expect(fut.removeDoneCallback(() => undefined)).toBe(0);
  });
});

describe('Future await protocol (FUT-06)', () => {
  it('yields the pending future itself, then returns its result once done', () => {
    const fut = loop.createFuture<number>();
    const iterator = fut[Symbol.iterator]();
    const first = iterator.next();
    expect(first.done).toBe(false);
    expect(first.value).toBe(fut);
    fut.setResult(42);
    expect(iterator.next()).toEqual({ value: 42, done: true });
  });

  it("throws RuntimeError(\"await wasn't used with future\") when resumed while still pending", () => {
    const fut = loop.createFuture<number>();
    const iterator = fut[Symbol.iterator]();
    iterator.next();
    expectThrow(() => iterator.next(), RuntimeError, "await wasn't used with future");
  });

  it('does not suspend on a future that is already done, however often it is awaited', () => {
    const fut = loop.createFuture<number>();
    function* consumer(): Generator<unknown, void, unknown> {
      yield 'A';
      const x = yield* fut;
      yield ['B', x];
      const y = yield* fut;
      yield ['C', y];
    }
    const gen = consumer();
    expect(gen.next().value).toBe('A');
    expect(gen.next().value).toBe(fut);
    fut.setResult(42);
    expect(gen.next().value).toEqual(['B', 42]);
    expect(gen.next().value).toEqual(['C', 42]);
    expect(gen.next().done).toBe(true);
  });

  it('delivers an array result as one value', () => {
    const fut = loop.createFuture<number[]>();
    const pair = [1, 2];
    fut.setResult(pair);
    const iterator = fut[Symbol.iterator]();
    const step = iterator.next();
    expect(step.done).toBe(true);
    expect(step.value).toBe(pair);
  });

  it('throws the stored error at the await', () => {
    const fut = loop.createFuture<number>();
    const error = new RangeError('bad');
    fut.setException(error);
    expect(thrownBy(() => fut[Symbol.iterator]().next())).toBe(error);
  });

  it('resolves `await fut` from an async function while the loop runs', async () => {
    const fut = loop.createFuture<number>();
    const running = loop.runForever();
    const awaited = (async (): Promise<number> => {
      const value = await fut;
      loop.stop();
      return value;
    })();
    await Promise.resolve();
    expect(fut.done()).toBe(false);
    loop.callSoonThreadsafe(() => fut.setResult(7));
    await expect(awaited).resolves.toBe(7);
    await running;
  });

  it('rejects `then` of a failed future with its error', async () => {
    const fut = loop.createFuture<number>();
    const error = new RangeError('bad');
    fut.setException(error);
    const outcome = await fut.then(
      (value) => `resolved ${value}`,
      (reason: unknown) => reason,
    );
    expect(outcome).toBe(error);
  });

  it('rejects `await` of a future that fails while the loop runs', async () => {
    const fut = loop.createFuture<number>();
    const error = new RangeError('late');
    loop.callLater(3, () => fut.setException(error));
    const running = loop.runForever();
    const awaited = (async (): Promise<unknown> => {
      try {
        return await fut;
      } catch (caught) {
        return caught;
      } finally {
        loop.stop();
      }
    })();
    await expect(awaited).resolves.toBe(error);
    await running;
  });

  it('rejects `then` of a cancelled future with CancelledError', async () => {
    const fut = loop.createFuture<number>();
    fut.cancel('stop');
    const outcome = await fut.then(
      () => 'resolved',
      (reason: unknown) => reason,
    );
    expect(outcome).toBeInstanceOf(CancelledError);
    expect((outcome as Error).message).toBe('stop');
  });
});

describe('Future loop binding (FUT-07)', () => {
  it('throws RuntimeError without a running or current loop', () => {
    setEventLoop(null);
    expectThrow(() => new Future(), RuntimeError, "There is no current event loop in thread 'MainThread'.");
  });

  it('binds to the running loop inside a task', async () => {
    function* main(): Coroutine<unknown> {
      return new Future().getLoop();
    }
    await expect(loop.runUntilComplete(main())).resolves.toBe(loop);
  });

  it('binds to the current loop set with setEventLoop', () => {
    setEventLoop(loop);
    expect(new Future().getLoop()).toBe(loop);
  });

  it('binds to the loop given as an option, over the current one', () => {
    const other = newEventLoop();
    try {
      setEventLoop(loop);
      expect(new Future({ loop: other }).getLoop()).toBe(other);
    } finally {
      other.close();
    }
  });

  it('rejects an argument that is not an options object', () => {
    expect(thrownBy(() => new Future(5 as never))).toBeInstanceOf(TypeError);
  });

  it('rejects a loop passed in place of the options object (asyncio: a positional argument)', () => {
    setEventLoop(loop);
    const other = newEventLoop();
    try {
      expect(thrownBy(() => new Future(other as never))).toBeInstanceOf(TypeError);
    } finally {
      other.close();
    }
  });
});

describe('Future repr (FUT-08)', () => {
  it('describes each state', () => {
    const pending = loop.createFuture();
    expect(String(pending)).toBe('<Future pending>');
    const finished = loop.createFuture<number>();
    finished.setResult(4);
    expect(String(finished)).toBe('<Future finished result=4>');
    const text = loop.createFuture<string>();
    text.setResult('abc');
    expect(String(text)).toBe("<Future finished result='abc'>");
    const failed = loop.createFuture();
    failed.setException(new RuntimeError('x'));
    failed.exception();
    expect(String(failed)).toBe("<Future finished exception=RuntimeError('x')>");
    const bare = loop.createFuture();
    bare.setException(new RuntimeError());
    bare.exception();
    expect(String(bare)).toBe('<Future finished exception=RuntimeError()>');
    const cancelled = loop.createFuture();
    cancelled.cancel();
    expect(String(cancelled)).toBe('<Future cancelled>');
  });

  it('lists one or two callbacks by name', () => {
    const fut = loop.createFuture();
    function f1(): void {}
    function f2(): void {}
    fut.addDoneCallback(f1);
    expect(String(fut)).toBe('<Future pending cb=[f1()]>');
    fut.addDoneCallback(f2);
    expect(String(fut)).toBe('<Future pending cb=[f1(), f2()]>');
  });

  it('abbreviates three or more callbacks to the first, a count and the last', () => {
    const fut = loop.createFuture();
    function a(): void {}
    function m(): void {}
    function z(): void {}
    fut.addDoneCallback(a);
    fut.addDoneCallback(m);
    fut.addDoneCallback(z);
    expect(String(fut)).toBe('<Future pending cb=[a(), <1 more>, z()]>');
    for (let i = 0; i < 7; i++) fut.addDoneCallback(m);
    fut.addDoneCallback(z);
    expect(String(fut)).toBe('<Future pending cb=[a(), <9 more>, z()]>');
  });

  it('shows ten callbacks as `<8 more>`', () => {
    const fut = loop.createFuture();
    function first(): void {}
    function middle(): void {}
    function last(): void {}
    fut.addDoneCallback(first);
    for (let i = 0; i < 8; i++) fut.addDoneCallback(middle);
    fut.addDoneCallback(last);
    expect(String(fut)).toBe('<Future pending cb=[first(), <8 more>, last()]>');
  });
});

describe('Future "exception was never retrieved" (EXC-04)', () => {
  /** Create a future, let `use` act on it, and keep only a weak reference. */
  function dropped<T>(use: (fut: Future<T>) => void): WeakRef<Future<T>> {
    const fut = loop.createFuture<T>();
    use(fut);
    return new WeakRef(fut);
  }

  function recordReports(): ExceptionContext[] {
    const reports: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => reports.push(context));
    return reports;
  }

  it('reports an error nobody retrieved once the future is collected', async () => {
    const reports = recordReports();
    const error = new RuntimeError('boom');
    const ref = dropped((fut) => fut.setException(error));
    await collectUntil(() => ref.deref() === undefined && reports.length > 0);
    expect(ref.deref()).toBeUndefined();
    expect(reports).toHaveLength(1);
    expect(reports[0]?.message).toBe('Future exception was never retrieved');
    expect(reports[0]?.exception).toBe(error);
    expect(reports[0]?.futureDescription).toBe("<Future finished exception=RuntimeError('boom')>");
  });

  it('reports nothing for retrieved, cancelled-after-failure, successful or pending futures', async () => {
    const reports = recordReports();
    const sentinel = new RuntimeError('sentinel');
    const refs: Array<WeakRef<Future<unknown>>> = [
      dropped((fut) => fut.setException(sentinel)),
      dropped((fut) => {
        fut.setException(new RuntimeError('read by exception()'));
        fut.exception();
      }),
      dropped((fut) => {
        fut.setException(new RuntimeError('read by result()'));
        thrownBy(() => fut.result());
      }),
      dropped((fut) => {
        fut.setException(new RuntimeError('cancelled after failing'));
        expect(fut.cancel()).toBe(false);
      }),
      dropped((fut) => {
        fut.setException(new RuntimeError('flag cleared'));
        fut._logTraceback = false;
      }),
      dropped((fut) => fut.setResult(42)),
      dropped((fut) => {
        fut.setResult(42);
        fut.result();
      }),
      dropped(() => undefined),
    ];
    await collectUntil(() => refs.every((ref) => ref.deref() === undefined) && reports.length > 0);
    await drainFinalizers();
    expect(refs.map((ref) => ref.deref())).toEqual(refs.map(() => undefined));
    expect(reports.map((report) => report.exception)).toEqual([sentinel]);
    expect(reports[0]?.exception).toBe(sentinel);
  });

  it('flags an unretrieved error with _logTraceback until it is retrieved', () => {
    const fut = loop.createFuture();
    expect(fut._logTraceback).toBe(false);
    fut.setException(new RuntimeError('boom'));
    expect(fut._logTraceback).toBe(true);
    fut.exception();
    expect(fut._logTraceback).toBe(false);
  });

  it('clears _logTraceback on result() and on cancel() after failing; never sets it for results', () => {
    const viaResult = loop.createFuture();
    viaResult.setException(new RuntimeError('boom'));
    thrownBy(() => viaResult.result());
    expect(viaResult._logTraceback).toBe(false);
    const viaCancel = loop.createFuture();
    viaCancel.setException(new RuntimeError('boom'));
    viaCancel.cancel();
    expect(viaCancel._logTraceback).toBe(false);
    const succeeded = loop.createFuture<number>();
    succeeded.setResult(1);
    expect(succeeded._logTraceback).toBe(false);
  });

  it('accepts false for _logTraceback and refuses true', () => {
    const fut = loop.createFuture();
    fut.setException(new RuntimeError('boom'));
    expectThrow(
      () => {
        fut._logTraceback = true;
      },
      RangeError,
      '_log_traceback can only be set to False',
    );
    expect(fut._logTraceback).toBe(true);
    fut._logTraceback = false;
    expect(fut._logTraceback).toBe(false);
  });
});
