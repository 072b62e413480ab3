/**
 * Context variables that travel with calls to other threads and processes
 * (`registerContextVar`). A call carries the caller's values of the registered variables set in
 * its current context, as `[names, values]` prepared to cross (wire.ts); the callee runs in a copy
 * of its own context with those values set. Nothing comes back. While no variable is registered,
 * nothing is looked at: `travelling.size` is the one check a call pays.
 */
import { copyContext, type Context, type ContextVar, type VarMap } from '../contextvars.js';
import { describeUncloneable, findUncloneable } from './uncloneable.js';
import { fromWire, toWire } from './wire.js';

/** The registered variables by the name they travel under; empty: nothing travels. */
export const travelling = new Map<string, ContextVar<unknown>>();
const namesOf = new Map<ContextVar<unknown>, string>();

/** The values a call carries: the names of the variables, and their values prepared to cross. */
export type CarriedContext = readonly [names: readonly string[], values: readonly unknown[]];

/**
 * Let `variable` travel under `name`; a TypeError when another variable travels under that name,
 * or this one under another name.
 */
export function registerTravelling(variable: ContextVar<unknown>, name: string): void {
  const other = travelling.get(name);
  if (other !== undefined && other !== variable) {
    throw new TypeError(`registerContextVar(): another context variable is registered as '${name}' (a name stands for one variable in every thread)`);
  }
  const known = namesOf.get(variable);
  if (known !== undefined && known !== name) throw new TypeError(`registerContextVar(): ${variable} is registered already, as '${known}'`);
  travelling.set(name, variable);
  namesOf.set(variable, name);
}

/**
 * The values of registered variables set in `vars` (a caller's context), prepared to cross; null
 * when none is set. A value that cannot cross is a TypeError naming the variable.
 */
export function carriedContext(vars: VarMap): CarriedContext | null {
  if (vars === null) return null;
  let names: string[] | null = null;
  let values: unknown[] | null = null;
  for (const [name, variable] of travelling) {
    if (!vars.has(variable)) continue;
    const value = vars.get(variable);
    const what = `its value`;
    const found = findUncloneable(value, what);
    if (found !== null) throw new TypeError(`context variable '${name}' cannot go to another thread: ${describeUncloneable(found)}`);
    let wired: unknown;
    try {
      wired = toWire(value, what);
    } catch (error) {
      throw new TypeError(`context variable '${name}' cannot go to another thread: ${(error as Error).message}`, { cause: error });
    }
    (names ??= []).push(name);
    (values ??= []).push(wired);
  }
  return names === null ? null : [names, values as unknown[]];
}

/**
 * A copy of the current context with the values `carried` set (those of variables this thread
 * registered; others are ignored), for a call that arrived with them.
 */
export function contextFor(carried: CarriedContext): Context {
  const context = copyContext();
  const [names, values] = carried;
  context.run(() => {
    for (let i = 0; i < names.length; i++) {
      const variable = travelling.get(names[i] as string);
      if (variable !== undefined) variable.set(fromWire(values[i]));
    }
  });
  return context;
}

/** Whether `value` is a CarriedContext as it arrives (a hostile or broken peer may send anything). */
export function isCarriedContext(value: unknown): value is CarriedContext {
  return Array.isArray(value) && value.length === 2 && Array.isArray(value[0]) && Array.isArray(value[1]) && value[0].length === value[1].length;
}
