/**
 * Who awaits a future through a done callback (a gather, a shield, a TaskGroup, a Task awaiting
 * a Future subclass): the callback, once per owner, mapped to the future or task that waits;
 * and who, in another thread, awaits a task serving a call here. Call graphs read it; nothing
 * on the hot paths does.
 */
import { Future } from '../futures.js';

/** A task in another thread, as a call graph names it (the public RemoteTaskRef). */
export interface RemoteRef {
  readonly threadId: number;
  readonly threadName: string | null;
  readonly taskId: number;
  readonly taskName: string;
}

const owners = new WeakMap<object, Future<unknown>>();

/** Record that whoever holds `callback` as a done callback is awaited on behalf of `owner`. */
export function awaitedThrough(callback: object, owner: Future<unknown>): void {
  owners.set(callback, owner);
}

/** The future or task awaiting through `callback`, or undefined. */
export function ownerOf(callback: object): Future<unknown> | undefined {
  return owners.get(callback);
}

/** Who waits through a done-callback entry of a future: a Task waiting on it directly, or the owner of a callback. */
export function waiterOf(entry: unknown): Future<unknown> | undefined {
  if (entry instanceof Future) return entry;
  return typeof entry === 'function' ? owners.get(entry) : undefined;
}

let remote: (future: Future<unknown>) => RemoteRef[] = () => [];

/** Set how to find the tasks of other threads awaiting `future` (the links of this thread know). */
export function setRemoteAwaiters(find: (future: Future<unknown>) => RemoteRef[]): void {
  remote = find;
}

/** The tasks of other threads awaiting `future`, through calls it serves here. */
export function remoteAwaitersOf(future: Future<unknown>): RemoteRef[] {
  return remote(future);
}
