/**
 * TypeScript user modules in worker threads (issue 4): the workers run the built
 * dist/src/internal/ts-loader.js, so run `npx tsc -p tsconfig.json` first.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import type { LoadHookContext, ResolveHookContext } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { _compilerFor, _findCompiler } from '../src/internal/ts-compilers.js';
import { _isTypeScriptUrl, _markCompileUrl, _unmarkCompileUrl, load, resolve } from '../src/internal/ts-hooks.js';
import { typeScriptSibling } from '../src/internal/ts-loader.js';
import { LoopThread, PiscinaExecutor, newEventLoop, setEventLoop, workerFn } from '../src/index.js';

const fixture = (name: string): string => new URL(`./fixtures/${name}`, import.meta.url).href;
const SERVICE = fixture('ts-service.ts');
/** Whether this Node strips types itself (22.18+, 24, 26; 22.6+ with a flag): then it, not a compiler, runs a thread's TypeScript. */
const STRIPS = typeof (process.features as { typescript?: unknown }).typescript === 'string';
/** What Node's stripping says of BROKEN at line 2, column 16, and a compiler where Node does not strip. */
const brokenMessage = (path: string): string =>
  STRIPS ? `${path}:2:16 - error: Expected ',', got ';'` : `${path}:2:16 - error TS1005: ')' expected.`;

type Reply = { ok: true; value: unknown } | { ok: false; name: string; code: string | undefined; message: string };

interface WorkerJob {
  moduleUrl: string;
  via: 'helper' | 'plain';
  call: string;
  args?: unknown[];
  ensure?: string[];
}

/** Run test/fixtures/ts-worker.mjs with the test process's own execArgv, as a LoopThread does. */
function inWorker(job: WorkerJob): Promise<Reply> {
  return new Promise((resolvePromise, reject) => {
    const worker = new Worker(new URL('./fixtures/ts-worker.mjs', import.meta.url), { workerData: job });
    worker.once('message', (reply: Reply) => {
      resolvePromise(reply);
      void worker.terminate();
    });
    worker.once('error', reject);
  });
}

