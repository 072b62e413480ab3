/**
 * Executors: where `runInExecutor` and `toThread` send blocking work (concurrent.futures'
 * Executor and ThreadPoolExecutor). `PiscinaExecutor` runs WorkerFns in a piscina pool.
 *
 * The executor keeps its own queue in front of the pool. Jobs submitted in one synchronous
 * burst are flushed together on the next microtask and travel in batches, one piscina task
 * each, sized so every thread gets a share and no batch holds much more than BATCH_BUDGET_MS of
 * work by each function's measured run time (a function not measured yet travels alone). A lone
 * job therefore keeps its own latency, while thousands of tiny jobs cost a handful of pool round
 * trips.
 *
 * Each thread holds up to two batches, so it starts the next one without waiting for the main
 * thread to answer. A batch held behind a long job would be stuck there while another thread
 * idles; so once nothing waits in the executor's queue, a batch that no thread started for
 * twice its expected run time is moved into a new batch, which piscina gives to the least busy
 * thread. Its jobs are taken by compare-and-exchange on their state slots, so the old thread
 * skips them and each job runs once.
 */
import { _currentVars } from './contextvars.js';
import { callSpans, carriedContext, endWhenDone, travelling, type CarriedContext } from './internal/travel.js';
import type { YieldablePromise } from './coroutines.js';
import { yieldable } from './internal/yieldable.js';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { receiveMessageOnPort, type MessagePort, type ResourceLimits, type Transferable } from 'node:worker_threads';
import type { Piscina } from 'piscina';

type PiscinaTransferList = NonNullable<NonNullable<Parameters<Piscina['run']>[1]>['transferList']>;
import { ConcurrentFuture } from './internal/concurrent-future.js';
import { RuntimeError } from './exceptions.js';
import { Deque } from './internal/deque.js';
import { decodeError, type EncodedError } from './internal/errors.js';
import { INSPECT, repr } from './internal/format.js';
import {
  ABORT_REQUESTED,
  CANCELLED,
  DONE_FALSE,
  DONE_NULL,
  DONE_NUMBER,
  DONE_POSTED,
  DONE_TRUE,
  DONE_UNDEFINED,
  QUEUED,
  RUNNING,
  isResultsPortMessage,
  type BatchRequest,
  type BatchResponse,
  type Outcome,
  type ResultsPortMessage,
} from './internal/pool-job.js';
import { isTypeScriptPortMessage, serveTypeScript } from './internal/ts-loader.js';
import { threadExecArgv } from './internal/threads/exec-argv.js';
import { describeUncloneable, findUncloneable, nestedDeeperThan } from './internal/uncloneable.js';
import { fromWire, toWire } from './internal/wire.js';
import { logger } from './log.js';
import { collectTransfers } from './transfer.js';
import { _Callbacks, _isComlinkProxy } from './comlink.js';
import { _getEventLoop } from './internal/running.js';
import { bundleFile } from './internal/bundle-files.js';
import { checkWorkerFn, describeWorkerFn, type WorkerFn } from './worker-fn.js';

/**
 * Run WorkerFns off the loop's thread (concurrent.futures.Executor); `runInExecutor` accepts
 * any object with these two methods.
 *
 * @example
 * ```ts
 * const executor: Executor = new PiscinaExecutor({ maxThreads: 4 });
 * const sum = yield* loop.runInExecutor(executor, workerFn(mathUrl, 'add'), 40, 2);
 * await executor.shutdown();
 * ```
 */
export interface Executor {
  /** Schedule `fn(...args)`; returns a ConcurrentFuture of its result. */
  submit<A extends unknown[], R>(fn: WorkerFn<A, R>, ...args: A): ConcurrentFuture<R>;
  /** Stop accepting work; settles once running work finished (when `wait`); optionally cancel queued work. */
  shutdown(wait?: boolean, options?: { cancelFutures?: boolean }): Promise<void>;
}

/**
 * Configure a `PiscinaExecutor` (ThreadPoolExecutor's max_workers and more); piscina's own
 * options of the same names, except that `maxQueue` counts jobs, which wait in the executor.
 *
 * @example
 * ```ts
 * const options: PiscinaExecutorOptions = { maxThreads: 4, idleTimeout: 30_000, abortRunning: true };
 * const executor = new PiscinaExecutor(options);
 * ```
 */
export interface PiscinaExecutorOptions {
  /** The most pool threads (default: the machine's available parallelism). */
  maxThreads?: number;
  /** The fewest pool threads kept alive (default 0: threads start with the first job). */
  minThreads?: number;
  /** Milliseconds an idle thread above `minThreads` lives (default 10,000; `Infinity` keeps it). */
  idleTimeout?: number;
  /** The most jobs waiting for a thread (default `Infinity`; `'auto'` is `maxThreads²`); past it a job's future fails. */
  maxQueue?: number | 'auto';
  /** Heap and stack limits of each pool thread (Node's `Worker` resourceLimits). */
  resourceLimits?: ResourceLimits;
  /**
   * Whether cancelling a running job ends it (default false). A thread cannot be interrupted
   * between two statements, so ending a job ends its thread, which the pool replaces; to keep
   * other jobs out of the way, such an executor sends every job to the pool alone.
   */
  abortRunning?: boolean;
}

/**
 * Summarize durations in milliseconds, as piscina's histograms do (no asyncio counterpart).
 *
 * @example
 * ```ts
 * const { p50, p99 } = executor.statistics().runTime;
 * ```
 */
export interface TimeSummary {
  readonly mean: number;
  readonly stddev: number;
  readonly min: number;
  readonly max: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
}

