/**
 * What crosses a thread, and how. `move()` marks an ArrayBuffer so that it is transferred (its
 * memory handed over, the original detached) instead of copied when it crosses a thread as an
 * argument or a result; a MessagePort, which cannot be copied, crosses the same way.
 * `registerClass()` lets instances of a class cross as themselves. Python has no counterpart:
 * its threads share one heap.
 */
import { MessagePort, type Transferable } from 'node:worker_threads';
import { addClass, copyFields } from './internal/classes.js';
import { repr, typeName } from './internal/format.js';
import { isNative } from './internal/wire.js';

/** Buffers and ports marked by `move()` and not yet collected for a transfer. */
const marked = new WeakSet<ArrayBuffer | MessagePort>();
/** How many marks are live, so values cross without a scan while nobody uses `move()`. */
let liveMarks = 0;

/** Arrays longer than this are searched by their own keys: a sparse one may be billions long. */
const DENSE_SEARCH = 1 << 16;

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
 * Append to `out` the moved buffers found in `value`: the value itself, or anywhere inside plain
 * arrays, plain objects, Maps and Sets, however deep (each container is looked at once, so
 * cycles end; the search keeps its own stack, so depth cannot overflow this thread's). Each
 * mark found is used up, so a buffer is listed once.
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
  visit(value, out);
}

function visit(root: unknown, out: Transferable[]): void {
  if (typeof root !== 'object' || root === null) return;
  const pending: object[] = [root];
  const seen = new Set<object>();
  while (pending.length > 0 && liveMarks > 0) {
    const value = pending.pop() as object;
    if (seen.has(value)) continue;
    seen.add(value);
    if (value instanceof ArrayBuffer || value instanceof MessagePort) {
      take(value, out);
    } else if (ArrayBuffer.isView(value)) {
      if (value.buffer instanceof ArrayBuffer) take(value.buffer, out);
    } else if (Array.isArray(value)) {
      if (value.length <= DENSE_SEARCH) for (let i = 0; i < value.length; i++) push(pending, value[i]);
      else for (const key of Object.keys(value)) push(pending, (value as unknown[])[key as unknown as number]);
    } else if (value instanceof Map) {
      for (const [key, item] of value) {
        push(pending, key);
        push(pending, item);
      }
    } else if (value instanceof Set) {
      for (const item of value) push(pending, item);
    } else {
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto === Object.prototype || proto === null) for (const key of Object.keys(value)) push(pending, (value as Record<string, unknown>)[key]);
    }
  }
}

function push(pending: object[], value: unknown): void {
  if (typeof value === 'object' && value !== null) pending.push(value);
}

/**
 * Whether `value` holds buffers or ports marked by `move()` (where `collectTransfers` looks), without
 * using up their marks: a call that moves something cannot be sent a second time.
 *
 * @internal
 * @example
 * ```ts
 * const resendable = !holdsMoved(args);
 * ```
 */
export function holdsMoved(value: unknown): boolean {
  if (liveMarks === 0) return false;
  const out: Transferable[] = [];
  const before = liveMarks;
  visit(value, out);
  // Marked again: the search used them up.
  for (const item of out) marked.add(item as ArrayBuffer | MessagePort);
  liveMarks = before;
  return out.length > 0;
}

function take(buffer: ArrayBuffer | MessagePort, out: Transferable[]): void {
  if (!marked.delete(buffer)) return;
  liveMarks--;
  out.push(buffer);
}

/**
 * How instances of a class registered with `registerClass()` cross threads.
 *
 * @example
 * ```ts
 * const options: RegisterClassOptions<Money> = {
 *   serialize: (money) => [money.cents, money.currency],
 *   deserialize: ([cents, currency]) => new Money(cents, currency),
 * };
 * ```
 */
export interface RegisterClassOptions<T> {
  /** The name it crosses under, the same in every thread (default: the class's own name). */
  name?: string;
  /**
   * Make structured-cloneable data of an instance (default: its own enumerable properties).
   * A class that keeps state in `#private` fields needs it: they cannot be seen from outside.
   */
  serialize?: (instance: T) => unknown;
  /** Make an instance of that data (default: an object of the class's prototype with those properties; no constructor runs). */
  deserialize?: (data: never) => T;
}

/**
 * Let instances of `cls` cross threads as themselves: arguments and results of `lt.call`,
 * `callSoonThreadsafe`, `runInExecutor` and `toThread`, wherever they sit inside a value, and
 * errors of the class thrown in another thread. Register the class in every thread that sends
 * or receives it, under the same name: calling `registerClass` in the module that defines the
 * class, which both threads import, does that. Structured clone alone would deliver an instance
 * as a plain object; an instance of a class with methods that is not registered is refused
 * with a TypeError naming the class, rather than arriving without its methods.
 *
 * By default an instance crosses as its own enumerable properties and is rebuilt on the class's
 * prototype without calling the constructor (shared references and cycles are kept); give
 * `serialize` and `deserialize` for a class whose state is not in such properties (`#private`
 * fields). An error class crosses as errors do (message, stack, cause, own properties).
 *
 * @example
 * ```ts
 * // geometry.ts, imported by the main module and by the jobs' module
 * export class Point {
 *   constructor(public x: number, public y: number) {}
 *   norm(): number { return Math.hypot(this.x, this.y); }
 * }
 * registerClass(Point);
 * export class QuotaError extends Error {}
 * registerClass(QuotaError);
 *
 * // main.ts
 * const p = yield* toThread(workerFn<[Point], Point>(jobsUrl, 'mirror'), new Point(3, 4));
 * p.norm(); // 5: p is a Point
 * ```
 */
export function registerClass<T extends object>(cls: abstract new (...args: never[]) => T, options: RegisterClassOptions<T> = {}): void {
  if (typeof cls !== 'function' || typeof cls.prototype !== 'object' || cls.prototype === null) {
    throw new TypeError(`registerClass() needs a class, got ${repr(cls)}`);
  }
  if (isNative(cls)) {
    throw new TypeError(`registerClass() takes classes of the application: ${cls.name} is built in, and crosses as structured clone allows`);
  }
  if (options === null || typeof options !== 'object') throw new TypeError(`registerClass() options must be an object, got ${repr(options)}`);
  const name = options.name ?? cls.name;
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(`registerClass() needs a name for the class: it has none (give options.name), got ${repr(name)}`);
  }
  const { serialize, deserialize } = options;
  if (serialize !== undefined && typeof serialize !== 'function') throw new TypeError(`registerClass() options.serialize must be a function, got ${repr(serialize)}`);
  if (deserialize !== undefined && typeof deserialize !== 'function') throw new TypeError(`registerClass() options.deserialize must be a function, got ${repr(deserialize)}`);
  const isError = cls.prototype instanceof Error;
  if (isError && (serialize !== undefined || deserialize !== undefined)) {
    throw new TypeError(`registerClass() ${name} is an error class: it crosses as errors do, without serialize or deserialize`);
  }
  const prototype = cls.prototype as object;
  addClass({
    cls,
    name,
    isError,
    custom: serialize !== undefined || deserialize !== undefined,
    serialize: (serialize as ((instance: object) => unknown) | undefined) ?? ownProperties,
    deserialize:
      (deserialize as ((data: unknown) => object) | undefined) ??
      ((data) => {
        const instance = Object.create(prototype) as object;
        copyFields(instance, data as object);
        return instance;
      }),
  });
}

/** An instance's own enumerable properties, as a plain object. */
function ownProperties(instance: object): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  copyFields(data, instance);
  return data;
}
