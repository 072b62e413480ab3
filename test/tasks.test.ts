import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  type Context,
  Future,
  RuntimeError,
  type Task,
  TimeoutError,
  allTasks,
  createTask,
  currentTask,
  ensureFuture,
  setEventLoop,
  sleep,
  type Coroutine,
} from '../src/index.js';
import {
  ALL_COMPLETED,
  FIRST_COMPLETED,
  FIRST_EXCEPTION,
  asCompleted,
  gather,
  shield,
  wait,
  waitFor,
  type AsCompletedIterator,
  type CompletedInput,
  type ReturnWhen,
} from '../src/tasks.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop, runOnce } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
useFreshLoop(() => (loop = new VirtualLoop()), { clearCurrent: true });

/** Resolve to what `body` returns, or to the error it throws, after running it as the main task. */
async function outcome<T>(body: Coroutine<T>): Promise<T | unknown> {
  try {
    return await loop.runUntilComplete(body);
  } catch (error) {
    return error;
  }
}

function* delayed<T>(value: T, delay: number): Coroutine<T> {
  yield* sleep(delay);
  return value;
}

function* failing(error: Error, delay = 0): Coroutine<never> {
  yield* sleep(delay);
  throw error;
}

function* numCoro(): Coroutine<number> {
  yield;
  return 1;
}

function* strCoro(): Coroutine<string> {
  yield;
  return 'one';
}

function countCalls(future: Future<unknown>): { calls: number } {
  const counter = { calls: 0 };
  future.addDoneCallback(() => counter.calls++);
  return counter;
}

