/**
 * LoopThreadPool workloads: CPU-bound calls spread over two threads beside the same calls on
 * one LoopThread, and the round trip of a tiny call through the pool beside a LoopThread's, in
 * the same run (alternating, after a warm-up of each).
 */
import { LoopThread, LoopThreadPool, gather, run, type Coroutine } from '../src/index.js';
import { interleaved, median, now, percentile, perSecond, type Row } from './harness.js';

const SERVICE = new URL('./fixtures/pool-service.js', import.meta.url);
/** CPU-bound calls per round, and the CPU each takes (ms). */
const CPU_CALLS = 40;
const CPU_MS = 5;
const ROUNDS = 5;
const ROUND_TRIPS = 2_000;

interface Target {
  call<T>(name: string, ...args: unknown[]): import('../src/index.js').Future<T>;
}

function* cpuBound(target: Target): Coroutine<number> {
  const started = now();
  yield* gather(Array.from({ length: CPU_CALLS }, () => target.call<number>('spin', CPU_MS)));
  return perSecond(CPU_CALLS, now() - started);
}

function* roundTrips(target: Target, samples: number[]): Coroutine<void> {
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const started = now();
    yield* target.call<number>('echo', i);
    samples.push((now() - started) * 1000);
  }
}

/** The pool rows: throughput of CPU-bound calls, and a tiny call's round trip. */
export async function poolWorkloads(log: (line: string) => void): Promise<Row[]> {
  const single = await LoopThread.start(SERVICE, { name: 'bench-single' });
  const pool = await LoopThreadPool.start(SERVICE, { size: 2, name: 'bench-pool' });
  const [pooled, alone] = await interleaved(
    ROUNDS,
    () => run(cpuBound(pool)),
    () => run(cpuBound(single)),
  );
  const poolTrips: number[] = [];
  const singleTrips: number[] = [];
  await interleaved(
    ROUNDS,
    () => run(roundTrips(pool, poolTrips)),
    () => run(roundTrips(single, singleTrips)),
  );
  await Promise.all([pool.close(), single.close()]);
  const rows: Row[] = [
    {
      workload: `LoopThreadPool of 2, CPU-bound calls (${CPU_MS} ms each)`,
      unit: 'calls/s',
      value: median(pooled),
      baseline: median(alone),
      baselineName: 'one LoopThread',
      higherIsBetter: true,
      target: '>= 1.8x one LoopThread',
    },
    {
      workload: 'LoopThreadPool tiny call round trip p50',
      unit: 'µs',
      value: percentile(poolTrips, 50),
      baseline: percentile(singleTrips, 50),
      baselineName: 'one LoopThread',
      higherIsBetter: false,
      target: 'within 1.1x of a LoopThread',
    },
  ];
  for (const row of rows) log(`  ${row.workload}: ${row.value.toFixed(1)} ${row.unit} (baseline ${row.baseline?.toFixed(1)})`);
  return rows;
}