/**
 * Report what a `PiscinaExecutor` is doing, Trio-style (asyncio's executors have no such report).
 *
 * @example
 * ```ts
 * const { queueSize, inFlight, jobsSent, batches } = executor.statistics();
 * console.log(`${queueSize} waiting, ${inFlight} running, ${jobsSent / batches} jobs per batch`);
 * ```
 */
export interface ExecutorStatistics {
  /** Pool threads alive now. */
  readonly threads: number;
  /** The most pool threads. */
  readonly maxThreads: number;
  /** Jobs submitted and waiting for a thread. */
  readonly queueSize: number;
  /** Jobs sent to pool threads and not settled yet (each thread holds up to two batches). */
  readonly inFlight: number;
  /** Jobs settled with a result or an error. */
  readonly completed: number;
  /** Jobs cancelled (before they ran, or ended by `abortRunning`). */
  readonly cancelled: number;
  /** Pool tasks sent: one per batch (`(jobsSent + moved) / batches` is the mean batch size). */
  readonly batches: number;
  /** Jobs sent to the pool from the queue. */
  readonly jobsSent: number;
  /** Jobs moved from a batch no thread had started, long past its expected run time, into a new batch. */
  readonly moved: number;
  /** The share of the pool's thread time spent running batches since it started (piscina's utilization). */
  readonly utilization: number;
  /** How long batches ran in a thread (piscina's run-time histogram). */
  readonly runTime: TimeSummary;
  /** How long batches waited in piscina for a thread (piscina's wait-time histogram). */
  readonly waitTime: TimeSummary;
}

/** A batch holds about this many milliseconds of work, by the measured run times of its jobs. */
const BATCH_BUDGET_MS = 4;
const NO_ARGS: unknown[] = [];
/** A job whose sending failed before it reached a thread is retried this many times. */
const MAX_ATTEMPTS = 3;
/** A worker thread's stack when resourceLimits.stackSizeMb does not say (Node's default). */
const DEFAULT_STACK_MB = 4;

/** Why a batch failed, as its jobs' errors word it. */
interface Failure {
  readonly error: unknown;
  readonly message: string;
  /** How the thread ended, e.g. 'exited with code 3'. */
  readonly cause: string;
  /** The batch never left: it could not be cloned. */
  readonly neverSent: boolean;
  /** A thread had started the batch (and died while running one of its jobs, or between two). */
  readonly started: boolean;
}

/**
 * How deep a value may nest for a thread with a stack of `stackSizeMb` to read it: reading
 * takes up to about 640 bytes of stack per level (V8's deserializer, measured on Node 20),
 * and the thread needs some stack of its own.
 */
function readableDepth(stackSizeMb: number): number {
  return Math.max(64, Math.floor((stackSizeMb * 1024 * 1024 - 256 * 1024) / 640));
}

/**
 * The file piscina loads in each pool thread: the bundle's pool-entry.cjs, whichever copy of
 * multiloop starts the pool. CommonJS on purpose: piscina require()s its worker file before it
 * tries import(), and under a require hook that compiles ES modules (tsx's) a required
 * pool-worker.js would bring a second, CommonJS copy of multiloop into the thread, beside the
 * one the jobs' modules import. The entry loads the bundle's pool-worker.js with import().
 */
function poolWorkerPath(): string {
  return fileURLToPath(bundleFile('pool-entry.cjs'));
}

/** The key of a WorkerFn when its object is new: functions equal by module and export share run times. */
function fnKey(fn: WorkerFn): string {
  return `${fn.exportName}\0${fn.moduleUrl}`;
}

/** One piscina task: its jobs, their state slots, and its abort switch. */
interface Batch {
  /** The number its outcome messages carry. */
  readonly id: number;
  readonly jobs: JobFuture[];
  /** Per job its state, then the id of the thread that runs the batch (0 until one does). */
  readonly slots: Int32Array;
  /** Per job, the number it returned. */
  readonly values: Float64Array;
  readonly controller: AbortController | null;
  /** When it was sent (performance.now()). */
  readonly sentAt: number;
  /** Its expected run time in milliseconds, by the measured run times of its functions. */
  readonly estimate: number;
  /** Jobs still carried by this batch: those moved to another batch are not. */
  owned: number;
}

/**
 * The future of one submitted job. `cancel()` consults the batch's state slot, so a job that
 * a pool thread already started is not reported cancelled.
 */
class JobFuture extends ConcurrentFuture<unknown> {
  readonly engine: PoolEngine;
  readonly fn: WorkerFn;
  /** The arguments, kept until the job settles in case a dead thread never reached it. */
  args: unknown[];
  /** The state slots of the batch carrying the job; null while it waits in the executor's queue. */
  slots: Int32Array | null = null;
  index = 0;
  batch: Batch | null = null;
  /** Sends that failed before reaching a thread. */
  attempts = 0;
  /** Whether the job must travel alone (its batch could not be sent whole). */
  solo = false;
  /** Whether its arguments moved buffers to the thread its batch went to: it can run there only. */
  pinned = false;
  /** The values of registered context variables it carries (internal/travel.ts), or null. */
  carried: CarriedContext | null = null;

  constructor(engine: PoolEngine, fn: WorkerFn, args: unknown[]) {
    super();
    this.engine = engine;
    this.fn = fn;
    this.args = args;
  }

  override cancel(): boolean {
    return this.engine.cancel(this);
  }

  override _describeWork(): string {
    return `job ${describeWorkerFn(this.fn)} in the pool, ${this.running() ? 'running' : 'queued'}`;
  }

