/**
 * Workloads of the core runtime: callSoon chain and burst, task spawn+complete, 100k tasks +
 * gather (lazy and eager tasks), bare-yield switches, timers with half cancelled, heap bytes per
 * pending task.
 */
import { eagerTaskFactory, gather, newEventLoop, type Coroutine, type Future } from '../src/index.js';
import { collectGarbage, freshPairs, freshSides, median, medianOf, now, percentile, perSecond, type Row } from './harness.js';

const RUNS = 5;
/** Processes of timer runs for each side (two runs each, after one to warm up). */
const TIMER_ROUNDS = 7;
/** Processes of task spawn runs for each side (three runs each, after one to warm up). */
const SPAWN_ROUNDS = 3;
/** Processes of 100k tasks + gather runs for each of its three sides (five runs each, after one to warm up). */
const TASKS_ROUNDS = 4;

export async function callSoonChain(count: number): Promise<number> {
  const loop = newEventLoop();
  let n = 0;
  const tick = (): void => {
    if (++n < count) loop.callSoon(tick);
    else loop.stop();
  };
  loop.callSoon(tick);
  const started = now();
  await loop.runForever();
  const took = now() - started;
  loop.close();
  return perSecond(count, took);
}

function setImmediateChain(count: number): Promise<number> {
  return new Promise((resolve) => {
    let n = 0;
    const started = now();
    const tick = (): void => {
      if (++n < count) setImmediate(tick);
      else resolve(perSecond(count, now() - started));
    };
    setImmediate(tick);
  });
}

async function callSoonBurst(count: number): Promise<number> {
  const loop = newEventLoop();
  let n = 0;
  const cb = (): void => {
    n++;
  };
  const started = now();
  for (let i = 0; i < count; i++) loop.callSoon(cb);
  loop.callSoon(() => loop.stop());
  await loop.runForever();
  const took = now() - started;
  loop.close();
  if (n !== count) throw new Error(`burst ran ${n} of ${count}`);
  return perSecond(count, took);
}

function setImmediateBurst(count: number): Promise<number> {
  return new Promise((resolve) => {
    let n = 0;
    const started = now();
    const cb = (): void => {
      if (++n === count) resolve(perSecond(count, now() - started));
    };
    for (let i = 0; i < count; i++) setImmediate(cb);
  });
}

function* returnOne(): Coroutine<number> {
  return 1;
}

export async function taskSpawn(count: number): Promise<number> {
  const loop = newEventLoop();
  const batch = 10_000;
  let created = 0;
  let done = 0;
  const onDone = (): void => {
    if (++done === count) loop.stop();
  };
  const spawn = (): void => {
    const end = Math.min(count, created + batch);
    for (; created < end; created++) loop.createTask(returnOne()).addDoneCallback(onDone);
    if (created < count) loop.callSoon(spawn);
  };
  loop.callSoon(spawn);
  const started = now();
  await loop.runForever();
  const took = now() - started;
  loop.close();
  return perSecond(count, took);
}

async function asyncFunctionSpawn(count: number): Promise<number> {
  const fn = async (): Promise<number> => 1;
  const batch = 10_000;
  const started = now();
  for (let created = 0; created < count; created += batch) {
    const pending: Array<Promise<number>> = [];
    for (let i = 0; i < batch; i++) pending.push(fn());
    await Promise.all(pending);
  }
  return perSecond(count, now() - started);
}

/**
 * `count` tasks gathered by a main task, each returning at once (a cache hit, a validation, the
 * calls eager tasks are for), with the default factory or `eagerTaskFactory`.
 */
async function tasksGather(count: number, eager: boolean): Promise<number> {
  const loop = newEventLoop();
  if (eager) loop.setTaskFactory(eagerTaskFactory);
  const children = new Array<Coroutine<number>>(count);
  function* main(): Coroutine<number> {
    for (let i = 0; i < count; i++) children[i] = returnOne();
    const results = yield* gather(children);
    return results.length;
  }
  const started = now();
  const length = await loop.runUntilComplete(main());
  const took = now() - started;
  loop.close();
  if (length !== count) throw new Error(`gather returned ${length} results`);
  return perSecond(count, took);
}

