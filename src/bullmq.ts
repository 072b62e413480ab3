/**
 * An executor on a distributed engine: `BullMQExecutor` sends WorkerFns as BullMQ jobs through
 * Redis or PostgreSQL, and `serveBullMQ` runs them in worker processes on any number of machines
 * (no asyncio counterpart: the part concurrent.futures' ProcessPoolExecutor plays on one machine).
 *
 * The one module that uses BullMQ, and only through a dynamic import made when an executor or
 * a worker is created: importing multiloop costs nothing for those who never use it. What
 * travels is described in internal/bullmq/wire.ts; the executor's engine is
 * internal/bullmq/caller.ts, the worker's is internal/bullmq/runner.ts; both reach the store
 * through internal/bullmq/channels.ts (redis.ts, postgres.ts).
 */
import type { YieldablePromise } from './coroutines.js';
import { yieldable } from './internal/yieldable.js';
import type { Job, JobsOptions, Worker } from 'bullmq';
import type { EventLoop } from './base-events.js';
import { newEventLoop } from './events.js';
import type { Executor } from './executor.js';
import { INSPECT, repr } from './internal/format.js';
import { resolveBackend, type Backend } from './internal/bullmq/backends.js';
import { CallerEngine } from './internal/bullmq/caller.js';
import type { RunnerChannel } from './internal/bullmq/channels.js';
import type { PostgresConnection, RedisConnection } from './internal/bullmq/connections.js';
import { JobRunner, allowList } from './internal/bullmq/runner.js';
import { DEFAULT_MAX_JOB_BYTES, DEFAULT_MAX_OUTCOME_BYTES, DEFAULT_PREFIX, DEFAULT_QUEUE, MAX_OUTCOME_BYTES } from './internal/bullmq/wire.js';
import type { ConcurrentFuture } from './internal/concurrent-future.js';
import { importOptional } from './internal/optional.js';
import { _getRunningLoop } from './internal/running.js';
import { logger } from './log.js';
import { checkWorkerFn, type WorkerFn } from './worker-fn.js';

export type { PostgresConnection, RedisConnection } from './internal/bullmq/connections.js';

/** Milliseconds a closing worker gives its abandoned jobs to go back to the queue before it drops its connections. */
const HAND_BACK_MS = 1000;

/** BullMQ, an optional peer dependency, loaded once, on first use. */
let bullmq: Promise<typeof import('bullmq')> | null = null;

/** BullMQ for `user`; when it is not installed, a RuntimeError saying so (and tried again next time). */
function loadBullMQ(user: string): Promise<typeof import('bullmq')> {
  bullmq ??= importOptional('bullmq', user, () => import('bullmq')).catch((error: unknown) => {
    bullmq = null;
    throw error;
  });
  return bullmq;
}

/** BullMQ and the driver of `backend`'s store, for `user`. */
async function loadEngines(backend: Backend, user: string): Promise<typeof import('bullmq')> {
  const module = await loadBullMQ(user);
  await backend.loadDriver(user);
  return module;
}

/**
 * Configure a `BullMQExecutor`: where Redis or PostgreSQL is, which queue, and what BullMQ job
 * options apply.
 *
 * @example
 * ```ts
 * const options: BullMQExecutorOptions = {
 *   connection: 'redis://10.0.0.5:6379',
 *   queue: 'thumbnails',
 *   defaultJobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 1000 } },
 *   unreachableTimeout: 60,
 * };
 * const executor = new BullMQExecutor(options);
 * ```
 */
