/**
 * Context variables and AsyncLocalStorage stores that travel with calls to other threads and
 * processes (`registerContextVar`, `registerAsyncLocalStorage`). A call carries the caller's
 * values of the registered variables set in its current context and the stores of the registered
 * storages in force, as `[names, values]` prepared to cross (wire.ts); the callee runs in a copy
 * of its own context with those values set, inside `run()` of those storages
 * (`runInCarriedStores`). Nothing comes back. While nothing is registered, nothing is looked at:
 * `travelling.size` is the one check a call pays. One name stands for one variable or storage.
 */
import type { AsyncLocalStorage } from 'node:async_hooks';
import { copyContext, ContextVar, type Context, type VarMap } from '../contextvars.js';
import { describeUncloneable, findUncloneable } from './uncloneable.js';
import { fromWire, toWire } from './wire.js';

/** What travels under a name: a context variable's value, or a storage's store. */
type Travelling = ContextVar<unknown> | AsyncLocalStorage<unknown>;

/** The registered variables and storages by the name they travel under; empty: nothing travels. */
export const travelling = new Map<string, Travelling>();
const namesOf = new Map<Travelling, string>();
/** The registered storages, with their names (a subset of `travelling`). */
const storages: Array<readonly [name: string, storage: AsyncLocalStorage<unknown>]> = [];

/** The values a call carries: the names of the variables, and their values prepared to cross. */
export type CarriedContext = readonly [names: readonly string[], values: readonly unknown[]];

/**
 * Let `variable` travel under `name`; a TypeError when another variable travels under that name,
 * or this one under another name.
 */
export function registerTravelling(variable: ContextVar<unknown>, name: string): void {
  const other = travelling.get(name);
  if (other !== undefined && other !== variable) {
    const what = other instanceof ContextVar ? 'another context variable' : 'an AsyncLocalStorage';
    throw new TypeError(`registerContextVar(): ${what} is registered as '${name}' (a name stands for one variable in every thread)`);
  }
  const known = namesOf.get(variable);
  if (known !== undefined && known !== name) throw new TypeError(`registerContextVar(): ${variable} is registered already, as '${known}'`);
  travelling.set(name, variable);
  namesOf.set(variable, name);
}

/**
 * Let `storage`'s store travel under `name`; a TypeError when something else travels under that
 * name, or this storage under another name.
 */
export function registerTravellingStorage(storage: AsyncLocalStorage<unknown>, name: string): void {
  const other = travelling.get(name);
  if (other !== undefined && other !== storage) {
    const what = other instanceof ContextVar ? `a context variable (${other})` : 'another AsyncLocalStorage';
    throw new TypeError(`registerAsyncLocalStorage(): ${what} is registered as '${name}' (a name stands for one storage in every thread)`);
  }
  const known = namesOf.get(storage);
  if (known !== undefined && known !== name) throw new TypeError(`registerAsyncLocalStorage(): this AsyncLocalStorage is registered already, as '${known}'`);
  if (other !== undefined) return;
  travelling.set(name, storage);
  namesOf.set(storage, name);
  storages.push([name, storage]);
}

/** `value` prepared to cross as what travels under `name`; a TypeError naming it when it cannot. */
function wiredValue(value: unknown, name: string, what: string): unknown {
  const found = findUncloneable(value, what === 'context variable' ? 'its value' : 'its store');
  if (found !== null) throw new TypeError(`${what} '${name}' cannot go to another thread: ${describeUncloneable(found)}`);
  try {
    return toWire(value, what === 'context variable' ? 'its value' : 'its store');
  } catch (error) {
    throw new TypeError(`${what} '${name}' cannot go to another thread: ${(error as Error).message}`, { cause: error });
  }
}

/** The stores in force of the registered storages, in registration order; null when none is registered. */
export function currentStores(): unknown[] | null {
  if (storages.length === 0) return null;
  return storages.map(([, storage]) => storage.getStore());
}

/** Whether two results of `currentStores` hold the same stores. */
export function sameStores(a: readonly unknown[] | null | undefined, b: readonly unknown[] | null | undefined): boolean {
  if (a === b) return true;
  if (a === null || a === undefined || b === null || b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The values of registered variables set in `vars` (a caller's context) and the stores in force
 * of registered storages, prepared to cross; null when there is none. A value or store that
 * cannot cross is a TypeError naming the variable or storage.
 */
export function carriedContext(vars: VarMap): CarriedContext | null {
  if (vars === null && storages.length === 0) return null;
  let names: string[] | null = null;
  let values: unknown[] | null = null;
  if (vars !== null) {
    for (const [name, variable] of travelling) {
      if (!(variable instanceof ContextVar) || !vars.has(variable)) continue;
      (names ??= []).push(name);
      (values ??= []).push(wiredValue(vars.get(variable), name, 'context variable'));
    }
  }
  for (const [name, storage] of storages) {
    const store = storage.getStore();
    if (store === undefined) continue;
    (names ??= []).push(name);
    (values ??= []).push(wiredValue(store, name, 'AsyncLocalStorage'));
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
      if (variable instanceof ContextVar) variable.set(fromWire(values[i]));
    }
  });
  return context;
}

/**
 * Call `fn()` inside `run()` of each storage this thread registered whose store `carried` holds
 * (a call that arrived with them); just `fn()` when it holds none.
 */
export function runInCarriedStores<R>(carried: CarriedContext | null | undefined, fn: () => R): R {
  if (carried === null || carried === undefined || storages.length === 0) return fn();
  const [names, values] = carried;
  let run = fn;
  for (let i = 0; i < names.length; i++) {
    const storage = travelling.get(names[i] as string);
    if (storage === undefined || storage instanceof ContextVar) continue;
    const inner = run;
    const store = fromWire(values[i]);
    run = () => storage.run(store, inner);
  }
  return run();
}

/** Whether `value` is a CarriedContext as it arrives (a hostile or broken peer may send anything). */
export function isCarriedContext(value: unknown): value is CarriedContext {
  return Array.isArray(value) && value.length === 2 && Array.isArray(value[0]) && Array.isArray(value[1]) && value[0].length === value[1].length;
}
