/**
 * Module customization hooks that let a thread import TypeScript files (.ts, .mts, .cts) when no
 * TypeScript loader runs in it: registered with `register()` of node:module by
 * `ensureTypeScriptSupport()` in ts-loader.ts, they run in Node's hooks thread.
 *
 * Both hooks ask the rest of the chain first and step in only where it fails, so they are
 * harmless on top of a loader we did not recognise (tsx, ts-node, ...): that loader keeps the
 * files it can handle.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire, type LoadHook, type ResolveHook } from 'node:module';
import { fileURLToPath } from 'node:url';

/** How a TypeScript file is emitted: an ES module, or CommonJS for .cts files. */
export type TypeScriptOutput = 'module' | 'commonjs';

/**
 * Turn TypeScript source into JavaScript with an inline source map.
 *
 * @internal
 */
export interface TypeScriptCompiler {
  /** The package that does the work: `typescript` or `esbuild`. */
  readonly name: string;
  /** Compile `source`, read from `path`; a syntax error throws a SyntaxError naming `path:line:column`. */
  transpile(source: string, path: string, output: TypeScriptOutput): string;
}

/** The compilers we know how to drive, in the order they are tried. */
const COMPILER_PACKAGES: readonly string[] = ['typescript', 'esbuild'];

/** The parts of the `typescript` package's API used here. */
interface TypeScriptApi {
  ModuleKind: { ESNext: number; CommonJS: number };
  ScriptTarget: { ES2022: number };
  DiagnosticCategory: { Error: number };
  transpileModule(
    source: string,
    options: { fileName: string; reportDiagnostics: boolean; compilerOptions: Record<string, unknown> },
  ): { outputText: string; diagnostics?: TypeScriptDiagnostic[] };
  flattenDiagnosticMessageText(message: unknown, newLine: string): string;
}

interface TypeScriptDiagnostic {
  category: number;
  code: number;
  start?: number;
  messageText: unknown;
  file?: { getLineAndCharacterOfPosition(position: number): { line: number; character: number } };
}

/** The parts of the `esbuild` package's API used here. */
interface EsbuildApi {
  transformSync(
    source: string,
    options: { loader: 'ts'; format: 'esm' | 'cjs'; sourcefile: string; sourcemap: 'inline'; target: string },
  ): { code: string };
}

interface EsbuildFailure {
  errors?: { text: string; location?: { line: number; column: number } | null }[];
}

/** Compilers found so far, by the directory they were looked up from; null when none was there. */
const compilersByDirectory = new Map<string, TypeScriptCompiler | null>();

/** Emitted format per extension; other files are not ours. */
function outputOf(url: string): TypeScriptOutput | null {
  if (!url.startsWith('file:')) return null;
  const end = endOfPath(url);
  if (url.endsWith('.ts', end) || url.endsWith('.mts', end)) return 'module';
  if (url.endsWith('.cts', end)) return 'commonjs';
  return null;
}

function endOfPath(url: string): number {
  const query = url.indexOf('?');
  const hash = url.indexOf('#');
  if (query === -1) return hash === -1 ? url.length : hash;
  return hash === -1 ? query : Math.min(query, hash);
}

/**
 * Tell whether `url` names a TypeScript file these hooks compile: a file: URL ending in .ts,
 * .mts or .cts before any query or hash.
 *
 * @internal
 * @example
 * ```ts
 * _isTypeScriptUrl('file:///app/service.ts'); // true
 * _isTypeScriptUrl('file:///app/service.js'); // false
 * ```
 */
export function _isTypeScriptUrl(url: string): boolean {
  return outputOf(url) !== null;
}

/** `./x.js` → `./x.ts` (and .mjs → .mts, .cjs → .cts): TypeScript ESM names the emitted file. */
function typeScriptTwin(specifier: string): string | null {
  if (!(specifier.startsWith('./') || specifier.startsWith('../') || specifier.startsWith('/') || specifier.startsWith('file:'))) {
    return null;
  }
  const end = endOfPath(specifier);
  const suffix = specifier.slice(end);
  const path = specifier.slice(0, end);
  if (path.endsWith('.js')) return `${path.slice(0, -3)}.ts${suffix}`;
  if (path.endsWith('.mjs')) return `${path.slice(0, -4)}.mts${suffix}`;
  if (path.endsWith('.cjs')) return `${path.slice(0, -4)}.cts${suffix}`;
  return null;
}

