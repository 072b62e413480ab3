/**
 * multiloop/testing's simulate(): what a virtual clock stepped by a seeded coordinator costs and
 * saves. A virtual hour of timers in three LoopThreads, beside the same timers in real time (a
 * slice of it, scaled to the hour: real timers cannot fire sooner); and a pipeline of two
 * LoopThreads and a ThreadQueue (no sleeps, nothing for the clock to skip) under simulate()
 * beside the same under run(). Unbounded, the producer puts every item in one step of its loop
 * and the consumer takes them in a few; bounded at 1, each item is a hand-off between the two
 * loops, each a few steps of the coordinator: the price of its round trips.
 */
import { LoopThread, ThreadQueue, gather, run, type Coroutine } from '../src/index.js';
import { simulate } from '../src/testing/index.js';
import { interleaved, median, now, type Row } from './harness.js';

const SERVICE = new URL('./fixtures/simulate-service.js', import.meta.url);
const THREADS = 3;
/** One virtual hour of 1 s timers in each thread. */
const TICKS = 3_600;
const PERIOD = 1;
/** The real-time slice: this many 1 s timers in each thread, scaled to the hour. */
const SLICE_TICKS = 2;
const HOUR_ROUNDS = 3;
const ITEMS = 10_000;
/** Rounds of the unbounded pipeline (about 0.1 s a run) and of the bounded one (several seconds under simulate()). */
const PIPELINE_ROUNDS = { unbounded: 7, bounded: 3 };
const SEED = 36;

/** What one run of a program measured. */
export interface Timed<T> {
  /** Real milliseconds of the work, the threads started (what the rows compare). */
  ms: number;
  /** Real milliseconds of the whole program, starting and closing the threads too. */
  wholeMs: number;
  value: T;
}

/** What the threads of `hour` report: timers fired in all, and each thread's loop time at its end. */
export interface HourValue {
  fired: number;
  times: number[];
}

/** `THREADS` LoopThreads each sleeping `PERIOD` seconds `ticks` times (`started`: real ms when the program began). */
export function hour(ticks: number, started: number): () => Coroutine<Timed<HourValue>> {
  return function* () {
    const threads: LoopThread[] = [];
    try {
      for (let i = 0; i < THREADS; i++) threads.push(yield* LoopThread.start(SERVICE, { name: `clock-${i}` }));
      const begun = now();
      const results = yield* gather(threads.map((thread) => thread.call<{ fired: number; time: number }>('timers', ticks, PERIOD)));
      const ms = now() - begun;
      const value = { fired: results.reduce((sum, result) => sum + result.fired, 0), times: results.map((result) => result.time) };
      if (value.fired !== THREADS * ticks) throw new Error(`${value.fired} timers fired of ${THREADS * ticks}`);
      return { ms, wholeMs: now() - started, value };
    } finally {
      for (const thread of threads) yield* thread.close();
    }
  };
}

/**
 * A producer LoopThread putting 0..`items`-1 into a ThreadQueue of `maxsize`, a consumer
 * LoopThread getting them; the sum the consumer got.
 */
export function pipeline(items: number, maxsize: number, started: number): () => Coroutine<Timed<number>> {
  return function* () {
    const producer = yield* LoopThread.start(SERVICE, { name: 'producer' });
    try {
      const consumer = yield* LoopThread.start(SERVICE, { name: 'consumer' });
      try {
        const queue = new ThreadQueue<number>({ maxsize, name: 'pipeline' });
        const begun = now();
        const [, sum] = yield* gather([producer.call('produce', queue, items), consumer.call<number>('consume', queue, items)]);
        const ms = now() - begun;
        if (sum !== (items * (items - 1)) / 2) throw new Error(`the consumer got a sum of ${sum as number}, not ${(items * (items - 1)) / 2}`);
        return { ms, wholeMs: now() - started, value: sum as number };
      } finally {
        yield* consumer.close();
      }
    } finally {
      yield* producer.close();
    }
  };
}

/** `program` under simulate() (seed `SEED`); wholeMs is the whole simulate() call's. */
export async function simulated<T>(program: (started: number) => () => Coroutine<Timed<T>>, seed = SEED): Promise<Timed<T> & { virtualTime: number }> {
  const started = now();
  const result = await simulate(program(started), { seed, stuckAfter: 60 });
  return { ...result.value, wholeMs: now() - started, virtualTime: result.time };
}

