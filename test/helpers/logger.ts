/** Catching what the library logs, and putting the logger back after each test. */
import { afterEach } from 'vitest';
import { logger } from '../../src/index.js';

/**
 * Put back `logger.error` and `logger.warning` after each test, whatever the test set them to.
 *
 * @example
 * ```ts
 * restoreLogger();
 * ```
 */
export function restoreLogger(): void {
  const { error, warning } = logger;
  afterEach(() => {
    logger.error = error;
    logger.warning = warning;
  });
}

/**
 * Collect what reaches `logger.error` instead of printing it (with `restoreLogger()` in the suite).
 *
 * @example
 * ```ts
 * const logged = captureErrors();
 * ```
 */
export function captureErrors(): Array<[string, unknown]> {
  const calls: Array<[string, unknown]> = [];
  logger.error = (message, error) => {
    calls.push([message, error]);
  };
  return calls;
}
