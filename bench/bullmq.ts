/**
 * The distributed executor's workloads, beside raw BullMQ in the same run on the same store, on
 * Redis and on PostgreSQL: tiny jobs (add; 20,000 on Redis, 5,000 on PostgreSQL) through
 * `runInExecutor` on a `BullMQExecutor` with two worker processes, against raw BullMQ
 * (`Queue.add` per job, a `Worker` of concurrency 16 in each of two processes, completions from
 * `QueueEvents`); and the latency of one job at a time, p50 and p99, both ways. Needs Debian's
 * redis-server (started here on a free port, persistence off) and postgresql (a cluster made in
 * a temporary directory, fsync off): without one, its rows are skipped with one line saying so.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue, QueueEvents, createPostgresBackend } from 'bullmq';
import { BullMQExecutor } from '../src/bullmq.js';
import { newEventLoop, type Coroutine, type EventLoop, type Future } from '../src/index.js';
import { workerFn } from '../src/worker-fn.js';
import { median, now, percentile, perSecond, type Row } from './harness.js';

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

/** A store both sides run on: its name in rows, the executor's and the workers' connection, raw BullMQ's. */
interface Store {
  readonly name: 'Redis' | 'PostgreSQL';
  /** The tiny jobs of a burst. */
  readonly tinyJobs: number;
  /** The URL the executor and `multiloop worker` take. */
  readonly url: string;
  /** Raw BullMQ's `connection`, and its backend factory (none: Redis). */
  readonly connection: Record<string, unknown>;
  readonly factory: typeof createPostgresBackend | undefined;
  /**
   * Whether QueueEvents may miss completions: on PostgreSQL it reads events past an id, and
   * skips those whose transactions committed late (about 9% of a burst of 5,000 here). Raw
   * bursts then end when the queue holds none of their jobs, and a single job whose event is
   * late is looked for after a second.
   */
  readonly eventsLose: boolean;
  /** The first argument of the raw worker (a Redis port, or the PostgreSQL URL). */
  readonly rawWorkerArg: string;
  /** Stop the server (and remove what it made). */
  stop(): Promise<void>;
}

/** The directory of PostgreSQL's programs, or null when it is not installed. */
function postgresBin(): string | null {
  const found = spawnSync('sh', ['-c', 'dirname "$(readlink -f "$(command -v postgres)")"'], { encoding: 'utf8' });
  if (found.status === 0 && found.stdout.trim() !== '.' && existsSync(join(found.stdout.trim(), 'initdb'))) return found.stdout.trim();
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).filter((name) => existsSync(join(root, name, 'bin', 'postgres'))).sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? null : join(root, versions[0] as string, 'bin');
}

/** Make a cluster in a temporary directory and serve it on `port`, fsync off (as the `postgres` user when root: PostgreSQL refuses root). */
async function startPostgres(bin: string, port: number): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'multiloop-bench-pg-'));
  let as: { uid?: number; gid?: number } = {};
  if (process.getuid?.() === 0) {
    const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (uid.status !== 0 || gid.status !== 0) throw new Error('PostgreSQL refuses to run as root, and there is no postgres user to run it as');
    as = { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
    chownSync(dir, as.uid as number, as.gid as number);
  }
  const data = join(dir, 'data');
  const made = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], { ...as, encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`initdb failed: ${made.stderr}`);
  const args = ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'];
  const server = spawn(join(bin, 'postgres'), args, { ...as, stdio: ['ignore', 'ignore', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let log = '';
    server.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      log += chunk;
      if (log.includes('ready to accept connections')) resolve();
    });
    server.once('exit', (code) => reject(new Error(`postgres exited with ${code}: ${log}`)));
  });
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    name: 'PostgreSQL',
    tinyJobs: 5000,
    url,
    connection: { connectionString: url, migrate: true },
    factory: createPostgresBackend,
    eventsLose: true,
    rawWorkerArg: url,
    async stop() {
      await stop([server], 'SIGQUIT');
      rmSync(dir, { recursive: true, force: true });
    },
  };
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

/** Stop children (SIGTERM unless `signal` says otherwise) and wait for them. */
async function stop(children: ChildProcess[], signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) resolve();
          else {
            child.once('exit', () => resolve());
            child.kill(signal);
          }
        }),
    ),
  );
}

