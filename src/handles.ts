/**
 * Handles: callbacks scheduled on a loop (asyncio.events.Handle and TimerHandle).
 *
 * One shape for every scheduled callback: up to two arguments live in fields, more in an
 * array, so scheduling allocates nothing but the handle itself.
 */
import { Context, _enter, _enterVars, _exit, type VarMap } from './contextvars.js';
import { _isEscaping } from './exceptions.js';
import { INSPECT, describeCallback, repr } from './internal/format.js';
import type { EventLoop } from './base-events.js';

/** @internal A callback with any arguments (every function is assignable to it). */
export type AnyCallback = (...args: never[]) => unknown;

/** How the handle calls it: with whatever arguments were scheduled. */
type Invoke = (...args: unknown[]) => unknown;

/**
 * @internal What the ready queue holds: Handles, TimerHandles, and Tasks, which schedule their
 * own steps without a Handle of their own.
 */
export interface Runnable {
  /** Run the callback (nothing when cancelled); errors go to the loop's exception handler. */
  _run(): void;
  /** The callback as messages name it. */
  _describe(): string;
}

/**
 * A scheduled callback, as returned by `callSoon` (asyncio.Handle).
 *
 * @example
 * ```ts
 * const handle = loop.callSoon(() => console.log('never printed'));
 * handle.cancel();
 * handle.cancelled(); // true
 * ```
 */
export class Handle implements Runnable {
  /** @internal */
  _callback: AnyCallback | null;
  /**
   * @internal The number of arguments: up to two live in `_a0`/`_a1`, more as an array in
   * `_a0`; -1 once cancelled (one field for both: a handle stays small, timers are many).
   */
  _argc: number;
  /** @internal */
  _a0: unknown;
  /** @internal */
  _a1: unknown;
  /** @internal */
  _loop: EventLoop;
  /** @internal The context to enter: one given explicitly, else the variables captured when the callback was scheduled. */
  _ctx: Context | VarMap;

  /** @internal Handles are made by the loop's scheduling methods; `a0` holds every argument when there are more than two. */
  constructor(callback: AnyCallback, loop: EventLoop, argc: number, a0: unknown, a1: unknown, ctx: Context | VarMap) {
    this._callback = callback;
    this._argc = argc;
    this._a0 = a0;
    this._a1 = a1;
    this._loop = loop;
    this._ctx = ctx;
  }

  /** @internal Whether the handle was cancelled. */
  get _cancelled(): boolean {
    return this._argc < 0;
  }

  /** Cancel the callback; idempotent; a cancelled handle never runs. */
  cancel(): void {
    if (this._argc < 0) return;
    this._argc = -1;
    this._callback = null;
    this._a0 = undefined;
    this._a1 = undefined;
  }

  /** Whether the handle was cancelled. */
  cancelled(): boolean {
    return this._argc < 0;
  }

  /** The loop the handle belongs to. */
  getLoop(): EventLoop {
    return this._loop;
  }

  /**
   * Run the callback in its context; an error goes to the loop's exception handler, except
   * KeyboardInterrupt and SystemExit, which escape.
   *
   * @internal
   */
  _run(): void {
    if (this._argc < 0) return;
    let previous: Context | null = null;
    try {
      const ctx = this._ctx;
      previous = ctx instanceof Context ? _enter(ctx) : _enterVars(ctx);
      const callback = this._callback as Invoke;
      switch (this._argc) {
        case 0:
          callback();
          break;
        case 1:
          callback(this._a0);
          break;
        case 2:
          callback(this._a0, this._a1);
          break;
        default:
          callback(...(this._a0 as unknown[]));
      }
    } catch (error) {
      if (_isEscaping(error)) throw error;
      this._loop.callExceptionHandler({
        message: `Exception in callback ${this._describe()}`,
        exception: error as Error,
        handle: this,
      });
    } finally {
      if (previous !== null) _exit(previous);
    }
  }

  /** @internal The callback as messages name it: `name(args)`. */
  _describe(): string {
    const callback = this._callback;
    if (callback === null) return 'cancelled';
    const name = describeCallback(callback).slice(0, -2);
    let args: unknown[];
    switch (this._argc) {
      case 0:
        args = [];
        break;
      case 1:
        args = [this._a0];
        break;
      case 2:
        args = [this._a0, this._a1];
        break;
      default:
        args = this._a0 as unknown[];
    }
    return `${name}(${args.map(repr).join(', ')})`;
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    return this._cancelled ? `<${this.constructor.name} cancelled>` : `<${this.constructor.name} ${this._describe()}>`;
  }
}

/**
 * A callback scheduled for a time, as returned by `callLater`/`callAt` (asyncio.TimerHandle).
 *
 * @example
 * ```ts
 * const timer = loop.callLater(5, () => console.log('late'));
 * timer.when(); // loop.time() + 5, in seconds
 * ```
 */
export class TimerHandle extends Handle {
  /** @internal */
  _when: number;
  /** @internal Whether the handle sits in the loop's timer heap (which also keeps its scheduling order). */
  _scheduled = false;

  /** @internal */
  constructor(when: number, callback: AnyCallback, loop: EventLoop, argc: number, a0: unknown, a1: unknown, vars: VarMap) {
    super(callback, loop, argc, a0, a1, vars);
    this._when = when;
  }

  /** The absolute time, in the loop's `time()` seconds, at which the callback is due. */
  when(): number {
    return this._when;
  }

  /** Cancel the callback; the loop drops it from its timer heap lazily. */
  override cancel(): void {
    if (this._argc >= 0) this._loop._timerHandleCancelled(this);
    super.cancel();
  }

  override toString(): string {
    return this._cancelled
      ? `<TimerHandle cancelled when=${this._when}>`
      : `<TimerHandle when=${this._when} ${this._describe()}>`;
  }
}
