/**
 * Faults of the distributed executor on PostgreSQL, with a real postgres and real worker
 * processes: the server restarting mid-burst (every call settles once, shutdown returns).
 */
import { readdirSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BullMQExecutor } from '../src/bullmq.js';
import { workerFn } from '../src/worker-fn.js';
import { needPostgres, startPostgres, type PostgresServer } from './helpers/postgres.js';
import { endAll, markerDir, resultOf, startWorker, until, type WorkerProcess } from './helpers/redis.js';

const JOBS = './test/fixtures/bullmq-jobs.mjs';
const work = workerFn<[string, string, number], string>(JOBS, 'work');

const hasPostgres = needPostgres('the distributed (BullMQ) PostgreSQL fault tests');

describe.runIf(hasPostgres)('BullMQ faults on PostgreSQL', () => {
  let postgres: PostgresServer;
  const workers = new Set<WorkerProcess>();
  let executors: BullMQExecutor[] = [];

  /** A worker with BullMQ's default lock duration: a job outlives a short outage on its worker. */
  async function serve(queue: string): Promise<WorkerProcess> {
    const worker = await startWorker(null, ['--connection', postgres.url, '--queue', queue, '--allow', JOBS, '--concurrency', '4']);
    workers.add(worker);
    return worker;
  }

  function executor(queue: string, options: Record<string, unknown> = {}): BullMQExecutor {
    const made = new BullMQExecutor({ connection: postgres.url, queue, ...options });
    executors.push(made);
    return made;
  }

  beforeAll(async () => {
    postgres = await startPostgres();
  }, 30_000);

  afterEach(async () => {
    await endAll(executors, workers);
    executors = [];
  });

  afterAll(async () => {
    await postgres?.stop();
  });

  it('settles every call of a burst once through a PostgreSQL restart mid-burst, calls that ended while it was down included, and shuts down', async () => {
    const markers = markerDir();
    try {
      await Promise.all([serve('restart'), serve('restart')]);
      const made = executor('restart', { unreachableTimeout: 120 });
      const ended = (): number => readdirSync(markers.dir).filter((name) => name.endsWith('.ended')).length;
      const futures = Array.from({ length: 400 }, (_, i) => made.submit(work, markers.dir, `call${i}`, 150));
      await until(() => made.statistics().completed >= 40, 'a tenth of the burst settled', 60_000);
      // Down for 0.6 s at least, and until a call ended after the shutdown began: its outcome is
      // written while the server is away.
      await postgres.restart(600, async () => {
        const before = ended();
        await until(() => ended() > before, 'a call ended while PostgreSQL was down');
      });
      await until(() => futures.every((future) => future.done()), 'every call settled', 90_000).catch(() => {
        throw new Error(`${futures.filter((future) => !future.done()).length} of 400 calls never settled`);
      });
      const results = await Promise.all(futures.map(resultOf));
      expect(results.map((result) => result.replace(/ by \d+$/, ''))).toEqual(Array.from({ length: 400 }, (_, i) => `call${i}`));
      expect(made.statistics()).toMatchObject({ completed: 400, inFlight: 0, queueSize: 0 });
      // The rows read are deleted by the reads after them.
      await until(async () => (await postgres.query('SELECT 1 FROM bullmq.multiloop_outcome')).length === 0, 'the rows read are deleted');
      let shutDown = false;
      await Promise.race([made.shutdown(true).then(() => (shutDown = true)), new Promise((resolve) => setTimeout(resolve, 15_000))]);
      expect(shutDown).toBe(true);
    } finally {
      markers.remove();
    }
  }, 240_000);
});
