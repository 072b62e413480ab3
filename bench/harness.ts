/**
 * A small benchmark harness: each workload runs several times and reports its median beside
 * the Node baseline measured in the same run.
 */
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--expose-gc');
const gcFunction = runInNewContext('gc') as () => void;
const SOLO = fileURLToPath(new URL('./solo.js', import.meta.url));

/** Collect garbage now, several times so finalizers and weak cells settle. */
export function collectGarbage(): void {
  for (let i = 0; i < 3; i++) gcFunction();
}

/** One line of the results table. */
export interface Row {
  /** The workload, e.g. "callSoon chain". */
  workload: string;
  /** What was measured: "ops/s", "µs", "bytes/task"... */
  unit: string;
  /** multiloop's median. */
  value: number;
  /** The Node baseline's median, when the workload has one. */
  baseline: number | null;
  /** What the baseline is, e.g. "setImmediate chain". */
  baselineName: string | null;
  /** Whether a higher value is better (throughput) or a lower one (latency, memory). */
  higherIsBetter: boolean;
  /** The target from the issues, when there is one, e.g. ">= 10 M/s". */
  target?: string;
  /** The same workload in other runtimes (`--peers`): CPython's asyncio, uvloop. */
  peers?: Record<string, number>;
}

/** The median of `values`. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** The `p`-th percentile (0..100) of `values`. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

/**
 * Run `once` `runs` times (after one warm-up) and return the median of what it returns.
 * No garbage is collected by force between runs: a forced full collection shrinks V8's young
 * generation, and the next run would pay for scavenges that no running process pays.
 */
export async function medianOf(runs: number, once: () => Promise<number> | number): Promise<number> {
  await once();
  const values: number[] = [];
  for (let i = 0; i < runs; i++) values.push(await once());
  return median(values);
}

/**
 * Run `a` and `b` in turn, `rounds` times each after a warm-up of each, which of them goes
 * first alternating (the second run of a pair meets the garbage of the first); what each
 * returned, in order. Both meet the same state of the machine and of the heap, so their
 * medians compare where runs of one after all runs of the other drift apart.
 */
export async function interleaved<A, B>(rounds: number, a: () => Promise<A> | A, b: () => Promise<B> | B): Promise<[A[], B[]]> {
  const as: A[] = [];
  const bs: B[] = [];
  for (let round = -1; round < rounds; round++) {
    const aFirst = round % 2 === 0;
    if (aFirst) {
      const value = await a();
      if (round >= 0) as.push(value);
    }
    const other = await b();
    if (round >= 0) bs.push(other);
    if (!aFirst) {
      const value = await a();
      if (round >= 0) as.push(value);
    }
  }
  return [as, bs];
}

/**
 * Run both sides of the pair of workloads `name` of bench/solo.ts (multiloop's, then its
 * baseline's) in processes of their own, `rounds` processes each, which side goes first
 * alternating; each process runs its side once to warm up, then `runs` times; what every
 * measured run returned, per side.
 *
 * The rows whose time goes mostly to garbage collection (100k children of one gather alive
 * until it ends, 200k timers, 500k tasks) depend on the heap what ran before them left: run in
 * one process, each side would pay for collecting the other's garbage (and the bench's earlier
 * workloads'). Here each side meets only its own, as a program doing only that would.
 */
export function freshPairs<T>(name: string, rounds: number, runs: number): [T[], T[]] {
  const sides: [T[], T[]] = [[], []];
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? [0, 1] : [1, 0]) {
      const run = spawnSync(process.execPath, [SOLO, name, String(side), String(runs)], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
        maxBuffer: 1 << 20,
      });
      if (run.status !== 0) throw new Error(`bench/solo.js ${name} ${side} exited with ${run.status ?? run.signal}`);
      sides[side as 0 | 1].push(...(JSON.parse(run.stdout) as T[]));
    }
  }
  return sides;
}

/**
 * `freshPairs` for workloads of more than two sides (bench/solo.ts): each of `sides` sides in
 * processes of its own, `rounds` processes each, the order of the sides rotating from round to
 * round so that each goes first, and last, as often; what every measured run returned, per side.
 */
export function freshSides<T>(name: string, sides: number, rounds: number, runs: number): T[][] {
  const results: T[][] = Array.from({ length: sides }, () => []);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < sides; i++) {
      const side = (round + i) % sides;
      const run = spawnSync(process.execPath, [SOLO, name, String(side), String(runs)], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
        maxBuffer: 1 << 20,
      });
      if (run.status !== 0) throw new Error(`bench/solo.js ${name} ${side} exited with ${run.status ?? run.signal}`);
      (results[side] as T[]).push(...(JSON.parse(run.stdout) as T[]));
    }
  }
  return results;
}

/** Operations per second of `count` operations that took `ms` milliseconds. */
export function perSecond(count: number, ms: number): number {
  return (count / ms) * 1000;
}

/** The current high-resolution time in milliseconds. */
export function now(): number {
  return performance.now();
}

/** Format a number for the table: 12.3 M, 456 k, 7.89. */
export function formatNumber(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${(value / 1e6).toFixed(2)} M`;
  if (abs >= 1e4) return `${(value / 1e3).toFixed(1)} k`;
  if (abs >= 100) return value.toFixed(0);
  return value.toFixed(2);
}

/** The ratio multiloop/baseline, oriented so that > 1 means multiloop is better. */
export function advantage(row: Row): number | null {
  if (row.baseline === null || row.baseline === 0 || row.value === 0) return null;
  return row.higherIsBetter ? row.value / row.baseline : row.baseline / row.value;
}

/** Render rows as a Markdown table. */
export function renderTable(rows: Row[]): string {
  const peerNames = [...new Set(rows.flatMap((row) => Object.keys(row.peers ?? {})))];
  const lines = [
    `| workload | multiloop | baseline (same run) | advantage |${peerNames.map((name) => ` ${name} (multiloop's advantage) |`).join('')} target |`,
    `|---|---:|---:|---:|${peerNames.map(() => '---:|').join('')}---|`,
  ];
  for (const row of rows) {
    const ratio = advantage(row);
    const base = row.baseline === null ? '—' : `${formatNumber(row.baseline)} ${row.unit} (${row.baselineName})`;
    const peers = peerNames.map((name) => {
      const value = row.peers?.[name];
      if (value === undefined) return ' — |';
      const over = row.higherIsBetter ? row.value / value : value / row.value;
      return ` ${formatNumber(value)} ${row.unit} (${over.toFixed(2)}×) |`;
    });
    lines.push(
      `| ${row.workload} | ${formatNumber(row.value)} ${row.unit} | ${base} | ${ratio === null ? '—' : `${ratio.toFixed(2)}×`} |${peers.join('')} ${row.target ?? ''} |`,
    );
  }
  return lines.join('\n');
}
