import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterEach, describe, expect, it } from 'vitest';
import {
  EventLoop,
  EventLoopPolicy,
  RuntimeError,
  getEventLoop,
  getEventLoopPolicy,
  getRunningLoop,
  newEventLoop,
  setEventLoop,
  setEventLoopPolicy,
  type Coroutine,
} from '../src/index.js';
import { expectError, thrownBy } from './helpers/errors.js';
import { trackLoops } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

const NO_CURRENT_LOOP = "There is no current event loop in thread 'MainThread'.";

const track = trackLoops();
afterEach(() => setEventLoopPolicy(null));

describe('getEventLoopPolicy', () => {
  it('returns the same default policy object each time', () => {
    const policy = getEventLoopPolicy();
    expect(policy).toBeInstanceOf(EventLoopPolicy);
    expect(getEventLoopPolicy()).toBe(policy);
  });
});

describe('setEventLoopPolicy', () => {
  it('installs a custom policy that newEventLoop and setEventLoop go through', () => {
    const log: string[] = [];
    class MyPolicy extends EventLoopPolicy {
      override newEventLoop(): EventLoop {
        log.push('new');
        const loop = super.newEventLoop();
        loop.setDebug(true);
        return loop;
      }
      override setEventLoop(loop: EventLoop | null): void {
        log.push(loop === null ? 'set null' : 'set loop');
        super.setEventLoop(loop);
      }
    }
    const policy = new MyPolicy();
    setEventLoopPolicy(policy);
    expect(getEventLoopPolicy()).toBe(policy);
    const loop = track(newEventLoop());
    expect(loop.getDebug()).toBe(true);
    setEventLoop(loop);
    expect(getEventLoop()).toBe(loop);
    setEventLoop(null);
    expect(log).toEqual(['new', 'set loop', 'set null']);
  });

  it('rejects an object that is not a policy with TypeError and keeps the current policy', () => {
    const policy = getEventLoopPolicy();
    expectError(
      thrownBy(() => setEventLoopPolicy({} as never)),
      TypeError,
      "policy must be an instance of EventLoopPolicy or null, not 'Object'",
    );
    expectError(
      thrownBy(() => setEventLoopPolicy(1 as never)),
      TypeError,
      "policy must be an instance of EventLoopPolicy or null, not 'number'",
    );
    expect(getEventLoopPolicy()).toBe(policy);
  });

  it('restores a fresh default policy, without the old current loop, when given null', () => {
    const old = getEventLoopPolicy();
    const loop = track(newEventLoop());
    setEventLoop(loop);
    setEventLoopPolicy(null);
    const fresh = getEventLoopPolicy();
    expect(fresh).toBeInstanceOf(EventLoopPolicy);
    expect(fresh).not.toBe(old);
    expect(getEventLoopPolicy()).toBe(fresh);
    expectError(thrownBy(getEventLoop), RuntimeError, NO_CURRENT_LOOP);
    expect(old.getEventLoop()).toBe(loop);
  });
});

describe('newEventLoop', () => {
  it('returns a new loop each time, open and not running', () => {
    const first = track(newEventLoop());
    const second = track(newEventLoop());
    expect(first).toBeInstanceOf(EventLoop);
    expect(second).not.toBe(first);
    expect(first.isClosed()).toBe(false);
    expect(first.isRunning()).toBe(false);
    expect(first.getDebug()).toBe(false);
  });

  it('does not make the new loop the current one', () => {
    track(newEventLoop());
    expectError(thrownBy(getEventLoop), RuntimeError, NO_CURRENT_LOOP);
  });
});

