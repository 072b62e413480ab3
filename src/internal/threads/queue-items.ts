/**
 * A ThreadQueue's items as the records of its shared memory (queue-memory.ts), by the rules of
 * call arguments: numbers, booleans, null and undefined travel in the record itself, strings as
 * UTF-8, small plain objects and arrays in a quick encoding of their own (plain-items.ts),
 * anything else through `toWire` (registered classes, errors, Buffers become records) and v8's
 * serializer (structured clone). A `move()`d ArrayBuffer is copied in and detached here, so
 * that it is gone from this thread as a transfer leaves it.
 *
 * Shared memory carries bytes only: a SharedArrayBuffer (a ThreadQueue is two of them) or a
 * MessagePort inside an item cannot cross this way, and such an item is refused at its put.
 */
import { Deserializer, Serializer } from 'node:v8';
import type { Transferable } from 'node:worker_threads';
import { collectTransfers, move } from '../../transfer.js';
import { describeUncloneable, findUncloneable } from '../uncloneable.js';
import { itemTrace } from '../travel.js';
import { fromWire, toWire } from '../wire.js';
import { decodePlain, encodePlain } from './plain-items.js';
import { K_FALSE, K_NULL, K_NUMBER, K_PLAIN, K_SERIALIZED, K_STRING, K_TRACED, K_TRUE, K_UNDEFINED, MAX_BYTES, type QueueMemory } from './queue-memory.js';

/** Scratch buffers past this size are not kept for the next item. */
const KEEP_BYTES = 1 << 20;

/** The record of the last item encoded in this thread (one at a time: read it before the next encode). */
export interface EncodedItem {
  kind: number;
  num: number;
  /** The bytes (a view of a scratch buffer reused by the next encode), or null. */
  payload: Uint8Array | null;
  /** The ArrayBuffers `move()` marked in the item: detached once it is in the queue. */
  moved: ArrayBuffer[] | null;
}

export const encoded: EncodedItem = { kind: 0, num: 0, payload: null, moved: null };

let stringScratch = Buffer.allocUnsafeSlow(4096);
let readScratch = new Uint8Array(4096);
let readText = Buffer.from(readScratch.buffer);

/**
 * Encode `item` into `encoded`; a TypeError naming what in it cannot cross (`where` names the
 * queue, e.g. "ThreadQueue 'jobs'"), or a RangeError when it is larger than a queue holds.
 */
export function encodeItem(item: unknown, where: string): void {
  encoded.moved = null;
  encoded.payload = null;
  if (itemTrace !== null) {
    // Put while a span is active: the item goes with the trace context, for the consumer's link.
    const written = itemTrace.write();
    if (written !== undefined) {
      encodeSerialized(item, where, written);
      return;
    }
  }
  switch (typeof item) {
    case 'number':
      encoded.kind = K_NUMBER;
      encoded.num = item;
      return;
    case 'string':
      encodeString(item);
      return;
    case 'boolean':
      encoded.kind = item ? K_TRUE : K_FALSE;
      return;
    case 'undefined':
      encoded.kind = K_UNDEFINED;
      return;
    case 'function':
    case 'symbol':
      throw new TypeError(`cannot put into ${where}: ${describeUncloneable({ path: 'the item', type: typeof item })}`);
    default:
      break;
  }
  if (item === null) {
    encoded.kind = K_NULL;
    return;
  }
  const plain = encodePlain(item as object);
  if (plain !== null) {
    encoded.kind = K_PLAIN;
    encoded.payload = plain;
    return;
  }
  encodeSerialized(item, where, undefined);
}

/**
 * Encode `item` through `toWire` and v8's serializer, as `[traced, item]` (K_TRACED) when
 * `traced` is given; the errors of `encodeItem`.
 */
function encodeSerialized(item: unknown, where: string, traced: unknown): void {
  if (typeof item === 'function' || typeof item === 'symbol') {
    throw new TypeError(`cannot put into ${where}: ${describeUncloneable({ path: 'the item', type: typeof item })}`);
  }
  const found: Transferable[] = [];
  collectTransfers(item, found);
  const moved = found.length === 0 ? null : (found as ArrayBuffer[]);
  let bytes: Buffer;
  try {
    if (moved !== null && moved.some((each) => !(each instanceof ArrayBuffer))) {
      throw new TypeError(`cannot put into ${where}: the item holds a moved MessagePort, ${CANNOT_TRAVEL}`);
    }
    let value: unknown;
    try {
      value = toWire(item, 'the item');
    } catch (error) {
      throw new TypeError(`cannot put into ${where}: ${(error as Error).message}`, { cause: error });
    }
    const serializer = new Serializer();
    serializer.writeHeader();
    try {
      serializer.writeValue(traced === undefined ? value : [traced, value]);
    } catch (error) {
      throw new TypeError(`cannot put into ${where}: ${whyUnserializable(item, error)}`, { cause: error });
    }
    bytes = serializer.releaseBuffer();
    if (bytes.length > MAX_BYTES) throw new RangeError(`cannot put into ${where}: the item takes ${bytes.length} bytes, more than a ThreadQueue holds (${MAX_BYTES})`);
  } catch (error) {
    // The put fails and the queue is unchanged: the buffers stay here, still marked to move.
    if (moved !== null) for (const each of found) move(each as ArrayBuffer);
    throw error;
  }
  encoded.kind = traced === undefined ? K_SERIALIZED : K_TRACED;
  encoded.payload = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  encoded.moved = moved;
}