  override running(): boolean {
    if (super.running()) return true;
    const slots = this.slots;
    if (slots === null || this.done()) return false;
    // DONE_*: the thread finished it, and its outcome is on the way.
    const state = Atomics.load(slots, this.index);
    return state === RUNNING || state >= DONE_POSTED;
  }

  /** Record that the job started, as the thread's slot says. */
  markRunning(): void {
    if (!super.running()) this._setRunningOrNotifyCancel();
  }

  /** Cancel the future itself, the job being out of the pool's reach. */
  cancelFuture(): boolean {
    return super.cancel();
  }
}

/** piscina's class, required (it is CommonJS) when the first pool is made: a thread that makes no pool never loads it. */
let piscinaClass: typeof Piscina | null = null;

function loadPiscina(): typeof Piscina {
  piscinaClass ??= (createRequire(import.meta.url)('piscina') as { Piscina: typeof Piscina }).Piscina;
  return piscinaClass;
}

/** The engine behind `PiscinaExecutor`: its queue, batching and pool. */
class PoolEngine {
  readonly pool: Piscina;
  readonly maxThreads: number;
  readonly maxQueue: number;
  readonly abortRunning: boolean;
  /** Batches the pool holds at most: two per thread, one when a job may be aborted (it ends its thread). */
  readonly #maxInFlight: number;

  readonly #queue = new Deque<JobFuture>(64);
  /** Live jobs in the queue (cancelled ones are skipped lazily). */
  #queued = 0;
  /** Batches sent and not settled. */
  readonly #inFlight = new Set<Batch>();
  #jobsInFlight = 0;
  #flushScheduled = false;

  #shutdown = false;
  #terminated = false;
  #waitingShutdown = false;
  #closed: Promise<void> | null = null;
  #onIdle: (() => void) | null = null;

  #completed = 0;
  #cancelled = 0;
  #batches = 0;
  #jobsSent = 0;
  #moved = 0;
  #stealTimer: NodeJS.Timeout | null = null;

  /** Batches sent whose jobs are not all settled yet, by number: outcome messages name them. */
  readonly #byId = new Map<number, Batch>();
  #lastBatchId = 0;
  /** Each pool thread's results port, by thread id; the last error of a message that could not be read there. */
  readonly #resultPorts = new Map<number, { port: MessagePort; unreadable: Error | null }>();
  /** Threads whose results port closed: every outcome they sent was read. */
  readonly #finishedThreads = new Set<number>();
  /** Batches whose thread's results port has not arrived yet, waiting to be collected. */
  readonly #awaitingPort = new Map<number, Array<() => void>>();
  /** Arguments nested deeper than this may be more than a pool thread's stack can read: they are refused. */
  readonly #maxDepth: number;

  /** Milliseconds per job, by WorkerFn object and by module and export. */
  readonly #estimates = new WeakMap<WorkerFn, number>();
  readonly #estimatesByKey = new Map<string, number>();

  constructor(options: ValidOptions) {
    this.maxThreads = options.maxThreads;
    this.maxQueue = options.maxQueue;
    this.abortRunning = options.abortRunning;
    this.#maxInFlight = options.abortRunning ? options.maxThreads : options.maxThreads * 2;
    this.pool = new (loadPiscina())({
      filename: poolWorkerPath(),
      execArgv: threadExecArgv(),
      maxThreads: options.maxThreads,
      minThreads: options.minThreads,
      idleTimeout: options.idleTimeout,
      // 'sync' parks an idle thread in Atomics.wait, which freezes its event loop: whatever a
      // job left pending (a timer, a stream, a promise chain it did not return) would stall
      // until the next task arrives, maybe forever. 'async' waits with Atomics.waitAsync, so the
      // thread's loop keeps turning between tasks; its extra cost is paid per batch, not per job.
      atomics: 'async',
      concurrentTasksPerWorker: options.abortRunning ? 1 : 2,
      ...(options.resourceLimits === undefined ? {} : { resourceLimits: options.resourceLimits }),
    });
    // piscina reports a thread that dies while idle, or a slow close, as 'error' events; an
    // EventEmitter without a listener would throw them at the process.
    this.pool.on('error', (error: unknown) => logger.error('pool thread failed outside any job', error));
    this.pool.on('message', (message: unknown) => {
      if (isResultsPortMessage(message)) this.#addResultsPort(message);
      else if (isTypeScriptPortMessage(message)) serveTypeScript(message.port);
    });
    this.#maxDepth = readableDepth(options.resourceLimits?.stackSizeMb ?? DEFAULT_STACK_MB);
  }

