/**
 * TypeScript run unbuilt under tsx, as a newcomer runs it: `npx tsx app.ts` (run here with the
 * Node that runs the tests, whose `module.registerHooks` tsx 4.23 uses where it exists), with a LoopThread
 * and pool jobs in TypeScript modules named by their built .js names; the jobs read
 * `jobSignal()` and take and return a registered class, which works only when the pool thread
 * has one multiloop. The threads load the library from dist/ (npm test builds first).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('npx tsx', () => {
  const tsx = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));

  it('runs a TypeScript app whose LoopThread (with an enum) and pool jobs are TypeScript modules, with nothing on stderr', () => {
    const ran = spawnSync(process.execPath, [tsx, 'test/fixtures/tsx-app.ts'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
    expect(ran.stderr).toBe('');
    expect(ran.stdout).toBe('hello, tsx, from a TypeScript LoopThread\n20\njob 3: signal not aborted\na Point: (4, 3), norm 5\n');
    expect(ran.status).toBe(0);
  }, 40_000);

  it("names the lines of the app's TypeScript in printCallGraph(), not those of tsx's output", () => {
    const ran = spawnSync(process.execPath, [tsx, 'test/fixtures/tsx-graph.ts'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
    expect(ran.stderr).toBe('');
    const path = fileURLToPath(new URL('./fixtures/tsx-graph.ts', import.meta.url));
    expect(ran.stdout.split('\n').slice(0, 3)).toEqual(["* Task(name='worker', id=0x1)", '  + Call stack:', `  |   File '${path}', line 7, in async worker()`]);
  }, 40_000);
});
