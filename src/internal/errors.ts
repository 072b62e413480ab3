/**
 * Errors as plain data, so they can cross a thread and arrive as what they were.
 *
 * `structuredClone` alone keeps only the built-in classes and drops own properties, so an
 * error is first encoded into a tree of plain objects: the class to rebuild (the nearest one
 * in its prototype chain that this module knows, by name), `name`, `message`, `stack`, `cause`,
 * the `errors` of an AggregateError, and the own enumerable properties that can be cloned.
 * The receiving thread has its own copy of the library, so classes are matched by name: the
 * library's, the built-ins, and the classes registered with `registerClass()` in both threads
 * (a receiver that does not know a registered class gets the nearest class it knows).
 */
import { bufferOf, bytesOf } from './buffers.js';
import { isNativeError } from 'node:util/types';
import * as exceptions from '../exceptions.js';
import { ExceptionGroup, IncompleteReadError, LimitOverrunError, SystemExit } from '../exceptions.js';
import { classNamed, classOf } from './classes.js';
import { typeName } from './format.js';

/** Nested errors (causes, group members, error-valued properties) deeper than this cross shallow. */
export const MAX_ERROR_DEPTH = 8;

/** An error as plain data: what `encodeError` returns and `decodeError` takes. */
export type EncodedError = EncodedErrorObject | EncodedThrownValue | EncodedErrorRef;

/** An Error instance as plain data. */
export interface EncodedErrorObject {
  readonly kind: 'error';
  /** The registry name of the class to rebuild: the nearest known class in the prototype chain. */
  readonly base: string;
  /** When `base` is a class registered with registerClass(): the nearest library or built-in class, for a thread that does not know it. */
  readonly fallback?: string;
  readonly name: string;
  readonly message: string;
  /** The original stack, or null when the error had no string stack. */
  readonly stack: string | null;
  /** Present only when the original had an own `cause`. */
  readonly cause?: EncodedError;
  /** The members of an AggregateError (or ExceptionGroup). */
  readonly errors?: EncodedError[];
  /** Own enumerable properties: cloneable values as they are, errors encoded (see `errorKeys`). */
  readonly props?: Record<string, unknown>;
  /** The keys of `props` that hold encoded errors. */
  readonly errorKeys?: string[];
  /** The keys of `props` that hold the bytes of a Buffer (made a Buffer again on arrival). */
  readonly bufferKeys?: string[];
}

/** A thrown value that is not an Error: itself when cloneable, else a description. */
export interface EncodedThrownValue {
  readonly kind: 'value';
  readonly value: unknown;
}

/** A second sighting of an error already encoded in the same tree (shared or circular). */
export interface EncodedErrorRef {
  readonly kind: 'ref';
  /** The position of the error in the order the encoder met errors, from 0. */
  readonly index: number;
}

type ErrorClass = abstract new (...args: never[]) => Error;
type Builder = (message: string, props: Record<string, unknown>) => Error;

const BUILT_IN_CLASSES: readonly ErrorClass[] = [
  Error,
  TypeError,
  RangeError,
  ReferenceError,
  SyntaxError,
  EvalError,
  URIError,
  AggregateError,
];

const BUILT_IN_NAMES = new Set(BUILT_IN_CLASSES.map((cls) => cls.name));

/** Every error class that crosses as itself, by name: the built-ins, then src/exceptions.ts. */
const CLASSES_BY_NAME = new Map<string, ErrorClass>();
const NAMES_BY_CLASS = new Map<unknown, string>();
for (const candidate of [...BUILT_IN_CLASSES, ...Object.values(exceptions)]) {
  if (typeof candidate !== 'function') continue;
  if (candidate !== Error && !(candidate.prototype instanceof Error)) continue;
  CLASSES_BY_NAME.set(candidate.name, candidate as ErrorClass);
  NAMES_BY_CLASS.set(candidate, candidate.name);
}

/** Classes whose constructor takes more than a message. */
const BUILDERS = new Map<ErrorClass, Builder>([
  [AggregateError, (message) => new AggregateError([], message)],
  // The real members are set once decoded; the constructor refuses an empty list.
  [ExceptionGroup, (message) => new ExceptionGroup(message, [new Error()])],
  [SystemExit, (_message, props) => new SystemExit(typeof props.code === 'number' ? props.code : 0)],
  [
    IncompleteReadError,
    (_message, props) =>
      new IncompleteReadError(
        props.partial instanceof Uint8Array ? props.partial : new Uint8Array(0),
        typeof props.expected === 'number' ? props.expected : null,
      ),
  ],
  [
    LimitOverrunError,
    (message, props) => new LimitOverrunError(message, typeof props.consumed === 'number' ? props.consumed : 0),
  ],
]);