const scratch = mkdtempSync(join(tmpdir(), 'multiloop-ts-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function scratchFile(name: string, text: string): string {
  const path = join(scratch, name);
  writeFileSync(path, text);
  return path;
}

const BROKEN = 'export function add(a: number, b: number): number {\n  return (a + b;\n}\n';

describe('importUserModule', () => {
  it('runs a .ts module with annotations and a ./ts-helper.js import of a .ts sibling', async () => {
    const reply = await inWorker({ moduleUrl: SERVICE, via: 'helper', call: 'report' });
    expect(reply).toEqual({ ok: true, value: { color: 'green', doubled: 42, greeting: 'hello, ts', url: SERVICE } });
  });

  it('is needed: a plain import() of the same module fails (no .ts files, or no ./x.js for x.ts where Node strips types)', async () => {
    const reply = await inWorker({ moduleUrl: SERVICE, via: 'plain', call: 'report' });
    expect(reply).toEqual(
      STRIPS
        ? {
            ok: false,
            name: 'Error',
            code: 'ERR_MODULE_NOT_FOUND',
            message: `Cannot find module '${fileURLToPath(fixture('ts-helper.js'))}' imported from ${fileURLToPath(SERVICE)}`,
          }
        : { ok: false, name: 'TypeError', code: 'ERR_UNKNOWN_FILE_EXTENSION', message: `Unknown file extension ".ts" for ${fileURLToPath(SERVICE)}` },
    );
  });

  it('names the file, line and column of a syntax error', async () => {
    const path = scratchFile('ts-broken.ts', BROKEN);
    const reply = await inWorker({ moduleUrl: pathToFileURL(path).href, via: 'helper', call: 'add', args: [1, 2] });
    expect(reply).toEqual({ ok: false, name: 'SyntaxError', code: STRIPS ? 'ERR_INVALID_TYPESCRIPT_SYNTAX' : undefined, message: brokenMessage(path) });
  });

  it.runIf(!STRIPS)('runs an enum and a namespace where Node does not strip types (a compiler does)', async () => {
    const reply = await inWorker({ moduleUrl: fixture('ts-enum.ts'), via: 'helper', call: 'top' });
    expect(reply).toEqual({ ok: true, value: 2 });
  });

  it.runIf(STRIPS)("says which construct Node's type stripping cannot run, where, and that tsx runs it", async () => {
    const reply = await inWorker({ moduleUrl: fixture('ts-enum.ts'), via: 'helper', call: 'top' });
    expect(reply).toEqual({
      ok: false,
      name: 'SyntaxError',
      code: 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX',
      message:
        `${fileURLToPath(fixture('ts-enum.ts'))}:3:1 - error: TypeScript enum is not supported in strip-only mode. Node's type stripping runs only ` +
        'TypeScript that erases to JavaScript: run the app under tsx (`npx tsx app.ts`), which runs it, or build it with tsc',
    });
  });

  it('points stack frames at the .ts lines', async () => {
    const lines = readFileSync(fileURLToPath(SERVICE), 'utf8').split('\n');
    const line = lines.findIndex((text) => text.includes("throw new RangeError('thrown in TypeScript')")) + 1;
    const reply = await inWorker({ moduleUrl: SERVICE, via: 'helper', call: 'failingStack' });
    expect(reply.ok).toBe(true);
    const stack = (reply as { value: string }).value;
    expect(stack.split('\n').slice(0, 2)).toEqual([
      'RangeError: thrown in TypeScript',
      // Node's own stripping keeps every position, and names an ES module by its URL.
      `    at Module.failingStack (${STRIPS ? SERVICE : fileURLToPath(SERVICE)}:${line}:11)`,
    ]);
  });

  it('runs an .mts module as ESM', async () => {
    const reply = await inWorker({ moduleUrl: fixture('ts-counter.mts'), via: 'helper', call: 'bump', args: [2] });
    expect(reply).toEqual({ ok: true, value: 4 });
  });

  it('runs a .cts module as CommonJS', async () => {
    const reply = await inWorker({ moduleUrl: fixture('ts-legacy.cts'), via: 'helper', call: 'total', args: [[1, 2, 3]] });
    expect(reply).toEqual({ ok: true, value: { sum: 6, requireType: 'function' } });
  });
});

describe('ensureTypeScriptSupport', () => {
  it('lets a later plain import() load TypeScript once called with a .ts URL', async () => {
    const reply = await inWorker({ moduleUrl: SERVICE, via: 'plain', ensure: [SERVICE], call: 'report' });
    expect(reply).toMatchObject({ ok: true, value: { doubled: 42 } });
  });

  it('registers nothing for a JavaScript URL', async () => {
    const reply = await inWorker({ moduleUrl: SERVICE, via: 'plain', ensure: [fixture('ts-worker.mjs')], call: 'report' });
    expect(reply).toMatchObject({ ok: false, code: STRIPS ? 'ERR_MODULE_NOT_FOUND' : 'ERR_UNKNOWN_FILE_EXTENSION' });
  });

  it('maps ./x.js to ./x.ts for TypeScript importers only', async () => {
    const importer = fixture('ts-js-importer.mjs');
    const reply = await inWorker({ moduleUrl: importer, via: 'plain', ensure: [SERVICE], call: 'double', args: [1] });
    expect(reply).toEqual({
      ok: false,
      name: 'Error',
      code: 'ERR_MODULE_NOT_FOUND',
      message: `Cannot find module '${fileURLToPath(fixture('ts-helper.js'))}' imported from ${fileURLToPath(importer)}`,
    });
  });
});

describe('ts-hooks load', () => {
  const context: LoadHookContext = { conditions: [], format: undefined, importAttributes: {} };
  const unknownExtension = (url: string) => {
    throw Object.assign(new TypeError(`Unknown file extension ".ts" for ${fileURLToPath(url)}`), { code: 'ERR_UNKNOWN_FILE_EXTENSION' });
  };

  it('leaves other files to the rest of the chain', async () => {
    const seen: string[] = [];
    const result = await load(fixture('ts-worker.mjs'), context, (url) => {
      seen.push(url);
      return { format: 'module', source: 'export {}' };
    });
    expect(seen).toEqual([fixture('ts-worker.mjs')]);
    expect(result).toEqual({ format: 'module', source: 'export {}' });
  });

  it('keeps what a loader before it made of a .ts file', async () => {
    const result = await load(SERVICE, context, () => ({ format: 'module', source: 'export const fromLoader = 1;' }));
    expect(result).toEqual({ format: 'module', source: 'export const fromLoader = 1;' });
  });

  it('compiles a .ts file the chain cannot load, keeping an inline source map', async () => {
    const result = await load(fixture('ts-helper.ts'), context, unknownExtension);
    expect(result.format).toBe('module');
    expect(result.shortCircuit).toBe(true);
    const source = String(result.source);
    expect(source).toContain('export function double(n) {');
    expect(source).toContain('//# sourceMappingURL=data:application/json;base64,');
  });

  it('leaves raw TypeScript to Node where Node strips types itself', async () => {
    const stripped = { format: 'module-typescript' as const, source: 'export const a: number = 1;' };
    expect(await load(SERVICE, context, () => stripped)).toBe(stripped);
  });

  it('answers a marked URL with the JavaScript its loader made of the file, for another thread', async () => {
    const seen: string[] = [];
    const result = await load(_markCompileUrl(SERVICE, '7-1'), context, (url) => {
      seen.push(url);
      return { format: 'module', source: 'export const fromLoader = 1;' };
    });
    expect(seen).toEqual([SERVICE]);
    expect(result).toEqual({ format: 'module', source: 'export default {"format":"module","source":"export const fromLoader = 1;"};', shortCircuit: true });
  });

  it('answers a marked URL with native when Node strips the file itself', async () => {
    const result = await load(_markCompileUrl(SERVICE, '7-1'), context, () => ({ format: 'module-typescript', source: 'export const a: number = 1;' }));
    expect(result.source).toBe('export default {"native":true};');
  });

  it('compiles for another thread a .ts file no loader can load', async () => {
    const result = await load(_markCompileUrl(fixture('ts-helper.ts'), '7-1'), context, unknownExtension);
    const { default: compiled } = (await import(`data:text/javascript,${encodeURIComponent(String(result.source))}`)) as {
      default: { format: string; source: string };
    };
    expect(compiled.format).toBe('module');
    expect(compiled.source).toContain('export function double(n) {');
  });

  it('passes on errors other than an unknown extension', async () => {
    const missing = Object.assign(new Error('gone'), { code: 'ENOENT' });
    await expect(
      load(SERVICE, context, () => {
        throw missing;
      }),
    ).rejects.toBe(missing);
  });
});

describe('ts-hooks resolve', () => {
  const notFound = (specifier: string) => {
    throw Object.assign(new Error(`Cannot find module '${specifier}'`), { code: 'ERR_MODULE_NOT_FOUND' });
  };
  const context = (parentURL: string): ResolveHookContext => ({ conditions: [], importAttributes: {}, parentURL });

  it('retries ./x.js as ./x.ts when only the .ts file exists', async () => {
    const tried: string[] = [];
    const result = await resolve('./ts-helper.js', context(SERVICE), (specifier) => {
      tried.push(specifier);
      return specifier.endsWith('.ts') ? { url: new URL(specifier, SERVICE).href } : notFound(specifier);
    });
    expect(tried).toEqual(['./ts-helper.js', './ts-helper.ts']);
    expect(result).toEqual({ url: fixture('ts-helper.ts') });
  });

  it('maps .mjs to .mts and .cjs to .cts', async () => {
    const tried: string[] = [];
    const next = (specifier: string) => {
      tried.push(specifier);
      return /\.[cm]ts$/.test(specifier) ? { url: new URL(specifier, SERVICE).href } : notFound(specifier);
    };
    await resolve('./ts-counter.mjs', context(SERVICE), next);
    await resolve('./ts-legacy.cjs', context(SERVICE), next);
    expect(tried).toEqual(['./ts-counter.mjs', './ts-counter.mts', './ts-legacy.cjs', './ts-legacy.cts']);
  });

  it('finds an extensionless ./x as ./x.ts, as tsx does', async () => {
    const exists = (specifier: string) => {
      const url = new URL(specifier, SERVICE);
      return existsSync(url) ? { url: url.href } : notFound(specifier);
    };
    expect(await resolve('./ts-helper', context(SERVICE), exists)).toEqual({ url: fixture('ts-helper.ts') });
    await expect(resolve('./ts-helper', context(fixture('ts-worker.mjs')), exists)).rejects.toThrow("Cannot find module './ts-helper'");
  });

  it('keeps the error when no .ts file is there', async () => {
    await expect(resolve('./nothing.js', context(SERVICE), notFound)).rejects.toThrow("Cannot find module './nothing.js'");
  });
});

describe('ts-compilers', () => {
  const NODE_MODULES = fileURLToPath(new URL('../node_modules/', import.meta.url));

  /** A directory whose node_modules holds the given packages of this checkout, as `name: directory in node_modules`. */
  function appWith(name: string, packages: Record<string, string>): string {
    const app = join(scratch, name);
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    for (const [as, from] of Object.entries(packages)) symlinkSync(join(NODE_MODULES, from), join(app, 'node_modules', as), 'dir');
    return pathToFileURL(join(app, 'main.ts')).href;
  }

  it('finds typescript before esbuild', () => {
    expect(_findCompiler([SERVICE])?.name).toBe('typescript');
  });

  it('falls back to esbuild, whose errors name the file too', async () => {
    const compiler = _findCompiler([SERVICE], ['esbuild']);
    expect(compiler?.name).toBe('esbuild');
    const js = await compiler!.transpile('export enum Level { Low = 1, High }\nexport const top: Level = Level.High;\n', '/app/levels.ts', 'module');
    const namespace = (await import(`data:text/javascript,${encodeURIComponent(js)}`)) as { top: number };
    expect(namespace.top).toBe(2);
    await expect(compiler!.transpile(BROKEN, '/app/ts-broken.ts', 'module')).rejects.toThrow(
      new SyntaxError('/app/ts-broken.ts:2:16 - error: Expected ")" but found ";"'),
    );
  });

  it('passes over TypeScript 7, which has no JavaScript API, for esbuild', () => {
    const url = appWith('ts7-and-esbuild', { typescript: 'typescript-7', esbuild: 'esbuild' });
    expect(_compilerFor(url, pathToFileURL(join(scratch, 'own.js')).href).name).toBe('esbuild');
  });

  it('says TypeScript 7 was passed over when nothing else compiles', () => {
    const url = appWith('ts7-alone', { typescript: 'typescript-7' });
    expect(() => _compilerFor(url, pathToFileURL(join(scratch, 'own.js')).href)).toThrow(
      new Error(
        `cannot load TypeScript module ${url}: no TypeScript compiler found (run under tsx, or install esbuild or typescript 5; typescript 7.0.2 has no JavaScript API to compile with)`,
      ),
    );
  });

  it('fails with a clear error when no compiler can be found', () => {
    const url = pathToFileURL(scratchFile('lonely.ts', 'export {};\n')).href;
    expect(() => _compilerFor(url, pathToFileURL(join(scratch, 'own.js')).href)).toThrow(
      new Error(`cannot load TypeScript module ${url}: no TypeScript compiler found (run under tsx, or install esbuild or typescript 5)`),
    );
  });
});

describe('_isTypeScriptUrl', () => {
  it('accepts .ts, .mts and .cts file URLs, with a query or hash', () => {
    expect(['a.ts', 'a.mts', 'a.cts', 'a.ts?v=1', 'a.mts#x'].map((name) => _isTypeScriptUrl(`file:///app/${name}`))).toEqual([
      true,
      true,
      true,
      true,
      true,
    ]);
  });

  it('rejects JavaScript, TSX and non-file URLs', () => {
    expect(['file:///app/a.js', 'file:///app/a.tsx', 'file:///app/a.js?x.ts', 'data:text/javascript,a.ts'].map(_isTypeScriptUrl)).toEqual([
      false,
      false,
      false,
      false,
    ]);
  });
});

describe('TypeScript in every thread', () => {
  const fixtureUrl = (name: string): URL => new URL(`./fixtures/${name}`, import.meta.url);

  it('runs a pool job from a .ts module, named as .ts or by its built .js name', async () => {
    const executor = new PiscinaExecutor({ maxThreads: 1 });
    try {
      const results = await Promise.all(
        ['ts-job.ts', 'ts-job.js'].map(
          (name) =>
            new Promise<unknown>((resolveResult) => {
              const future = executor.submit(workerFn<[number], number>(fixtureUrl(name), 'quadruple'), 5);
              future.addDoneCallback(() => resolveResult(future.exception() ?? future.result()));
            }),
        ),
      );
      expect(results).toEqual([20, 20]);
    } finally {
      await executor.shutdown();
    }
  });

  it("fails a LoopThread's start with the syntax error found, naming the file, line and column", async () => {
    const path = scratchFile('lt-broken.ts', BROKEN);
    const error = await LoopThread.start(pathToFileURL(path)).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(SyntaxError);
    expect((error as SyntaxError).message).toBe(brokenMessage(path));
  });

  it('hosts a .ts module in a LoopThread named by its built .js name', async () => {
    const thread = await LoopThread.start(fixtureUrl('ts-service.js'), { name: 'ts-by-js' });
    const loop = newEventLoop();
    setEventLoop(loop);
    try {
      const stack = await loop.runUntilComplete(thread.call<string>('failingStack'));
      expect(stack).toMatch(/^RangeError: thrown in TypeScript\n\s+at failingStack \(.*ts-service\.ts:\d+:\d+\)/);
      expect(thread.moduleUrl).toBe(fixtureUrl('ts-service.js').href);
    } finally {
      setEventLoop(null);
      loop.close();
      await thread.terminate();
    }
  });
});

describe('marked URLs', () => {
  it('mark a URL as the last query parameter, before its hash, and unmark it back', () => {
    const urls = ['file:///app/a.ts', 'file:///app/a.ts?v=1', 'file:///app/a.ts#x', 'file:///app/a.ts?v=1#x'];
    const marked = urls.map((url) => _markCompileUrl(url, '12.5-40'));
    expect(marked).toEqual([
      'file:///app/a.ts?multiloop-compile=12.5-40',
      'file:///app/a.ts?v=1&multiloop-compile=12.5-40',
      'file:///app/a.ts?multiloop-compile=12.5-40#x',
      'file:///app/a.ts?v=1&multiloop-compile=12.5-40#x',
    ]);
    expect(marked.map(_unmarkCompileUrl)).toEqual(urls);
    expect(_unmarkCompileUrl('file:///app/a.ts?v=1')).toBeNull();
  });
});


describe('typeScriptSibling', () => {
  it('finds the .ts, .mts or .cts beside a .js, .mjs or .cjs URL that does not exist', () => {
    const base = pathToFileURL(scratch).href;
    scratchFile('only-ts.ts', 'export {};');
    scratchFile('only-mts.mts', 'export {};');
    scratchFile('both.ts', 'export {};');
    scratchFile('both.js', 'export {};');
    expect(typeScriptSibling(`${base}/only-ts.js`)).toBe(`${base}/only-ts.ts`);
    expect(typeScriptSibling(`${base}/only-mts.mjs?v=1`)).toBe(`${base}/only-mts.mts?v=1`);
    expect(typeScriptSibling(`${base}/both.js`)).toBe(`${base}/both.js`);
    expect(typeScriptSibling(`${base}/neither.js`)).toBe(`${base}/neither.js`);
    expect(typeScriptSibling('node:fs')).toBe('node:fs');
  });
});

const noStripping = STRIPS ? '' : ` (skipped: Node ${process.version} does not strip types; 22.18+, 24 and 26 do)`;

describe(`node app.ts: Node strips the types of every thread, with no loader${noStripping}`, () => {
  const skip = STRIPS ? false : noStripping;

  it.skipIf(skip !== false)(
    'runs a .ts LoopThread, pool and pool job, prints no warning, and starts no hooks thread beside a TypeScript thread',
    async () => {
      const app = fileURLToPath(new URL('./fixtures/ts-native-app.ts', import.meta.url));
      const ran = await new Promise<{ error: Error | null; stdout: string; stderr: string }>((resolveRun) => {
        execFile(process.execPath, [app], { encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => resolveRun({ error, stdout, stderr }));
      });
      // Node 26 warns of module.register() (DEP0205): nothing multiloop does may print a warning.
      expect(ran.stderr).toBe('');
      expect(ran.error).toBeNull();
      const seen = JSON.parse(ran.stdout) as Record<string, unknown>;
      expect(seen).toMatchObject({
        stack: ['RangeError: thrown in TypeScript', `    at failingStack (${SERVICE}:${serviceLine('thrown in TypeScript')}:11)`],
        poolStack: 'RangeError: thrown in TypeScript',
        job: 20,
      });
      // One OS thread per LoopThread, TypeScript or not: the hooks run in the thread (registerHooks), not in a hooks thread of its own.
      if (process.platform === 'linux') expect([seen.jsThreadAdds, seen.tsThreadAdds]).toEqual([1, 1]);
    },
    90_000,
  );
});

function serviceLine(text: string): number {
  return readFileSync(fileURLToPath(SERVICE), 'utf8').split('\n').findIndex((line) => line.includes(text)) + 1;
}
