/**
 * The optional peer dependencies (bullmq, ioredis, pg, @opentelemetry/api): `npm install
 * multiloop` does not bring them, so each is imported on first use, and one that is missing is
 * named, with the command that installs it.
 */
import { RuntimeError } from '../exceptions.js';

/**
 * Import the optional package `name` through `load` (an `import()` of it, written where it is
 * resolved from); when the package is not installed, fail with a RuntimeError naming it and
 * `user`, what needs it. A failed import is not remembered: a later call tries again.
 */
export function importOptional<T>(name: string, user: string, load: () => Promise<T>): Promise<T> {
  return load().catch((error: unknown) => {
    if (isMissingPackage(error, name)) {
      throw new RuntimeError(`${user} needs the optional package '${name}': npm install ${name}`, { cause: error });
    }
    throw error;
  });
}

/** Whether `error` is Node's report that the package `name` itself (not a module it imports) was not found. */
function isMissingPackage(error: unknown, name: string): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  // import(): "Cannot find package 'pg' imported from ..."; require(): "Cannot find module 'pg'".
  return error.message.includes(`package '${name}'`) || error.message.startsWith(`Cannot find module '${name}'`);
}

/**
 * Load the optional package `name` at once through `load` (a `require` of it, written where it is
 * resolved from), for a caller that cannot wait; the RuntimeError of `importOptional` when the
 * package is not installed.
 */
export function requireOptional<T>(name: string, user: string, load: () => T): T {
  try {
    return load();
  } catch (error) {
    if (isMissingPackage(error, name)) {
      throw new RuntimeError(`${user} needs the optional package '${name}': npm install ${name}`, { cause: error });
    }
    throw error;
  }
}