/** `count` adds through runInExecutor in one burst from a task of `loop`; jobs per second. */
async function executorBurst(loop: EventLoop, executor: BullMQExecutor, count: number): Promise<number> {
  let took = 0;
  const futures: Array<Future<number>> = new Array(count);
  function* main(): Coroutine<void> {
    const started = now();
    const done = loop.createFuture<void>();
    let left = count;
    const onDone = (): void => {
      if (--left === 0) done.setResult(undefined);
    };
    for (let i = 0; i < count; i++) (futures[i] = loop.runInExecutor(executor, add, i, 1)).addDoneCallback(onDone);
    yield* done;
    took = now() - started;
  }
  await loop.runUntilComplete(main());
  let sum = 0;
  for (const future of futures) sum += future.result();
  if (sum !== (count * (count + 1)) / 2) throw new Error(`BullMQExecutor's tiny jobs summed to ${sum}`);
  return perSecond(count, took);
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
  readonly eventsLose: boolean;
  /** Single jobs whose completion was found by looking, not by its event. */
  missed = 0;
  readonly #waiting = new Map<string, (value: number) => void>();

  constructor(store: Store, name: string) {
    const { connection, factory } = store;
    this.eventsLose = store.eventsLose;
    this.queue = new Queue(name, { connection, defaultJobOptions: { removeOnComplete: true, removeOnFail: true }, streams: { events: { maxLen: 1_000_000 } } }, factory as never);
    this.events = new QueueEvents(name, { connection }, factory as never);
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

  /**
   * Add one job and resolve with its result (the id is ours, so the event cannot come first);
   * NaN when its event went missing and the job was found gone (completed and removed).
   */
  run(id: string, a: number, b: number): Promise<number> {
    const result = new Promise<number>((resolve) => this.#waiting.set(id, resolve));
    void this.queue.add('add', { a, b }, { jobId: id });
    if (this.eventsLose) void this.#lookAfter(id, 1000);
    return result;
  }

  /** Resolve job `id` with NaN once it is gone without its event, looking every `ms`. */
  async #lookAfter(id: string, ms: number): Promise<void> {
    while (this.#waiting.has(id)) {
      await new Promise((resolve) => setTimeout(resolve, ms));
      const resolve = this.#waiting.get(id);
      if (resolve === undefined || (await this.queue.getJobState(id)) !== 'unknown') continue;
      this.#waiting.delete(id);
      this.missed++;
      resolve(NaN);
    }
  }

  /** Add `count` jobs and resolve once the queue holds none of them (no results: see Store.eventsLose). */
  async burstUncounted(count: number): Promise<void> {
    const adds: Array<Promise<unknown>> = new Array(count);
    for (let i = 0; i < count; i++) adds[i] = this.queue.add('add', { a: i, b: 1 }, { jobId: `raw-${++rawSeq}` });
    await Promise.all(adds);
    for (;;) {
      const counts = await this.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      if (Object.values(counts).every((value) => value === 0)) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  async close(): Promise<void> {
    await this.events.close();
    await this.queue.close();
  }
}

let rawSeq = 0;

async function rawBurst(client: RawClient, count: number): Promise<number> {
  const started = now();
  if (client.eventsLose) {
    await client.burstUncounted(count);
    return perSecond(count, now() - started);
  }
  const runs: Array<Promise<number>> = new Array(count);
  for (let i = 0; i < count; i++) runs[i] = client.run(`raw-${++rawSeq}`, i, 1);
  const results = await Promise.all(runs);
  const took = now() - started;
  let sum = 0;
  for (const value of results) sum += value;
  if (sum !== (count * (count + 1)) / 2) throw new Error(`raw BullMQ's tiny jobs summed to ${sum}`);
  return perSecond(count, took);
}

async function rawLatencies(client: RawClient, count: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = now();
    const sum = await client.run(`raw-${++rawSeq}`, i, 1);
    latencies.push(now() - started);
    if (sum !== i + 1 && !Number.isNaN(sum)) throw new Error(`raw add(${i}, 1) gave ${sum}`);
  }
  return latencies;
}

/** Run the BullMQ workloads on Redis, then on PostgreSQL (each skipped with one line when its server is missing). */
export async function bullmqWorkloads(log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  if (spawnSync('sh', ['-c', 'command -v redis-server'], { stdio: 'ignore' }).status !== 0) {
    log('  skipped: install redis-server (apt-get install redis-server) — the BullMQ workloads on Redis did not run');
  } else {
    const port = await freePort();
    const redis = await startRedis(port);
    const url = `redis://127.0.0.1:${port}`;
    const store: Store = {
      name: 'Redis',
      tinyJobs: 20_000,
      url,
      connection: { host: '127.0.0.1', port, maxRetriesPerRequest: null },
      factory: undefined,
      eventsLose: false,
      rawWorkerArg: String(port),
      stop: () => stop([redis]),
    };
    rows.push(...(await storeWorkloads(store, log)));
  }
  const bin = postgresBin();
  if (bin === null) {
    log('  skipped: install postgresql (apt-get install postgresql) — the BullMQ workloads on PostgreSQL did not run');
  } else {
    rows.push(...(await storeWorkloads(await startPostgres(bin, await freePort()), log)));
  }
  return rows;
}

/** The workloads on one store, which is stopped at the end. */
async function storeWorkloads(store: Store, log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  const record = (row: Row): void => {
    rows.push(row);
    log(`  ${row.workload}: ${row.value.toFixed(2)} ${row.unit}${row.baseline === null ? '' : ` (baseline ${row.baseline.toFixed(2)})`}`);
  };
  // The rows on Redis keep the names they always had.
  const on = store.name === 'Redis' ? '' : ` on ${store.name}`;
  const tinyJobs = store.tinyJobs;
  const children: ChildProcess[] = [];
  const loop = newEventLoop();
  try {
    const workerArgs = ['worker', '--connection', store.url, '--queue', 'bench-multiloop', '--allow', JOBS, '--concurrency', '16'];
    children.push(...(await Promise.all([1, 2].map(() => startProcess(WORKER, workerArgs, 'serving')))));
    children.push(...(await Promise.all([1, 2].map(() => startProcess(RAW_WORKER, [store.rawWorkerArg, 'bench-raw'], 'ready')))));
    const executor = new BullMQExecutor({ connection: store.url, queue: 'bench-multiloop' });
    const raw = new RawClient(store, 'bench-raw');
    await raw.ready();
    try {
      // Warm both up: connections, imports, JIT, and the executor's measure of add.
      await executorLatencies(loop, executor, 50);
      await rawLatencies(raw, 50);
      const ours: number[] = [];
      const theirs: number[] = [];
      // Alternate, so both meet the same machine.
      await executorBurst(loop, executor, tinyJobs);
      await rawBurst(raw, tinyJobs);
      for (let run = 0; run < RUNS; run++) {
        ours.push(await executorBurst(loop, executor, tinyJobs));
        theirs.push(await rawBurst(raw, tinyJobs));
      }
      const { jobsSent, callsSent } = executor.statistics();
      log(`  (BullMQExecutor${on}: ${(callsSent / jobsSent).toFixed(1)} calls per BullMQ job on average)`);
      record({
        workload: `${tinyJobs / 1000}k tiny jobs (add) via BullMQExecutor${on}, 2 worker processes`,
        unit: 'jobs/s',
        value: median(ours),
        baseline: median(theirs),
        baselineName: `raw BullMQ${on}: Queue.add per job, 2 Worker processes of concurrency 16${store.eventsLose ? ', done when the queue holds none (no results read)' : ''}`,
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
      if (raw.missed > 0) log(`  (raw BullMQ${on}: ${raw.missed} single job(s) found done after their completion event went missing)`);
      record({
        workload: `single-job latency p50 via BullMQExecutor${on}`,
        unit: 'ms',
        value: percentile(ourLatencies, 50),
        baseline: percentile(theirLatencies, 50),
        baselineName: `raw BullMQ${on}: Queue.add, completion from QueueEvents`,
        higherIsBetter: false,
        target: 'within 1.2x raw BullMQ',
      });
      record({
        workload: `single-job latency p99 via BullMQExecutor${on}`,
        unit: 'ms',
        value: percentile(ourLatencies, 99),
        baseline: percentile(theirLatencies, 99),
        baselineName: `raw BullMQ${on}: Queue.add, completion from QueueEvents`,
        higherIsBetter: false,
      });
    } finally {
      await executor.shutdown();
      await raw.close();
    }
  } finally {
    loop.close();
    await stop(children);
    await store.stop();
  }
  return rows;
}
