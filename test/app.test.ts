/**
 * A TypeScript app as a new user makes one: the package packed with `npm pack` (npm test built
 * dist first), installed from its tarball into a scratch app outside the repository, with
 * TypeScript 7 as the app's `typescript` (`npm i typescript` installs 7 today). Its dependencies
 * and tools are linked from this checkout's node_modules (`file:` dependencies, `--offline`), so
 * nothing is fetched. The app runs a LoopThread hosting one of its modules, a pool job that reads
 * `jobSignal()`, and a registered class that crosses `toThread` both ways: under `npx tsx`,
 * compiled by its own `tsc` and run by `node`, and as a CommonJS app through `require()`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NODE_MODULES = join(ROOT, 'node_modules');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const scratch = mkdtempSync(join(tmpdir(), 'multiloop-app-'));
const app = join(scratch, 'app');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What the app prints, whichever way it runs. */
const EXPECTED = ['hello, app, from a LoopThread', 'job 3: signal not aborted', 'a Point: (4, 3), norm 5', ''].join('\n');

/** The tsconfig the README recommends to apps. */
const TSCONFIG = {
  compilerOptions: {
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    strict: true,
    types: ['node'],
    outDir: 'dist',
    rootDir: 'src',
    sourceMap: true,
  },
  include: ['src'],
};

const FILES: Record<string, string> = {
  'src/point.ts': `import { registerClass } from 'multiloop';

export class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}

  norm(): number {
    return Math.hypot(this.x, this.y);
  }
}
registerClass(Point);
`,
  'src/svc.ts': `import { sleep, type Coroutine } from 'multiloop';

export function* greet(name: string): Coroutine<string> {
  yield* sleep(0);
  return \`hello, \${name}, from a LoopThread\`;
}
`,
  'src/jobs.ts': `import { jobSignal } from 'multiloop';
import { Point } from './point.js';

export function signalState(n: number): string {
  return \`job \${n}: signal \${jobSignal().aborted ? 'aborted' : 'not aborted'}\`;
}

export function mirror(p: Point): Point {
  if (!(p instanceof Point)) throw new TypeError('the pool thread got no Point');
  return new Point(p.y, p.x);
}
`,
  'src/main.ts': `import { LoopThread, ensureFuture, run, toThread, workerFn, type Coroutine } from 'multiloop';
import { Point } from './point.js';

const jobs = new URL('./jobs.js', import.meta.url);

function* main(): Coroutine<void> {
  const svc = yield* ensureFuture(LoopThread.start(new URL('./svc.js', import.meta.url)));
  console.log(yield* svc.call<string>('greet', 'app'));
  yield* ensureFuture(svc.close());
  console.log(yield* toThread(workerFn<[number], string>(jobs, 'signalState'), 3));
  const mirrored = yield* toThread(workerFn<[Point], Point>(jobs, 'mirror'), new Point(3, 4));
  console.log(\`\${mirrored instanceof Point ? 'a Point' : 'not a Point'}: (\${mirrored.x}, \${mirrored.y}), norm \${mirrored.norm()}\`);
}

await run(main());
`,
  // A CommonJS module of a TypeScript app: \`require()\` of multiloop, which TypeScript 5.8+ types.
  'src/legacy.cts': `import { sleep } from 'multiloop';

export function pause(): ReturnType<typeof sleep> {
  return sleep(0);
}
`,
  // Prints the stack of an error thrown inside multiloop: its frames, source-mapped, name files.
  'src/stack.ts': `import { jobSignal } from 'multiloop';

try {
  jobSignal();
} catch (error) {
  console.log((error as Error).stack);
}
`,
  'cjs/package.json': JSON.stringify({ type: 'commonjs' }),
  'cjs/point.js': `const { registerClass } = require('multiloop');

class Point {
  constructor(x, y) {
    this.x = x;
    this.y = y;
  }

  norm() {
    return Math.hypot(this.x, this.y);
  }
}
registerClass(Point);
module.exports = { Point };
`,
  'cjs/svc.js': `const { sleep } = require('multiloop');

exports.greet = function* greet(name) {
  yield* sleep(0);
  return \`hello, \${name}, from a LoopThread\`;
};
`,
  'cjs/jobs.js': `const { jobSignal } = require('multiloop');
const { Point } = require('./point.js');

exports.signalState = (n) => \`job \${n}: signal \${jobSignal().aborted ? 'aborted' : 'not aborted'}\`;
exports.mirror = (p) => {
  if (!(p instanceof Point)) throw new TypeError('the pool thread got no Point');
  return new Point(p.y, p.x);
};
`,
  'cjs/main.js': `const { pathToFileURL } = require('node:url');
const { join } = require('node:path');
const { LoopThread, ensureFuture, run, toThread, workerFn } = require('multiloop');
const { Point } = require('./point.js');

const jobs = pathToFileURL(join(__dirname, 'jobs.js'));

function* main() {
  const svc = yield* ensureFuture(LoopThread.start(pathToFileURL(join(__dirname, 'svc.js'))));
  console.log(yield* svc.call('greet', 'app'));
  yield* ensureFuture(svc.close());
  console.log(yield* toThread(workerFn(jobs, 'signalState'), 3));
  const mirrored = yield* toThread(workerFn(jobs, 'mirror'), new Point(3, 4));
  console.log(\`\${mirrored instanceof Point ? 'a Point' : 'not a Point'}: (\${mirrored.x}, \${mirrored.y}), norm \${mirrored.norm()}\`);
}

run(main());
`,
};