export interface BullMQExecutorOptions {
  /**
   * The store holding the queue: Redis (>= 6.2), a `redis://` URL or host, port and credentials;
   * or PostgreSQL (>= 13, through BullMQ's PostgreSQL backend), a `postgres://` URL or
   * `{ postgres: pg.PoolConfig }` (with BullMQ's `schema` when not `'bullmq'`).
   */
  connection: RedisConnection | PostgresConnection;
  /** The BullMQ queue's name (default `'multiloop'`); workers must serve the same one. */
  queue?: string;
  /** BullMQ's key prefix on Redis (default `'bull'`); workers must use the same one. PostgreSQL ignores it (its `schema` is the namespace). */
  prefix?: string;
  /**
   * PostgreSQL only: whether a database without BullMQ's schema (or an older one) is migrated
   * to it, and multiloop's two tables made, on connecting (default true). With false, an
   * executor on a database not migrated fails its calls with a RuntimeError saying so.
   */
  migrate?: boolean;
  /**
   * BullMQ job options applied to every job (`attempts`, `backoff`, `priority`, ...). A call that
   * throws is run again while attempts are left; its error comes back from the last one. `jobId`
   * is the executor's own; completed and failed jobs are removed unless you say otherwise.
   */
  defaultJobOptions?: Record<string, unknown>;
  /**
   * Seconds the futures of sent and waiting jobs wait for an unreachable Redis (down, restarting,
   * the network) before they fail with a RuntimeError saying so (default 30; `Infinity` waits
   * for good). While Redis is back in time, nothing is lost: jobs it lost (a restart without
   * persistence) are sent again. On PostgreSQL the same holds for sent jobs, but the server must
   * be reachable when the executor starts, and a call sent while it is away fails after three
   * tries to add its job.
   */
  unreachableTimeout?: number;
  /**
   * The most bytes one BullMQ job's data may take in its store (default 16 MiB): a call whose
   * arguments alone need more fails with a RangeError naming both, and nothing of it is sent.
   * Workers refuse larger jobs by their own `maxJobBytes`.
   */
  maxJobBytes?: number;
}

/**
 * Report what a `BullMQExecutor` is doing, Trio-style.
 *
 * @example
 * ```ts
 * const { callsSent, jobsSent } = executor.statistics();
 * console.log(`${callsSent / jobsSent} calls per BullMQ job`);
 * ```
 */
export interface BullMQExecutorStatistics {
  /** Calls submitted and not sent yet. */
  readonly queueSize: number;
  /** Calls sent and not settled yet. */
  readonly inFlight: number;
  /** Calls settled with a result or an error. */
  readonly completed: number;
  /** Calls cancelled. */
  readonly cancelled: number;
  /** BullMQ jobs added. */
  readonly jobsSent: number;
  /** Calls those jobs carried (`callsSent / jobsSent` calls per job). */
  readonly callsSent: number;
  /** Calls sent again because Redis lost their job. */
  readonly resent: number;
}

function checkName(value: unknown, name: string, fallback: string, caller: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value === '' || value.includes(':')) {
    throw new TypeError(`${caller}: options.${name} must be a non-empty string without ':', got ${repr(value)}`);
  }
  return value;
}

function checkMigrate(value: unknown, caller: string): boolean {
  if (value === undefined) return true;
  if (typeof value !== 'boolean') throw new TypeError(`${caller}: options.migrate must be a boolean, got ${repr(value)}`);
  return value;
}

function checkOptionsObject(options: unknown, caller: string): Record<string, unknown> {
  if (typeof options !== 'object' || options === null) throw new TypeError(`${caller} needs an options object with a connection, got ${repr(options)}`);
  return options as Record<string, unknown>;
}