/** Keys carried by dedicated fields, or rebuilt from them, rather than as properties. */
const RESERVED_KEYS = new Set(['name', 'message', 'stack', 'cause', 'errors']);

/**
 * Encode `error` (anything that was thrown) into structured-cloneable plain data.
 *
 * Never throws: a property that cannot be read or cloned becomes a description such as
 * `'[uncloneable function]'`.
 *
 * @example
 * ```ts
 * port.postMessage({ failed: encodeError(error) });
 * ```
 */
export function encodeError(error: unknown): EncodedError {
  try {
    return new Encoder().encode(error, 0);
  } catch {
    // Only a hostile object (a Proxy whose traps throw) gets here; the caller is already failing.
    return { kind: 'value', value: '[unencodable error]' };
  }
}

/**
 * Rebuild what `encodeError` encoded, in this thread: library and built-in classes arrive as
 * themselves, any other class as the nearest known ancestor (plain Error at least) with the
 * original `name`; `stack` is the original stack.
 *
 * @example
 * ```ts
 * port.on('message', (msg) => future.setException(decodeError(msg.failed)));
 * ```
 */
export function decodeError(encoded: EncodedError): unknown {
  return new Decoder().decode(encoded);
}

class Encoder {
  /** Errors met so far, by their position: refs point back into this order. */
  readonly #seen = new Map<object, number>();

  encode(value: unknown, depth: number): EncodedError {
    if (!isError(value)) return { kind: 'value', value: cloneable(value) };
    const index = this.#seen.get(value);
    if (index !== undefined) return { kind: 'ref', index };
    this.#seen.set(value, this.#seen.size);

    const base = knownBase(value);
    const stack = read(value, 'stack');
    const encoded: {
      -readonly [K in keyof EncodedErrorObject]: EncodedErrorObject[K];
    } = {
      kind: 'error',
      base,
      name: String(read(value, 'name') ?? 'Error'),
      message: String(read(value, 'message') ?? ''),
      stack: typeof stack === 'string' ? stack : null,
    };
    const registered = classOf(value, Error.prototype);
    if (registered !== undefined) {
      encoded.fallback = base;
      encoded.base = registered.name;
    }
    const nested = depth < MAX_ERROR_DEPTH;
    if (nested && Object.hasOwn(value, 'cause')) encoded.cause = this.encode(read(value, 'cause'), depth + 1);
    const members = read(value, 'errors');
    if (nested && value instanceof AggregateError && Array.isArray(members)) {
      encoded.errors = members.map((member) => this.encode(member, depth + 1));
    }
    this.#encodeProps(value, encoded, nested ? depth + 1 : -1);
    return encoded;
  }

  /** `depth` is that of nested errors, or -1 when they are too deep to keep. */
  #encodeProps(error: Error, encoded: { props?: Record<string, unknown>; errorKeys?: string[]; bufferKeys?: string[] }, depth: number): void {
    let keys: string[];
    try {
      keys = Object.keys(error);
    } catch {
      return;
    }
    for (const key of keys) {
      if (RESERVED_KEYS.has(key) || (key === 'exceptions' && error instanceof ExceptionGroup)) continue;
      const value = read(error, key);
      if (isError(value)) {
        if (depth < 0) continue;
        (encoded.errorKeys ??= []).push(key);
        define((encoded.props ??= {}), key, this.encode(value, depth), true);
      } else if (Buffer.isBuffer(value)) {
        (encoded.bufferKeys ??= []).push(key);
        define((encoded.props ??= {}), key, bytesOf(value), true);
      } else {
        define((encoded.props ??= {}), key, cloneable(value), true);
      }
    }
  }
}

class Decoder {
  /** Decoded errors in the encoder's order, so refs resolve to the same object. */
  readonly #made: Error[] = [];

