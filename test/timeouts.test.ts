import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ExceptionGroup,
  RuntimeError,
  TimeoutError,
  sleep,
  type Coroutine,
} from '../src/index.js';
import { TaskGroup } from '../src/taskgroups.js';
import { type Timeout, timeout, timeoutAt } from '../src/timeouts.js';
import { raisedBy, self } from './helpers/coroutines.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

class ZeroDivisionError extends Error {
  override name = 'ZeroDivisionError';
}

let loop: VirtualLoop;
const { run } = useFreshLoop(() => (loop = new VirtualLoop()));

describe('timeout', () => {
  it('cancels the body at the deadline and raises TimeoutError caused by its CancelledError', async () => {
    let seen: unknown = null;
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(0.01);
      const error = yield* raisedBy(() =>
        cm.run(function* () {
          try {
            yield* sleep(10);
          } catch (e) {
            seen = e;
            throw e;
          }
        }),
      );
      return [error, cm.expired(), cm.when(), loop.time(), self().cancelling()];
    }
    const [error, expired, when, time, cancelling] = await run(main());
    expect(seen).toBeInstanceOf(CancelledError);
    expect(error).toBeInstanceOf(TimeoutError);
    expect((error as TimeoutError).message).toBe('');
    expect((error as TimeoutError).cause).toBe(seen);
    expect([expired, when, time, cancelling]).toEqual([true, 0.01, 0.01, 0]);
  });

  it('leaves the enclosing task uncancelled after the scope expired', async () => {
    function* main(): Coroutine<string> {
      try {
        yield* timeout(0.5).run(function* () {
          yield* sleep(10);
        });
      } catch (e) {
        if (!(e instanceof TimeoutError)) throw e;
      }
      yield* sleep(1);
      return `done at ${loop.time()}`;
    }
    const task = loop.createTask(main());
    await expect(loop.runUntilComplete(task)).resolves.toBe('done at 1.5');
    expect(task.cancelled()).toBe(false);
    expect(task.cancelling()).toBe(0);
  });

  it('returns the body result when the deadline is not reached', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(10);
      const value = yield* cm.run(function* () {
        yield* sleep(0.01);
        return 42;
      });
      return [value, cm.expired(), cm.when(), loop.time(), String(cm)];
    }
    expect(await run(main())).toEqual([42, false, 10, 0.01, '<Timeout [finished]>']);
  });

  it('drops the deadline timer on exit so the task is not cancelled later', async () => {
    function* main(): Coroutine<number> {
      yield* timeout(1).run(function* () {
        yield* sleep(0.5);
      });
      yield* sleep(2);
      return loop.time();
    }
    expect(await run(main())).toBe(2.5);
  });

  it('never fires when disabled with null', async () => {
    function* main(): Coroutine<unknown[]> {
      const a = timeout(null);
      const b = timeoutAt(null);
      yield* a.run(function* () {
        yield* b.run(function* () {
          yield* sleep(3600);
        });
      });
      return [a.when(), b.when(), a.expired(), b.expired(), loop.time()];
    }
    expect(await run(main())).toEqual([null, null, false, false, 3600]);
  });

  it('throws RuntimeError without a running loop', () => {
    expect(() => timeout(1)).toThrow(new RuntimeError('no running event loop'));
  });

  it('rejects a delay that is not a number or null', async () => {
    function* main(): Coroutine<unknown[]> {
      const errors: unknown[] = [];
      for (const bad of ['1', undefined, Number.NaN]) {
        try {
          timeout(bad as number);
        } catch (e) {
          errors.push(e);
        }
      }
      return errors;
    }
    const [str, undef, nan] = await run(main());
    expect(str).toEqual(new TypeError('delay must be a number or null, got string'));
    expect(undef).toEqual(new TypeError('delay must be a number or null, got undefined'));
    expect(nan).toEqual(new RangeError('Invalid delay: NaN (not a number)'));
    expect(str).toBeInstanceOf(TypeError);
    expect(nan).toBeInstanceOf(RangeError);
  });
});

