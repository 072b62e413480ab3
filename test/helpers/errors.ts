/**
 * Getting hold of errors to assert on them: what a call throws, what a promise rejects with,
 * and the checks of an error's class and exact message.
 */
import { expect } from 'vitest';

/**
 * Return what `fn` throws; fail the test when it throws nothing.
 *
 * @example
 * ```ts
 * expectError(thrownBy(() => q.getNowait()), QueueEmpty, '');
 * ```
 */
export function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to throw');
}

/**
 * Settle `promise` into its rejection reason (undefined when it resolved), handled at once.
 *
 * @example
 * ```ts
 * expectError(await reasonOf(runner.run(main())), RuntimeError, 'Runner is closed');
 * ```
 */
export function reasonOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

/**
 * Check that `error` is a `type` with exactly `message`.
 *
 * @example
 * ```ts
 * expectError(error, RuntimeError, 'Event loop is closed');
 * ```
 */
export function expectError(error: unknown, type: abstract new (...args: never[]) => Error, message: string): void {
  expect(error).toBeInstanceOf(type);
  expect((error as Error).message).toBe(message);
}

/**
 * Check that `fn` throws a `type` whose message is `message`, or matches it when a RegExp.
 *
 * @example
 * ```ts
 * expectThrow(() => request.get(), LookupError, "<ContextVar name='request'>");
 * ```
 */
export function expectThrow(fn: () => unknown, type: abstract new (...args: never[]) => Error, message: string | RegExp): void {
  const error = thrownBy(fn);
  expect(error).toBeInstanceOf(type);
  if (typeof message === 'string') expect((error as Error).message).toBe(message);
  else expect((error as Error).message).toMatch(message);
}
