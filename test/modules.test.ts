import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const dist = fileURLToPath(new URL('../dist/src/', import.meta.url));
/** Modules that only make sense inside their worker (they run on import). */
const workerOnly = new Set(['internal/ts-hooks.js']);
const modules = [
  ...readdirSync(dist).filter((name) => name.endsWith('.js')),
  ...readdirSync(`${dist}internal`)
    .filter((name) => name.endsWith('.js'))
    .map((name) => `internal/${name}`),
].filter((name) => !workerOnly.has(name));

describe('the built modules', () => {
  // Import cycles with `class X extends Y` fail only when a particular module is loaded first:
  // each module must load as the first import of a process (worker entries import modules directly).
  it('each load as the first import of a fresh process', () => {
    const script = `
      const failed = [];
      for (const name of ${JSON.stringify(modules)}) {
        const { execFileSync } = await import('node:child_process');
        try {
          execFileSync(process.execPath, ['--input-type=module', '-e', \`await import(\${JSON.stringify(${JSON.stringify(dist)} + name)})\`], { stdio: 'pipe' });
        } catch (error) {
          failed.push(name + ': ' + String(error.stderr).split('\\n').find((line) => line.includes('Error')));
        }
      }
      console.log(JSON.stringify(failed));
    `;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(modules.length).toBeGreaterThan(30);
    expect(JSON.parse(output)).toEqual([]);
  }, 60_000);
});

describe('the bundle', () => {
  const lib = fileURLToPath(new URL('../dist/lib/', import.meta.url));
  // Entries a program imports (loop-host, pool-worker and ts-hooks run only in their threads).
  const entries = ['index.js', 'testing.js', 'otel.js', 'cli.js', 'internals.js'];

  it('loads each entry as the first import of a fresh process, and names every runtime export of tsc\'s build', () => {
    const script = `
      const failed = [];
      for (const [entry, built] of ${JSON.stringify([
        ['index.js', 'index.js'],
        ['testing.js', 'testing/index.js'],
        ['otel.js', 'otel/index.js'],
        ['cli.js', 'cli.js'],
        ['internals.js', 'internal/for-tests.js'],
      ])}) {
        try {
          const bundled = Object.keys(await import(${JSON.stringify(lib)} + entry)).sort();
          const unbundled = Object.keys(await import(${JSON.stringify(dist)} + built)).sort();
          if (JSON.stringify(bundled) !== JSON.stringify(unbundled)) failed.push(entry + ': exports differ');
        } catch (error) {
          failed.push(entry + ': ' + String(error));
        }
      }
      console.log(JSON.stringify(failed));
    `;
    for (const entry of entries) {
      execFileSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(lib + entry)})`], { stdio: 'pipe' });
    }
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual([]);
  }, 60_000);
});
