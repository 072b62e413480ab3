/**
 * Signal handlers of a loop (asyncio's add_signal_handler / remove_signal_handler on Unix), on
 * Node's process signal events: the callback runs in a loop iteration. Node delivers signals to
 * the main thread only, so in a worker thread both refuse with a RuntimeError.
 */
import { constants } from 'node:os';
import { isMainThread } from 'node:worker_threads';
import type { EventLoop } from './base-events.js';
import { RuntimeError } from './exceptions.js';
import { repr } from './internal/format.js';

/** Linux's NSIG: signal numbers run from 1 to 64. */
const NSIG = 65;
const UNCATCHABLE = new Set<string>(['SIGKILL', 'SIGSTOP']);

/** The handlers each loop installed, by signal name. */
const installed = new WeakMap<EventLoop, Map<NodeJS.Signals, () => void>>();

/** The name of signal `sig` (a name or a number), checked as asyncio's _check_signal does. */
function signalName(sig: unknown): NodeJS.Signals {
  if (typeof sig === 'number') {
    if (!Number.isInteger(sig) || sig < 1 || sig >= NSIG) throw new RangeError(`sig ${sig} out of range(1, ${NSIG})`);
    for (const [name, number] of Object.entries(constants.signals)) if (number === sig) return name as NodeJS.Signals;
    // A real-time signal: Node can listen to named signals only.
    throw new RangeError(`invalid signal number ${sig}: Node can only handle the named signals`);
  }
  if (typeof sig === 'string') {
    if (!Object.prototype.hasOwnProperty.call(constants.signals, sig)) throw new RangeError(`invalid signal ${repr(sig)}`);
    return sig as NodeJS.Signals;
  }
  throw new TypeError(`sig must be a signal name or number, not ${repr(sig)}`);
}

function checkThread(what: string): void {
  if (!isMainThread) throw new RuntimeError(`${what} works in the main thread only: Node delivers no signals to worker threads`);
}

/**
 * Call `callback(...args)` in an iteration of `loop` whenever `sig` arrives; replaces the loop's
 * previous handler for it. The loop checked `callback` already.
 *
 * @internal
 */
export function _addSignalHandler(loop: EventLoop, sig: NodeJS.Signals | number, callback: (...args: never[]) => void, args: unknown[]): void {
  const name = signalName(sig);
  if (loop.isClosed()) throw new RuntimeError('Event loop is closed');
  checkThread('addSignalHandler()');
  if (UNCATCHABLE.has(name)) throw new RuntimeError(`sig ${constants.signals[name]} cannot be caught`);
  let handlers = installed.get(loop);
  if (handlers === undefined) {
    const map = new Map<NodeJS.Signals, () => void>();
    handlers = map;
    installed.set(loop, map);
    loop._addCloseHook(() => {
      for (const [signal, listener] of map) process.off(signal, listener);
      map.clear();
    });
  }
  const previous = handlers.get(name);
  if (previous !== undefined) process.off(name, previous);
  const listener = (): void => {
    if (!loop.isClosed()) loop.callSoonThreadsafe(callback as (...args: unknown[]) => void, ...args);
  };
  handlers.set(name, listener);
  process.on(name, listener);
}

/**
 * Remove `loop`'s handler for `sig` (the signal's default behaviour comes back when no other
 * listener is left); whether there was one.
 *
 * @internal
 */
export function _removeSignalHandler(loop: EventLoop, sig: NodeJS.Signals | number): boolean {
  const name = signalName(sig);
  checkThread('removeSignalHandler()');
  const handlers = installed.get(loop);
  const listener = handlers?.get(name);
  if (handlers === undefined || listener === undefined) return false;
  handlers.delete(name);
  process.off(name, listener);
  return true;
}

/** @internal Whether `loop` handles signal `name` itself (run()'s SIGINT handling then stands aside). */
export function _hasSignalHandler(loop: EventLoop, name: NodeJS.Signals): boolean {
  return installed.get(loop)?.has(name) === true;
}
