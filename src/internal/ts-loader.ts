/**
 * TypeScript user modules in threads: a thread registers the hooks of ts-hooks.ts, once, before
 * it imports its first TypeScript module, and a LoopThread's or pool thread's starter compiles
 * for it (see ts-hooks.ts for the order in which a file's JavaScript is looked for).
 *
 * Why the starter compiles: on Node 20 a worker does not share its starter's hooks, and tsx 4
 * registers its hooks in the main thread only (from Node 22.22/24.11 on, in every thread); a
 * thread that loaded a compiler of its own (tsx, esbuild's service, the `typescript` package) paid
 * seconds and tens of MiB for it. The starter already runs a loader, or loads a compiler once for
 * all its threads; the thread pays for one message per TypeScript file, and, where Node lacks
 * `module.registerHooks` (before 22.15), for a hooks thread (ts-hooks.ts; from 22.15 the hooks run
 * in the thread: ts-hooks-in-thread.ts). For the same reason threads are started without tsx's
 * flags (threads/exec-argv.ts): tsx in a thread costs more than the thread, and compiles nothing
 * there on Node 20.
 *
 * Decided before importing, never by retrying after ERR_UNKNOWN_FILE_EXTENSION: Node 20 keeps a
 * failed module in its module map, and a second `import()` of the same URL fails again even
 * after new hooks are registered.
 */
import { existsSync, statSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { CompileReply, CompileRequest, CompiledModule } from './ts-hooks.js';
import type * as InThreadHooks from './ts-hooks-in-thread.js';
import { _isTypeScriptUrl, _markCompileUrl } from './ts-urls.js';
import { bundleFile } from './bundle-files.js';

/** node:module's hook registrations, each where the running Node has it. */
const { register, registerHooks: registerInThread } = nodeModule as {
  register?: (specifier: string | URL, options?: { data?: unknown; transferList?: unknown[] }) => void;
  registerHooks?: (hooks: { resolve?: typeof InThreadHooks._resolveInThread; load?: typeof InThreadHooks._loadInThread }) => unknown;
};

/**
 * The in-thread hooks where Node has `registerHooks`, loaded on first use: a thread that hosts no
 * TypeScript loads no hooks (nor their compilers); on older Nodes the hooks run in a hooks thread.
 */
function loadInThreadHooks(): Promise<typeof InThreadHooks | null> {
  return typeof registerInThread === 'function' ? import('./ts-hooks-in-thread.js') : Promise.resolve(null);
}

/** The bundle's hooks: the hooks thread runs plain JavaScript, also when this file runs from source. */
const HOOKS_URL = bundleFile('ts-hooks.js');

/** The bundle's entry (what `import 'multiloop'` names), which a thread loads whole before its TypeScript hooks are in. */
const PACKAGE_URL = bundleFile('index.js').href;

/** The key of the message a thread posts its starter to be compiled for: the port it will ask on. */
const TYPESCRIPT_PORT = 'multiloop:typescript-port';

/**
 * A thread's request to its starter to compile its TypeScript: requests come on `port`.
 *
 * @internal
 */
export interface TypeScriptPortMessage {
  readonly [TYPESCRIPT_PORT]: true;
  readonly port: MessagePort;
}

/** Node's own `import()` (see native-import.cts), loaded the first time this thread compiles for another. */
let nativeImport: ((url: string) => Promise<unknown>) | null = null;

let registered = false;

/** This thread's starter, when it compiles for this thread (set by the worker entries). */
let starter: MessagePort | null = null;

/**
 * Tell whether Node itself compiles TypeScript in this thread, enums included
 * (`--experimental-transform-types`, Node 22.7+).
 */
function nativeTypeScript(): boolean {
  return (process.features as { typescript?: unknown }).typescript === 'transform';
}

/**
 * Have this thread's TypeScript compiled by its starter, which listens on `port` (the worker's
 * `parentPort`) for a `TypeScriptPortMessage`: called by the entries of LoopThreads and pool
 * threads, whose starters answer (`serveTypeScript`).
 *
 * @internal
 * @example
 * ```ts
 * _compiledByStarter(parentPort); // in _hostLoopThread()
 * ```
 */
export function _compiledByStarter(port: MessagePort): void {
  starter = port;
}

/**
 * Register the TypeScript hooks in this thread, once, with a port to the starter when it compiles
 * for us: in-thread where Node has `registerHooks` (22.15+), else ts-hooks.ts in a hooks thread.
 */
function registerHooks(inThread: typeof InThreadHooks | null): void {
  if (registered) return;
  registered = true;
  let port: MessagePort | null = null;
  if (starter !== null) {
    const { port1, port2 } = new MessageChannel();
    const message: TypeScriptPortMessage = { [TYPESCRIPT_PORT]: true, port: port1 };
    starter.postMessage(message, [port1]);
    port = port2;
  }
  if (typeof registerInThread === 'function' && inThread !== null) {
    if (port !== null) inThread._compileThrough(port);
    registerInThread({ resolve: inThread._resolveInThread, load: inThread._loadInThread });
  } else if (typeof register === 'function') {
    register(HOOKS_URL, port === null ? undefined : { data: { parent: port }, transferList: [port] });
  } else {
    // Node 20.0-20.5 has neither: a TypeScript import then fails with Node's own error.
    port?.close();
    return;
  }
  // Per thread: only this thread's errors pay for the source map lookups.
  if (!process.sourceMapsEnabled) process.setSourceMapsEnabled(true);
}

/**
 * Make this thread able to import `moduleUrl` when it names a TypeScript file (.ts, .mts,
 * .cts): register multiloop's TypeScript hooks, once per thread, and turn on source maps so
 * stacks show the .ts lines. Call it before the first `import()` of the module: a failed import
 * cannot be retried in Node 20.
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
  // Every module loaded once the hooks are in goes through the hooks thread, and the module
  // almost surely imports multiloop: loaded first, the rest of it costs no round trips there
  // (a LoopThread hosting a .ts module started ~70 ms sooner, with ~4 MiB less, on Node 20).
  await import(PACKAGE_URL);
  registerHooks(await loadInThreadHooks());
}

/**
 * Tell whether `message` (from a worker, or piscina's 'message' event) asks this thread to
 * compile the worker's TypeScript.
 *
 * @internal
 */
export function isTypeScriptPortMessage(message: unknown): message is TypeScriptPortMessage {
  return typeof message === 'object' && message !== null && (message as Partial<TypeScriptPortMessage>)[TYPESCRIPT_PORT] === true;
}

/**
 * Compile, for the thread at the other end of `port`, each TypeScript file it asks for, as this
 * thread would load it (its loader, Node's type stripping, or a compiler): the answer to a
 * `TypeScriptPortMessage`. The port does not keep this thread alive.
 *
 * @internal
 * @example
 * ```ts
 * worker.on('message', (message) => {
 *   if (isTypeScriptPortMessage(message)) serveTypeScript(message.port);
 * });
 * ```
 */
export function serveTypeScript(port: MessagePort): void {
  port.on('message', (request: CompileRequest) => {
    compileForThread(request.url).then(
      (compiled) => {
        const reply: CompileReply = { id: request.id, compiled };
        answer(port, request, reply);
      },
      (failure: unknown) => {
        // Explained here: the stack that says where does not travel.
        const error = _explainTypeScriptError(failure);
        const { name, message, code } = (error ?? {}) as { name?: unknown; message?: unknown; code?: unknown };
        const reply: CompileReply = { id: request.id, error: { name: String(name ?? 'Error'), message: String(message ?? error), code } };
        answer(port, request, reply);
      },
    );
  });
  port.unref();
}

/** Post `reply`, then wake the asker if it waits blocked (in-thread hooks cannot wait for a message). */
function answer(port: MessagePort, request: CompileRequest, reply: CompileReply): void {
  port.postMessage(reply);
  if (request.woken instanceof Int32Array) {
    Atomics.store(request.woken, 0, 1);
    Atomics.notify(request.woken, 0);
  }
}

/** The JavaScript of the TypeScript file at `url`, from this thread's hooks (see ts-hooks.ts). */
async function compileForThread(url: string): Promise<CompiledModule> {
  if (!_isTypeScriptUrl(url)) throw new TypeError(`not a TypeScript file: ${url}`);
  registerHooks(await loadInThreadHooks());
  nativeImport ??= createRequire(import.meta.url)(fileURLToPath(bundleFile('native-import.cjs'))) as (url: string) => Promise<unknown>;
  return ((await nativeImport(_markCompileUrl(url, fileVersion(url)))) as { default: CompiledModule }).default;
}

/** What tells versions of a file apart: a file changed since it was compiled is compiled again. */
function fileVersion(url: string): string {
  try {
    const stats = statSync(fileURLToPath(url));
    return `${stats.mtimeMs}-${stats.size}`;
  } catch {
    return 'missing';
  }
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
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw _explainTypeScriptError(error);
  }
}