  submit(candidate: unknown, args: unknown[]): JobFuture {
    if (this.#shutdown) throw new RuntimeError('cannot schedule new futures after shutdown');
    const fn = checkWorkerFn(candidate, 'submit()');
    const job = new JobFuture(this, fn, args);
    if (travelling.size !== 0) {
      // A CLIENT span of the job when calls are spanned (multiloop/otel), ending with it.
      const span = callSpans?.client(fn.exportName) ?? null;
      try {
        job.carried = span === null ? carriedContext(_currentVars()) : span.run(() => carriedContext(_currentVars()));
      } catch (error) {
        const failure = new TypeError(`cannot send ${describeWorkerFn(fn)} to a pool thread: ${(error as Error).message}`, { cause: error });
        span?.end(failure);
        job._setException(failure);
        return job;
      }
      if (span !== null) endWhenDone(span, job);
    }
    let callbacks: _Callbacks | null = null;
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (arg === null || (typeof arg !== 'object' && typeof arg !== 'function' && typeof arg !== 'symbol')) continue;
      if (_isComlinkProxy(arg)) {
        // It stays here, and runs in the loop of the caller each time the job calls it.
        callbacks ??= new _Callbacks(_getEventLoop());
        args[i] = callbacks.send(arg);
        continue;
      }
      const found = findUncloneable(arg, `argument ${i + 1}`);
      if (found !== null) {
        callbacks?.release();
        job._setException(new TypeError(`cannot send ${describeWorkerFn(fn)} to a pool thread: ${describeUncloneable(found)}`));
        return job;
      }
      // A request a pool thread cannot read would hang in piscina for good: refuse it here.
      if (nestedDeeperThan(arg, this.#maxDepth)) {
        callbacks?.release();
        job._setException(
          new RangeError(
            `cannot send ${describeWorkerFn(fn)} to a pool thread: argument ${i + 1} is nested deeper than ${this.#maxDepth} levels, ` +
              'more than a pool thread can be sure to read with its stack (resourceLimits.stackSizeMb)',
          ),
        );
        return job;
      }
      try {
        args[i] = toWire(arg, `argument ${i + 1}`);
      } catch (error) {
        callbacks?.release();
        job._setException(new TypeError(`cannot send ${describeWorkerFn(fn)} to a pool thread: ${(error as Error).message}`, { cause: error }));
        return job;
      }
    }
    callbacks?.releaseWhenDone(job);
    // Jobs that free threads will take at the next flush do not wait.
    if (this.#queued - (this.#maxInFlight - this.#inFlight.size) >= this.maxQueue) {
      callbacks?.release();
      job._setException(new RuntimeError(`the executor's queue is full (maxQueue ${this.maxQueue})`));
      return job;
    }
    this.#queue.push(job);
    this.#queued++;
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      queueMicrotask(this.#flush);
    }
    return job;
  }

  cancel(job: JobFuture): boolean {
    if (job.done()) return job.cancelled();
    const slots = job.slots;
    if (slots === null) {
      // Still in the executor's queue: the dispatcher skips it.
      this.#queued--;
      this.#cancelled++;
      job.cancelFuture();
      this.#checkIdle();
      return true;
    }
    const previous = Atomics.compareExchange(slots, job.index, QUEUED, CANCELLED);
    if (previous === QUEUED || previous === CANCELLED) {
      this.#cancelled++;
      return job.cancelFuture();
    }
    if (previous === RUNNING && this.abortRunning && job.batch?.controller != null) {
      this.#cancelled++;
      job.batch.controller.abort();
      return job.cancelFuture();
    }
    // concurrent.futures: a job that runs (or ran) cannot be cancelled; it is asked to stop
    // through its jobSignal(), and runs on if it ignores that.
    if (previous === RUNNING && Atomics.compareExchange(slots, job.index, RUNNING, ABORT_REQUESTED) === RUNNING) {
      Atomics.notify(slots, job.index);
    }
    job.markRunning();
    return false;
  }

  shutdown(wait: boolean, cancelFutures: boolean): Promise<void> {
    if (this.#shutdown && !wait && this.#waitingShutdown) {
      this.#terminate();
      return Promise.resolve();
    }
    this.#shutdown = true;
    if (cancelFutures) this.#cancelWaiting();
    this.#closed ??= new Promise<void>((resolve) => {
      this.#onIdle = resolve;
      this.#checkIdle();
    }).then(() => this.pool.destroy());
    if (!wait) return Promise.resolve();
    this.#waitingShutdown = true;
    return this.#closed.finally(() => {
      this.#waitingShutdown = false;
    });
  }

  statistics(): ExecutorStatistics {
    const pool = this.pool;
    const histogram = pool.histogram as unknown as { runTime: PiscinaSummary; waitTime: PiscinaSummary };
    return {
      threads: pool.threads.length,
      maxThreads: this.maxThreads,
      queueSize: this.#queued,
      inFlight: this.#jobsInFlight,
      completed: this.#completed,
      cancelled: this.#cancelled,
      batches: this.#batches,
      jobsSent: this.#jobsSent,
      moved: this.#moved,
      utilization: pool.utilization,
      runTime: summarize(histogram.runTime),
      waitTime: summarize(histogram.waitTime),
    };
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false;
    this.#dispatch();
  };

  #dispatch(): void {
    while (this.#inFlight.size < this.#maxInFlight && this.#queued > 0 && !this.#terminated) {
      const size = this.abortRunning ? 1 : Math.ceil(this.#queued / (this.#maxInFlight - this.#inFlight.size));
      const jobs = this.#take(size);
      if (jobs.length === 0) {
        // Only cancelled jobs were left: the count of live ones must agree.
        this.#queued = 0;
        break;
      }
      this.#jobsSent += jobs.length;
      this.#send(jobs);
    }
  }

  /** Take up to `size` live jobs from the queue, within the batch budget. */
  #take(size: number): JobFuture[] {
    const queue = this.#queue;
    const jobs: JobFuture[] = [];
    let cost = 0;
    let lastFn: WorkerFn | null = null;
    let lastCost = 0;
    while (jobs.length < size) {
      const job = queue.peek();
      if (job === undefined) break;
      if (job.done()) {
        queue.shift();
        continue;
      }
      if (job.fn !== lastFn) {
        lastFn = job.fn;
        lastCost = this.#estimate(job.fn);
      }
      if (jobs.length > 0 && (job.solo || cost + lastCost > BATCH_BUDGET_MS)) break;
      queue.shift();
      this.#queued--;
      jobs.push(job);
      cost += lastCost;
      if (job.solo) break;
    }
    return jobs;
  }

  #send(jobs: JobFuture[]): void {
    const count = jobs.length;
    if (count === 0) return;
    // One buffer: a number per job, then a state per job and the id of the thread that runs the batch.
    const memory = new SharedArrayBuffer(count * Float64Array.BYTES_PER_ELEMENT + (count + 1) * Int32Array.BYTES_PER_ELEMENT);
    const values = new Float64Array(memory, 0, count);
    const slots = new Int32Array(memory, count * Float64Array.BYTES_PER_ELEMENT, count + 1);
    const controller = this.abortRunning ? new AbortController() : null;
    let estimate = 0;
    let measured: WorkerFn | null = null;
    let measure = 0;
    for (const job of jobs) {
      if (job.fn !== measured) {
        measured = job.fn;
        measure = this.#estimate(job.fn);
      }
      estimate += measure;
    }
    const id = ++this.#lastBatchId;
    const batch: Batch = { id, jobs, slots, values, controller, sentAt: performance.now(), estimate, owned: count };
    const fns: string[] = [];
    const meta = new Int32Array(count * 2);
    const args: unknown[] = [];
    const transfer: Transferable[] = [];
    let seen: Map<WorkerFn, number> | null = null;
    let lastFn: WorkerFn | null = null;
    let lastAt = -1;
    let contexts: Array<CarriedContext | null> | null = null;
    for (let i = 0; i < count; i++) {
      const job = jobs[i] as JobFuture;
      if (job.carried !== null) (contexts ??= new Array<CarriedContext | null>(count).fill(null))[i] = job.carried;
      job.slots = slots;
      job.index = i;
      job.batch = batch;
      const fn = job.fn;
      if (fn !== lastFn) {
        seen ??= new Map();
        let at = seen.get(fn);
        if (at === undefined) {
          at = fns.length >> 1;
          fns.push(fn.moduleUrl, fn.exportName);
          seen.set(fn, at);
        }
        lastFn = fn;
        lastAt = at;
      }
      const jobArgs = job.args;
      meta[i * 2] = lastAt;
      meta[i * 2 + 1] = jobArgs.length;
      for (let j = 0; j < jobArgs.length; j++) args.push(jobArgs[j]);
      const before = transfer.length;
      collectTransfers(jobArgs, transfer);
      if (transfer.length > before) job.pinned = true;
    }
    const request: BatchRequest = contexts === null ? { id, fns, jobs: meta, args, slots, values } : { id, fns, jobs: meta, args, slots, values, contexts };
    this.#inFlight.add(batch);
    this.#byId.set(id, batch);
    this.#jobsInFlight += count;
    this.#batches++;
    this.pool
      .run(request, {
        // piscina infers its transfer list type from MessagePort.postMessage, whose overloads differ
        // across @types/node majors; the list is what postMessage takes on every one.
        ...(transfer.length === 0 ? {} : { transferList: transfer as unknown as PiscinaTransferList }),
        ...(controller === null ? {} : { signal: controller.signal }),
      })
      .then(
        (response: BatchResponse) => this.#settle(batch, response, seen),
        (error: unknown) => this.#fail(batch, error),
      );
  }

  /** The batch ended in its thread: collect its outcomes, and keep the pool busy. */
  #settle(batch: Batch, response: BatchResponse, fns: Map<WorkerFn, number> | null): void {
    this.#inFlight.delete(batch);
    this.#jobsInFlight -= batch.owned;
    if (response.ran > 0 && fns !== null) this.#learn(fns, response.ms / response.ran);
    this.#collect(batch, null);
    this.#dispatch();
    if (this.#queued === 0) this.#steal();
    this.#checkIdle();
  }

  /** The piscina task failed: its thread died, was ended, or the batch could not be sent. */
  #fail(batch: Batch, error: unknown): void {
    this.#inFlight.delete(batch);
    this.#jobsInFlight -= batch.owned;
    const message = String((error as { message?: unknown } | null)?.message ?? error);
    const name = (error as { name?: unknown } | null)?.name;
    const exited = /^worker exited with code: (-?\d+)/.exec(message);
    let cause: string;
    if (this.#terminated) cause = 'was ended by shutdown';
    else if (exited !== null) cause = `exited with code ${exited[1]}`;
    else cause = `crashed with an uncaught ${String(name ?? 'error')}: ${message}`;
    const neverSent = name === 'DataCloneError' && batch.jobs.every((_, i) => Atomics.load(batch.slots, i) === QUEUED);
    const started = Atomics.load(batch.slots, batch.jobs.length) !== 0;
    this.#collect(batch, { error, message, cause, neverSent, started });
    this.#dispatch();
    this.#checkIdle();
  }

  /**
   * Settle the jobs of a batch that ended (`failure` null) or failed: first from the outcomes its
   * thread posted, read from the thread's results port (once that port has arrived: it is
   * posted before any job runs, but may come later than the batch's end), then by their states:
   * values in shared memory, a job running when the thread died fails, a job never started goes
   * back to the queue.
   */
  #collect(batch: Batch, failure: Failure | null): void {
    const thread = Atomics.load(batch.slots, batch.jobs.length);
    if (thread === 0 || this.#finishedThreads.has(thread)) {
      this.#finish(batch, failure, null);
      return;
    }
    const entry = this.#resultPorts.get(thread);
    if (entry !== undefined) {
      this.#drain(entry);
      this.#finish(batch, failure, entry.unreadable);
      return;
    }
    let waiting = this.#awaitingPort.get(thread);
    if (waiting === undefined) this.#awaitingPort.set(thread, (waiting = []));
    waiting.push(() => {
      const arrived = this.#resultPorts.get(thread);
      if (arrived !== undefined) this.#drain(arrived);
      this.#finish(batch, failure, arrived?.unreadable ?? null);
      this.#dispatch();
      this.#checkIdle();
    });
  }

  #finish(batch: Batch, failure: Failure | null, unreadable: Error | null): void {
    const { jobs, slots, values } = batch;
    this.#byId.delete(batch.id);
    const retry: JobFuture[] = [];
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i] as JobFuture;
      if (job.batch !== batch) continue;
      job.batch = null;
      if (job.done()) {
        job.args = NO_ARGS;
        continue;
      }
      const state = failure === null ? Atomics.load(slots, i) : Atomics.compareExchange(slots, i, QUEUED, CANCELLED);
      switch (state) {
        case DONE_NUMBER:
          this.#completeJob(job, values[i]);
          break;
        case DONE_UNDEFINED:
          this.#completeJob(job, undefined);
          break;
        case DONE_NULL:
          this.#completeJob(job, null);
          break;
        case DONE_TRUE:
          this.#completeJob(job, true);
          break;
        case DONE_FALSE:
          this.#completeJob(job, false);
          break;
        case DONE_POSTED: {
          // Posted, and its message drained: it is the one that could not be read here.
          const reason = unreadable === null ? 'its message was lost' : `${unreadable.name}: ${unreadable.message}`;
          const what = describeWorkerFn(job.fn);
          this.#failJob(job, new RangeError(`the outcome of ${what} could not be read in this thread (${reason})`, { cause: unreadable ?? undefined }));
          break;
        }
        case RUNNING:
        case ABORT_REQUESTED:
          if (failure !== null) {
            const what = describeWorkerFn(job.fn);
            this.#failJob(job, new RuntimeError(`the pool thread running ${what} ${failure.cause}`, { cause: failure.error }));
          }
          break;
        case QUEUED:
          if (failure !== null) this.#requeue(job, failure, retry);
          break;
        default:
          break;
      }
    }
    for (let i = retry.length - 1; i >= 0; i--) this.#queue.unshift(retry[i] as JobFuture);
    this.#queued += retry.length;
  }

  /** A job whose batch failed before it started: it goes again, unless it cannot. */
  #requeue(job: JobFuture, failure: Failure, retry: JobFuture[]): void {
    const what = describeWorkerFn(job.fn);
    job.slots = null;
    if (this.#terminated) {
      this.#cancelled++;
      job.args = NO_ARGS;
      job.cancelFuture();
    } else if (failure.neverSent && job.solo) {
      this.#failJob(job, new TypeError(`cannot send ${what} to a pool thread: ${failure.message}`, { cause: failure.error }));
    } else if (job.pinned && !failure.neverSent) {
      this.#failJob(
        job,
        new RuntimeError(`cannot start ${what}: the pool thread it was sent to ${failure.cause}, and the buffers it moved there went with it`, {
          cause: failure.error,
        }),
      );
    } else if (failure.neverSent || !failure.started) {
      // A batch that could not be sent whole goes again one job at a time, to find the culprit;
      // a batch no thread started goes again a few times (a thread that dies while starting
      // must not make it go round forever). Jobs a thread skipped as it died go again freely.
      if (failure.neverSent) job.solo = true;
      if (++job.attempts > MAX_ATTEMPTS) {
        this.#failJob(job, new RuntimeError(`cannot start ${what}: the pool thread ${failure.cause}`, { cause: failure.error }));
      } else retry.push(job);
    } else {
      retry.push(job);
    }
  }

  /** Take a pool thread's results port, and collect the batches that waited for it. */
  #addResultsPort({ thread, port }: ResultsPortMessage): void {
    const entry = { port, unreadable: null as Error | null };
    port.unref();
    // Closed once drained after its thread ended: every outcome that thread sent was read.
    port.once('close', () => {
      this.#resultPorts.delete(thread);
      this.#finishedThreads.add(thread);
    });
    this.#resultPorts.set(thread, entry);
    const waiting = this.#awaitingPort.get(thread);
    if (waiting === undefined) return;
    this.#awaitingPort.delete(thread);
    for (const collect of waiting) collect();
  }

  /** Settle the jobs whose outcomes wait on a results port; remember a message that could not be read. */
  #drain(entry: { port: MessagePort; unreadable: Error | null }): void {
    for (;;) {
      let message: { message: unknown } | undefined;
      try {
        message = receiveMessageOnPort(entry.port);
      } catch (error) {
        entry.unreadable = error as Error;
        continue;
      }
      if (message === undefined) return;
      const [batchId, at, payload] = message.message as Outcome;
      const batch = this.#byId.get(batchId);
      const job = batch?.jobs[at < 0 ? ~at : at];
      if (job === undefined || job.batch !== batch || job.done()) continue;
      if (at < 0) {
        this.#failJob(job, decodeError(payload as EncodedError) as Error);
        continue;
      }
      let value: unknown;
      try {
        value = fromWire(payload);
      } catch (error) {
        this.#failJob(job, error as Error);
        continue;
      }
      this.#completeJob(job, value);
    }
  }

  #completeJob(job: JobFuture, value: unknown): void {
    job.args = NO_ARGS;
    this.#completed++;
    job._setResult(value);
  }

  /**
   * Move the jobs of the batch that waited longest for a thread, past twice its expected run
   * time, into a new batch; when none waited that long yet, check again when one will have.
   */
  readonly #steal = (): void => {
    if (this.#stealTimer !== null) {
      clearTimeout(this.#stealTimer);
      this.#stealTimer = null;
    }
    if (this.abortRunning || this.#terminated || this.#queued > 0 || this.#inFlight.size >= this.#maxInFlight) return;
    const now = performance.now();
    let victim: Batch | null = null;
    let nextCheck = Infinity;
    for (const batch of this.#inFlight) {
      if (!untouched(batch.slots, batch.jobs.length)) continue;
      const due = batch.sentAt + 2 * Math.max(batch.estimate, BATCH_BUDGET_MS);
      if (due > now) nextCheck = Math.min(nextCheck, due);
      else if (victim === null || batch.sentAt < victim.sentAt) victim = batch;
    }
    if (victim === null) {
      if (nextCheck !== Infinity) this.#stealTimer = setTimeout(this.#steal, nextCheck - now + 1).unref();
      return;
    }
    const { jobs, slots } = victim;
    const stolen: JobFuture[] = [];
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i] as JobFuture;
      // A job whose buffers moved to the victim's thread stays there: they cannot be sent twice.
      if (job.pinned || job.batch !== victim) continue;
      if (Atomics.compareExchange(slots, i, QUEUED, CANCELLED) === QUEUED) stolen.push(job);
    }
    if (stolen.length === 0) return;
    victim.owned -= stolen.length;
    this.#jobsInFlight -= stolen.length;
    this.#moved += stolen.length;
    this.#send(stolen);
  };

  /** Cancel the jobs of batches in flight that no thread started. */
  #cancelUnstarted(): void {
    for (const batch of this.#inFlight) {
      const { jobs, slots } = batch;
      for (let i = 0; i < jobs.length; i++) {
        const job = jobs[i] as JobFuture;
        if (job.batch !== batch || job.done()) continue;
        if (Atomics.compareExchange(slots, i, QUEUED, CANCELLED) !== QUEUED) continue;
        this.#cancelled++;
        job.cancelFuture();
      }
    }
  }

  #failJob(job: JobFuture, error: Error): void {
    job.args = NO_ARGS;
    this.#completed++;
    job._setException(error);
  }

  #estimate(fn: WorkerFn): number {
    let ms = this.#estimates.get(fn);
    if (ms === undefined) {
      ms = this.#estimatesByKey.get(fnKey(fn));
      if (ms === undefined) return BATCH_BUDGET_MS;
      this.#estimates.set(fn, ms);
    }
    return ms;
  }

  #learn(fns: Map<WorkerFn, number>, msPerJob: number): void {
    const measured = Math.max(msPerJob, 1e-6);
    for (const fn of fns.keys()) {
      const key = fnKey(fn);
      const old = this.#estimatesByKey.get(key);
      const ms = old === undefined ? measured : (old + measured) / 2;
      if (this.#estimatesByKey.size > 1024) this.#estimatesByKey.clear();
      this.#estimatesByKey.set(key, ms);
      this.#estimates.set(fn, ms);
    }
  }

  /** Cancel every job not started: those in the queue and those a thread has not reached. */
  #cancelWaiting(): void {
    for (let job = this.#queue.shift(); job !== undefined; job = this.#queue.shift()) {
      if (job.done()) continue;
      this.#cancelled++;
      job.cancelFuture();
    }
    this.#queued = 0;
    this.#cancelUnstarted();
  }

  /** Cancel what waits and end the threads, with the jobs running in them. */
  #terminate(): void {
    if (this.#terminated) return;
    this.#terminated = true;
    this.#cancelWaiting();
    void this.pool.destroy();
  }

  #checkIdle(): void {
    if (this.#inFlight.size === 0 && this.#stealTimer !== null) {
      clearTimeout(this.#stealTimer);
      this.#stealTimer = null;
    }
    if (this.#onIdle !== null && this.#inFlight.size === 0 && this.#queued === 0 && this.#awaitingPort.size === 0) {
      const resolve = this.#onIdle;
      this.#onIdle = null;
      resolve();
    }
  }
}

