/**
 * The name of the function that made a generator object, and where it is suspended, for reprs
 * and messages. JavaScript has no way from a generator object back to its function; V8's
 * inspector protocol has one (the internal properties `[[GeneratorFunction]]` and
 * `[[GeneratorLocation]]`), which a session of this very thread answers at once. The name is
 * asked once per generator function (cached by its prototype, as is the answer that an object is
 * no generator) and only when a repr, an error message or a snapshot needs it; the location
 * (debug mode's reprs) maps a script id to its URL, which only the Debugger domain knows: it is
 * enabled for a moment when an unknown script shows up. Where no inspector is built in, neither
 * is known.
 */
import { createRequire } from 'node:module';
import { sourceLocation } from './positions.js';

type Post = (method: string, params: object) => Record<string, unknown>;

/** The name by the prototype its generator objects share (their function's `prototype`); null for a prototype of objects that are no generators. */
const names = new WeakMap<object, string | null>();
/** Script URLs by script id, as the Debugger domain reported them. */
const scripts = new Map<string, string>();
let post: Post | null | undefined;

function connect(): Post | null {
  try {
    // Loaded on first use only: a thread that never needs a name never opens a session.
    const { Session } = createRequire(import.meta.url)('node:inspector') as typeof import('node:inspector');
    const session = new Session();
    session.connect();
    session.on('Debugger.scriptParsed', ({ params }: { params: { scriptId: string; url: string } }) => {
      scripts.set(params.scriptId, params.url);
    });
    return (method, params) => {
      let failure: Error | null = null;
      let answer: Record<string, unknown> = {};
      // A session of this thread answers before post() returns.
      session.post(method, params, (error: Error | null, result?: object) => {
        failure = error;
        answer = (result ?? {}) as Record<string, unknown>;
      });
      if (failure !== null) throw failure;
      return answer;
    };
  } catch {
    return null;
  }
}

/** The inspector's internal properties of `generator`, or null when they cannot be had. */
function internalProperties(generator: object): Array<{ name: string; value?: { description?: string; value?: unknown } }> | null {
  if (post === undefined) post = connect();
  if (post === null) return null;
  const holder = globalThis as { __multiloopProbe?: object };
  try {
    holder.__multiloopProbe = generator;
    const probe = post('Runtime.evaluate', { expression: 'globalThis.__multiloopProbe', objectGroup: 'multiloop-names' });
    const objectId = (probe.result as { objectId?: string } | undefined)?.objectId;
    if (objectId === undefined) return null;
    const properties = post('Runtime.getProperties', { objectId, ownProperties: true });
    post('Runtime.releaseObjectGroup', { objectGroup: 'multiloop-names' });
    return (properties.internalProperties as Array<{ name: string; value?: { description?: string; value?: unknown } }> | undefined) ?? null;
  } catch {
    return null;
  } finally {
    delete holder.__multiloopProbe;
  }
}

/** The function of `generator` as `fetchUser()`, or null when it cannot be known. */
export function generatorName(generator: object): string | null {
  const proto = Object.getPrototypeOf(generator) as object | null;
  if (proto === null) return null;
  const known = names.get(proto);
  if (known !== undefined) return known;
  const properties = internalProperties(generator);
  if (properties === null) return null;
  const source = properties.find((property) => property.name === '[[GeneratorFunction]]')?.value?.description;
  if (source === undefined) {
    // An iterator that is no generator (a coroutine-like class): its instances share the prototype, and every snapshot would ask again.
    names.set(proto, null);
    return null;
  }
  const match = /^(?:async\s+)?function\s*\*\s*([^\s(]*)/.exec(source) ?? /^\*?\s*\[?([^\s(\]]+)/.exec(source);
  const name = `${match?.[1] || 'anonymous'}()`;
  names.set(proto, name);
  return name;
}

/**
 * Where `generator` is suspended, as `path:line`, or null when that cannot be known (it is done,
 * or no inspector is built in). Costs an inspector round trip: for debug mode's reprs.
 */
export function generatorLocation(generator: object): string | null {
  const where = internalProperties(generator)?.find((property) => property.name === '[[GeneratorLocation]]')?.value?.value as
    | { scriptId: string; lineNumber: number; columnNumber?: number }
    | undefined;
  if (where === undefined || post === null || post === undefined) return null;
  if (!scripts.has(where.scriptId)) {
    try {
      // Enabling the Debugger domain reports every script, at once; it is disabled right after.
      post('Debugger.enable', {});
      post('Debugger.disable', {});
    } catch {
      return null;
    }
  }
  const url = scripts.get(where.scriptId);
  if (url === undefined || url === '') return null;
  // `path:line`, as the source has it: the column only finds the place in the code that runs.
  return sourceLocation(url, where.lineNumber + 1, (where.columnNumber ?? 0) + 1).replace(/:\d+$/, '');
}
