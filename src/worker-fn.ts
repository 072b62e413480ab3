/**
 * Functions that can run in another thread. Threads share no heap, so a function crosses as a
 * reference (the URL of its module and the name of its export) that the other thread imports;
 * this plays the part of the plain callable asyncio's `run_in_executor` and `to_thread` take.
 */
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repr } from './internal/format.js';

/** Carries a WorkerFn's signature in the type system only; no value ever has it. */
declare const workerFnSignature: unique symbol;

/**
 * A function named by module and export, callable in another thread; arguments and result
 * cross by structured clone (ArrayBuffers marked with `move()` are transferred).
 *
 * @example
 * ```ts
 * const add: WorkerFn<[number, number], number> = workerFn(new URL('./math.js', import.meta.url), 'add');
 * const sum = yield* toThread(add, 40, 2); // 42
 * ```
 */
export interface WorkerFn<A extends unknown[] = unknown[], R = unknown> {
  /** The module's URL (`file:` href). */
  readonly moduleUrl: string;
  /** The export's name (`'default'` when none was given). */
  readonly exportName: string;
  /** Type-only: the signature of the named function. */
  readonly [workerFnSignature]?: (...args: A) => R;
}

/**
 * Name the function `exportName` (the default export when omitted) of the module at
 * `moduleUrl`, to run it in another thread (where asyncio's `to_thread` takes the callable).
 *
 * `moduleUrl` is a `URL`, a `file:` href or an absolute path (turned into a `file:` href); a
 * relative path would be resolved against a different directory in the other thread, so it is
 * refused. The result is a frozen plain object that `structuredClone` copies.
 *
 * @example
 * ```ts
 * // math.js: export function add(a, b) { return a + b; }
 * const add = workerFn<[number, number], number>(new URL('./math.js', import.meta.url), 'add');
 * const sum = await loop.runInExecutor(null, add, 40, 2); // 42
 * ```
 */
export function workerFn<A extends unknown[] = unknown[], R = unknown>(
  moduleUrl: string | URL,
  exportName: string = 'default',
): WorkerFn<A, R> {
  const url = _moduleUrlOf(moduleUrl, 'workerFn()');
  if (typeof exportName !== 'string' || exportName === '') {
    throw new TypeError(`workerFn() exportName must be a non-empty string, got ${repr(exportName)}`);
  }
  return Object.freeze({ moduleUrl: url, exportName });
}

/**
 * The href of a module given as a URL, a `file:` href or an absolute path; a TypeError naming
 * `caller` (e.g. `'workerFn()'`) otherwise.
 *
 * @internal
 */
export function _moduleUrlOf(moduleUrl: unknown, caller: string): string {
  if (moduleUrl instanceof URL) return moduleUrl.href;
  if (typeof moduleUrl === 'string') {
    if (/^file:/i.test(moduleUrl)) {
      try {
        return new URL(moduleUrl).href;
      } catch {
        throw new TypeError(`${caller} got an invalid file: URL ${repr(moduleUrl)}`);
      }
    }
    if (isAbsolute(moduleUrl)) return pathToFileURL(moduleUrl).href;
  }
  throw new TypeError(`${caller} needs an absolute path or a file: URL, got ${repr(moduleUrl)}`);
}

/**
 * Whether `value` has the shape of a WorkerFn (a copy that crossed a thread included).
 *
 * @internal
 * @example
 * ```ts
 * if (!isWorkerFn(fn)) throw new TypeError(`expected a WorkerFn, got ${repr(fn)}`);
 * ```
 */
export function isWorkerFn(value: unknown): value is WorkerFn {
  if (typeof value !== 'object' || value === null) return false;
  const { moduleUrl, exportName } = value as { moduleUrl?: unknown; exportName?: unknown };
  return typeof moduleUrl === 'string' && moduleUrl !== '' && typeof exportName === 'string' && exportName !== '';
}

/**
 * Describe `fn` for messages: `'<exportName> of <moduleUrl>'`.
 *
 * @internal
 * @example
 * ```ts
 * describeWorkerFn(workerFn('/srv/math.js', 'add')); // 'add of file:///srv/math.js'
 * ```
 */
export function describeWorkerFn(fn: Pick<WorkerFn, 'moduleUrl' | 'exportName'>): string {
  return `${fn.exportName} of ${fn.moduleUrl}`;
}
