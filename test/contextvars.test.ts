import { describe, expect, it } from 'vitest';
import {
  Context,
  ContextVar,
  LookupError,
  RuntimeError,
  type Task,
  Token,
  copyContext,
  currentTask,
  createTask,
  getRunningLoop,
  sleep,
  type Coroutine,
  type ExceptionContext,
} from '../src/index.js';
import { expectThrow, thrownBy } from './helpers/errors.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop, runOnce } from './helpers/virtual-loop.js';

/**
 * Run `fn` in a fresh empty context, so that no test leaves values in the root context.
 * Each test also uses its own variables.
 */
function isolated<R>(fn: () => R): R {
  return new Context().run(fn);
}

describe('ContextVar.get', () => {
  it('throws LookupError naming the variable when it has no value and no default', () => {
    const request = new ContextVar<string>('request');
    expectThrow(() => request.get(), LookupError, "<ContextVar name='request'>");
  });

  it('falls back to the default given at construction, even an undefined one', () => {
    const level = new ContextVar('level', { default: 5 });
    expect(level.get()).toBe(5);
    const maybe = new ContextVar<string | undefined>('maybe', { default: undefined });
    expect(maybe.get()).toBeUndefined();
  });

  it('prefers the default argument over the default of the variable', () => {
    const level = new ContextVar('level', { default: 5 });
    expect(level.get(7)).toBe(7);
    const plain = new ContextVar<number>('plain');
    expect(plain.get(null)).toBeNull();
  });

  it('returns the value set in the current context over any default', () => {
    isolated(() => {
      const level = new ContextVar('level', { default: 5 });
      level.set(1);
      expect(level.get()).toBe(1);
      expect(level.get(7)).toBe(1);
    });
  });

  it('keeps undefined as a value once set', () => {
    isolated(() => {
      const maybe = new ContextVar<string | undefined>('maybe', { default: 'default' });
      maybe.set(undefined);
      expect(maybe.get()).toBeUndefined();
    });
  });

  it('has a name and a repr', () => {
    const request = new ContextVar<string>('request');
    expect(request.name).toBe('request');
    expect(String(request)).toBe("<ContextVar name='request'>");
  });

  it('refuses a name that is not a string', () => {
    expectThrow(() => new ContextVar(5 as never), TypeError, 'context variable name must be a str');
  });
});

describe('ContextVar.set and ContextVar.reset', () => {
  it('returns tokens that record the variable and the previous value', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      const first = request.set('a');
      expect(first).toBeInstanceOf(Token);
      expect(first.var).toBe(request);
      expect(first.oldValue).toBe(Token.MISSING);
      const second = request.set('b');
      expect(second.oldValue).toBe('a');
      expect(request.get()).toBe('b');
    });
  });

  it('restores the previous value, then no value at all', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      const first = request.set('a');
      const second = request.set('b');
      request.reset(second);
      expect(request.get()).toBe('a');
      request.reset(first);
      expect(request.get('none')).toBe('none');
      expect(copyContext().has(request)).toBe(false);
      expect(thrownBy(() => request.get())).toBeInstanceOf(LookupError);
    });
  });

  it('refuses a token used twice with RuntimeError', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      const token = request.set('a');
      request.reset(token);
      expectThrow(
        () => request.reset(token),
        RuntimeError,
        /^<Token.*var=<ContextVar name='request'>.*> has already been used once$/,
      );
    });
  });

  it('refuses a token of another variable with RangeError', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      const other = new ContextVar<string>('other');
      const token = other.set('x');
      expectThrow(
        () => request.reset(token as never),
        RangeError,
        /^<Token.*var=<ContextVar name='other'>.*> was created by a different ContextVar$/,
      );
      expect(other.get()).toBe('x');
    });
  });

  it('refuses a token made in another context with RangeError', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      const ctx = copyContext();
      const foreign = ctx.run(() => request.set('inside'));
      expectThrow(() => request.reset(foreign), RangeError, /^<Token.*> was created in a different Context$/);
      const local = request.set('outside');
      expectThrow(() => ctx.run(() => request.reset(local)), RangeError, /^<Token.*> was created in a different Context$/);
      expect(request.get()).toBe('outside');
      expect(ctx.get(request)).toBe('inside');
    });
  });

  it('refuses something that is not a token with TypeError', () => {
    const request = new ContextVar<string>('request');
    expect(thrownBy(() => request.reset({} as never))).toBeInstanceOf(TypeError);
  });
});

