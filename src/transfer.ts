/**
 * Moving buffers across threads: `move()` marks an ArrayBuffer so that it is transferred
 * (its memory handed over, the original detached) instead of copied when it crosses a thread
 * as an argument or a result; a MessagePort, which cannot be copied, crosses the same way.
 * Python has no counterpart: its threads share one heap.
 */
import { MessagePort, type Transferable } from 'node:worker_threads';
import { typeName } from './internal/format.js';

/** Buffers and ports marked by `move()` and not yet collected for a transfer. */
const marked = new WeakSet<ArrayBuffer | MessagePort>();
/** How many marks are live, so values cross without a scan while nobody uses `move()`. */
let liveMarks = 0;

/** Containers nested deeper than this are not searched for moved buffers. */
const MAX_DEPTH = 3;

/**
 * Mark an ArrayBuffer (or the buffer under a typed array or DataView) to be transferred rather
 * than copied when it crosses a thread as an argument or a result; returns `value`. A
 * MessagePort can be moved too (it cannot be copied): the other thread gets the port, this
 * one loses it — a way to give a service a direct channel.
 *
 * Transferring hands the whole underlying buffer over: afterwards it is detached here
 * (`byteLength` 0), views on it included. A buffer is transferred once; its mark is used up.
 * Node's small pooled `Buffer`s share one untransferable pool and are copied regardless.
 *
 * @example
 * ```ts
 * const pixels = new Uint8Array(1 << 20);
 * const out = yield* toThread(workerFn(new URL('./blur.js', import.meta.url)), move(pixels));
 * pixels.byteLength; // 0: the memory went to the worker instead of being copied
 * ```
 */
export function move<T extends ArrayBuffer | ArrayBufferView | MessagePort>(value: T): T {
  if (value instanceof MessagePort) {
    if (!marked.has(value)) {
      marked.add(value);
      liveMarks++;
    }
    return value;
  }
  let buffer: unknown = value;
  if (ArrayBuffer.isView(value)) buffer = value.buffer;
  if (!(buffer instanceof ArrayBuffer)) {
    if (typeof SharedArrayBuffer === 'function' && buffer instanceof SharedArrayBuffer) {
      throw new TypeError('move() cannot transfer a SharedArrayBuffer: threads share it without copying');
    }
    throw new TypeError(`move() needs an ArrayBuffer, a typed array, a DataView or a MessagePort, got ${typeName(value)}`);
  }
  if (!marked.has(buffer)) {
    marked.add(buffer);
    liveMarks++;
  }
  return value;
}

/**
 * Append to `out` the moved buffers found in `value`: the value itself, or inside plain arrays
 * and plain objects up to three levels down. Each mark found is used up, so a buffer is
 * listed once.
 *
 * @internal
 * @example
 * ```ts
 * const transfer: Transferable[] = [];
 * collectTransfers(args, transfer);
 * port.postMessage({ args }, transfer);
 * ```
 */
export function collectTransfers(value: unknown, out: Transferable[]): void {
  if (liveMarks === 0) return;
  visit(value, out, 0);
}

function visit(value: unknown, out: Transferable[], depth: number): void {
  if (typeof value !== 'object' || value === null) return;
  if (value instanceof ArrayBuffer || value instanceof MessagePort) {
    take(value, out);
    return;
  }
  if (ArrayBuffer.isView(value)) {
    if (value.buffer instanceof ArrayBuffer) take(value.buffer, out);
    return;
  }
  if (depth === MAX_DEPTH) return;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length && liveMarks > 0; i++) visit(value[i], out, depth + 1);
    return;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return;
  for (const key in value) {
    if (liveMarks === 0) return;
    visit((value as Record<string, unknown>)[key], out, depth + 1);
  }
}

function take(buffer: ArrayBuffer | MessagePort, out: Transferable[]): void {
  if (!marked.delete(buffer)) return;
  liveMarks--;
  out.push(buffer);
}
