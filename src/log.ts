/**
 * The logger through which the loop reports what it cannot raise anywhere (asyncio.log.logger).
 */

/** Where multiloop writes its reports; replace its methods to route them elsewhere. */
export interface Logger {
  /** An error report: a message and, when there is one, the error. */
  error(message: string, error?: unknown): void;
  /** A warning, such as a slow callback in debug mode. */
  warning(message: string): void;
}

/**
 * The library's logger (asyncio.log.logger); by default it writes to `console.error`/`console.warn`.
 *
 * @example
 * ```ts
 * logger.error = (message, error) => myLog.error({ message, error });
 * ```
 */
export const logger: Logger = {
  error(message: string, error?: unknown): void {
    if (error instanceof Error && error.stack !== undefined) console.error(`${message}\n${error.stack}`);
    else if (error !== undefined) console.error(`${message}\n${String(error)}`);
    else console.error(message);
  },
  warning(message: string): void {
    console.warn(message);
  },
};