/**
 * The floor under tasksGather that no runtime of generator coroutines goes below: the same
 * `count` generators made, told apart (gather runs a coroutine given twice once, which takes a
 * Set of them) and run to their return by hand, their results listed; no loop, no Task.
 */
async function generatorsByHand(count: number): Promise<number> {
  const started = now();
  const children = new Array<Coroutine<number>>(count);
  for (let i = 0; i < count; i++) children[i] = returnOne();
  if (new Set(children).size !== count) throw new Error('the generators repeat');
  const results = new Array<number>(count);
  for (let i = 0; i < count; i++) results[i] = children[i]!.next().value as number;
  await null;
  const took = now() - started;
  if (results.length !== count) throw new Error('results lost');
  return perSecond(count, took);
}

/** `count` async functions returning at once, awaited with Promise.all: the baseline of tasksGather. */
async function asyncFunctionsAll(count: number): Promise<number> {
  const fn = async (): Promise<number> => 1;
  const started = now();
  const pending = new Array<Promise<number>>(count);
  for (let i = 0; i < count; i++) pending[i] = fn();
  const results = await Promise.all(pending);
  const took = now() - started;
  if (results.length !== count) throw new Error('Promise.all lost results');
  return perSecond(count, took);
}

function* spin(times: number): Coroutine<void> {
  for (let i = 0; i < times; i++) yield;
}

export async function bareYieldSwitches(tasks: number, times: number): Promise<number> {
  const loop = newEventLoop();
  const all: Array<Future<void>> = [];
  for (let i = 0; i < tasks; i++) all.push(loop.createTask(spin(times)));
  let remaining = tasks;
  for (const task of all) task.addDoneCallback(() => (--remaining === 0 ? loop.stop() : undefined));
  const started = now();
  await loop.runForever();
  const took = now() - started;
  loop.close();
  return perSecond(tasks * times, took);
}

async function asyncFunctionSwitches(tasks: number, times: number): Promise<number> {
  const spinAsync = async (): Promise<void> => {
    for (let i = 0; i < times; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  };
  const started = now();
  await Promise.all(Array.from({ length: tasks }, spinAsync));
  return perSecond(tasks * times, now() - started);
}

/** What one run of the timer workload measured. */
export interface TimerResult {
  opsPerSecond: number;
  lateP50: number;
  lateP99: number;
}

/** Timers start this long after scheduling begins, so lateness measures firing, not scheduling. */
const TIMER_OFFSET = 0.5;

/** Schedule `count` timers over `spread` seconds, cancel every other one, run until the last fires. */
async function timers(count: number, spread: number): Promise<TimerResult> {
  const loop = newEventLoop();
  const lateness: number[] = [];
  let fired = 0;
  const expected = count >> 1;
  const onTimer = (when: number): void => {
    lateness.push((loop.time() - when) * 1000);
    if (++fired === expected) loop.stop();
  };
  const started = now();
  const base = loop.time();
  for (let i = 0; i < count; i++) {
    const when = base + TIMER_OFFSET + ((i * 7919) % count) * (spread / count);
    const handle = loop.callAt(when, onTimer, when);
    if (i % 2 === 1) handle.cancel();
  }
  const scheduling = now() - started;
  const cpuBefore = process.cpuUsage();
  await loop.runForever();
  const cpu = process.cpuUsage(cpuBefore);
  loop.close();
  const processingMs = (cpu.user + cpu.system) / 1000;
  return {
    opsPerSecond: perSecond(count, scheduling + processingMs),
    lateP50: percentile(lateness, 50),
    lateP99: percentile(lateness, 99),
  };
}

function nodeTimers(count: number, spread: number): Promise<TimerResult> {
  return new Promise((resolve) => {
    const lateness: number[] = [];
    let fired = 0;
    const expected = count >> 1;
    let scheduling = 0;
    // eslint-disable-next-line prefer-const -- set once, after the callback that reads it is made
    let cpuBefore: NodeJS.CpuUsage;
    const onTimer = (when: number): void => {
      lateness.push(now() - when);
      if (++fired === expected) {
        const cpu = process.cpuUsage(cpuBefore);
        resolve({
          opsPerSecond: perSecond(count, scheduling + (cpu.user + cpu.system) / 1000),
          lateP50: percentile(lateness, 50),
          lateP99: percentile(lateness, 99),
        });
      }
    };
    const started = now();
    for (let i = 0; i < count; i++) {
      const delayMs = (TIMER_OFFSET + ((i * 7919) % count) * (spread / count)) * 1000;
      const timer = setTimeout(onTimer, delayMs, started + delayMs);
      if (i % 2 === 1) clearTimeout(timer);
    }
    scheduling = now() - started;
    cpuBefore = process.cpuUsage();
  });
}

async function heapPerPendingTask(count: number): Promise<number> {
  const loop = newEventLoop();
  const gate = loop.createFuture<void>();
  function* park(): Coroutine<void> {
    yield* gate;
  }
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < count; i++) loop.createTask(park());
  loop.callSoon(() => loop.stop());
  await loop.runForever();
  collectGarbage();
  const after = process.memoryUsage().heapUsed;
  gate.setResult(undefined);
  loop.callSoon(() => loop.callSoon(() => loop.stop()));
  await loop.runForever();
  loop.close();
  return (after - before) / count;
}