/**
 * Run WorkerFns in worker processes (`serveBullMQ`, `npx multiloop worker`) on any machine that
 * reaches the same Redis or PostgreSQL, through a BullMQ queue: `loop.runInExecutor(executor, fn, ...args)`
 * as with the local pool.
 *
 * `fn` names its module by a specifier the workers resolve — a path relative to the worker's
 * root (`'./jobs/math.js'`) or a package name — which must be on the workers' allow list.
 * Arguments, results and errors cross with structured-clone fidelity (typed arrays, Map, Set,
 * Date, BigInt; errors keep class, message, stack, cause, own properties; registered classes);
 * a value that cannot fails its own future with a TypeError naming it. Node Buffers arrive as
 * Buffers. The caller's values of registered context variables (`registerContextVar`) travel
 * with each call: the worker runs it in a copy of its own context with them set — a coroutine
 * function for the whole of its Task, a plain or async function until it first awaits (other
 * jobs' calls run in between). Nothing comes back.
 *
 * Calls submitted together go as one `addBulk`, several calls per BullMQ job when they are
 * short (as the workers measure them), so thousands of tiny calls cost a handful of jobs, while
 * a call alone keeps its latency. Outcomes arrive on a stream of this executor's own, each call
 * settling once, as soon as it ended. A worker that dies mid-job, or loses the job's lock:
 * BullMQ runs the job again on another (its calls whose outcomes went out are not run again),
 * and each future settles once — at least once, never lost.
 *
 * Cancelling is concurrent.futures': `cancel()` of a call no worker is known to have started
 * returns true and removes it (it never runs, or its job skips it). Once the worker's start
 * notice has arrived (`running()` is true), `cancel()` returns false, the call's `jobSignal()`
 * aborts in its worker, and the future settles with what the call returns or throws. All the
 * calls of a job count as started when its worker starts it (as the calls a ProcessPoolExecutor
 * moved to its call queue). The notice is written when the job first waits (a call that ends
 * without waiting sends its outcome instead) and arrives a round trip to the store and a turn of
 * this process's event loop later, longer while the store is slow or away: until then, `cancel()` returns
 * true for a call that may already run; its future stays cancelled and its outcome is dropped.
 *
 * The executor holds connections to its store: `shutdown()` it when done.
 *
 * @example
 * ```ts
 * const executor = new BullMQExecutor({ connection: 'redis://127.0.0.1:6379' });
 * const thumbnail = workerFn<[Uint8Array, number], Uint8Array>('./jobs/images.js', 'thumbnail');
 * const small = yield* loop.runInExecutor(executor, thumbnail, bytes, 128);
 * await executor.shutdown();
 * ```
 */
export class BullMQExecutor implements Executor {
  readonly #engine: CallerEngine;
  readonly #queue: string;
  readonly #where: string;

  /** Check `options` and connect to the store in the background; calls submitted meanwhile wait. */
  constructor(options: BullMQExecutorOptions) {
    const caller = 'BullMQExecutor';
    const checked = checkOptionsObject(options, caller);
    const backend = resolveBackend(checked.connection, caller, checkMigrate(checked.migrate, caller));
    const queue = checkName(checked.queue, 'queue', DEFAULT_QUEUE, caller);
    const prefix = checkName(checked.prefix, 'prefix', DEFAULT_PREFIX, caller);
    const jobOptions = checked.defaultJobOptions;
    if (jobOptions !== undefined && (typeof jobOptions !== 'object' || jobOptions === null)) {
      throw new TypeError(`${caller}: options.defaultJobOptions must be an object of BullMQ job options, got ${repr(jobOptions)}`);
    }
    const unreachableTimeout = checked.unreachableTimeout ?? 30;
    if (typeof unreachableTimeout !== 'number' || Number.isNaN(unreachableTimeout) || unreachableTimeout <= 0) {
      throw new TypeError(`${caller}: options.unreachableTimeout must be a positive number of seconds or Infinity, got ${repr(unreachableTimeout)}`);
    }
    const maxJobBytes = checkCount(checked.maxJobBytes, 'maxJobBytes', DEFAULT_MAX_JOB_BYTES, 1, caller);
    this.#queue = queue;
    this.#where = `${backend.scheme}=${backend.where}`;
    const defaultJobOptions: JobsOptions = { removeOnComplete: true, removeOnFail: true, ...(jobOptions as JobsOptions | undefined) };
    this.#engine = new CallerEngine(async (executorId) => backend.openQueue(await loadEngines(backend, caller), queue, prefix, defaultJobOptions, executorId), {
      server: backend.server,
      where: backend.where,
      unreachableTimeout,
      maxJobBytes,
    });
  }

  /**
   * Queue `fn(...args)` as (part of) a BullMQ job; values and errors cross with structured-clone
   * fidelity. After `shutdown()`, RuntimeError. An argument that cannot cross fails the future.
   *
   * @example
   * ```ts
   * const cf = executor.submit(workerFn('./jobs/math.js', 'add'), 40, 2);
   * cf.addDoneCallback((f) => console.log(f.result())); // 42
   * ```
   */
  submit<A extends unknown[], R>(fn: WorkerFn<A, R>, ...args: A): ConcurrentFuture<R> {
    const checked = checkWorkerFn(fn, 'submit()', true);
    return this.#engine.submit(checked, args) as ConcurrentFuture<R>;
  }

  /**
   * Stop accepting calls; with `wait` (the default) settle once every call submitted settled,
   * then close the connections. `cancelFutures` cancels the calls no worker is known to have
   * started (see `cancel()` in the class's notes); started calls run on and their futures settle
   * with their outcomes (concurrent.futures' cancel_futures). Called without `wait` while an
   * earlier `shutdown(true)` still waits, it ends the wait: calls not started are cancelled,
   * started ones are asked to stop and their futures fail with CancelledError.
   *
   * @example
   * ```ts
   * await executor.shutdown(true, { cancelFutures: true });
   * ```
   */
  shutdown(wait = true, options?: { cancelFutures?: boolean }): YieldablePromise<void> {
    return yieldable(this.#engine.shutdown(wait, options?.cancelFutures === true));
  }

  /** `await using executor = new ...`: `shutdown()` (waiting for running work) when the scope ends. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }

  /**
   * Report the calls and jobs so far (Trio-style statistics()).
   *
   * @example
   * ```ts
   * const { inFlight, completed } = executor.statistics();
   * ```
   */
  statistics(): BullMQExecutorStatistics {
    return this.#engine.statistics();
  }

  /** @internal Module specifiers are for this executor's workers to resolve (see `runInExecutor`). */
  _resolvesModuleSpecifiers(): boolean {
    return true;
  }

  /** The repr, also in `util.inspect` and console.log. */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    const { queueSize, inFlight, completed } = this.#engine.statistics();
    return `<BullMQExecutor queue=${repr(this.#queue)} ${this.#where} queued=${queueSize} in_flight=${inFlight} completed=${completed}>`;
  }
}