/** Whether no thread started a job of the batch yet (of its `count` jobs). */
function untouched(slots: Int32Array, count: number): boolean {
  let waiting = false;
  for (let i = 0; i < count; i++) {
    const state = Atomics.load(slots, i);
    if (state === QUEUED) waiting = true;
    else if (state !== CANCELLED) return false;
  }
  return waiting;
}

/** A histogram summary as piscina gives it, in milliseconds. */
interface PiscinaSummary {
  mean: number;
  stddev: number;
  min: number;
  max: number;
  p50: number;
  p90: number;
  p99: number;
}

function summarize(summary: PiscinaSummary | undefined): TimeSummary {
  // An empty histogram reports NaN or sentinel extremes.
  if (summary === undefined || !(summary.max > 0) || !Number.isFinite(summary.mean)) {
    return { mean: 0, stddev: 0, min: 0, max: 0, p50: 0, p90: 0, p99: 0 };
  }
  const { mean, stddev, min, max, p50, p90, p99 } = summary;
  return { mean, stddev, min, max, p50, p90, p99 };
}

interface ValidOptions {
  maxThreads: number;
  minThreads: number;
  idleTimeout: number;
  maxQueue: number;
  resourceLimits: ResourceLimits | undefined;
  abortRunning: boolean;
}

