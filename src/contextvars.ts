/**
 * Context variables, after Python's `contextvars` module.
 *
 * A Context maps ContextVars to values. Its map is never changed in place: `set()` installs a
 * new map, so `copy()` is O(1) and a copy taken earlier never sees later changes. The loop runs
 * each callback in the context captured when it was scheduled, and each Task in its own copy.
 */
import { LookupError, RuntimeError } from './exceptions.js';
import { INSPECT } from './internal/format.js';
import { asyncContextInUse, asyncContextOwner, useAsyncContext } from './internal/als/scope.js';
import { registerTravelling } from './internal/travel.js';

/** @internal An immutable mapping from variables to values; null when empty. */
export type VarMap = ReadonlyMap<ContextVar<unknown>, unknown> | null;

const MISSING: unique symbol = Symbol('MISSING');

/**
 * A mapping of ContextVars to values (contextvars.Context).
 *
 * @example
 * ```ts
 * const ctx = copyContext();
 * ctx.run(() => requestId.set('abc')); // the change stays inside ctx
 * ctx.get(requestId); // 'abc'
 * ```
 */
export class Context {
  /** @internal */
  _vars: VarMap = null;
  /** @internal */
  _entered = false;
  /**
   * @internal Whom a reused context serves now: a Task whose variables it holds during a step,
   * or a fresh number per callback. Tokens remember it, so a token set in one callback cannot
   * reset a variable in another.
   */
  _owner: unknown = null;

  /** Call `fn(...args)` with this context as the current one; returns its result. */
  run<A extends unknown[], R>(fn: (...args: A) => R, ...args: A): R {
    materialize();
    if (this._entered) {
      throw new RuntimeError(`cannot enter context: ${this} is already entered`);
    }
    const previous = current;
    this._entered = true;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the current context is this one
    current = this;
    try {
      return fn(...args);
    } finally {
      current = previous;
      this._entered = false;
    }
  }

  /** Return a shallow copy of this context. */
  copy(): Context {
    const copy = new Context();
    copy._vars = this._vars;
    return copy;
  }

  /** Return the variable's value in this context, else `defaultValue` (undefined when omitted). */
  get<T>(variable: ContextVar<T>): T | undefined;
  get<T, D>(variable: ContextVar<T>, defaultValue: D): T | D;
  get<T, D>(variable: ContextVar<T>, defaultValue?: D): T | D | undefined {
    const vars = this._vars;
    if (vars !== null && vars.has(variable as ContextVar<unknown>)) {
      return vars.get(variable as ContextVar<unknown>) as T;
    }
    return defaultValue;
  }

  /** Whether the variable has a value in this context (Python's `var in ctx`). */
  has(variable: ContextVar<unknown>): boolean {
    return this._vars !== null && this._vars.has(variable);
  }

  /** The variables that have a value in this context. */
  keys(): IterableIterator<ContextVar<unknown>> {
    return (this._vars ?? new Map<ContextVar<unknown>, unknown>()).keys();
  }

  /** The number of variables that have a value in this context. */
  get size(): number {
    return this._vars === null ? 0 : this._vars.size;
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    return `<Context vars=${this.size}>`;
  }
}

/** The thread's root context, current whenever nothing else was entered. */
const root = new Context();
let current: Context = root;

/** A Task as this module sees it: its context, and the Context object it can make of it. */
interface ContextOwner {
  _context: Context | VarMap;
  getContext(): Context;
}

/**
 * The task whose async code runs now outside its steps (a Promise reaction of async code a step
 * started: nothing entered, the root is current), if any: its context is the one in force there.
 */
function awaitedBy(): ContextOwner | undefined {
  return current === root && asyncContextInUse ? (asyncContextOwner() as ContextOwner | undefined) : undefined;
}

/** The context `set()`/`reset()` change: the current one, or that of the task whose async code runs. */
function writableContext(): Context {
  const owner = awaitedBy();
  return owner === undefined ? current : owner.getContext();
}

/** The object the loop enters for callbacks scheduled without an explicit context. */
const scratch = new Context();
let callbackNumber = 0;

/**
 * A task whose step runs now with its context not entered yet. Most steps never touch a
 * context variable, so entering is deferred: reads use the task's variables directly, and the
 * first change (`set`, `reset`, `Context.run`, a Context object asked for) enters the context
 * for the rest of the step.
 */