describe('Token as a scope (asyncio 3.14)', () => {
  it('resets to the default as a using scope ends (test_token_contextmanager_with_default)', () => {
    isolated(() => {
      const c = new ContextVar<number>('c', { default: 42 });
      {
        using _token = c.set(36);
        expect(c.get()).toBe(36);
      }
      expect(c.get()).toBe(42);
    });
  });

  it('removes a value the variable did not have (test_token_contextmanager_without_default)', () => {
    isolated(() => {
      const c = new ContextVar<number>('c');
      {
        using _token = c.set(36);
        expect(c.get()).toBe(36);
      }
      expectThrow(() => c.get(), LookupError, "<ContextVar name='c'>");
    });
  });

  it('resets when the scope ends with an error, and nested scopes unwind in order', () => {
    isolated(() => {
      const c = new ContextVar<string>('c', { default: 'none' });
      const seen: string[] = [];
      const error = thrownBy(() => {
        using _outer = c.set('outer');
        {
          using _inner = c.set('inner');
          seen.push(c.get());
        }
        seen.push(c.get());
        throw new RangeError('boom');
      });
      expect(error).toBeInstanceOf(RangeError);
      expect([...seen, c.get()]).toEqual(['inner', 'outer', 'none']);
    });
  });

  it('is Symbol.dispose, with reset()’s errors: a token used already, a token of another context', () => {
    isolated(() => {
      const c = new ContextVar<string>('c');
      const token = c.set('x');
      expect(token[Symbol.dispose]()).toBeUndefined();
      expectThrow(() => token[Symbol.dispose](), RuntimeError, /^<Token used var=<ContextVar name='c'>> has already been used once$/);
      const foreign = copyContext().run(() => c.set('y'));
      expectThrow(() => foreign[Symbol.dispose](), RangeError, /^<Token var=<ContextVar name='c'>> was created in a different Context$/);
    });
  });
});

describe('Context', () => {
  it('starts empty', () => {
    const request = new ContextVar<string>('request');
    const ctx = new Context();
    expect(ctx.size).toBe(0);
    expect(ctx.has(request)).toBe(false);
    expect(ctx.get(request)).toBeUndefined();
    expect(ctx.get(request, 'fallback')).toBe('fallback');
    expect([...ctx.keys()]).toEqual([]);
  });

  it('runs a function with its arguments inside the context and returns its result', () => {
    const ctx = new Context();
    expect(ctx.run((a: number, b: number) => a + b, 1, 2)).toBe(3);
  });

  it('keeps changes made inside run() in that context only', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      request.set('outer');
      const ctx = copyContext();
      ctx.run(() => {
        expect(request.get()).toBe('outer');
        request.set('inner');
        expect(request.get()).toBe('inner');
      });
      expect(request.get()).toBe('outer');
      expect(ctx.get(request)).toBe('inner');
      expect(ctx.has(request)).toBe(true);
      expect([...ctx.keys()]).toEqual([request]);
      expect(ctx.size).toBe(1);
      ctx.run(() => expect(request.get()).toBe('inner'));
    });
  });

  it('restores the previous context when the function throws', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      request.set('outer');
      const ctx = new Context();
      const error = new RangeError('inside');
      expect(
        thrownBy(() =>
          ctx.run(() => {
            request.set('inner');
            throw error;
          }),
        ),
      ).toBe(error);
      expect(request.get()).toBe('outer');
      expect(ctx.run(() => request.get())).toBe('inner');
    });
  });

  it('refuses to enter a context that is already entered, and stays usable', () => {
    const ctx = new Context();
    expectThrow(() => ctx.run(() => ctx.run(() => 0)), RuntimeError, /^cannot enter context: .* is already entered$/);
    expect(ctx.run(() => 1)).toBe(1);
  });

  it('nests different contexts', () => {
    const request = new ContextVar<string>('request');
    const a = new Context();
    const b = new Context();
    const seen = a.run(() => {
      request.set('a');
      const inner = b.run(() => request.get('unset'));
      return [inner, request.get('unset')];
    });
    expect(seen).toEqual(['unset', 'a']);
  });

  it('copies by snapshot: later changes on either side are not shared', () => {
    isolated(() => {
      const request = new ContextVar<string>('request');
      request.set('a');
      const snapshot = copyContext();
      request.set('b');
      expect(snapshot.get(request)).toBe('a');
      snapshot.run(() => request.set('c'));
      expect(request.get()).toBe('b');
      const copy = snapshot.copy();
      snapshot.run(() => request.set('d'));
      expect(copy.get(request)).toBe('c');
      expect(snapshot.get(request)).toBe('d');
    });
  });
});

