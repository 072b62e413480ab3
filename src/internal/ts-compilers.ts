/**
 * The TypeScript compilers with a JavaScript API that a thread falls back on when neither its
 * starter, nor its loader, nor Node itself compiles a file (see ts-hooks.ts): `typescript` before
 * 7, then `esbuild`. TypeScript 7 has no JavaScript API (its package is a native compiler): it is
 * recognised by its version and API, and never called.
 */
import { createRequire } from 'node:module';

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
  /** Compile `source`, read from `path`; a syntax error rejects with a SyntaxError naming `path:line:column`. */
  transpile(source: string, path: string, output: TypeScriptOutput): Promise<string>;
  /** `transpile`, blocking: for the in-thread hooks of `module.registerHooks`, which cannot wait. */
  transpileSync(source: string, path: string, output: TypeScriptOutput): string;
}

/** The compilers we know how to drive, in the order they are tried. */
const COMPILER_PACKAGES: readonly string[] = ['typescript', 'esbuild'];

/** The parts of the `typescript` package's API used here. */
interface TypeScriptApi {
  version?: unknown;
  ModuleKind?: { ESNext: number; CommonJS: number };
  ScriptTarget?: { ES2022: number };
  DiagnosticCategory?: { Error: number };
  transpileModule?(
    source: string,
    options: { fileName: string; reportDiagnostics: boolean; compilerOptions: Record<string, unknown> },
  ): { outputText: string; diagnostics?: TypeScriptDiagnostic[] };
  flattenDiagnosticMessageText?(message: unknown, newLine: string): string;
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
  transform?(source: string, options: EsbuildOptions): Promise<{ code: string }>;
  transformSync?(source: string, options: EsbuildOptions): { code: string };
}

interface EsbuildOptions {
  loader: 'ts';
  format: 'esm' | 'cjs';
  sourcefile: string;
  sourcemap: 'inline';
  target: string;
}

interface EsbuildFailure {
  errors?: { text: string; location?: { line: number; column: number } | null }[];
}

/** Compilers found so far, by the directory they were looked up from; null when none was there. */
const compilersByDirectory = new Map<string, TypeScriptCompiler | null>();

function versionOf(api: TypeScriptApi): string {
  return typeof api.version === 'string' ? api.version : 'of an unknown version';
}

/** A `typescript` package we can compile with: before 7, with `transpileModule`; null for TypeScript 7 and later. */
function loadTypeScript(api: TypeScriptApi): TypeScriptCompiler | null {
  const major = typeof api.version === 'string' ? Number.parseInt(api.version, 10) : Number.NaN;
  const { transpileModule, flattenDiagnosticMessageText, ModuleKind, ScriptTarget, DiagnosticCategory } = api;
  if (!(major < 7) || transpileModule === undefined || flattenDiagnosticMessageText === undefined) return null;
  if (ModuleKind === undefined || ScriptTarget === undefined || DiagnosticCategory === undefined) return null;
  const transpileSync = (source: string, path: string, output: TypeScriptOutput): string => {
    const result = transpileModule(source, {
      fileName: path,
      reportDiagnostics: true,
      compilerOptions: {
        module: output === 'module' ? ModuleKind.ESNext : ModuleKind.CommonJS,
        target: ScriptTarget.ES2022,
        esModuleInterop: true,
        useDefineForClassFields: true,
        inlineSourceMap: true,
        inlineSources: true,
      },
    });
    const errors = (result.diagnostics ?? []).filter((d) => d.category === DiagnosticCategory.Error);
    if (errors.length > 0) {
      const lines = errors.map((d) => {
        const at = d.file !== undefined && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : { line: 0, character: 0 };
        return `${path}:${at.line + 1}:${at.character + 1} - error TS${d.code}: ${flattenDiagnosticMessageText(d.messageText, '\n')}`;
      });
      throw new SyntaxError(lines.join('\n'));
    }
    return result.outputText;
  };
  return {
    name: 'typescript',
    transpile: (source, path, output) => {
      try {
        return Promise.resolve(transpileSync(source, path, output));
      } catch (error) {
        return Promise.reject(error as Error);
      }
    },
    transpileSync,
  };
}

