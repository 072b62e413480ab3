/**
 * Who awaits a future through a done callback (a gather, a shield, a TaskGroup, a Task awaiting
 * a Future subclass): the callback, once per owner, mapped to the future or task that waits.
 * Call graphs read it; nothing on the hot paths does.
 */
import type { Future } from '../futures.js';

const owners = new WeakMap<object, Future<unknown>>();

/** Record that whoever holds `callback` as a done callback is awaited on behalf of `owner`. */
export function awaitedThrough(callback: object, owner: Future<unknown>): void {
  owners.set(callback, owner);
}

/** The future or task awaiting through `callback`, or undefined. */
export function ownerOf(callback: object): Future<unknown> | undefined {
  return owners.get(callback);
}
