/**
 * Values crossing a thread as arguments and results, beyond what structured clone keeps.
 *
 * Structured clone copies an object of a class as a plain object (its methods and prototype
 * stay behind) and an error inside a value without its class and own properties. So a value
 * that holds instances of classes registered with `registerClass()`, or errors, is encoded
 * first: a copy in which each of them is a tagged record, wrapped in an envelope the receiving
 * side recognises and decodes, rebuilding them (shared references and cycles kept). A value
 * that holds neither crosses as it is, without a copy. An instance of a class that was not
 * registered and has methods would arrive crippled, far from here: it is refused with a
 * TypeError that names the class. A ThreadQueue crosses as its shared memory and arrives as the
 * same queue.
 *
 * The records are told from data by the key `WIRE`, and only the encoder decides what is a
 * record: a plain object of the application that has that key itself (JSON from a request body,
 * say) is escaped in the copy (`{ [WIRE]: 'plain', fields }`) and arrives as the same plain
 * object, never as the registered instance, error, Buffer or LoopRef it may imitate. A value
 * that crosses without a copy is read by the receiver at its top only (is it an envelope?), so
 * it is copied, escaped, when it has the key itself; the same key deeper inside it is data that
 * nobody reads. An envelope is a plain object (an array's own `WIRE` key is data).
 */
import { classNamed, classOf, anyClassRegistered, copyFields, type ClassEntry } from './classes.js';
import { bufferOf, bytesOf } from './buffers.js';
import { decodeError, encodeError, type EncodedError } from './errors.js';
import { isNativeError } from 'node:util/types';
// A cycle (thread-queue.ts encodes its items with this module): both only use each other's exports in calls.
import { ThreadQueue } from '../thread-queue.js';

/** The key of the records the encoding makes; application data that uses it is escaped. */
export const WIRE = '\u0000multiloop';

/** How the values of a prototype cross: as structured clone copies them, or not at all. */
const enum Kind {
  /** A built-in type: structured clone decides. */
  Native,
  /** A class of the application whose prototypes hold methods: refused unless registered. */
  Methods,
  /** A class of the application with fields only: copied as a plain object, as structured clone does. */
  Fields,
}

const kinds = new WeakMap<object, Kind>();

/**
 * Prepare `value` to cross a thread: itself, or an envelope for `fromWire`. `what` names it in
 * errors (`'argument 2'`, `'the result'`). Throws a TypeError for an instance of a class that
 * has methods and was not registered.
 *
 * @example
 * ```ts
 * port.postMessage(toWire(result, 'the result'));
 * ```
 */
export function toWire(value: unknown, what: string): unknown {
  if (typeof value !== 'object' || value === null) return value;
  // `fromWire` reads only the top of a value that crosses as it is: there, and only there, data
  // with the key must be escaped (read as `fromWire` reads it; a load is cheaper than Object.hasOwn).
  const keyed = (value as Record<string, unknown>)[WIRE] !== undefined && !Array.isArray(value);
  if (!keyed && !needsEncoding(value, what)) return value;
  return { [WIRE]: 'value', value: new Encoder(what).copy(value) };
}

/**
 * The value `toWire` prepared, rebuilt in this thread; anything else as it is. Throws a
 * TypeError when it holds an instance of a class this thread did not register.
 *
 * @example
 * ```ts
 * const args = received.map(fromWire);
 * ```
 */
export function fromWire(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const envelope = value as Record<string, unknown>;
  const tag = envelope[WIRE];
  // An envelope is a plain object: an array's own key is data.
  if (tag === undefined || Array.isArray(value)) return value;
  if (tag === 'value') return new Decoder().decode(envelope.value);
  if (tag === 'callback' && callbackDecoder !== null) return callbackDecoder(envelope);
  return value;
}

/**
 * The method by which an object of multiloop's crosses as a record of its own (a LoopThread, a
 * pool, a parent loop: a LoopRef over a new link), made while the value is encoded; the ports in
 * it are marked to be moved. `what` names the value in errors.
 */
export const CROSSES: unique symbol = Symbol('multiloop.crosses');

/** An object that crosses through `CROSSES`. */
export interface Crossing {
  [CROSSES](what: string): Record<string, unknown>;
}

/** Makes the LoopRef a record of `CROSSES` arrives as (set by loop-thread.ts, which owns links). */
let loopDecoder: ((record: Record<string, unknown>) => unknown) | null = null;

/**
 * Let `decode` turn the records that LoopThreads, pools and parent loops cross as
 * (`{ [WIRE]: 'loop' | 'pool', ... }`) into LoopRefs of this thread.
 *
 * @internal
 */
export function _setLoopDecoder(decode: (record: Record<string, unknown>) => unknown): void {
  loopDecoder = decode;
}

function crosses(value: object): value is Crossing {
  return typeof (value as Partial<Crossing>)[CROSSES] === 'function';
}

/** Makes the callable a `Comlink.proxy(fn)` argument arrives as (set by comlink.ts, which owns comlink). */
let callbackDecoder: ((record: Record<string, unknown>) => unknown) | null = null;

