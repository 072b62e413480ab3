/**
 * Keeping a thread from being terminated in the middle of a ThreadQueue operation.
 *
 * `worker.terminate()` stops a thread at whatever JavaScript it runs (V8 checks for the request
 * at calls of many built-ins, Atomics.* among them), so a thread ended while it holds a queue's
 * lock would leave the lock held for good. Each thread therefore has a guard of two words: INSIDE
 * is 1 while the thread is in a queue operation, STOP is set by whoever is about to terminate it.
 * A thread sets INSIDE and then reads STOP; the terminator sets STOP and then reads INSIDE (both
 * sequentially consistent), so either the thread sees STOP and parks before the operation (until
 * terminate() ends it there), or the terminator sees INSIDE and waits until the operation is
 * over. LoopThread passes each of its threads a guard and stops it before it terminates it.
 * A thread ended some other way inside an operation (a pool thread ended by `abortRunning`, a
 * heap limit) still leaves the lock held: queue-memory.ts then declares the queue broken.
 */

const INSIDE = 0;
const STOP = 1;
/** How long a terminator waits for a thread to leave an operation (one that died inside never does). */
const LEAVE_WAIT_MS = 1000;

/** This thread's guard: the one its LoopThread gave it, or one of its own that nobody stops. */
let guard = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));

/** A guard for a new thread (its words, to pass it in workerData). */
export function newThreadGuard(): SharedArrayBuffer {
  return new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT);
}

/** @internal Adopt the guard the thread's starter made (at the thread's start). */
export function _setThreadGuard(buffer: SharedArrayBuffer): void {
  guard = new Int32Array(buffer);
}

/** Mark this thread inside a queue operation; parks the thread for good when it is being terminated. */
export function enterQueueOperation(): void {
  Atomics.store(guard, INSIDE, 1);
  if (Atomics.load(guard, STOP) === 0) return;
  Atomics.store(guard, INSIDE, 0);
  // terminate() ends the thread in this wait.
  for (;;) Atomics.wait(guard, STOP, 1);
}

/**
 * Mark this thread out of its queue operation. A plain store: the terminator only needs to see
 * it at some point, and the lock's release was executed before it (a thread is stopped between
 * its instructions, never in the middle of making its stores visible).
 */
export function leaveQueueOperation(): void {
  guard[INSIDE] = 0;
}

/**
 * Keep the thread of `buffer` out of queue operations from now on (it parks at the next one),
 * returning once it is out of the one it is in, if any: it can then be terminated safely.
 */
export function stopQueueOperations(buffer: SharedArrayBuffer): void {
  const words = new Int32Array(buffer);
  Atomics.store(words, STOP, 1);
  const until = performance.now() + LEAVE_WAIT_MS;
  while (Atomics.load(words, INSIDE) !== 0 && performance.now() < until) Atomics.wait(words, INSIDE, 1, 0.05);
}
