/**
 * The name of the function that made a generator object, for reprs and messages. JavaScript has
 * no way from a generator object back to its function; V8's inspector protocol has one (the
 * internal property `[[GeneratorFunction]]`), which a session of this very thread answers at
 * once. Asked once per generator function (cached by its prototype) and only when a repr or an
 * error message needs it; where no inspector is built in, the name is simply not known.
 */
import { createRequire } from 'node:module';

type Post = (method: string, params: object) => Record<string, unknown>;

/** The name by the prototype its generator objects share (their function's `prototype`). */
const names = new WeakMap<object, string>();
let post: Post | null | undefined;

function connect(): Post | null {
  try {
    // Loaded on first use only: a thread that never needs a name never opens a session.
    const { Session } = createRequire(import.meta.url)('node:inspector') as typeof import('node:inspector');
    const session = new Session();
    session.connect();
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

/** The function of `generator` as `fetchUser()`, or null when it cannot be known. */
export function generatorName(generator: object): string | null {
  const proto = Object.getPrototypeOf(generator) as object | null;
  if (proto === null) return null;
  const known = names.get(proto);
  if (known !== undefined) return known;
  if (post === undefined) post = connect();
  if (post === null) return null;
  let name: string | null = null;
  const holder = globalThis as { __multiloopProbe?: object };
  try {
    holder.__multiloopProbe = generator;
    const probe = post('Runtime.evaluate', { expression: 'globalThis.__multiloopProbe', objectGroup: 'multiloop-names' });
    const objectId = (probe.result as { objectId?: string } | undefined)?.objectId;
    if (objectId !== undefined) {
      const properties = post('Runtime.getProperties', { objectId, ownProperties: true });
      const internal = properties.internalProperties as Array<{ name: string; value?: { description?: string } }> | undefined;
      const source = internal?.find((property) => property.name === '[[GeneratorFunction]]')?.value?.description ?? '';
      const match = /^(?:async\s+)?function\s*\*\s*([^\s(]*)/.exec(source) ?? /^\*?\s*\[?([^\s(\]]+)/.exec(source);
      name = `${match?.[1] || 'anonymous'}()`;
    }
    post('Runtime.releaseObjectGroup', { objectGroup: 'multiloop-names' });
  } catch {
    name = null;
  } finally {
    delete holder.__multiloopProbe;
  }
  if (name !== null) names.set(proto, name);
  return name;
}
