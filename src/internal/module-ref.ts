/**
 * The one place that checks what another thread or process will import: module URLs, module
 * specifiers and export names. Every path that makes a thread import a module calls it:
 * `workerFn()`, `runInExecutor` and `toThread`, `PiscinaExecutor.submit`, `LoopThread.start`,
 * `BullMQExecutor.submit`, and, once more before importing, the pool thread, the loop host and
 * the BullMQ worker themselves. A thread of this process imports only `file:` modules: a `data:`
 * URL would run code it carries, and a `node:` built-in is no module of the application. A
 * distributed worker also takes module specifiers (a package name, a `./relative` path), which it
 * resolves itself, and imports only those on its allow list.
 */
import { isAbsolute, posix } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repr } from './format.js';

/** A name longer than this is cut in messages. */
const NAME_SHOWN = 80;

/**
 * Name a module and an export, as a WorkerFn does.
 *
 * @example
 * ```ts
 * const ref: ModuleRef = { moduleUrl: 'file:///srv/math.js', exportName: 'add' };
 * ```
 */
export interface ModuleRef {
  readonly moduleUrl: string;
  readonly exportName: string;
}

/** References checked here (frozen, so they stay as checked): a burst of jobs checks its function once. */
const checked = new WeakSet<object>();
/** References checked here whose module is a specifier: only a distributed executor takes them. */
const checkedSpecifiers = new WeakSet<object>();

/** A path relative to a worker's root: `./x.js`, `../lib/x.js` (no scheme, no backslash, no NUL). */
const RELATIVE_SPECIFIER = /^\.\.?\/[^\0\\]*$/;
/** A package name, scoped or not, with an optional subpath: `jobs`, `@acme/jobs/math.js` (no scheme, no space). */
const PACKAGE_SPECIFIER = /^(?:@[^\s/:\\@]+\/)?[^\s/:\\.@][^\s/:\\]*(?:\/[^\s:\\]+)*$/;

/**
 * Whether `value` is a module specifier a distributed worker resolves: a path relative to its
 * root (`./jobs/math.js`) or a package name (`jobs`, `@acme/jobs/math.js`); never a URL of any
 * scheme (`node:`, `data:`, `https:`) nor an absolute path.
 *
 * @example
 * ```ts
 * isModuleSpecifier('./jobs/math.js'); // true
 * isModuleSpecifier('node:fs'); // false
 * ```
 */
export function isModuleSpecifier(value: unknown): value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 1024 || value.includes('\0')) return false;
  return RELATIVE_SPECIFIER.test(value) || PACKAGE_SPECIFIER.test(value);
}

/**
 * `specifier` in the one form allow lists and jobs are compared in: a relative path normalized
 * (`./a/../b.js` is `./b.js`), a package name as it is.
 *
 * @example
 * ```ts
 * normalizeSpecifier('./jobs/../jobs/math.js'); // './jobs/math.js'
 * ```
 */
export function normalizeSpecifier(specifier: string): string {
  if (!specifier.startsWith('.')) return specifier;
  const normalized = posix.normalize(specifier);
  return normalized.startsWith('../') ? normalized : `./${normalized}`;
}

/**
 * The `file:` href of a module given as a URL, a `file:` href or an absolute path; a TypeError
 * naming `caller` (e.g. `'workerFn()'`) otherwise, which with `workerFnHint` says that a module
 * specifier is for a distributed executor.
 *
 * @example
 * ```ts
 * moduleUrlOf('/srv/app/math.js', 'workerFn()'); // 'file:///srv/app/math.js'
 * ```
 */
export function moduleUrlOf(moduleUrl: unknown, caller: string, workerFnHint = false): string {
  if (moduleUrl instanceof URL) {
    if (moduleUrl.protocol === 'file:') return moduleUrl.href;
  } else if (typeof moduleUrl === 'string') {
    if (/^file:/i.test(moduleUrl)) {
      try {
        return new URL(moduleUrl).href;
      } catch {
        throw new TypeError(`${caller} got an invalid file: URL ${repr(moduleUrl)}`);
      }
    }
    if (isAbsolute(moduleUrl)) return pathToFileURL(moduleUrl).href;
  }
  const shown = moduleUrl instanceof URL ? `the URL ${repr(moduleUrl.href)}` : repr(moduleUrl);
  const hint = workerFnHint && isModuleSpecifier(moduleUrl) ? ' (a module specifier is for a BullMQExecutor, whose workers resolve it)' : '';
  throw new TypeError(`${caller} needs an absolute path or a file: URL, got ${shown}${hint}`);
}

/**
 * The `file:` href of a module given as a URL, a `file:` href or an absolute path, or a module
 * specifier (see `isModuleSpecifier`), normalized; a TypeError naming `caller` otherwise.
 *
 * @example
 * ```ts
 * moduleOrSpecifierOf('./jobs/math.js', 'workerFn()'); // './jobs/math.js'
 * moduleOrSpecifierOf('/srv/app/math.js', 'workerFn()'); // 'file:///srv/app/math.js'
 * ```
 */
export function moduleOrSpecifierOf(moduleUrl: unknown, caller: string): string {
  if (isModuleSpecifier(moduleUrl)) return normalizeSpecifier(moduleUrl);
  if (moduleUrl instanceof URL || (typeof moduleUrl === 'string' && (/^file:/i.test(moduleUrl) || isAbsolute(moduleUrl)))) {
    return moduleUrlOf(moduleUrl, caller);
  }
  const shown = moduleUrl instanceof URL ? `the URL ${repr(moduleUrl.href)}` : repr(moduleUrl);
  throw new TypeError(`${caller} needs an absolute path, a file: URL or a module specifier (a package name or a ./relative path), got ${shown}`);
}