describe('gather', () => {
  it.each([undefined, false, true])('lists results in argument order, callback once (returnExceptions %s)', async (returnExceptions) => {
    const [a, b, c] = [loop.createFuture<number>(), loop.createFuture<number>(), loop.createFuture<number>()];
    const g = returnExceptions === undefined ? gather(a, b, c) : gather([a, b, c], { returnExceptions });
    const counter = countCalls(g);
    b.setResult(1);
    a.setResult(2);
    await runOnce(loop);
    await runOnce(loop);
    expect(g.done()).toBe(false);
    expect(counter.calls).toBe(0);
    c.setResult(3);
    await runOnce(loop);
    await runOnce(loop);
    expect(counter.calls).toBe(1);
    expect(g.result()).toEqual([2, 1, 3]);
  });

  it('collects errors as results with returnExceptions', async () => {
    const fs = [0, 1, 2, 3].map(() => loop.createFuture<number>());
    const [a, b, c, d] = fs as [Future<number>, Future<number>, Future<number>, Future<number>];
    const g = gather(fs, { returnExceptions: true });
    const exc = new RangeError('bad');
    const exc2 = new TypeError('worse');
    b.setResult(1);
    c.setException(exc);
    a.setResult(3);
    await runOnce(loop);
    expect(g.done()).toBe(false);
    d.setException(exc2);
    await runOnce(loop);
    expect(g.result()).toEqual([3, 1, exc, exc2]);
    expect((g.result() as unknown[])[2]).toBe(exc);
  });

  it('fails with the first error at once and leaves the other children alone', async () => {
    const fs = [0, 1, 2, 3, 4].map(() => loop.createFuture<number>());
    const [a, b, c, d, e] = fs as Array<Future<number>>;
    const g = gather(...fs);
    const counter = countCalls(g);
    const exc = new RangeError('first');
    a!.setResult(1);
    b!.setException(exc);
    await runOnce(loop);
    expect(g.done()).toBe(true);
    expect(g.exception()).toBe(exc);
    c!.setResult(3);
    d!.cancel();
    const late = new RuntimeError('late');
    e!.setException(late);
    await runOnce(loop);
    await runOnce(loop);
    expect(counter.calls).toBe(1);
    expect(g.exception()).toBe(exc);
    expect(c!.result()).toBe(3);
    expect(e!._logTraceback).toBe(false);
  });

  it('finishes (not cancelled) with a CancelledError when a child is cancelled', async () => {
    const a = loop.createFuture<number>();
    const b = loop.createFuture<number>();
    const g = gather(a, b);
    a.cancel('child stopped');
    await runOnce(loop);
    expect(g.done()).toBe(true);
    expect(g.cancelled()).toBe(false);
    const error = g.exception();
    expect(error).toBeInstanceOf(CancelledError);
    expect(error?.message).toBe('child stopped');
    expect(b.cancelled()).toBe(false);
  });

  it('gives each cancelled child a fresh CancelledError with its message under returnExceptions', async () => {
    const fs = [0, 1, 2, 3, 4, 5].map(() => loop.createFuture<number>());
    const [a, b, c, d, e, f] = fs as Array<Future<number>>;
    const g = gather(fs, { returnExceptions: true });
    const counter = countCalls(g);
    const zde = new RangeError('division by zero');
    const rte = new RuntimeError('rte');
    a!.setResult(1);
    b!.setException(zde);
    c!.cancel();
    await runOnce(loop);
    expect(g.done()).toBe(false);
    d!.setResult(3);
    e!.cancel('m');
    f!.setException(rte);
    function* main(): Coroutine<unknown[]> {
      return yield* g;
    }
    const results = (await loop.runUntilComplete(main())) as unknown[];
    expect(counter.calls).toBe(1);
    expect(results).toHaveLength(6);
    expect(results[0]).toBe(1);
    expect(results[1]).toBe(zde);
    expect(results[2]).toBeInstanceOf(CancelledError);
    expect((results[2] as Error).message).toBe('');
    expect(results[3]).toBe(3);
    expect(results[4]).toBeInstanceOf(CancelledError);
    expect((results[4] as Error).message).toBe('m');
    expect(results[5]).toBe(rte);
  });

  it('cancels its children on cancel() and finishes with CancelledError, not cancelled', async () => {
    const a = loop.createFuture<number>();
    const b = loop.createFuture<number>();
    const g = gather(a, b);
    expect(g.cancel()).toBe(true);
    expect(g.cancel()).toBe(false);
    expect(a.cancelled() && b.cancelled()).toBe(true);
    expect(g.done()).toBe(false);
    await runOnce(loop);
    expect(g.done()).toBe(true);
    expect(g.cancelled()).toBe(false);
    expect(g.exception()).toBeInstanceOf(CancelledError);
    expect(g.exception()?.message).toBe('');
  });

  it('carries the cancel message of gather.cancel(msg)', async () => {
    const g = gather(loop.createFuture(), loop.createFuture());
    g.cancel('boo');
    await runOnce(loop);
    expect(g.exception()).toBeInstanceOf(CancelledError);
    expect(g.exception()?.message).toBe('boo');
  });

  it('still raises CancelledError when cancelled with returnExceptions', async () => {
    const a = loop.createFuture<number>();
    const b = loop.createFuture<number>();
    const g = gather([a, b], { returnExceptions: true });
    const log: string[] = [];
    function* main(): Coroutine<void> {
      try {
        yield* g;
        log.push('returned');
      } catch (error) {
        log.push(`raised ${(error as Error).name}`);
      }
    }
    const task = loop.createTask(main());
    loop.callSoon(() => log.push(`cancel ${g.cancel()}`));
    await loop.runUntilComplete(task);
    expect(log).toEqual(['cancel true', 'raised CancelledError']);
    expect(task.cancelled()).toBe(false);
  });

  it('returns false from cancel() when every child is already done', async () => {
    const a = loop.createFuture<number>();
    const b = loop.createFuture<number>();
    const g = gather(a, b);
    a.setResult(1);
    b.setResult(2);
    expect(g.cancel()).toBe(false);
    await runOnce(loop);
    expect(g.result()).toEqual([1, 2]);
  });

  it('cancels the tasks of its coroutines when the awaiting task is cancelled', async () => {
    const log: string[] = [];
    function* child(name: string): Coroutine<void> {
      try {
        yield* sleep(10);
      } catch (error) {
        log.push(`${name} ${(error as Error).message}`);
        throw error;
      }
    }
    function* parent(): Coroutine<void> {
      yield* gather(child('a'), child('b'));
    }
    function* main(): Coroutine<unknown> {
      const task = createTask(parent());
      yield* sleep(1);
      task.cancel('stop');
      try {
        yield* task;
      } catch (error) {
        return error;
      }
      return null;
    }
    const error = (await loop.runUntilComplete(main())) as Error;
    expect(log).toEqual(['a stop', 'b stop']);
    expect(error).toBeInstanceOf(CancelledError);
    expect(error.message).toBe('stop');
  });

  it.each([[undefined], ['my message']])('delivers the cancel message %s to the caller through gather', async (message) => {
    function* looping(): Coroutine<void> {
      for (;;) yield* gather([sleep(0.05)], { returnExceptions: true });
    }
    function* main(): Coroutine<unknown> {
      const task = createTask(looping());
      yield* sleep(0.12);
      task.cancel(message);
      try {
        yield* task;
      } catch (error) {
        return error;
      }
      return null;
    }
    const error = (await loop.runUntilComplete(main())) as Error;
    expect(error).toBeInstanceOf(CancelledError);
    expect(error.message).toBe(message ?? '');
  });

  it('returns a finished future of [] for no awaitables, on the current loop', () => {
    setEventLoop(loop);
    const g = gather();
    expect(g.done()).toBe(true);
    expect(g.result()).toEqual([]);
    expect(g.getLoop()).toBe(loop);
    const h = gather([], { returnExceptions: true });
    expect(h.result()).toEqual([]);
  });

  it('needs a loop for no awaitables', () => {
    expect(() => gather()).toThrow(new RuntimeError("There is no current event loop in thread 'MainThread'."));
  });

  it('is done at once when every child is already done', () => {
    const a = loop.createFuture<string>();
    a.setResult('x');
    const g = gather(a, a);
    expect(g.done()).toBe(true);
    expect(g.result()).toEqual(['x', 'x']);
  });

  it('runs a repeated coroutine once and fills every slot', async () => {
    let runs = 0;
    function* abc(): Coroutine<string> {
      runs++;
      yield;
      return 'abc';
    }
    const coro = abc();
    function* main(): Coroutine<string[]> {
      return yield* gather(coro, coro, delayed('def', 0), coro);
    }
    expect(await loop.runUntilComplete(main())).toEqual(['abc', 'abc', 'def', 'abc']);
    expect(runs).toBe(1);
  });

  it('refuses children of two loops and binds to the children’s loop', () => {
    const other = new VirtualLoop();
    try {
      const mine = loop.createFuture();
      const theirs = other.createFuture();
      expect(() => gather(mine, theirs)).toThrow(
        new RangeError('The future belongs to a different loop than the one specified as the loop argument'),
      );
      const g = gather(other.createFuture(), theirs);
      expect(g.getLoop()).toBe(other);
    } finally {
      other.close();
    }
  });

  it('throws TypeError for a non-awaitable without calling the exception handler', () => {
    const reports: unknown[] = [];
    loop.setExceptionHandler((_loop, context) => reports.push(context));
    const fut = loop.createFuture();
    expect(() => gather(fut, {} as Future<unknown>)).toThrow(
      new TypeError('An asyncio.Future, a coroutine or an awaitable is required'),
    );
    expect(reports).toEqual([]);
  });

  it('fails with the first error and marks a second one retrieved', async () => {
    const first = new RangeError('first');
    const second = new TypeError('second');
    const a = loop.createFuture<number>();
    const b = loop.createFuture<number>();
    const g = gather(a, b);
    a.setException(first);
    b.setException(second);
    await runOnce(loop);
    expect(g.exception()).toBe(first);
    expect(b._logTraceback).toBe(false);
  });

  it('tells the array form from the variadic one', async () => {
    const a = loop.createFuture<number>();
    const b = loop.createFuture<number>();
    a.setResult(1);
    b.setResult(2);
    expect(gather([a, b]).result()).toEqual([1, 2]);
    expect(gather([a, b], undefined).result()).toEqual([1, 2]);
    expect(gather([a, b], { returnExceptions: false }).result()).toEqual([1, 2]);
    // An array followed by an awaitable is the variadic form, and an array is no awaitable.
    expect(() => gather([a] as unknown as Future<number>, b)).toThrow(TypeError);
    const failed = loop.createFuture<number>();
    const error = new RangeError('x');
    failed.setException(error);
    expect(gather([failed, a], { returnExceptions: true }).result()).toEqual([error, 1]);
    expect(gather([failed, a], {}).exception()).toBe(error);
  });

  it('types its results after its arguments', async () => {
    function* main(): Coroutine<string> {
      const [a, b] = yield* gather(numCoro(), strCoro());
      const n: number = a;
      const s: string = b;
      // @ts-expect-error the second result is a string
      const wrong: number = b;
      void wrong;
      const [x, y] = yield* gather([numCoro(), strCoro()], { returnExceptions: true });
      const nx: number | Error = x;
      // @ts-expect-error an element may be an Error
      const strict: string = y;
      void strict;
      const [p] = yield* gather([numCoro()]);
      const np: number = p;
      return `${n} ${s} ${String(nx)} ${y instanceof Error ? 'error' : y} ${np}`;
    }
    expect(await loop.runUntilComplete(main())).toBe('1 one 1 one 1');
  });

  it('decides in the callback of the child that finished last, in the order children finished', async () => {
    // asyncio runs each child's callback through call_soon in the order they finished: a child
    // that failed first (returnExceptions) does not complete the gather, even when every child
    // is done by the time its callback runs; the last child's callback does, after what was
    // scheduled between the two.
    const [a, b, c] = [loop.createFuture<number>(), loop.createFuture<number>(), loop.createFuture<number>()];
    const g = gather([a, b, c], { returnExceptions: true });
    const log: string[] = [];
    a.setResult(1);
    const error = new RangeError('b failed');
    b.setException(error);
    loop.callSoon(() => log.push(`between: done=${g.done()}`));
    c.setResult(3);
    loop.callSoon(() => log.push(`after: done=${g.done()}`));
    await runOnce(loop);
    expect(log).toEqual(['between: done=false', 'after: done=true']);
    expect(g.result()).toEqual([1, error, 3]);
  });

  it('fails in the callback of the failing child, after what was scheduled before it finished', async () => {
    const [a, b] = [loop.createFuture<number>(), loop.createFuture<number>()];
    const g = gather(a, b);
    const log: string[] = [];
    loop.callSoon(() => log.push(`before: done=${g.done()}`));
    const error = new TypeError('a failed');
    a.setException(error);
    loop.callSoon(() => log.push(`after: done=${g.done()}`));
    await runOnce(loop);
    expect(log).toEqual(['before: done=false', 'after: done=true']);
    expect(g.exception()).toBe(error);
    b.setResult(2);
    await runOnce(loop);
    expect(g.exception()).toBe(error);
  });

  it("calls a Future subclass's own addDoneCallback, as asyncio's gather calls add_done_callback", async () => {
    const registered: string[] = [];
    class Watched<T> extends Future<T> {
      override addDoneCallback(callback: (future: this) => void, options?: { context?: Context }): void {
        registered.push('addDoneCallback');
        super.addDoneCallback(callback, options);
      }
    }
    const watched = new Watched<number>({ loop });
    const plain = loop.createFuture<number>();
    const g = gather(watched, plain);
    expect(registered).toEqual(['addDoneCallback']);
    watched.setResult(1);
    plain.setResult(2);
    await runOnce(loop);
    await runOnce(loop);
    expect(g.result()).toEqual([1, 2]);
  });

  it("names the gather's entry in a watched child's repr", () => {
    const child = loop.createFuture<number>();
    gather(child, loop.createFuture<number>());
    expect(String(child)).toBe('<Future pending cb=[gather._done_callback()]>');
  });

  it('runs a coroutine and a future given twice once each, and fills every slot', async () => {
    let runs = 0;
    function* counted(): Coroutine<string> {
      runs++;
      yield;
      return `run ${runs}`;
    }
    const shared = counted();
    const fut = loop.createFuture<number>();
    const done = loop.createFuture<number>();
    done.setResult(7);
    loop.callLater(0.01, () => fut.setResult(5));
    function* main(): Coroutine<unknown[]> {
      return yield* gather(shared, fut, done, shared, fut, done);
    }
    expect(await loop.runUntilComplete(main())).toEqual(['run 1', 5, 7, 'run 1', 5, 7]);
    expect(runs).toBe(1);
  });

  it('completes at once when every child is done, duplicates included', () => {
    const done = loop.createFuture<number>();
    done.setResult(3);
    const g = gather([done, done], { returnExceptions: true });
    expect(g.done()).toBe(true);
    expect(g.result()).toEqual([3, 3]);
  });

  it('runs a coroutine given twice once, and fills both slots, in a large gather too', async () => {
    let runs = 0;
    function* counted(): Coroutine<number> {
      runs++;
      yield;
      return runs;
    }
    const shared = counted();
    const many = Array.from({ length: 1000 }, () => numCoro());
    function* main(): Coroutine<unknown[]> {
      return yield* gather([shared, ...many, shared]);
    }
    const results = (await loop.runUntilComplete(main())) as unknown[];
    expect(runs).toBe(1);
    expect(results).toHaveLength(1002);
    expect(results[0]).toBe(1);
    expect(results[1001]).toBe(1);
  });
});

