/**
 * The loop binding shared by the synchronisation primitives and queues (asyncio's
 * `mixins._LoopBoundMixin`): an object binds to the running loop the first time it needs a
 * future, and refuses every other loop afterwards.
 */
import type { EventLoop } from '../base-events.js';
import { RuntimeError } from '../exceptions.js';
import { INSPECT } from './format.js';
import { _getRunningLoop } from './running.js';

/** A base class whose `_getLoop()` binds the object to one loop. */
export class LoopBound {
  #loop: EventLoop | null = null;

  /** The repr (each subclass's toString), also in `util.inspect` and console.log. */
  [INSPECT](): string {
    return this.toString();
  }

  /**
   * The running loop, binding this object to it on first use; RuntimeError when no loop runs
   * or when the object is bound to a different loop.
   *
   * @internal
   */
  _getLoop(): EventLoop {
    const loop = _getRunningLoop();
    if (loop === null) throw new RuntimeError('no running event loop');
    if (this.#loop === null) this.#loop = loop;
    else if (this.#loop !== loop) throw new RuntimeError(`${String(this)} is bound to a different event loop`);
    return loop;
  }
}