function run(command: string, args: string[], cwd = app): { stdout: string; stderr: string; status: number | null } {
  const ran = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 60_000 });
  return { stdout: ran.stdout, stderr: ran.stderr, status: ran.status };
}

beforeAll(() => {
  execFileSync(npm, ['pack', '--ignore-scripts', '--silent', '--pack-destination', scratch], { cwd: ROOT, stdio: 'pipe' });
  const tarball = readdirSync(scratch).find((name) => name.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`npm pack left no tarball in ${scratch}`);
  const linked = (name: string): string => `file:${join(NODE_MODULES, name)}`;
  mkdirSync(app);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({
      name: 'scratch-app',
      private: true,
      type: 'module',
      dependencies: { multiloop: `file:${join(scratch, tarball)}`, piscina: linked('piscina'), comlink: linked('comlink'), bullmq: linked('bullmq'), ioredis: linked('ioredis') },
      devDependencies: { typescript: linked('typescript-7'), tsx: linked('tsx'), esbuild: linked('esbuild'), '@types/node': linked('@types/node') },
    }),
  );
  execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', '--silent'], {
    cwd: app,
    stdio: 'pipe',
    timeout: 90_000,
  });
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
  for (const [name, text] of Object.entries(FILES)) {
    mkdirSync(dirname(join(app, name)), { recursive: true });
    writeFileSync(join(app, name), text);
  }
}, 120_000);

describe('a TypeScript app of the packed package', () => {
  it('has TypeScript 7 as its typescript, which has no JavaScript compiler API', () => {
    const probe = run(process.execPath, [
      '-e',
      "const ts = require('typescript'); console.log(ts.version, typeof ts.transpileModule, typeof ts.ModuleKind)",
    ]);
    expect(probe.stdout).toMatch(/^7\.\d+\.\d+ undefined undefined\n$/);
  });

  it('runs under npx tsx: a LoopThread hosting a .ts module, a pool job reading jobSignal(), a registered class crossing toThread both ways', () => {
    const ran = run(npx, ['tsx', 'src/main.ts']);
    expect(ran.stderr).toBe('');
    expect(ran.stdout).toBe(EXPECTED);
    expect(ran.status).toBe(0);
  }, 60_000);

  it("type-checks with the app's own tsc 7 and with tsc 5, against the shipped .d.ts", () => {
    const tsc7 = run(join(app, 'node_modules', '.bin', 'tsc'), ['--noEmit', '--skipLibCheck', 'false', '-p', '.']);
    expect(tsc7.stdout).toBe('');
    expect(tsc7.status).toBe(0);
    const tsc5 = run(process.execPath, [join(NODE_MODULES, 'typescript', 'bin', 'tsc'), '--noEmit', '--skipLibCheck', 'false', '-p', '.']);
    expect(tsc5.stdout).toBe('');
    expect(tsc5.status).toBe(0);
  }, 90_000);

  it("runs compiled by its own tsc (7) under plain node, and stacks through multiloop name files it ships", () => {
    const built = run(join(app, 'node_modules', '.bin', 'tsc'), ['-p', '.']);
    expect(built.stdout).toBe('');
    const ran = run(process.execPath, ['dist/main.js']);
    expect(ran.stderr).toBe('');
    expect(ran.stdout).toBe(EXPECTED);
    expect(ran.status).toBe(0);
    const stack = run(process.execPath, ['--enable-source-maps', 'dist/stack.js']).stdout;
    const frames = [...stack.matchAll(/\((\/[^():]+\/node_modules\/multiloop\/[^():]+):\d+:\d+\)/g)].map((match) => match[1] as string);
    expect(frames.length).toBeGreaterThan(0);
    expect(frames.filter((file) => !existsSync(file))).toEqual([]);
    expect(frames[0]).toMatch(/\/node_modules\/multiloop\/src\/job-signal\.ts$/);
  }, 60_000);

  // Node 20.19+ loads an ES module with require() (Node 22.12+ on 22).
  const requireEsm = (process.features as { require_module?: boolean }).require_module === true;
  const cjsTitle = 'runs as a CommonJS app that require()s multiloop';
  (requireEsm ? it : it.skip)(requireEsm ? cjsTitle : `${cjsTitle} (skipped: Node ${process.version} cannot require() an ES module)`, () => {
    const ran = run(process.execPath, ['cjs/main.js']);
    expect(ran.stderr).toBe('');
    expect(ran.stdout).toBe(EXPECTED);
    expect(ran.status).toBe(0);
  }, 60_000);
});