function loadEsbuild(api: EsbuildApi): TypeScriptCompiler | null {
  const { transform, transformSync } = api;
  if (typeof transform !== 'function' || typeof transformSync !== 'function') return null;
  const options = (path: string, output: TypeScriptOutput): EsbuildOptions => ({
    loader: 'ts',
    format: output === 'module' ? 'esm' : 'cjs',
    sourcefile: path,
    sourcemap: 'inline',
    target: 'node20',
  });
  return {
    name: 'esbuild',
    async transpile(source, path, output) {
      try {
        // The asynchronous API: one esbuild process serves the thread (transformSync adds a thread of its own).
        return (await transform(source, options(path, output))).code;
      } catch (error) {
        throw esbuildSyntaxError(error, path);
      }
    },
    transpileSync(source, path, output) {
      try {
        return transformSync(source, options(path, output)).code;
      } catch (error) {
        throw esbuildSyntaxError(error, path);
      }
    },
  };
}

/** esbuild's failure as a SyntaxError naming `path:line:column`; any other error as it is. */
function esbuildSyntaxError(error: unknown, path: string): unknown {
  const errors = (error as EsbuildFailure).errors;
  if (!Array.isArray(errors) || errors.length === 0) return error;
  const lines = errors.map((e) => {
    const at = e.location ?? { line: 1, column: 0 };
    return `${path}:${at.line}:${at.column + 1} - error: ${e.text}`;
  });
  return new SyntaxError(lines.join('\n'));
}

/**
 * Find a TypeScript compiler: each package of `packages` in turn, looked up from each of
 * `locations` in turn (file: URLs of a file or of a directory ending in `/`). A `typescript`
 * of version 7 or later is passed over: it has no JavaScript API to compile with.
 *
 * @internal
 * @example
 * ```ts
 * const compiler = _findCompiler([moduleUrl, import.meta.url]);
 * const js = await compiler?.transpile('const a: number = 1;', '/app/a.ts', 'module');
 * ```
 */
export function _findCompiler(locations: readonly string[], packages: readonly string[] = COMPILER_PACKAGES): TypeScriptCompiler | null {
  return findCompiler(locations, packages, []);
}

function findCompiler(locations: readonly string[], packages: readonly string[], passedOver: string[]): TypeScriptCompiler | null {
  for (const name of packages) {
    for (const location of locations) {
      let api: unknown;
      try {
        api = createRequire(location)(name);
      } catch {
        continue;
      }
      const compiler = name === 'typescript' ? loadTypeScript(api as TypeScriptApi) : name === 'esbuild' ? loadEsbuild(api as EsbuildApi) : null;
      if (compiler !== null) return compiler;
      if (name === 'typescript') passedOver.push(`typescript ${versionOf(api as TypeScriptApi)} has no JavaScript API to compile with`);
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
 * const js = await _compilerFor(url).transpile(source, fileURLToPath(url), 'module');
 * ```
 */
export function _compilerFor(url: string, ownUrl: string = import.meta.url): TypeScriptCompiler {
  const directory = new URL('.', url).href;
  let compiler = compilersByDirectory.get(directory);
  const passedOver: string[] = [];
  if (compiler === undefined) {
    compiler = findCompiler([directory, ownUrl], COMPILER_PACKAGES, passedOver);
    compilersByDirectory.set(directory, compiler);
  }
  if (compiler === null) {
    const why = passedOver.length > 0 ? `; ${[...new Set(passedOver)].join('; ')}` : '';
    throw new Error(
      `cannot load TypeScript module ${url}: no TypeScript compiler found (run under tsx, or install esbuild or typescript 5${why})`,
    );
  }
  return compiler;
}
