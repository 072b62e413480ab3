/**
 * Places in code as call graphs and reprs show them: `path:line:column` of the source a reader
 * wrote, read through the source map of the code that runs (tsx's output is a single line per
 * file; tsc's names other lines), where Node keeps one (source maps on: tsx, --enable-source-maps,
 * multiloop's TypeScript threads); a file: URL as its path.
 */
import { findSourceMap, type SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/** The source map of each file asked about so far; null when it has none (Node keeps maps of files loaded while maps are on). */
const maps = new Map<string, SourceMap | null>();

function mapOf(file: string): SourceMap | null {
  let map = maps.get(file);
  if (map === undefined) {
    try {
      map = findSourceMap(file) ?? null;
    } catch {
      map = null;
    }
    // Known for good once a map is found; a file without one is asked again while few are known.
    if (map !== null || maps.size < 1000) maps.set(file, map);
  }
  return map;
}

function asPath(file: string): string {
  if (!file.startsWith('file:')) return file;
  try {
    return fileURLToPath(file);
  } catch {
    return file;
  }
}

/**
 * The place in the source of line `line`, column `column` (both from 1) of the code of `file`
 * (a path or file: URL), as `path:line:column`.
 *
 * @internal
 * @example
 * ```ts
 * sourceLocation(site.getFileName(), site.getLineNumber(), site.getColumnNumber()); // '/app/main.ts:5:10'
 * ```
 */
export function sourceLocation(file: string, line: number, column: number): string {
  const map = process.sourceMapsEnabled === false ? null : mapOf(file);
  if (map !== null) {
    const entry = map.findEntry(line - 1, column - 1) as { originalSource?: string; originalLine?: number; originalColumn?: number };
    if (entry.originalSource !== undefined && entry.originalLine !== undefined && entry.originalColumn !== undefined) {
      return `${asPath(entry.originalSource)}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
    }
  }
  return `${asPath(file)}:${line}:${column}`;
}
