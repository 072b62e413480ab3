import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { checkWorkerFn, describeWorkerFn, workerFn, type WorkerFn } from '../src/worker-fn.js';
import { startHost, type Host } from './fixtures/xthread-client.js';

const mathUrl = new URL('./fixtures/xthread-math.mjs', import.meta.url);

describe('workerFn', () => {
  it('keeps a URL as its href', () => {
    expect(workerFn(new URL('file:///srv/app/math.js'), 'add')).toEqual({
      moduleUrl: 'file:///srv/app/math.js',
      exportName: 'add',
    });
  });

  it('keeps a file: href, normalized', () => {
    expect(workerFn('file:///srv/app/math.js').moduleUrl).toBe('file:///srv/app/math.js');
    expect(workerFn('FILE:///srv/lib/../app/math.js').moduleUrl).toBe('file:///srv/app/math.js');
  });

  it('turns an absolute path into a file: URL', () => {
    expect(workerFn('/srv/app/math.js').moduleUrl).toBe('file:///srv/app/math.js');
    expect(workerFn('/srv/my app/math #1.js').moduleUrl).toBe(pathToFileURL('/srv/my app/math #1.js').href);
    expect(workerFn('/srv/my app/math #1.js').moduleUrl).toBe('file:///srv/my%20app/math%20%231.js');
  });

  it.each([
    ['./x.js', './x.js'],
    ['./jobs/../lib/x.js', './lib/x.js'],
    ['../lib/x.js', '../lib/x.js'],
    ['jobs', 'jobs'],
    ['x.js', 'x.js'],
    ['@acme/jobs/math.js', '@acme/jobs/math.js'],
  ])('keeps the module specifier %j (for a distributed executor) as %j', (moduleUrl, kept) => {
    expect(workerFn(moduleUrl, 'add')).toEqual({ moduleUrl: kept, exportName: 'add' });
  });

  it.each(['', 'https://example.com/x.js', 'node:path', 'data:text/javascript,1', 'C:\\jobs\\x.js', 'two words', '.hidden'])(
    'refuses %j with a TypeError',
    (moduleUrl) => {
      expect(() => workerFn(moduleUrl)).toThrow(
        new TypeError(
          `workerFn() needs an absolute path, a file: URL or a module specifier (a package name or a ./relative path), got '${moduleUrl.replaceAll('\\', '\\\\')}'`,
        ),
      );
    },
  );

  it.each([
    ['42', 42],
    ['null', null],
    ['undefined', undefined],
    ['{}', {}],
  ])('refuses a module URL of %s with a TypeError', (shown, moduleUrl) => {
    expect(() => workerFn(moduleUrl as never)).toThrow(
      new TypeError(`workerFn() needs an absolute path, a file: URL or a module specifier (a package name or a ./relative path), got ${shown}`),
    );
  });

  it('refuses a file: href that is not a valid URL', () => {
    expect(() => workerFn('file://a b/x.js')).toThrow(
      new TypeError("workerFn() got an invalid file: URL 'file://a b/x.js'"),
    );
  });

  it("names the default export when no name is given", () => {
    expect(workerFn('/srv/math.js').exportName).toBe('default');
    expect(workerFn('/srv/math.js', undefined).exportName).toBe('default');
  });

  it.each([
    ["''", ''],
    ['null', null],
    ['42', 42],
  ])('refuses an export name of %s with a TypeError', (shown, exportName) => {
    expect(() => workerFn('/srv/math.js', exportName as never)).toThrow(
      new TypeError(`workerFn() exportName must be a non-empty string, got ${shown}`),
    );
  });

  it('checks the module URL before the export name', () => {
    expect(() => workerFn('node:fs', '')).toThrow("workerFn() needs an absolute path, a file: URL or a module specifier (a package name or a ./relative path), got 'node:fs'");
  });

  it('returns a frozen plain object that structuredClone copies', () => {
    const fn = workerFn(mathUrl, 'add');
    expect(Object.isFrozen(fn)).toBe(true);
    expect(Object.getPrototypeOf(fn)).toBe(Object.prototype);
    expect(Object.keys(fn)).toEqual(['moduleUrl', 'exportName']);
    expect(structuredClone(fn)).toEqual({ moduleUrl: mathUrl.href, exportName: 'add' });
    expect(() => {
      (fn as { exportName: string }).exportName = 'other';
    }).toThrow(TypeError);
  });

  it('carries its signature in the type only', () => {
    const add = workerFn<[number, number], number>(mathUrl, 'add');
    expect(add.exportName).toBe('add');
    expectTypeOf(add).toEqualTypeOf<WorkerFn<[number, number], number>>();
    expectTypeOf(workerFn(mathUrl)).toEqualTypeOf<WorkerFn<unknown[], unknown>>();
    // @ts-expect-error: the argument types differ
    const wrongArgs: WorkerFn<[string, string], number> = add;
    // @ts-expect-error: the result type differs
    const wrongResult: WorkerFn<[number, number], string> = add;
    expect([wrongArgs, wrongResult]).toEqual([add, add]);
  });
});