/**
 * Configure `serveBullMQ`: where Redis or PostgreSQL is, which queue, how many jobs at once, and
 * which modules jobs may name.
 *
 * @example
 * ```ts
 * const options: ServeBullMQOptions = {
 *   connection: 'redis://10.0.0.5:6379',
 *   concurrency: 8,
 *   allow: ['./jobs/images.js', '@acme/reports'],
 * };
 * ```
 */
export interface ServeBullMQOptions {
  /** The store holding the queue: Redis or PostgreSQL, as `BullMQExecutorOptions.connection` says. */
  connection: RedisConnection | PostgresConnection;
  /** The queue to serve (default `'multiloop'`). */
  queue?: string;
  /** BullMQ's key prefix on Redis (default `'bull'`). */
  prefix?: string;
  /** PostgreSQL only: migrate a database without BullMQ's schema and make multiloop's tables on connecting (default true); with false, such a database fails the start. */
  migrate?: boolean;
  /** The most jobs run at once in this process (default 16); the calls of one job run one after the other. */
  concurrency?: number;
  /**
   * The module specifiers jobs may name: paths relative to `root` (`'./jobs/math.js'`), package
   * names (imported as this process imports them), `file:` URLs or absolute paths. A job naming
   * any other fails with an error naming it, and it is never imported.
   */
  allow: readonly string[];
  /** The directory `./relative` specifiers resolve against (default: the working directory). */
  root?: string;
  /** Milliseconds a job's lock lasts without renewal (BullMQ's lockDuration, default 30 000): how soon a dead worker's job runs elsewhere. */
  lockDuration?: number;
  /** Milliseconds between checks for jobs of dead workers (BullMQ's stalledInterval, default 30 000). */
  stalledInterval?: number;
  /**
   * How often a job may lose its worker before it fails (BullMQ's maxStalledCount, default 1).
   * A large job (over 1 MiB) counts the workers that died decoding it, and its error says so.
   */
  maxStalledCount?: number;
  /**
   * Whether SIGTERM and SIGINT close the worker gracefully (default true): running calls get
   * `closeTimeout` seconds to finish, then their jobs are handed back to the queue; a second
   * signal hands them back at once; a third ends the process (jobs still held then are run
   * again elsewhere once their locks expire).
   */
  handleSignals?: boolean;
  /** Seconds running calls get to finish when a signal closes the worker (default 10). */
  closeTimeout?: number;
  /** The most bytes a job's data may take (default 16 MiB): a larger job fails with a RangeError and is never decoded. */
  maxJobBytes?: number;
  /**
   * The most bytes of outcomes one job sends back (default 16 MiB, at most 64 MiB, the most an
   * executor reads in one entry): results and errors past it fail their calls with a
   * RuntimeError saying so.
   */
  maxOutcomeBytes?: number;
}

