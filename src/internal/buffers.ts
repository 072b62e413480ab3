/**
 * Node Buffers across threads and processes: structured clone and v8's serializer deliver a
 * Buffer as a bare Uint8Array (and copy the whole memory it is a view of), so the encodings
 * (wire.ts for values, errors.ts for errors' own properties) carry its bytes and make a Buffer
 * of them again on arrival.
 */

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