/**
 * Let `decode` turn the records of `Comlink.proxy(fn)` arguments (`{ [WIRE]: 'callback', port }`)
 * into callables.
 *
 * @internal
 */
export function _setCallbackDecoder(decode: (record: Record<string, unknown>) => unknown): void {
  callbackDecoder = decode;
}

/** Whether `root` holds errors or registered instances; throws for an unregistered class with methods. */
function needsEncoding(root: object, what: string): boolean {
  const pending: object[] = [root];
  const seen = new Set<object>();
  let found = false;
  while (pending.length > 0) {
    const node = pending.pop() as object;
    if (seen.has(node)) continue;
    seen.add(node);
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) push(pending, node[i]);
      continue;
    }
    const proto = Object.getPrototypeOf(node) as object | null;
    if (proto === Object.prototype || proto === null) {
      pushValues(pending, node);
    } else if (node instanceof Map) {
      for (const [key, item] of node) {
        push(pending, key);
        push(pending, item);
      }
    } else if (node instanceof Set) {
      for (const item of node) push(pending, item);
    } else if (isNativeError(node) || node instanceof Error || Buffer.isBuffer(node) || crosses(node) || node instanceof ThreadQueue) {
      found = true;
    } else if (anyClassRegistered() && classOf(node) !== undefined) {
      found = true;
    } else {
      switch (kindOf(proto)) {
        case Kind.Methods:
          throw unregistered(proto, what);
        case Kind.Fields:
          pushValues(pending, node);
          break;
        default:
          break;
      }
    }
  }
  return found;
}

/** The error for an instance of a class with methods that nobody registered. */
function unregistered(proto: object, what: string): TypeError {
  const name = (proto.constructor as { name?: string } | undefined)?.name || 'anonymous';
  return new TypeError(
    `${what} holds an instance of class ${name}, which would arrive as a plain object without its methods: ` +
      `call registerClass(${name}) in a module that both threads import`,
  );
}

function push(pending: object[], value: unknown): void {
  if (typeof value === 'object' && value !== null) pending.push(value);
}

function pushValues(pending: object[], node: object): void {
  for (const key of Object.keys(node)) push(pending, (node as Record<string, unknown>)[key]);
}

/** How instances with this prototype cross (cached per prototype: it never changes). */
function kindOf(proto: object): Kind {
  const known = kinds.get(proto);
  if (known !== undefined) return known;
  let kind = Kind.Fields;
  for (let p: object | null = proto; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    const ctor = Object.getOwnPropertyDescriptor(p, 'constructor')?.value as unknown;
    if (typeof ctor === 'function' && isNative(ctor)) {
      // A built-in, or a class of the application extending one with nothing of its own.
      kind = kind === Kind.Methods ? Kind.Methods : Kind.Native;
      break;
    }
    for (const key of Reflect.ownKeys(p)) {
      if (key === 'constructor') continue;
      const descriptor = Object.getOwnPropertyDescriptor(p, key);
      if (descriptor !== undefined && (typeof descriptor.value === 'function' || descriptor.get !== undefined || descriptor.set !== undefined)) {
        kind = Kind.Methods;
      }
    }
  }
  kinds.set(proto, kind);
  return kind;
}

/** Whether `fn` is built into the engine or Node. */
export function isNative(fn: unknown): boolean {
  return typeof fn === 'function' && /\{\s*\[native code\]\s*\}$/.test(Function.prototype.toString.call(fn));
}

/** Copies a value, each error and registered instance made a tagged record. */
class Encoder {
  readonly #made = new Map<object, unknown>();
  readonly #what: string;

  constructor(what: string) {
    this.#what = what;
  }

