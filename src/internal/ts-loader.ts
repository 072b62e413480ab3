/**
 * TypeScript user modules in threads that have no TypeScript loader of their own.
 *
 * A worker cannot import a .ts file under vitest (it transforms in-process: nothing for the
 * worker to inherit), nor on Node 20 under `node --import tsx`: the worker inherits the flag, but
 * tsx 4 registers its hooks in the main thread only there (it does so in workers from Node
 * 22.22/24.11 on, where one hooks thread serves every thread). So the worker registers the hooks
 * of ts-hooks.ts, once per thread, before it imports a TypeScript module.
 *
 * Decided before importing, never by retrying after ERR_UNKNOWN_FILE_EXTENSION: Node 20 keeps a
 * failed module in its module map, and a second `import()` of the same URL fails again even
 * after new hooks are registered. Nor by looking for a loader's name in `process.execArgv` or
 * NODE_OPTIONS: as tsx shows, a loader named there may not be active in this thread, and then
 * the import would fail for good. Registering costs a hooks thread per worker that imports
 * TypeScript; it cannot break a loader that is active, because the hooks ask the rest of the
 * chain first and compile only the files it cannot load.
 */
import { existsSync } from 'node:fs';
import { register } from 'node:module';
import { fileURLToPath } from 'node:url';
import { _isTypeScriptUrl } from './ts-hooks.js';

/** The built hooks: the hooks thread runs plain JavaScript, also when this file runs from source. */
const HOOKS_URL = new URL(
  import.meta.url.endsWith('.ts') ? '../../dist/src/internal/ts-hooks.js' : './ts-hooks.js',
  import.meta.url,
);

let registered = false;

/**
 * Tell whether Node itself compiles TypeScript in this thread, enums included
 * (`--experimental-transform-types`, Node 22.7+).
 */
function nativeTypeScript(): boolean {
  return (process.features as { typescript?: unknown }).typescript === 'transform';
}

/**
 * Make this thread able to import `moduleUrl` when it names a TypeScript file (.ts, .mts,
 * .cts): register multiloop's TypeScript hooks, once per thread, and turn on source maps so
 * stacks show the .ts lines. A loader already active here keeps the files it can load. Call
 * it before the first `import()` of the module: a failed import cannot be retried in Node 20.
 *
 * @internal
 * @example
 * ```ts
 * await ensureTypeScriptSupport(moduleUrl);
 * const namespace = await import(moduleUrl);
 * ```
 */
export async function ensureTypeScriptSupport(moduleUrl: string): Promise<void> {
  if (registered || !_isTypeScriptUrl(moduleUrl) || nativeTypeScript()) return;
  registered = true;
  // Node 20.0-20.5 has no register(): the import then fails with Node's own error.
  if (typeof register !== 'function') return;
  register(HOOKS_URL);
  // Per thread: only this worker's errors pay for the source map lookups.
  if (!process.sourceMapsEnabled) process.setSourceMapsEnabled(true);
}

/**
 * The URL of the TypeScript source beside a `.js`/`.mjs`/`.cjs` module URL whose file does not
 * exist (`./svc.js` for `./svc.ts`), as TypeScript's NodeNext resolution and tsx find it: code
 * run unbuilt names its siblings by their built names. Any other URL as it is.
 *
 * @internal
 * @example
 * ```ts
 * typeScriptSibling('file:///app/svc.js'); // 'file:///app/svc.ts' when only svc.ts exists
 * ```
 */
export function typeScriptSibling(moduleUrl: string): string {
  const match = /^(file:[^?#]*\.)(m|c)?js([?#].*)?$/i.exec(moduleUrl);
  if (match === null) return moduleUrl;
  try {
    if (existsSync(fileURLToPath(moduleUrl))) return moduleUrl;
    const sibling = `${match[1]}${match[2] ?? ''}ts${match[3] ?? ''}`;
    return existsSync(fileURLToPath(sibling)) ? sibling : moduleUrl;
  } catch {
    return moduleUrl;
  }
}

/**
 * Import a user module by URL, TypeScript included: its TypeScript sibling when only that
 * exists (see `typeScriptSibling`), with `ensureTypeScriptSupport` first.
 *
 * @internal
 * @example
 * ```ts
 * const namespace = await importUserModule(pathToFileURL('/app/service.ts').href);
 * ```
 */
export async function importUserModule(moduleUrl: string): Promise<Record<string, unknown>> {
  const url = typeScriptSibling(moduleUrl);
  await ensureTypeScriptSupport(url);
  return (await import(url)) as Record<string, unknown>;
}