describe('timeoutAt', () => {
  it('expires at the absolute loop time', async () => {
    function* main(): Coroutine<unknown[]> {
      yield* sleep(1);
      const cm = timeoutAt(loop.time() + 0.25);
      const error = yield* raisedBy(() => cm.run(() => sleep(10)));
      return [error instanceof TimeoutError, cm.when(), loop.time(), cm.expired()];
    }
    expect(await run(main())).toEqual([true, 1.25, 1.25, true]);
  });

  it('needs no running loop to build the scope', () => {
    const cm = timeoutAt(5);
    expect(cm.when()).toBe(5);
    expect(String(cm)).toBe('<Timeout [created]>');
  });
});

describe('Timeout with a zero or past deadline', () => {
  it('fires with timeout(0) around a long sleep without advancing the clock', async () => {
    function* main(): Coroutine<unknown[]> {
      const t0 = loop.time();
      const cm = timeout(0);
      const error = yield* raisedBy(() => cm.run(() => sleep(10)));
      return [error instanceof TimeoutError, cm.expired(), cm.when(), t0, loop.time()];
    }
    expect(await run(main())).toEqual([true, true, 0, 0, 0]);
  });

  it('fires with timeout(0) around sleep(0)', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(0);
      const error = yield* raisedBy(() => cm.run(() => sleep(0)));
      return [error instanceof TimeoutError, cm.expired()];
    }
    expect(await run(main())).toEqual([true, true]);
  });

  it('fires with a deadline in the past around sleep(0)', async () => {
    function* main(): Coroutine<unknown[]> {
      yield* sleep(20);
      const t0 = loop.time();
      const cm = timeout(-11);
      const error = yield* raisedBy(() => cm.run(() => sleep(0)));
      return [error instanceof TimeoutError, cm.expired(), cm.when(), t0];
    }
    expect(await run(main())).toEqual([true, true, 9, 20]);
  });

  it('lets a body that never waits finish before the expiry callback runs', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(0);
      const value = yield* cm.run(function* () {
        return 'no wait';
      });
      yield* sleep(0);
      return [value, cm.expired(), String(cm), self().cancelling()];
    }
    expect(await run(main())).toEqual(['no wait', false, '<Timeout [finished]>', 0]);
  });

  it('delivers the expiry before the next step of the task', async () => {
    const log: string[] = [];
    function* main(): Coroutine<void> {
      loop.callSoon(() => log.push('queued before'));
      try {
        yield* timeout(0).run(function* () {
          log.push('body');
          try {
            yield;
          } catch (e) {
            log.push(`body got ${(e as Error).name}`);
            throw e;
          }
          log.push('not reached');
        });
      } catch (e) {
        log.push((e as Error).name);
      }
    }
    await run(main());
    expect(log).toEqual(['body', 'queued before', 'body got CancelledError', 'TimeoutError']);
  });
});

describe('Timeout.reschedule', () => {
  it('moves the deadline later so the body finishes', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(1);
      yield* cm.run(function* (scope) {
        yield* sleep(0.5);
        scope.reschedule(loop.time() + 2);
        yield* sleep(1.5);
      });
      return [cm.expired(), cm.when(), loop.time()];
    }
    expect(await run(main())).toEqual([false, 2.5, 2]);
  });

  it('moves the deadline earlier', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(10);
      const error = yield* raisedBy(() =>
        cm.run(function* (scope) {
          scope.reschedule(3);
          yield* sleep(10);
        }),
      );
      return [error instanceof TimeoutError, cm.when(), loop.time()];
    }
    expect(await run(main())).toEqual([true, 3, 3]);
  });

  it('disables the deadline with null', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(1);
      yield* cm.run(function* (scope) {
        scope.reschedule(null);
        expect(String(scope)).toBe('<Timeout [active] when=null>');
        yield* sleep(100);
      });
      return [cm.expired(), cm.when(), loop.time()];
    }
    expect(await run(main())).toEqual([false, null, 100]);
  });

  it('fires on the next iteration when moved into the past', async () => {
    function* main(): Coroutine<unknown[]> {
      yield* sleep(5);
      const cm = timeout(10);
      const error = yield* raisedBy(() =>
        cm.run(function* (scope) {
          scope.reschedule(-1);
          yield* sleep(10);
        }),
      );
      return [error instanceof TimeoutError, cm.when(), loop.time()];
    }
    expect(await run(main())).toEqual([true, -1, 5]);
  });
});

