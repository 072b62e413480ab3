/**
 * Node Buffers across threads and processes: structured clone and v8's serializer deliver a
 * Buffer as a bare Uint8Array (and copy the whole memory it is a view of), so the encodings
 * (wire.ts for values, errors.ts for errors' own properties) carry its bytes and make a Buffer
 * of them again on arrival. comlink's messages carry values as they are, for peers that do not
 * import multiloop: there the Buffers found in a value are listed beside it (`buffersIn`), and
 * made Buffers again in place on arrival (`makeBuffers`).
 */
import { isNativeError } from 'node:util/types';

/**
 * A Buffer's bytes as a Uint8Array that structured clone copies without the rest of its memory:
 * a view of its own ArrayBuffer when it spans all of it (a `move()`d Buffer's, transferred
 * as it is), else a copy of just its bytes (a small Buffer shares an 8 KiB pool with others).
 */
export function bytesOf(buffer: Buffer): Uint8Array {
  if (buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength) return new Uint8Array(buffer.buffer, 0, buffer.byteLength);
  return new Uint8Array(buffer);
}

/**
 * The Buffer over bytes that arrived (no copy); a TypeError when they are not bytes.
 */
export function bufferOf(bytes: unknown): Buffer {
  if (!(bytes instanceof Uint8Array)) throw new TypeError(`a Buffer arrived without its bytes (got ${bytes === null ? 'null' : typeof bytes})`);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * How many objects `buffersIn` looks into, and how long a list `makeBuffers` reads: a value
 * holding more crosses as structured clone makes it, its Buffers arriving as Uint8Arrays.
 */
const MAX_WALKED = 100_000;

// Reused by every walk but one started inside another (a getter that posts a message).
const walkPending: object[] = [];
const walkSeen = new Set<object>();
let walking = false;

/**
 * The Buffers inside `value` (itself, in arrays, objects, Map keys and values, Set items;
 * each once), for a message whose values cross as they are: structured clone keeps
 * identity within one message, so a list of them sent beside the value names the very
 * Uint8Arrays to make Buffers again on arrival (`makeBuffers`). Null when there are none, when
 * the value holds more than 100,000 objects, or when reading it throws (a getter): structured
 * clone reports its own error then. An instance of a class is looked into as structured clone
 * copies it (its own properties), an error for its cause; other built-in and host objects are not.
 *
 * @example
 * ```ts
 * const buffers = buffersIn(args);
 * if (buffers !== null) message.buffers = buffers;
 * ```
 */
export function buffersIn(value: unknown): Buffer[] | null {
  if (typeof value !== 'object' || value === null) return null;
  if (walking) return walk(value, [], new Set());
  walking = true;
  try {
    return walk(value, walkPending, walkSeen);
  } finally {
    walkPending.length = 0;
    walkSeen.clear();
    walking = false;
  }
}

function walk(root: object, pending: object[], seen: Set<object>): Buffer[] | null {
  let found: Buffer[] | null = null;
  try {
    pending.push(root);
    while (pending.length > 0) {
      const node = pending.pop() as object;
      if (seen.has(node)) continue;
      if (seen.size === MAX_WALKED) return null;
      seen.add(node);
      if (Array.isArray(node)) {
        for (let i = 0; i < node.length; i++) pushObject(pending, node[i]);
        continue;
      }
      const proto = Object.getPrototypeOf(node) as object | null;
      if (proto === Object.prototype || proto === null) {
        for (const key of Object.keys(node)) pushObject(pending, (node as Record<string, unknown>)[key]);
      } else if (node instanceof Buffer) {
        (found ??= []).push(node);
      } else if (node instanceof Map) {
        for (const [key, item] of node) {
          pushObject(pending, key);
          pushObject(pending, item);
        }
      } else if (node instanceof Set) {
        for (const item of node) pushObject(pending, item);
      } else if (isNativeError(node)) {
        // Structured clone keeps an error's cause, and none of its other own properties.
        if (Object.hasOwn(node, 'cause')) pushObject(pending, node.cause);
      } else if (objectToString.call(node) === '[object Object]') {
        // An instance of a class crosses as a plain object of its own properties; other built-ins
        // and host objects (dates, typed arrays, ports) keep none of theirs that could be a Buffer.
        for (const key of Object.keys(node)) pushObject(pending, (node as Record<string, unknown>)[key]);
      }
    }
  } catch {
    return null;
  }
  return found;
}

const objectToString = Object.prototype.toString;

function pushObject(pending: object[], value: unknown): void {
  if (typeof value === 'object' && value !== null) pending.push(value);
}

/**
 * Make each Uint8Array of `list` (what `buffersIn` found on the sending side, arrived beside
 * the value that holds the same objects) a Buffer, in place. Anything else in it is ignored,
 * and so is a list that is not an array or is longer than `buffersIn` ever makes one: it came
 * from a sender that is not multiloop.
 *
 * @example
 * ```ts
 * makeBuffers(message.buffers);
 * ```
 */
export function makeBuffers(list: unknown): void {
  if (!Array.isArray(list) || list.length > MAX_WALKED) return;
  for (let i = 0; i < list.length; i++) {
    const item: unknown = list[i];
    // The Uint8Array becomes the Buffer itself, so every place the value holds it sees a Buffer.
    if (item instanceof Uint8Array && !(item instanceof Buffer)) Object.setPrototypeOf(item, Buffer.prototype);
  }
}
