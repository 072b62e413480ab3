/**
 * The distributed executor's workloads, beside raw BullMQ in the same run on the same Redis:
 * 20,000 tiny jobs (add) through `runInExecutor` on a `BullMQExecutor` with two worker processes,
 * against raw BullMQ (`Queue.add` per job, a `Worker` of concurrency 16 in each of two processes,
 * completions from `QueueEvents`); and the latency of one job at a time, p50 and p99, both ways.
 * Needs Debian's redis-server (started here on a free port, persistence off): without it the
 * suite is skipped with one line saying so.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Queue, QueueEvents } from 'bullmq';
import { BullMQExecutor } from '../src/bullmq.js';
import { newEventLoop, type Coroutine, type EventLoop, type Future } from '../src/index.js';
import { workerFn } from '../src/worker-fn.js';
import { median, now, percentile, perSecond, type Row } from './harness.js';

const TINY_JOBS = 20_000;
const RUNS = 3;
const LATENCY_JOBS = 1200;
const LATENCY_ROUNDS = 20;
const LATENCY_WARM_UP = 2000;
/** The repository's root, from bench/ or dist/bench/: workers resolve the job module from there. */
const ROOT = fileURLToPath(new URL(import.meta.url.includes('/dist/') ? '../../' : '../', import.meta.url));
const WORKER = `${ROOT}dist/bin/multiloop.js`;
const RAW_WORKER = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../dist/bench/fixtures/bullmq-raw-worker.js' : './fixtures/bullmq-raw-worker.js', import.meta.url));
const JOBS = './test/fixtures/pool-math.mjs';
const add = workerFn<[number, number], number>(JOBS, 'add');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Start `node script ...args` and wait until it prints `ready`. */
async function startProcess(script: string, args: string[], ready: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [script, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      if (output.includes(ready)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before it was ready`)));
  });
  return child;
}

async function startRedis(port: number): Promise<ChildProcess> {
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir()], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    redis.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      if (chunk.includes('Ready to accept connections')) resolve();
    });
    redis.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)));
  });
  return redis;
}

/** Stop children and wait for them. */
async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) resolve();
          else {
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }
        }),
    ),
  );
}

/** 20k adds through runInExecutor in one burst from a task of `loop`; jobs per second. */
async function executorBurst(loop: EventLoop, executor: BullMQExecutor): Promise<number> {
  let took = 0;
  const futures: Array<Future<number>> = new Array(TINY_JOBS);
  function* main(): Coroutine<void> {
    const started = now();
    const done = loop.createFuture<void>();
    let left = TINY_JOBS;
    const onDone = (): void => {
      if (--left === 0) done.setResult(undefined);
    };
    for (let i = 0; i < TINY_JOBS; i++) (futures[i] = loop.runInExecutor(executor, add, i, 1)).addDoneCallback(onDone);
    yield* done;
    took = now() - started;
  }
  await loop.runUntilComplete(main());
  let sum = 0;
  for (const future of futures) sum += future.result();
  if (sum !== (TINY_JOBS * (TINY_JOBS + 1)) / 2) throw new Error(`BullMQExecutor's tiny jobs summed to ${sum}`);
  return perSecond(TINY_JOBS, took);
}

/** Milliseconds of `count` jobs run one after the other through the executor. */
async function executorLatencies(loop: EventLoop, executor: BullMQExecutor, count: number): Promise<number[]> {
  const latencies: number[] = [];
  function* main(): Coroutine<void> {
    for (let i = 0; i < count; i++) {
      const started = now();
      const sum = yield* loop.runInExecutor(executor, add, i, 1);
      latencies.push(now() - started);
      if (sum !== i + 1) throw new Error(`add(${i}, 1) gave ${sum}`);
    }
  }
  await loop.runUntilComplete(main());
  return latencies;
}

/** Raw BullMQ: a Queue, and completions from QueueEvents, by job id. */
class RawClient {
  readonly queue: Queue;
  readonly events: QueueEvents;
  readonly #waiting = new Map<string, (value: number) => void>();

  constructor(port: number, name: string) {
    const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
    this.queue = new Queue(name, { connection, defaultJobOptions: { removeOnComplete: true, removeOnFail: true }, streams: { events: { maxLen: 1_000_000 } } });
    this.events = new QueueEvents(name, { connection });
    this.events.on('completed', ({ jobId, returnvalue }) => {
      const resolve = this.#waiting.get(jobId);
      if (resolve === undefined) return;
      this.#waiting.delete(jobId);
      resolve(Number(returnvalue));
    });
  }

  async ready(): Promise<void> {
    await Promise.all([this.queue.waitUntilReady(), this.events.waitUntilReady()]);
  }

  /** Add one job and resolve with its result (the id is ours, so the event cannot come first). */
  run(id: string, a: number, b: number): Promise<number> {
    const result = new Promise<number>((resolve) => this.#waiting.set(id, resolve));
    void this.queue.add('add', { a, b }, { jobId: id });
    return result;
  }

  async close(): Promise<void> {
    await this.events.close();
    await this.queue.close();
  }
}

let rawSeq = 0;

async function rawBurst(client: RawClient): Promise<number> {
  const started = now();
  const runs: Array<Promise<number>> = new Array(TINY_JOBS);
  for (let i = 0; i < TINY_JOBS; i++) runs[i] = client.run(`raw-${++rawSeq}`, i, 1);
  const results = await Promise.all(runs);
  const took = now() - started;
  let sum = 0;
  for (const value of results) sum += value;
  if (sum !== (TINY_JOBS * (TINY_JOBS + 1)) / 2) throw new Error(`raw BullMQ's tiny jobs summed to ${sum}`);
  return perSecond(TINY_JOBS, took);
}

async function rawLatencies(client: RawClient, count: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = now();
    const sum = await client.run(`raw-${++rawSeq}`, i, 1);
    latencies.push(now() - started);
    if (sum !== i + 1) throw new Error(`raw add(${i}, 1) gave ${sum}`);
  }
  return latencies;
}

/** Run the BullMQ workloads (skipped with one line when redis-server is missing). */
export async function bullmqWorkloads(log: (line: string) => void): Promise<Row[]> {
  if (spawnSync('sh', ['-c', 'command -v redis-server'], { stdio: 'ignore' }).status !== 0) {
    log('  skipped: install redis-server (apt-get install redis-server) — the BullMQ workloads did not run');
    return [];
  }
  const rows: Row[] = [];
  const record = (row: Row): void => {
    rows.push(row);
    log(`  ${row.workload}: ${row.value.toFixed(2)} ${row.unit}${row.baseline === null ? '' : ` (baseline ${row.baseline.toFixed(2)})`}`);
  };
  const port = await freePort();
  const redis = await startRedis(port);
  const url = `redis://127.0.0.1:${port}`;
  const children: ChildProcess[] = [];
  const loop = newEventLoop();
  try {
    const workerArgs = ['worker', '--redis', url, '--queue', 'bench-multiloop', '--allow', JOBS, '--concurrency', '16'];
    children.push(...(await Promise.all([1, 2].map(() => startProcess(WORKER, workerArgs, 'serving')))));
    children.push(...(await Promise.all([1, 2].map(() => startProcess(RAW_WORKER, [String(port), 'bench-raw'], 'ready')))));
    const executor = new BullMQExecutor({ connection: url, queue: 'bench-multiloop' });
    const raw = new RawClient(port, 'bench-raw');
    await raw.ready();
    try {
      // Warm both up: connections, imports, JIT, and the executor's measure of add.
      await executorLatencies(loop, executor, 50);
      await rawLatencies(raw, 50);
      const ours: number[] = [];
      const theirs: number[] = [];
      // Alternate, so both meet the same machine.
      await executorBurst(loop, executor);
      await rawBurst(raw);
      for (let run = 0; run < RUNS; run++) {
        ours.push(await executorBurst(loop, executor));
        theirs.push(await rawBurst(raw));
      }
      const { jobsSent, callsSent } = executor.statistics();
      log(`  (BullMQExecutor: ${(callsSent / jobsSent).toFixed(1)} calls per BullMQ job on average)`);
      record({
        workload: `${TINY_JOBS / 1000}k tiny jobs (add) via BullMQExecutor, 2 worker processes`,
        unit: 'jobs/s',
        value: median(ours),
        baseline: median(theirs),
        baselineName: 'raw BullMQ: Queue.add per job, 2 Worker processes of concurrency 16',
        higherIsBetter: true,
        target: '>= 5x raw BullMQ',
      });

      // The bursts made raw BullMQ's one-job path hot (it is the same code), not ours: both get
      // the same warm-up of single jobs first, so both are measured in their steady state.
      for (let round = 0; round < LATENCY_ROUNDS; round++) {
        await executorLatencies(loop, executor, LATENCY_WARM_UP / LATENCY_ROUNDS);
        await rawLatencies(raw, LATENCY_WARM_UP / LATENCY_ROUNDS);
      }
      // In rounds that alternate, so that both meet the same load of the machine.
      const ourLatencies: number[] = [];
      const theirLatencies: number[] = [];
      for (let round = 0; round < LATENCY_ROUNDS; round++) {
        ourLatencies.push(...(await executorLatencies(loop, executor, LATENCY_JOBS / LATENCY_ROUNDS)));
        theirLatencies.push(...(await rawLatencies(raw, LATENCY_JOBS / LATENCY_ROUNDS)));
      }
      record({
        workload: 'single-job latency p50 via BullMQExecutor',
        unit: 'ms',
        value: percentile(ourLatencies, 50),
        baseline: percentile(theirLatencies, 50),
        baselineName: 'raw BullMQ: Queue.add, completion from QueueEvents',
        higherIsBetter: false,
        target: 'within 1.2x raw BullMQ',
      });
      record({
        workload: 'single-job latency p99 via BullMQExecutor',
        unit: 'ms',
        value: percentile(ourLatencies, 99),
        baseline: percentile(theirLatencies, 99),
        baselineName: 'raw BullMQ: Queue.add, completion from QueueEvents',
        higherIsBetter: false,
      });
    } finally {
      await executor.shutdown();
      await raw.close();
    }
  } finally {
    loop.close();
    await stop(children);
    await stop([redis]);
  }
  return rows;
}
