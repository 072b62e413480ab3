/**
 * The error classes of multiloop, after asyncio's `exceptions` module.
 *
 * Python's `ValueError` is rendered as the built-in `RangeError` and `TypeError` stays
 * `TypeError`; every class here sets `name` so errors keep their identity when they cross
 * a thread by name.
 */

/**
 * Raised for an operation the current state does not allow (Python's RuntimeError).
 *
 * @example
 * ```ts
 * try { getRunningLoop(); } catch (e) { if (e instanceof RuntimeError) console.log(e.message); }
 * ```
 */
export class RuntimeError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RuntimeError';
  }
}

/**
 * Signal that an operation was cancelled (asyncio.CancelledError); `message` is the cancel message.
 *
 * Like Python's BaseException subclasses, library code never swallows it while catching
 * "ordinary" errors.
 *
 * @example
 * ```ts
 * try { yield* sleep(10); } catch (e) { if (e instanceof CancelledError) cleanup(); throw e; }
 * ```
 */
export class CancelledError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CancelledError';
  }
}

/**
 * Report that `run()` was interrupted by SIGINT (Python's KeyboardInterrupt).
 *
 * It escapes the event loop instead of going to the exception handler.
 *
 * @example
 * ```ts
 * run(main()).catch((e) => { if (e instanceof KeyboardInterrupt) process.exitCode = 130; });
 * ```
 */
export class KeyboardInterrupt extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'KeyboardInterrupt';
  }
}

/**
 * Ask the program to exit (Python's SystemExit); like KeyboardInterrupt it escapes the loop.
 *
 * @example
 * ```ts
 * loop.callSoon(() => { throw new SystemExit(2); });
 * ```
 */
export class SystemExit extends Error {
  /** The exit code the program should end with. */
  readonly code: number;

  constructor(code = 0, options?: ErrorOptions) {
    super(`exit code ${code}`, options);
    this.name = 'SystemExit';
    this.code = code;
  }
}

/**
 * Signal an operation the Future or Task state does not allow (asyncio.InvalidStateError).
 *
 * @example
 * ```ts
 * const fut = loop.createFuture(); fut.setResult(1); fut.setResult(2); // throws InvalidStateError
 * ```
 */
export class InvalidStateError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidStateError';
  }
}

/**
 * Signal that a deadline passed (asyncio.TimeoutError, Python's built-in TimeoutError).
 *
 * @example
 * ```ts
 * try { yield* waitFor(slow(), 1); } catch (e) { if (e instanceof TimeoutError) giveUp(); }
 * ```
 */
export class TimeoutError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TimeoutError';
  }
}

/**
 * Raised by `getNowait()` on an empty queue (asyncio.QueueEmpty).
 *
 * @example
 * ```ts
 * try { q.getNowait(); } catch (e) { if (e instanceof QueueEmpty) idle(); }
 * ```
 */
export class QueueEmpty extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'QueueEmpty';
  }
}

/**
 * Raised by `putNowait()` on a full queue (asyncio.QueueFull).
 *
 * @example
 * ```ts
 * try { q.putNowait(item); } catch (e) { if (e instanceof QueueFull) drop(item); }
 * ```
 */
export class QueueFull extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'QueueFull';
  }
}

/**
 * Raised by puts and gets on a queue that was shut down (asyncio.QueueShutDown).
 *
 * @example
 * ```ts
 * try { yield* q.get(); } catch (e) { if (e instanceof QueueShutDown) return; }
 * ```
 */
export class QueueShutDown extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'QueueShutDown';
  }
}

/**
 * Raised to waiters of a Barrier that was reset or aborted (asyncio.BrokenBarrierError).
 *
 * @example
 * ```ts
 * try { yield* barrier.wait(); } catch (e) { if (e instanceof BrokenBarrierError) retry(); }
 * ```
 */
export class BrokenBarrierError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BrokenBarrierError';
  }
}

/**
 * Report that a stream ended before the expected bytes arrived (asyncio.IncompleteReadError).
 *
 * @example
 * ```ts
 * const err = new IncompleteReadError(new Uint8Array([1, 2]), 4); // "2 bytes read on a total of 4 expected bytes"
 * ```
 */
export class IncompleteReadError extends Error {
  /** The bytes read before the end of the stream. */
  readonly partial: Uint8Array;
  /** The number of bytes that were expected, or null when unknown. */
  readonly expected: number | null;

  constructor(partial: Uint8Array, expected: number | null) {
    const expectedText = expected === null ? 'undefined' : String(expected);
    super(`${partial.length} bytes read on a total of ${expectedText} expected bytes`);
    this.name = 'IncompleteReadError';
    this.partial = partial;
    this.expected = expected;
  }
}

/**
 * Report that a separator search ran past the buffer limit (asyncio.LimitOverrunError).
 *
 * @example
 * ```ts
 * const err = new LimitOverrunError('Separator is not found, and chunk exceed the limit', 10);
 * ```
 */
export class LimitOverrunError extends Error {
  /** The number of bytes to consume. */
  readonly consumed: number;

  constructor(message: string, consumed: number) {
    super(message);
    this.name = 'LimitOverrunError';
    this.consumed = consumed;
  }
}

/**
 * Group several errors raised together, e.g. by a TaskGroup (Python's ExceptionGroup).
 *
 * `exceptions` and `errors` list the same errors in order; `message` is the group's own message.
 *
 * @example
 * ```ts
 * const group = new ExceptionGroup('unhandled errors in a TaskGroup', [new RangeError('x')]);
 * group.exceptions[0]; // RangeError: x
 * ```
 */
export class ExceptionGroup extends AggregateError {
  /** The grouped errors, in order (the same errors as `errors`). */
  readonly exceptions: readonly Error[];

  constructor(message: string, exceptions: Iterable<Error>) {
    if (typeof message !== 'string') {
      throw new TypeError(`argument 1 must be str, not ${typeof message}`);
    }
    const list = [...exceptions];
    if (list.length === 0) {
      throw new RangeError('second argument (exceptions) must be a non-empty sequence');
    }
    super(list, message);
    this.name = 'ExceptionGroup';
    this.exceptions = Object.freeze(list);
  }
}

/**
 * Raised by `ContextVar.get()` when the variable has no value and no default (Python's LookupError).
 *
 * @example
 * ```ts
 * try { new ContextVar('x').get(); } catch (e) { if (e instanceof LookupError) useFallback(); }
 * ```
 */
export class LookupError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'LookupError';
  }
}

/**
 * Whether `error` must escape the loop instead of reaching the exception handler
 * (Python's KeyboardInterrupt and SystemExit).
 *
 * @internal
 */
export function _isEscaping(error: unknown): boolean {
  return error instanceof KeyboardInterrupt || error instanceof SystemExit;
}