describe('Timeout and foreign errors', () => {
  it('passes an error of the body through unchanged', async () => {
    const boom = new RangeError('boom');
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(10);
      const error = yield* raisedBy(() =>
        cm.run(function* () {
          yield* sleep(0.1);
          throw boom;
        }),
      );
      return [error, cm.expired(), String(cm)];
    }
    expect(await run(main())).toEqual([boom, false, '<Timeout [finished]>']);
  });

  it('lets a foreign cancellation through as CancelledError', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(10);
      const error = yield* raisedBy(() =>
        cm.run(function* () {
          self().cancel();
          yield* sleep(1);
        }),
      );
      return [error instanceof CancelledError, error instanceof TimeoutError, cm.expired(), self().uncancel()];
    }
    expect(await run(main())).toEqual([true, false, false, 0]);
  });

  it('keeps CancelledError for a self-cancel after an earlier swallowed cancellation', async () => {
    function* main(): Coroutine<unknown[]> {
      try {
        self().cancel();
        yield* sleep(1);
      } catch (e) {
        if (!(e instanceof CancelledError)) throw e;
      }
      const levels = [self().cancelling()];
      const cm = timeout(1);
      const error = yield* raisedBy(() =>
        cm.run(function* () {
          self().cancel();
          yield* sleep(2);
        }),
      );
      levels.push(self().cancelling());
      return [error instanceof CancelledError, cm.expired(), ...levels];
    }
    expect(await run(main())).toEqual([true, false, 1, 2]);
  });

  it('keeps CancelledError when a zero timeout and a self-cancel race after an earlier cancellation', async () => {
    function* main(): Coroutine<unknown[]> {
      try {
        self().cancel();
        yield* sleep(1);
      } catch {
        // swallowed, cancelling() stays 1
      }
      const cm = timeout(0);
      const error = yield* raisedBy(() =>
        cm.run(function* () {
          self().cancel();
          yield* sleep(2);
        }),
      );
      return [error instanceof CancelledError, cm.expired(), self().cancelling(), loop.time()];
    }
    expect(await run(main())).toEqual([true, true, 2, 0]);
  });

  it('does not lose an external cancel that lands in the same iteration as the expiry', async () => {
    let scope: Timeout | null = null;
    let seen: unknown = null;
    function* body(): Coroutine<void> {
      scope = timeout(1);
      try {
        yield* scope.run(() => sleep(10));
      } catch (e) {
        seen = e;
        throw e;
      }
    }
    function* main(): Coroutine<unknown[]> {
      const task = loop.createTask(body());
      loop.callAt(1, () => task.cancel());
      try {
        yield* task;
      } catch (e) {
        return [e instanceof CancelledError, task.cancelled(), loop.time()];
      }
      return [];
    }
    expect(await run(main())).toEqual([true, true, 1]);
    expect(seen).toBeInstanceOf(CancelledError);
    expect((scope as Timeout | null)?.expired()).toBe(true);
  });
});

