/**
 * Short, Python-flavoured descriptions of values for error messages and reprs.
 */
import { inspect } from 'node:util';

const MAX_STRING = 60;

/** Node's `util.inspect.custom`: an object with this method is shown by what it returns. */
export const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/** Describe `value` the way Python's reprlib would: short, quoted strings, `Name('msg')` errors. */
export function repr(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
    case 'boolean':
    case 'undefined':
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'symbol':
      return value.toString();
    case 'function':
      return describeCallback(value as (...args: never[]) => unknown);
    default:
      break;
  }
  if (value === null) return 'null';
  if (value instanceof Error) {
    return value.message === '' ? `${value.name}()` : `${value.name}(${quote(value.message)})`;
  }
  const own = (value as { toString?: unknown }).toString;
  if (typeof own === 'function' && own !== Object.prototype.toString && own !== Array.prototype.toString) {
    return String(value);
  }
  return inspect(value, { depth: 1, breakLength: Infinity, maxArrayLength: 6, maxStringLength: MAX_STRING });
}

/** The name under which a callback is reported: `name()` or `anonymous()`. */
export function describeCallback(callback: (...args: never[]) => unknown): string {
  const name = callback.name === '' ? 'anonymous' : callback.name.replace(/^bound /, '');
  return `${name}()`;
}

/** The type of `value` as a message names it: `number`, `null`, `Array`, `Future`, ... */
export function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object' && typeof value !== 'function') return typeof value;
  const ctor = (value as { constructor?: { name?: unknown } }).constructor;
  return ctor !== undefined && typeof ctor.name === 'string' && ctor.name !== '' ? ctor.name : typeof value;
}

function quote(text: string): string {
  const cut = text.length > MAX_STRING ? `${text.slice(0, MAX_STRING - 3)}...` : text;
  return `'${cut.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;
}

/** Control characters, and the invisible ones that reorder or break lines on a terminal. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` safe to print on a terminal: control characters (escape sequences that retitle the
 * window, clear the screen or write the clipboard; newlines that forge lines) and bidirectional
 * overrides shown as escapes (`\n`, `\x1b`, `\u202e`) instead of acting.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (char) => {
    if (char === '\n') return '\\n';
    if (char === '\r') return '\\r';
    if (char === '\t') return '\\t';
    const code = char.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
