/**
 * What a TypeScript module costs a thread: a LoopThread hosting a .ts module, started by an app
 * run under tsx, beside the same module compiled, started by an app run under node. Each side
 * runs in processes of its own (bench/startup-child.ts), which side goes first alternating.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { median, type Row } from './harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ROUNDS = 5;
const THREADS = 6;

interface ChildResult {
  ms: number[];
  rssPerThread: number;
}

function child(side: 'tsx' | 'compiled'): ChildResult {
  const [command, args] =
    side === 'tsx'
      ? [`${ROOT}node_modules/.bin/tsx`, [`${ROOT}bench/startup-child.ts`, new URL('bench/fixtures/startup-service.ts', `file://${ROOT}`).href]]
      : [process.execPath, [`${ROOT}dist/bench/startup-child.js`, new URL('dist/bench/fixtures/startup-service.js', `file://${ROOT}`).href]];
  const ran = spawnSync(command, [...args, String(THREADS)], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (ran.status !== 0) throw new Error(`startup-child (${side}) exited with ${ran.status ?? ran.signal}`);
  return JSON.parse(ran.stdout) as ChildResult;
}

/** Start LoopThreads hosting a .ts module under tsx, and the same compiled. */
export function startupWorkloads(log: (line: string) => void): Promise<Row[]> {
  const ms: Record<'tsx' | 'compiled', number[]> = { tsx: [], compiled: [] };
  const rss: Record<'tsx' | 'compiled', number[]> = { tsx: [], compiled: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const side of round % 2 === 0 ? (['tsx', 'compiled'] as const) : (['compiled', 'tsx'] as const)) {
      const result = child(side);
      ms[side].push(...result.ms);
      rss[side].push(result.rssPerThread);
    }
  }
  const rows: Row[] = [
    {
      workload: 'start a LoopThread hosting a .ts module under tsx',
      unit: 'ms',
      value: median(ms.tsx),
      baseline: median(ms.compiled),
      baselineName: 'the same compiled, under node',
      higherIsBetter: false,
      target: 'within 1.5x of compiled',
    },
    {
      workload: 'memory of a LoopThread hosting a .ts module under tsx',
      unit: 'MiB',
      value: median(rss.tsx) / 2 ** 20,
      baseline: median(rss.compiled) / 2 ** 20,
      baselineName: 'the same compiled, under node',
      higherIsBetter: false,
      target: 'within 1.5x of compiled',
    },
  ];
  for (const row of rows) log(`  ${row.workload}: ${row.value.toFixed(1)} ${row.unit} (compiled ${row.baseline?.toFixed(1)})`);
  return Promise.resolve(rows);
}
