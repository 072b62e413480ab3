/**
 * Faults of the distributed executor, with a real redis-server and real worker processes: a
 * worker SIGKILLed mid-job (BullMQ's stalled-job recovery runs the job again on another worker,
 * the calls that had finished are not run again, each future settles once), SIGTERM (running
 * calls finish, or their jobs are handed back), and Redis restarting (calls wait and resume;
 * jobs it lost are sent again) or staying away (calls fail after unreachableTimeout).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BullMQExecutor } from '../src/bullmq.js';
import type { ConcurrentFuture } from '../src/concurrent.js';
import { RuntimeError } from '../src/exceptions.js';
import { workerFn } from '../src/worker-fn.js';
import { endAll, jobsInRedis, killWorker, markerDir, type RedisServer, resultOf, runs, startRedis, startWorker, until, type WorkerProcess } from './helpers/redis.js';
import { needProgram } from './helpers/system.js';

const JOBS = './test/fixtures/bullmq-jobs.mjs';
const add = workerFn<[number, number], number>(JOBS, 'add');
const step = workerFn<[string, number, number], string>(JOBS, 'step');
const work = workerFn<[string, string, number], string>(JOBS, 'work');

const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the distributed (BullMQ) fault tests');

describe.runIf(hasRedis)('BullMQ faults', () => {
  let redis: RedisServer;
  const workers = new Set<WorkerProcess>();
  let executors: BullMQExecutor[] = [];

  /** A worker that notices a dead peer's job within about a second. */
  async function serve(queue: string, ...extra: string[]): Promise<WorkerProcess> {
    const worker = await startWorker(redis.url, ['--queue', queue, '--allow', JOBS, '--concurrency', '4', '--lock-duration', '1000', '--stalled-interval', '300', ...extra]);
    workers.add(worker);
    return worker;
  }

  function executor(queue: string, options: { unreachableTimeout?: number } = {}): BullMQExecutor {
    const made = new BullMQExecutor({ connection: redis.url, queue, ...options });
    executors.push(made);
    return made;
  }

  /** Teach `made` the run time of step(), so a burst of it travels as one BullMQ job. */
  async function warmUp(made: BullMQExecutor): Promise<void> {
    const scratch = markerDir();
    try {
      await Promise.all(Array.from({ length: 4 }, (_, i) => resultOf(made.submit(step, scratch.dir, i, -1))));
    } finally {
      scratch.remove();
    }
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

  it('runs a job again on another worker when its worker is SIGKILLed mid-job; only the calls not finished run again', async () => {
    const markers = markerDir();
    try {
      const [first, second] = await Promise.all([serve('crash'), serve('crash')]);
      const made = executor('crash');
      await warmUp(made);
      const jobsBefore = made.statistics().jobsSent;
      // Four calls in one job: the third hangs on its first run.
      const futures = [0, 1, 2, 3].map((i) => made.submit(step, markers.dir, i, 2));
      await until(() => existsSync(join(markers.dir, 'hung')), 'the third call hangs');
      expect(made.statistics().jobsSent - jobsBefore).toBe(1);
      // The two calls before it finished, and their outcomes arrived.
      const early = await Promise.all([resultOf(futures[0] as ConcurrentFuture<string>), resultOf(futures[1] as ConcurrentFuture<string>)]);
      const hungPid = Number(readFileSync(join(markers.dir, 'hung'), 'utf8'));
      expect(early).toEqual([`0 by ${hungPid}`, `1 by ${hungPid}`]);
      const [victim, survivor] = first?.pid === hungPid ? [first, second] : [second, first];
      expect(victim?.pid).toBe(hungPid);
      await killWorker(victim as WorkerProcess);

      const late = await Promise.all([resultOf(futures[2] as ConcurrentFuture<string>), resultOf(futures[3] as ConcurrentFuture<string>)]);
      expect(late).toEqual([`2 by ${survivor?.pid}`, `3 by ${survivor?.pid}`]);
      // 0 and 1 ran once; 2 ran twice (it hung, then ran again); 3 once.
      expect(runs(markers.dir)).toEqual(['0', '1', '2', '2', '3']);
      const stats = made.statistics();
      expect([stats.completed, stats.inFlight, stats.cancelled]).toEqual([8, 0, 0]);
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('settles a lone call once when its worker dies and another runs it again', async () => {
    const markers = markerDir();
    try {
      await Promise.all([serve('solo'), serve('solo')]);
      const made = executor('solo');
      const future = made.submit(step, markers.dir, 0, 0);
      await until(() => existsSync(join(markers.dir, 'hung')), 'the call hangs');
      const hungPid = Number(readFileSync(join(markers.dir, 'hung'), 'utf8'));
      const victim = [...workers].find((worker) => worker.pid === hungPid) as WorkerProcess;
      await killWorker(victim);
      const result = await resultOf(future);
      expect(result).toMatch(/^0 by \d+$/);
      expect(result).not.toBe(`0 by ${hungPid}`);
      expect(runs(markers.dir)).toEqual(['0', '0']);
      expect(made.statistics().completed).toBe(1);
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('fails the call with BullMQ\'s reason when its job lost its worker more often than maxStalledCount allows', async () => {
    const markers = markerDir();
    try {
      const [first, second] = await Promise.all([serve('poison', '--max-stalled-count', '0'), serve('poison', '--max-stalled-count', '0')]);
      const made = executor('poison');
      const future = made.submit(step, markers.dir, 0, 0);
      await until(() => existsSync(join(markers.dir, 'hung')), 'the call hangs');
      const hungPid = Number(readFileSync(join(markers.dir, 'hung'), 'utf8'));
      await killWorker((first?.pid === hungPid ? first : second) as WorkerProcess);
      const error = await resultOf(future).then(
        () => null,
        (failure: unknown) => failure as Error,
      );
      expect(error).toBeInstanceOf(RuntimeError);
      expect(error?.message).toMatch(/^BullMQ failed job [0-9a-f]+-\d+: job stalled more than allowable limit$/);
      expect(runs(markers.dir)).toEqual(['0']);
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('on SIGTERM lets a running call finish, then exits with 0', async () => {
    const markers = markerDir();
    try {
      const worker = await serve('graceful');
      const made = executor('graceful');
      const future = made.submit(work, markers.dir, 'job', 300);
      await until(() => existsSync(join(markers.dir, 'job.started')), 'the call started');
      worker.child.kill('SIGTERM');
      expect(await resultOf(future)).toBe(`job by ${worker.pid}`);
      expect(await worker.exited).toEqual({ code: 0, signal: null });
      expect(worker.output()).toContain('multiloop worker: closed\n');
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('on SIGTERM past --grace hands a running job back to the queue; another worker runs it', async () => {
    const markers = markerDir();
    try {
      const leaving = await serve('handback', '--grace', '0');
      const made = executor('handback');
      const future = made.submit(step, markers.dir, 0, 0);
      await until(() => existsSync(join(markers.dir, 'hung')), 'the call hangs');
      leaving.child.kill('SIGTERM');
      expect(await leaving.exited).toEqual({ code: 0, signal: null });
      const staying = await serve('handback');
      expect(await resultOf(future)).toBe(`0 by ${staying.pid}`);
      expect(runs(markers.dir)).toEqual(['0', '0']);
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('waits through a Redis restart: calls sent before it (lost with its data) and during it all settle', async () => {
    const made = executor('restart', { unreachableTimeout: 30 });
    // No worker yet: these wait in Redis, which loses them when it restarts without persistence.
    const before = Array.from({ length: 5 }, (_, i) => made.submit(add, i, 100));
    await until(() => jobsInRedis(redis.port, 'restart').length === 5, 'the calls are in Redis');
    await redis.kill();
    const during = Array.from({ length: 5 }, (_, i) => made.submit(add, i, 200));
    await redis.start();
    await serve('restart');
    expect(await Promise.all([...before, ...during].map(resultOf))).toEqual([100, 101, 102, 103, 104, 200, 201, 202, 203, 204]);
    expect(made.statistics().resent).toBe(5);
    expect(await resultOf(made.submit(add, 1, 1))).toBe(2);
  }, 30_000);

  it('fails the calls after unreachableTimeout while Redis stays away, and works again once it is back', async () => {
    await serve('away');
    const made = executor('away', { unreachableTimeout: 1 });
    expect(await resultOf(made.submit(add, 1, 2))).toBe(3);
    await redis.kill();
    const stranded = made.submit(add, 3, 4);
    const error = await resultOf(stranded).then(
      () => null,
      (failure: unknown) => failure as Error,
    );
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error?.message).toMatch(new RegExp(`^Redis at 127\\.0\\.0\\.1:${redis.port} has been unreachable for 1 s \\(options\\.unreachableTimeout\\)`));
    await redis.start();
    await until(async () => {
      const outcome = await resultOf(made.submit(add, 5, 6)).then(
        (value) => value,
        () => null,
      );
      return outcome === 11;
    }, 'the executor works again');
  }, 30_000);
});
