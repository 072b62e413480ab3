/**
 * Waiting in a coroutine for a Node emitter's event: a socket's 'connect', a server's
 * 'listening', a child's 'spawn'.
 */
import type { EventEmitter } from 'node:events';
import type { EventLoop } from '../base-events.js';
import type { Future } from '../futures.js';

/**
 * A Future of `loop` done when `emitter` emits `event`, failed with the error when it emits
 * 'error' first; both listeners go once it is done, cancelled included. Until then it holds
 * the loop's virtual clock (VirtualClockLoop, simulate), if it has one.
 *
 * @example
 * ```ts
 * const connected = eventFuture(loop, socket, 'connect');
 * yield* connected;
 * ```
 */
export function eventFuture(loop: EventLoop, emitter: EventEmitter, event: string): Future<void> {
  const future = loop.createFuture<void>();
  // The event is work outside the loop (a connect, a bind, a spawn): a virtual clock waits for it
  // rather than jumping past it, as it waits for a Promise.
  let holding = true;
  loop._holdClock();
  const release = (): void => {
    if (!holding) return;
    holding = false;
    loop._releaseClock();
  };
  const onEvent = (): void => {
    release();
    if (!future.done()) future._setResultUnchecked(undefined);
  };
  const onError = (error: Error): void => {
    release();
    if (!future.done()) future._setExceptionUnchecked(error);
  };
  emitter.once(event, onEvent);
  emitter.once('error', onError);
  future.addDoneCallback(() => {
    release();
    emitter.off(event, onEvent);
    emitter.off('error', onError);
  });
  return future;
}