let lazyOwner: LazyOwner | null = null;
/**
 * Whose variables a step reads before entering them: a Task, or a gather standing in for the Task
 * of a child not made yet, which makes it (`_promoteStepping`) before anything changes.
 */
interface LazyOwner {
  _context: Context | VarMap;
  _promoteStepping?(): LazyOwner;
}

/** What the step's end must restore once a lazy context was entered, else null. */
let lazyPrevious: Context | null = null;

/** The variables in force now. */
function currentVars(): VarMap {
  if (lazyOwner !== null) return lazyOwner._context as VarMap;
  if (current === root && asyncContextInUse) {
    const owner = asyncContextOwner() as ContextOwner | undefined;
    if (owner !== undefined) {
      const held = owner._context;
      return held instanceof Context ? held._vars : held;
    }
  }
  return current._vars;
}

/** Enter the pending lazy context, if any, before the current context is changed. */
function materialize(): void {
  let owner = lazyOwner;
  if (owner === null) return;
  // A change is the child's own: it needs its Task, which takes the gather's place.
  if (owner._promoteStepping !== undefined) owner = owner._promoteStepping();
  lazyOwner = null;
  lazyPrevious = _enterOwned(owner._context as VarMap, owner);
}

/**
 * A token returned by `ContextVar.set()`; pass it to `reset()` to restore the previous value,
 * or hold it with `using` (asyncio 3.14: a Token is a context manager), which resets the
 * variable as the scope ends.
 *
 * @example
 * ```ts
 * const token = level.set(2); try { work(); } finally { level.reset(token); }
 * {
 *   using _ = level.set(3);
 *   work(); // level is 3 here, 2 again after the block
 * }
 * ```
 */
export class Token<T> {
  /** The variable this token belongs to. */
  readonly var: ContextVar<T>;
  /** The value before the `set()`, or `Token.MISSING` when there was none. */
  readonly oldValue: T | typeof MISSING;
  /** @internal */
  _context: Context;
  /** @internal */
  _owner: unknown;
  /** @internal */
  _used = false;

  /** The marker `oldValue` holds when the variable had no value before. */
  static readonly MISSING: typeof MISSING = MISSING;

  /** @internal */
  constructor(variable: ContextVar<T>, oldValue: T | typeof MISSING, context: Context) {
    this.var = variable;
    this.oldValue = oldValue;
    this._context = context;
    this._owner = context._owner;
  }

  /**
   * Reset the variable to its value before the `set()` that returned this token, as the scope
   * of a `using` declaration ends (asyncio 3.14's `Token.__exit__`: `var.reset(token)`, with
   * its errors: a token used already, made in another context).
   *
   * @example
   * ```ts
   * function handle(request: Request): void {
   *   using _ = requestId.set(request.id);
   *   serve(request);
   * } // requestId is back to its previous value, however serve() ended
   * ```
   */
  [Symbol.dispose](): void {
    this.var.reset(this);
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    return `<Token${this._used ? ' used' : ''} var=${this.var}>`;
  }
}

/**
 * A context variable (contextvars.ContextVar): its value is per Context, each Task runs in its own copy.
 *
 * @example
 * ```ts
 * const requestId = new ContextVar<string>('requestId', { default: '-' });
 * requestId.set('r-42');
 * requestId.get(); // 'r-42'
 * ```
 */
export class ContextVar<T> {
  /** The variable's name. */
  readonly name: string;
  readonly #hasDefault: boolean;
  readonly #default: T | undefined;

  constructor(name: string, options?: { default?: T }) {
    if (typeof name !== 'string') {
      throw new TypeError('context variable name must be a str');
    }
    this.name = name;
    this.#hasDefault = options !== undefined && 'default' in options;
    this.#default = options?.default;
  }