function checkInteger(value: unknown, name: string, what: string, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new TypeError(`options.${name} must be ${what}`);
  if (value < min) throw new RangeError(`options.${name} must be ${what}`);
  return value;
}

function validate(options: PiscinaExecutorOptions | undefined): ValidOptions {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object') throw new TypeError(`options must be an object, got ${repr(options)}`);
  const maxThreads =
    options.maxThreads === undefined ? availableParallelism() : checkInteger(options.maxThreads, 'maxThreads', 'a positive integer', 1);
  const minThreads =
    options.minThreads === undefined ? 0 : checkInteger(options.minThreads, 'minThreads', 'a non-negative integer', 0);
  if (minThreads > maxThreads) throw new RangeError('options.minThreads and options.maxThreads must not conflict');
  let idleTimeout = 10_000;
  if (options.idleTimeout !== undefined) {
    idleTimeout = options.idleTimeout;
    if (typeof idleTimeout !== 'number' || Number.isNaN(idleTimeout)) {
      throw new TypeError('options.idleTimeout must be a non-negative number of milliseconds');
    }
    if (idleTimeout < 0) throw new RangeError('options.idleTimeout must be a non-negative number of milliseconds');
  }
  let maxQueue = Infinity;
  if (options.maxQueue === 'auto') maxQueue = maxThreads ** 2;
  else if (options.maxQueue !== undefined && options.maxQueue !== Infinity) {
    maxQueue = checkInteger(options.maxQueue, 'maxQueue', "a non-negative integer, Infinity or 'auto'", 0);
  }
  const resourceLimits = options.resourceLimits;
  if (resourceLimits !== undefined && (typeof resourceLimits !== 'object' || resourceLimits === null)) {
    throw new TypeError('options.resourceLimits must be an object');
  }
  const abortRunning = options.abortRunning ?? false;
  if (typeof abortRunning !== 'boolean') throw new TypeError('options.abortRunning must be a boolean');
  return { maxThreads, minThreads, idleTimeout, maxQueue, resourceLimits, abortRunning };
}