describe('shield', () => {
  it('passes the inner result and the very error through', async () => {
    const inner = loop.createFuture<number>();
    const outer = shield(inner);
    expect(outer === inner).toBe(false);
    await runOnce(loop);
    inner.setResult(42);
    await runOnce(loop);
    expect(outer.result()).toBe(42);

    const failing = loop.createFuture<number>();
    const shielded = shield(failing);
    const error = new RangeError('inner failed');
    failing.setException(error);
    await runOnce(loop);
    expect(shielded.exception()).toBe(error);
  });

  it('returns an inner already done as is', () => {
    const inner = loop.createFuture<number>();
    inner.setResult(1);
    expect(shield(inner)).toBe(inner);
  });

  it('wraps a coroutine in a task of the running loop, and needs a loop for it', async () => {
    function* main(): Coroutine<number> {
      const outer = shield(delayed(7, 0.5));
      expect(outer.getLoop()).toBe(loop);
      return yield* outer;
    }
    expect(await loop.runUntilComplete(main())).toBe(7);
    expect(loop.time()).toBe(0.5);
    expect(() => shield(delayed(1, 1))).toThrow(new RuntimeError("There is no current event loop in thread 'MainThread'."));
  });

  it('is cancelled when the inner is cancelled', async () => {
    const inner = loop.createFuture<number>();
    const outer = shield(inner);
    await runOnce(loop);
    inner.cancel();
    await runOnce(loop);
    expect(outer.cancelled()).toBe(true);
  });

  it('leaves the inner task running when the awaiting task is cancelled', async () => {
    const log: string[] = [];
    function* work(): Coroutine<string> {
      yield* sleep(1);
      log.push(`work done at ${loop.time()}`);
      return 'saved';
    }
    function* caller(): Coroutine<void> {
      try {
        yield* shield(work());
      } catch (error) {
        log.push(`caller got ${(error as Error).name} at ${loop.time()}`);
        throw error;
      }
    }
    function* main(): Coroutine<void> {
      const task = createTask(caller());
      yield* sleep(0.5);
      task.cancel();
      yield* wait([task]);
      expect(task.cancelled()).toBe(true);
      // Nobody holds the shielded task: the loop keeps it until it is done.
      const others = [...allTasks()].filter((t) => t !== currentTask());
      expect(others).toHaveLength(1);
      yield* sleep(1);
    }
    await loop.runUntilComplete(main());
    expect(log).toEqual(['caller got CancelledError at 0.5', 'work done at 1']);
  });

  it('shields a gather, which still completes', async () => {
    const c1 = loop.createFuture<number>();
    const c2 = loop.createFuture<number>();
    const g = gather(c1, c2);
    const outer = shield(g);
    await runOnce(loop);
    outer.cancel();
    await runOnce(loop);
    c1.setResult(1);
    c2.setResult(2);
    await runOnce(loop);
    expect(outer.cancelled()).toBe(true);
    expect(g.result()).toEqual([1, 2]);
  });

  it('cancels only the shields when a gather of shields is cancelled', async () => {
    const c1 = loop.createFuture<number>();
    const c2 = loop.createFuture<number>();
    const s1 = shield(c1);
    const s2 = shield(c2);
    const parent = gather(s1, s2);
    await runOnce(loop);
    expect(parent.cancel()).toBe(true);
    await runOnce(loop);
    expect(parent.exception()).toBeInstanceOf(CancelledError);
    expect(s1.cancelled() && s2.cancelled()).toBe(true);
    c1.setResult(1);
    c2.setResult(2);
    expect(c1.result() + c2.result()).toBe(3);
  });

  it('times out at once under waitFor(…, 0) and leaves the task running', async () => {
    function* main(): Coroutine<string[]> {
      const task = createTask(delayed('done', 0.01));
      const log: string[] = [];
      const outer = shield(task);
      try {
        yield* waitFor(outer, 0);
      } catch (error) {
        log.push(`${(error as Error).name} at ${loop.time()}`);
      }
      log.push(`shield cancelled ${outer.cancelled()}, task done ${task.done()}`);
      log.push(yield* task);
      return log;
    }
    expect(await loop.runUntilComplete(main())).toEqual([
      'TimeoutError at 0',
      'shield cancelled true, task done false',
      'done',
    ]);
  });

  it('returns the result under waitFor(…, null)', async () => {
    function* main(): Coroutine<string> {
      return yield* waitFor(shield(createTask(delayed('done', 0.1))), null);
    }
    expect(await loop.runUntilComplete(main())).toBe('done');
  });

  it('times out under waitFor(…, 0.01) without cancelling the task', async () => {
    function* main(): Coroutine<string[]> {
      const task = createTask(delayed('done', 0.1));
      const log: string[] = [];
      try {
        yield* waitFor(shield(task), 0.01);
      } catch (error) {
        log.push(`${(error as Error).name} at ${loop.time()}`);
      }
      log.push(`task cancelled ${task.cancelled()}`);
      log.push(yield* task);
      return log;
    }
    expect(await loop.runUntilComplete(main())).toEqual(['TimeoutError at 0.01', 'task cancelled false', 'done']);
  });
});