/**
 * A running `serveBullMQ` worker.
 *
 * @example
 * ```ts
 * const worker = await serveBullMQ({ connection, allow: ['./jobs/math.js'] });
 * await worker.close({ timeout: 5 });
 * ```
 */
export interface BullMQWorker {
  /**
   * Stop taking jobs, let running calls finish, then disconnect. With `timeout` (seconds), calls
   * still running then are abandoned and their jobs handed back to the queue (another worker
   * runs them; their calls that finished are not run again). Calls of a job not started yet are
   * handed back at once. Idempotent.
   */
  close(options?: { timeout?: number }): YieldablePromise<void>;
  /** Settles once the worker is closed (by `close()` or a signal). */
  readonly closed: YieldablePromise<void>;
}

function checkCount(value: unknown, name: string, fallback: number, min: number, caller: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new TypeError(`${caller}: options.${name} must be an integer of at least ${min}, got ${repr(value)}`);
  }
  return value;
}

/**
 * Run the jobs of a BullMQ queue in this process (as `npx multiloop worker` does); resolves once
 * it takes jobs.
 *
 * Each job's calls run here one after the other: plain and async functions as they are,
 * coroutine functions (generators) as Tasks of a loop of this process (the running one, or one
 * made and run for the worker). A job may name only modules on `allow`. The worker subscribes
 * to its queue's cancel channel, so a caller cancelling a running call aborts its
 * `jobSignal()` here. SIGTERM or SIGINT closes it gracefully (see `handleSignals`).
 *
 * @example
 * ```ts
 * const worker = await serveBullMQ({
 *   connection: 'redis://127.0.0.1:6379',
 *   concurrency: 16,
 *   allow: ['./jobs/math.js'],
 * });
 * await worker.closed;
 * ```
 */
export function serveBullMQ(options: ServeBullMQOptions): YieldablePromise<BullMQWorker> {
  return yieldable(serve(options));
}

