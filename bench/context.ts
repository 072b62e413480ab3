/**
 * What carrying context costs a call: ping-pong round trips to a LoopThread with one registered
 * AsyncLocalStorage store travelling with each call, beside the same round trips with nothing
 * registered. Each side runs in processes of its own (bench/context-child.ts: AsyncLocalStorage
 * capture, once on, stays on in a process), alternating; the rows give medians.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { median, type Row } from './harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHILD = fileURLToPath(new URL('./context-child.js', import.meta.url));
const ROUNDS = 5;

function child(side: 'plain' | 'store'): number {
  const ran = spawnSync(process.execPath, [CHILD, side], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (ran.status !== 0) throw new Error(`context-child (${side}) exited with ${ran.status ?? ran.signal}`);
  return (JSON.parse(ran.stdout) as { p50: number }).p50;
}

/** Run the context workloads. */
export async function contextWorkloads(log: (line: string) => void): Promise<Row[]> {
  const plain: number[] = [];
  const store: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      plain.push(child('plain'));
      store.push(child('store'));
    } else {
      store.push(child('store'));
      plain.push(child('plain'));
    }
  }
  const row: Row = {
    workload: 'ping-pong round trip p50, one registered AsyncLocalStorage store travelling',
    unit: 'µs',
    value: median(store),
    baseline: median(plain),
    baselineName: 'nothing registered (each in processes of its own, alternating)',
    higherIsBetter: false,
  };
  log(`  ${row.workload}: ${row.value.toFixed(1)} µs (nothing registered ${(row.baseline as number).toFixed(1)}; +${(row.value - (row.baseline as number)).toFixed(1)} µs per call)`);
  return [row];
}