describe('getEventLoop and setEventLoop', () => {
  it("throws RuntimeError naming the thread when no loop was set", () => {
    expectError(thrownBy(getEventLoop), RuntimeError, NO_CURRENT_LOOP);
    expectError(thrownBy(() => getEventLoopPolicy().getEventLoop()), RuntimeError, NO_CURRENT_LOOP);
  });

  it('returns the loop that was set, until null clears it', () => {
    const loop = track(newEventLoop());
    setEventLoop(loop);
    expect(getEventLoop()).toBe(loop);
    expect(getEventLoopPolicy().getEventLoop()).toBe(loop);
    setEventLoop(null);
    expectError(thrownBy(getEventLoop), RuntimeError, NO_CURRENT_LOOP);
  });

  it('rejects what is not a loop with TypeError, through the function and the policy', () => {
    expectError(thrownBy(() => setEventLoop({} as never)), TypeError, "loop must be an instance of EventLoop or null, not 'Object'");
    expectError(
      thrownBy(() => getEventLoopPolicy().setEventLoop('loop' as never)),
      TypeError,
      "loop must be an instance of EventLoop or null, not 'string'",
    );
    expectError(thrownBy(getEventLoop), RuntimeError, NO_CURRENT_LOOP);
  });

  it('accepts a loop subclass', () => {
    const loop = track(new VirtualLoop());
    setEventLoop(loop);
    expect(getEventLoop()).toBe(loop);
  });

  it('keeps a separate current loop per policy object', () => {
    const a = new EventLoopPolicy();
    const b = new EventLoopPolicy();
    const loop = track(newEventLoop());
    a.setEventLoop(loop);
    expect(a.getEventLoop()).toBe(loop);
    expectError(thrownBy(() => b.getEventLoop()), RuntimeError, NO_CURRENT_LOOP);
  });

  it('prefers the running loop to the current one', async () => {
    const current = track(newEventLoop());
    const running = track(new VirtualLoop());
    setEventLoop(current);
    let seen: EventLoop | null = null;
    running.callSoon(() => {
      seen = getEventLoop();
      running.stop();
    });
    await running.runForever();
    expect(seen).toBe(running);
    expect(getEventLoop()).toBe(current);
  });
});

describe('getRunningLoop', () => {
  it("throws RuntimeError('no running event loop') outside a running loop", () => {
    const loop = track(newEventLoop());
    setEventLoop(loop);
    expectError(thrownBy(getRunningLoop), RuntimeError, 'no running event loop');
  });

  it('returns the loop that runs the current task or callback', async () => {
    const loop = track(new VirtualLoop());
    function* main(): Coroutine<EventLoop> {
      yield;
      return getRunningLoop();
    }
    await expect(loop.runUntilComplete(main())).resolves.toBe(loop);
    expectError(thrownBy(getRunningLoop), RuntimeError, 'no running event loop');
  });
});

describe('the policy API is deprecated, as in asyncio 3.14', () => {
  /** The TSDoc tags of each exported declaration of src/events.ts, by name. */
  function tagsByName(): Map<string, string[]> {
    const path = fileURLToPath(new URL('../src/events.ts', import.meta.url));
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
    const tags = new Map<string, string[]>();
    for (const statement of source.statements) {
      if ((ts.isClassDeclaration(statement) || ts.isFunctionDeclaration(statement)) && statement.name !== undefined) {
        tags.set(statement.name.text, ts.getJSDocTags(statement).map((tag) => tag.tagName.text));
      }
    }
    return tags;
  }

  it('marks EventLoopPolicy, getEventLoopPolicy and setEventLoopPolicy @deprecated, and nothing else', () => {
    const deprecated = [...tagsByName()].filter(([, tags]) => tags.includes('deprecated')).map(([name]) => name);
    expect(deprecated.sort()).toEqual(['EventLoopPolicy', 'getEventLoopPolicy', 'setEventLoopPolicy']);
  });

  it('keeps working: a policy set makes the loops newEventLoop() gives', () => {
    class DebugPolicy extends EventLoopPolicy {
      override newEventLoop(): EventLoop {
        const loop = super.newEventLoop();
        loop.setDebug(true);
        return loop;
      }
    }
    setEventLoopPolicy(new DebugPolicy());
    expect(getEventLoopPolicy()).toBeInstanceOf(DebugPolicy);
    expect(track(newEventLoop()).getDebug()).toBe(true);
  });
});
