/**
 * Deadline scopes (asyncio.timeouts): `Timeout`, `timeout()` and `timeoutAt()`.
 *
 * A scope moves through asyncio's states: created → active → finished, or, when its deadline
 * passes while active, active → expiring (it cancelled its task) → expired (it has exited).
 * On the way out it turns that cancellation, and only that one, into TimeoutError: the task's
 * `uncancel()` must come back to the `cancelling()` level recorded on entry, so a foreign
 * `cancel()` or an outer scope's expiry keeps its CancelledError.
 *
 * Python's implicit exception context (`__context__`) has no JavaScript counterpart; where
 * asyncio 3.13 inserts a TimeoutError into that chain, this port inserts it into the `cause`
 * chain, the only chain JavaScript errors carry.
 */
import { isCoroutine, type Coroutine } from './coroutines.js';
import { getRunningLoop } from './events.js';
import { CancelledError, ExceptionGroup, RuntimeError, TimeoutError } from './exceptions.js';
import { Future } from './futures.js';
import { INSPECT, repr, typeName } from './internal/format.js';
import { currentTask, type Task } from './task.js';
import type { Handle } from './handles.js';

const CREATED = 0;
const ENTERED = 1;
const EXPIRING = 2;
const EXPIRED = 3;
const EXITED = 4;

/** asyncio's `_State` values, as the repr and the error messages spell them. */
const STATE_NAMES = ['created', 'active', 'expiring', 'expired', 'finished'] as const;

/** A `cause` chain longer than this is taken for a cycle (JavaScript allows cyclic causes). */
const MAX_CAUSE_DEPTH = 1000;

/**
 * A deadline scope around a block of a coroutine; enter it with `.run(body)` (asyncio.Timeout).
 *
 * Create one with `timeout(delay)` or `timeoutAt(when)`. When the deadline passes while the
 * body runs, the scope cancels its task; the body sees CancelledError at its current
 * `yield*`, and the scope ends in TimeoutError (its `cause` is that CancelledError) unless the
 * body swallowed the cancellation. A scope can be entered once.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<string> {
 *   try {
 *     return yield* timeout(1).run(function* (scope) {
 *       yield* sleep(10);
 *       return 'slow';
 *     });
 *   } catch (e) {
 *     if (e instanceof TimeoutError) return 'gave up'; // after 1 s
 *     throw e;
 *   }
 * }
 * ```
 */
export class Timeout {
  #state = CREATED;
  #when: number | null;
  #handle: Handle | null = null;
  #task: Task<unknown> | null = null;
  /** The task's `cancelling()` on entry: only a count back at this level is our own cancellation. */
  #cancelling = 0;

  /**
   * Create a scope expiring at loop time `when` (null: never); prefer `timeout()` and
   * `timeoutAt()`. A deadline at or before the loop's time fires on the next iteration.
   *
   * @example
   * ```ts
   * const scope = new Timeout(getRunningLoop().time() + 5);
   * ```
   */
  constructor(when: number | null) {
    this.#when = checkDeadline(when, 'when');
  }

  /**
   * The deadline in loop time, or null when disabled (when).
   *
   * @example
   * ```ts
   * yield* timeout(null).run(function* (scope) { scope.when(); }); // null
   * ```
   */
  when(): number | null {
    return this.#when;
  }