async function serve(options: ServeBullMQOptions): Promise<BullMQWorker> {
  const caller = 'serveBullMQ()';
  const checked = checkOptionsObject(options, caller);
  const backend = resolveBackend(checked.connection, caller, checkMigrate(checked.migrate, caller));
  const queueName = checkName(checked.queue, 'queue', DEFAULT_QUEUE, caller);
  const prefix = checkName(checked.prefix, 'prefix', DEFAULT_PREFIX, caller);
  const concurrency = checkCount(checked.concurrency, 'concurrency', 16, 1, caller);
  const allow = allowList(checked.allow, caller);
  const root = checked.root ?? process.cwd();
  if (typeof root !== 'string' || root === '') throw new TypeError(`${caller}: options.root must be a directory path, got ${repr(root)}`);
  const lockDuration = checkCount(checked.lockDuration, 'lockDuration', 30_000, 1, caller);
  const stalledInterval = checkCount(checked.stalledInterval, 'stalledInterval', 30_000, 1, caller);
  const maxStalledCount = checkCount(checked.maxStalledCount, 'maxStalledCount', 1, 0, caller);
  const handleSignals = checked.handleSignals ?? true;
  if (typeof handleSignals !== 'boolean') throw new TypeError(`${caller}: options.handleSignals must be a boolean, got ${repr(handleSignals)}`);
  const closeTimeout = checked.closeTimeout ?? 10;
  if (typeof closeTimeout !== 'number' || Number.isNaN(closeTimeout) || closeTimeout < 0) {
    throw new TypeError(`${caller}: options.closeTimeout must be a non-negative number of seconds, got ${repr(closeTimeout)}`);
  }

  const maxJobBytes = checkCount(checked.maxJobBytes, 'maxJobBytes', DEFAULT_MAX_JOB_BYTES, 1, caller);
  const maxOutcomeBytes = checkCount(checked.maxOutcomeBytes, 'maxOutcomeBytes', DEFAULT_MAX_OUTCOME_BYTES, 1, caller);
  if (maxOutcomeBytes > MAX_OUTCOME_BYTES) throw new RangeError(`${caller}: options.maxOutcomeBytes must be at most ${MAX_OUTCOME_BYTES} (the largest entry an executor reads), got ${maxOutcomeBytes}`);

  const bullmq = await loadEngines(backend, 'serveBullMQ');
  const { WaitingError } = bullmq;
  let loop: EventLoop | null = _getRunningLoop();
  let ownLoop: { loop: EventLoop; stopped: Promise<void> } | null = null;
  if (loop === null) {
    loop = newEventLoop();
    ownLoop = { loop, stopped: loop.runForever() };
  }
  const runner = new JobRunner({ allow, root, loop, maxJobBytes, maxOutcomeBytes, maxStalledCount });
  let lastError = '';
  const worker: Worker = backend.openWorker(
    bullmq,
    queueName,
    prefix,
    async (job: Job, token?: string): Promise<void> => {
      const end = await runner.process(job);
      if (end === 'handed-back') {
        await job.moveToWait(token);
        throw new WaitingError();
      }
    },
    { concurrency, lockDuration, stalledInterval, maxStalledCount },
    maxJobBytes,
  );
  worker.on('completed', (job: Job) => runner.jobCompleted(job));
  worker.on('failed', (job: Job | undefined, error: Error) => runner.jobFailed(job, error, job?.finishedOn !== undefined));
  worker.on('error', (error: Error) => {
    // A server away repeats the same error every retry: say it once.
    if (error.message !== lastError) logger.warning(`serveBullMQ: ${error.message}`);
    lastError = error.message;
  });

  let channel: RunnerChannel | null = null;
  const started = async (): Promise<void> => {
    const opened = await backend.runnerChannel(worker, queueName, prefix);
    channel = opened;
    runner.attach(opened);
    await opened.subscribe((message) => runner.cancelRequested(message));
    worker.run().catch((error: unknown) => logger.error('serveBullMQ: the worker stopped', error));
    await worker.waitUntilReady();
  };

  let resolveClosed: () => void = () => undefined;
  const closed = yieldable(new Promise<void>((resolve) => {
    resolveClosed = resolve;
  }));
  let closing: YieldablePromise<void> | null = null;
  let dropTimer: NodeJS.Timeout | null = null;
  let drop: () => void = () => undefined;
  const dropped = new Promise<void>((resolve) => {
    drop = resolve;
  });
  /** Abandon the running calls; their jobs go back to the queue, or, when that cannot be done in time (the server away), the connections are dropped. */
  const abandon = (): void => {
    runner.handBack();
    dropTimer ??= setTimeout(() => {
      // The jobs still held are recovered as stalled ones once their locks expire.
      worker.disconnect().catch(() => undefined);
      (channel as RunnerChannel | null)?.close();
      // BullMQ's close() may still wait for the server (a job's move back to wait): it is not waited for.
      drop();
    }, HAND_BACK_MS).unref();
  };
  let signals = 0;
  const onSignal = (): void => {
    signals++;
    if (signals === 1) void close({ timeout: closeTimeout });
    else if (signals === 2) abandon();
    // A close that cannot finish (the server away): the jobs still held are recovered as stalled ones.
    else process.exit(130);
  };
  const close = (closeOptions?: { timeout?: number }): YieldablePromise<void> => {
    closing ??= yieldable((async () => {
      const timeout = closeOptions?.timeout;
      runner.stopStarting();
      const timer = timeout === undefined || !Number.isFinite(timeout) ? null : setTimeout(abandon, Math.max(0, timeout) * 1000);
      try {
        await Promise.race([worker.close(), dropped]);
      } finally {
        if (timer !== null) clearTimeout(timer);
        if (dropTimer !== null) clearTimeout(dropTimer);
        (channel as RunnerChannel | null)?.close();
        if (handleSignals) {
          process.off('SIGTERM', onSignal);
          process.off('SIGINT', onSignal);
        }
        if (ownLoop !== null) {
          ownLoop.loop.stop();
          await ownLoop.stopped.catch(() => undefined);
          ownLoop.loop.close();
        }
        resolveClosed();
      }
    })());
    return closing;
  };
  try {
    await started();
  } catch (error) {
    await close({ timeout: 0 }).catch(() => undefined);
    throw error;
  }
  if (handleSignals) {
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }
  return { close, closed };
}
