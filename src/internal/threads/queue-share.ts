/**
 * A ThreadQueue as a plain value, for threads multiloop did not start (a bare `new Worker()`):
 * `queue.share()` makes it, `ThreadQueue.attach()` checks it and makes the queue of it again.
 *
 * A ThreadQueue is a class instance whose state sits in private fields, so structured clone
 * (workerData, postMessage) makes `{}` of it. Its state is two SharedArrayBuffers, which
 * structured clone shares rather than copies: a plain object holding them, tagged, crosses as it
 * is, and the thread that gets it holds the same memory. No port is needed, as every wake-up goes
 * through that memory (Atomics). What arrives is checked as the wire checks a queue (the shape of
 * its memory, a name): anything else is a TypeError naming what it got.
 */
import { repr } from '../format.js';
import { QueueMemory, type QueueBuffers } from './queue-memory.js';

/** What marks a value as a shared queue (the d.ts's `SharedThreadQueue`). */
export const SHARED_TAG = '__sharedThreadQueue';

/** A queue's memory and name, as they cross to another thread. */
export interface QueueHandle {
  readonly buffers: QueueBuffers;
  readonly name: string;
}

/** What `share()` returns, as it is at run time. */
export interface SharedQueueValue extends QueueHandle {
  readonly [SHARED_TAG]: true;
}

/** The plain, structured-cloneable value of a queue's handle. */
export function sharedValue(handle: QueueHandle): SharedQueueValue {
  return { [SHARED_TAG]: true, buffers: { control: handle.buffers.control, data: handle.buffers.data, gen: handle.buffers.gen }, name: handle.name };
}

/**
 * The handle in a value that `share()` made in some thread; a TypeError naming what `value` is
 * otherwise (a ThreadQueue given as it is to a bare Worker arrives as `{}`: the message says so).
 */
export function handleOfShared(value: unknown): QueueHandle {
  if (typeof value === 'object' && value !== null) {
    const { [SHARED_TAG]: tag, buffers, name } = value as Record<string, unknown>;
    if (tag === true && QueueMemory.isShaped(buffers) && typeof name === 'string' && name !== '') return { buffers, name };
    if (tag === true) throw new TypeError('ThreadQueue.attach() got a shared queue without the shared memory of one (was it made by queue.share()?)');
  }
  let got = repr(value);
  if (typeof value === 'object' && value !== null && Object.keys(value).length === 0) {
    got += ' (a ThreadQueue given as it is to a thread multiloop did not start arrives as {}: give it queue.share())';
  }
  throw new TypeError(`ThreadQueue.attach() takes what queue.share() returned, got ${got}`);
}