describe('wait', () => {
  it('returns when all are done (default), never raising for members', async () => {
    const error = new RangeError('b failed');
    function* main(): Coroutine<void> {
      const a = createTask(delayed('a', 0.1));
      const b = createTask(failing(error, 0.15));
      const [done, pending] = yield* wait([b, a]);
      expect(loop.time()).toBe(0.15);
      expect(done).toEqual(new Set([a, b]));
      expect(pending.size).toBe(0);
      expect(b.exception()).toBe(error);
      const [again] = yield* wait([a, b], { returnWhen: ALL_COMPLETED });
      expect(loop.time()).toBe(0.15);
      expect(again).toEqual(new Set([a, b]));
    }
    await loop.runUntilComplete(main());
  });

  it('accepts any iterable, a one-shot iterator too, and collapses duplicates', async () => {
    function* main(): Coroutine<number[]> {
      const a = createTask(delayed('a', 0.1));
      const b = createTask(delayed('b', 0.2));
      const oneShot = new Map([[1, a], [2, b], [3, a]]).values();
      const [done1] = yield* wait(oneShot);
      const [done2, pending2] = yield* wait([a, a, b]);
      return [done1.size, done2.size, pending2.size];
    }
    expect(await loop.runUntilComplete(main())).toEqual([2, 2, 0]);
  });

  it('returns at the first completion with FIRST_COMPLETED, leaving the rest running', async () => {
    function* main(): Coroutine<void> {
      const a = createTask(delayed('a', 10));
      const b = createTask(delayed('b', 0.1));
      const [done, pending] = yield* wait([b, a], { returnWhen: FIRST_COMPLETED });
      expect(loop.time()).toBe(0.1);
      expect(done).toEqual(new Set([b]));
      expect(pending).toEqual(new Set([a]));
      expect(a.cancelled()).toBe(false);
      expect(a.done()).toBe(false);
      a.cancel();
    }
    await loop.runUntilComplete(main());
  });

  it('decides membership by done() when it returns', async () => {
    function* oneStep(): Coroutine<void> {
      yield;
    }
    function* twoSteps(): Coroutine<void> {
      yield;
      yield;
    }
    function* main(): Coroutine<void> {
      const a = createTask(oneStep());
      const b = createTask(twoSteps());
      const [done, pending] = yield* wait([a, b], { returnWhen: FIRST_COMPLETED });
      expect(done).toEqual(new Set([a, b]));
      expect(pending.size).toBe(0);
    }
    await loop.runUntilComplete(main());
  });

  it.each([
    [0, 0],
    [0.01, 0.01],
  ])('returns at the first error with FIRST_EXCEPTION (error after %s s)', async (delay, at) => {
    const error = new RangeError('b');
    function* main(): Coroutine<void> {
      const a = createTask(delayed('a', 10));
      const b = createTask(failing(error, delay));
      const [done, pending] = yield* wait([a, b], { returnWhen: FIRST_EXCEPTION });
      expect(loop.time()).toBe(at);
      expect(done).toEqual(new Set([b]));
      expect(pending).toEqual(new Set([a]));
      a.cancel();
    }
    await loop.runUntilComplete(main());
  });

  it('does not count a cancelled member as an error with FIRST_EXCEPTION', async () => {
    function* main(): Coroutine<void> {
      const a = createTask(delayed('a', 0.3));
      const b = createTask(delayed('b', 10));
      loop.callLater(0.1, () => b.cancel());
      const [done, pending] = yield* wait([a, b], { returnWhen: FIRST_EXCEPTION });
      expect(loop.time()).toBe(0.3);
      expect(done).toEqual(new Set([a, b]));
      expect(pending.size).toBe(0);
      expect(b.cancelled()).toBe(true);
    }
    await loop.runUntilComplete(main());
  });

  it('returns at the timeout, to the loop tick, without cancelling anything', async () => {
    function* main(): Coroutine<void> {
      const a = createTask(delayed('a', 10));
      const b = createTask(delayed('b', 0.1));
      const [done, pending] = yield* wait([a, b], { timeout: 0.5 });
      expect(loop.time()).toBe(0.5);
      expect(done).toEqual(new Set([b]));
      expect(pending).toEqual(new Set([a]));
      expect(a.cancelled()).toBe(false);
      expect(yield* a).toBe('a');
      expect(loop.time()).toBe(10);
    }
    await loop.runUntilComplete(main());
  });

  it('can be cancelled without touching its members', async () => {
    const member = loop.createFuture<number>();
    function* waiter(): Coroutine<void> {
      yield* wait([member]);
    }
    const task = loop.createTask(waiter());
    await runOnce(loop);
    task.cancel();
    await runOnce(loop);
    expect(task.cancelled()).toBe(true);
    expect(member.cancelled()).toBe(false);
    expect(member.removeDoneCallback(() => undefined)).toBe(0);
    expect(String(member)).toBe('<Future pending>');
  });

  it('validates its arguments in asyncio’s order', async () => {
    const fut = loop.createFuture();
    const checks: Array<[string, () => Coroutine<unknown>]> = [
      ['a future', () => wait(fut as unknown as Iterable<Future<unknown>>)],
      ['a coroutine', () => wait(numCoro() as unknown as Iterable<Future<unknown>>)],
      ['nothing', () => wait([])],
      ['bad returnWhen', () => wait([numCoro() as unknown as Future<unknown>], { returnWhen: -1 as unknown as ReturnWhen })],
      ['a coroutine inside', () => wait([fut, numCoro() as unknown as Future<unknown>])],
    ];
    const seen: string[] = [];
    for (const [label, call] of checks) {
      const error = (await outcome(call())) as Error;
      seen.push(`${label}: ${error.name}: ${error.message}`);
    }
    expect(seen).toEqual([
      'a future: TypeError: expect a list of futures, not Future',
      'a coroutine: TypeError: expect a list of futures, not coroutine',
      'nothing: RangeError: Set of Tasks/Futures is empty.',
      'bad returnWhen: RangeError: Invalid return_when value: -1',
      'a coroutine inside: TypeError: Passing coroutines is forbidden, use tasks explicitly.',
    ]);
  });
});

