/**
 * Workloads of the asyncio toolkit: gather of 100k tasks, a Queue producer/consumer of 1M items.
 */
import { Queue, gather, newEventLoop, type Coroutine } from '../src/index.js';
import { freshPairs, median, medianOf, now, perSecond, type Row } from './harness.js';

/** Processes of gather runs for each side (three runs each, after one to warm up). */
const GATHER_ROUNDS = 5;

function* child(): Coroutine<number> {
  yield;
  return 1;
}

async function gatherTasks(count: number): Promise<number> {
  const loop = newEventLoop();
  function* main(): Coroutine<number> {
    const results = yield* gather(Array.from({ length: count }, () => child()));
    return results.length;
  }
  const started = now();
  const length = await loop.runUntilComplete(main());
  const took = now() - started;
  loop.close();
  if (length !== count) throw new Error(`gather returned ${length} results`);
  return perSecond(count, took);
}

async function promiseAll(count: number): Promise<number> {
  const childAsync = async (): Promise<number> => {
    await null;
    return 1;
  };
  const started = now();
  const results = await Promise.all(Array.from({ length: count }, childAsync));
  const took = now() - started;
  if (results.length !== count) throw new Error('Promise.all lost results');
  return perSecond(count, took);
}

async function queueTransfer(count: number, maxsize: number): Promise<number> {
  const loop = newEventLoop();
  const queue = new Queue<number>(maxsize);
  let sum = 0;
  function* producer(): Coroutine<void> {
    for (let i = 0; i < count; i++) yield* queue.put(i);
  }
  function* consumer(): Coroutine<void> {
    for (let i = 0; i < count; i++) sum += yield* queue.get();
  }
  function* main(): Coroutine<void> {
    yield* gather(producer(), consumer());
  }
  const started = now();
  await loop.runUntilComplete(main());
  const took = now() - started;
  loop.close();
  if (sum !== (count * (count - 1)) / 2) throw new Error('queue lost items');
  return perSecond(count, took);
}

/** The smallest fair baseline: a bounded async queue built on Promises, as one would hand-roll it. */
class PromiseQueue<T> {
  readonly #items: T[] = [];
  #head = 0;
  readonly #getters: Array<(item: T) => void> = [];
  readonly #putters: Array<() => void> = [];

  constructor(readonly maxsize: number) {}

  async put(item: T): Promise<void> {
    while (this.#items.length - this.#head >= this.maxsize) {
      await new Promise<void>((resolve) => this.#putters.push(resolve));
    }
    const getter = this.#getters.shift();
    if (getter !== undefined) getter(item);
    else this.#items.push(item);
  }

  async get(): Promise<T> {
    if (this.#items.length > this.#head) {
      const item = this.#items[this.#head++] as T;
      if (this.#head > 4096) {
        this.#items.splice(0, this.#head);
        this.#head = 0;
      }
      this.#putters.shift()?.();
      return item;
    }
    return new Promise<T>((resolve) => this.#getters.push(resolve));
  }
}

async function promiseQueueTransfer(count: number, maxsize: number): Promise<number> {
  const queue = new PromiseQueue<number>(maxsize);
  let sum = 0;
  const started = now();
  await Promise.all([
    (async () => {
      for (let i = 0; i < count; i++) await queue.put(i);
    })(),
    (async () => {
      for (let i = 0; i < count; i++) sum += await queue.get();
    })(),
  ]);
  const took = now() - started;
  if (sum !== (count * (count - 1)) / 2) throw new Error('promise queue lost items');
  return perSecond(count, took);
}

/** gather of 100k tasks and Promise.all of 100k async functions (bench/solo.ts runs each in processes of its own). */
export const gatherPair: [() => Promise<number>, () => Promise<number>] = [() => gatherTasks(100_000), () => promiseAll(100_000)];

/** Run the toolkit workloads. */
export async function toolkitWorkloads(log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  const add = (row: Row): void => {
    rows.push(row);
    log(`  ${row.workload}: ${row.value.toFixed(1)} ${row.unit}${row.baseline === null ? '' : ` (baseline ${row.baseline.toFixed(1)})`}`);
  };
  const [gathers, promiseAlls] = freshPairs<number>('gather', GATHER_ROUNDS, 3);
  add({
    workload: 'gather of 100k tasks',
    unit: 'tasks/s',
    value: median(gathers),
    baseline: median(promiseAlls),
    baselineName: 'Promise.all of async functions',
    higherIsBetter: true,
  });
  add({
    workload: 'Queue 1M items (maxsize 1024)',
    unit: 'items/s',
    value: await medianOf(3, () => queueTransfer(1_000_000, 1024)),
    baseline: await medianOf(3, () => promiseQueueTransfer(1_000_000, 1024)),
    baselineName: 'Promise-based bounded queue',
    higherIsBetter: true,
  });
  return rows;
}
