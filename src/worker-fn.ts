/**
 * Functions that can run in another thread or process. Threads share no heap, so a function
 * crosses as a reference (the URL of its module, or for a distributed worker a module specifier,
 * and the name of its export) that the other side imports; this plays the part of the plain
 * callable asyncio's `run_in_executor` and `to_thread` take.
 */
import { checkModuleRef, makeModuleRef, shortName } from './internal/module-ref.js';

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
  /** The module's URL (`file:` href), or a module specifier a distributed worker resolves (`'./jobs/math.js'`, `'jobs'`). */
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
 * `moduleUrl` is a `file:` URL, a `file:` href or an absolute path (turned into a `file:` href),
 * for the threads of this process; or, for a distributed executor (`BullMQExecutor`), a module
 * specifier its workers resolve: a path relative to the worker's root (`'./jobs/math.js'`) or a
 * package name (`'@acme/jobs'`). A local executor refuses a specifier (it would be resolved
 * against a different directory in the other thread); a `data:` or `node:` URL is no module of
 * the application, so it is refused everywhere. The result is a frozen plain object that
 * `structuredClone` copies.
 *
 * @example
 * ```ts
 * // math.js: export function add(a, b) { return a + b; }
 * const add = workerFn<[number, number], number>(new URL('./math.js', import.meta.url), 'add');
 * const sum = await loop.runInExecutor(null, add, 40, 2); // 42
 * const remoteAdd = workerFn<[number, number], number>('./jobs/math.js', 'add'); // for a BullMQExecutor
 * ```
 */
export function workerFn<A extends unknown[] = unknown[], R = unknown>(
  moduleUrl: string | URL,
  exportName: string = 'default',
): WorkerFn<A, R> {
  return makeModuleRef(moduleUrl, exportName, 'workerFn()', true);
}

/**
 * `fn` when it is a WorkerFn whose module and export name pass the checks `workerFn()` makes
 * (a copy that crossed a thread included, then checked and frozen); a TypeError naming `caller`
 * otherwise, so that no hand-made object makes a thread import a `data:` or `node:` module. A
 * module specifier passes only with `specifiers` (a distributed executor's workers resolve it).
 *
 * @internal
 * @example
 * ```ts
 * const checked = checkWorkerFn(fn, 'toThread()');
 * ```
 */
export function checkWorkerFn<A extends unknown[], R>(fn: WorkerFn<A, R> | unknown, caller: string, specifiers = false): WorkerFn<A, R> {
  return checkModuleRef(fn, caller, specifiers) as WorkerFn<A, R>;
}

/**
 * Whether `executor` runs WorkerFns named by module specifiers, as it says with an
 * `_resolvesModuleSpecifiers()` method (a distributed executor: its workers resolve them).
 *
 * @internal
 * @example
 * ```ts
 * const fn = checkWorkerFn(candidate, 'runInExecutor()', resolvesModuleSpecifiers(executor));
 * ```
 */
export function resolvesModuleSpecifiers(executor: unknown): boolean {
  const method = (executor as { _resolvesModuleSpecifiers?: unknown } | null)?._resolvesModuleSpecifiers;
  return typeof method === 'function' && (method as () => unknown).call(executor) === true;
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
  return `${shortName(fn.exportName)} of ${fn.moduleUrl}`;
}
