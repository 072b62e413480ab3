/**
 * BullMQExecutor and serveBullMQ with a real redis-server and real worker processes: results
 * and errors with fidelity, packing, the allow list, cancellation of waiting and running calls,
 * retries, shutdown, and bad input. Faults (a worker killed, Redis restarting) are in
 * bullmq-faults.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BullMQExecutor, serveBullMQ } from '../src/bullmq.js';
import type { ConcurrentFuture } from '../src/concurrent.js';
import type { Coroutine } from '../src/coroutines.js';
import { newEventLoop } from '../src/events.js';
import { ps } from '../src/ps.js';
import { RuntimeError } from '../src/exceptions.js';
import { sleep } from '../src/tasks.js';
import { decodeOutcomes, decodeRequest, encodeOutcomes, encodeRequest, jsonExact, type JobRequest } from '../src/internal/bullmq/wire.js';
import { registerClass } from '../src/transfer.js';
import { workerFn } from '../src/worker-fn.js';
import { Point, QuotaError } from './fixtures/geometry.mjs';
import { ROOT, endAll, jobsInRedis, killWorker, markerDir, startRedis, startWorker, teachBurst, until, type RedisServer, type WorkerProcess } from './helpers/redis.js';
import { needProgram } from './helpers/system.js';

registerClass(Point);
registerClass(QuotaError);

const JOBS = './test/fixtures/bullmq-jobs.mjs';
const FORBIDDEN = './test/fixtures/bullmq-forbidden.mjs';
const add = workerFn<[number, number], number>(JOBS, 'add');
const echo = workerFn<[unknown], unknown>(JOBS, 'echo');
const touch = workerFn<[string, string, unknown], unknown>(JOBS, 'touch');

const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the distributed (BullMQ) tests');

/** How a future ended: its value, or its error. */
type Outcome<T> = { value: T } | { error: Error };

function outcomeOf<T>(future: ConcurrentFuture<T>): Promise<Outcome<T>> {
  return new Promise((resolve) =>
    future.addDoneCallback((done) => {
      if (done.cancelled()) resolve({ error: new Error('cancelled') });
      const error = done.exception();
      resolve(error === null ? { value: done.result() } : { error });
    }),
  );
}

async function resultOf<T>(future: ConcurrentFuture<T>): Promise<T> {
  const outcome = await outcomeOf(future);
  if ('error' in outcome) throw outcome.error;
  return outcome.value;
}

async function errorOf<T>(future: ConcurrentFuture<T>): Promise<Error> {
  const outcome = await outcomeOf(future);
  if ('value' in outcome) throw new Error(`expected a failure, got ${String(outcome.value)}`);
  return outcome.error;
}

