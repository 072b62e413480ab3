/**
 * The event loop policy and the current loop of a thread (asyncio.events). The policy API is
 * deprecated, as in asyncio 3.14, and keeps working.
 *
 * The policy is module state of this thread's copy of the library, so it is thread-local:
 * setting the loop in one worker thread never changes another's.
 */
import { EventLoop } from './base-events.js';
import { RuntimeError } from './exceptions.js';
import { typeName } from './internal/format.js';
import { currentThreadName, setCurrentThreadName } from './internal/introspect.js';
import { _getEventLoop, _getRunningLoop, _setPolicyLoop } from './internal/running.js';

/** @internal Name this thread in messages such as "no current event loop in thread 'X'". */
export function _setThreadName(name: string): void {
  setCurrentThreadName(name);
}

/**
 * The per-thread event loop policy; subclass it to customize (asyncio's default policy).
 *
 * @deprecated asyncio 3.14 deprecates the policy system (to go in 3.16); it keeps working
 * here. Pass a `loopFactory` to `run()` or `Runner` to choose the loop, or make one with
 * `newEventLoop()` and `setEventLoop()`.
 *
 * @example
 * ```ts
 * class MyPolicy extends EventLoopPolicy {
 *   override newEventLoop() { const loop = super.newEventLoop(); loop.setDebug(true); return loop; }
 * }
 * setEventLoopPolicy(new MyPolicy());
 * ```
 */
export class EventLoopPolicy {
  #loop: EventLoop | null = null;

  /** The current loop of this thread; RuntimeError when none was set (get_event_loop). */
  getEventLoop(): EventLoop {
    if (this.#loop === null) {
      throw new RuntimeError(`There is no current event loop in thread '${currentThreadName()}'.`);
    }
    return this.#loop;
  }

  /** Set (or clear with null) the current loop of this thread (set_event_loop). */
  setEventLoop(loop: EventLoop | null): void {
    if (loop !== null && !(loop instanceof EventLoop)) {
      throw new TypeError(`loop must be an instance of EventLoop or null, not '${typeName(loop)}'`);
    }
    this.#loop = loop;
  }

  /** Create a new event loop (new_event_loop). */
  newEventLoop(): EventLoop {
    return new EventLoop();
  }
}

let policy: EventLoopPolicy | null = null;

/**
 * This thread's policy, created on first use (get_event_loop_policy).
 *
 * @deprecated asyncio 3.14 deprecates get_event_loop_policy (to go in 3.16); it keeps working
 * here. `getEventLoop()`, `setEventLoop()` and `newEventLoop()` need no policy.
 *
 * @example
 * ```ts
 * getEventLoopPolicy() === getEventLoopPolicy(); // true
 * ```
 */
export function getEventLoopPolicy(): EventLoopPolicy {
  return (policy ??= new EventLoopPolicy());
}

/**
 * Replace this thread's policy; null restores a fresh default one (set_event_loop_policy).
 *
 * @deprecated asyncio 3.14 deprecates set_event_loop_policy (to go in 3.16); it keeps working
 * here. Pass a `loopFactory` to `run()` or `Runner` instead of a policy whose `newEventLoop()`
 * makes your loops.
 *
 * @example
 * ```ts
 * setEventLoopPolicy(null);
 * ```
 */
export function setEventLoopPolicy(newPolicy: EventLoopPolicy | null): void {
  if (newPolicy !== null && !(newPolicy instanceof EventLoopPolicy)) {
    throw new TypeError(`policy must be an instance of EventLoopPolicy or null, not '${typeName(newPolicy)}'`);
  }
  policy = newPolicy;
}

/**
 * The loop running in this thread; RuntimeError('no running event loop') when none (get_running_loop).
 *
 * @example
 * ```ts
 * function* main() { const loop = getRunningLoop(); loop.callSoon(tick); }
 * ```
 */
export function getRunningLoop(): EventLoop {
  const loop = _getRunningLoop();
  if (loop === null) throw new RuntimeError('no running event loop');
  return loop;
}

/**
 * The running loop, else the policy's current loop for this thread (get_event_loop).
 *
 * @example
 * ```ts
 * setEventLoop(newEventLoop());
 * const loop = getEventLoop();
 * ```
 */
export function getEventLoop(): EventLoop {
  return _getEventLoop();
}

_setPolicyLoop(() => getEventLoopPolicy().getEventLoop());

/**
 * Set (or clear) this thread's current loop through the policy (set_event_loop).
 *
 * @example
 * ```ts
 * const loop = newEventLoop();
 * setEventLoop(loop);
 * ```
 */
export function setEventLoop(loop: EventLoop | null): void {
  getEventLoopPolicy().setEventLoop(loop);
}

/**
 * Create a new loop through the policy (new_event_loop).
 *
 * @example
 * ```ts
 * const loop = newEventLoop();
 * ```
 */
export function newEventLoop(): EventLoop {
  return getEventLoopPolicy().newEventLoop();
}
