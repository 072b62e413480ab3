/**
 * Workloads of the executor: 20,000 tiny jobs through `runInExecutor` beside raw `piscina.run`
 * on a pool of the same size, and 64 CPU-bound jobs of 20 ms on the loop's default pool.
 */
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { newEventLoop, type Coroutine, type EventLoop, type Future } from '../src/index.js';
import { PiscinaExecutor, type Executor } from '../src/executor.js';
import { workerFn, type WorkerFn } from '../src/worker-fn.js';
import { medianOf, now, perSecond, type Row } from './harness.js';

const RUNS = 5;
const TINY_JOBS = 20_000;
const CPU_JOBS = 64;
const CPU_JOB_MS = 20;

/** A pool job module of test/fixtures, from bench/ or from dist/bench/ (fixtures are not built). */
function fixture(name: string): URL {
  const beside = new URL(`../test/fixtures/${name}`, import.meta.url);
  return existsSync(beside) ? beside : new URL(`../../test/fixtures/${name}`, import.meta.url);
}

const mathUrl = fixture('pool-math.mjs');
const add = workerFn<[number, number], number>(mathUrl, 'add');
/** Spins for the milliseconds given and returns how long it ran: CPU-bound, and its own stopwatch. */
const burn = workerFn<[number], number>(fixture('pool-cpu.mjs'), 'burn');

/**
 * Submit `count` jobs with `runInExecutor(executor, fn, ...args(i))` in one burst from a task of
 * `loop`; returns the wall milliseconds until all are done and their results.
 */
async function burst<A extends unknown[], R>(
  loop: EventLoop,
  executor: Executor | null,
  count: number,
  fn: WorkerFn<A, R>,
  args: (i: number) => A,
): Promise<[number, R[]]> {
  let took = 0;
  const futures: Array<Future<R>> = new Array(count);
  function* main(): Coroutine<void> {
    const started = now();
    const done = loop.createFuture<void>();
    let left = count;
    const onDone = (): void => {
      if (--left === 0) done.setResult(undefined);
    };
    for (let i = 0; i < count; i++) (futures[i] = loop.runInExecutor(executor, fn, ...args(i))).addDoneCallback(onDone);
    yield* done;
    took = now() - started;
  }
  await loop.runUntilComplete(main());
  return [took, futures.map((future) => future.result())];
}

async function tinyJobs(loop: EventLoop, executor: PiscinaExecutor): Promise<number> {
  const [took, results] = await burst(loop, executor, TINY_JOBS, add, (i): [number, number] => [i, 1]);
  let sum = 0;
  for (const value of results) sum += value;
  if (sum !== (TINY_JOBS * (TINY_JOBS + 1)) / 2) throw new Error(`tiny jobs summed to ${sum}`);
  return perSecond(TINY_JOBS, took);
}

async function rawPiscina(pool: Piscina): Promise<number> {
  const started = now();
  const runs: Array<Promise<number>> = new Array(TINY_JOBS);
  for (let i = 0; i < TINY_JOBS; i++) runs[i] = pool.run({ a: i, b: 1 }, { name: 'addPair' }) as Promise<number>;
  const results = await Promise.all(runs);
  const took = now() - started;
  let sum = 0;
  for (const value of results) sum += value;
  if (sum !== (TINY_JOBS * (TINY_JOBS + 1)) / 2) throw new Error(`raw piscina summed to ${sum}`);
  return perSecond(TINY_JOBS, took);
}

/**
 * The efficiency of 64 jobs of 20 ms on the loop's default pool: the ideal wall time on
 * `threads` threads (64 × the mean single-job time, as the jobs measured it, / threads) over
 * the measured one.
 */
async function cpuJobs(loop: EventLoop, threads: number): Promise<number> {
  const [took, ran] = await burst(loop, null, CPU_JOBS, burn, (): [number] => [CPU_JOB_MS]);
  let single = 0;
  for (const ms of ran) single += ms;
  single /= CPU_JOBS;
  return (CPU_JOBS * single) / threads / took;
}

/** Run the executor workloads. */
export async function executorWorkloads(log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  const record = (row: Row): void => {
    rows.push(row);
    log(`  ${row.workload}: ${row.value.toFixed(2)} ${row.unit}${row.baseline === null ? '' : ` (baseline ${row.baseline.toFixed(1)})`}`);
  };
  const threads = availableParallelism();
  const loop = newEventLoop();

  const executor = new PiscinaExecutor({ maxThreads: threads });
  const pool = new Piscina({ filename: fileURLToPath(mathUrl), minThreads: threads, maxThreads: threads });
  try {
    record({
      workload: `${TINY_JOBS / 1000}k tiny jobs (add) via runInExecutor`,
      unit: 'jobs/s',
      value: await medianOf(RUNS, () => tinyJobs(loop, executor)),
      baseline: await medianOf(RUNS, () => rawPiscina(pool)),
      baselineName: `raw piscina.run, ${threads} threads`,
      higherIsBetter: true,
      target: '>= 150 k/s and >= 4x raw piscina',
    });
  } finally {
    await executor.shutdown();
    await pool.destroy();
  }

  try {
    record({
      workload: `${CPU_JOBS} CPU-bound jobs of ${CPU_JOB_MS} ms, default pool (${threads} threads)`,
      unit: 'efficiency',
      value: await medianOf(3, () => cpuJobs(loop, threads)),
      baseline: null,
      baselineName: null,
      higherIsBetter: true,
      target: '>= 0.95',
    });
  } finally {
    await loop.runUntilComplete(loop.shutdownDefaultExecutor());
    loop.close();
  }
  return rows;
}