  /** Return the value in the current context, else `defaultValue`, else the default; without either it throws LookupError. */
  get(): T;
  get<D>(defaultValue: D): T | D;
  get<D>(defaultValue?: D): T | D {
    const vars = currentVars();
    if (vars !== null) {
      const value = vars.get(this as ContextVar<unknown>);
      if (value !== undefined || vars.has(this as ContextVar<unknown>)) return value as T;
    }
    if (arguments.length > 0) return defaultValue as D;
    if (this.#hasDefault) return this.#default as T;
    throw new LookupError(`<ContextVar name='${this.name}'>`);
  }

  /** Set the value in the current context; returns a Token for `reset()`. */
  set(value: T): Token<T> {
    // From now on, async code a task awaits must find the task's values (internal/als/scope.ts).
    if (!asyncContextInUse) useAsyncContext();
    materialize();
    const context = writableContext();
    const old = context._vars;
    const oldValue = old !== null && old.has(this as ContextVar<unknown>) ? (old.get(this as ContextVar<unknown>) as T) : MISSING;
    const next = new Map(old ?? undefined);
    next.set(this as ContextVar<unknown>, value);
    context._vars = next;
    return new Token(this, oldValue, context);
  }

  /** Restore the value the variable had before the `set()` that returned `token`. */
  reset(token: Token<T>): void {
    if (!(token instanceof Token)) {
      throw new TypeError(`expected an instance of Token, got ${typeof token}`);
    }
    materialize();
    if (token._used) throw new RuntimeError(`${token} has already been used once`);
    if (token.var !== this) throw new RangeError(`${token} was created by a different ContextVar`);
    const context = writableContext();
    // A task's tokens stay valid when its context object is created between their set and reset.
    const sameContext =
      token._context === context ? token._owner === context._owner : token._owner !== null && token._owner === context._owner;
    if (!sameContext) {
      throw new RangeError(`${token} was created in a different Context`);
    }
    token._used = true;
    const next = new Map(context._vars ?? undefined);
    if (token.oldValue === MISSING) next.delete(this as ContextVar<unknown>);
    else next.set(this as ContextVar<unknown>, token.oldValue);
    context._vars = next.size === 0 ? null : next;
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    return `<ContextVar name='${this.name}'>`;
  }
}

/**
 * Let `contextVar`'s value travel with calls to other threads and processes, under one name
 * (default: its `name`), registered in every thread that sends or receives it: call it in the
 * module that defines the variable, which both sides import. A call or job (`lt.call`,
 * `callSoonThreadsafe`, `submit`, pool calls, `runInExecutor`/`toThread`, BullMQ jobs) carries the
 * caller's values of registered variables set in its current context; the callee runs in a copy
 * of its own context with those values set (asyncio's `to_thread` copies the context). Values
 * changed there do not come back; a variable not set stays unset there. A value that cannot
 * cross fails that call with a TypeError naming the variable; two variables under one name are a
 * TypeError here.
 *
 * @example
 * ```ts
 * export const requestId = registerContextVar(new ContextVar<string>('requestId'));
 * // in a handler: requestId.set(id); yield* worker.call('process', job); // the worker logs the same id
 * ```
 */
export function registerContextVar<T>(contextVar: ContextVar<T>, options?: { name?: string }): ContextVar<T> {
  if (!(contextVar instanceof ContextVar)) throw new TypeError(`registerContextVar() needs a ContextVar, got ${typeof contextVar}`);
  if (options !== undefined && (options === null || typeof options !== 'object')) throw new TypeError('registerContextVar() options must be an object');
  const name = options?.name ?? contextVar.name;
  if (typeof name !== 'string' || name === '') throw new TypeError(`registerContextVar() options.name must be a non-empty string, got ${typeof name === 'string' ? "''" : typeof name}`);
  registerTravelling(contextVar as ContextVar<unknown>, name);
  return contextVar;
}

/**
 * Return a copy of the current context (contextvars.copy_context).
 *
 * @example
 * ```ts
 * const snapshot = copyContext();
 * snapshot.run(() => console.log(requestId.get()));
 * ```
 */
export function copyContext(): Context {
  const copy = new Context();
  copy._vars = currentVars();
  return copy;
}

/** @internal The variables of the current context, as a snapshot for later `_enterVars`. */
export function _currentVars(): VarMap {
  return currentVars();
}

/** @internal Make `vars` current in a reusable context; returns what `_exit` must restore. */
export function _enterVars(vars: VarMap): Context {
  return _enterOwned(vars, ++callbackNumber);
}

/**
 * @internal Make `vars` current in a reusable context serving `owner` (a Task whose context
 * object was never asked for); read them back with `_currentVars()` before `_exit`.
 */
export function _enterOwned(vars: VarMap, owner: unknown): Context {
  const previous = current;
  scratch._vars = vars;
  scratch._owner = owner;
  current = scratch;
  return previous;
}

/** @internal Whether the current context is the reusable one serving `owner`. */
export function _servesOwner(owner: unknown): boolean {
  return lazyOwner === owner || (current === scratch && scratch._owner === owner);
}

/** @internal Replace the current context with `context` until the step ends (a context materialized mid-step). */
export function _switchTo(context: Context): void {
  materialize();
  context._entered = true;
  current = context;
}

/**
 * @internal Begin a step of `owner` (a Task whose context is a variable map) without entering
 * its context yet; `_endLazy` ends it.
 */
export function _beginLazy(owner: { _context: Context | VarMap }): void {
  lazyOwner = owner;
}

/** @internal `to` (a child's Task, just made) takes the place of `from` (the gather that stood in for it) in the step running now. */
export function _replaceLazyOwner(from: LazyOwner, to: LazyOwner): void {
  if (lazyOwner === from) lazyOwner = to;
}

/** @internal End the step begun by `_beginLazy`: keep what it changed, leave what it entered. */
export function _endLazy(owner: { _context: Context | VarMap }): void {
  const previous = lazyPrevious;
  if (previous === null) {
    lazyOwner = null;
    return;
  }
  lazyPrevious = null;
  if (!(owner._context instanceof Context)) owner._context = current._vars;
  _exit(previous);
}

/**
 * @internal Run `step(owner)` in `owner`'s context (a Context, or variables entered lazily as a
 * Task's step does) in the middle of whatever runs now: an eager task's first step, from inside
 * another task's step or a callback. That code's context, its pending lazy step and the reusable
 * context it may be using are put back afterwards, as it left them. Throws like `Context.run`
 * when `owner`'s Context is entered already, before `step` runs.
 */
export function _runNested<O extends { _context: Context | VarMap }>(owner: O, step: (owner: O) => void): void {
  const outerCurrent = current;
  const outerLazyOwner = lazyOwner;
  const outerLazyPrevious = lazyPrevious;
  const outerVars = scratch._vars;
  const outerOwner = scratch._owner;
  lazyOwner = null;
  lazyPrevious = null;
  try {
    const context = owner._context;
    if (context instanceof Context) {
      _enter(context);
      try {
        step(owner);
      } finally {
        current._entered = false;
      }
    } else {
      lazyOwner = owner;
      try {
        step(owner);
      } finally {
        _endLazy(owner);
      }
    }
  } finally {
    current = outerCurrent;
    lazyOwner = outerLazyOwner;
    lazyPrevious = outerLazyPrevious;
    scratch._vars = outerVars;
    scratch._owner = outerOwner;
  }
}

/** @internal What `_beginNested` saved of the code it runs inside. */
export interface NestedState {
  current: Context;
  lazyOwner: LazyOwner | null;
  lazyPrevious: Context | null;
  vars: VarMap;
  owner: unknown;
}

/**
 * @internal Begin running steps of `owner` (a gather standing in for its children's Tasks) in the
 * middle of whatever runs, as `_runNested` runs one: its variables read lazily. Between steps,
 * `_againNested` puts back what a step changed; `_endNested` ends, as the outer code left it.
 */
export function _beginNested(owner: LazyOwner): NestedState {
  const saved: NestedState = { current, lazyOwner, lazyPrevious, vars: scratch._vars, owner: scratch._owner };
  lazyOwner = owner;
  lazyPrevious = null;
  return saved;
}

/** @internal After a step that made its Task (and may have entered its context): `owner` stands in again for the next. */
export function _againNested(saved: NestedState, owner: LazyOwner): void {
  _endNested(saved);
  lazyOwner = owner;
  lazyPrevious = null;
}

/** @internal End what `_beginNested` began. */
export function _endNested(saved: NestedState): void {
  current = saved.current;
  lazyOwner = saved.lazyOwner;
  lazyPrevious = saved.lazyPrevious;
  scratch._vars = saved.vars;
  scratch._owner = saved.owner;
}

/** @internal Enter `context` for a loop callback; throws like `Context.run` when it is entered already. */
export function _enter(context: Context): Context {
  if (context._entered) {
    throw new RuntimeError(`cannot enter context: ${context} is already entered`);
  }
  const previous = current;
  context._entered = true;
  current = context;
  return previous;
}

/** @internal Leave the context entered by `_enter`/`_enterVars`, making `previous` current again. */
export function _exit(previous: Context): void {
  current._entered = false;
  current = previous;
}
