/**
 * Module customization hooks that let a thread import TypeScript files (.ts, .mts, .cts): registered
 * with `register()` of node:module by ts-loader.ts where Node has no `registerHooks` (before
 * 22.15), they run in the thread's hooks thread; ts-hooks-in-thread.ts is their in-thread twin.
 *
 * Where a TypeScript file's JavaScript comes from, in order:
 * 1. the thread that started this one, when it said it compiles for us (a LoopThread's or a
 *    pool thread's starter: `initialize` gets a port to it). It compiles with what it runs
 *    under, by the steps below, so that a thread's modules are compiled as its starter's are,
 *    and the thread pays for no compiler of its own;
 * 2. the loader this thread runs under (tsx, ...): both hooks ask the rest of the chain first;
 * 3. Node's own type stripping, where the running Node strips types (the chain hands back
 *    `module-typescript`);
 * 4. a compiler with a JavaScript API: `typescript` before 7, or `esbuild`. TypeScript 7 has none
 *    (its package is a native compiler): it is recognised by its version and never called.
 *
 * A starter compiles a file for a thread by importing it under a marked URL (`?multiloop-compile=`),
 * which these hooks, registered there too, answer with a module whose default export is the
 * JavaScript: the starter's own chain did the work, as it would for the starter's own import.
 */
import { existsSync, readFileSync } from 'node:fs';
import { type LoadFnOutput, type LoadHook, type LoadHookContext, type ResolveHook } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { MessagePort } from 'node:worker_threads';
import { _compilerFor, type TypeScriptOutput } from './ts-compilers.js';
import { _outputOf as outputOf, _unmarkCompileUrl, endOfPath } from './ts-urls.js';

export { _isTypeScriptUrl, _markCompileUrl, _outputOf, _unmarkCompileUrl } from './ts-urls.js';

/**
 * A file's JavaScript as one thread hands it to another: what to evaluate, or `native` when the
 * running Node compiles the file itself (type stripping), so the asker loads it as Node does.
 *
 * @internal
 */
export type CompiledModule = { format: TypeScriptOutput; source: string } | { native: true };

/**
 * A compile request from a thread to its starter, on the port the thread opened.
 *
 * @internal
 */
export interface CompileRequest {
  id: number;
  url: string;
  /** Set to 1 and notified once the reply is posted, for a thread that waits for it blocked (ts-hooks-in-thread.ts). */
  woken?: Int32Array;
}

/**
 * The starter's answer: the compiled module, or the error that stopped it.
 *
 * @internal
 */
export type CompileReply = { id: number; compiled: CompiledModule } | { id: number; error: { name: string; message: string; code: unknown } };

/** What `register()` passes to `initialize`: the port to the thread that compiles for this one. */
export interface TypeScriptHooksData {
  parent?: MessagePort;
}

/** The port to the thread that compiles for this one, from `initialize`. */
let parent: MessagePort | null = null;
let lastRequest = 0;
const pending = new Map<number, { resolve: (compiled: CompiledModule) => void; reject: (error: Error) => void }>();

/** `./x.js` → `./x.ts` (and .mjs → .mts, .cjs → .cts): TypeScript ESM names the emitted file. */
function typeScriptTwin(specifier: string): string | null {
  if (!isPathSpecifier(specifier)) return null;
  const end = endOfPath(specifier);
  const suffix = specifier.slice(end);
  const path = specifier.slice(0, end);
  if (path.endsWith('.js')) return `${path.slice(0, -3)}.ts${suffix}`;
  if (path.endsWith('.mjs')) return `${path.slice(0, -4)}.mts${suffix}`;
  if (path.endsWith('.cjs')) return `${path.slice(0, -4)}.cts${suffix}`;
  return null;
}

function isPathSpecifier(specifier: string): boolean {
  return specifier.startsWith('./') || specifier.startsWith('../') || specifier.startsWith('/') || specifier.startsWith('file:');
}

/** The file names tried for an extensionless `./x` (or a directory) imported by TypeScript, as tsx and bundlers resolve it. */
const IMPLICIT_SUFFIXES: readonly string[] = ['.ts', '.mts', '.js', '.mjs', '/index.ts', '/index.js'];

/**
 * Set up the hooks of a thread: `data.parent` is the port to the thread that compiles this
 * thread's TypeScript, when one does.
 *
 * @internal
 * @example
 * ```ts
 * register(HOOKS_URL, { data: { parent: port }, transferList: [port] }); // in ts-loader.ts
 * ```
 */
export function initialize(data: TypeScriptHooksData | undefined): void {
  if (data?.parent === undefined) return;
  parent = data.parent;
  parent.on('message', (reply: CompileReply) => {
    const waiter = pending.get(reply.id);
    if (waiter === undefined) return;
    pending.delete(reply.id);
    if (pending.size === 0) parent?.unref();
    if ('compiled' in reply) waiter.resolve(reply.compiled);
    else waiter.reject(rebuildError(reply.error));
  });
  // The starter ended: nothing will answer; the imports waiting fail rather than hang.
  parent.on('close', () => {
    parent = null;
    for (const [id, waiter] of pending) {
      pending.delete(id);
      waiter.reject(new Error('the thread that started this one ended before it compiled its TypeScript'));
    }
  });
  parent.unref();
}

function rebuildError(encoded: { name: string; message: string; code: unknown }): Error {
  const Kind = encoded.name === 'SyntaxError' ? SyntaxError : encoded.name === 'TypeError' ? TypeError : Error;
  const error = new Kind(encoded.message);
  if (encoded.code !== undefined) Object.assign(error, { code: encoded.code });
  return error;
}