  copy(value: unknown): unknown {
    if (typeof value !== 'object' || value === null) return value;
    const made = this.#made.get(value);
    if (made !== undefined) return made;
    if (Array.isArray(value)) {
      const out = new Array<unknown>(value.length);
      this.#made.set(value, out);
      for (let i = 0; i < value.length; i++) if (i in value) out[i] = this.copy(value[i]);
      return out;
    }
    if (value instanceof Map) {
      const out = new Map<unknown, unknown>();
      this.#made.set(value, out);
      for (const [key, item] of value) out.set(this.copy(key), this.copy(item));
      return out;
    }
    if (value instanceof Set) {
      const out = new Set<unknown>();
      this.#made.set(value, out);
      for (const item of value) out.add(this.copy(item));
      return out;
    }
    if (isNativeError(value) || value instanceof Error) {
      const record = { [WIRE]: 'error', error: encodeError(value) };
      this.#made.set(value, record);
      return record;
    }
    if (Buffer.isBuffer(value)) {
      const record = { [WIRE]: 'buffer', bytes: bytesOf(value) };
      this.#made.set(value, record);
      return record;
    }
    if (crosses(value)) {
      const record = value[CROSSES](this.#what);
      this.#made.set(value, record);
      return record;
    }
    if (value instanceof ThreadQueue) {
      const record = { [WIRE]: 'threadqueue', queue: value._toWire() };
      this.#made.set(value, record);
      return record;
    }
    const proto = Object.getPrototypeOf(value) as object | null;
    const entry = proto === Object.prototype || proto === null ? undefined : classOf(value);
    if (entry !== undefined) {
      const record: { [WIRE]: string; name: string; data?: unknown } = { [WIRE]: 'class', name: entry.name };
      this.#made.set(value, record);
      record.data = this.copy(entry.serialize(value));
      return record;
    }
    if (proto !== Object.prototype && proto !== null) {
      const kind = kindOf(proto);
      if (kind === Kind.Native) return value;
      if (kind === Kind.Methods) throw unregistered(proto, this.#what);
    }
    // A plain object, or a class with fields only (structured clone would copy its own properties).
    const out: Record<string, unknown> = proto === null ? (Object.create(null) as Record<string, unknown>) : {};
    // Data that has the key of records is escaped: the receiver reads it as data, whatever it says.
    const copied = Object.hasOwn(value, WIRE) ? { [WIRE]: 'plain', fields: out } : out;
    this.#made.set(value, copied);
    for (const key of Object.keys(value)) {
      Object.defineProperty(out, key, { value: this.copy((value as Record<string, unknown>)[key]), enumerable: true, writable: true, configurable: true });
    }
    return copied;
  }
}

/** Rebuilds what the Encoder made, in place (the copy that arrived is this thread's own). */
class Decoder {
  readonly #made = new Map<object, unknown>();

  decode(value: unknown): unknown {
    if (typeof value !== 'object' || value === null) return value;
    if (this.#made.has(value)) return this.#made.get(value);
    if (Array.isArray(value)) {
      this.#made.set(value, value);
      for (let i = 0; i < value.length; i++) if (i in value) value[i] = this.decode(value[i]);
      return value;
    }
    if (value instanceof Map) {
      const out = new Map<unknown, unknown>();
      this.#made.set(value, out);
      for (const [key, item] of value) out.set(this.decode(key), this.decode(item));
      return out;
    }
    if (value instanceof Set) {
      const out = new Set<unknown>();
      this.#made.set(value, out);
      for (const item of value) out.add(this.decode(item));
      return out;
    }
    const proto = Object.getPrototypeOf(value) as object | null;
    if (proto !== Object.prototype && proto !== null) return value;
    const record = value as Record<string, unknown>;
    switch (record[WIRE]) {
      case 'error': {
        const error = decodeError(record.error as EncodedError);
        this.#made.set(value, error);
        return error;
      }
      case 'class':
        return this.#instance(record);
      case 'buffer': {
        const buffer = bufferOf(record.bytes);
        this.#made.set(value, buffer);
        return buffer;
      }
      case 'loop':
      case 'pool': {
        if (loopDecoder === null) throw new TypeError('a LoopRef arrived where multiloop cannot serve it');
        const ref = loopDecoder(record);
        this.#made.set(value, ref);
        return ref;
      }
      case 'threadqueue': {
        const queue = ThreadQueue._fromWire(record.queue);
        this.#made.set(value, queue);
        return queue;
      }
      case 'plain':
        return this.#plain(record);
      default:
        break;
    }
    this.#made.set(value, value);
    return this.#fields(record);
  }

  /** Decode the values of `record`'s own keys in place: it is data, whatever keys it has. */
  #fields(record: Record<string, unknown>): Record<string, unknown> {
    for (const key of Object.keys(record)) record[key] = this.decode(record[key]);
    return record;
  }

  /** The plain object the Encoder escaped (it has the key of records among its own). */
  #plain(record: Record<string, unknown>): Record<string, unknown> {
    const { fields } = record;
    const proto = typeof fields === 'object' && fields !== null ? (Object.getPrototypeOf(fields) as object | null) : undefined;
    if (proto !== Object.prototype && proto !== null) {
      throw new TypeError(`escaped plain data arrived with ${fields === null ? 'null' : typeof fields} for its fields, not a plain object`);
    }
    const data = fields as Record<string, unknown>;
    this.#made.set(record, data);
    this.#made.set(data, data);
    return this.#fields(data);
  }

  #instance(record: Record<string, unknown>): object {
    const { name } = record;
    if (typeof name !== 'string') throw new TypeError(`an instance of a registered class arrived without the name of its class (got ${typeof name})`);
    const entry: ClassEntry | undefined = classNamed(name);
    if (entry === undefined) {
      throw new TypeError(
        `an instance of class '${name}' arrived, but no class is registered as '${name}' in this thread: ` +
          'call registerClass() for it in a module this thread imports',
      );
    }
    if (entry.custom) {
      const instance = entry.deserialize(this.decode(record.data));
      this.#made.set(record, instance);
      return instance;
    }
    // Made before its fields, so that a field pointing back at it finds it.
    const instance = Object.create(entry.cls.prototype as object) as Record<string, unknown>;
    this.#made.set(record, instance);
    const data = this.decode(record.data);
    if (typeof data !== 'object' || data === null) {
      throw new TypeError(`an instance of class '${name}' arrived with ${data === null ? 'null' : typeof data} for its fields, not an object`);
    }
    copyFields(instance, data);
    return instance;
  }
}
