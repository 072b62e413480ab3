import { afterEach, describe, expect, it } from 'vitest';
import { Context, ContextVar, copyContext, createTask, sleep, type Coroutine } from '../src/index.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

/**
 * A task's context is entered lazily: a step that only reads variables never enters it; the
 * first change enters it for the rest of the step. These tests pin what must not change.
 */
describe('Task context, entered on first change', () => {
  let loop: VirtualLoop;
  afterEach(() => loop?.close());

  it('lets a step read the variables of its copy without entering it', async () => {
    loop = new VirtualLoop();
    const level = new ContextVar<number>('level', { default: 0 });
    const seen: number[] = [];
    function* reader(): Coroutine<void> {
      seen.push(level.get());
      yield;
      seen.push(level.get(), copyContext().get(level) ?? -1);
    }
    function* main(): Coroutine<void> {
      level.set(5);
      const child = createTask(reader());
      level.set(6);
      yield* child;
      seen.push(level.get());
    }
    await loop.runUntilComplete(main());
    expect(seen).toEqual([5, 5, 5, 6]);
  });

  it('keeps a change made in one step for the next steps, and only there', async () => {
    loop = new VirtualLoop();
    const name = new ContextVar<string>('name', { default: 'root' });
    const seen: string[] = [];
    function* child(tag: string): Coroutine<void> {
      yield* sleep(0.1);
      name.set(tag);
      yield* sleep(0.1);
      seen.push(`${tag}:${name.get()}`);
    }
    function* main(): Coroutine<void> {
      const a = createTask(child('a'));
      const b = createTask(child('b'));
      yield* a;
      yield* b;
      seen.push(`main:${name.get()}`);
    }
    await loop.runUntilComplete(main());
    expect(seen).toEqual(['a:a', 'b:b', 'main:root']);
  });

  it('captures the task variables for callbacks scheduled by a step that never set one', async () => {
    loop = new VirtualLoop();
    const request = new ContextVar<string>('request', { default: '-' });
    const seen: string[] = [];
    function* child(): Coroutine<void> {
      loop.callSoon(() => seen.push(request.get()));
      yield;
    }
    function* main(): Coroutine<void> {
      request.set('r-1');
      yield* createTask(child());
      request.set('r-2');
      yield;
    }
    await loop.runUntilComplete(main());
    expect(seen).toEqual(['r-1']);
  });

  it('enters the task context before a Context.run inside a step, and restores it after', async () => {
    loop = new VirtualLoop();
    const level = new ContextVar<number>('level', { default: 0 });
    const seen: number[] = [];
    function* child(): Coroutine<void> {
      const other = new Context();
      seen.push(other.run(() => {
        level.set(1);
        return level.get();
      }));
      seen.push(level.get(), other.get(level) ?? -1);
      level.set(2);
      yield;
      seen.push(level.get());
    }
    function* main(): Coroutine<void> {
      yield* createTask(child());
      seen.push(level.get());
    }
    await loop.runUntilComplete(main());
    expect(seen).toEqual([1, 0, 1, 2, 0]);
  });
});
