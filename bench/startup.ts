/**
 * What a TypeScript module costs a thread: a LoopThread hosting a .ts module, started by an app
 * run under tsx, and by an app run as `node app.ts` where Node strips types itself (22.18+, 24,
 * 26), beside the same module compiled, started by an app run under node; and the same
 * compiled module registering a loader hook that does nothing, the least any hooks-based route
 * to TypeScript costs a thread on Node 20 (a hooks thread per thread). Each side runs in
 * processes of its own (bench/startup-child.ts), which side goes first rotating.
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

type Side = 'tsx' | 'native' | 'compiled' | 'hooked';

/** Whether this Node strips types itself: then the `node app.ts` side runs. */
const STRIPS = typeof (process.features as { typescript?: unknown }).typescript === 'string';

function child(side: Side): ChildResult {
  const compiled = (fixture: string): [string, string[]] => [
    process.execPath,
    [`${ROOT}dist/bench/startup-child.js`, new URL(`dist/bench/fixtures/${fixture}`, `file://${ROOT}`).href],
  ];
  const typeScript = [`${ROOT}bench/startup-child.ts`, new URL('bench/fixtures/startup-service.ts', `file://${ROOT}`).href];
  // Every side on the Node that runs the bench (tsx's bin would run the one on PATH).
  const [command, args]: [string, string[]] =
    side === 'tsx'
      ? [process.execPath, [`${ROOT}node_modules/tsx/dist/cli.mjs`, ...typeScript]]
      : side === 'native'
        ? [process.execPath, typeScript]
        : compiled(side === 'compiled' ? 'startup-service.js' : 'startup-service-hooked.js');
  const ran = spawnSync(command, [...args, String(THREADS)], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (ran.status !== 0) throw new Error(`startup-child (${side}) exited with ${ran.status ?? ran.signal}`);
  return JSON.parse(ran.stdout) as ChildResult;
}

/** Start LoopThreads hosting a .ts module under tsx, the same compiled, and compiled with a no-op hook. */
export function startupWorkloads(log: (line: string) => void): Promise<Row[]> {
  const ms: Record<Side, number[]> = { tsx: [], native: [], compiled: [], hooked: [] };
  const rss: Record<Side, number[]> = { tsx: [], native: [], compiled: [], hooked: [] };
  const sides: Side[] = STRIPS ? ['tsx', 'native', 'compiled', 'hooked'] : ['tsx', 'compiled', 'hooked'];
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < sides.length; i++) {
      const side = sides[(round + i) % sides.length] as Side;
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
    ...(STRIPS
      ? [
          {
            workload: `start a LoopThread hosting a .ts module, app run as node app.ts (Node ${process.versions.node} strips types, no loader)`,
            unit: 'ms',
            value: median(ms.native),
            baseline: median(ms.compiled),
            baselineName: 'the same compiled, under node',
            higherIsBetter: false,
            target: 'within 1.5x of compiled',
          },
          {
            workload: 'memory of a LoopThread hosting a .ts module, app run as node app.ts',
            unit: 'MiB',
            value: median(rss.native) / 2 ** 20,
            baseline: median(rss.compiled) / 2 ** 20,
            baselineName: 'the same compiled, under node',
            higherIsBetter: false,
            target: 'within 1.5x of compiled',
          },
        ]
      : []),
    {
      workload: 'start a LoopThread whose compiled module registers a no-op loader hook (Node 20: a hooks thread per thread)',
      unit: 'ms',
      value: median(ms.hooked),
      baseline: median(ms.compiled),
      baselineName: 'the same compiled, no hook',
      higherIsBetter: false,
    },
    {
      workload: 'memory of a LoopThread whose compiled module registers a no-op loader hook',
      unit: 'MiB',
      value: median(rss.hooked) / 2 ** 20,
      baseline: median(rss.compiled) / 2 ** 20,
      baselineName: 'the same compiled, no hook',
      higherIsBetter: false,
    },
  ];
  for (const row of rows) log(`  ${row.workload}: ${row.value.toFixed(1)} ${row.unit} (compiled ${row.baseline?.toFixed(1)})`);
  return Promise.resolve(rows);
}
