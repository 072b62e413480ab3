/**
 * How the death of a LoopThread is worded, the same wherever a call learns of it: in the thread
 * that started it (its worker's events), and in any thread holding a LoopRef to it (the link's
 * last message, or its end of the link closing). What the starting thread did to the thread
 * (asked it to close, terminated it) is written in a shared cell, its fate, before it is done,
 * so that a LoopRef whose link closed without a word can say why, as the starter's calls do.
 */
import { RuntimeError } from '../exceptions.js';

/** Nothing was done to the thread (yet). */
export const FATE_RUNNING = 0;
/** Its starter asked it to close. */
export const FATE_CLOSING = 1;
/** Its starter terminated it (terminate(), or a close that took too long). */
export const FATE_TERMINATED = 2;
/** It ran out of memory (its starter heard so from the worker). */
export const FATE_OUT_OF_MEMORY = 3;

/** A thread's fate cell: one Int32 on shared memory. */
export function newFate(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
}

/** Whether `value` is a fate cell as it arrives from another thread (a hostile peer may send anything). */
export function isFate(value: unknown): value is Int32Array {
  return value instanceof Int32Array && value.length === 1 && value.buffer instanceof SharedArrayBuffer;
}

/** The error every call fails with once the thread died for `reason` (with `cause`, when there is one). */
export function deathError(name: string, threadId: number, reason: string, cause: unknown): Error {
  const message = `LoopThread '${name}' (thread ${threadId}) died: ${reason}`;
  return cause === null ? new RuntimeError(message) : new RuntimeError(message, { cause });
}

/** The error of a thread that was asked to close and did. */
export function closedError(name: string): Error {
  return new RuntimeError(`LoopThread '${name}' is closed`);
}

/**
 * The error of a thread that ended by itself with exit `code` and the `uncaught` error (or
 * null), worded as the worker's events word it; a link learns these from the dying thread's
 * last message, possibly before those events arrive (or while this thread blocks).
 */
export function deathDescriber(name: string, threadId: number): (code: number, uncaught: unknown) => Error {
  return (code, uncaught) =>
    uncaught === null
      ? deathError(name, threadId, `it exited with code ${code}`, null)
      : deathError(name, threadId, describeError(uncaught), uncaught);
}

/** Why a worker's 'error' event ended its thread (a thread may throw any value, not only an Error). */
export function describeError(thrown: unknown): string {
  if (!(thrown instanceof Error)) return `uncaught ${typeof thrown === 'string' ? JSON.stringify(thrown) : String(thrown)}`;
  if ((thrown as Error & { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') return 'it ran out of memory (resourceLimits exceeded)';
  return `uncaught ${thrown.name}: ${thrown.message}`;
}

/**
 * The error of a thread whose end of a link closed without a word (no JavaScript ran as it
 * ended): what its `fate` says was done to it.
 */
export function silentDeath(name: string, threadId: number, fate: Int32Array): Error {
  switch (Atomics.load(fate, 0)) {
    case FATE_CLOSING:
      return closedError(name);
    case FATE_TERMINATED:
      return deathError(name, threadId, 'it was terminated', null);
    case FATE_OUT_OF_MEMORY:
      return deathError(name, threadId, 'it ran out of memory (resourceLimits exceeded)', null);
    default:
      return deathError(name, threadId, 'its end of the link closed (it ended without running JavaScript)', null);
  }
}
