#!/usr/bin/env node
/**
 * After tsc: bundle what runs into dist/lib with esbuild, from tsc's JavaScript (dist/src,
 * dist/workers). One ES module per entry (the package's `.`, `./testing` and `./otel`, a
 * LoopThread's host, a pool thread's worker, the TypeScript hooks, the command line), the code
 * they share in chunks, and the parts loaded on first use (the I/O stack, BullMQ's engines, the
 * monitor's server, the TypeScript hooks in a thread...) in chunks of their own, still loaded on
 * first use. A thread then loads a few files instead of some sixty modules: less memory per thread
 * and a faster start (bench --only=weight,startup). Not minified: stacks and class names read as
 * in the sources, and source maps lead back to src/.
 */
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { URL, fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = `${ROOT}dist/lib`;

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: {
    index: 'dist/src/index.js',
    testing: 'dist/src/testing/index.js',
    otel: 'dist/src/otel/index.js',
    'loop-host': 'dist/workers/loop-host.js',
    'pool-worker': 'dist/workers/pool-worker.js',
    'ts-hooks': 'dist/src/internal/ts-hooks.js',
    cli: 'dist/src/cli.js',
    // For multiloop's own tests (src/internal/for-tests.ts).
    internals: 'dist/src/internal/for-tests.js',
  },
  outdir: OUT,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Dependencies (piscina, comlink, the optional engines) stay packages of their own.
  packages: 'external',
  // The bundle runs every module's top-level code as Node would have: nothing is dropped as
  // free of side effects.
  ignoreAnnotations: true,
  sourcemap: 'linked',
  sourcesContent: false,
  chunkNames: 'chunk-[hash]',
  logLevel: 'warning',
  metafile: true,
});
if (result.errors.length > 0) process.exit(1);
// Which modules each file holds and which files it imports at once (not with import()), for the
// tests of what a thread loads (test/light.test.ts); not shipped.
const held = {};
for (const [file, output] of Object.entries(result.metafile.outputs)) {
  if (!file.endsWith('.js')) continue;
  held[file.slice('dist/lib/'.length)] = {
    modules: Object.keys(output.inputs).map((input) => input.replace(/^dist\//, '')),
    imports: output.imports.filter((each) => each.kind === 'import-statement' && !each.external).map((each) => each.path.slice('dist/lib/'.length)),
  };
}
writeFileSync(`${ROOT}dist/bundle-modules.json`, `${JSON.stringify(held, null, 1)}\n`);
// CommonJS helpers loaded by path, beside the bundle.
copyFileSync(`${ROOT}dist/workers/pool-entry.cjs`, `${OUT}/pool-entry.cjs`);
copyFileSync(`${ROOT}dist/src/internal/native-import.cjs`, `${OUT}/native-import.cjs`);