async function heapPerPendingAsyncFunction(count: number): Promise<number> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const park = async (): Promise<void> => {
    await gate;
  };
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  const all: Array<Promise<void>> = [];
  for (let i = 0; i < count; i++) all.push(park());
  collectGarbage();
  const after = process.memoryUsage().heapUsed;
  open();
  await Promise.all(all);
  return (after - before - count * 8) / count;
}

/** Task spawn+complete and its baseline (bench/solo.ts runs each in processes of its own). */
export const spawnPair: [() => Promise<number>, () => Promise<number>] = [() => taskSpawn(500_000), () => asyncFunctionSpawn(500_000)];

/**
 * 100k lazy tasks + gather, 100k eager tasks + gather, 100k async functions + Promise.all, and
 * the floor of any runtime of generator coroutines (bench/solo.ts runs each in processes of its own).
 */
export const tasksGatherSides: ReadonlyArray<() => Promise<number>> = [
  () => tasksGather(100_000, false),
  () => tasksGather(100_000, true),
  () => asyncFunctionsAll(100_000),
  () => generatorsByHand(100_000),
];

/** 200k timers and 200k setTimeouts (bench/solo.ts runs each in processes of its own). */
export const timerPair: [() => Promise<TimerResult>, () => Promise<TimerResult>] = [() => timers(200_000, 0.2), () => nodeTimers(200_000, 0.2)];

