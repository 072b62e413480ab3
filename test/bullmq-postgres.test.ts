/**
 * BullMQExecutor and serveBullMQ on PostgreSQL (BullMQ 6's PostgreSQL backend), with a real
 * postgres and real worker processes: results and packing, a job over 1 MiB, the allow list,
 * statistics, cancellation of waiting and running calls, a worker SIGKILLed mid-job, a job taken
 * again after its lone call's outcome went out, a forged outcome row (a 300 MB one too), a job whose decoding kills
 * its workers, SIGTERM with PostgreSQL gone, and
 * BullMQ's schema made on a fresh database (or not, with migrate off).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker, createPostgresBackend, type Job } from 'bullmq';
import pg from 'pg';
import type { ExceptionContext } from '../src/base-events.js';
import { BullMQExecutor, serveBullMQ } from '../src/bullmq.js';
import type { ConcurrentFuture } from '../src/concurrent.js';
import type { Coroutine } from '../src/coroutines.js';
import { newEventLoop } from '../src/events.js';
import { RuntimeError } from '../src/exceptions.js';
import { sleep } from '../src/tasks.js';
import { workerFn } from '../src/worker-fn.js';
import { OutcomeTake } from '../src/internal/bullmq/postgres-outcomes.js';
import { needPostgres, startPostgres, type PostgresServer } from './helpers/postgres.js';
import { endAll, killWorker, markerDir, resultOf, ROOT, runs, startWorker, teachBurst, until, workersUntilSettled, type WorkerProcess } from './helpers/redis.js';

const JOBS = './test/fixtures/bullmq-jobs.mjs';
const FORBIDDEN = './test/fixtures/bullmq-forbidden.mjs';
const add = workerFn<[number, number], number>(JOBS, 'add');
const echo = workerFn<[unknown], unknown>(JOBS, 'echo');
const touch = workerFn<[string, string, unknown], unknown>(JOBS, 'touch');
const step = workerFn<[string, number, number], string>(JOBS, 'step');
const work = workerFn<[string, string, number], string>(JOBS, 'work');
const tally = workerFn<[string, number], number>(JOBS, 'tally');

const hasPostgres = needPostgres('the distributed (BullMQ) PostgreSQL tests');

async function errorOf<T>(future: ConcurrentFuture<T>): Promise<Error> {
  return resultOf(future).then(
    (value) => {
      throw new Error(`expected a failure, got ${String(value)}`);
    },
    (error: unknown) => error as Error,
  );
}

describe.runIf(hasPostgres)('BullMQ on PostgreSQL', () => {
  let postgres: PostgresServer;
  const workers = new Set<WorkerProcess>();
  let executors: BullMQExecutor[] = [];

  /** A worker on `url` (the test server's database by default) that notices a dead peer's job within about a second. */
  async function serve(queue: string, extra: string[] = [], url = postgres.url): Promise<WorkerProcess> {
    const concurrency = extra.includes('--concurrency') ? [] : ['--concurrency', '4'];
    const worker = await startWorker(null, ['--connection', url, '--queue', queue, '--allow', JOBS, ...concurrency, '--lock-duration', '1000', '--stalled-interval', '300', ...extra]);
    workers.add(worker);
    return worker;
  }

  function executor(queue: string, options: Record<string, unknown> = {}): BullMQExecutor {
    const made = new BullMQExecutor({ connection: postgres.url, queue, ...options });
    executors.push(made);
    return made;
  }

  /** The ids of the BullMQ jobs of `queue` the database holds now. */
  async function jobsInPostgres(queue: string): Promise<string[]> {
    const rows = await postgres.query<{ id: string }>('SELECT id FROM bullmq.job WHERE queue = $1 ORDER BY id', [queue]);
    return rows.map((row) => row.id);
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

  it('runs calls in worker processes, packs a burst into few jobs, and counts them', async () => {
    const [first, second] = await Promise.all([serve('main'), serve('main')]);
    const made = executor('main');
    const pid = await resultOf(made.submit(workerFn<[], number>(JOBS, 'pid')));
    expect([first?.pid, second?.pid]).toContain(pid);
    const value = { bytes: new Uint8Array([1, 2, 255]), map: new Map([[1, 10n ** 30n]]), date: new Date(0), negZero: -0 };
    const back = (await resultOf(made.submit(echo, value))) as typeof value;
    expect(back.bytes).toEqual(value.bytes);
    expect(back.map).toEqual(value.map);
    expect(back.date).toEqual(value.date);
    expect(Object.is(back.negZero, -0)).toBe(true);

    // Packing follows the run time measured for add; its first run alone (the probe) may be slow
    // on a loaded machine (a Node 20 CI run sent this burst as 223 jobs). Taught, as the Redis
    // test does, until 40 calls go as one job: four times below what the bound needs.
    await teachBurst(made, () => Array.from({ length: 40 }, (_, i) => made.submit(add, i, 0)));
    const before = made.statistics();
    const results = await Promise.all(Array.from({ length: 2000 }, (_, i) => resultOf(made.submit(add, i, 1))));
    expect(results).toEqual(Array.from({ length: 2000 }, (_, i) => i + 1));
    const after = made.statistics();
    expect(after.callsSent - before.callsSent).toBe(2000);
    expect(after.jobsSent - before.jobsSent).toBeLessThanOrEqual(200);
    expect(after.completed - before.completed).toBe(2000);
    expect([after.queueSize, after.inFlight, after.cancelled, after.resent]).toEqual([0, 0, 0, 0]);
    expect(String(made)).toMatch(new RegExp(String.raw`^<BullMQExecutor queue='main' postgres=127\.0\.0\.1:\d+ queued=0 in_flight=0 completed=${after.completed}>$`));
    // The marks of completed jobs go with them.
    await until(async () => (await postgres.query('SELECT 1 FROM bullmq.multiloop_call_marks')).length === 0, 'the marks are gone');
  }, 30_000);

  it("refuses a job past the worker's --max-job-bytes without decoding it, and caps the bytes of a job's outcomes", async () => {
    await serve('limits', ['--max-job-bytes', '65536', '--max-outcome-bytes', '4096']);
    const made = executor('limits');
    const refused = await errorOf(made.submit(echo, new Uint8Array(100_000)));
    expect(refused).toBeInstanceOf(RangeError);
    expect(refused.message).toMatch(/^job [0-9a-f]+-1 takes \d+ bytes, more than this worker's maxJobBytes \(65536\): it was not decoded$/);
    const capped = await errorOf(made.submit(echo, 'x'.repeat(10_000)));
    expect(capped).toBeInstanceOf(RuntimeError);
    expect(capped.message).toMatch(
      /^the outcome of echo of \.\/test\/fixtures\/bullmq-jobs\.mjs was not sent back: the outcomes of job [0-9a-f]+-2 would take more than 4096 bytes \(the worker's maxOutcomeBytes\)$/,
    );
    expect(await resultOf(made.submit(echo, 'x'.repeat(1000)))).toBe('x'.repeat(1000));
  }, 30_000);

  it('runs a job larger than 1 MiB, counting its decode in the database until it ended', async () => {
    await serve('large');
    const made = executor('large');
    const bytes = new Uint8Array(1_200_000).fill(7);
    const back = (await resultOf(made.submit(echo, bytes))) as Uint8Array;
    expect([back.length, back[0], back[1_199_999]]).toEqual([1_200_000, 7, 7]);
    // The count went back to 0 once decoded, and the job's row went once BullMQ completed it.
    await until(async () => (await postgres.query("SELECT 1 FROM bullmq.multiloop_call_marks WHERE queue = 'large'")).length === 0, 'the marks are gone');
  });

  it('brings errors back with their class, and refuses a module not on the allow list without importing it', async () => {
    // Trust authentication takes any password: the worker's line says where it serves without it.
    const worker = await serve('errors', [], postgres.url.replace('//postgres@', '//postgres:s3cret@'));
    expect(worker.output()).toContain(`multiloop worker: serving queue 'errors' on postgres://127.0.0.1:${postgres.port}/postgres (pid ${worker.pid}`);
    expect(worker.output()).not.toContain('s3cret');
    const made = executor('errors');
    const range = (await errorOf(made.submit(workerFn<[string], never>(JOBS, 'fail'), 'range'))) as RangeError & { code: string };
    expect(range).toBeInstanceOf(RangeError);
    expect(range.message).toBe('out of range');
    expect(range.code).toBe('E_RANGE');
    const refused = await errorOf(made.submit(workerFn<[number, number], number>(FORBIDDEN, 'add'), 1, 2));
    expect(refused).toBeInstanceOf(RuntimeError);
    expect(refused.message).toBe(
      `this worker does not run add of ${FORBIDDEN}: the module '${FORBIDDEN}' is not on its allow list (serveBullMQ's allow, the worker command's --allow), so it was not imported`,
    );
  });

  it("asks a call its worker started to stop through its jobSignal(): cancel() is false, the future settles with the call's result", async () => {
    await serve('stop');
    const made = executor('stop');
    const markers = markerDir();
    try {
      const running = made.submit(workerFn<[string, number], string>(JOBS, 'waitForAbort'), markers.dir, 30);
      await until(() => running.running(), "the worker's start notice arrived");
      expect(running.cancel()).toBe(false);
      expect(await resultOf(running)).toBe('aborted');
      expect(readFileSync(join(markers.dir, 'aborted'), 'utf8')).toBe('CancelledError: the caller cancelled the job');
    } finally {
      markers.remove();
    }
  });

  it('removes a waiting call from the database when its future is cancelled, and skips a cancelled call of a job of several', async () => {
    const markers = markerDir();
    try {
      const warm = await serve('idle');
      const made = executor('idle');
      // Teach the executor touch's run time, so a burst of it travels as one job (taught on twice
      // the burst below, so that one slow run more cannot split that one).
      await teachBurst(made, () => Array.from({ length: 6 }, () => made.submit(touch, markers.dir, 'warm', 0)));
      // Outcomes arrive before BullMQ has their jobs completed: the worker goes once it did.
      await until(async () => (await jobsInPostgres('idle')).length === 0, 'the warm-up jobs are completed');
      await killWorker(warm);
      workers.delete(warm);

      const alone = made.submit(touch, markers.dir, 'alone', 1);
      await until(async () => (await jobsInPostgres('idle')).length === 1, 'the job is in the database');
      expect(alone.cancel()).toBe(true);
      await until(async () => (await jobsInPostgres('idle')).length === 0, 'the job is removed');

      // The burst must travel as one job of three calls; under load a slow run may have taught
      // the executor otherwise: then it is cancelled whole and sent again (at most 5 times).
      let burst: Array<ConcurrentFuture<unknown>> = [];
      for (let attempt = 1; ; attempt++) {
        const sentBefore = made.statistics().jobsSent;
        burst = ['first', 'second', 'third'].map((name) => made.submit(touch, markers.dir, name, name));
        const sent = (): number => made.statistics().jobsSent - sentBefore;
        await until(async () => sent() >= 1 && (await jobsInPostgres('idle')).length === sent(), 'the burst is in the database');
        // Jobs of one burst are sent together: a split shows within a moment.
        await delay(200);
        if (sent() === 1 && (await jobsInPostgres('idle')).length === 1) break;
        if (attempt === 5) throw new Error(`the burst still travelled as ${sent()} jobs after 5 attempts`);
        for (const future of burst) future.cancel();
        await until(async () => (await jobsInPostgres('idle')).length === 0, 'the split burst is removed');
      }
      const cancelledBefore = made.statistics().cancelled;
      expect(made.statistics().inFlight).toBe(3);
      expect(burst[1]?.cancel()).toBe(true);
      expect(made.statistics()).toMatchObject({ inFlight: 2, cancelled: cancelledBefore + 1 });
      await serve('idle');
      expect(await Promise.all([burst[0], burst[2]].map((future) => resultOf(future as ConcurrentFuture<unknown>)))).toEqual(['first', 'third']);
      expect(existsSync(join(markers.dir, 'alone'))).toBe(false);
      expect(existsSync(join(markers.dir, 'second'))).toBe(false);
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('with cancelFutures cancels only the calls no worker started; a started call settles with its result', async () => {
    const markers = markerDir();
    try {
      const single = await serve('one-at-a-time', ['--concurrency', '1']);
      const made = executor('one-at-a-time');
      const first = made.submit(work, markers.dir, 'first', 300);
      await until(() => first.running(), "the worker's start notice arrived");
      const second = made.submit(touch, markers.dir, 'second', 2);
      await until(async () => (await jobsInPostgres('one-at-a-time')).length === 2, 'both jobs are in the database');
      await made.shutdown(true, { cancelFutures: true });
      expect(first.result()).toBe(`first by ${single.pid}`);
      expect(second.cancelled()).toBe(true);
      expect(made.statistics()).toMatchObject({ completed: 1, cancelled: 1, inFlight: 0 });
      await until(async () => (await jobsInPostgres('one-at-a-time')).length === 0, 'the cancelled job is removed');
      expect(existsSync(join(markers.dir, 'second'))).toBe(false);
    } finally {
      markers.remove();
    }
  }, 30_000);

  it('runs a job again on another worker when its worker is SIGKILLed mid-job; only the calls not finished run again', async () => {
    const markers = markerDir();
    const scratch = markerDir();
    try {
      const [first, second] = await Promise.all([serve('crash'), serve('crash')]);
      const made = executor('crash');
      // Teach the executor step's run time, so a burst of it travels as one job (taught on twice
      // the burst below, so that one slow run more cannot split that one).
      await teachBurst(made, () => Array.from({ length: 8 }, (_, i) => made.submit(step, scratch.dir, i, -1)));
      const { jobsSent: jobsBefore, completed: completedBefore } = made.statistics();
      // Four calls in one job: the third hangs on its first run.
      const futures = [0, 1, 2, 3].map((i) => made.submit(step, markers.dir, i, 2));
      await until(() => existsSync(join(markers.dir, 'hung')), 'the third call hangs');
      expect(made.statistics().jobsSent - jobsBefore).toBe(1);
      const early = await Promise.all([resultOf(futures[0] as ConcurrentFuture<string>), resultOf(futures[1] as ConcurrentFuture<string>)]);
      const hungPid = Number(readFileSync(join(markers.dir, 'hung'), 'utf8'));
      expect(early).toEqual([`0 by ${hungPid}`, `1 by ${hungPid}`]);
      const [victim, survivor] = first?.pid === hungPid ? [first, second] : [second, first];
      await killWorker(victim as WorkerProcess);
      const late = await Promise.all([resultOf(futures[2] as ConcurrentFuture<string>), resultOf(futures[3] as ConcurrentFuture<string>)]);
      expect(late).toEqual([`2 by ${survivor?.pid}`, `3 by ${survivor?.pid}`]);
      expect(runs(markers.dir)).toEqual(['0', '1', '2', '2', '3']);
      expect(made.statistics()).toMatchObject({ completed: completedBefore + 4, inFlight: 0, cancelled: 0 });
    } finally {
      markers.remove();
      scratch.remove();
    }
  }, 30_000);

  it("never runs a lone call again once its outcome went out, when its job was taken again before BullMQ had it completed", async () => {
    const markers = markerDir();
    // BullMQ's lock on PostgreSQL expires by its workers' clocks, not the server's: frozen, the
    // server answers late queries with stale times, and the job is completed before a check sees
    // its lock expired. So the completion is held here (BullMQ's finalization lock of the queue),
    // and the worker that ran the call is frozen past its lock once its outcome went out.
    // A worker whose completion waits on that lock no longer extends its own lock either, so the
    // job is taken again every lock period until the completion goes through: the workers allow
    // that many stalls, and the check below holds from the first retake on (a loaded machine may
    // poll past the first).
    const holder = new pg.Client({ connectionString: postgres.url });
    await holder.connect();
    try {
      const lenient = ['--max-stalled-count', '1000'];
      const started = await Promise.all([serve('frozen', lenient), serve('frozen', lenient)]);
      const made = executor('frozen');
      const future = made.submit(tally, markers.dir, 500);
      await until(() => runs(markers.dir).length === 1, 'the call runs');
      // Added and running: its completion waits from now on (adding a job would wait too).
      await holder.query('BEGIN');
      await holder.query("SELECT pg_advisory_xact_lock(hashtext('bullmq:finalization'), hashtext('frozen'))");
      expect(await resultOf(future)).toBe(1);
      const ran = Number(runs(markers.dir)[0]);
      const [victim, survivor] = started[0]?.pid === ran ? started : [started[1], started[0]];
      victim?.child.kill('SIGSTOP');
      try {
        // The other worker finds the lock expired, takes the job again and has it completed.
        await until(async () => {
          const [row] = await postgres.query<{ stalled: number; waiting: number }>(
            "SELECT (SELECT stalled_count FROM bullmq.job WHERE queue = 'frozen') AS stalled, (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND NOT granted) AS waiting",
          );
          // Taken again, and a completion other than the frozen worker's waits.
          return row !== undefined && row.stalled >= 1 && row.waiting >= 2;
        }, 'the job is taken again');
        await holder.query('COMMIT');
        await until(async () => (await jobsInPostgres('frozen')).length === 0, 'the job is completed');
      } finally {
        victim?.child.kill('SIGCONT');
      }
      expect(await resultOf(made.submit(add, 1, 1))).toBe(2);
      expect(runs(markers.dir)).toEqual([String(ran)]);
      expect(survivor?.pid).not.toBe(ran);
      // Its marks go once BullMQ completed it, and the executor took every row sent to it.
      await until(
        async () =>
          (await postgres.query("SELECT 1 FROM bullmq.multiloop_call_marks WHERE queue = 'frozen' UNION ALL SELECT 1 FROM bullmq.multiloop_outcome")).length === 0,
        "the job's rows are gone",
      );
    } finally {
      await holder.end();
      markers.remove();
    }
  }, 30_000);

  it("drops a forged outcome row naming no call of its job, telling the loop's exception handler; real calls still complete", async () => {
    const markers = markerDir();
    const loop = newEventLoop();
    const heard: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => heard.push(context));
    try {
      await serve('forged');
      const made = executor('forged');
      // Once the executor's second job runs, a row naming it is forged.
      const forging = (async (): Promise<string> => {
        await until(() => existsSync(join(markers.dir, 'slow.started')), 'the slow call started');
        const [{ name: executorId }] = (await postgres.query<{ name: string }>("SELECT name FROM bullmq.job WHERE queue = 'forged'")) as [{ name: string }];
        await postgres.query("WITH o AS (INSERT INTO bullmq.multiloop_outcome (executor, data) VALUES ($1, convert_to($2, 'UTF8'))) SELECT pg_notify($3, '')", [
          executorId,
          JSON.stringify([`${executorId}-2`, 'constructor', 0, null, 0]),
          `multiloop_out_${executorId}`,
        ]);
        return executorId;
      })();
      function* main(): Coroutine<unknown[]> {
        expect(yield* loop.runInExecutor(made, add, 1, 2)).toBe(3);
        const slow = loop.runInExecutor(made, work, markers.dir, 'slow', 1500);
        while (heard.length === 0) yield* sleep(0.02);
        return [yield* slow, yield* loop.runInExecutor(made, add, 20, 22)];
      }
      const [[slow, sum], executorId] = await Promise.all([loop.runUntilComplete(main()), forging]);
      expect(slow).toBe(`slow by ${readFileSync(join(markers.dir, 'slow.started'), 'utf8')}`);
      expect(sum).toBe(42);
      expect(heard).toHaveLength(1);
      expect(heard[0]?.message).toMatch(
        new RegExp(
          `^BullMQExecutor: outcome entry \\d+ on "bullmq"\\.multiloop_outcome \\(executor ${executorId}\\) was dropped: call index 'constructor' is not one of job ${executorId}-2's 1 call\\(s\\)$`,
        ),
      );
      expect(heard[0]?.exception).toBeInstanceOf(TypeError);
      expect(made.statistics().completed).toBe(3);
    } finally {
      loop.close();
      markers.remove();
    }
  }, 30_000);

  it("fails the calls of a job named by a forged 300 MB outcome row without fetching it, naming the limit; the executor lives on", async () => {
    const markers = markerDir();
    const loop = newEventLoop();
    const heard: ExceptionContext[] = [];
    loop.setExceptionHandler((_loop, context) => heard.push(context));
    try {
      await serve('huge');
      const made = executor('huge');
      const waiting = workerFn<[string, number], string>(JOBS, 'waitForAbort');
      function* main(): Coroutine<Error> {
        expect(yield* loop.runInExecutor(made, add, 1, 2)).toBe(3);
        // Runs until the test's end: only the forged row can settle it.
        const slow = loop.runInExecutor(made, waiting, markers.dir, 30);
        try {
          yield* slow;
        } catch (error) {
          return error as Error;
        }
        throw new Error('expected a failure');
      }
      const forging = (async (): Promise<[string, string]> => {
        await until(() => existsSync(join(markers.dir, 'started')), 'the slow call started');
        const [{ name: executorId }] = (await postgres.query<{ name: string }>("SELECT name FROM bullmq.job WHERE queue = 'huge'")) as [{ name: string }];
        // 300 MB: its hex text would be longer than a string of V8 may be.
        const [{ id }] = (await postgres.query<{ id: string }>(
          "WITH o AS (INSERT INTO bullmq.multiloop_outcome (executor, data) SELECT $1, convert_to($2 || repeat('0', 300000000 - length($2)), 'UTF8') RETURNING id) " +
            "SELECT id, pg_notify($3, '') FROM o",
          [executorId, `["${executorId}-2",0,0,"`, `multiloop_out_${executorId}`],
        )) as [{ id: string }];
        return [executorId, id];
      })();
      const [error, [executorId, id]] = await Promise.all([loop.runUntilComplete(main()), forging]);
      const where = `outcome entry ${id} on "bullmq".multiloop_outcome \\(executor ${executorId}\\)`;
      expect(error).toBeInstanceOf(RuntimeError);
      expect(error.message).toMatch(
        new RegExp(`^the outcome of waitForAbort of \\./test/fixtures/bullmq-jobs\\.mjs cannot be read: ${where}, of its job ${executorId}-2, is 300000000 bytes, more than the 67108864 an entry may take$`),
      );
      expect(heard).toHaveLength(1);
      expect(heard[0]?.message).toMatch(new RegExp(`^BullMQExecutor: ${where} was dropped: the entry is 300000000 bytes, more than the 67108864 an entry may take: it was not read$`));
      expect(heard[0]?.exception).toBeInstanceOf(RangeError);
      expect(await resultOf(made.submit(add, 20, 22))).toBe(42);
      await until(async () => (await postgres.query('SELECT 1 FROM bullmq.multiloop_outcome WHERE octet_length(data) = 300000000')).length === 0, 'the forged row is deleted');
    } finally {
      loop.close();
      markers.remove();
    }
  }, 60_000);

  it('reads outcome rows in order, about 16 MiB of them a read, never fetching one larger than an entry may be; deletes them by id in the next read', async () => {
    await postgres.query('CREATE SCHEMA IF NOT EXISTS takes; CREATE TABLE takes.outcome (id bigserial PRIMARY KEY, executor text NOT NULL, notice text, data bytea)');
    const mib = 1024 * 1024;
    for (const [notice, bytes] of [[null, 10 * mib], ['job-1', 0], [null, 10 * mib], [null, 70 * mib], [null, 10 * mib]] as const) {
      await postgres.query("INSERT INTO takes.outcome (executor, notice, data) VALUES ('e', $1, CASE WHEN $2::int > 0 THEN convert_to(repeat('x', $2::int), 'UTF8') END)", [notice, bytes]);
    }
    const take = new OutcomeTake('takes.outcome', 'e');
    const query = <T>(sql: string, values: unknown[]): Promise<T[]> => postgres.query<T>(sql, values);
    const seen: string[] = [];
    const sink = {
      outcome: (id: string, entry: Buffer) => seen.push(`${id}: ${entry.length}`),
      started: (jobId: string) => seen.push(`started ${jobId}`),
      oversized: (id: string, bytes: number, head: Buffer) => seen.push(`${id}: ${bytes} not read, ${head.length} read`),
    };
    // 10 MiB, a notice, 10 MiB (begun under 16 MiB), then the 70 MiB row (not fetched); the last
    // 10 MiB begins past 16 MiB: the next read takes it.
    expect(await take.take(query, sink)).toBe(4);
    expect(seen.splice(0)).toEqual([`1: ${10 * mib}`, 'started job-1', `3: ${10 * mib}`, `4: ${70 * mib} not read, 64 read`]);
    expect(await take.take(query, sink)).toBe(1);
    expect(seen.splice(0)).toEqual([`5: ${10 * mib}`]);
    expect((await postgres.query<{ id: string }>('SELECT id FROM takes.outcome ORDER BY id')).map((row) => row.id)).toEqual(['5']);
    expect(await take.take(query, sink)).toBe(0);
    expect(await postgres.query('SELECT id FROM takes.outcome')).toEqual([]);
  });

  it('fails a job whose decoding kills its workers once they died more often than maxStalledCount, naming the cause; no worker decodes it again', async () => {
    const made = executor('poison');
    // Some six megabytes that decode into a million and a half objects, more than a worker of 64 MB
    // of heap holds. (Two million arrays, as on Redis, take ten: a worker may then die fetching
    // the job's row, before it counted its decode.)
    const future = made.submit(echo, Array.from({ length: 1_500_000 }, () => ({})));
    const { died, error } = await workersUntilSettled(
      future,
      null,
      ['--connection', postgres.url, '--queue', 'poison', '--allow', JOBS, '--lock-duration', '1000', '--stalled-interval', '300'],
      workers,
    );
    expect(died).toHaveLength(2);
    for (const worker of died) expect(worker.output()).toMatch(/heap out of memory/i);
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error?.message).toMatch(
      /^BullMQ failed job [0-9a-f]+-1: job stalled more than allowable limit; job [0-9a-f]+-1 \(\d+ bytes\) was not decoded again: 2 worker\(s\) died while decoding it \(out of memory\?\), more than maxStalledCount \(1\) allows$/,
    );
  }, 60_000);

  it('makes BullMQ\'s schema and its own tables on a fresh database; with migrate off, a fresh database fails the executor and the worker, saying why', async () => {
    await postgres.query('CREATE DATABASE fresh');
    const fresh = postgres.url.replace(/\/postgres$/, '/fresh');
    const refusing = executor('fresh', { connection: fresh, migrate: false });
    const error = await errorOf(refusing.submit(add, 1, 2));
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toMatch(
      /^cannot use the BullMQ queue on PostgreSQL at 127\.0\.0\.1:\d+: the database has no BullMQ schema 'bullmq' and options\.migrate is false: run BullMQ's migrations \(runMigrations\), or leave migrate on once$/,
    );
    await expect(startWorker(null, ['--connection', fresh, '--no-migrate', '--queue', 'fresh', '--allow', JOBS])).rejects.toThrow(
      /the worker exited before serving:\nmultiloop worker: cannot start: the database has no BullMQ schema 'bullmq' and options\.migrate is false/,
    );

    // BullMQ's schema alone (migrated by BullMQ itself) is not enough: multiloop's tables are named.
    const bullmqOnly = new Queue('fresh', { connection: { connectionString: fresh, migrate: true } }, createPostgresBackend);
    await bullmqOnly.waitUntilReady();
    await bullmqOnly.close();
    const stillRefusing = executor('fresh', { connection: fresh, migrate: false });
    const missing = await errorOf(stillRefusing.submit(add, 1, 2));
    expect(missing.message).toMatch(
      /^cannot use the BullMQ queue on PostgreSQL at 127\.0\.0\.1:\d+: the database has no multiloop tables \(multiloop_outcome, multiloop_call_marks\) in schema 'bullmq' and options\.migrate is false: let an executor or a worker with migrate on make them once, or make them as the README \(Scaling out\) shows$/,
    );

    await serve('fresh', [], fresh);
    const made = executor('fresh', { connection: fresh });
    expect(await resultOf(made.submit(add, 40, 2))).toBe(42);
    const tables = await postgres.query<{ name: string }>(
      "SELECT to_regclass('bullmq.multiloop_outcome')::text AS name UNION ALL SELECT to_regclass('bullmq.multiloop_call_marks')::text",
      [],
      'fresh',
    );
    expect(tables.map((row) => row.name)).toEqual(['bullmq.multiloop_outcome', 'bullmq.multiloop_call_marks']);
  }, 30_000);

  it('ends a worker on SIGTERM after --grace when PostgreSQL is gone', async () => {
    const doomed = await startPostgres();
    try {
      const worker = await serve('gone', ['--grace', '1'], doomed.url);
      await doomed.stop();
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toEqual({ code: 0, signal: null });
      expect(worker.output()).toMatch(/multiloop worker: closed\n$/);
    } finally {
      await doomed.stop();
    }
  }, 30_000);

  it('serves in this process with a { postgres: config } connection and a schema of its own', async () => {
    const connection = { postgres: { host: '127.0.0.1', port: postgres.port, user: 'postgres', database: 'postgres', schema: 'jobs' } };
    const worker = await serveBullMQ({ connection, queue: 'inproc', allow: [JOBS], root: ROOT, handleSignals: false });
    try {
      const made = executor('inproc', { connection });
      expect(await resultOf(made.submit(workerFn<[], number>(JOBS, 'pid')))).toBe(process.pid);
      expect(String(made)).toMatch(/ postgres=127\.0\.0\.1:\d+ /);
      expect(await postgres.query("SELECT 1 FROM pg_tables WHERE schemaname = 'jobs' AND tablename = 'multiloop_call_marks'")).toHaveLength(1);
    } finally {
      await worker.close();
    }
  });
});

describe('BullMQ on PostgreSQL: bad input', () => {
  it('refuses connections that cannot work, naming them without a password', () => {
    expect(() => new BullMQExecutor({ connection: { postgres: 5 } as never })).toThrow(
      new TypeError('BullMQExecutor: options.connection.postgres must be an object of node-postgres pool options, got 5'),
    );
    expect(() => new BullMQExecutor({ connection: { postgres: { schema: 'a;drop' } } })).toThrow(
      new TypeError("BullMQExecutor: options.connection.postgres.schema must be a plain identifier (letters, digits, _ and $, at most 63), got 'a;drop'"),
    );
    expect(() => new BullMQExecutor({ connection: 'postgres://u:s3cret@x', migrate: 'no' as never })).toThrow(new TypeError("BullMQExecutor: options.migrate must be a boolean, got 'no'"));
    const made = new BullMQExecutor({ connection: 'postgres://user:s3cret@127.0.0.1:1/db', unreachableTimeout: 1 });
    try {
      expect(String(made)).toBe("<BullMQExecutor queue='multiloop' postgres=127.0.0.1:1 queued=0 in_flight=0 completed=0>");
    } finally {
      void made.shutdown(false);
    }
  });
});