describe('waitFor', () => {
  it('waits forever with a null timeout', async () => {
    function* main(): Coroutine<string> {
      return yield* waitFor(delayed('done', 3600), null);
    }
    expect(await loop.runUntilComplete(main())).toBe('done');
    expect(loop.time()).toBe(3600);
  });

  it('cancels the task on timeout and waits for it to finish before raising TimeoutError', async () => {
    const log: string[] = [];
    function* slow(): Coroutine<string> {
      try {
        yield* sleep(10);
      } finally {
        log.push(`slow finally at ${loop.time()}`);
      }
      return 'done';
    }
    function* main(): Coroutine<void> {
      const task = createTask(slow());
      try {
        yield* waitFor(task, 0.1);
      } catch (error) {
        log.push(`${(error as Error).name} at ${loop.time()}`);
        expect((error as Error).cause).toBeInstanceOf(CancelledError);
        expect(task.done() && task.cancelled()).toBe(true);
        expect(currentTask()?.cancelling()).toBe(0);
      }
    }
    await loop.runUntilComplete(main());
    expect(log).toEqual(['slow finally at 0.1', 'TimeoutError at 0.1']);
  });

  it('returns the result when it comes in time and leaves no timer behind', async () => {
    function* main(): Coroutine<string> {
      const fut = loop.createFuture<string>();
      loop.callLater(0.1, () => fut.setResult('ok'));
      return yield* waitFor(fut, 0.2);
    }
    expect(await loop.runUntilComplete(main())).toBe('ok');
    expect(loop.time()).toBe(0.1);
  });

  it('runs a coroutine inside the calling task', async () => {
    function* who(): Coroutine<Task<unknown> | null> {
      yield;
      return currentTask();
    }
    function* main(): Coroutine<boolean> {
      return (yield* waitFor(who(), 1)) === currentTask();
    }
    expect(await loop.runUntilComplete(main())).toBe(true);
  });

  it('returns the result of a future already done with a zero timeout', async () => {
    const fut = loop.createFuture<string>();
    fut.setResult('done');
    function* main(): Coroutine<string> {
      return yield* waitFor(fut, 0);
    }
    expect(await loop.runUntilComplete(main())).toBe('done');
    expect(loop.time()).toBe(0);
  });

  it('never starts a coroutine with a zero timeout', async () => {
    let started = false;
    function* foo(): Coroutine<void> {
      started = true;
      yield;
    }
    function* main(): Coroutine<void> {
      yield* waitFor(foo(), 0);
    }
    const error = (await outcome(main())) as Error;
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error.message).toBe('');
    expect(error.cause).toBeInstanceOf(CancelledError);
    expect(started).toBe(false);
    expect(loop.time()).toBe(0);
  });

  it.each([0, -1])('cancels a running task with timeout %s and waits for its handler', async (timeout) => {
    const log: string[] = [];
    function* foo(started: Future<void>): Coroutine<string> {
      started.setResult();
      try {
        yield* sleep(10);
      } catch (error) {
        yield* sleep(0.01);
        throw error;
      } finally {
        log.push(`foo finally at ${loop.time()}`);
      }
      return 'done';
    }
    function* main(): Coroutine<void> {
      const started = loop.createFuture<void>();
      const task = createTask(foo(started));
      yield* started;
      try {
        yield* waitFor(task, timeout);
      } catch (error) {
        log.push(`${(error as Error).name} at ${loop.time()}, cause ${((error as Error).cause as Error).name}`);
      }
      log.push(`task cancelled ${task.cancelled()}`);
    }
    await loop.runUntilComplete(main());
    expect(log).toEqual(['foo finally at 0.01', 'TimeoutError at 0.01, cause CancelledError', 'task cancelled true']);
  });

  it.each([null, 60])('cancels the inner task when cancelled itself (timeout %s)', async (timeout) => {
    function* blocking(): Coroutine<void> {
      yield* loop.createFuture<void>();
    }
    function* main(): Coroutine<void> {
      const task = createTask(blocking());
      const w = createTask(waitFor(task, timeout));
      loop.callSoon(() => w.cancel());
      const error = yield* gather([w], { returnExceptions: true });
      expect(error[0]).toBeInstanceOf(CancelledError);
      expect(w.cancelled()).toBe(true);
      expect(task.cancelled()).toBe(true);
    }
    await loop.runUntilComplete(main());
  });

  it('waits for inner work that ignores cancellation for a while when cancelled', async () => {
    let exited = false;
    function* stubborn(): Coroutine<void> {
      while (loop.time() < 0.2) {
        try {
          yield* sleep(0.2 - loop.time());
        } catch {
          // keeps going until its own deadline
        }
      }
      exited = true;
    }
    function* main(): Coroutine<void> {
      const w = createTask(waitFor(stubborn(), 0.4));
      yield;
      w.cancel();
      yield* wait([w]);
      expect(exited).toBe(true);
      expect(loop.time()).toBe(0.2);
    }
    await loop.runUntilComplete(main());
  });

  it('returns the value of inner work that swallows the cancellation', async () => {
    function* return42(): Coroutine<number> {
      try {
        yield* sleep(10);
      } catch {
        return 42;
      }
      return 0;
    }
    function* main(): Coroutine<[number, number, number]> {
      const value = yield* waitFor(return42(), 0.1);
      return [value, loop.time(), currentTask()!.cancelling()];
    }
    expect(await loop.runUntilComplete(main())).toEqual([42, 0.1, 0]);
  });

  it('raises an error the inner task raises while being cancelled', async () => {
    class FooError extends Error {}
    function* inner(): Coroutine<void> {
      try {
        yield* sleep(0.2);
      } finally {
        throw new FooError('from finally');
      }
    }
    function* main(): Coroutine<void> {
      yield* waitFor(createTask(inner()), 0.01);
    }
    const error = await outcome(main());
    expect(error).toBeInstanceOf(FooError);
    expect(loop.time()).toBe(0.01);
  });

  it('converts only its own cancellation, judged from the level on entry', async () => {
    function* main(): Coroutine<string[]> {
      const task = currentTask()!;
      const log: string[] = [];
      task.cancel();
      try {
        yield;
      } catch (error) {
        log.push(`swallowed ${(error as Error).name}, cancelling ${task.cancelling()}`);
      }
      try {
        yield* waitFor(sleep(10), 0.1);
      } catch (error) {
        log.push(`${(error as Error).name} at ${loop.time()}, cancelling ${task.cancelling()}`);
      }
      return log;
    }
    expect(await loop.runUntilComplete(main())).toEqual([
      'swallowed CancelledError, cancelling 1',
      'TimeoutError at 0.1, cancelling 1',
    ]);
  });

  it.each([null, 10])('never loses an outside cancel racing with completion (timeout %s)', async (timeout) => {
    const fut = loop.createFuture<number>();
    const reachedEnd: string[] = [];
    function* body(): Coroutine<void> {
      yield* waitFor(fut, timeout);
      reachedEnd.push('after waitFor');
    }
    const w = loop.createTask(body());
    await runOnce(loop);
    fut.setResult(1);
    w.cancel();
    const error = await outcome(w as unknown as Coroutine<void>);
    expect(error).toBeInstanceOf(CancelledError);
    expect(w.cancelled()).toBe(true);
    expect(reachedEnd).toEqual([]);
  });

  it('raises CancelledError, not TimeoutError, when an outside cancel races with expiry', async () => {
    function* main(): Coroutine<void> {
      const w = createTask(waitFor(sleep(10), 0.5));
      yield;
      loop.callAt(0.5, () => w.cancel());
      const [result] = yield* gather([w], { returnExceptions: true });
      expect(result).toBeInstanceOf(CancelledError);
      expect(w.cancelled()).toBe(true);
      expect(loop.time()).toBe(0.5);
    }
    await loop.runUntilComplete(main());
  });

  it('does not swallow a cancel that arrives after the inner work finished', async () => {
    const reached: string[] = [];
    function* inner(): Coroutine<void> {
      yield;
    }
    function* body(): Coroutine<void> {
      yield* waitFor(inner(), 100);
      yield* sleep(1);
      reached.push('end');
    }
    function* main(): Coroutine<void> {
      const task = createTask(body());
      yield;
      yield;
      expect(task.done()).toBe(false);
      task.cancel();
      const [result] = yield* gather([task], { returnExceptions: true });
      expect(result).toBeInstanceOf(CancelledError);
    }
    await loop.runUntilComplete(main());
    expect(reached).toEqual([]);
  });
});

