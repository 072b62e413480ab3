/**
 * BullMQExecutor and serveBullMQ on PostgreSQL (BullMQ 6's PostgreSQL backend), with a real
 * postgres and real worker processes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker, createPostgresBackend, type Job } from 'bullmq';
import { needPostgres, startPostgres, type PostgresServer } from './helpers/postgres.js';
import { until } from './helpers/redis.js';

const hasPostgres = needPostgres('the distributed (BullMQ) PostgreSQL tests');

describe.runIf(hasPostgres)('BullMQ on PostgreSQL', () => {
  let postgres: PostgresServer;

  beforeAll(async () => {
    postgres = await startPostgres();
  }, 30_000);

  afterAll(async () => {
    await postgres?.stop();
  });

  it("runs raw BullMQ's Queue and Worker on the test server once it migrated the fresh database", async () => {
    const connection = { connectionString: postgres.url, migrate: true };
    const queue = new Queue('raw', { connection }, createPostgresBackend);
    const worker = new Worker('raw', async (job: Job) => (job.data as { x: number }).x * 2, { connection }, createPostgresBackend);
    try {
      const results = new Map<string, unknown>();
      worker.on('completed', (job: Job, value: unknown) => results.set(String(job.id), value));
      const job = await queue.add('double', { x: 21 });
      await until(() => results.has(String(job.id)), 'the job completed');
      expect(results.get(String(job.id))).toBe(42);
    } finally {
      await worker.close();
      await queue.close();
    }
  });
});
