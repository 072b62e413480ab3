/**
 * The distributed executor's engines are optional peer dependencies: an app that installed
 * multiloop alone (its packed files, piscina and comlink; no bullmq, ioredis or pg) imports
 * multiloop and runs LoopThreads, and using the distributed executor fails with an error naming
 * the package to install. The app is put together from the packed tarball and the project's own
 * node_modules, offline.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { RuntimeError } from '../src/exceptions.js';
import { importOptional } from '../src/internal/optional.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'multiloop-optional-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** `name` and the packages it depends on (optional ones when installed), from the project's node_modules. */
function withDependencies(name: string, into: Set<string> = new Set()): Set<string> {
  if (into.has(name)) return into;
  let manifest: { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
  try {
    manifest = JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as typeof manifest;
  } catch {
    return into; // An optional dependency for another platform.
  }
  into.add(name);
  for (const dependency of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) withDependencies(dependency, into);
  return into;
}

/** An app whose node_modules holds multiloop as `npm pack` packs it and what its package.json `dependencies` name. */
function makeApp(): { app: string; installed: string[] } {
  execFileSync(npm, ['pack', '--ignore-scripts', '--silent', '--pack-destination', scratch], { cwd: ROOT, stdio: 'pipe' });
  const tarball = readdirSync(scratch).find((name) => name.endsWith('.tgz'));
  expect(tarball).toMatch(/^multiloop-\d+\.\d+\.\d+\.tgz$/);
  const app = join(scratch, 'app');
  const modules = join(app, 'node_modules');
  mkdirSync(modules, { recursive: true });
  execFileSync('tar', ['-xzf', join(scratch, tarball!), '-C', modules]);
  renameSync(join(modules, 'package'), join(modules, 'multiloop'));
  const manifest = JSON.parse(readFileSync(join(modules, 'multiloop', 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const installed = new Set<string>();
  for (const name of Object.keys(manifest.dependencies)) withDependencies(name, installed);
  for (const name of installed) cpSync(join(ROOT, 'node_modules', name), join(modules, name), { recursive: true, dereference: true });
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }));
  return { app, installed: [...installed].sort() };
}

describe('multiloop without its optional packages', () => {
  it('imports and runs a LoopThread, and the distributed executor names the package to install', () => {
    const { app, installed } = makeApp();
    // What `npm install multiloop` brings: piscina and comlink (and piscina's own), none of the engines.
    expect(installed.filter((name) => !name.startsWith('@napi-rs/'))).toEqual(['comlink', 'piscina']);
    writeFileSync(join(app, 'job.js'), 'export function triple(n) { return n * 3; }\n');
    writeFileSync(join(app, 'svc.js'), "import { sleep } from 'multiloop';\nexport function* hello(name) { yield* sleep(0); return `hello, ${name}`; }\n");
    writeFileSync(
      join(app, 'main.js'),
      [
        "import { BullMQExecutor, LoopThread, ensureFuture, run, serveBullMQ, workerFn, wrapFuture } from 'multiloop';",
        'const lines = [];',
        "for (const name of ['bullmq', 'ioredis', 'pg']) {",
        '  try { import.meta.resolve(name); lines.push(`${name} resolves`); } catch { lines.push(`no ${name}`); }',
        '}',
        'function* main() {',
        "  const svc = yield* ensureFuture(LoopThread.start(new URL('./svc.js', import.meta.url)));",
        "  lines.push(yield* svc.call('hello', 'thread'));",
        '  yield* ensureFuture(svc.close());',
        "  const executor = new BullMQExecutor({ connection: 'redis://127.0.0.1:1' });",
        '  try {',
        "    yield* wrapFuture(executor.submit(workerFn(new URL('./job.js', import.meta.url), 'triple'), 14));",
        "    lines.push('submitted');",
        '  } catch (error) {',
        '    lines.push(`${error.name}: ${error.message}`);',
        '  }',
        '  yield* ensureFuture(executor.shutdown(false));',
        '}',
        'await run(main());',
        'try {',
        "  await serveBullMQ({ connection: 'postgres://127.0.0.1:1/db', allow: ['./job.js'], handleSignals: false });",
        "  lines.push('served');",
        '} catch (error) {',
        '  lines.push(`${error.name}: ${error.message}`);',
        '}',
        "console.log(lines.join('\\n'));",
      ].join('\n'),
    );
    const ran = spawnSync(process.execPath, ['main.js'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
    expect(ran.stderr).toBe('');
    expect(ran.stdout.split('\n')).toEqual([
      'no bullmq',
      'no ioredis',
      'no pg',
      'hello, thread',
      "RuntimeError: cannot use the BullMQ queue on Redis at 127.0.0.1:1: BullMQExecutor needs the optional package 'bullmq': npm install bullmq",
      "RuntimeError: serveBullMQ needs the optional package 'bullmq': npm install bullmq",
      '',
    ]);
    expect(ran.status).toBe(0);

    // A TypeScript app that checks every declaration (skipLibCheck off) finds none of the engines' types missing.
    for (const name of withDependencies('@types/node')) cpSync(join(ROOT, 'node_modules', name), join(app, 'node_modules', name), { recursive: true, dereference: true });
    writeFileSync(
      join(app, 'check.ts'),
      [
        "import { BullMQExecutor, type PostgresConnection, type RedisConnection } from 'multiloop';",
        "const postgres: PostgresConnection = { postgres: { host: 'db', max: 2, ssl: { rejectUnauthorized: true }, schema: 'jobs' } };",
        "const redis: RedisConnection = { host: 'cache', port: 6379 };",
        'export const executors = [new BullMQExecutor({ connection: postgres }), new BullMQExecutor({ connection: redis })];',
      ].join('\n'),
    );
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--skipLibCheck', 'false', '--types', 'node', 'check.ts'];
    const checked = spawnSync(process.execPath, [tsc, ...flags], { cwd: app, encoding: 'utf8', timeout: 120_000 });
    expect(checked.stdout).toBe('');
    expect(checked.status).toBe(0);
  }, 250_000);
});

describe('importOptional', () => {
  const load = (name: string) => (): Promise<unknown> => import(name);

  it('names the missing package, what needs it and the command that installs it', async () => {
    const failed = await importOptional('multiloop-no-such-package', 'the test', load('multiloop-no-such-package')).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(RuntimeError);
    expect((failed as RuntimeError).message).toBe("the test needs the optional package 'multiloop-no-such-package': npm install multiloop-no-such-package");
    expect(((failed as RuntimeError).cause as { code?: unknown }).code).toBe('ERR_MODULE_NOT_FOUND');
  });

  it('lets through a failure that is not the package missing', async () => {
    // Another package missing (one the optional package imports) is not this one missing.
    const other = await importOptional('pg', 'the test', load('multiloop-no-such-package')).catch((error: unknown) => error);
    expect(other).not.toBeInstanceOf(RuntimeError);
    expect((other as { code?: unknown }).code).toBe('ERR_MODULE_NOT_FOUND');
    const thrown = new TypeError('broken package');
    await expect(importOptional('pg', 'the test', () => Promise.reject(thrown))).rejects.toBe(thrown);
  });

  it('gives the module when it is installed', async () => {
    const pg = (await importOptional('pg', 'the test', () => import('pg'))) as { default: { Client: unknown } };
    expect(typeof pg.default.Client).toBe('function');
  });
});