describe('asCompleted', () => {
  it('yields futures in completion order', async () => {
    function* main(): Coroutine<string[]> {
      const out: string[] = [];
      for (const next of asCompleted([delayed('c', 0.03), delayed('a', 0.01), delayed('b', 0.02)])) {
        const value: string = yield* next;
        out.push(`${value}@${loop.time()}`);
      }
      return out;
    }
    expect(await loop.runUntilComplete(main())).toEqual(['a@0.01', 'b@0.02', 'c@0.03']);
  });

  it('runs a repeated coroutine once', async () => {
    let runs = 0;
    function* counted(): Coroutine<string> {
      runs++;
      yield;
      return 'x';
    }
    const coro = counted();
    function* main(): Coroutine<string[]> {
      const out: string[] = [];
      for (const next of asCompleted([coro, coro, delayed('y', 0)])) out.push(yield* next);
      return out.sort();
    }
    expect(await loop.runUntilComplete(main())).toEqual(['x', 'y']);
    expect(runs).toBe(1);
  });

  it('settles futures handed out ahead of time in completion order', async () => {
    function* main(): Coroutine<string[]> {
      const handed = [...asCompleted([delayed('slow', 0.2), delayed('fast', 0.1)])];
      const out: string[] = [];
      for (const next of handed) out.push(yield* next);
      return out;
    }
    expect(await loop.runUntilComplete(main())).toEqual(['fast', 'slow']);
  });

  it('fails the pending ones with TimeoutError at the timeout, without cancelling the inputs', async () => {
    function* main(): Coroutine<string[]> {
      const a = createTask(delayed('a', 0.1));
      const b = createTask(delayed('b', 0.15));
      const log: string[] = [];
      for (const next of asCompleted([a, b], { timeout: 0.12 })) {
        try {
          log.push(`${yield* next} at ${loop.time()}`);
        } catch (error) {
          log.push(`${(error as Error).name} at ${loop.time()}`);
        }
      }
      log.push(`b cancelled ${b.cancelled()}`);
      log.push(`${yield* b} at ${loop.time()}`);
      return log;
    }
    expect(await loop.runUntilComplete(main())).toEqual([
      'a at 0.1',
      'TimeoutError at 0.12',
      'b cancelled false',
      'b at 0.15',
    ]);
  });

  it('ignores a timeout that never fires', async () => {
    function* main(): Coroutine<string[]> {
      const out: string[] = [];
      for (const next of asCompleted([delayed('a', 0.1), delayed('b', 0.2)], { timeout: 10 })) out.push(yield* next);
      return out;
    }
    expect(await loop.runUntilComplete(main())).toEqual(['a', 'b']);
    expect(loop.time()).toBe(0.2);
  });

  it('passes errors and cancellations of the inputs on', async () => {
    const error = new RangeError('broken');
    function* main(): Coroutine<string[]> {
      const cancelled = loop.createFuture<string>();
      loop.callLater(0.2, () => cancelled.cancel('stop'));
      const log: string[] = [];
      for (const next of asCompleted<string>([failing(error, 0.1), cancelled])) {
        try {
          yield* next;
        } catch (caught) {
          log.push(`${(caught as Error).name}('${(caught as Error).message}') same ${caught === error}, cancelled ${next.cancelled()}`);
        }
      }
      return log;
    }
    expect(await loop.runUntilComplete(main())).toEqual([
      "RangeError('broken') same true, cancelled false",
      "CancelledError('stop') same false, cancelled true",
    ]);
  });

  it('hands a completion to the next awaited future when the awaiter of one was cancelled', async () => {
    const a = loop.createFuture<string>();
    const b = loop.createFuture<string>();
    function* main(): Coroutine<string[]> {
      const it = asCompleted([a, b]);
      const first = it.next().value as Future<string>;
      const second = it.next().value as Future<string>;
      const log: string[] = [`third done ${it.next().done}`];
      const waiting = createTask((function* (): Coroutine<string> {
        return yield* first;
      })());
      yield* sleep(0);
      waiting.cancel();
      yield* sleep(0);
      log.push(`first cancelled ${first.cancelled()}`);
      a.setResult('a');
      log.push(`second ${yield* second}`);
      b.setResult('b');
      return log;
    }
    expect(await loop.runUntilComplete(main())).toEqual(['third done true', 'first cancelled true', 'second a']);
  });

  it('gives nothing to a future never awaited (3.13: each takes a completion when awaited)', async () => {
    function* main(): Coroutine<unknown[]> {
      const [first, second] = [...asCompleted([delayed('a', 0.1), delayed('b', 0.2)])] as Array<Future<string>>;
      yield* sleep(0.5);
      const pending = [first!.done(), second!.done()];
      return [...pending, yield* second!, yield* first!];
    }
    expect(await loop.runUntilComplete(main())).toEqual([false, false, 'a', 'b']);
  });

  it('uses the running loop and refuses a single future or coroutine', async () => {
    function* main(): Coroutine<boolean> {
      const [next] = [...asCompleted([delayed(1, 0)])];
      const sameLoop = next!.getLoop() === loop;
      yield* next!;
      return sameLoop;
    }
    expect(await loop.runUntilComplete(main())).toBe(true);
    const fut = loop.createFuture();
    expect(() => asCompleted(fut as unknown as Iterable<Future<unknown>>)).toThrow(
      new TypeError('expects an iterable of awaitables, not Future'),
    );
    expect(() => asCompleted(numCoro() as unknown as Iterable<Future<unknown>>)).toThrow(
      new TypeError('expects an iterable of awaitables, not coroutine'),
    );
  });

  it('needs a loop for coroutines', () => {
    expect(() => asCompleted([numCoro()])).toThrow(new RuntimeError("There is no current event loop in thread 'MainThread'."));
  });

  it('ends at once for no inputs', () => {
    setEventLoop(loop);
    expect([...asCompleted([])]).toEqual([]);
  });
});