/** `program` under run(), in real time. */
export async function realTime<T>(program: (started: number) => () => Coroutine<Timed<T>>): Promise<Timed<T>> {
  const started = now();
  const result = await run(program(started)());
  return { ...result, wholeMs: now() - started };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
const millis = (runs: Array<Timed<unknown>>, key: 'ms' | 'wholeMs'): string => runs.map((run) => `${run[key].toFixed(0)} ms`).join(', ');

/** The pipeline of `maxsize` under simulate() and run(), rounds alternating: the two rows. */
async function pipelineRows(maxsize: number, what: string, log: (line: string) => void): Promise<Row[]> {
  const [simulatedRuns, realRuns] = await interleaved(
    maxsize === 0 ? PIPELINE_ROUNDS.unbounded : PIPELINE_ROUNDS.bounded,
    () => simulated((started) => pipeline(ITEMS, maxsize, started)),
    () => realTime((started) => pipeline(ITEMS, maxsize, started)),
  );
  const simulatedMs = median(simulatedRuns.map((run) => run.ms));
  const realMs = median(realRuns.map((run) => run.ms));
  log(`  pipeline of ${ITEMS} items, ${what}, threads started: simulate() ${millis(simulatedRuns, 'ms')}; run() ${millis(realRuns, 'ms')}; simulate/real ${(simulatedMs / realMs).toFixed(2)}×`);
  log(`    the whole program (starting and closing the threads too): simulate() ${millis(simulatedRuns, 'wholeMs')}; run() ${millis(realRuns, 'wholeMs')}`);
  const workload = `simulate(): ${ITEMS / 1000}k items producer LoopThread → ThreadQueue (${what}) → consumer LoopThread`;
  return [
    {
      workload: `${workload}, wall time (threads started)`,
      unit: 'ms',
      value: simulatedMs,
      baseline: realMs,
      baselineName: 'the same under run(), real time',
      higherIsBetter: false,
    },
    {
      workload: `${workload}, slowdown simulate()/run()`,
      unit: '×',
      value: simulatedMs / realMs,
      baseline: null,
      baselineName: null,
      higherIsBetter: false,
    },
  ];
}

/** Run the simulate() workloads. */
export async function simulateWorkloads(log: (line: string) => void): Promise<Row[]> {
  const [hours, slices] = await interleaved(
    HOUR_ROUNDS,
    () => simulated((started) => hour(TICKS, started)),
    () => realTime((started) => hour(SLICE_TICKS, started)),
  );
  const timers = THREADS * TICKS;
  const wholeMs = median(hours.map((run) => run.wholeMs));
  const timersMs = median(hours.map((run) => run.ms));
  const sliceMs = median(slices.map((run) => run.ms));
  const scaledMs = sliceMs * (TICKS / SLICE_TICKS);
  log(`  a virtual hour, ${THREADS} threads × ${TICKS} timers of ${PERIOD} s: ${hours.map((run) => seconds(run.wholeMs)).join(', ')} of wall time (the timers alone ${hours.map((run) => seconds(run.ms)).join(', ')})`);
  log(`  the real-time slice (${SLICE_TICKS} s of the same timers, threads started): ${slices.map((run) => seconds(run.ms)).join(', ')}; scaled to the hour ${seconds(scaledMs)}`);
  const sliceName = `the same timers in real time: a ${SLICE_TICKS} s slice, threads started, × ${TICKS / SLICE_TICKS}`;
  return [
    {
      workload: `simulate(): a virtual hour of timers in ${THREADS} LoopThreads (${THREADS} × ${TICKS} sleeps of ${PERIOD} s), wall time of the whole simulation (starting the threads too)`,
      unit: 's',
      value: wholeMs / 1000,
      baseline: scaledMs / 1000,
      baselineName: sliceName,
      higherIsBetter: false,
    },
    {
      workload: 'simulate(): timers fired per second of wall time, the same hour (threads started)',
      unit: 'timers/s',
      value: (timers / timersMs) * 1000,
      baseline: (timers / scaledMs) * 1000,
      baselineName: sliceName,
      higherIsBetter: true,
    },
    ...(await pipelineRows(0, 'unbounded', log)),
    ...(await pipelineRows(1, 'maxsize 1: a hand-off per item', log)),
  ];
}
