/**
 * The URLs of TypeScript files as the TypeScript hooks (ts-hooks.ts, ts-hooks-in-thread.ts) and
 * ts-loader.ts see them: which URLs name a TypeScript file, and the marked URL under which the
 * hooks answer with a file's JavaScript. Apart from the hooks, so that a thread that hosts no
 * TypeScript loads none of them.
 */
import type { TypeScriptOutput } from './ts-compilers.js';

/** The query parameter that asks these hooks for a file's JavaScript as a module's default export. */
const COMPILE_MARK = 'multiloop-compile';

/**
 * The format a TypeScript file at `url` is emitted in (.ts and .mts as ES modules, .cts as
 * CommonJS); null for any other URL.
 *
 * @internal
 * @example
 * ```ts
 * _outputOf('file:///app/legacy.cts'); // 'commonjs'
 * ```
 */
export function _outputOf(url: string): TypeScriptOutput | null {
  if (!url.startsWith('file:')) return null;
  const end = endOfPath(url);
  if (url.endsWith('.ts', end) || url.endsWith('.mts', end)) return 'module';
  if (url.endsWith('.cts', end)) return 'commonjs';
  return null;
}

/** Where the path of `url` (or of a specifier) ends: at its query or hash, if any. */
export function endOfPath(url: string): number {
  const query = url.indexOf('?');
  const hash = url.indexOf('#');
  if (query === -1) return hash === -1 ? url.length : hash;
  return hash === -1 ? query : Math.min(query, hash);
}

/**
 * Tell whether `url` names a TypeScript file these hooks compile: a file: URL ending in .ts,
 * .mts or .cts before any query or hash.
 *
 * @internal
 * @example
 * ```ts
 * _isTypeScriptUrl('file:///app/service.ts'); // true
 * _isTypeScriptUrl('file:///app/service.js'); // false
 * ```
 */
export function _isTypeScriptUrl(url: string): boolean {
  return _outputOf(url) !== null;
}

/**
 * The URL under which these hooks answer with the JavaScript of the TypeScript file at `url`
 * (see `_unmarkCompileUrl`); `version` tells versions of the file apart, so a changed file is
 * compiled again.
 *
 * @internal
 * @example
 * ```ts
 * const { default: compiled } = await import(_markCompileUrl(url, '1712-340'));
 * ```
 */
export function _markCompileUrl(url: string, version: string): string {
  const hashAt = url.indexOf('#');
  const base = hashAt === -1 ? url : url.slice(0, hashAt);
  const hash = hashAt === -1 ? '' : url.slice(hashAt);
  return `${base}${base.includes('?') ? '&' : '?'}${COMPILE_MARK}=${encodeURIComponent(version)}${hash}`;
}

/**
 * The URL a URL made by `_markCompileUrl` was made from; null for any other URL.
 *
 * @internal
 * @example
 * ```ts
 * _unmarkCompileUrl('file:///app/a.ts?multiloop-compile=1'); // 'file:///app/a.ts'
 * ```
 */
export function _unmarkCompileUrl(url: string): string | null {
  const match = /[?&]multiloop-compile=[^&#]*(?=#|$)/.exec(url);
  if (match === null || !url.startsWith('file:')) return null;
  // The mark is the query's last parameter: what follows it is the hash, if any.
  return url.slice(0, match.index) + url.slice(match.index + match[0].length);
}
