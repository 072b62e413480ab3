/**
 * Every ```ts block of README.md as written: type-checked with the project's options, and run
 * with `npx tsx` as a newcomer runs it. A block may hold several files, each started by a
 * `// file: name.ts` line (the one named main.ts runs); a block whose first line is
 * `// not run: <why>` is type-checked only. Blocks are written to dist/readme-snippets/, inside
 * the package, so `import ... from 'multiloop'` finds the build (npm test builds first).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = join(ROOT, 'dist', 'readme-snippets');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

interface Snippet {
  /** Where it starts in README.md, for messages. */
  readonly line: number;
  readonly files: Map<string, string>;
  readonly entry: string;
  /** Why it is not run, when it is not. */
  readonly notRun: string | null;
}

/** The ```ts blocks of README.md, fences indented or not, split into their files. */
function snippets(): Snippet[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const found: Snippet[] = [];
  for (const match of readme.matchAll(/^( *)```ts\n([\s\S]*?)^\1```$/gm)) {
    const indent = match[1]!.length;
    const code = match[2]!
      .split('\n')
      .map((line) => line.slice(Math.min(indent, line.length - line.trimStart().length)))
      .join('\n');
    const line = readme.slice(0, match.index).split('\n').length + 1;
    const files = new Map<string, string>();
    let name = 'main.ts';
    let body: string[] = [];
    for (const text of code.split('\n')) {
      const marker = /^\/\/ file: (\S+)/.exec(text);
      if (marker !== null) {
        if (body.join('').trim() !== '') files.set(name, body.join('\n'));
        name = marker[1]!;
        body = [];
      } else body.push(text);
    }
    files.set(name, body.join('\n'));
    const notRun = /^\/\/ not run: (.+)$/m.exec(code.split('\n')[0] ?? '')?.[1] ?? null;
    found.push({ line, files, entry: files.has('main.ts') ? 'main.ts' : [...files.keys()][0]!, notRun });
  }
  return found;
}

const all = snippets();
rmSync(OUT, { recursive: true, force: true });
const paths: string[] = [];
all.forEach((snippet, index) => {
  const dir = join(OUT, `block-${index + 1}`);
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of snippet.files) {
    writeFileSync(join(dir, name), text);
    paths.push(join(dir, name));
  }
});

describe('README.md', () => {
  it('has its code in ts blocks', () => {
    expect(all.length).toBeGreaterThanOrEqual(5);
  });

  it('type-checks every ts block as written, with the project\'s strict options', () => {
    const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
    const program = ts.createProgram(paths, { ...config!.options, noEmit: true, declaration: false, declarationMap: false, incremental: false, rootDir: undefined, outDir: undefined });
    const diagnostics = ts.getPreEmitDiagnostics(program).filter((diagnostic) => diagnostic.file?.fileName.startsWith(OUT) ?? true);
    const text = ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => ROOT, getNewLine: () => '\n' });
    expect(text).toBe('');
  }, 60_000);

  it.each(all.map((snippet, index) => [index + 1, snippet] as const))('runs block %i with npx tsx, or says why not', (index, snippet) => {
    if (snippet.notRun !== null) {
      expect(snippet.notRun.length).toBeGreaterThan(0);
      return;
    }
    const ran = spawnSync(TSX, [join(OUT, `block-${index}`, snippet.entry)], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
    expect(ran.stderr, `README.md line ${snippet.line}`).toBe('');
    expect(ran.status, `README.md line ${snippet.line}: ${ran.stdout}`).toBe(0);
  }, 30_000);
});
