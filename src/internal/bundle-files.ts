/**
 * Where the files multiloop loads by URL live: the entries of threads (a LoopThread's host, a pool
 * thread's), the TypeScript hooks, CommonJS helpers. They are in the bundle's folder, dist/lib
 * (scripts/bundle.mjs), whichever copy of the code asks: the bundle itself, tsc's output under
 * dist/src, or the TypeScript sources (the tests). So every thread runs the bundle, the copy that
 * `import 'multiloop'` names, and a thread never holds two copies of multiloop.
 */

const HERE = import.meta.url;

/** Which copy of the code this is. */
const LAYOUT: 'source' | 'bundle' | 'tsc' = HERE.endsWith('.ts') ? 'source' : /\/lib\/[^/]+\.js$/.test(HERE) ? 'bundle' : 'tsc';

/**
 * The URL of `name` in the bundle's folder.
 *
 * @example
 * ```ts
 * new Worker(bundleFile('loop-host.js'));
 * ```
 */
export function bundleFile(name: string): URL {
  if (LAYOUT === 'bundle') return new URL(`./${name}`, HERE);
  // src/internal/ or dist/src/internal/: two folders up is the project's root, or dist.
  return new URL(LAYOUT === 'source' ? `../../dist/lib/${name}` : `../../lib/${name}`, HERE);
}