const CANNOT_TRAVEL =
  "which cannot travel inside a ThreadQueue's items (they are copied through shared memory): send it to the other thread as an argument of a call instead";

/** Why v8's serializer refused `item`, for the put's error. */
function whyUnserializable(item: unknown, error: unknown): string {
  const found = findUncloneable(item, 'the item');
  if (found !== null) return describeUncloneable(found);
  const message = (error as Error).message;
  if (message.includes('SharedArrayBuffer')) return `the item holds a SharedArrayBuffer or a ThreadQueue, ${CANNOT_TRAVEL}`;
  if (message.includes('MessagePort')) return `the item holds a MessagePort, ${CANNOT_TRAVEL}`;
  return `the item cannot be cloned (${message})`;
}

function encodeString(text: string): void {
  encoded.kind = K_STRING;
  // UTF-8 takes at most 3 bytes per UTF-16 unit.
  const most = text.length * 3;
  if (most > stringScratch.length) {
    if (most > KEEP_BYTES) {
      const bytes = Buffer.from(text, 'utf8');
      if (bytes.length > MAX_BYTES) throw new RangeError(`the string takes ${bytes.length} bytes, more than a ThreadQueue holds (${MAX_BYTES})`);
      encoded.payload = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
      return;
    }
    stringScratch = Buffer.allocUnsafeSlow(roundUp(most));
  }
  const length = stringScratch.write(text, 0, 'utf8');
  encoded.payload = new Uint8Array(stringScratch.buffer, stringScratch.byteOffset, length);
}

/** Detach the buffers the last item moved, now that it is in the queue (as a transfer does). */
export function detachMoved(moved: ArrayBuffer[]): void {
  for (const buffer of moved) if (buffer.byteLength > 0) structuredClone(buffer, { transfer: [buffer] });
}

/** Mark again the buffers of an item that was not put (a put cancelled or refused after encoding). */
export function remarkMoved(moved: ArrayBuffer[]): void {
  for (const buffer of moved) move(buffer);
}

/** The buffer `tryGet` copies a record into, large enough for at least `needed` bytes. */
export function readBuffer(needed = 0): Uint8Array {
  if (needed <= readScratch.length) return readScratch;
  if (needed > KEEP_BYTES) return new Uint8Array(needed);
  readScratch = new Uint8Array(roundUp(needed));
  readText = Buffer.from(readScratch.buffer);
  return readScratch;
}

/**
 * The item `memory.tryGet(into)` just took, rebuilt in this thread; throws what rebuilding it
 * threw (a class this thread did not register, a deserializer's error, a stack overflow): the
 * item is taken all the same, and ThreadQueue counts it done.
 */
export function decodeItem(memory: QueueMemory, into: Uint8Array): unknown {
  switch (memory.kind) {
    case K_NUMBER:
      return memory.num;
    case K_STRING:
      return (into === readScratch ? readText : Buffer.from(into.buffer, into.byteOffset, into.length)).toString('utf8', 0, memory.length);
    case K_TRUE:
      return true;
    case K_FALSE:
      return false;
    case K_NULL:
      return null;
    case K_UNDEFINED:
      return undefined;
    case K_PLAIN:
      return decodePlain(into, memory.length);
    case K_TRACED: {
      const pair = deserialize(into, memory.length);
      if (!Array.isArray(pair) || pair.length !== 2) return fromWire(pair);
      itemTrace?.arrived(pair[0]);
      return fromWire(pair[1]);
    }
    default:
      return fromWire(deserialize(into, memory.length));
  }
}

/** The value v8's serializer wrote in the first `length` bytes of `into`. */
function deserialize(into: Uint8Array, length: number): unknown {
  const deserializer = new Deserializer(new Uint8Array(into.buffer, into.byteOffset, length));
  deserializer.readHeader();
  return deserializer.readValue();
}

function roundUp(bytes: number): number {
  let size = 4096;
  while (size < bytes) size *= 2;
  return size;
}
