/**
 * The package as a user installs it: `npm pack` (dist is fresh: npm test built it), installed
 * into a scratch project outside the repository, which starts a LoopThread and runs a pool job
 * from node_modules/multiloop.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'multiloop-package-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

describe('the packed package', () => {
  it('installs from its tarball and runs a LoopThread and a pool job from node_modules', () => {
    execFileSync(npm, ['pack', '--ignore-scripts', '--silent', '--pack-destination', scratch], { cwd: ROOT, stdio: 'pipe' });
    const tarball = readdirSync(scratch).find((name) => name.endsWith('.tgz'));
    expect(tarball).toMatch(/^multiloop-\d+\.\d+\.\d+\.tgz$/);
    const app = join(scratch, 'app');
    execFileSync('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }));
    execFileSync(npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--silent', join(scratch, tarball!)], {
      cwd: app,
      stdio: 'pipe',
      timeout: 90_000,
    });
    writeFileSync(join(app, 'svc.js'), "import { sleep } from 'multiloop';\nexport function* hello(name) { yield* sleep(0); return `hello, ${name}`; }\n");
    writeFileSync(join(app, 'job.js'), 'export function triple(n) { return n * 3; }\n');
    writeFileSync(
      join(app, 'main.js'),
      [
        "import { LoopThread, ensureFuture, run, toThread, workerFn } from 'multiloop';",
        'function* main() {',
        "  const svc = yield* ensureFuture(LoopThread.start(new URL('./svc.js', import.meta.url)));",
        "  console.log(yield* svc.call('hello', 'package'));",
        "  console.log(yield* toThread(workerFn(new URL('./job.js', import.meta.url), 'triple'), 14));",
        '  yield* ensureFuture(svc.close());',
        '}',
        'await run(main());',
      ].join('\n'),
    );
    const ran = spawnSync(process.execPath, ['main.js'], { cwd: app, encoding: 'utf8', timeout: 30_000 });
    expect(ran.stderr).toBe('');
    expect(ran.stdout).toBe('hello, package\n42\n');
    expect(ran.status).toBe(0);
    // The package's command, as npx finds it.
    const command = spawnSync(join(app, 'node_modules', '.bin', 'multiloop'), ['--help'], { cwd: app, encoding: 'utf8', timeout: 30_000 });
    expect(command.stdout).toMatch(/^usage: multiloop ps <pid>/);
    expect(command.status).toBe(0);
    const worker = spawnSync(join(app, 'node_modules', '.bin', 'multiloop'), ['worker', '--help'], { cwd: app, encoding: 'utf8', timeout: 30_000 });
    expect(worker.stdout).toMatch(/^Usage: multiloop worker --allow SPEC/);
  }, 150_000);
});