/**
 * Run WorkerFns in a piscina pool of worker threads: the default executor, in the role of
 * asyncio's ThreadPoolExecutor.
 *
 * A pool thread imports each module once and calls the named export (sync or async); arguments
 * and results cross by structured clone, buffers marked with `move()` are transferred. A job
 * that throws fails its future with the error rebuilt here (class, message, stack, cause, own
 * properties). A thread that exits or crashes fails the job it ran with a RuntimeError naming
 * the cause; the pool starts a new thread and other jobs go on.
 *
 * Cancelling the future of a job still waiting removes it: it never runs. A running job keeps
 * running and `cancel()` returns false, as with asyncio, but its `jobSignal()` is aborted, so a
 * job that watches it can stop; an executor made with `abortRunning: true` ends the job's thread. Jobs submitted in one synchronous burst
 * travel to the threads in batches; an idle executor does not keep the process alive.
 *
 * @example
 * ```ts
 * const executor = new PiscinaExecutor({ maxThreads: 2 });
 * const hash = workerFn(new URL('./hash.js', import.meta.url), 'sha256');
 * const digest = yield* wrapFuture(executor.submit(hash, move(bytes)));
 * await executor.shutdown();
 * ```
 */
export class PiscinaExecutor implements Executor {
  readonly #engine: PoolEngine;