describe('Timeout nesting', () => {
  it('lets an inner scope expire inside a longer outer one', async () => {
    function* main(): Coroutine<unknown[]> {
      const outer = timeout(10);
      const inner = timeout(1);
      const value = yield* outer.run(function* () {
        const error = yield* raisedBy(() => inner.run(() => sleep(5)));
        yield* sleep(2);
        return error instanceof TimeoutError;
      });
      return [value, inner.expired(), outer.expired(), loop.time(), self().cancelling()];
    }
    expect(await run(main())).toEqual([true, true, false, 3, 0]);
  });

  it('passes the outer expiry through an inner scope that did not expire', async () => {
    let innerSaw: unknown = null;
    function* main(): Coroutine<unknown[]> {
      const outer = timeout(1);
      const inner = timeout(10);
      const error = yield* raisedBy(() =>
        outer.run(function* () {
          try {
            yield* inner.run(() => sleep(5));
          } catch (e) {
            innerSaw = e;
            throw e;
          }
        }),
      );
      return [error instanceof TimeoutError, inner.expired(), String(inner), outer.expired(), loop.time()];
    }
    expect(await run(main())).toEqual([true, false, '<Timeout [finished]>', true, 1]);
    expect(innerSaw).toBeInstanceOf(CancelledError);
  });

  it('converts at the outermost of two scopes expiring in the same iteration', async () => {
    let innerSaw: unknown = null;
    function* main(): Coroutine<unknown[]> {
      const outer = timeoutAt(1);
      const inner = timeoutAt(1);
      const error = yield* raisedBy(() =>
        outer.run(function* () {
          try {
            yield* inner.run(() => sleep(5));
          } catch (e) {
            innerSaw = e;
            throw e;
          }
        }),
      );
      return [error instanceof TimeoutError, (error as Error).cause === innerSaw, inner.expired(), outer.expired(), self().cancelling()];
    }
    expect(await run(main())).toEqual([true, true, true, true, 0]);
    expect(innerSaw).toBeInstanceOf(CancelledError);
  });
});

describe('Timeout exception chaining', () => {
  it('raises TimeoutError when the body fails and then waits in a finally block', async () => {
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        timeout(0.01).run(function* () {
          try {
            throw new ZeroDivisionError('division by zero');
          } finally {
            yield* sleep(1);
          }
        }),
      );
    }
    const error = await run(main());
    expect(error).toBeInstanceOf(TimeoutError);
    expect((error as Error).cause).toBeInstanceOf(CancelledError);
  });

  it('lets an error raised in cleanup during expiry propagate', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(0.01);
      const error = yield* raisedBy(() =>
        cm.run(function* () {
          try {
            yield* sleep(1);
          } finally {
            throw new ZeroDivisionError('division by zero');
          }
        }),
      );
      return [error, cm.expired(), self().cancelling()];
    }
    const [error, expired, cancelling] = await run(main());
    expect(error).toBeInstanceOf(ZeroDivisionError);
    expect((error as Error).cause).toBeUndefined();
    expect([expired, cancelling]).toEqual([true, 0]);
  });

  it('inserts a TimeoutError into the cause chain just before the CancelledError', async () => {
    let cancelled: unknown = null;
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        timeout(0.01).run(function* () {
          try {
            yield* sleep(1);
          } catch (e) {
            cancelled = e;
            const middle = new Error('cleanup failed', { cause: e });
            throw new ZeroDivisionError('division by zero', { cause: middle });
          }
        }),
      );
    }
    const error = (await run(main())) as Error;
    expect(error).toBeInstanceOf(ZeroDivisionError);
    const middle = error.cause as Error;
    expect(middle.message).toBe('cleanup failed');
    const inserted = middle.cause as Error;
    expect(inserted).toBeInstanceOf(TimeoutError);
    expect(inserted.message).toBe('');
    expect(inserted.cause).toBe(cancelled);
    expect(cancelled).toBeInstanceOf(CancelledError);
  });

  it('leaves the cause chain alone when the cancellation was not its own', async () => {
    let cancelled: unknown = null;
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        timeout(10).run(function* () {
          try {
            self().cancel();
            yield* sleep(1);
          } catch (e) {
            cancelled = e;
            throw new ZeroDivisionError('division by zero', { cause: e });
          }
        }),
      );
    }
    const error = (await run(main())) as Error;
    expect(error.cause).toBe(cancelled);
  });

  it('converts each of two nested scopes expiring one after the other in cleanup code', async () => {
    let first: unknown = null;
    let innerError: unknown = null;
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() =>
        timeout(0.01).run(function* () {
          try {
            yield* sleep(1);
          } catch (e) {
            first = e;
            throw e;
          } finally {
            innerError = yield* raisedBy(() => timeout(0.01).run(() => sleep(10)));
          }
        }),
      );
    }
    const outerError = (await run(main())) as Error;
    expect(outerError).toBeInstanceOf(TimeoutError);
    expect(outerError.cause).toBe(first);
    expect(innerError).toBeInstanceOf(TimeoutError);
    const second = (innerError as Error).cause;
    expect(second).toBeInstanceOf(CancelledError);
    expect(second).not.toBe(first);
    expect(loop.time()).toBe(0.02);
  });

  it('still raises TimeoutError for a zero timeout in cleanup after a cancellation', async () => {
    function* main(): Coroutine<unknown[]> {
      let error: unknown = null;
      try {
        self().cancel();
        yield* sleep(10);
      } catch (e) {
        if (!(e instanceof CancelledError)) throw e;
      } finally {
        error = yield* raisedBy(() => timeout(0).run(() => sleep(1)));
      }
      return [error instanceof TimeoutError, self().cancelling()];
    }
    expect(await run(main())).toEqual([true, 1]);
  });
});