/**
 * `exportName` when it is a non-empty string; a TypeError naming `caller` otherwise.
 *
 * @example
 * ```ts
 * checkExportName('add', 'workerFn()'); // 'add'
 * ```
 */
export function checkExportName(exportName: unknown, caller: string): string {
  if (typeof exportName !== 'string' || exportName === '') {
    throw new TypeError(`${caller} exportName must be a non-empty string, got ${repr(exportName)}`);
  }
  return exportName;
}

/**
 * A frozen, checked reference made from `moduleUrl` and `exportName` (see `moduleUrlOf`); with
 * `specifiers`, `moduleUrl` may also be a module specifier (see `moduleOrSpecifierOf`).
 *
 * @example
 * ```ts
 * const ref = makeModuleRef(new URL('./math.js', import.meta.url), 'add', 'workerFn()');
 * ```
 */
export function makeModuleRef(moduleUrl: unknown, exportName: unknown, caller: string, specifiers = false): ModuleRef {
  const url = specifiers ? moduleOrSpecifierOf(moduleUrl, caller) : moduleUrlOf(moduleUrl, caller, true);
  const ref = Object.freeze({ moduleUrl: url, exportName: checkExportName(exportName, caller) });
  if (url.startsWith('file:')) checked.add(ref);
  else checkedSpecifiers.add(ref);
  return ref;
}

/**
 * `ref` itself when it was made by `makeModuleRef`; else, when it has the shape of one whose
 * fields pass the same checks (a copy that crossed a thread, a hand-made object), a checked
 * frozen copy; a TypeError naming `caller` otherwise. An object whose `moduleUrl` names a
 * `data:` or `node:` module never gets through; one naming a module specifier gets through only
 * with `specifiers` (for a distributed executor).
 *
 * @example
 * ```ts
 * const fn = checkModuleRef(candidate, 'runInExecutor()');
 * ```
 */
export function checkModuleRef(ref: unknown, caller: string, specifiers = false): ModuleRef {
  if (typeof ref === 'object' && ref !== null) {
    if (checked.has(ref) || (specifiers && checkedSpecifiers.has(ref))) return ref as ModuleRef;
  }
  if (typeof ref !== 'object' || ref === null || !('moduleUrl' in ref) || !('exportName' in ref)) {
    throw new TypeError(`${caller} needs a WorkerFn (workerFn(moduleUrl, exportName)), got ${repr(ref)}`);
  }
  const { moduleUrl, exportName } = ref as { moduleUrl: unknown; exportName: unknown };
  if (typeof moduleUrl !== 'string') {
    throw new TypeError(`${caller} needs a WorkerFn whose moduleUrl is a file: URL string, got ${repr(moduleUrl)}`);
  }
  return makeModuleRef(moduleUrl, exportName, caller, specifiers);
}

/**
 * Quote `name` for a message, cut to its first 80 characters.
 *
 * @example
 * ```ts
 * quoteName('x'.repeat(1e6)); // "'xxxx…' (1000000 characters)"
 * ```
 */
export function quoteName(name: string): string {
  if (name.length <= NAME_SHOWN) return `'${name}'`;
  // The ellipsis as an escape: one character beyond Latin-1 in a file makes V8 keep all of its
  // source as two-byte text, in every thread that loads it.
  return `'${name.slice(0, NAME_SHOWN)}\u2026' (${name.length} characters)`;
}

/**
 * `name` for a message without quotes, cut to its first 80 characters.
 *
 * @example
 * ```ts
 * shortName('x'.repeat(1e6)); // 'xxxx…(1000000 characters)'
 * ```
 */
export function shortName(name: string): string {
  return name.length <= NAME_SHOWN ? name : `${name.slice(0, NAME_SHOWN)}\u2026(${name.length} characters)`;
}

/** How many of a module's functions a message lists. */
const FUNCTIONS_SHOWN = 5;

/**
 * Say that `name` is not among `functions` of `owner` (a module, the parent of a LoopThread),
 * listing the first few functions there are; `where` (e.g. `LoopThread 'svc'`) leads the
 * parenthesis.
 *
 * @example
 * ```ts
 * notExported('ad', 'file:///srv/math.js', ['add', 'mul']);
 * // "'ad' is not a function exported by file:///srv/math.js (its functions: 'add', 'mul')"
 * ```
 */
export function notExported(name: string, owner: string, functions: readonly string[], where?: string): string {
  const shown = functions.slice(0, FUNCTIONS_SHOWN).map(quoteName).join(', ');
  const more = functions.length > FUNCTIONS_SHOWN ? ` and ${functions.length - FUNCTIONS_SHOWN} more` : '';
  const list = functions.length === 0 ? 'it has no functions' : `its functions: ${shown}${more}`;
  return `${quoteName(name)} is not a function exported by ${owner} (${where === undefined ? '' : `${where}; `}${list})`;
}

/**
 * Say that the export `name` of `owner` is not a function.
 *
 * @example
 * ```ts
 * notAFunction('version', 'file:///srv/svc.js'); // "'version' exported by file:///srv/svc.js is not a function"
 * ```
 */
export function notAFunction(name: string, owner: string): string {
  return `${quoteName(name)} exported by ${owner} is not a function`;
}