/**
 * `path:line:column` of the spot a SyntaxError's stack shows at its top, as Node puts it:
 * `path:line` (or a file: URL), then the source around it, with a line of carets under the spot
 * or, for a span of several lines, its lines marked `  > `; null when the stack does not start so.
 */
function whereInSource(stack: string): string | null {
  const lines = stack.split('\n');
  const head = /^(.+):(\d+)$/.exec(lines[0] as string);
  if (head === null) return null;
  let path = head[1] as string;
  if (path.startsWith('file:')) {
    try {
      path = fileURLToPath(path);
    } catch {
      return null;
    }
  }
  let column = 1;
  for (const line of lines.slice(1)) {
    if (line === '') break;
    const caret = /^([ \t]*)\^/.exec(line) ?? /^ {2}> ([ \t]*)\S/.exec(line);
    if (caret !== null) {
      column = (caret[1] as string).length + 1;
      break;
    }
  }
  return `${path}:${head[2]}:${column}`;
}

/**
 * A SyntaxError of Node's type stripping (ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX,
 * ERR_INVALID_TYPESCRIPT_SYNTAX) as `path:line:column - error: ...`, the form of the compilers'
 * errors, read from the source line Node puts at the top of its stack; a construct the
 * stripping cannot run (an enum, a namespace, `export =`, a parameter property) also says what
 * runs it. Any other error as it is.
 *
 * @internal
 * @example
 * ```ts
 * throw _explainTypeScriptError(error); // '/app/svc.ts:3:8 - error: TypeScript enum is not supported in strip-only mode. ...'
 * ```
 */
export function _explainTypeScriptError(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX' && code !== 'ERR_INVALID_TYPESCRIPT_SYNTAX') return error;
  const { message, stack } = error as Error;
  const at = whereInSource(String(stack));
  // Explained already, in the thread that compiled it (a rebuilt error has no source lines).
  if (at === null && String(message).includes('tsx')) return error;
  const where = at === null ? '' : `${at} - error: `;
  const why =
    code === 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX'
      ? ". Node's type stripping runs only TypeScript that erases to JavaScript: run the app under tsx (`npx tsx app.ts`), which runs it, or build it with tsc"
      : '';
  return Object.assign(new SyntaxError(`${where}${message}${why}`, { cause: error }), { code });
}