describe.runIf(hasRedis)('BullMQExecutor with real workers', () => {
  let redis: RedisServer;
  let workers: WorkerProcess[] = [];
  let executors: BullMQExecutor[] = [];
  const forbidden = markerDir();
  const forbiddenMarker = join(forbidden.dir, 'imported');

  function executor(options: Partial<ConstructorParameters<typeof BullMQExecutor>[0]> = {}): BullMQExecutor {
    const made = new BullMQExecutor({ connection: redis.url, queue: 'main', ...options });
    executors.push(made);
    return made;
  }

  function serve(queue: string): Promise<WorkerProcess> {
    return startWorker(redis.url, ['--queue', queue, '--allow', `${JOBS},os`, '--concurrency', '4'], { MULTILOOP_FORBIDDEN_MARKER: forbiddenMarker });
  }

  beforeAll(async () => {
    redis = await startRedis();
    workers = await Promise.all([serve('main'), serve('main')]);
  }, 30_000);

  afterEach(async () => {
    // The suite's workers live across its tests (beforeAll); a test's own ones are ended by it.
    await endAll(executors, new Set());
    executors = [];
  });

  afterAll(async () => {
    await Promise.all(workers.map(killWorker));
    await redis?.kill();
    forbidden.remove();
  });

  describe('results', () => {
    it('runs a call in a worker process and gives its result', async () => {
      const made = executor();
      const workerPid = await resultOf(made.submit(workerFn<[], number>(JOBS, 'pid')));
      expect(workers.map((worker) => worker.pid)).toContain(workerPid);
      expect(await resultOf(made.submit(add, 40, 2))).toBe(42);
    });

    it('runs through loop.runInExecutor with a module specifier the workers resolve', async () => {
      const made = executor();
      const loop = newEventLoop();
      try {
        function* main(): Coroutine<number> {
          return yield* loop.runInExecutor(made, add, 1, 2);
        }
        expect(await loop.runUntilComplete(main())).toBe(3);
        // The local pool cannot resolve a specifier: it says who can.
        expect(() => loop.runInExecutor(null, add, 1, 2)).toThrow(/a module specifier is for a BullMQExecutor/);
      } finally {
        loop.close();
      }
    });

    it('carries arguments and results with structured-clone fidelity', async () => {
      const made = executor();
      const value = {
        bytes: new Uint8Array([1, 2, 255]),
        ints: new Int32Array([-1, 2 ** 30]),
        map: new Map<unknown, unknown>([[1, 'one'], ['big', 10n ** 30n]]),
        set: new Set([1, 'two']),
        date: new Date(Date.UTC(2020, 5, 6)),
        big: -(2n ** 64n),
        shared: null as unknown,
        point: new Point(1, 2),
      };
      value.shared = value.map;
      const back = (await resultOf(made.submit(echo, value))) as typeof value;
      expect(back.bytes).toEqual(new Uint8Array([1, 2, 255]));
      expect(back.ints).toBeInstanceOf(Int32Array);
      expect(back.map).toEqual(value.map);
      expect(back.set).toEqual(value.set);
      expect(back.date).toEqual(value.date);
      expect(back.big).toBe(-(2n ** 64n));
      expect(back.shared).toBe(back.map);
      expect(back.point).toBeInstanceOf(Point);
      expect(back.point.norm()).toBeCloseTo(Math.hypot(1, 2));

      const kinds = (await resultOf(made.submit(workerFn<[], Record<string, unknown>>(JOBS, 'kinds')))) as Record<string, unknown>;
      expect(kinds.bytes).toEqual(new Uint8Array([1, 2, 3]));
      expect(kinds.floats).toEqual(new Float64Array([0.5, -1]));
      expect(kinds.map).toEqual(new Map([['a', 1n]]));
      expect(kinds.set).toEqual(new Set(['x', 2]));
      expect(kinds.date).toEqual(new Date(Date.UTC(2024, 0, 2)));
      expect(kinds.big).toBe(2n ** 70n);
      expect(kinds.nested).toEqual({ list: [null, undefined, -0, NaN] });
      expect(kinds.point).toBeInstanceOf(Point);
    });

    it('carries Node Buffers as Buffers, both ways, wherever they sit in a value', async () => {
      const made = executor();
      const small = Buffer.from('hello');
      const back = (await resultOf(made.submit(echo, { small, list: [small, Buffer.alloc(3, 7)] }))) as { small: Buffer; list: Buffer[] };
      expect(Buffer.isBuffer(back.small)).toBe(true);
      expect(back.small.toString()).toBe('hello');
      expect(back.list[0]).toBe(back.small);
      expect(Buffer.isBuffer(back.list[1])).toBe(true);
      expect([...back.list[1]!]).toEqual([7, 7, 7]);
    });

    it('gives back exactly the primitives and arrays JSON would change (-0, NaN, holes, undefined, lone surrogates)', async () => {
      const made = executor();
      const sparse = [1, 2, 3];
      delete sparse[1];
      const tagged = Object.assign([1, 2], { tag: 'x' });
      const [negZero, nan, hole, nothing, surrogate, plain, withTag] = await Promise.all([
        resultOf(made.submit(echo, -0)),
        resultOf(made.submit(echo, NaN)),
        resultOf(made.submit(echo, sparse)),
        resultOf(made.submit(echo, undefined)),
        resultOf(made.submit(echo, 'a\ud800b')),
        resultOf(made.submit(echo, [1, 'two', [true, null], 2.5e-300])),
        resultOf(made.submit(echo, tagged)),
      ]);
      expect(Object.is(negZero, -0)).toBe(true);
      expect(nan).toBeNaN();
      expect(1 in (hole as unknown[])).toBe(false);
      expect((hole as unknown[]).length).toBe(3);
      expect(nothing).toBeUndefined();
      expect(surrogate).toBe('a\ud800b');
      expect(plain).toEqual([1, 'two', [true, null], 2.5e-300]);
      expect((withTag as { tag?: string }).tag).toBe('x');
    });

    it('runs async functions and coroutine functions (in a loop of the worker)', async () => {
      const made = executor();
      expect(await resultOf(made.submit(workerFn<[number, number, number], number>(JOBS, 'slowAdd'), 2, 3, 10))).toBe(5);
      expect(await resultOf(made.submit(workerFn<[number, number], number>(JOBS, 'coroutineAdd'), 4, 5))).toBe(9);
    });

    it('packs a burst of calls into few BullMQ jobs, each call settling with its own result', async () => {
      const made = executor();
      // Packing follows the run time the executor measured. One warm-up call (its probe, which
      // a loaded machine can make slow) was not enough: under a load average of 13 the burst went
      // as 1,000 jobs. Taught until 40 calls go as one job: an estimate four times below what 10
      // calls a job (the bound below) need, so that a slow run or two more cannot split the burst further.
      await teachBurst(made, () => Array.from({ length: 40 }, (_, i) => made.submit(add, i, 0)));
      const before = made.statistics();
      const futures = Array.from({ length: 3000 }, (_, i) => made.submit(add, i, 1));
      const results = await Promise.all(futures.map(resultOf));
      expect(results).toEqual(Array.from({ length: 3000 }, (_, i) => i + 1));
      const after = made.statistics();
      expect(after.callsSent - before.callsSent).toBe(3000);
      expect(after.jobsSent - before.jobsSent).toBeLessThanOrEqual(300);
      expect(after.completed - before.completed).toBe(3000);
      expect(after.inFlight).toBe(0);
    });

    it('splits a burst of large arguments into jobs of about 1 MiB', async () => {
      const made = executor();
      await resultOf(made.submit(echo, 0));
      const before = made.statistics().jobsSent;
      const buffers = Array.from({ length: 6 }, (_, i) => new Uint8Array(300_000).fill(i));
      const back = (await Promise.all(buffers.map((bytes) => resultOf(made.submit(echo, bytes))))) as Uint8Array[];
      expect(back.map((bytes) => [bytes.length, bytes[299_999]])).toEqual(buffers.map((bytes, i) => [300_000, i]));
      const jobs = made.statistics().jobsSent - before;
      expect(jobs).toBeGreaterThanOrEqual(3);
      expect(jobs).toBeLessThanOrEqual(6);
    });

    it('resolves a package name on the allow list', async () => {
      const made = executor();
      expect(await resultOf(made.submit(workerFn<[], string>('os', 'hostname')))).toBe(hostname());
    });
  });

  describe('errors', () => {
    it('brings a thrown error back with its class, message, stack, cause and own properties', async () => {
      const made = executor();
      const fail = workerFn<[string], never>(JOBS, 'fail');
      const range = (await errorOf(made.submit(fail, 'range'))) as RangeError & { code: string; detail: unknown };
      expect(range).toBeInstanceOf(RangeError);
      expect(range.message).toBe('out of range');
      expect(range.stack).toContain('bullmq-jobs.mjs');
      expect(range.cause).toBeInstanceOf(TypeError);
      expect((range.cause as Error).message).toBe('the cause');
      expect(range.code).toBe('E_RANGE');
      expect(range.detail).toEqual({ limit: 10n, at: new Date(0) });

      const quota = (await errorOf(made.submit(fail, 'quota'))) as QuotaError;
      expect(quota).toBeInstanceOf(QuotaError);
      expect(quota.advice()).toBe('stay under 7');

      const rejected = await errorOf(made.submit(fail, 'async'));
      expect(rejected).toBeInstanceOf(SyntaxError);
      expect(rejected.message).toBe('rejected');
    });

    it('fails only the call whose argument cannot be serialized, naming its type; its burst goes on', async () => {
      const made = executor();
      await resultOf(made.submit(echo, 0));
      class Widget {
        spin(): number {
          return 1;
        }
      }
      const futures = [
        made.submit(add, 1, 2),
        made.submit(echo, { nested: [() => 1] }),
        made.submit(echo, new Widget()),
        made.submit(echo, Symbol('s')),
        made.submit(add, 3, 4),
      ] as Array<ConcurrentFuture<unknown>>;
      const outcomes = await Promise.all(futures.map((future) => outcomeOf(future)));
      expect(outcomes[0]).toEqual({ value: 3 });
      expect(outcomes[4]).toEqual({ value: 7 });
      const messages = outcomes.slice(1, 4).map((outcome) => ('error' in outcome ? `${outcome.error.name}: ${outcome.error.message}` : 'no error'));
      expect(messages[0]).toBe(`TypeError: cannot send echo of ${JOBS} to a BullMQ worker: argument 1.nested[0] is a function, which cannot be cloned`);
      expect(messages[1]).toMatch(/^TypeError: cannot send echo of .* to a BullMQ worker: argument 1 holds an instance of class Widget/);
      expect(messages[2]).toBe(`TypeError: cannot send echo of ${JOBS} to a BullMQ worker: argument 1 is a symbol, which cannot be cloned`);
    });

    it('fails the call whose result cannot be serialized, naming its type', async () => {
      const made = executor();
      const error = await errorOf(made.submit(workerFn<[], unknown>(JOBS, 'unserializable')));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toBe(
        `cannot send the result of unserializable of ${JOBS} back from the BullMQ worker: the result.callback is a function, which cannot be cloned`,
      );
    });

    it('refuses a module not on the allow list, naming it, and never imports it', async () => {
      const made = executor();
      const error = await errorOf(made.submit(workerFn<[number, number], number>(FORBIDDEN, 'add'), 1, 2));
      expect(error).toBeInstanceOf(RuntimeError);
      expect(error.message).toBe(
        `this worker does not run add of ${FORBIDDEN}: the module '${FORBIDDEN}' is not on its allow list (serveBullMQ's allow, the worker command's --allow), so it was not imported`,
      );
      const sneaky = await errorOf(made.submit(workerFn<[number, number], number>('./test/fixtures/../fixtures/bullmq-forbidden.mjs', 'add'), 1, 2));
      expect(sneaky.message).toContain('is not on its allow list');
      expect(existsSync(forbiddenMarker)).toBe(false);
    });

    it('names a missing export of an allowed module', async () => {
      const made = executor();
      const error = await errorOf(made.submit(workerFn(JOBS, 'nope')));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toBe(`cannot run nope of ${JOBS}: the module has no export named 'nope'`);
    });

    it('runs a failing call again as defaultJobOptions.attempts say; the last error comes back', async () => {
      const made = executor({ defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
      const flaky = workerFn<[string, number], number>(JOBS, 'flaky');
      const twice = markerDir();
      const always = markerDir();
      try {
        expect(await resultOf(made.submit(flaky, twice.dir, 2))).toBe(3);
        const error = await errorOf(made.submit(flaky, always.dir, 5));
        expect(error.message).toBe('attempt 3 fails');
        expect(readFileSync(join(always.dir, 'count'), 'utf8')).toBe('3');
      } finally {
        twice.remove();
        always.remove();
      }
    });
  });

  describe('cancellation', () => {
    it("asks a call its worker started to stop through its jobSignal(): cancel() is false, the future settles with what the call returns", async () => {
      const made = executor();
      const markers = markerDir();
      try {
        const running = made.submit(workerFn<[string, number], string>(JOBS, 'waitForAbort'), markers.dir, 30);
        await until(() => running.running(), "the worker's start notice arrived");
        expect(running.cancel()).toBe(false);
        expect(await resultOf(running)).toBe('aborted');
        expect(running.cancelled()).toBe(false);
        expect(readFileSync(join(markers.dir, 'aborted'), 'utf8')).toBe('CancelledError: the caller cancelled the job');
      } finally {
        markers.remove();
      }
    });

    it('says in ps() what a task awaiting a BullMQ call waits for: the function, Redis, the job, running', async () => {
      const made = executor();
      const markers = markerDir();
      const loop = newEventLoop();
      try {
        function* main(): Coroutine<string | null | undefined> {
          const future = loop.runInExecutor(made, workerFn<[string, number], boolean>(JOBS, 'sleepUntilAborted'), markers.dir, 30);
          const waiting = loop.createTask(
            (function* offloading(): Coroutine<unknown> {
              return yield* future;
            })(),
            { name: 'offloading' },
          );
          while (!existsSync(join(markers.dir, 'started'))) yield* sleep(0.02);
          yield* sleep(0.2);
          const rows = yield* ps();
          future.cancel();
          yield* sleep(0);
          waiting.cancel();
          return rows.find((row) => row.name === 'offloading')?.awaiting;
        }
        expect(await loop.runUntilComplete(main())).toMatch(
          /^BullMQ call sleepUntilAborted of \.\/test\/fixtures\/bullmq-jobs\.mjs on Redis at 127\.0\.0\.1:\d+, job \S+, running$/,
        );
      } finally {
        loop.close();
        markers.remove();
      }
    });

    it("aborts a coroutine call's jobSignal() when the loop Future of runInExecutor is cancelled", async () => {
      const made = executor();
      const markers = markerDir();
      const loop = newEventLoop();
      try {
        function* main(): Coroutine<boolean> {
          const future = loop.runInExecutor(made, workerFn<[string, number], boolean>(JOBS, 'sleepUntilAborted'), markers.dir, 30);
          while (!existsSync(join(markers.dir, 'started'))) yield* sleep(0.02);
          future.cancel();
          yield* sleep(0);
          return future.cancelled();
        }
        expect(await loop.runUntilComplete(main())).toBe(true);
        await until(() => existsSync(join(markers.dir, 'aborted')), 'the coroutine saw its signal abort');
        expect(readFileSync(join(markers.dir, 'aborted'), 'utf8')).toBe('coroutine: CancelledError');
      } finally {
        loop.close();
        markers.remove();
      }
    });

    it('removes a waiting call from Redis when its future is cancelled: it never runs', async () => {
      const markers = markerDir();
      let idleWorker: WorkerProcess | null = null;
      try {
        // Teach the executor touch's run time, so a burst of it travels as one job.
        idleWorker = await serve('idle');
        const made = executor({ queue: 'idle' });
        // Taught on twice the burst below, so that one slow run more cannot split that one.
        await teachBurst(made, () => Array.from({ length: 6 }, () => made.submit(touch, markers.dir, 'warm', 0)));
        idleWorker.child.kill('SIGTERM');
        await idleWorker.exited;
        idleWorker = null;

        // A lone call: the job goes.
        const alone = made.submit(touch, markers.dir, 'alone', 1);
        await until(() => jobsInRedis(redis.port, 'idle').length === 1, 'the job is in Redis');
        expect(alone.cancel()).toBe(true);
        await until(() => jobsInRedis(redis.port, 'idle').length === 0, 'the job is removed');

        // One call of three in a job: the job stays, that call is skipped.
        const jobsBefore = made.statistics().jobsSent;
        const burst = ['first', 'second', 'third'].map((name) => made.submit(touch, markers.dir, name, name));
        await until(() => jobsInRedis(redis.port, 'idle').length === 1, 'the job is in Redis');
        expect(made.statistics().inFlight).toBe(3);
        expect(made.statistics().jobsSent - jobsBefore).toBe(1);
        expect(burst[1]?.cancel()).toBe(true);

        idleWorker = await serve('idle');
        expect(await Promise.all([burst[0], burst[2]].map((future) => resultOf(future as ConcurrentFuture<unknown>)))).toEqual(['first', 'third']);
        expect(existsSync(join(markers.dir, 'alone'))).toBe(false);
        expect(existsSync(join(markers.dir, 'second'))).toBe(false);
        expect(existsSync(join(markers.dir, 'first'))).toBe(true);
      } finally {
        if (idleWorker !== null) await killWorker(idleWorker);
        markers.remove();
      }
    });

    it('cancels a call not sent yet at once, and a settled call not at all', async () => {
      const made = executor();
      const queued = made.submit(add, 1, 1);
      expect(queued.cancel()).toBe(true);
      expect(queued.cancelled()).toBe(true);
      const done = made.submit(add, 2, 2);
      expect(await resultOf(done)).toBe(4);
      expect(done.cancel()).toBe(false);
    });
  });

  describe('shutdown', () => {
    it('waits for the calls submitted, then refuses new ones with RuntimeError', async () => {
      const made = executor();
      const slow = made.submit(workerFn<[number, number, number], number>(JOBS, 'slowAdd'), 1, 1, 200);
      await made.shutdown();
      expect(slow.done()).toBe(true);
      expect(slow.result()).toBe(2);
      expect(() => made.submit(add, 1, 2)).toThrow(new RuntimeError('cannot schedule new futures after shutdown'));
    });

    it('with cancelFutures cancels only the calls no worker started; a started call settles with its result (concurrent.futures)', async () => {
      const markers = markerDir();
      const single = await startWorker(redis.url, ['--queue', 'one-at-a-time', '--allow', JOBS, '--concurrency', '1']);
      try {
        const made = executor({ queue: 'one-at-a-time' });
        const work = workerFn<[string, string, number], string>(JOBS, 'work');
        const first = made.submit(work, markers.dir, 'first', 300);
        await until(() => first.running(), "the worker's start notice arrived");
        // The worker runs one job at a time: this one (of another function, so not held back
        // until the first call's run time is known) waits in Redis.
        const second = made.submit(touch, markers.dir, 'second', 2);
        await until(() => jobsInRedis(redis.port, 'one-at-a-time').length === 2, 'both jobs are in Redis');
        expect(second.running()).toBe(false);
        await made.shutdown(true, { cancelFutures: true });
        expect(first.cancelled()).toBe(false);
        expect(first.result()).toBe(`first by ${single.pid}`);
        expect(second.cancelled()).toBe(true);
        expect(made.statistics()).toMatchObject({ completed: 1, cancelled: 1, inFlight: 0 });
        await until(() => jobsInRedis(redis.port, 'one-at-a-time').length === 0, 'the cancelled job is removed');
        expect(existsSync(join(markers.dir, 'second'))).toBe(false);
      } finally {
        await killWorker(single);
        markers.remove();
      }
    });

    it('with cancelFutures cancels the calls not done', async () => {
      const made = executor({ queue: 'nobody' });
      const waiting = made.submit(add, 1, 2);
      await until(() => jobsInRedis(redis.port, 'nobody').length === 1, 'the job is in Redis');
      await made.shutdown(true, { cancelFutures: true });
      expect(waiting.cancelled()).toBe(true);
      await until(() => jobsInRedis(redis.port, 'nobody').length === 0, 'the job is removed');
    });

    it('without wait returns at once; the calls still settle', async () => {
      const made = executor();
      const call = made.submit(add, 5, 5);
      await made.shutdown(false);
      expect(await resultOf(call)).toBe(10);
    });
  });

  describe('serveBullMQ in this process', () => {
    it('runs calls until closed, then closed settles', async () => {
      const worker = await serveBullMQ({ connection: redis.url, queue: 'inproc', allow: [JOBS], root: ROOT, handleSignals: false });
      const made = executor({ queue: 'inproc' });
      expect(await resultOf(made.submit(workerFn<[], number>(JOBS, 'pid')))).toBe(process.pid);
      expect(await resultOf(made.submit(workerFn<[number, number, number], number>(JOBS, 'slowAdd'), 1, 2, 5))).toBe(3);
      await worker.close();
      await worker.closed;
      await worker.close();
    });
  });
});

describe('BullMQ wire: the JSON path for requests and outcomes', () => {
  /** [1, <hole>, 3]. */
  const holed = (): number[] => {
    const array = [1, 2, 3];
    delete array[1];
    return array;
  };
  /** A request as a worker reads it: through the JSON BullMQ writes. */
  const overJson = (request: JobRequest): JobRequest => decodeRequest(JSON.parse(JSON.stringify(encodeRequest(request))));

  it('sends JSON-exact arguments as JSON and the rest through v8, both read back exactly', () => {
    const fns = ['file:///jobs.mjs', 'add'];
    const simple: JobRequest = { fns, at: [0, 0], args: [[1, 'a'], [[true, null], 2.5]] };
    expect('j' in encodeRequest(simple)).toBe(true);
    expect(overJson(simple)).toEqual(simple);
    for (const odd of [[-0], [NaN], [Infinity], [undefined], [holed()], [Object.assign([1], { tag: 1 })], [{ a: 1 }], ['x'.repeat(1 << 15)]]) {
      const request: JobRequest = { fns, at: [0], args: [odd] };
      expect('c' in encodeRequest(request)).toBe(true);
      const back = overJson(request).args[0] as unknown[];
      expect(Object.is(back[0], odd[0]) || JSON.stringify(back) === JSON.stringify(odd)).toBe(true);
    }
    const [negZero] = overJson({ fns, at: [0], args: [[-0]] }).args[0] as [number];
    expect(Object.is(negZero, -0)).toBe(true);
  });

  it('writes JSON-exact outcomes as JSON text and others as v8 bytes; both decode to the same array', () => {
    const json = encodeOutcomes('job-1', [[0, 0, 3, 0.25]], () => 'add');
    expect(json[0]).toBe(0x5b);
    expect(decodeOutcomes(json)).toEqual(['job-1', 0, 0, 3, 0.25]);
    const v8 = encodeOutcomes('job-2', [[0, 0, -0, 0.25]], () => 'add');
    expect(v8[0]).toBe(0xff);
    expect(Object.is(decodeOutcomes(v8)[3], -0)).toBe(true);
  });

  it('knows what JSON carries exactly', () => {
    expect(jsonExact([1, 'a', [true, null, 'b\ud800']])).toBe(true);
    expect(jsonExact([-0])).toBe(false);
    expect(jsonExact(holed())).toBe(false);
    expect(jsonExact(new Array(1000).fill(1))).toBe(false);
    expect(jsonExact([new Date(0)])).toBe(false);
  });
});

describe('BullMQ bad input', () => {
  it('refuses executor options that cannot work, naming them', () => {
    expect(() => new BullMQExecutor(undefined as never)).toThrow(/^BullMQExecutor needs an options object with a connection/);
    expect(() => new BullMQExecutor({ connection: 'http://localhost' })).toThrow(
      new TypeError("BullMQExecutor: options.connection must be a redis://, rediss:// or postgres:// URL, got the http: URL 'localhost'"),
    );
    expect(() => new BullMQExecutor({ connection: 42 as never })).toThrow(
      new TypeError('BullMQExecutor: options.connection must be a redis://, rediss:// or postgres:// URL, an object of Redis host and port, or { postgres: pg.PoolConfig }, got 42'),
    );
    // A URL that does not parse is shown without what may be its password.
    expect(() => new BullMQExecutor({ connection: 'redis://:s3cret@host:port' })).toThrow(
      new TypeError(
        "BullMQExecutor: options.connection must be a redis://, rediss:// or postgres:// URL, an object of Redis host and port, or { postgres: pg.PoolConfig }, got 'redis://***@host:port'",
      ),
    );
    expect(() => new BullMQExecutor({ connection: 'redis://x', maxJobBytes: 0 })).toThrow(new TypeError('BullMQExecutor: options.maxJobBytes must be an integer of at least 1, got 0'));
    expect(() => new BullMQExecutor({ connection: { port: 0 } })).toThrow(/options\.connection\.port must be an integer from 1 to 65535/);
    expect(() => new BullMQExecutor({ connection: 'redis://x', queue: 'a:b' })).toThrow(/options\.queue must be a non-empty string without ':'/);
    expect(() => new BullMQExecutor({ connection: 'redis://x', unreachableTimeout: 0 })).toThrow(/options\.unreachableTimeout must be a positive number/);
    expect(() => new BullMQExecutor({ connection: 'redis://x', defaultJobOptions: 3 as never })).toThrow(/options\.defaultJobOptions must be an object/);
  });

  it('refuses worker options that cannot work before connecting', async () => {
    await expect(serveBullMQ({ connection: 'redis://x', allow: 'x' as never })).rejects.toThrow(/options\.allow must be an array/);
    await expect(serveBullMQ({ connection: 'redis://x', allow: ['node:fs'] })).rejects.toThrow(
      /options\.allow\[0\] must be a module specifier .*, got 'node:fs'/,
    );
    await expect(serveBullMQ({ connection: 'redis://x', allow: [], concurrency: 0 })).rejects.toThrow(/options\.concurrency must be an integer of at least 1/);
    await expect(serveBullMQ({ connection: 'redis://x', allow: [], maxJobBytes: 1.5 })).rejects.toThrow(
      new TypeError('serveBullMQ(): options.maxJobBytes must be an integer of at least 1, got 1.5'),
    );
    await expect(serveBullMQ({ connection: 'redis://x', allow: [], maxOutcomeBytes: 2 ** 27 })).rejects.toThrow(
      new RangeError('serveBullMQ(): options.maxOutcomeBytes must be at most 67108864 (the largest entry an executor reads), got 134217728'),
    );
  });

  it('refuses something that is not a WorkerFn, and a data: URL', () => {
    const made = new BullMQExecutor({ connection: 'redis://127.0.0.1:1', unreachableTimeout: 1 });
    try {
      expect(() => made.submit((() => 1) as never)).toThrow(/^submit\(\) needs a WorkerFn/);
      expect(() => made.submit({ moduleUrl: 'data:text/javascript,1', exportName: 'x' } as never)).toThrow(
        /^submit\(\) needs an absolute path, a file: URL or a module specifier/,
      );
    } finally {
      void made.shutdown(false);
    }
  });

  it('fails the futures after unreachableTimeout when Redis cannot be reached at all', async () => {
    const made = new BullMQExecutor({ connection: 'redis://127.0.0.1:1', unreachableTimeout: 0.2 });
    const error = await errorOf(made.submit(add, 1, 2));
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toMatch(/^Redis at 127\.0\.0\.1:1 has been unreachable for 0\.2 s \(options\.unreachableTimeout\)/);
    await made.shutdown();
  });

  it('the worker command explains its usage', () => {
    const entry = join(ROOT, 'dist/bin/multiloop.js');
    const help = spawnSync(process.execPath, [entry, 'worker', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: multiloop worker --allow SPEC/);
    const missing = spawnSync(process.execPath, [entry, 'worker', '--queue', 'q'], { encoding: 'utf8' });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/^multiloop worker: --allow is required/);
    const unknown = spawnSync(process.execPath, [entry, 'worker', '--allow', 'x', '--bogus'], { encoding: 'utf8' });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/^multiloop worker: unknown option "--bogus"/);
  });
});
