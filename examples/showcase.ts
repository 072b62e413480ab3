/**
 * The multiloop showcase: `npm start`.
 *
 * A main coroutine on an asyncio-style loop: tasks started concurrently, a deadline enforced by
 * cancelling a slow task (its `finally` runs), context variables per task, and the loop's lag
 * measured while it works.
 */
import {
  CancelledError,
  ContextVar,
  createTask,
  currentTask,
  getRunningLoop,
  run,
  sleep,
  type Coroutine,
} from '../src/index.js';

const requestId = new ContextVar<string>('requestId', { default: '-' });

function* worker(id: string, seconds: number): Coroutine<string> {
  requestId.set(id);
  const loop = getRunningLoop();
  const started = loop.time();
  yield* sleep(seconds);
  return `${currentTask()?.getName()} served ${requestId.get()} in ${(loop.time() - started).toFixed(2)} s`;
}

function* slow(log: string[]): Coroutine<void> {
  try {
    yield* sleep(60);
  } finally {
    log.push('slow task: finally ran after cancellation');
  }
}

function* measureLag(samples: number[], stopAt: number): Coroutine<void> {
  const loop = getRunningLoop();
  while (loop.time() < stopAt) {
    const before = loop.time();
    yield* sleep(0.01);
    samples.push((loop.time() - before - 0.01) * 1000);
  }
}

function* main(): Coroutine<void> {
  const loop = getRunningLoop();
  const lag: number[] = [];
  const lagTask = createTask(measureLag(lag, loop.time() + 0.5), { name: 'lag-probe' });

  const workers = ['alpha', 'beta', 'gamma'].map((id, i) =>
    createTask(worker(id, 0.1 * (i + 1)), { name: `worker-${id}` }),
  );
  for (const task of workers) console.log(yield* task);

  const log: string[] = [];
  const slowTask = createTask(slow(log), { name: 'slow' });
  yield* sleep(0.05);
  slowTask.cancel('deadline passed');
  try {
    yield* slowTask;
  } catch (error) {
    if (!(error instanceof CancelledError)) throw error;
    console.log(`slow task cancelled: '${error.message}'`);
  }
  for (const line of log) console.log(line);

  yield* lagTask;
  const sorted = [...lag].sort((a, b) => a - b);
  const p50 = sorted[Math.floor(sorted.length / 2)] ?? 0;
  const max = sorted[sorted.length - 1] ?? 0;
  console.log(`loop lag over ${lag.length} samples: p50 ${p50.toFixed(2)} ms, max ${max.toFixed(2)} ms`);
}

await run(main());
