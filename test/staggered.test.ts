import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ExceptionGroup,
  KeyboardInterrupt,
  RuntimeError,
  TimeoutError,
  allTasks,
  currentTask,
  sleep,
  type Coroutine,
  type Future,
} from '../src/index.js';
import { staggeredRace } from '../src/staggered.js';
import { timeout } from '../src/timeouts.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
const { run } = useFreshLoop(() => (loop = new VirtualLoop()));

/** A log of attempts: when each started, and how it ended. */
function recorder(log: string[]) {
  return function* attempt<T>(name: string, seconds: number, outcome: { value: T } | { error: Error }): Coroutine<T> {
    log.push(`${name} start ${loop.time()}`);
    try {
      yield* sleep(seconds);
    } catch (e) {
      log.push(`${name} ${(e as Error).name} ${loop.time()}`);
      throw e;
    }
    log.push(`${name} end ${loop.time()}`);
    if ('error' in outcome) throw outcome.error;
    return outcome.value;
  };
}

describe('staggeredRace', () => {
  it('returns nulls and no exceptions for no coroutine functions', async () => {
    expect(await run(staggeredRace([], null))).toEqual([null, null, []]);
    expect(loop.time()).toBe(0);
  });

  it('returns the first success and starts nothing more', async () => {
    const calls: number[] = [];
    function* coro(index: number): Coroutine<string> {
      calls.push(index);
      yield* sleep(0);
      return `Res: ${index}`;
    }
    expect(await run(staggeredRace([() => coro(0), () => coro(1)], null))).toEqual(['Res: 0', 0, [null]]);
    expect(calls).toEqual([0]);
  });

  it('starts the next at once when the previous fails', async () => {
    const log: string[] = [];
    const attempt = recorder(log);
    const failure = new RangeError('first');
    const result = await run(
      staggeredRace([() => attempt('a', 0.5, { error: failure }), () => attempt('b', 0.25, { value: 'Res: 1' })], null),
    );
    expect(result).toEqual(['Res: 1', 1, [failure, null]]);
    expect(result[2][0]).toBe(failure);
    expect(log).toEqual(['a start 0', 'a end 0.5', 'b start 0.5', 'b end 0.75']);
  });

  it('starts the next after the delay and cancels the slow one when the next wins', async () => {
    const log: string[] = [];
    const attempt = recorder(log);
    const [winner, index, errors] = await run(
      staggeredRace([() => attempt('a', 10, { value: 'slow' }), () => attempt('b', 0, { value: 'Res: 1' })], 0.25),
    );
    expect([winner, index]).toEqual(['Res: 1', 1]);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toBeInstanceOf(CancelledError);
    expect(errors[1]).toBeNull();
    expect(log).toEqual(['a start 0', 'b start 0.25', 'b end 0.25', 'a CancelledError 0.25']);
    expect(loop.time()).toBe(0.25);
  });

  it('returns every error when all fail', async () => {
    function* coro(index: number): Coroutine<never> {
      yield* sleep(0);
      throw new RangeError(`bad ${index}`);
    }
    const [winner, index, errors] = await run(staggeredRace([() => coro(0), () => coro(1)], null));
    expect([winner, index]).toEqual([null, null]);
    expect(errors.map((e) => e?.message)).toEqual(['bad 0', 'bad 1']);
    expect(errors.every((e) => e instanceof RangeError)).toBe(true);
  });

  it('staggers the starts by the delay or by the failures, whichever comes first', async () => {
    const log: string[] = [];
    const attempt = recorder(log);
    const fns = [
      () => attempt('a', 2, { error: new RangeError('a') }),
      () => attempt('b', 0.25, { error: new RangeError('b') }),
      () => attempt('c', 3, { value: 'c' }),
      () => attempt('d', 1, { value: 'd' }),
    ];
    const [winner, index, errors] = await run(staggeredRace(fns, 1));
    expect([winner, index]).toEqual(['d', 3]);
    expect(errors.map((e) => e?.name ?? null)).toEqual(['RangeError', 'RangeError', 'CancelledError', null]);
    expect(log).toEqual([
      'a start 0',
      'b start 1',
      'b end 1.25',
      'c start 1.25',
      'a end 2',
      'd start 2.25',
      'd end 3.25',
      'c CancelledError 3.25',
    ]);
  });

  it('runs the attempts one after the other when the delay is null', async () => {
    const log: string[] = [];
    const attempt = recorder(log);
    const fns = [
      () => attempt('a', 1, { error: new RangeError('a') }),
      () => attempt('b', 2, { error: new RangeError('b') }),
      () => attempt('c', 4, { error: new RangeError('c') }),
    ];
    const [winner, index, errors] = await run(staggeredRace(fns, null));
    expect([winner, index, errors.map((e) => e?.message)]).toEqual([null, null, ['a', 'b', 'c']]);
    expect(log).toEqual(['a start 0', 'a end 1', 'b start 1', 'b end 3', 'c start 3', 'c end 7']);
    expect(loop.time()).toBe(7);
  });

  it('starts every attempt at once with a zero delay', async () => {
    const log: string[] = [];
    const attempt = recorder(log);
    const result = await run(
      staggeredRace([() => attempt('a', 1, { value: 'slow' }), () => attempt('b', 0.5, { value: 'fast' })], 0),
    );
    expect(result[0]).toBe('fast');
    expect(result[1]).toBe(1);
    expect(result[2][0]).toBeInstanceOf(CancelledError);
    expect(log).toEqual(['a start 0', 'b start 0', 'b end 0.5', 'a CancelledError 0.5']);
  });

  it('records a coroutine function that throws before returning a coroutine and moves on', async () => {
    const log: string[] = [];
    const attempt = recorder(log);
    const bad = new RangeError('no coroutine');
    const result = await run(
      staggeredRace(
        [
          () => {
            throw bad;
          },
          () => attempt('b', 0.5, { value: 'b' }),
        ],
        10,
      ),
    );
    expect(result).toEqual(['b', 1, [bad, null]]);
    expect(log).toEqual(['b start 0', 'b end 0.5']);
  });

  it('picks the first of several coroutines woken together and cancels the rest', async () => {
    let event: Future<void> | null = null;
    function* coro(index: number): Coroutine<number> {
      yield* event as Future<void>;
      return index;
    }
    function* doSet(): Coroutine<number> {
      (event as Future<void>).setResult(undefined);
      yield* loop.createFuture<void>();
      return -1;
    }
    function* main(): Coroutine<unknown[]> {
      event = loop.createFuture<void>();
      const [winner, index, errors] = yield* staggeredRace([() => coro(0), () => coro(1), doSet], 0.1);
      const leftover = [...allTasks()].filter((t) => t !== currentTask());
      return [winner, index, errors.map((e) => (e === null ? null : e.name)), leftover.length, loop.time()];
    }
    expect(await run(main())).toEqual([0, 0, [null, 'CancelledError', 'CancelledError'], 0, 0.2]);
  });

  it('cancels and awaits every attempt when cancelled, then raises CancelledError', async () => {
    const log: string[] = [];
    const attempt = recorder(log);
    function* main(): Coroutine<unknown[]> {
      const race = loop.createTask(
        staggeredRace([() => attempt('a', 10, { value: 'a' }), () => attempt('b', 10, { value: 'b' })], 0.5),
      );
      yield* sleep(0.75);
      race.cancel('enough');
      try {
        yield* race;
      } catch (e) {
        return [(e as Error).name, (e as Error).message, race.cancelled(), loop.time()];
      }
      return [];
    }
    expect(await run(main())).toEqual(['CancelledError', 'enough', true, 0.75]);
    expect(log).toEqual(['a start 0', 'b start 0.5', 'a CancelledError 0.75', 'b CancelledError 0.75']);
  });

  it('passes the cancel message on to the attempts', async () => {
    const messages: string[] = [];
    function* attempt(): Coroutine<void> {
      try {
        yield* sleep(10);
      } catch (e) {
        messages.push((e as Error).message);
        throw e;
      }
    }
    function* main(): Coroutine<void> {
      const race = loop.createTask(staggeredRace([attempt, attempt], 1));
      yield* sleep(2);
      race.cancel('shutting down');
      try {
        yield* race;
      } catch {
        // expected
      }
    }
    await run(main());
    expect(messages).toEqual(['shutting down', 'shutting down']);
  });

  it('ends in the cancellations of the surrounding timeouts as asyncio does', async () => {
    const log: string[] = [];
    function* main(): Coroutine<unknown> {
      try {
        yield* timeout(null).run((outer) =>
          timeout(null).run(function* (inner) {
            function* coroFn(): Coroutine<void> {
              inner.reschedule(-1);
              yield* sleep(0);
              try {
                yield* sleep(0);
              } catch (e) {
                if (!(e instanceof CancelledError)) throw e;
                log.push('cancelled 1');
              }
              outer.reschedule(-1);
              yield* sleep(0);
              try {
                yield* sleep(0);
              } catch (e) {
                if (!(e instanceof CancelledError)) throw e;
                log.push('cancelled 2');
              }
            }
            try {
              yield* staggeredRace([coroFn], null);
            } catch (e) {
              if (e instanceof CancelledError) log.push('cancelled 3');
              throw e;
            }
          }),
        );
      } catch (e) {
        return e;
      }
      return null;
    }
    const error = await run(main());
    expect(error).toBeInstanceOf(TimeoutError);
    expect(log).toEqual(['cancelled 1', 'cancelled 2', 'cancelled 3']);
  });

  it('raises an ExceptionGroup when the iteration of coroutine functions fails', async () => {
    const broken = new RangeError('iterator broke');
    function* fns(): Generator<() => Coroutine<string>, void, unknown> {
      yield function* first(): Coroutine<string> {
        yield* sleep(0);
        throw new RangeError('first failed');
      };
      throw broken;
    }
    function* main(): Coroutine<unknown> {
      try {
        yield* staggeredRace(fns(), null);
      } catch (e) {
        return e;
      }
      return null;
    }
    const error = (await run(main())) as ExceptionGroup;
    expect(error).toBeInstanceOf(ExceptionGroup);
    expect(error.message).toBe('staggered race failed');
    expect(error.exceptions).toEqual([broken]);
  });

  it('fails when a cancelled attempt swallows its cancellation and returns', async () => {
    function* stubborn(): Coroutine<string> {
      try {
        yield* sleep(10);
      } catch {
        // swallows the cancellation
      }
      return 'late';
    }
    function* quick(): Coroutine<string> {
      yield* sleep(0);
      return 'quick';
    }
    function* main(): Coroutine<unknown> {
      try {
        yield* staggeredRace([stubborn, quick], 1);
      } catch (e) {
        return e;
      }
      return null;
    }
    const error = (await run(main())) as ExceptionGroup;
    expect(error).toBeInstanceOf(ExceptionGroup);
    expect(error.message).toBe('staggered race failed');
    expect(error.exceptions).toEqual([new RuntimeError('staggeredRace: attempt 0 returned after attempt 1 had won')]);
    expect(error.exceptions[0]).toBeInstanceOf(RuntimeError);
  });

  it('lets KeyboardInterrupt from an attempt escape the loop and then the race', async () => {
    const interrupt = new KeyboardInterrupt();
    function* attempt(): Coroutine<string> {
      yield* sleep(0.5);
      throw interrupt;
    }
    const race = loop.createTask(staggeredRace([attempt], 1));
    await expect(loop.runUntilComplete(race)).rejects.toBe(interrupt);
    expect([race.done(), loop.time()]).toEqual([false, 0.5]);
    // Run on: the race waits for its other attempt (which finds no more functions after the
    // delay), then raises the interrupt as itself.
    await expect(loop.runUntilComplete(race)).rejects.toBe(interrupt);
    expect(race.exception()).toBe(interrupt);
    expect(loop.time()).toBe(1);
  });

  it('rejects a bad delay or a non-iterable argument', async () => {
    function* main(): Coroutine<unknown[]> {
      const errors: unknown[] = [];
      for (const [fns, delay] of [
        [[], '1'],
        [[], Number.NaN],
        [5, null],
      ] as const) {
        try {
          yield* staggeredRace(fns as never, delay as never);
        } catch (e) {
          errors.push(e);
        }
      }
      return errors;
    }
    const [badDelay, nan, notIterable] = await run(main());
    expect(badDelay).toEqual(new TypeError('delay must be a number or null, got string'));
    expect(badDelay).toBeInstanceOf(TypeError);
    expect(nan).toEqual(new RangeError('Invalid delay: NaN (not a number)'));
    expect(nan).toBeInstanceOf(RangeError);
    expect(notIterable).toEqual(new TypeError('coroFns must be an iterable of coroutine functions, got 5'));
  });
});