  /** Validate `options` and prepare the pool; threads start with the first job unless `minThreads` asks otherwise. */
  constructor(options?: PiscinaExecutorOptions) {
    this.#engine = new PoolEngine(validate(options));
  }

  /**
   * Queue `fn(...args)` in the pool; cancelling a queued job removes it from the queue (submit).
   * After `shutdown()`, RuntimeError. An argument that cannot be cloned fails the future.
   *
   * @example
   * ```ts
   * const cf = executor.submit(workerFn(url, 'add'), 40, 2);
   * cf.addDoneCallback((f) => console.log(f.result()));
   * ```
   */
  submit<A extends unknown[], R>(fn: WorkerFn<A, R>, ...args: A): ConcurrentFuture<R> {
    return this.#engine.submit(fn, args) as ConcurrentFuture<unknown> as ConcurrentFuture<R>;
  }

  /**
   * Stop accepting jobs and close the pool once the submitted jobs are done (shutdown).
   * `cancelFutures` cancels the jobs still waiting. With `wait` the Promise settles when the
   * threads are gone; without, at once. Called without `wait` while an earlier
   * `shutdown(true)` still waits, it stops waiting: the jobs running are ended with their
   * threads (their futures fail) and waiting ones are cancelled; this is what the loop's
   * `shutdownDefaultExecutor(timeout)` does on timeout, so a stuck job never hangs the process.
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
   * Report the queue, the threads and the batching so far (Trio-style statistics()).
   *
   * @example
   * ```ts
   * const { queueSize, utilization, jobsSent, batches } = executor.statistics();
   * ```
   */
  statistics(): ExecutorStatistics {
    return this.#engine.statistics();
  }

  /** The repr, also in `util.inspect` and console.log. */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    const { threads, maxThreads, queueSize, inFlight, completed } = this.#engine.statistics();
    return `<PiscinaExecutor threads=${threads}/${maxThreads} queued=${queueSize} in_flight=${inFlight} completed=${completed}>`;
  }
}

/**
 * Create the executor a loop uses when `runInExecutor` is given null: a PiscinaExecutor with
 * one thread per core (ThreadPoolExecutor's default role).
 *
 * @example
 * ```ts
 * const executor = createDefaultExecutor();
 * ```
 */
export function createDefaultExecutor(): Executor {
  return new PiscinaExecutor();
}
