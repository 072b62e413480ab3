/**
 * The running loop of this thread. Module state of this thread's copy of the library, hence
 * thread-local: a worker thread never sees the main thread's loop.
 */
import type { EventLoop } from '../base-events.js';

let running: EventLoop | null = null;

/** The loop running in this thread, or null. */
export function _getRunningLoop(): EventLoop | null {
  return running;
}

/** Record `loop` (or null) as the loop running in this thread. */
export function _setRunningLoop(loop: EventLoop | null): void {
  running = loop;
}