describe('Timeout state machine', () => {
  it('refuses a second entry while active', async () => {
    function* main(): Coroutine<unknown> {
      const cm = timeout(10);
      return yield* cm.run(function* (scope) {
        return yield* raisedBy(() => scope.run(() => sleep(0)));
      });
    }
    expect(await run(main())).toEqual(new RuntimeError('Timeout has already been entered'));
  });

  it('refuses to be entered again after it finished', async () => {
    function* main(): Coroutine<unknown> {
      const cm = timeout(10);
      yield* cm.run(() => sleep(0));
      return yield* raisedBy(() => cm.run(() => sleep(0)));
    }
    const error = await run(main());
    expect(error).toBeInstanceOf(RuntimeError);
    expect((error as Error).message).toBe('Timeout has already been entered');
  });

  it('refuses reschedule before entry, after exit and after expiry', async () => {
    const created = timeoutAt(1);
    expect(() => created.reschedule(2)).toThrow(new RuntimeError('Timeout has not been entered'));
    function* main(): Coroutine<unknown[]> {
      const finished = timeout(10);
      yield* finished.run(() => sleep(0));
      const expired = timeout(0.1);
      yield* raisedBy(() => expired.run(() => sleep(1)));
      const errors: unknown[] = [];
      for (const scope of [finished, expired]) {
        try {
          scope.reschedule(100);
        } catch (e) {
          errors.push(e);
        }
      }
      return errors;
    }
    const [finishedError, expiredError] = await run(main());
    expect(finishedError).toEqual(new RuntimeError('Cannot change state of finished Timeout'));
    expect(expiredError).toEqual(new RuntimeError('Cannot change state of expired Timeout'));
    expect(expiredError).toBeInstanceOf(RuntimeError);
  });

  it('refuses reschedule while expiring', async () => {
    function* main(): Coroutine<unknown> {
      let error: unknown = null;
      const cm = timeout(0.1);
      yield* raisedBy(() =>
        cm.run(function* (scope) {
          try {
            yield* sleep(1);
          } finally {
            try {
              scope.reschedule(50);
            } catch (e) {
              error = e;
            }
          }
        }),
      );
      return error;
    }
    expect(await run(main())).toEqual(new RuntimeError('Cannot change state of expiring Timeout'));
  });

  it('must be entered inside a task, and stays not entered otherwise', async () => {
    const cm = timeoutAt(5);
    let error: unknown = null;
    loop.callSoon(() => {
      try {
        cm.run(() => sleep(0)).next();
      } catch (e) {
        error = e;
      }
      loop.stop();
    });
    await loop.runForever();
    expect(error).toEqual(new RuntimeError('Timeout should be used inside a task'));
    expect(error).toBeInstanceOf(RuntimeError);
    expect(String(cm)).toBe('<Timeout [created]>');
    expect(() => cm.reschedule(6)).toThrow(new RuntimeError('Timeout has not been entered'));
  });

  it('rejects a body that is not a function before entering', async () => {
    const cm = timeoutAt(5);
    function* main(): Coroutine<unknown> {
      return yield* raisedBy(() => cm.run(42 as never));
    }
    expect(await run(main())).toEqual(new TypeError('Timeout.run() expects a generator function, got 42'));
    expect(String(cm)).toBe('<Timeout [created]>');
  });

  it('leaves the scope when its coroutine is closed with return()', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(1);
      const scoped = cm.run(() => sleep(10));
      scoped.next();
      scoped.return(undefined);
      yield* sleep(2);
      return [String(cm), cm.expired(), loop.time()];
    }
    const task = loop.createTask(main());
    expect(await loop.runUntilComplete(task)).toEqual(['<Timeout [finished]>', false, 2]);
    expect(task.cancelling()).toBe(0);
  });
});

