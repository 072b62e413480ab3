/**
 * A quick encoding of small plain data (the JSON-like items most queues carry): plain objects
 * and arrays of at most PLAIN_NODES containers, holding numbers, strings, booleans, null and
 * undefined. It makes what structured clone makes of them, in some hundred nanoseconds where v8's
 * serializer takes microseconds. Anything else (a container met twice, a class instance, a
 * Map, a Buffer, an array with holes or extra properties, a `__proto__` key) is left to the
 * serializer: `encodePlain` returns null.
 *
 * Bytes: a tag, then per tag: INT int32; FLOAT float64; ASCII and UTF8 a uint32 byte count and
 * the bytes; OBJECT a uint32 count and that many (string key, value); ARRAY a uint32 length and
 * that many values. Little-endian.
 */

const P_UNDEFINED = 0;
const P_NULL = 1;
const P_FALSE = 2;
const P_TRUE = 3;
const P_INT = 4;
const P_FLOAT = 5;
const P_ASCII = 6;
const P_UTF8 = 7;
const P_OBJECT = 8;
const P_ARRAY = 9;

/** Containers an item may hold, and array lengths, for this encoding; beyond, the serializer. */
const PLAIN_NODES = 64;
const PLAIN_ARRAY = 64;
/** Strings up to this length are copied code unit by code unit (faster than a Buffer call). */
const SHORT_STRING = 16;

let out = new Uint8Array(1024);
let outView = new DataView(out.buffer);
let outText = Buffer.from(out.buffer);
let at = 0;
/** The containers met in the item being encoded (a container met twice is left to the serializer, which keeps the sharing). */
const met: object[] = [];

/** The bytes of `item` (a view of a buffer the next call reuses), or null when it is not small plain data. */
export function encodePlain(item: object): Uint8Array | null {
  at = 0;
  met.length = 0;
  const ok = writeValue(item);
  met.length = 0;
  return ok ? new Uint8Array(out.buffer, 0, at) : null;
}

function room(bytes: number): void {
  if (at + bytes <= out.length) return;
  let size = out.length * 2;
  while (size < at + bytes) size *= 2;
  const bigger = new Uint8Array(size);
  bigger.set(out.subarray(0, at));
  out = bigger;
  outView = new DataView(out.buffer);
  outText = Buffer.from(out.buffer);
}

function writeValue(value: unknown): boolean {
  switch (typeof value) {
    case 'number':
      if ((value | 0) === value && !Object.is(value, -0)) {
        room(5);
        out[at] = P_INT;
        outView.setInt32(at + 1, value, true);
        at += 5;
      } else {
        room(9);
        out[at] = P_FLOAT;
        outView.setFloat64(at + 1, value, true);
        at += 9;
      }
      return true;
    case 'string':
      writeString(value);
      return true;
    case 'boolean':
      room(1);
      out[at++] = value ? P_TRUE : P_FALSE;
      return true;
    case 'undefined':
      room(1);
      out[at++] = P_UNDEFINED;
      return true;
    case 'object':
      break;
    default:
      return false;
  }
  if (value === null) {
    room(1);
    out[at++] = P_NULL;
    return true;
  }
  if (met.length === PLAIN_NODES || met.includes(value)) return false;
  met.push(value);
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto === Array.prototype) {
    const array = value as unknown[];
    const length = array.length;
    // Holes and extra properties show as a count of own keys other than the length.
    if (length > PLAIN_ARRAY || Object.keys(array).length !== length) return false;
    room(5);
    out[at] = P_ARRAY;
    outView.setUint32(at + 1, length, true);
    at += 5;
    for (let i = 0; i < length; i++) if (!writeValue(array[i])) return false;
    return true;
  }
  if (proto !== Object.prototype) return false;
  const keys = Object.keys(value);
  room(5);
  out[at] = P_OBJECT;
  outView.setUint32(at + 1, keys.length, true);
  at += 5;
  for (const key of keys) {
    // Assigned on arrival, it would set the prototype instead of making the property.
    if (key === '__proto__') return false;
    writeString(key);
    if (!writeValue((value as Record<string, unknown>)[key])) return false;
  }
  return true;
}

function writeString(text: string): void {
  const length = text.length;
  if (length <= SHORT_STRING) {
    room(5 + length);
    let ascii = true;
    for (let i = 0; i < length; i++) {
      const unit = text.charCodeAt(i);
      if (unit > 0x7f) {
        ascii = false;
        break;
      }
      out[at + 5 + i] = unit;
    }
    if (ascii) {
      out[at] = P_ASCII;
      outView.setUint32(at + 1, length, true);
      at += 5 + length;
      return;
    }
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit.
  room(5 + length * 3);
  const bytes = outText.write(text, at + 5, 'utf8');
  out[at] = P_UTF8;
  outView.setUint32(at + 1, bytes, true);
  at += 5 + bytes;
}

let input: Uint8Array = new Uint8Array(0);
let inputView: DataView = new DataView(input.buffer);
let inputText: Buffer = Buffer.from(input.buffer);
let pos = 0;

/** The item `encodePlain` made `length` bytes of, at the start of `bytes`. */
export function decodePlain(bytes: Uint8Array, length: number): unknown {
  if (bytes.buffer !== input.buffer) {
    input = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    inputView = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    inputText = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  pos = 0;
  const value = readValue();
  if (pos !== length) throw new RangeError(`a ThreadQueue item of ${length} bytes was read as ${pos}`);
  return value;
}

function readValue(): unknown {
  const tag = input[pos++];
  switch (tag) {
    case P_INT:
      pos += 4;
      return inputView.getInt32(pos - 4, true);
    case P_FLOAT:
      pos += 8;
      return inputView.getFloat64(pos - 8, true);
    case P_ASCII:
    case P_UTF8:
      return readString(tag);
    case P_TRUE:
      return true;
    case P_FALSE:
      return false;
    case P_NULL:
      return null;
    case P_UNDEFINED:
      return undefined;
    case P_ARRAY: {
      const length = inputView.getUint32(pos, true);
      pos += 4;
      const array: unknown[] = [];
      for (let i = 0; i < length; i++) array.push(readValue());
      return array;
    }
    case P_OBJECT: {
      const count = inputView.getUint32(pos, true);
      pos += 4;
      const object: Record<string, unknown> = {};
      for (let i = 0; i < count; i++) {
        const key = readString(input[pos++] as number);
        object[key] = readValue();
      }
      return object;
    }
    default:
      throw new RangeError(`a ThreadQueue item holds an unknown tag ${String(tag)}`);
  }
}

function readString(tag: number): string {
  const length = inputView.getUint32(pos, true);
  const start = pos + 4;
  pos = start + length;
  if (tag === P_UTF8) return inputText.toString('utf8', start, pos);
  if (length > SHORT_STRING) return inputText.toString('latin1', start, pos);
  let text = '';
  for (let i = start; i < pos; i++) text += String.fromCharCode(input[i] as number);
  return text;
}
