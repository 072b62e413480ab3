/**
 * Context variables and AsyncLocalStorage stores that travel with calls to other threads and
 * processes (`registerContextVar`, `registerAsyncLocalStorage`). A call carries the caller's
 * values of the registered variables set in its current context and the stores of the registered
 * storages in force, as `[names, values]` prepared to cross (wire.ts); the callee runs in a copy
 * of its own context with those values set, inside `run()` of those storages
 * (`runInCarriedStores`). Nothing comes back. While nothing is registered, nothing is looked at:
 * `travelling.size` is the one check a call pays. One name stands for one variable or storage.
 * Carriers (multiloop/otel) travel the same way: another library's context, written as plain
 * data by the caller and run around the callee.
 */
import type { AsyncLocalStorage } from 'node:async_hooks';
import { copyContext, ContextVar, type Context, type VarMap } from '../contextvars.js';
import { describeUncloneable, findUncloneable } from './uncloneable.js';
import { fromWire, toWire } from './wire.js';

/**
 * A context kept by another library that travels with calls too (multiloop/otel: OpenTelemetry's
 * active context, as its propagator writes it). Its value crosses as it is (plain data, read as
 * hostile on arrival), not through wire.ts.
 */
export interface Carrier {
  /** The context in force, compared by identity: a link sends nothing new while it is the same. */
  current(): unknown;
  /** `current` written to cross (a structured-cloneable plain value); undefined: nothing to carry. */
  write(current: unknown): unknown;
  /** Call `fn()` inside the context a caller's `write` made (as it arrived: anything). */
  run<R>(written: unknown, fn: () => R): R;
}

/**
 * Spans around each cross-thread call (multiloop/otel with `spans: true`): `client` in the caller
 * around sending it, `server` in the callee, inside what the call carried.
 */
export interface CallSpans {
  client(name: string): CallSpan;
  server(name: string): CallSpan;
}

/** A span begun for a call: `run` calls `fn()` inside it, `end` ends it (`error` null: it went well). */
export interface CallSpan {
  run<R>(fn: () => R): R;
  end(error: unknown): void;
}

/** Set by multiloop/otel (spans: true); null: no spans, and a call pays this one check. */
export let callSpans: CallSpans | null = null;

/** Make `spans` the spans around calls from now on (null: none). */
export function setCallSpans(spans: CallSpans | null): void {
  callSpans = spans;
}

/** End `span` when `future` is done: with its exception, 'cancelled' when cancelled, else null. */
export function endWhenDone(
  span: CallSpan,
  future: { addDoneCallback(fn: (done: { cancelled(): boolean; exception(): unknown }) => void): void },
): void {
  future.addDoneCallback((done) => span.end(done.cancelled() ? 'cancelled' : (done.exception() ?? null)));
}

/**
 * The trace context of ThreadQueue items (multiloop/otel): `write` gives what the producer's put
 * carries (undefined: nothing), `arrived` takes it in the consumer's get.
 */
export interface ItemTrace {
  write(): unknown;
  arrived(written: unknown): void;
}

/** Set by multiloop/otel; null: items carry nothing, and a put pays this one check. */
export let itemTrace: ItemTrace | null = null;

/** Make `trace` the trace context of ThreadQueue items from now on. */
export function setItemTrace(trace: ItemTrace | null): void {
  itemTrace = trace;
}

/** What travels under a name: a context variable's value, a storage's store, or a carrier's context. */
type Travelling = ContextVar<unknown> | AsyncLocalStorage<unknown> | Carrier;

/** The registered variables and storages by the name they travel under; empty: nothing travels. */
export const travelling = new Map<string, Travelling>();
const namesOf = new Map<Travelling, string>();
/** The registered storages, with their names (a subset of `travelling`). */
const storages: Array<readonly [name: string, storage: AsyncLocalStorage<unknown>]> = [];
/** The registered carriers, with their names (a subset of `travelling`). */
const carriers: Array<readonly [name: string, carrier: Carrier]> = [];

/** The values a call carries: the names of the variables, and their values prepared to cross. */
export type CarriedContext = readonly [names: readonly string[], values: readonly unknown[]];

/**
 * Let `variable` travel under `name`; a TypeError when another variable travels under that name,
 * or this one under another name.
 */
export function registerTravelling(variable: ContextVar<unknown>, name: string): void {
  const other = travelling.get(name);
  if (other !== undefined && other !== variable) {
    const what = other instanceof ContextVar ? 'another context variable' : isCarrier(other) ? "multiloop/otel's trace context" : 'an AsyncLocalStorage';
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
    const what = other instanceof ContextVar ? `a context variable (${other})` : isCarrier(other) ? "multiloop/otel's trace context" : 'another AsyncLocalStorage';
    throw new TypeError(`registerAsyncLocalStorage(): ${what} is registered as '${name}' (a name stands for one storage in every thread)`);
  }
  const known = namesOf.get(storage);
  if (known !== undefined && known !== name) throw new TypeError(`registerAsyncLocalStorage(): this AsyncLocalStorage is registered already, as '${known}'`);
  if (other !== undefined) return;
  travelling.set(name, storage);
  namesOf.set(storage, name);
  storages.push([name, storage]);
}

/**
 * Let `carrier`'s context travel under `name` (once: registering it again does nothing); a
 * TypeError when something else travels under that name.
 */
export function registerCarrier(carrier: Carrier, name: string): void {
  const other = travelling.get(name);
  if (other === carrier) return;
  if (other !== undefined) throw new TypeError(`'${name}' is registered already, for something else (a name stands for one variable or storage in every thread)`);
  travelling.set(name, carrier);
  namesOf.set(carrier, name);
  carriers.push([name, carrier]);
}

/** Whether `value` is a registered carrier. */
function isCarrier(value: Travelling): value is Carrier {
  return carriers.some(([, carrier]) => carrier === value);
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

/**
 * The stores in force of the registered storages, in registration order, then the contexts in
 * force of the carriers; null when none is registered.
 */
export function currentStores(): unknown[] | null {
  if (storages.length === 0 && carriers.length === 0) return null;
  const stores = storages.map(([, storage]) => storage.getStore());
  for (const [, carrier] of carriers) stores.push(carrier.current());
  return stores;
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
  if (vars === null && storages.length === 0 && carriers.length === 0) return null;
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
  for (const [name, carrier] of carriers) {
    const written = carrier.write(carrier.current());
    if (written === undefined) continue;
    (names ??= []).push(name);
    (values ??= []).push(written);
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
 * (a call that arrived with them), and inside the contexts of the carriers it holds; just `fn()`
 * when it holds none.
 */
export function runInCarriedStores<R>(carried: CarriedContext | null | undefined, fn: () => R): R {
  if (carried === null || carried === undefined || (storages.length === 0 && carriers.length === 0)) return fn();
  const [names, values] = carried;
  let run = fn;
  for (let i = 0; i < names.length; i++) {
    const held = travelling.get(names[i] as string);
    if (held === undefined || held instanceof ContextVar) continue;
    const inner = run;
    if (isCarrier(held)) {
      const written = values[i];
      run = () => held.run(written, inner);
    } else {
      const store = fromWire(values[i]);
      run = () => held.run(store, inner);
    }
  }
  return run();
}

/** Whether `value` is a CarriedContext as it arrives (a hostile or broken peer may send anything). */
export function isCarriedContext(value: unknown): value is CarriedContext {
  return Array.isArray(value) && value.length === 2 && Array.isArray(value[0]) && Array.isArray(value[1]) && value[0].length === value[1].length;
}