/**
 * The `for await` form of `it`, typed as such: TypeScript types `for await` over the iterator
 * itself from its `for...of` form once this file has checked that form (see CompletedInput).
 */
function inputsOf<T>(it: AsCompletedIterator<T>): AsyncIterable<CompletedInput<T>> {
  return it;
}

/** Run the async function `body` as the loop runs: a coroutine awaiting its Promise. */
function* awaitAsync<T>(body: () => Promise<T>): Coroutine<T> {
  return yield* ensureFuture(body());
}

/** The three ways to iterate asCompleted, each collecting what `use` makes of every completion. */
const forms = {
  /** for...of, awaiting each Future: the outcomes. */
  *plain<T>(it: AsCompletedIterator<T>, use: (value: T) => unknown, limit = Infinity): Coroutine<unknown[]> {
    const out: unknown[] = [];
    for (const next of it) {
      out.push(use(yield* next));
      if (out.length === limit) break;
    }
    return out;
  },
  /** for await in an async function: the inputs, whose results are read. */
  *async<T>(it: AsCompletedIterator<T>, use: (value: T) => unknown, limit = Infinity): Coroutine<unknown[]> {
    return yield* awaitAsync(async () => {
      const out: unknown[] = [];
      for await (const input of inputsOf(it)) {
        out.push(use(input.result()));
        if (out.length === limit) break;
      }
      return out;
    });
  },
  /** originals() in a coroutine: the inputs, whose results are read. */
  *originals<T>(it: AsCompletedIterator<T>, use: (value: T) => unknown, limit = Infinity): Coroutine<unknown[]> {
    const out: unknown[] = [];
    for (const next of it.originals()) {
      out.push(use((yield* next).result()));
      if (out.length === limit) break;
    }
    return out;
  },
};
const formNames = Object.keys(forms) as Array<keyof typeof forms>;