describe('Timeout repr', () => {
  it('shows the state and, while active, the deadline rounded to 3 places', async () => {
    function* main(): Coroutine<string[]> {
      const reprs: string[] = [];
      const active = timeoutAt(1.23456);
      reprs.push(String(active));
      yield* active.run(function* (scope) {
        reprs.push(String(scope));
        scope.reschedule(10);
        reprs.push(String(scope));
      });
      reprs.push(String(active));
      const expired = timeout(0.5);
      yield* raisedBy(() => expired.run(() => sleep(1)));
      reprs.push(String(expired));
      return reprs;
    }
    expect(await run(main())).toEqual([
      '<Timeout [created]>',
      '<Timeout [active] when=1.235>',
      '<Timeout [active] when=10.0>',
      '<Timeout [finished]>',
      '<Timeout [expired]>',
    ]);
  });

  it('shows a disabled deadline as null', async () => {
    function* main(): Coroutine<string> {
      return yield* timeout(null).run(function* (scope) {
        return String(scope);
      });
    }
    expect(await run(main())).toBe('<Timeout [active] when=null>');
  });
});

describe('Timeout swallowed cancellation', () => {
  it('exits quietly when the body swallows the expiry cancellation', async () => {
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(0.01);
      const inside = yield* cm.run(function* (scope) {
        try {
          yield* sleep(1);
        } catch (e) {
          if (!(e instanceof CancelledError)) throw e;
        }
        return [scope.expired(), self().cancelling(), String(scope)];
      });
      return [...inside, self().cancelling(), String(cm), loop.time()];
    }
    expect(await run(main())).toEqual([true, 1, '<Timeout [expiring]>', 0, '<Timeout [expired]>', 0.01]);
  });
});

describe('Timeout around a TaskGroup', () => {
  it('lets the group of child errors escape instead of a TimeoutError', async () => {
    const cancelledChildren: unknown[] = [];
    function* child(): Coroutine<void> {
      try {
        yield* sleep(2);
      } catch (e) {
        cancelledChildren.push(e);
        throw new ZeroDivisionError('division by zero', { cause: e });
      }
    }
    function* main(): Coroutine<unknown[]> {
      const cm = timeout(0.01);
      const error = yield* raisedBy(() =>
        cm.run(() =>
          new TaskGroup().run(function* (tg) {
            tg.createTask(child());
            try {
              throw new RangeError('body failed');
            } finally {
              yield* sleep(1);
            }
          }),
        ),
      );
      return [error, cm.expired(), loop.time(), self().cancelling()];
    }
    const [error, expired, time, cancelling] = await run(main());
    expect(error).toBeInstanceOf(ExceptionGroup);
    const group = error as ExceptionGroup;
    expect(group.message).toBe('unhandled errors in a TaskGroup');
    expect(group.exceptions).toHaveLength(1);
    const member = group.exceptions[0] as Error;
    expect(member).toBeInstanceOf(ZeroDivisionError);
    // The member's chain gets a TimeoutError in front of the child's CancelledError.
    expect(member.cause).toBeInstanceOf(TimeoutError);
    expect((member.cause as Error).cause).toBe(cancelledChildren[0]);
    expect(group.cause).toBeUndefined();
    expect([expired, time, cancelling]).toEqual([true, 0.01, 0]);
  });
});
