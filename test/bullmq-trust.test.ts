/**
 * What the distributed executor does with what it cannot trust, with a real redis-server and
 * real worker processes: entries forged on an executor's outcome stream, Redis frozen longer
 * than a job's lock, jobs too large, and Redis gone while a worker is asked to stop.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ExceptionContext } from '../src/base-events.js';
import { BullMQExecutor } from '../src/bullmq.js';
import type { Coroutine } from '../src/coroutines.js';
import { newEventLoop } from '../src/events.js';
import { RuntimeError } from '../src/exceptions.js';
import { sleep } from '../src/tasks.js';
import { workerFn } from '../src/worker-fn.js';
import { endAll, jobsInRedis, killWorker, markerDir, redisCli, type RedisServer, resultOf, ROOT, runs, startRedis, startWorker, until, workersUntilSettled, type WorkerProcess } from './helpers/redis.js';
import { needProgram } from './helpers/system.js';

const JOBS = './test/fixtures/bullmq-jobs.mjs';
const add = workerFn<[number, number], number>(JOBS, 'add');
const work = workerFn<[string, string, number], string>(JOBS, 'work');
const echo = workerFn<[unknown], unknown>(JOBS, 'echo');
const tally = workerFn<[string, number], number>(JOBS, 'tally');

const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the distributed (BullMQ) trust tests');

describe.runIf(hasRedis)('BullMQ: what crosses Redis is checked', () => {
  let redis: RedisServer;
  const workers = new Set<WorkerProcess>();
  let executors: BullMQExecutor[] = [];

  async function serve(queue: string, ...extra: string[]): Promise<WorkerProcess> {
    const worker = await startWorker(redis.url, ['--queue', queue, '--allow', JOBS, '--concurrency', '4', ...extra]);
    workers.add(worker);
    return worker;
  }

  function executor(queue: string, options: Record<string, unknown> = {}): BullMQExecutor {
    const made = new BullMQExecutor({ connection: redis.url, queue, ...options });
    executors.push(made);
    return made;
  }

  beforeAll(async () => {
    redis = await startRedis();
  });

  afterEach(async () => {
    await endAll(executors, workers);
    executors = [];
  });

  afterAll(async () => {
    await redis?.kill();
  });

  it("drops a forged outcome entry naming no call of its job, telling the loop's exception handler; real calls still complete", async () => {
    const markers = markerDir();
    const loop = newEventLoop();
    const heard: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => heard.push(context));
    try {
      await serve('forged');
      const made = executor('forged');
      function* main(): Coroutine<unknown[]> {
        expect(yield* loop.runInExecutor(made, add, 1, 2)).toBe(3);
        // A job in flight (the executor's second): the forged entry names it.
        const slow = loop.runInExecutor(made, work, markers.dir, 'slow', 1500);
        while (!existsSync(join(markers.dir, 'slow.started'))) yield* sleep(0.02);
        const [stream] = redisCli(redis.port, 'KEYS', 'bull:forged:ml-out:*').split('\n') as [string];
        const executorId = stream.slice('bull:forged:ml-out:'.length);
        redisCli(redis.port, 'XADD', stream, '*', 'd', JSON.stringify([`${executorId}-2`, 'constructor', 0, null, 0]));
        while (heard.length === 0) yield* sleep(0.02);
        return [executorId, yield* slow, yield* loop.runInExecutor(made, add, 20, 22)];
      }
      const [executorId, slow, sum] = await loop.runUntilComplete(main());
      expect(slow).toBe(`slow by ${readFileSync(join(markers.dir, 'slow.started'), 'utf8')}`);
      expect(sum).toBe(42);
      expect(heard).toHaveLength(1);
      expect(heard[0]?.message).toMatch(
        new RegExp(`^BullMQExecutor: outcome entry \\d+-\\d+ on bull:forged:ml-out:${executorId as string} was dropped: call index 'constructor' is not one of job ${executorId as string}-2's 1 call\\(s\\)$`),
      );
      expect(heard[0]?.exception).toBeInstanceOf(TypeError);
      expect(made.statistics().completed).toBe(3);
    } finally {
      loop.close();
      markers.remove();
    }
  }, 30_000);

  it('never runs a lone call again once its outcome went out, when Redis froze longer than its lock', async () => {
    const markers = markerDir();
    try {
      await serve('frozen', '--lock-duration', '1000', '--stalled-interval', '300');
      const made = executor('frozen');
      const future = made.submit(tally, markers.dir, 400);
      await until(() => runs(markers.dir).length === 1, 'the call runs');
      redis.freeze();
      try {
        // The call ends and its outcome waits for Redis; the job's lock expires meanwhile.
        await new Promise((resolve) => setTimeout(resolve, 2500));
      } finally {
        redis.thaw();
      }
      expect(await resultOf(future)).toBe(1);
      // The job is over once it left Redis: taken again after its lock expired, it ran nothing.
      await until(() => jobsInRedis(redis.port, 'frozen').length === 0, 'the job is completed');
      expect(await resultOf(made.submit(add, 1, 1))).toBe(2);
      expect(runs(markers.dir)).toHaveLength(1);
      expect(redisCli(redis.port, 'KEYS', 'bull:frozen:*:ml-*')).toBe('');
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('fails a call whose job would pass maxJobBytes with a RangeError naming both sizes, sending nothing', async () => {
    const made = executor('sizes', { maxJobBytes: 1 << 20 });
    const error = await resultOf(made.submit(echo, new Uint8Array(1 << 20))).then(() => null, (failure: unknown) => failure as Error);
    expect(error).toBeInstanceOf(RangeError);
    const [, bytes] = /^cannot send echo of \.\/test\/fixtures\/bullmq-jobs\.mjs to a BullMQ worker: its job would take (\d+) bytes, more than options\.maxJobBytes \(1048576\)$/.exec(error?.message ?? '') ?? [];
    expect(Number(bytes)).toBeGreaterThan(1 << 20);
    // The default: 16 MiB.
    const big = await resultOf(executor('sizes').submit(echo, new Uint8Array(13 << 20))).then(() => null, (failure: unknown) => failure as Error);
    expect(big?.message).toMatch(/ bytes, more than options\.maxJobBytes \(16777216\)$/);
    expect(made.statistics().jobsSent).toBe(0);
    expect(jobsInRedis(redis.port, 'sizes')).toEqual([]);
  }, 30_000);

  it("refuses a job past the worker's --max-job-bytes without decoding it, and caps the bytes of a job's outcomes", async () => {
    await serve('limits', '--max-job-bytes', '65536', '--max-outcome-bytes', '4096');
    const made = executor('limits');
    const refused = await resultOf(made.submit(echo, new Uint8Array(100_000))).then(() => null, (failure: unknown) => failure as Error);
    expect(refused).toBeInstanceOf(RangeError);
    expect(refused?.message).toMatch(/^job [0-9a-f]+-1 takes \d+ bytes, more than this worker's maxJobBytes \(65536\): it was not decoded$/);
    const capped = await resultOf(made.submit(echo, 'x'.repeat(10_000))).then(() => null, (failure: unknown) => failure as Error);
    expect(capped).toBeInstanceOf(RuntimeError);
    expect(capped?.message).toMatch(
      /^the outcome of echo of \.\/test\/fixtures\/bullmq-jobs\.mjs was not sent back: the outcomes of job [0-9a-f]+-2 would take more than 4096 bytes \(the worker's maxOutcomeBytes\)$/,
    );
    expect(await resultOf(made.submit(echo, 'x'.repeat(1000)))).toBe('x'.repeat(1000));
  }, 30_000);

  it('ends a worker on SIGTERM after --grace when Redis is gone, a call still running; the executor shuts down too', async () => {
    const markers = markerDir();
    try {
      const worker = await serve('gone', '--grace', '1');
      const made = executor('gone', { unreachableTimeout: 1 });
      const stuck = made.submit(work, markers.dir, 'stuck', 20_000);
      await until(() => existsSync(join(markers.dir, 'stuck.started')), 'the call runs');
      await redis.kill();
      try {
        worker.child.kill('SIGTERM');
        expect(await worker.exited).toEqual({ code: 0, signal: null });
        expect(worker.output()).toContain('multiloop worker: closed\n');
        // The executor, too, shuts down without Redis: the started call is not cancelled, it
        // fails once Redis has been away for unreachableTimeout.
        await made.shutdown(true, { cancelFutures: true });
        expect(stuck.cancelled()).toBe(false);
        expect(stuck.exception()).toBeInstanceOf(RuntimeError);
      } finally {
        await redis.start();
      }
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('takes the connection URL from an environment variable or a file, so no password is in its command line', async () => {
    const locked = await startRedis();
    const markers = markerDir();
    try {
      redisCli(locked.port, 'CONFIG', 'SET', 'requirepass', 'hunter2');
      const url = `redis://:hunter2@127.0.0.1:${locked.port}`;
      const file = join(markers.dir, 'connection');
      writeFileSync(file, `${url}\n`, { mode: 0o600 });
      const started = await Promise.all([
        startWorker(null, ['--queue', 'locked', '--allow', JOBS, '--connection-env', 'QUEUE_URL'], { QUEUE_URL: url }),
        startWorker(null, ['--queue', 'locked', '--allow', JOBS, '--connection-file', file]),
        startWorker(null, ['--queue', 'locked', '--allow', JOBS], { MULTILOOP_CONNECTION: url }),
      ]);
      for (const worker of started) workers.add(worker);
      for (const worker of started) {
        expect(readFileSync(`/proc/${worker.pid}/cmdline`, 'utf8')).not.toContain('hunter2');
        expect(worker.output()).toContain(`serving queue 'locked' on redis://127.0.0.1:${locked.port} `);
      }
      const made = new BullMQExecutor({ connection: url, queue: 'locked' });
      executors.push(made);
      const pids = await Promise.all(Array.from({ length: 12 }, () => resultOf(made.submit(workerFn<[], number>(JOBS, 'pid')))));
      expect(pids.every((pid) => started.some((worker) => worker.pid === pid))).toBe(true);
    } finally {
      markers.remove();
      await Promise.all(executors.map((made) => made.shutdown(true, { cancelFutures: true })));
      executors = [];
      await Promise.all([...workers].map(killWorker));
      workers.clear();
      await locked.kill();
    }
  }, 30_000);

  it('refuses a connection given twice, a variable not set and a file it cannot read', () => {
    const run = (...args: string[]): { status: number | null; stderr: string } =>
      spawnSync(process.execPath, [join(ROOT, 'dist/bin/multiloop.js'), 'worker', '--allow', JOBS, ...args], { encoding: 'utf8', env: { ...process.env, NOT_SET_HERE: '' } });
    const twice = run('--redis', redis.url, '--connection-env', 'X');
    expect([twice.status, twice.stderr.split('\n')[0]]).toEqual([2, 'multiloop worker: give the connection once: --connection (--redis), --connection-env or --connection-file']);
    const unset = run('--connection-env', 'NOT_SET_HERE');
    expect([unset.status, unset.stderr]).toEqual([2, 'multiloop worker: --connection-env NOT_SET_HERE: the environment variable NOT_SET_HERE is not set\n']);
    const missing = run('--connection-file', '/nonexistent/multiloop-url');
    expect([missing.status, missing.stderr]).toEqual([2, 'multiloop worker: --connection-file /nonexistent/multiloop-url: cannot read it (ENOENT)\n']);
  });

  it('fails a job whose decoding kills its workers once they died more often than maxStalledCount, naming the cause; no worker decodes it again', async () => {
    const made = executor('poison');
    // Some ten megabytes that decode into two million arrays: more than a worker of 64 MB of heap holds.
    const future = made.submit(echo, Array.from({ length: 2_000_000 }, () => []));
    const { died, error } = await workersUntilSettled(
      future,
      redis.url,
      ['--queue', 'poison', '--allow', JOBS, '--lock-duration', '1000', '--stalled-interval', '300'],
      workers,
    );
    expect(died).toHaveLength(2);
    for (const worker of died) expect(worker.output()).toMatch(/heap out of memory/i);
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error?.message).toMatch(
      /^BullMQ failed job [0-9a-f]+-1: job stalled more than allowable limit; job [0-9a-f]+-1 \(\d+ bytes\) was not decoded again: 2 worker\(s\) died while decoding it \(out of memory\?\), more than maxStalledCount \(1\) allows$/,
    );
  }, 60_000);

  it('fails a job whose JSON data kills its workers as it is parsed once they died more often than maxStalledCount; the workers after it live', async () => {
    const made = executor('flood');
    // The job waits (no worker yet) while its data is rewritten in Redis: nine megabytes of JSON
    // that parse into three million arrays, more than a worker of 64 MB of heap holds. BullMQ
    // parsed such data as it fetched the job, before it applied the failure its stalled check
    // deferred and before the decode count: every worker died, for ever.
    const future = made.submit(echo, 'small');
    await until(() => jobsInRedis(redis.port, 'flood').length === 1, 'the job waits in Redis');
    const [key] = jobsInRedis(redis.port, 'flood') as [string];
    const jobId = key.slice('bull:flood:'.length);
    const flood = `{"j":[["${JOBS}","echo"],[0],[[[${'[],'.repeat(3_000_000 - 1)}[]]]]]}`;
    execFileSync('redis-cli', ['-p', String(redis.port), '-x', 'HSET', key, 'data'], { input: flood });
    const { died, error } = await workersUntilSettled(
      future,
      redis.url,
      ['--queue', 'flood', '--allow', JOBS, '--lock-duration', '1000', '--stalled-interval', '300'],
      workers,
    );
    expect(died).toHaveLength(2);
    for (const worker of died) expect(worker.output()).toMatch(/heap out of memory/i);
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error?.message).toBe(
      `BullMQ failed job ${jobId}: job stalled more than allowable limit; job ${jobId} (${flood.length} bytes) was not decoded again: 2 worker(s) died while decoding it (out of memory?), more than maxStalledCount (1) allows`,
    );
    // The worker that failed the job serves on.
    expect(await resultOf(made.submit(add, 20, 22))).toBe(42);
    expect(jobsInRedis(redis.port, 'flood')).toEqual([]);
  }, 60_000);

  it("refuses job data in JSON past the worker's --max-job-bytes without parsing it", async () => {
    const made = executor('json-sizes');
    // Rewritten in Redis before any worker runs: the data of a job in JSON, of some 100 kB.
    const future = made.submit(echo, 'small');
    await until(() => jobsInRedis(redis.port, 'json-sizes').length === 1, 'the job waits in Redis');
    const [key] = jobsInRedis(redis.port, 'json-sizes') as [string];
    const jobId = key.slice('bull:json-sizes:'.length);
    const data = JSON.stringify({ j: [[JOBS, 'echo'], [0], [['x'.repeat(100_000)]]] });
    redisCli(redis.port, 'HSET', key, 'data', data);
    await serve('json-sizes', '--max-job-bytes', '65536');
    const refused = await resultOf(future).then(() => null, (failure: unknown) => failure as Error);
    expect(refused).toBeInstanceOf(RangeError);
    expect(refused?.message).toBe(`job ${jobId} takes ${data.length} bytes, more than this worker's maxJobBytes (65536): it was not decoded`);
  }, 30_000);
});