describe('asCompleted as in asyncio 3.13 (test_tasks)', () => {
  it.each(formNames)('test_as_completed: completion order (%s)', async (form) => {
    function* main(): Coroutine<unknown[]> {
      return yield* forms[form](asCompleted([delayed('b', 0.01), delayed('c', 0.15), delayed('a', 0.01)]), (v) => v);
    }
    const res = await loop.runUntilComplete(main());
    expect(res.slice(0, 2).sort()).toEqual(['a', 'b']);
    expect(res[2]).toBe('c');
  });

  it.each(['async', 'originals'] as const)('test_as_completed_same_tasks_in_as_out: the inputs themselves, Tasks made for coroutines (%s)', async (form) => {
    function* coro<T>(value: T): Coroutine<T> {
      return value;
    }
    function* collect(aws: Array<Coroutine<string> | Future<string>>): Coroutine<Array<Future<string>>> {
      const it = asCompleted(aws);
      if (form === 'originals') {
        const out: Array<Future<string>> = [];
        for (const next of it.originals()) out.push(yield* next);
        return out;
      }
      return yield* awaitAsync(async () => {
        const out: Array<Future<string>> = [];
        for await (const input of inputsOf(it)) out.push(input as Future<string>);
        return out;
      });
    }
    function* main(): Coroutine<boolean[]> {
      const coros = [coro('0'), coro('1')];
      const out = yield* collect(coros);
      const taskB = createTask(coro('b'));
      const taskD = createTask(coro('d'));
      const mixed = yield* collect([coro('a'), taskB, coro('c'), taskD]);
      return [
        out.length === 2 && out.every((f) => f instanceof Future && !(coros as unknown[]).includes(f)),
        mixed.length === 4 && mixed.filter((f) => f === taskB || f === taskD).length === 2,
        mixed.every((f) => f.done()),
      ];
    }
    expect(await loop.runUntilComplete(main())).toEqual([true, true, true]);
  });

  it('test_as_completed_with_timeout (plain): the first awaited after the timeout raises TimeoutError', async () => {
    function* main(): Coroutine<unknown[]> {
      const a = createTask(sleep(0.1, 'a'));
      const b = createTask(sleep(0.15, 'b'));
      const values: unknown[] = [];
      for (const next of asCompleted([a, b], { timeout: 0.12 })) {
        try {
          values.push([1, yield* next]);
        } catch (error) {
          values.push([2, (error as Error).name, loop.time()]);
        }
      }
      yield* wait([a, b]);
      return values;
    }
    expect(await loop.runUntilComplete(main())).toEqual([
      [1, 'a'],
      [2, 'TimeoutError', 0.12],
    ]);
  });

  it.each(['async', 'originals'] as const)('test_as_completed_with_timeout: the iteration itself raises TimeoutError (%s)', async (form) => {
    function* main(): Coroutine<unknown[]> {
      const a = createTask(sleep(0.1, 'a'));
      const b = createTask(sleep(0.15, 'b'));
      const values: unknown[] = [];
      try {
        yield* forms[form](asCompleted([a, b], { timeout: 0.12 }), (v) => values.push([1, v]));
      } catch (error) {
        values.push([2, (error as Error).name]);
      }
      yield* wait([a, b]);
      return [...values, b.result()];
    }
    expect(await loop.runUntilComplete(main())).toEqual([[1, 'a'], [2, 'TimeoutError'], 'b']);
  });

  it.each(formNames)('test_as_completed_with_unused_timeout (%s)', async (form) => {
    function* main(): Coroutine<unknown[]> {
      return yield* forms[form](asCompleted([sleep(0.01, 'a')], { timeout: 1 }), (v) => v);
    }
    expect(await loop.runUntilComplete(main())).toEqual(['a']);
  });

  it.each(formNames)('test_as_completed_resume_iterator: a loop broken off resumes where it stopped (%s)', async (form) => {
    function* coro(i: number): Coroutine<number> {
      return i;
    }
    function* main(): Coroutine<unknown[]> {
      const it = asCompleted([coro(0), coro(1), coro(2), coro(3)]);
      const first = yield* forms[form](it, (v) => v, 2);
      const rest = yield* forms[form](it, (v) => v);
      return [first.length, [...first, ...rest].sort()];
    }
    expect(await loop.runUntilComplete(main())).toEqual([2, [0, 1, 2, 3]]);
  });

  it('test_as_completed_reverse_wait: the first Future awaited takes the first completion', async () => {
    function* main(): Coroutine<unknown[]> {
      const futs = [...asCompleted([sleep(0.05, 'a'), sleep(0.1, 'b')])];
      const x = yield* futs[1]!;
      const at = loop.time();
      const y = yield* futs[0]!;
      return [futs.length, x, at, y, loop.time()];
    }
    expect(await loop.runUntilComplete(main())).toEqual([2, 'a', 0.05, 'b', 0.1]);
  });

  it.each(['plain', 'async'] as const)('test_as_completed_concurrent: the Futures handed out can be awaited together (%s)', async (form) => {
    function* main(): Coroutine<string[]> {
      const it = asCompleted([sleep(0.05, 'a'), sleep(0.05, 'b')]);
      const futs: Array<Future<string>> = form === 'plain' ? [...it] : yield* awaitAsync(async () => {
        const inputs: Array<Future<string>> = [];
        for await (const input of inputsOf(it)) inputs.push(input as Future<string>);
        return inputs;
      });
      const [done] = yield* wait(futs.map((f) => ensureFuture(f)));
      return [...done].map((f) => f.result()).sort();
    }
    expect(await loop.runUntilComplete(main())).toEqual(['a', 'b']);
  });

  it.each(formNames)('test_as_completed_duplicate_coroutines (%s)', async (form) => {
    function* coro(value: string): Coroutine<string> {
      return value;
    }
    function* main(): Coroutine<unknown[]> {
      const c = coro('ham');
      return (yield* forms[form](asCompleted([c, c, coro('spam')]), (v) => v)).sort();
    }
    expect(await loop.runUntilComplete(main())).toEqual(['ham', 'spam']);
  });

  it('test_as_completed_invalid_args: the async form refuses a single Future or coroutine too', async () => {
    const fut = loop.createFuture();
    const coro = numCoro();
    function* main(): Coroutine<unknown[]> {
      return [
        yield* awaitAsync(async () => {
          try {
            for await (const f of asCompleted(fut as never)) return f;
          } catch (error) {
            return error;
          }
        }),
        yield* awaitAsync(async () => {
          try {
            for await (const f of asCompleted(coro as never)) return f;
          } catch (error) {
            return error;
          }
        }),
      ];
    }
    const [a, b] = await loop.runUntilComplete(main());
    expect(a).toEqual(new TypeError('expects an iterable of awaitables, not Future'));
    expect(b).toEqual(new TypeError('expects an iterable of awaitables, not coroutine'));
    coro.return(1);
  });

  it('the three forms share one count of completions', async () => {
    function* main(): Coroutine<unknown[]> {
      const it = asCompleted([sleep(0.1, 'a'), sleep(0.2, 'b'), sleep(0.3, 'c')]);
      const first = yield* it.next().value!;
      const second = (yield* it.originals().next().value!).result();
      const third = yield* awaitAsync(async () => {
        const out: string[] = [];
        for await (const input of inputsOf(it)) out.push(input.result());
        return out;
      });
      return [first, second, third, it.next().done];
    }
    expect(await loop.runUntilComplete(main())).toEqual(['a', 'b', ['c'], true]);
  });
});
