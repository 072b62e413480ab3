/**
 * What leaving loop health on costs: W1–W3 (callSoon chain, task spawn+complete, bare-yield
 * switches) with health on (the heartbeat other threads read, the event-loop delay histogram)
 * beside the same with it off, runs interleaved in the same process. The counters every loop
 * keeps (iterations, when a task began waiting) are always on, and in both columns.
 */
import { healthEnabled, setHealthEnabled } from '../src/internal/introspect.js';
import { bareYieldSwitches, callSoonChain, taskSpawn } from './core.js';
import { interleaved, median, type Row } from './harness.js';

const ROUNDS = 9;

/** Run `once` with health on and off in turn, `ROUNDS` times each after a warm-up of each, the first of each pair alternating; the medians. */
async function onAndOff(once: () => Promise<number>): Promise<[on: number, off: number]> {
  const was = healthEnabled();
  const withHealth = (enabled: boolean) => (): Promise<number> => {
    setHealthEnabled(enabled);
    return once();
  };
  try {
    const [on, off] = await interleaved(ROUNDS, withHealth(true), withHealth(false));
    return [median(on), median(off)];
  } finally {
    setHealthEnabled(was);
  }
}

/** Run the health-cost workloads. */
export async function healthWorkloads(log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  const workloads: Array<[string, string, () => Promise<number>]> = [
    ['W1 callSoon chain, loop health on', 'calls/s', () => callSoonChain(2_000_000)],
    ['W2 task spawn+complete, loop health on', 'tasks/s', () => taskSpawn(500_000)],
    ['W3 bare-yield switches, loop health on', 'switches/s', () => bareYieldSwitches(100, 20_000)],
  ];
  for (const [workload, unit, once] of workloads) {
    const [on, off] = await onAndOff(once);
    const row: Row = { workload, unit, value: on, baseline: off, baselineName: 'loop health off', higherIsBetter: true, target: 'within 3% of off' };
    rows.push(row);
    log(`  ${workload}: ${on.toFixed(0)} ${unit} (off ${off.toFixed(0)}, ${(((on - off) / off) * 100).toFixed(1)}%)`);
  }
  return rows;
}
