/**
 * The classes registered with `registerClass()`, in this thread. Each thread has its own copy of
 * the library and so its own registry: a class crosses as itself when the sending thread and
 * the receiving one both registered it under the same name, which a module that defines and
 * registers the class, imported by both, does without more ado.
 */

/** How instances of a registered class cross a thread. */
export interface ClassEntry {
  readonly cls: abstract new (...args: never[]) => object;
  /** The name it crosses under, the same in every thread. */
  readonly name: string;
  /** Its instances are errors: they cross as errors do (message, stack, cause, own properties). */
  readonly isError: boolean;
  /** Instance to structured-cloneable data. */
  readonly serialize: (instance: object) => unknown;
  /** That data back to an instance. */
  readonly deserialize: (data: unknown) => object;
  /** Whether `serialize`/`deserialize` are the application's own (else: own properties onto the prototype, cycles kept). */
  readonly custom: boolean;
}

const byName = new Map<string, ClassEntry>();
const byPrototype = new Map<object, ClassEntry>();

/** Add `entry`; a RangeError when its name or its class is taken by another registration. */
export function addClass(entry: ClassEntry): void {
  const named = byName.get(entry.name);
  const prototype = entry.cls.prototype as object;
  const same = byPrototype.get(prototype);
  if (named !== undefined && named.cls !== entry.cls) {
    throw new RangeError(`registerClass(): another class is registered as '${entry.name}' (a name stands for one class in every thread)`);
  }
  if (same !== undefined && same.name !== entry.name) {
    throw new RangeError(`registerClass(): ${entry.cls.name} is registered already, as '${same.name}'`);
  }
  if (named !== undefined) return;
  byName.set(entry.name, entry);
  byPrototype.set(prototype, entry);
}

/** The registration named `name` in this thread, if any. */
export function classNamed(name: string): ClassEntry | undefined {
  return byName.get(name);
}

/**
 * The registration of the nearest class in `value`'s prototype chain, if any; `stopAt` ends
 * the search (the prototypes from there on are built-ins).
 */
export function classOf(value: object, stopAt: object | null = null): ClassEntry | undefined {
  if (byPrototype.size === 0) return undefined;
  for (let proto = Object.getPrototypeOf(value) as object | null; proto !== null && proto !== stopAt; proto = Object.getPrototypeOf(proto) as object | null) {
    const entry = byPrototype.get(proto);
    if (entry !== undefined) return entry;
  }
  return undefined;
}

/** Whether any class is registered in this thread. */
export function anyClassRegistered(): boolean {
  return byName.size > 0;
}

/**
 * Copy `source`'s own enumerable properties onto `target`, as `Object.assign` does but for the
 * key `__proto__`, which stays a key: received data chooses values, never a prototype.
 */
export function copyFields(target: object, source: object): void {
  for (const key of Object.keys(source)) {
    const value = (source as Record<string, unknown>)[key];
    // Assigned, `__proto__` would be the setter of Object.prototype; defining is several times slower than assigning.
    if (key === '__proto__') Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
    else (target as Record<string, unknown>)[key] = value;
  }
}
