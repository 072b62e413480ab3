/**
 * The Node options of the threads multiloop starts (src/internal/threads/exec-argv.ts): an app
 * run with V8 options (`--max-old-space-size`, `--expose-gc`, `--stack-size`) or process-wide
 * ones starts its LoopThreads, pools and pool jobs, which have the flags' effect already. The
 * threads load dist/ (npm test builds first).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { threadExecArgv, workerTakes } from '../src/internal/threads/exec-argv.js';

const APP = fileURLToPath(new URL('./fixtures/exec-argv-app.mjs', import.meta.url));

interface Flags {
  gc: string;
  heapLimitMiB: number;
}

function runApp(nodeArgs: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...nodeArgs, APP], { encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stdout, stderr });
    });
  });
}

describe('threads of an app started with V8 options', () => {
  it.each([
    [['--max-old-space-size=512'], 'function-less, a 512 MiB old space'],
    [['--expose-gc'], 'gc()'],
    [['--stack-size=2000'], 'a larger stack'],
    [['--expose-gc', '--max-old-space-size=300', '--title', 'multiloop-app', '--enable-source-maps'], 'several, one with its value apart'],
  ])('start a LoopThread, a LoopThreadPool and a pool job: node %j (%s)', async (nodeArgs) => {
    const ran = await runApp(nodeArgs);
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    const seen = JSON.parse(ran.stdout) as { here: Flags; inThread: Flags; inPool: Flags; inJob: Flags };
    // V8's flags are the process's: every thread has them without being given them again.
    expect(seen.inThread).toEqual(seen.here);
    expect(seen.inPool).toEqual(seen.here);
    expect(seen.inJob).toEqual(seen.here);
    if (nodeArgs.includes('--expose-gc')) expect(seen.here.gc).toBe('function');
  }, 90_000);
});

describe('threadExecArgv', () => {
  it("drops tsx's flags, in every spelling, and keeps the others", () => {
    const execArgv = [
      '--require',
      '/app/node_modules/tsx/dist/preflight.cjs',
      '--import',
      'file:///app/node_modules/tsx/dist/loader.mjs',
      '--enable-source-maps',
      '--import=tsx',
      '--import',
      './otel.js',
      '-r',
      'tsx/cjs',
      '--loader=tsx/esm',
      '--require=./setup.cjs',
    ];
    expect(threadExecArgv(execArgv)).toEqual(['--enable-source-maps', '--import', './otel.js', '--require=./setup.cjs']);
  });

  it("drops V8's options and the process's, with their values, and keeps the thread's", () => {
    const execArgv = [
      '--max-old-space-size=512',
      '--max_old_space_size=512',
      '--expose-gc',
      '--expose_gc',
      '--stack-size=2000',
      '--no-opt',
      '--harmony',
      '--allow-natives-syntax',
      '--title',
      'my app',
      '--v8-pool-size=2',
      '--use-openssl-ca',
      '--no-warnings',
      '--conditions',
      'development',
      '-C',
      'edge',
      '--unhandled-rejections=strict',
      '--trace-warnings',
      '--enable-source-maps',
    ];
    expect(threadExecArgv(execArgv)).toEqual([
      '--no-warnings',
      '--conditions',
      'development',
      '-C',
      'edge',
      '--unhandled-rejections=strict',
      '--trace-warnings',
      '--enable-source-maps',
    ]);
  });

  it('drops the options that name the program: the thread runs its own', () => {
    expect(threadExecArgv(['-e', '-1', '--eval=2', '-p', 'x', '--input-type=module', '--check'])).toEqual(['--input-type=module']);
  });

  it('is what a Worker of this Node takes, together', () => {
    const given = ['--max-old-space-size=512', '--expose-gc', '--stack-size=2000', '--title', 'x', '--zero-fill-buffers', '--no-warnings', '--conditions', 'dev', '--enable-source-maps'];
    expect(() => new Worker('', { eval: true, execArgv: given })).toThrow(expect.objectContaining({ code: 'ERR_WORKER_INVALID_EXEC_ARGV' }));
    const worker = new Worker('', { eval: true, execArgv: threadExecArgv(given) });
    return worker.terminate();
  });
});

describe('workerTakes', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'multiloop-exec-argv-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  // Each option Node lets NODE_OPTIONS carry, alone, as a Worker of this very Node takes it or not
  // (in a child whose working directory is a scratch one: profiles and reports land there).
  it('says of every option of this Node what a Worker says of it', async () => {
    const script = `
      const { Worker } = require('node:worker_threads');
      const skip = /^--(inspect|debug|watch|test|cpu-prof|heap-prof|report|redirect-warnings|diagnostic-dir|env-file|localstorage-file|experimental-config-file|bench|run)/;
      const verdicts = {};
      (async () => {
        for (const flag of [...process.allowedNodeEnvironmentFlags].sort()) {
          if (!flag.startsWith('--') || skip.test(flag)) continue;
          try {
            const worker = new Worker('', { eval: true, execArgv: [flag], stdout: true, stderr: true });
            await worker.terminate();
            verdicts[flag] = true;
          } catch (error) {
            // Only an option refused as such counts: one refused for its missing value says nothing.
            if (error.message.endsWith(': ' + flag)) verdicts[flag] = false;
          }
        }
        console.log(JSON.stringify(verdicts));
      })();
    `;
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['-e', script], { cwd: scratch, encoding: 'utf8', timeout: 120_000 }, (error, stdout) =>
        error === null ? resolve(stdout) : reject(error),
      );
    });
    const verdicts = JSON.parse(out) as Record<string, boolean>;
    expect(Object.keys(verdicts).length).toBeGreaterThan(40);
    const wrong = Object.entries(verdicts).filter(([flag, takes]) => workerTakes(flag) !== takes);
    expect(wrong).toEqual([]);
  }, 150_000);
});