  /**
   * Move the deadline to loop time `when` (null disables it); RuntimeError unless the scope is
   * active (reschedule). A deadline already passed fires on the next iteration.
   *
   * @example
   * ```ts
   * yield* timeout(1).run(function* (scope) {
   *   scope.reschedule(getRunningLoop().time() + 10); // more time
   *   yield* sleep(5);
   * });
   * ```
   */
  reschedule(when: number | null): void {
    const state = this.#state;
    if (state !== ENTERED) {
      if (state === CREATED) throw new RuntimeError('Timeout has not been entered');
      throw new RuntimeError(`Cannot change state of ${STATE_NAMES[state]} Timeout`);
    }
    checkDeadline(when, 'when');
    this.#when = when;
    if (this.#handle !== null) this.#handle.cancel();
    if (when === null) {
      this.#handle = null;
    } else {
      const loop = getRunningLoop();
      // A deadline already passed still waits for the next iteration, so the body always
      // gets to run up to its first real wait.
      this.#handle = when <= loop.time() ? loop.callSoon(Timeout.#onTimeout, this) : loop.callAt(when, Timeout.#onTimeout, this);
    }
  }

  /**
   * Whether the deadline passed and the scope cancelled its task (expired).
   *
   * @example
   * ```ts
   * const scope = timeout(0.1);
   * try { yield* scope.run(function* () { yield* sleep(1); }); } catch { scope.expired(); } // true
   * ```
   */
  expired(): boolean {
    return this.#state === EXPIRING || this.#state === EXPIRED;
  }

  /**
   * Run `body(this)` inside the scope and return its result (Python's `async with`). An
   * expired scope raises TimeoutError whose `cause` is the CancelledError the body got.
   * RuntimeError when the scope was entered before or no task is running.
   *
   * @example
   * ```ts
   * const page = yield* timeout(5).run(function* () {
   *   return yield* download(url);
   * });
   * ```
   */
  *run<R>(body: (scope: Timeout) => Coroutine<R>): Coroutine<R> {
    if (typeof body !== 'function') {
      throw new TypeError(`Timeout.run() expects a generator function, got ${repr(body)}`);
    }
    this.#enter();
    let settled = false;
    let result: R;
    try {
      result = yield* startBody(body, this);
      settled = true;
    } catch (error) {
      settled = true;
      this.#exit(true, error);
      throw error;
    } finally {
      // Closed with return() while suspended in the body: leave the scope quietly.
      if (!settled) this.#exit(false, undefined);
    }
    this.#exit(false, undefined);
    return result;
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    const state = this.#state;
    const info = state === ENTERED ? ` when=${formatWhen(this.#when)}` : '';
    return `<Timeout [${STATE_NAMES[state]}]${info}>`;
  }

  /** asyncio's `__aenter__`. */
  #enter(): void {
    if (this.#state !== CREATED) throw new RuntimeError('Timeout has already been entered');
    const task = currentTask();
    if (task === null) throw new RuntimeError('Timeout should be used inside a task');
    this.#state = ENTERED;
    this.#task = task;
    this.#cancelling = task.cancelling();
    this.reschedule(this.#when);
  }

  /** asyncio's `__aexit__`; `raised` tells whether the body threw `error`. */
  #exit(raised: boolean, error: unknown): void {
    if (this.#handle !== null) {
      this.#handle.cancel();
      this.#handle = null;
    }
    if (this.#state === EXPIRING) {
      this.#state = EXPIRED;
      if ((this.#task as Task<unknown>).uncancel() <= this.#cancelling && raised) {
        if (error instanceof CancelledError) throw new TimeoutError(undefined, { cause: error });
        insertTimeoutError(error);
        if (error instanceof ExceptionGroup) for (const member of error.exceptions) insertTimeoutError(member);
      }
    } else if (this.#state === ENTERED) {
      this.#state = EXITED;
    }
  }

  static #onTimeout(scope: Timeout): void {
    (scope.#task as Task<unknown>).cancel();
    scope.#state = EXPIRING;
    scope.#handle = null;
  }
}

/**
 * Return a Timeout expiring `delay` seconds from now, or never when `delay` is null
 * (asyncio.timeout). Needs a running loop; 0 or a negative delay fires on the next iteration.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   try {
 *     yield* timeout(0.5).run(function* () { yield* sleep(10); });
 *   } catch (e) {
 *     if (!(e instanceof TimeoutError)) throw e;
 *     console.log('timed out');
 *   }
 * }
 * ```
 */
export function timeout(delay: number | null): Timeout {
  const loop = getRunningLoop();
  if (checkDeadline(delay, 'delay') === null) return new Timeout(null);
  return new Timeout(loop.time() + (delay as number));
}

/**
 * Return a Timeout expiring at loop time `when`, or never when `when` is null
 * (asyncio.timeout_at).
 *
 * @example
 * ```ts
 * const deadline = getRunningLoop().time() + 10;
 * yield* timeoutAt(deadline).run(function* () { yield* step1(); });
 * yield* timeoutAt(deadline).run(function* () { yield* step2(); }); // same deadline for both
 * ```
 */
export function timeoutAt(when: number | null): Timeout {
  return new Timeout(when);
}

function checkDeadline(value: number | null, what: 'delay' | 'when'): number | null {
  if (value === null) return null;
  if (typeof value !== 'number') throw new TypeError(`${what} must be a number or null, got ${typeName(value)}`);
  if (Number.isNaN(value)) throw new RangeError(`Invalid ${what}: NaN (not a number)`);
  return value;
}

/** Call the body of a scope and check that it gave something `yield*` can await. */
function startBody<S, R>(body: (scope: S) => Coroutine<R>, scope: S): Coroutine<R> {
  const coro: unknown = body(scope);
  if (!isCoroutine(coro) && !(coro instanceof Future)) {
    throw new TypeError(`the body of a scope must return a coroutine, got ${repr(coro)}`);
  }
  return coro as Coroutine<R>;
}

/** Python's `round(when, 3)` rendered as Python prints a float (`None` as null). */
function formatWhen(when: number | null): string {
  if (when === null) return 'null';
  if (!Number.isFinite(when)) return Number.isNaN(when) ? 'nan' : when > 0 ? 'inf' : '-inf';
  const rounded = Number(when.toFixed(3));
  return Number.isInteger(rounded) ? `${rounded}.0` : String(rounded);
}

/**
 * Put a TimeoutError, caused by the CancelledError, between `error` and the first
 * CancelledError along its `cause` chain, so the chain records that the timeout fired
 * (asyncio's `_insert_timeout_error`, which walks `__context__`).
 */
function insertTimeoutError(error: unknown): void {
  let current = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && current instanceof Error; depth++) {
    const cause: unknown = current.cause;
    if (cause === undefined || cause === null) return;
    if (cause instanceof CancelledError) {
      // Reflect.set leaves a frozen error alone instead of throwing.
      Reflect.set(current, 'cause', new TimeoutError(undefined, { cause }));
      return;
    }
    current = cause;
  }
}
