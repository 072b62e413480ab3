/**
 * What multiloop weighs: the resident memory an idle thread adds (a LoopThread, hosting a module
 * of nothing and one importing multiloop, beside a piscina worker and a plain Worker), the time
 * and memory importing multiloop costs a fresh process (beside importing piscina), and what
 * `npm install multiloop` puts on disk (beside piscina alone). Each thread and import figure is
 * measured in processes of their own (bench/weight-child.ts), the sides alternating, the order
 * rotating from round to round; the rows give medians.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, type Row } from './harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHILD = fileURLToPath(new URL('./weight-child.js', import.meta.url));
const ROUNDS = 7;
const THREADS = 4;
const MiB = 2 ** 20;

type ThreadSide = 'loop-thread' | 'loop-thread-importing' | 'piscina' | 'plain';
type ImportSide = 'import' | 'import-piscina';

interface ImportCost {
  ms: number;
  rss: number;
  heap: number;
}

function child<T>(side: ThreadSide | ImportSide): T {
  const ran = spawnSync(process.execPath, [CHILD, side, String(THREADS)], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (ran.status !== 0) throw new Error(`weight-child (${side}) exited with ${ran.status ?? ran.signal}`);
  return JSON.parse(ran.stdout) as T;
}

/** Run each of `sides` once per round, `ROUNDS` rounds, the order rotating; what each gave, per side. */
function rotated<S extends ThreadSide | ImportSide, T>(sides: readonly S[]): Record<S, T[]> {
  const results = Object.fromEntries(sides.map((side) => [side, [] as T[]])) as Record<S, T[]>;
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < sides.length; i++) {
      const side = sides[(round + i) % sides.length] as S;
      results[side].push(child<T>(side));
    }
  }
  return results;
}

/** The bytes of the files under `path` (their sizes, not the blocks they take). */
function bytesUnder(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const name of readdirSync(path)) total += bytesUnder(join(path, name));
  return total;
}

interface Manifest {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** `name` and every package it depends on that is installed here (an optional one for another platform is not). */
function closure(name: string, into: Set<string>): Set<string> {
  if (into.has(name)) return into;
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as Manifest;
  } catch {
    return into;
  }
  into.add(name);
  for (const dependency of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) closure(dependency, into);
  return into;
}

/** The bytes of multiloop's packed files (npm pack's unpacked size), as npm would install them. */
function packedBytes(): number {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const ran = spawnSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  if (ran.status !== 0) throw new Error(`npm pack --dry-run exited with ${ran.status ?? ran.signal}`);
  return (JSON.parse(ran.stdout) as Array<{ unpackedSize: number }>)[0]!.unpackedSize;
}

/** The bytes `npm install` of multiloop puts on disk: its packed files and its dependencies' folders, as installed here. */
function installBytes(): { multiloop: number; piscina: number; packages: string[] } {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Manifest;
  const packages = new Set<string>();
  for (const name of Object.keys(manifest.dependencies ?? {})) closure(name, packages);
  const folders = (names: Iterable<string>): number => [...names].reduce((sum, name) => sum + bytesUnder(join(ROOT, 'node_modules', name)), 0);
  return { multiloop: packedBytes() + folders(packages), piscina: folders(closure('piscina', new Set())), packages: [...packages].sort() };
}

/** RSS per idle thread, import time and memory, install size. */
export function weightWorkloads(log: (line: string) => void): Promise<Row[]> {
  const threads = rotated<ThreadSide, number>(['loop-thread', 'loop-thread-importing', 'piscina', 'plain']);
  const imports = rotated<ImportSide, ImportCost>(['import', 'import-piscina']);
  const install = installBytes();
  const perThread = (side: ThreadSide): number => median(threads[side]) / MiB;
  const method = `RSS growth of a process over ${THREADS} idle threads / ${THREADS}, median of ${ROUNDS} processes per kind, kinds alternating`;
  const importOf = (side: ImportSide, key: keyof ImportCost): number => median(imports[side].map((cost) => cost[key]));
  const importMethod = `in a fresh process, median of ${ROUNDS} processes, alternating`;
  const rows: Row[] = [
    {
      workload: `memory per idle LoopThread hosting a module of nothing (${method})`,
      unit: 'MiB',
      value: perThread('loop-thread'),
      baseline: perThread('piscina'),
      baselineName: 'a piscina worker',
      higherIsBetter: false,
      target: 'within 4 MiB of a piscina worker',
    },
    {
      workload: 'memory per idle LoopThread hosting a module that imports multiloop (same method)',
      unit: 'MiB',
      value: perThread('loop-thread-importing'),
      baseline: perThread('piscina'),
      baselineName: 'a piscina worker',
      higherIsBetter: false,
    },
    {
      workload: 'memory per idle plain Worker answering messages (same method), the floor',
      unit: 'MiB',
      value: perThread('plain'),
      baseline: perThread('piscina'),
      baselineName: 'a piscina worker',
      higherIsBetter: false,
    },
    {
      workload: `import multiloop: time (${importMethod})`,
      unit: 'ms',
      value: importOf('import', 'ms'),
      baseline: importOf('import-piscina', 'ms'),
      baselineName: 'import piscina',
      higherIsBetter: false,
    },
    {
      workload: `import multiloop: resident memory grown (${importMethod})`,
      unit: 'MiB',
      value: importOf('import', 'rss') / MiB,
      baseline: importOf('import-piscina', 'rss') / MiB,
      baselineName: 'import piscina',
      higherIsBetter: false,
    },
    {
      workload: `import multiloop: heap used grown (${importMethod})`,
      unit: 'MiB',
      value: importOf('import', 'heap') / MiB,
      baseline: importOf('import-piscina', 'heap') / MiB,
      baselineName: 'import piscina',
      higherIsBetter: false,
    },
    {
      workload: `install size of npm install multiloop (npm pack's unpacked size + the node_modules folders of ${install.packages.join(', ')}, file sizes)`,
      unit: 'MiB',
      value: install.multiloop / MiB,
      baseline: install.piscina / MiB,
      baselineName: 'piscina and its dependencies alone',
      higherIsBetter: false,
    },
  ];
  for (const row of rows) log(`  ${row.workload}: ${row.value.toFixed(2)} ${row.unit} (${row.baselineName} ${row.baseline?.toFixed(2)})`);
  return Promise.resolve(rows);
}