function askParent(port: MessagePort, url: string): Promise<CompiledModule> {
  return new Promise((resolve, reject) => {
    const id = ++lastRequest;
    pending.set(id, { resolve, reject });
    port.ref();
    const request: CompileRequest = { id, url };
    port.postMessage(request);
  });
}

/**
 * Resolve a relative `./x.js` that does not exist to `./x.ts` beside it (.mjs to .mts, .cjs to
 * .cts), and an extensionless `./x` to `./x.ts` (or .mts, .js, .mjs, `./x/index.ts`,
 * `./x/index.js`), for TypeScript importers: the two ways TypeScript code names its siblings.
 *
 * @internal
 * @example
 * ```ts
 * register(new URL('./ts-hooks.js', import.meta.url)); // in ts-loader.ts
 * ```
 */
export const resolve: ResolveHook = async (specifier, context, nextResolve) => {
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const parentUrl = context.parentURL;
    const candidate = _typeScriptCandidate(specifier, parentUrl, code);
    if (candidate === null) throw error;
    return nextResolve(candidate, context);
  }
};

/**
 * What a TypeScript importer at `parentUrl` meant by `specifier`, which Node could not resolve
 * (`code`): its `.ts` twin or the first existing implicit name; null when none exists, or
 * when the importer is no TypeScript file.
 *
 * @internal
 * @example
 * ```ts
 * _typeScriptCandidate('./helper.js', 'file:///app/main.ts', 'ERR_MODULE_NOT_FOUND'); // './helper.ts' when it exists
 * ```
 */
export function _typeScriptCandidate(specifier: string, parentUrl: string | undefined, code: unknown): string | null {
  if ((code !== 'ERR_MODULE_NOT_FOUND' && code !== 'ERR_UNSUPPORTED_DIR_IMPORT') || parentUrl === undefined || outputOf(parentUrl) === null) return null;
  for (const candidate of candidatesFor(specifier)) {
    const url = new URL(candidate, parentUrl);
    if (url.protocol === 'file:' && existsSync(url) && !url.pathname.endsWith('/')) return candidate;
  }
  return null;
}

function candidatesFor(specifier: string): string[] {
  const twin = typeScriptTwin(specifier);
  if (twin !== null) return [twin];
  if (!isPathSpecifier(specifier)) return [];
  const end = endOfPath(specifier);
  const path = specifier.slice(0, end).replace(/\/$/, '');
  // A name with an extension of its own (`./data.json`) is not one TypeScript left off.
  if (/\.[A-Za-z0-9]+$/.test(path.slice(path.lastIndexOf('/') + 1)) && !specifier.endsWith('/')) return [];
  return IMPLICIT_SUFFIXES.map((suffix) => `${path}${suffix}${specifier.slice(end)}`);
}

/**
 * Load TypeScript files (.ts and .mts as ES modules, .cts as CommonJS, each with an inline
 * source map) from where the module comment says, and answer a marked URL (see
 * `_markCompileUrl`) with the file's JavaScript for another thread.
 *
 * @internal
 * @example
 * ```ts
 * register(new URL('./ts-hooks.js', import.meta.url)); // in ts-loader.ts
 * ```
 */
export const load: LoadHook = async (url, context, nextLoad) => {
  const marked = _unmarkCompileUrl(url);
  if (marked !== null && outputOf(marked) !== null) {
    const compiled = await compiledFor(marked, context, nextLoad);
    return { format: 'module', source: `export default ${JSON.stringify(compiled)};`, shortCircuit: true };
  }
  const output = outputOf(url);
  if (output === null) return nextLoad(url, context);
  if (parent !== null) {
    const compiled = await askParent(parent, url);
    if ('native' in compiled) return nextLoad(url, context);
    return { format: compiled.format, source: compiled.source, shortCircuit: true };
  }
  return loadHere(url, output, context, nextLoad, false);
};

/** The JavaScript of the file at `url` as this thread would load it, in a form another thread can take. */
async function compiledFor(url: string, context: LoadHookContext, nextLoad: Parameters<LoadHook>[2]): Promise<CompiledModule> {
  if (parent !== null) return askParent(parent, url);
  const output = outputOf(url) as TypeScriptOutput;
  const loaded = await loadHere(url, output, context, nextLoad, true);
  if (loaded.format === 'module-typescript' || loaded.format === 'commonjs-typescript') return { native: true };
  return { format: loaded.format === 'commonjs' ? 'commonjs' : 'module', source: sourceText(loaded.source) };
}

/**
 * Load the TypeScript file at `url` in this thread: its loader, else Node's type stripping, else
 * a compiler. `needSource`: the source is for another thread, so a CommonJS file the chain left
 * to require() (tsx does so) is compiled here.
 */
async function loadHere(url: string, output: TypeScriptOutput, context: LoadHookContext, nextLoad: Parameters<LoadHook>[2], needSource: boolean): Promise<LoadFnOutput> {
  try {
    const loaded = await nextLoad(url, context);
    // A loader compiled it; or Node strips its types (Node 22.6+ hands back `module-typescript`).
    if (!needSource || (loaded.source !== undefined && loaded.source !== null)) return loaded;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    // Node without type stripping, or Node refusing to strip a file under node_modules.
    if (code !== 'ERR_UNKNOWN_FILE_EXTENSION' && code !== 'ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING') throw error;
  }
  const path = fileURLToPath(url);
  const source = await _compilerFor(url).transpile(readFileSync(path, 'utf8'), path, output);
  return { format: output, source, shortCircuit: true };
}

function sourceText(source: LoadFnOutput['source']): string {
  if (typeof source === 'string') return source;
  if (source === undefined || source === null) return '';
  return new TextDecoder().decode(source as Uint8Array);
}