describe('checkWorkerFn', () => {
  it('returns a WorkerFn made by workerFn() as it is', () => {
    const fn = workerFn(mathUrl, 'add');
    expect(checkWorkerFn(fn, 'submit()')).toBe(fn);
  });

  it('checks a copy that crossed a thread and returns it frozen', () => {
    const copy = structuredClone(workerFn(mathUrl, 'add'));
    const checked = checkWorkerFn(copy, 'submit()');
    expect(checked).toEqual({ moduleUrl: mathUrl.href, exportName: 'add' });
    expect(Object.isFrozen(checked)).toBe(true);
  });

  it('normalizes a hand-made reference by the rules of workerFn()', () => {
    expect(checkWorkerFn({ moduleUrl: 'file:///srv/lib/../math.js', exportName: 'add' }, 'submit()')).toEqual({
      moduleUrl: 'file:///srv/math.js',
      exportName: 'add',
    });
  });

  it.each([
    ['a data: URL', 'data:text/javascript,export const x = 1', "'data:text/javascript,export const x = 1'"],
    ['a node: built-in', 'node:fs', "'node:fs'"],
    ['an https: URL', 'https://example.com/x.js', "'https://example.com/x.js'"],
    ['an empty string', '', "''"],
  ])('refuses a module URL that is %s, naming the caller', (_label, moduleUrl, shown) => {
    expect(() => checkWorkerFn({ moduleUrl, exportName: 'readFileSync' }, 'toThread()')).toThrow(
      new TypeError(`toThread() needs an absolute path or a file: URL, got ${shown}`),
    );
  });

  it.each([
    ['a relative path', './x.js'],
    ['a package name', 'jobs'],
  ])('refuses a module specifier that is %s for a local executor, saying who takes it', (_label, moduleUrl) => {
    const hint = ' (a module specifier is for a BullMQExecutor, whose workers resolve it)';
    expect(() => checkWorkerFn({ moduleUrl, exportName: 'add' }, 'toThread()')).toThrow(
      new TypeError(`toThread() needs an absolute path or a file: URL, got '${moduleUrl}'${hint}`),
    );
    expect(() => checkWorkerFn(workerFn(moduleUrl, 'add'), 'runInExecutor()')).toThrow(
      new TypeError(`runInExecutor() needs an absolute path or a file: URL, got '${moduleUrl}'${hint}`),
    );
  });

  it('lets a module specifier through for a distributed executor, and still refuses a data: URL there', () => {
    const fn = workerFn('./jobs/math.js', 'add');
    expect(checkWorkerFn(fn, 'submit()', true)).toBe(fn);
    expect(checkWorkerFn({ moduleUrl: './jobs/../jobs/math.js', exportName: 'add' }, 'submit()', true)).toEqual({
      moduleUrl: './jobs/math.js',
      exportName: 'add',
    });
    expect(() => checkWorkerFn({ moduleUrl: 'data:text/javascript,1', exportName: 'add' }, 'submit()', true)).toThrow(
      /^submit\(\) needs an absolute path, a file: URL or a module specifier/,
    );
  });

  it.each([
    ['null', null, 'null'],
    ['a function', () => 1, 'anonymous()'],
    ['a string', 'file:///srv/math.js', "'file:///srv/math.js'"],
    ['an empty object', {}, '{}'],
    ['no export name', { moduleUrl: 'file:///srv/math.js' }, "{ moduleUrl: 'file:///srv/math.js' }"],
  ])('refuses %s', (_label, value, shown) => {
    expect(() => checkWorkerFn(value, 'submit()')).toThrow(
      new TypeError(`submit() needs a WorkerFn (workerFn(moduleUrl, exportName)), got ${shown}`),
    );
  });

  it('refuses a URL object or an empty export name', () => {
    expect(() => checkWorkerFn({ moduleUrl: new URL('file:///srv/math.js'), exportName: 'add' }, 'submit()')).toThrow(
      /^submit\(\) needs a WorkerFn whose moduleUrl is a file: URL string, got /,
    );
    expect(() => checkWorkerFn({ moduleUrl: 'file:///srv/math.js', exportName: '' }, 'submit()')).toThrow(
      new TypeError("submit() exportName must be a non-empty string, got ''"),
    );
  });

  it('refuses a URL object of another scheme in workerFn() too', () => {
    expect(() => workerFn(new URL('data:text/javascript,1'))).toThrow(
      new TypeError("workerFn() needs an absolute path or a file: URL, got the URL 'data:text/javascript,1'"),
    );
  });
});

describe('describeWorkerFn', () => {
  it('names the export and the module', () => {
    expect(describeWorkerFn(workerFn('/srv/math.js', 'add'))).toBe('add of file:///srv/math.js');
    expect(describeWorkerFn(workerFn('/srv/math.js'))).toBe('default of file:///srv/math.js');
  });

  it('cuts a long export name', () => {
    const name = 'x'.repeat(1_000_000);
    expect(describeWorkerFn(workerFn('/srv/math.js', name))).toBe(`${'x'.repeat(80)}…(1000000 characters) of file:///srv/math.js`);
  });
});

describe('workerFn across a worker thread', () => {
  let host: Host;

  beforeAll(() => {
    host = startHost();
  });

  afterAll(async () => {
    await host.terminate();
  });

  it('runs the named export in the other thread', async () => {
    const add = workerFn<[number, number], number>(mathUrl, 'add');
    expect((await host.call(add, 40, 2)).result).toBe(42);
  });

  it('runs the default export, named by an absolute path', async () => {
    const double = workerFn<[number], number>(fileURLToPath(mathUrl));
    expect((await host.call(double, 21)).result).toBe(42);
  });
});