/** Run the core workloads. */
export async function coreWorkloads(log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  const add = (row: Row): void => {
    rows.push(row);
    log(`  ${row.workload}: ${row.value.toFixed(1)} ${row.unit}${row.baseline === null ? '' : ` (baseline ${row.baseline.toFixed(1)})`}`);
  };

  add({
    workload: 'callSoon chain',
    unit: 'calls/s',
    value: await medianOf(RUNS, () => callSoonChain(2_000_000)),
    baseline: await medianOf(RUNS, () => setImmediateChain(300_000)),
    baselineName: 'setImmediate chain',
    higherIsBetter: true,
    target: '>= 10 M/s and > 10x setImmediate',
  });
  add({
    workload: 'callSoon burst',
    unit: 'calls/s',
    value: await medianOf(RUNS, () => callSoonBurst(1_000_000)),
    baseline: await medianOf(RUNS, () => setImmediateBurst(1_000_000)),
    baselineName: 'setImmediate burst',
    higherIsBetter: true,
  });
  const [spawns, asyncSpawns] = freshPairs<number>('spawn', SPAWN_ROUNDS, 3);
  add({
    workload: 'task spawn+complete',
    unit: 'tasks/s',
    value: median(spawns),
    baseline: median(asyncSpawns),
    baselineName: 'async function + Promise.all',
    higherIsBetter: true,
    target: '>= 1.5 M/s',
  });
  const [lazyGathers, eagerGathers, promiseAlls, byHand] = freshSides<number>('tasks', 4, TASKS_ROUNDS, 5);
  add({
    workload: '100k tasks + gather',
    unit: 'tasks/s',
    value: median(lazyGathers as number[]),
    baseline: median(promiseAlls as number[]),
    baselineName: 'async functions + Promise.all',
    higherIsBetter: true,
    target: '>= 0.6x async functions + Promise.all',
  });
  add({
    workload: '100k eager tasks + gather',
    unit: 'tasks/s',
    value: median(eagerGathers as number[]),
    baseline: median(promiseAlls as number[]),
    baselineName: 'async functions + Promise.all',
    higherIsBetter: true,
    target: '>= 1.5x async functions + Promise.all',
  });
  add({
    workload: 'floor: the same 100k generators told apart and run by hand (no loop, no Task)',
    unit: 'tasks/s',
    value: median(byHand as number[]),
    baseline: median(promiseAlls as number[]),
    baselineName: 'async functions + Promise.all',
    higherIsBetter: true,
  });
  // The goal of the task rows: their throughput against the floor of the same processes.
  const floorName = 'floor: the same generators run by hand';
  add({
    workload: '100k tasks + gather vs floor',
    unit: 'tasks/s',
    value: median(lazyGathers as number[]),
    baseline: median(byHand as number[]),
    baselineName: floorName,
    higherIsBetter: true,
    target: '>= 0.8x the floor',
  });
  add({
    workload: '100k eager tasks + gather vs floor',
    unit: 'tasks/s',
    value: median(eagerGathers as number[]),
    baseline: median(byHand as number[]),
    baselineName: floorName,
    higherIsBetter: true,
    target: '>= 0.9x the floor',
  });
  add({
    workload: 'bare-yield switches',
    unit: 'switches/s',
    value: await medianOf(RUNS, () => bareYieldSwitches(100, 20_000)),
    baseline: await medianOf(RUNS, () => asyncFunctionSwitches(100, 2_000)),
    baselineName: 'async fn awaiting setImmediate',
    higherIsBetter: true,
    target: '>= 15 M/s',
  });
  const [ours, node] = freshPairs<TimerResult>('timers', TIMER_ROUNDS, 2);
  const mid = (list: TimerResult[], key: keyof TimerResult): number => percentile(list.map((r) => r[key]), 50);
  add({
    workload: '200k timers, half cancelled',
    unit: 'timers/s',
    value: mid(ours, 'opsPerSecond'),
    baseline: mid(node, 'opsPerSecond'),
    baselineName: 'setTimeout/clearTimeout',
    higherIsBetter: true,
  });
  add({
    workload: 'timer lateness p50',
    unit: 'ms',
    value: mid(ours, 'lateP50'),
    baseline: mid(node, 'lateP50'),
    baselineName: 'setTimeout',
    higherIsBetter: false,
  });
  add({
    workload: 'timer lateness p99',
    unit: 'ms',
    value: mid(ours, 'lateP99'),
    baseline: mid(node, 'lateP99'),
    baselineName: 'setTimeout',
    higherIsBetter: false,
  });
  add({
    workload: 'heap per pending task',
    unit: 'bytes',
    value: await medianOf(3, () => heapPerPendingTask(100_000)),
    baseline: await medianOf(3, () => heapPerPendingAsyncFunction(100_000)),
    baselineName: 'pending async function',
    higherIsBetter: false,
    target: '<= 350 bytes',
  });
  return rows;
}