  decode(encoded: EncodedError): unknown {
    if (typeof encoded !== 'object' || encoded === null) return encoded;
    switch (encoded.kind) {
      case 'value':
        return encoded.value;
      case 'ref':
        // An index from the wire: one of the errors made so far, never a property of the array (`constructor`...).
        return Number.isInteger(encoded.index) && encoded.index >= 0 ? this.#made[encoded.index] : undefined;
      case 'error':
        return this.#decodeError(encoded);
      default:
        return encoded;
    }
  }

  #decodeError(encoded: EncodedErrorObject): Error {
    const props = encoded.props ?? {};
    const error = build(encoded.base, encoded.fallback, encoded.message, props);
    // Registered before its parts, so a circular ref inside them finds it.
    this.#made.push(error);

    if (error.name !== encoded.name) error.name = encoded.name;
    if (error.message !== encoded.message) define(error, 'message', encoded.message, false);
    if (encoded.stack === null) delete error.stack;
    else define(error, 'stack', encoded.stack, false);
    if (encoded.cause !== undefined) define(error, 'cause', this.decode(encoded.cause), false);
    if (error instanceof AggregateError) {
      const members = (Array.isArray(encoded.errors) ? encoded.errors : []).map((member) => this.decode(member));
      define(error, 'errors', members, false);
      if (error instanceof ExceptionGroup) define(error, 'exceptions', Object.freeze([...members]), true);
    }
    const errorKeys = Array.isArray(encoded.errorKeys) ? encoded.errorKeys : [];
    const bufferKeys = Array.isArray(encoded.bufferKeys) ? encoded.bufferKeys : [];
    // Defined, not assigned: a key `__proto__` stays a property, it does not choose the prototype.
    for (const key of Object.keys(props)) {
      const value = errorKeys.includes(key) ? this.decode(props[key] as EncodedError) : bufferKeys.includes(key) ? bufferOf(props[key]) : props[key];
      define(error, key, value, true);
    }
    return error;
  }
}

function isError(value: unknown): value is Error {
  return value instanceof Error || isNativeError(value);
}

/** The registry name of the nearest class in `error`'s prototype chain that crosses as itself. */
function knownBase(error: Error): string {
  for (let proto: unknown = Object.getPrototypeOf(error); proto !== null; proto = Object.getPrototypeOf(proto)) {
    const ctor = (proto as { constructor?: unknown }).constructor;
    const name = NAMES_BY_CLASS.get(ctor);
    if (name !== undefined) return name;
    // A built-in of another realm (a vm context) has its own constructors: match it by name.
    if (typeof ctor === 'function' && BUILT_IN_NAMES.has(ctor.name) && isNativeError(error)) return ctor.name;
  }
  return 'Error';
}

function build(base: string, fallback: string | undefined, message: string, props: Record<string, unknown>): Error {
  // The stack is replaced by the original one: skip capturing a local one.
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const registered = fallback === undefined ? undefined : classNamed(base);
  if (registered !== undefined) {
    try {
      // No user constructor runs: the own properties that crossed are set afterwards.
      return Reflect.construct(Error, [message], registered.cls) as Error;
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
  const cls = CLASSES_BY_NAME.get(fallback ?? base) ?? Error;
  try {
    const builder = BUILDERS.get(cls);
    if (builder !== undefined) return builder(message, props);
    return new (cls as new (message: string) => Error)(message);
  } catch {
    // A class that refuses these arguments still arrives as itself.
    return Reflect.construct(Error, [message], cls) as Error;
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function define(target: object, key: string, value: unknown, enumerable: boolean): void {
  try {
    Object.defineProperty(target, key, { value, writable: true, enumerable, configurable: true });
  } catch {
    // A non-configurable property set by the constructor keeps its rebuilt value.
  }
}

/** Read `key` of `target`; a throwing getter gives its description instead. */
function read(target: object, key: string): unknown {
  try {
    return (target as Record<string, unknown>)[key];
  } catch {
    return `[unreadable ${key}]`;
  }
}

/** `value` itself when `structuredClone` accepts it, else a description of it. */
function cloneable(value: unknown): unknown {
  switch (typeof value) {
    case 'function':
      return '[uncloneable function]';
    case 'symbol':
      return '[uncloneable symbol]';
    case 'object':
      if (value === null) return value;
      try {
        structuredClone(value);
        return value;
      } catch {
        return `[uncloneable ${typeName(value)}]`;
      }
    default:
      return value;
  }
}