function loadTypeScript(api: TypeScriptApi): TypeScriptCompiler {
  return {
    name: 'typescript',
    transpile(source, path, output) {
      const result = api.transpileModule(source, {
        fileName: path,
        reportDiagnostics: true,
        compilerOptions: {
          module: output === 'module' ? api.ModuleKind.ESNext : api.ModuleKind.CommonJS,
          target: api.ScriptTarget.ES2022,
          esModuleInterop: true,
          useDefineForClassFields: true,
          inlineSourceMap: true,
          inlineSources: true,
        },
      });
      const errors = (result.diagnostics ?? []).filter((d) => d.category === api.DiagnosticCategory.Error);
      if (errors.length > 0) {
        const lines = errors.map((d) => {
          const at = d.file !== undefined && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : { line: 0, character: 0 };
          return `${path}:${at.line + 1}:${at.character + 1} - error TS${d.code}: ${api.flattenDiagnosticMessageText(d.messageText, '\n')}`;
        });
        throw new SyntaxError(lines.join('\n'));
      }
      return result.outputText;
    },
  };
}

function loadEsbuild(api: EsbuildApi): TypeScriptCompiler {
  return {
    name: 'esbuild',
    transpile(source, path, output) {
      try {
        return api.transformSync(source, {
          loader: 'ts',
          format: output === 'module' ? 'esm' : 'cjs',
          sourcefile: path,
          sourcemap: 'inline',
          target: 'node20',
        }).code;
      } catch (error) {
        const errors = (error as EsbuildFailure).errors;
        if (!Array.isArray(errors) || errors.length === 0) throw error;
        const lines = errors.map((e) => {
          const at = e.location ?? { line: 1, column: 0 };
          return `${path}:${at.line}:${at.column + 1} - error: ${e.text}`;
        });
        throw new SyntaxError(lines.join('\n'));
      }
    },
  };
}

/**
 * Find a TypeScript compiler: each package of `packages` in turn, looked up from each of
 * `locations` in turn (file: URLs of a file or of a directory ending in `/`).
 *
 * @internal
 * @example
 * ```ts
 * const compiler = _findCompiler([moduleUrl, import.meta.url]);
 * const js = compiler?.transpile('const a: number = 1;', '/app/a.ts', 'module');
 * ```
 */
export function _findCompiler(locations: readonly string[], packages: readonly string[] = COMPILER_PACKAGES): TypeScriptCompiler | null {
  for (const name of packages) {
    for (const location of locations) {
      let api: unknown;
      try {
        api = createRequire(location)(name);
      } catch {
        continue;
      }
      if (name === 'typescript') return loadTypeScript(api as TypeScriptApi);
      if (name === 'esbuild') return loadEsbuild(api as EsbuildApi);
    }
  }
  return null;
}

/**
 * The compiler for the file at `url`: found from the file's directory first, then from
 * `ownUrl` (multiloop's location); throws when neither has one.
 *
 * @internal
 * @example
 * ```ts
 * const js = _compilerFor(url).transpile(source, fileURLToPath(url), 'module');
 * ```
 */
export function _compilerFor(url: string, ownUrl: string = import.meta.url): TypeScriptCompiler {
  const directory = new URL('.', url).href;
  let compiler = compilersByDirectory.get(directory);
  if (compiler === undefined) {
    compiler = _findCompiler([directory, ownUrl]);
    compilersByDirectory.set(directory, compiler);
  }
  if (compiler === null) {
    throw new Error(`cannot load TypeScript module ${url}: no TypeScript compiler found (install typescript or run under tsx)`);
  }
  return compiler;
}

/**
 * Resolve a relative `./x.js` that does not exist to `./x.ts` beside it (.mjs to .mts, .cjs to
 * .cts), for TypeScript importers: the ESM convention names the file tsc will emit.
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
    const parent = context.parentURL;
    if ((error as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND' || parent === undefined || outputOf(parent) === null) throw error;
    const twin = typeScriptTwin(specifier);
    if (twin === null) throw error;
    const candidate = new URL(twin, parent);
    if (candidate.protocol !== 'file:' || !existsSync(candidate)) throw error;
    return nextResolve(twin, context);
  }
};

/**
 * Compile the .ts/.mts/.cts files the rest of the chain cannot load: .ts and .mts to ES
 * modules, .cts to CommonJS, each with an inline source map.
 *
 * @internal
 * @example
 * ```ts
 * register(new URL('./ts-hooks.js', import.meta.url)); // in ts-loader.ts
 * ```
 */
export const load: LoadHook = async (url, context, nextLoad) => {
  const output = outputOf(url);
  if (output === null) return nextLoad(url, context);
  try {
    const loaded = await nextLoad(url, context);
    // Node 22.6+ hands back raw TypeScript for us to finish; anything else was already compiled.
    if (loaded.format !== 'module-typescript' && loaded.format !== 'commonjs-typescript') return loaded;
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw error;
  }
  const path = fileURLToPath(url);
  const source = _compilerFor(url).transpile(readFileSync(path, 'utf8'), path, output);
  return { format: output, source, shortCircuit: true };
};
