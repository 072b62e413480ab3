/**
 * The running loop of this thread. Module state of this thread's copy of the library, hence
 * thread-local: a worker thread never sees the main thread's loop.
 */
import type { EventLoop } from '../base-events.js';

let running: EventLoop | null = null;
/** The policy's current loop; the policy (events.ts) installs the real lookup when it loads. */
let policyLoop: () => EventLoop = () => {
  throw new Error('the event loop policy is not loaded');
};

/** @internal Install how the policy finds this thread's current loop. */
export function _setPolicyLoop(lookup: () => EventLoop): void {
  policyLoop = lookup;
}

/**
 * The running loop, else the policy's current loop (get_event_loop). Here rather than in
 * events.ts so that futures can find their loop without importing the policy, whose imports
 * lead back to futures.
 */
export function _getEventLoop(): EventLoop {
  return running ?? policyLoop();
}

/** The loop running in this thread, or null. */
export function _getRunningLoop(): EventLoop | null {
  return running;
}

/** Record `loop` (or null) as the loop running in this thread. */
export function _setRunningLoop(loop: EventLoop | null): void {
  running = loop;
}
