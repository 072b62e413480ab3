/**
 * The TypeScript hooks of ts-hooks.ts, in-thread: registered with `registerHooks()` of
 * node:module where Node has it (22.15+, 23.5+), they run synchronously in the thread that
 * imports, with no hooks thread (Node's `register()` starts one per thread: 8-12 MiB and an OS
 * thread each, and it is deprecated on Node 26, DEP0205). A loader that registers in-thread as
 * well (tsx 4.23 on those Nodes) is the next hook in the same chain, so a starter that compiles
 * for its threads gets what tsx made of a file, as its own imports do.
 *
 * Where a file's JavaScript comes from is as in ts-hooks.ts: the starter (asked over a port,
 * waiting on a shared word until it answered, since an in-thread hook cannot await), the chain
 * (a loader, or Node's own type stripping), a compiler.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { _compilerFor, type TypeScriptOutput } from './ts-compilers.js';
import { _outputOf, _typeScriptCandidate, _unmarkCompileUrl, type CompileReply, type CompileRequest, type CompiledModule } from './ts-hooks.js';

/** What an in-thread load hook returns (node:module's `LoadFnOutput`, as `registerHooks` takes it). */
export interface SyncLoaded {
  format?: string | null | undefined;
  source?: string | ArrayBuffer | ArrayBufferView | null | undefined;
  shortCircuit?: boolean;
}

/** What an in-thread resolve hook returns. */
export interface SyncResolved {
  url: string;
  format?: string | null | undefined;
  shortCircuit?: boolean;
}

type NextLoad = (url: string, context?: object) => SyncLoaded;
type NextResolve = (specifier: string, context?: object) => SyncResolved;

/** How long a thread waits for its starter to compile a file before it gives up. */
const STARTER_TIMEOUT_MS = 120_000;

/** The port to the thread that compiles for this one; null when this thread compiles for itself. */
let starter: MessagePort | null = null;
let lastRequest = 0;

/**
 * Ask the thread at the other end of `port` to compile this thread's TypeScript files (see
 * `serveTypeScript` in ts-loader.ts): called once, before the hooks are registered.
 *
 * @internal
 * @example
 * ```ts
 * _compileThrough(port2);
 * registerHooks({ resolve: _resolveInThread, load: _loadInThread });
 * ```
 */
export function _compileThrough(port: MessagePort): void {
  starter = port;
  port.unref();
}

/**
 * Resolve `./x.js` to `./x.ts` and extensionless `./x` for TypeScript importers, as ts-hooks.ts's
 * `resolve` does, in-thread.
 *
 * @internal
 * @example
 * ```ts
 * registerHooks({ resolve: _resolveInThread, load: _loadInThread }); // in ts-loader.ts
 * ```
 */
export function _resolveInThread(specifier: string, context: { parentURL?: string | undefined }, nextResolve: NextResolve): SyncResolved {
  try {
    return nextResolve(specifier, context);
  } catch (error) {
    const candidate = _typeScriptCandidate(specifier, context.parentURL, (error as { code?: unknown }).code);
    if (candidate === null) throw error;
    return nextResolve(candidate, context);
  }
}

/**
 * Load TypeScript files as ts-hooks.ts's `load` does, in-thread, and answer a marked URL with a
 * file's JavaScript for another thread.
 *
 * @internal
 * @example
 * ```ts
 * registerHooks({ resolve: _resolveInThread, load: _loadInThread }); // in ts-loader.ts
 * ```
 */
export function _loadInThread(url: string, context: object, nextLoad: NextLoad): SyncLoaded {
  const marked = _unmarkCompileUrl(url);
  if (marked !== null && _outputOf(marked) !== null) {
    return { format: 'module', source: `export default ${JSON.stringify(compiledFor(marked, context, nextLoad))};`, shortCircuit: true };
  }
  const output = _outputOf(url);
  if (output === null) return nextLoad(url, context);
  if (starter !== null) {
    const compiled = askStarter(starter, url);
    if ('native' in compiled) return nextLoad(url, context);
    return { format: compiled.format, source: compiled.source, shortCircuit: true };
  }
  return loadHere(url, output, context, nextLoad, false);
}

function compiledFor(url: string, context: object, nextLoad: NextLoad): CompiledModule {
  if (starter !== null) return askStarter(starter, url);
  const loaded = loadHere(url, _outputOf(url) as TypeScriptOutput, context, nextLoad, true);
  if (loaded.format === 'module-typescript' || loaded.format === 'commonjs-typescript') return { native: true };
  return { format: loaded.format === 'commonjs' ? 'commonjs' : 'module', source: sourceText(loaded.source) };
}

/** The file's JavaScript from the chain (a loader, or Node's stripping), else from a compiler. */
function loadHere(url: string, output: TypeScriptOutput, context: object, nextLoad: NextLoad, needSource: boolean): SyncLoaded {
  try {
    const loaded = nextLoad(url, context);
    if (!needSource || (loaded.source !== undefined && loaded.source !== null)) return loaded;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== 'ERR_UNKNOWN_FILE_EXTENSION' && code !== 'ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING') throw error;
  }
  const path = fileURLToPath(url);
  return { format: output, source: _compilerFor(url).transpileSync(readFileSync(path, 'utf8'), path, output), shortCircuit: true };
}

/**
 * The starter's answer for `url`, waited for here: the starter posts it and then wakes this
 * thread through the request's shared word (an in-thread hook cannot wait for a message).
 */
function askStarter(port: MessagePort, url: string): CompiledModule {
  const woken = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
  const request: CompileRequest = { id: ++lastRequest, url, woken };
  port.postMessage(request);
  const deadline = Date.now() + STARTER_TIMEOUT_MS;
  for (;;) {
    const received = receiveMessageOnPort(port) as { message: CompileReply } | undefined;
    if (received !== undefined) {
      const reply = received.message;
      if (reply.id !== request.id) continue;
      if ('compiled' in reply) return reply.compiled;
      throw rebuildError(reply.error);
    }
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`the thread that started this one did not compile ${url} within ${STARTER_TIMEOUT_MS / 1000} s (did it end, or is it blocked?)`);
    Atomics.wait(woken, 0, 0, Math.min(left, 1000));
  }
}

function rebuildError(encoded: { name: string; message: string; code: unknown }): Error {
  const Kind = encoded.name === 'SyntaxError' ? SyntaxError : encoded.name === 'TypeError' ? TypeError : Error;
  const error = new Kind(encoded.message);
  if (encoded.code !== undefined) Object.assign(error, { code: encoded.code });
  return error;
}

function sourceText(source: SyncLoaded['source']): string {
  if (typeof source === 'string') return source;
  if (source === undefined || source === null) return '';
  return new TextDecoder().decode(source as Uint8Array);
}
