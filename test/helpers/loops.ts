/**
 * Loops for tests: a fresh loop for every test of a file (or of a describe block), closed after
 * it; loops a test makes on the side, closed after it; and a coroutine run on a loop of its own.
 */
import { afterEach, beforeEach } from 'vitest';
import { setEventLoop, type Coroutine, type EventLoop } from '../../src/index.js';
import { VirtualLoop } from './virtual-loop.js';

/** How `useFreshLoop` sets up and tears down each test's loop. */
export interface FreshLoopOptions {
  /** Make each loop the current loop (`setEventLoop`) during its test. */
  current?: boolean;
  /** Forget the current loop after each test, as a test may have set one; implied by `current`. */
  clearCurrent?: boolean;
  /** Leave open a loop that a test left running: closing it would throw. */
  leaveRunning?: boolean;
}

/** What `useFreshLoop` gives a suite. */
export interface FreshLoop {
  /** Run a coroutine (or the one `main` makes) to completion on the current test's loop. */
  run<T>(main: Coroutine<T> | (() => Coroutine<T>)): Promise<T>;
}

/**
 * Give each test a loop from `make` and close it after the test. `make` usually also stores the
 * loop where the tests read it.
 *
 * @example
 * ```ts
 * let loop: VirtualLoop;
 * const { run } = useFreshLoop(() => (loop = new VirtualLoop()));
 * ```
 */
export function useFreshLoop(make: () => EventLoop, options: FreshLoopOptions = {}): FreshLoop {
  let loop!: EventLoop;
  beforeEach(() => {
    loop = make();
    if (options.current) setEventLoop(loop);
  });
  afterEach(() => {
    if (options.current || options.clearCurrent) setEventLoop(null);
    if (!(options.leaveRunning && loop.isRunning())) loop.close();
  });
  return {
    run<T>(main: Coroutine<T> | (() => Coroutine<T>)): Promise<T> {
      return loop.runUntilComplete(typeof main === 'function' ? main() : main);
    },
  };
}

/**
 * Close, after each test, every loop given to the returned `track`; a loop still running is
 * left open, as closing it would throw.
 *
 * @example
 * ```ts
 * const track = trackLoops();
 * const loop = track(newEventLoop());
 * ```
 */
export function trackLoops(): <L extends EventLoop>(loop: L) => L {
  const loops: EventLoop[] = [];
  afterEach(() => {
    for (const loop of loops.splice(0)) if (!loop.isRunning()) loop.close();
  });
  return (loop) => {
    loops.push(loop);
    return loop;
  };
}

/**
 * Run the coroutine `main` makes on a new VirtualLoop, closed afterwards. `main` is called inside
 * the running loop.
 *
 * @example
 * ```ts
 * const error = await runOnFreshLoop(() => caught(lock.acquire()));
 * ```
 */
export async function runOnFreshLoop<T>(main: () => Coroutine<T>): Promise<T> {
  const loop = new VirtualLoop();
  try {
    return await loop.runUntilComplete(
      (function* (): Coroutine<T> {
        return yield* main();
      })(),
    );
  } finally {
    loop.close();
  }
}