describe('Context in tasks and callbacks (TASK-14, §23 item 9)', () => {
  let loop: VirtualLoop;
  useFreshLoop(() => (loop = new VirtualLoop()), { leaveRunning: true });

  it('runs each task in a copy taken at creation: nothing leaks either way', async () => {
    const request = new ContextVar<string>('request');
    function* child(): Coroutine<string[]> {
      const seen = [request.get('unset')];
      request.set('child');
      yield;
      seen.push(request.get('unset'));
      return seen;
    }
    function* parent(): Coroutine<string[]> {
      request.set('p1');
      const task = createTask(child());
      request.set('p2');
      const seen = yield* task;
      return [...seen, request.get('unset')];
    }
    await expect(loop.runUntilComplete(parent())).resolves.toEqual(['p1', 'child', 'p2']);
    expect(request.get('unset')).toBe('unset');
  });

  it('snapshots the creator context of a task created outside the loop', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<string> {
      yield;
      return request.get('unset');
    }
    const task = isolated(() => {
      request.set('before');
      const created = loop.createTask(body());
      request.set('after');
      return created;
    });
    await expect(loop.runUntilComplete(task)).resolves.toBe('before');
  });

  it('keeps the values of a task across its steps, in its own context object', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<string> {
      request.set('mine');
      yield* sleep(1);
      return request.get('unset');
    }
    const task = loop.createTask(body());
    await expect(loop.runUntilComplete(task)).resolves.toBe('mine');
    const ctx = task.getContext();
    expect(ctx).toBeInstanceOf(Context);
    expect(ctx.get(request)).toBe('mine');
    expect(request.get('unset')).toBe('unset');
  });

  it('shows the values a task sets in the Context that getContext() returned before it ran', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<void> {
      request.set('set by task');
      yield;
    }
    const task = loop.createTask(body());
    const ctx = task.getContext();
    expect(ctx.get(request)).toBeUndefined();
    await loop.runUntilComplete(task);
    expect(task.getContext()).toBe(ctx);
    expect(ctx.get(request)).toBe('set by task');
  });

  it('lets changes made through getContext() between steps reach the next step of the task', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<string> {
      request.set('first step');
      yield;
      return request.get('unset');
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    const ctx = task.getContext();
    expect(ctx.get(request)).toBe('first step');
    ctx.run(() => request.set('injected'));
    await expect(loop.runUntilComplete(task)).resolves.toBe('injected');
  });

  it('returns, to a task asking mid-step, the Context it goes on running in', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<unknown[]> {
      request.set('before');
      const ctx = (currentTask() as Task<unknown>).getContext();
      const seenBefore = ctx.get(request);
      request.set('after');
      const seenAfter = ctx.get(request);
      yield;
      request.set('next step');
      return [seenBefore, seenAfter, ctx === (currentTask() as Task<unknown>).getContext()];
    }
    const task = loop.createTask(body());
    await expect(loop.runUntilComplete(task)).resolves.toEqual(['before', 'after', true]);
    expect(task.getContext().get(request)).toBe('next step');
  });

  it('refuses to run the Context of the task that is running in it', async () => {
    function* body(): Coroutine<unknown> {
      const ctx = (currentTask() as Task<unknown>).getContext();
      return thrownBy(() => ctx.run(() => 'entered twice'));
    }
    const error = await loop.runUntilComplete(body());
    expect(error).toBeInstanceOf(RuntimeError);
    expect((error as Error).message).toMatch(/^cannot enter context: .* is already entered$/);
  });

  it('resets in a later step of a task a token set in an earlier one', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<string> {
      request.set('outer');
      const token = request.set('inner');
      yield;
      request.reset(token);
      return request.get('unset');
    }
    await expect(loop.runUntilComplete(body())).resolves.toBe('outer');
  });

  it('ends a using scope of a token in a later step of the task that set it', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<string[]> {
      const seen: string[] = [];
      request.set('outer');
      {
        using _token = request.set('inner');
        yield* sleep(0);
        seen.push(request.get());
      }
      seen.push(request.get());
      return seen;
    }
    await expect(loop.runUntilComplete(body())).resolves.toEqual(['inner', 'outer']);
  });

  it('resets a token of an earlier step after getContext() was called between the steps', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<string> {
      request.set('outer');
      const token = request.set('inner');
      yield;
      request.reset(token);
      return request.get('unset');
    }
    const task = loop.createTask(body());
    await runOnce(loop);
    task.getContext();
    await expect(loop.runUntilComplete(task)).resolves.toBe('outer');
  });

  it('resets a token after the task asked for its own context in the same step', async () => {
    const request = new ContextVar<string>('request');
    function* body(): Coroutine<string> {
      request.set('outer');
      const token = request.set('inner');
      (currentTask() as Task<unknown>).getContext();
      request.reset(token);
      yield;
      return request.get('unset');
    }
    await expect(loop.runUntilComplete(body())).resolves.toBe('outer');
  });

  it('refuses in a callback a token set by the task that scheduled it', async () => {
    const request = new ContextVar<string>('request');
    const outcomes: string[] = [];
    function* body(): Coroutine<void> {
      const token = request.set('task');
      getRunningLoop().callSoon(() => {
        const error = thrownBy(() => request.reset(token));
        outcomes.push(`${(error as Error).name}: ${(error as Error).message}`);
      });
      yield* sleep(0);
      yield* sleep(0);
    }
    await loop.runUntilComplete(body());
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toMatch(/^RangeError: <Token.*> was created in a different Context$/);
  });

  it('refuses in one callback a token set by another', async () => {
    const request = new ContextVar<string>('request');
    let token: Token<string> | null = null;
    let error: unknown = null;
    loop.callSoon(() => {
      token = request.set('first');
    });
    loop.callSoon(() => {
      error = thrownBy(() => request.reset(token as unknown as Token<string>));
    });
    await runOnce(loop);
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toMatch(/was created in a different Context$/);
  });

  it('runs a task in the context passed to createTask, where its changes stay', async () => {
    const request = new ContextVar<string>('request');
    const ctx = new Context();
    ctx.run(() => request.set('given'));
    function* body(): Coroutine<string> {
      const seen = request.get('unset');
      request.set('set by task');
      return seen;
    }
    const task = loop.createTask(body(), { context: ctx });
    expect(task.getContext()).toBe(ctx);
    await expect(loop.runUntilComplete(task)).resolves.toBe('given');
    expect(ctx.get(request)).toBe('set by task');
  });

  it('honours the context option of the module-level createTask', async () => {
    const request = new ContextVar<string>('request');
    const ctx = new Context();
    ctx.run(() => request.set('given'));
    function* child(): Coroutine<string> {
      return request.get('unset');
    }
    function* parent(): Coroutine<string[]> {
      request.set('parent');
      const task = createTask(child(), { context: ctx });
      return [yield* task, request.get('unset'), String(task.getContext() === ctx)];
    }
    await expect(loop.runUntilComplete(parent())).resolves.toEqual(['given', 'parent', 'true']);
  });

  it('runs callSoon and callLater callbacks in the context captured when they were scheduled', async () => {
    const request = new ContextVar<string>('request');
    const seen: string[] = [];
    isolated(() => {
      request.set('at schedule');
      loop.callSoon(() => seen.push(`soon:${request.get('unset')}`));
      loop.callLater(1, () => seen.push(`later:${request.get('unset')}`));
      request.set('changed afterwards');
    });
    loop.callSoon(() => seen.push(`root:${request.get('unset')}`));
    loop.callLater(2, () => loop.stop());
    await loop.runForever();
    expect(seen).toEqual(['soon:at schedule', 'root:unset', 'later:at schedule']);
  });

  it('gives each callback its own copy: changes made by one are not seen by the next', async () => {
    const request = new ContextVar<string>('request');
    const seen: string[] = [];
    isolated(() => {
      request.set('shared');
      loop.callSoon(() => {
        seen.push(request.get('unset'));
        request.set('changed by first');
      });
      loop.callSoon(() => seen.push(request.get('unset')));
    });
    await runOnce(loop);
    expect(seen).toEqual(['shared', 'shared']);
  });

  it('captures the task context for callbacks scheduled inside a task', async () => {
    const request = new ContextVar<string>('request');
    const seen: string[] = [];
    function* body(): Coroutine<void> {
      const running = getRunningLoop();
      request.set('task');
      running.callSoon(() => seen.push(`soon:${request.get('unset')}`));
      const fut = running.createFuture<void>();
      fut.addDoneCallback(() => seen.push(`done-cb:${request.get('unset')}`));
      request.set('task later');
      fut.setResult(undefined);
      yield* sleep(0);
      yield* sleep(0);
      seen.push(`task:${request.get('unset')}`);
    }
    await loop.runUntilComplete(body());
    expect(seen).toEqual(['soon:task', 'done-cb:task', 'task:task later']);
  });

  it('runs the exception handler in the context of the failing callback', async () => {
    const request = new ContextVar<string>('request');
    const seen: string[] = [];
    loop.setExceptionHandler((_loop, context: ExceptionContext) => {
      seen.push(`${context.exception?.message}:${request.get('unset')}`);
    });
    isolated(() => {
      request.set('callback context');
      loop.callSoon(() => {
        throw new RangeError('boom');
      });
    });
    await runOnce(loop);
    expect(seen).toEqual(['boom:callback context']);
  });
});
