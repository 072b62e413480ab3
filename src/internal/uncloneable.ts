/**
 * Finding what structured clone refuses inside a value, for messages that name it: shared by
 * the pool (arguments and results of jobs) and the links between loops.
 */
import { typeName } from './format.js';

/**
 * Locate where structured clone gives up inside a value.
 *
 * @example
 * ```ts
 * const found: Uncloneable = { path: 'argument 1.callback', type: 'function' };
 * ```
 */
export interface Uncloneable {
  /** Where it is, e.g. `args[1].callback` or `result`. */
  readonly path: string;
  /** Its type, e.g. `function`, `symbol`, `Promise`. */
  readonly type: string;
}

/** Plain containers are searched this many nodes deep, then trusted (cycles end there too). */
const CHECK_BUDGET = 1024;

/** Nodes left to visit in the current check. */
let budget = 0;

/**
 * Find the first value inside `value` that structured clone would refuse, or null when none.
 * Primitives and plain containers are checked by walking them (no copy, so moved buffers are
 * not copied either); other objects are tried with `structuredClone`. Past a budget of nodes
 * the rest is trusted.
 *
 * @example
 * ```ts
 * findUncloneable({ callback() {} }, 'args[0]'); // { path: 'argument 1.callback', type: 'function' }
 * ```
 */
export function findUncloneable(value: unknown, path: string): Uncloneable | null {
  budget = CHECK_BUDGET;
  return walk(value, path);
}

function walk(value: unknown, path: string): Uncloneable | null {
  switch (typeof value) {
    case 'function':
      return { path, type: 'function' };
    case 'symbol':
      return { path, type: 'symbol' };
    case 'object':
      break;
    default:
      return null;
  }
  if (value === null || --budget < 0) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item !== 'object' && typeof item !== 'function' && typeof item !== 'symbol') continue;
      const found = walk(item, `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return null;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) {
    try {
      for (const key in value) {
        const item = (value as Record<string, unknown>)[key];
        if (typeof item !== 'object' && typeof item !== 'function' && typeof item !== 'symbol') continue;
        const found = walk(item, `${path}.${key}`);
        if (found !== null) return found;
      }
    } catch {
      return { path, type: `${typeName(value)} with an unreadable property` };
    }
    return null;
  }
  if (value instanceof Map) {
    for (const [key, item] of value) {
      const found = walk(key, `${path}.keys()`) ?? walk(item, `${path}.get(${typeof key === 'string' ? `'${key}'` : typeName(key)})`);
      if (found !== null) return found;
    }
    return null;
  }
  if (value instanceof Set) {
    for (const item of value) {
      const found = walk(item, `${path}.values()`);
      if (found !== null) return found;
    }
    return null;
  }
  if (value instanceof Date || value instanceof RegExp) return null;
  try {
    structuredClone(value);
    return null;
  } catch {
    return { path, type: typeName(value) };
  }
}

/**
 * Say what `found` is, for messages.
 *
 * @example
 * ```ts
 * describeUncloneable({ path: 'argument 1', type: 'function' }); // 'argument 1 is a function, which cannot be cloned'
 * ```
 */
export function describeUncloneable(found: Uncloneable): string {
  const article = /^[aeiou]/i.test(found.type) ? 'an' : 'a';
  // A function given as an argument itself can be a callback, as comlink makes them.
  const hint = found.type === 'function' && /^argument \d+$/.test(found.path) ? CALLBACK_HINT : '';
  return `${found.path} is ${article} ${found.type}, which cannot be cloned${hint}`;
}

/** How a function argument can cross after all. */
export const CALLBACK_HINT = ' (mark it with Comlink.proxy(fn) to let the other side call it back)';

/**
 * Whether `value` nests containers (arrays, objects, maps, sets) deeper than `limit` levels, the
 * value itself being level 1. Every container is visited, without recursion, once each.
 *
 * @example
 * ```ts
 * nestedDeeperThan([[['deep']]], 2); // true
 * ```
 */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const pending: unknown[] = [value, 1];
  const seen = new Set<object>();
  while (pending.length > 0) {
    const depth = pending.pop() as number;
    const node = pending.pop() as object;
    if (depth > limit) return true;
    if (seen.has(node)) continue;
    seen.add(node);
    if (ArrayBuffer.isView(node) || node instanceof ArrayBuffer || node instanceof Date || node instanceof RegExp) continue;
    const below = depth + 1;
    try {
      if (Array.isArray(node)) {
        for (let i = 0; i < node.length; i++) {
          const item: unknown = node[i];
          if (typeof item === 'object' && item !== null) pending.push(item, below);
        }
      } else if (node instanceof Map) {
        for (const [key, item] of node) {
          if (typeof key === 'object' && key !== null) pending.push(key, below);
          if (typeof item === 'object' && item !== null) pending.push(item, below);
        }
      } else if (node instanceof Set) {
        for (const item of node) if (typeof item === 'object' && item !== null) pending.push(item, below);
      } else {
        for (const key of Object.keys(node)) {
          const item = (node as Record<string, unknown>)[key];
          if (typeof item === 'object' && item !== null) pending.push(item, below);
        }
      }
    } catch {
      // An unreadable property: cloning will say so.
    }
  }
  return false;
}
