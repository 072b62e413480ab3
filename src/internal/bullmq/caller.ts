/**
 * The engine behind `BullMQExecutor` (src/bullmq.ts gives it a BullMQ queue through `QueuePort`):
 * its queue of calls, how they are packed into BullMQ jobs, how their outcomes are read and
 * settled, cancellation, and what it does while its server is away. It reaches the store (Redis,
 * PostgreSQL) only through a QueuePort and its CallerChannel (channels.ts).
 *
 * Packing, as the local pool does it: calls submitted in one synchronous burst are flushed
 * together on the next microtask, as one `addBulk`. A BullMQ job carries several calls, about
 * BATCH_BUDGET_MS of work by the run times the workers measured for each function and at most
 * MAX_CALLS_PER_JOB; a function never measured yet sends one call alone (its probe) and holds
 * the others until the probe's run time is known, so a burst of slow calls is never packed into
 * one job while other workers idle, and a lone call keeps its latency.
 *
 * Every call settles once: outcomes are applied only to calls not done, so an outcome that
 * arrives twice (a job run again after its worker died, or sent again after the server lost it) is
 * dropped. While the server is unreachable the calls wait; past `unreachableTimeout` they fail with a
 * RuntimeError saying so. When the server comes back, jobs it lost (a restart without persistence)
 * are sent again — at least once, as BullMQ promises.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CancelledError, RuntimeError } from '../../exceptions.js';
import type { EventLoop } from '../../base-events.js';
import { logger } from '../../log.js';
import { describeWorkerFn, type WorkerFn } from '../../worker-fn.js';
import type { BullMQExecutorStatistics } from '../../bullmq.js';
import { ConcurrentFuture } from '../concurrent-future.js';
import { repr } from '../format.js';
import { _getRunningLoop } from '../running.js';
import { callSpans, carriedContext, endWhenDone, travelling, type CarriedContext } from '../travel.js';
import { _currentVars } from '../../contextvars.js';
import type { AddedJob, CallerChannel, ChannelEvents, OutcomeSink, QueuePort } from './channels.js';
import {
  MAX_OUTCOME_BYTES,
  OUTCOME_ERROR,
  OUTCOME_JOB_ERROR,
  OUTCOME_VALUE,
  decodeOutcomes,
  encodeRequest,
  unwireFailure,
  unwireValue,
  whyUnserializable,
  wireArgs,
  type JobData,
  type JobRequest,
} from './wire.js';

/** A BullMQ job carries about this many milliseconds of work, by the measured run times of its calls. */
const BATCH_BUDGET_MS = 10;
/** The most calls one BullMQ job carries. */
const MAX_CALLS_PER_JOB = 512;
/** A job whose request is larger (base64 characters) is split, unless it carries one call. */
const SPLIT_JOB_BYTES = 1 << 20;
/** Requests in JSON are this small at most (see `jsonExact`): below it, a limit is checked against their JSON text. */
const JSON_REQUEST_BOUND = 1 << 16;
/** How long the other calls of a function never measured wait for its first call's run time. */
const PROBE_WAIT_MS = 1000;
/** An `addBulk` that fails is tried this many times before its calls fail. */
const MAX_ADD_ATTEMPTS = 3;
const NO_ARGS: unknown[] = [];

/** The engine's settings, checked by src/bullmq.ts. */
export interface CallerOptions {
  /** The server's name in messages ('Redis', 'PostgreSQL'). */
  readonly server: string;
  /** `host:port` of the server, for messages. */
  readonly where: string;
  /** Seconds calls wait for an unreachable server before they fail (Infinity: for good). */
  readonly unreachableTimeout: number;
  /** The most bytes one job's data may take: a call that alone needs more fails with a RangeError. */
  readonly maxJobBytes: number;
}


/** The key under which run times are learnt: functions equal by module and export share them. */
function fnKey(fn: WorkerFn): string {
  return `${fn.exportName}\0${fn.moduleUrl}`;
}

/** The BullMQ job that carries calls, as sent. */
interface SentJob {
  readonly id: string;
  readonly calls: CallFuture[];
  /** Calls not done yet. */
  left: number;
}

/** The future of one call: `cancel()` asks the store and the workers to drop or stop it. */
class CallFuture extends ConcurrentFuture<unknown> {
  readonly engine: CallerEngine;
  readonly fn: WorkerFn;
  readonly key: string;
  /** The arguments as `wireArgs` made them, kept until the call settles in case the server loses its job. */
  args: unknown[];
  /** The arguments as given, until the call is first sent: messages name what in them cannot cross. */
  given: unknown[];
  job: SentJob | null = null;
  index = 0;
  /** Whether this call is the probe that measures its function. */
  probe = false;
  /** Sends that failed. */
  attempts = 0;
  /** The caller's values of registered context variables (internal/travel.ts), or null. */
  carried: CarriedContext | null = null;

  constructor(engine: CallerEngine, fn: WorkerFn, key: string, args: unknown[], given: unknown[]) {
    super();
    this.engine = engine;
    this.fn = fn;
    this.key = key;
    this.args = args;
    this.given = given;
  }

  override cancel(): boolean {
    return this.engine.cancel(this);
  }

  /** Cancel the future itself. */
  cancelFuture(): boolean {
    return super.cancel();
  }

  /** @internal What ps() says a task awaiting it waits for. */
  override _describeWork(): string {
    const job = this.job;
    const state = job === null ? 'not sent yet' : `job ${job.id}, ${this.running() ? 'running' : 'queued'}`;
    return `BullMQ call ${describeWorkerFn(this.fn)} on ${this.engine.server} at ${this.engine.where}, ${state}`;
  }
}

/** The engine behind `BullMQExecutor`. */
export class CallerEngine implements OutcomeSink, ChannelEvents {
  /** Names this executor's jobs and outcomes. */
  readonly id = randomBytes(6).toString('hex');
  /** The server's name in messages ('Redis', 'PostgreSQL'). */
  readonly server: string;
  readonly #where: string;
  /** `host:port` of the server, for messages. */
  get where(): string {
    return this.#where;
  }
  readonly #unreachableMs: number;
  readonly #maxJobBytes: number;

  #port: QueuePort | null = null;
  /** The loop that last submitted a call (or made the executor): its exception handler hears of bad outcome entries. */
  #loop: EventLoop | null = _getRunningLoop();
  #channel: CallerChannel | null = null;
  #connectFailure: Error | null = null;

  /** Calls to send at the next flush. */
  #queue: CallFuture[] = [];
  #flushScheduled = false;
  /** Calls of a function being measured, by function key, waiting for its probe. */
  readonly #held = new Map<string, CallFuture[]>();
  readonly #probes = new Map<string, NodeJS.Timeout>();
  /** Milliseconds per call, by function key. */
  readonly #estimates = new Map<string, number>();
  /** Jobs sent whose calls are not all done, by job id. */
  readonly #sent = new Map<string, SentJob>();
  #seq = 0;
  /** Futures not done. */
  #live = 0;

  #shutdown = false;
  #closing = false;
  #waitingShutdown = false;
  #closed: Promise<void> | null = null;
  #onIdle: (() => void) | null = null;

  /** When the server became unreachable (performance.now()), or null while it is reachable. */
  #downSince: number | null;
  #downTimer: NodeJS.Timeout | null = null;
  /** The server was unreachable for longer than unreachableTimeout: calls fail at once until it is back. */
  #expired = false;
  #everConnected = false;
  #lastError = 'not connected yet';

  #completed = 0;
  #cancelled = 0;
  #jobsSent = 0;
  #callsSent = 0;
  #resent = 0;

  constructor(connect: (executorId: string) => Promise<QueuePort>, options: CallerOptions) {
    this.server = options.server;
    this.#where = options.where;
    this.#unreachableMs = options.unreachableTimeout * 1000;
    this.#maxJobBytes = options.maxJobBytes;
    this.#downSince = null;
    this.#down('not connected yet');
    void this.#start(connect);
  }

  async #start(connect: (executorId: string) => Promise<QueuePort>): Promise<void> {
    let port: QueuePort;
    try {
      port = await connect(this.id);
    } catch (error) {
      this.#failConnect(error as Error);
      return;
    }
    this.#port = port;
    port.onError((error) => {
      this.#lastError = error.message;
    });
    if (this.#closing) {
      await port.close(true).catch(() => undefined);
      return;
    }
    this.#scheduleFlush();
    let channel: CallerChannel;
    try {
      channel = await port.channel;
    } catch (error) {
      if (!this.#closing) this.#failConnect(error as Error);
      return;
    }
    if (this.#closing) {
      await channel.close().catch(() => undefined);
      return;
    }
    this.#channel = channel;
    channel.watch(this);
    this.#read(channel).catch((error: unknown) => logger.error('BullMQExecutor: the reader of outcomes stopped', error));
  }

  /** @internal ChannelEvents: a connection was lost. */
  down(): void {
    this.#down(null);
  }

  /** @internal ChannelEvents: every connection is usable. */
  up(): void {
    this.#checkUp();
  }

  /** @internal ChannelEvents: the last error, for the message of an unreachable server. */
  error(message: string): void {
    this.#lastError = message;
  }

  /** The connection could not be made for good (a bad option, a server too old, a database not migrated): every call fails. */
  #failConnect(error: Error): void {
    this.#connectFailure = new RuntimeError(`cannot use the BullMQ queue on ${this.server} at ${this.#where}: ${error.message}`, { cause: error });
    this.#failAll(this.#connectFailure);
  }

  submit(fn: WorkerFn, given: unknown[]): ConcurrentFuture<unknown> {
    if (this.#shutdown) throw new RuntimeError('cannot schedule new futures after shutdown');
    this.#loop = _getRunningLoop() ?? this.#loop;
    const what = describeWorkerFn(fn);
    let args: unknown[];
    let failure: Error | null = this.#connectFailure ?? (this.#expired ? this.#unreachableError() : null);
    try {
      args = wireArgs(given, what);
    } catch (error) {
      args = NO_ARGS;
      failure ??= error as Error;
    }
    const call = new CallFuture(this, fn, fnKey(fn), args, given);
    if (travelling.size !== 0 && failure === null) {
      // A CLIENT span of the call when calls are spanned (multiloop/otel), ending with it.
      const span = callSpans?.client(fn.exportName) ?? null;
      try {
        call.carried = span === null ? carriedContext(_currentVars()) : span.run(() => carriedContext(_currentVars()));
      } catch (error) {
        failure = new TypeError(`cannot send ${what} to a BullMQ worker: ${(error as Error).message}`, { cause: error });
      }
      if (span !== null) endWhenDone(span, call);
    }
    this.#live++;
    if (failure !== null) {
      this.#failCall(call, failure);
      return call;
    }
    this.#queue.push(call);
    this.#scheduleFlush();
    return call;
  }

  cancel(call: CallFuture): boolean {
    if (call.done()) return call.cancelled();
    if (call.running()) {
      // concurrent.futures: a call a worker started cannot be cancelled; it is asked to stop
      // through its jobSignal(), and its future settles with what it returns or throws.
      const job = call.job;
      if (job !== null) void this.#requestCancel(job, call.index, true);
      return false;
    }
    call.cancelFuture();
    this.#cancelled++;
    this.#finished(call);
    const job = call.job;
    if (job !== null) void this.#requestCancel(job, call.index);
    return true;
  }

  shutdown(wait: boolean, cancelFutures: boolean): Promise<void> {
    if (this.#shutdown && !wait && this.#waitingShutdown) {
      // Stop waiting: every call not done is cancelled (the running ones are asked to stop).
      this.#cancelAll(true);
      return Promise.resolve();
    }
    this.#shutdown = true;
    if (cancelFutures) this.#cancelAll(false);
    this.#closed ??= new Promise<void>((resolve) => {
      this.#onIdle = resolve;
      this.#checkIdle();
    }).then(() => this.#close());
    if (!wait) return Promise.resolve();
    this.#waitingShutdown = true;
    return this.#closed.finally(() => {
      this.#waitingShutdown = false;
    });
  }

  statistics(): BullMQExecutorStatistics {
    let held = 0;
    for (const calls of this.#held.values()) held += calls.length;
    let inFlight = 0;
    for (const job of this.#sent.values()) inFlight += job.left;
    return {
      queueSize: this.#queue.length + held,
      inFlight,
      completed: this.#completed,
      cancelled: this.#cancelled,
      jobsSent: this.#jobsSent,
      callsSent: this.#callsSent,
      resent: this.#resent,
    };
  }

  // ───────────────────────────── sending ─────────────────────────────

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(this.#flush);
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false;
    if (this.#port === null || this.#closing) return;
    const calls = this.#queue;
    this.#queue = [];
    const jobs: CallFuture[][] = [];
    let current: CallFuture[] | null = null;
    let cost = 0;
    for (const call of calls) {
      if (call.done()) continue;
      const estimate = this.#estimates.get(call.key);
      if (estimate === undefined) {
        if (this.#probes.has(call.key)) {
          let held = this.#held.get(call.key);
          if (held === undefined) this.#held.set(call.key, (held = []));
          held.push(call);
        } else {
          // The first call of a function never measured travels alone and measures it.
          call.probe = true;
          this.#probes.set(call.key, setTimeout(() => this.#probeTimedOut(call.key), PROBE_WAIT_MS).unref());
          jobs.push([call]);
        }
        continue;
      }
      if (current === null || current.length >= MAX_CALLS_PER_JOB || (current.length > 0 && cost + estimate > BATCH_BUDGET_MS)) {
        current = [];
        cost = 0;
        jobs.push(current);
      }
      current.push(call);
      cost += estimate;
    }
    this.#send(jobs);
  };

  /** The request of a job carrying `calls`. */
  #request(calls: readonly CallFuture[]): JobRequest {
    const fns: string[] = [];
    const at: number[] = new Array<number>(calls.length);
    const args: unknown[][] = new Array<unknown[]>(calls.length);
    let contexts: Array<CarriedContext | null> | null = null;
    let lastFn: WorkerFn | null = null;
    let lastAt = -1;
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i] as CallFuture;
      if (call.fn !== lastFn) {
        lastFn = call.fn;
        lastAt = -1;
        for (let f = 0; f < fns.length; f += 2) {
          if (fns[f] === call.fn.moduleUrl && fns[f + 1] === call.fn.exportName) lastAt = f >> 1;
        }
        if (lastAt === -1) {
          lastAt = fns.length >> 1;
          fns.push(call.fn.moduleUrl, call.fn.exportName);
        }
      }
      at[i] = lastAt;
      args[i] = call.args;
      if (call.carried !== null) (contexts ??= new Array<CarriedContext | null>(calls.length).fill(null))[i] = call.carried;
    }
    return contexts === null ? { fns, at, args } : { fns, at, args, contexts };
  }

  /** Encode each job's request (failing the calls whose arguments cannot be serialized) and add them all at once. */
  #send(jobs: CallFuture[][]): void {
    const added: AddedJob[] = [];
    const sent: SentJob[] = [];
    const pending = jobs.reverse();
    for (let calls = pending.pop(); calls !== undefined; calls = pending.pop()) {
      let data: JobData;
      try {
        data = encodeRequest(this.#request(calls));
      } catch (error) {
        calls = this.#dropUnserializable(calls, error);
        if (calls.length === 0) continue;
        try {
          data = encodeRequest(this.#request(calls));
        } catch (again) {
          for (const call of calls) this.#failCall(call, new TypeError(`cannot send ${describeWorkerFn(call.fn)} to a BullMQ worker: ${(again as Error).message}`, { cause: again }));
          continue;
        }
      }
      const bytes = 'c' in data ? data.c.length : this.#maxJobBytes < JSON_REQUEST_BOUND ? JSON.stringify(data).length : 0;
      if (bytes > Math.min(SPLIT_JOB_BYTES, this.#maxJobBytes) && calls.length > 1) {
        // Big arguments: the job goes as two, each half as big.
        const half = calls.length >> 1;
        pending.push(calls.slice(half), calls.slice(0, half));
        continue;
      }
      if (bytes > this.#maxJobBytes) {
        const call = calls[0] as CallFuture;
        this.#failCall(call, new RangeError(`cannot send ${describeWorkerFn(call.fn)} to a BullMQ worker: its job would take ${bytes} bytes, more than options.maxJobBytes (${this.#maxJobBytes})`));
        continue;
      }
      const id = `${this.id}-${++this.#seq}`;
      const job: SentJob = { id, calls, left: calls.length };
      for (let i = 0; i < calls.length; i++) {
        const call = calls[i] as CallFuture;
        call.job = job;
        call.index = i;
        call.given = NO_ARGS;
      }
      this.#sent.set(id, job);
      sent.push(job);
      added.push({ name: this.id, data, opts: { jobId: id } });
    }
    if (added.length === 0) return;
    this.#jobsSent += added.length;
    for (const job of sent) this.#callsSent += job.calls.length;
    (this.#port as QueuePort).addBulk(added).catch((error: unknown) => this.#addFailed(sent, error));
  }

  /** The calls of `calls` whose arguments serialize; the others fail, saying what cannot cross. */
  #dropUnserializable(calls: CallFuture[], error: unknown): CallFuture[] {
    const kept: CallFuture[] = [];
    for (const call of calls) {
      const reason = whyUnserializable(call.args, call.given.length === call.args.length ? call.given : call.args);
      if (reason === null) kept.push(call);
      else this.#failCall(call, new TypeError(`cannot send ${describeWorkerFn(call.fn)} to a BullMQ worker: ${reason}`, { cause: error }));
    }
    return kept;
  }

  /** An addBulk failed: its calls go again a few times, then fail. */
  #addFailed(jobs: SentJob[], error: unknown): void {
    if (this.#closing) return;
    const message = String((error as Error | null)?.message ?? error);
    this.#lastError = message;
    for (const job of jobs) {
      if (this.#sent.get(job.id) !== job) continue;
      this.#sent.delete(job.id);
      for (const call of job.calls) {
        if (call.done()) continue;
        call.job = null;
        if (++call.attempts >= MAX_ADD_ATTEMPTS) {
          this.#failCall(call, new RuntimeError(`cannot add ${describeWorkerFn(call.fn)} to the BullMQ queue on ${this.server} at ${this.#where}: ${message}`, { cause: error }));
        } else {
          this.#queue.push(call);
        }
      }
    }
    this.#scheduleFlush();
  }

  /**
   * Ask the store and the workers to drop (if waiting) or stop (if running) call `index` of
   * `job`; with `stop`, a call its worker started: it is not skipped, its jobSignal() aborts.
   */
  async #requestCancel(job: SentJob, index: number, stop = false): Promise<void> {
    const port = this.#port;
    if (port === null) return;
    try {
      const channel = await port.channel;
      if (stop) {
        await channel.stop(job.id, index);
        return;
      }
      const requests: Array<Promise<unknown>> = [channel.cancel(job.id, index, job.calls.length > 1)];
      // Once no call of it is wanted any more, the job goes, unless a worker holds it.
      if (job.left === 0) {
        requests.push(port.remove(job.id).then((removed) => (removed ? channel.forgetCancelled(job.id) : undefined)));
      }
      await Promise.all(requests);
    } catch (error) {
      if (!this.#closing) logger.warning(`BullMQExecutor: cannot ask the workers to cancel job ${job.id}: ${(error as Error).message}`);
    }
  }

  // ───────────────────────────── measuring ─────────────────────────────

  /**
   * Take in a run time the workers measured. The estimate falls halfway to a shorter run at once,
   * and rises by an eighth of the way to a longer one: a run time is wall time, and one call of
   * a worker the machine paused (a loaded machine, a GC) would otherwise double it and split the
   * next bursts into many jobs. A function that did become slower still shows it within a job:
   * each of its calls reports a run time.
   */
  #learn(key: string, ms: number): void {
    const measured = Math.max(ms, 1e-6);
    const old = this.#estimates.get(key);
    if (old === undefined && this.#estimates.size >= 1024) this.#estimates.clear();
    this.#estimates.set(key, old === undefined ? measured : measured < old ? (old + measured) / 2 : old + (measured - old) / 8);
    if (this.#probes.has(key)) this.#endProbe(key);
  }

  #probeTimedOut(key: string): void {
    this.#probes.delete(key);
    // Not back after PROBE_WAIT_MS: a call of it is long, whatever its exact time.
    if (!this.#estimates.has(key)) this.#estimates.set(key, PROBE_WAIT_MS);
    this.#release(key);
  }

  #endProbe(key: string): void {
    const timer = this.#probes.get(key);
    if (timer !== undefined) clearTimeout(timer);
    this.#probes.delete(key);
    this.#release(key);
  }

  /** Send the calls held for `key`'s probe (a new probe goes first when it is still not measured). */
  #release(key: string): void {
    const held = this.#held.get(key);
    if (held === undefined) return;
    this.#held.delete(key);
    for (const call of held) this.#queue.push(call);
    this.#scheduleFlush();
  }

  // ───────────────────────────── outcomes ─────────────────────────────

  async #read(channel: CallerChannel): Promise<void> {
    while (!this.#closing) {
      let count: number;
      try {
        count = await channel.read(this);
      } catch (error) {
        if (this.#closing) return;
        this.#lastError = (error as Error).message;
        await new Promise((resolve) => setTimeout(resolve, 200));
        continue;
      }
      if (count === 0 || this.#closing) continue;
      // The loops whose futures just settled run first: a caller that sends its next call at
      // once writes it before the reader's connection writes its next read.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * @internal OutcomeSink: an outcome entry. Anyone who can write to the store can write there:
   * an entry is data to check, and one that is wrong settles nothing, reported, while the others
   * are applied.
   */
  outcome(id: string, entry: Buffer): void {
    try {
      this.#apply(entry);
    } catch (error) {
      this.#reportBadEntry(id, error);
    }
  }

  /**
   * @internal OutcomeSink: an entry too large to read, reported as a dropped one; the calls not
   * done of the job its first bytes name (a worker never writes one: its outcomes take at most its
   * maxOutcomeBytes) fail, saying so, since their outcomes cannot arrive any more.
   */
  oversized(id: string, bytes: number, head: Buffer): void {
    const limit = `more than the ${MAX_OUTCOME_BYTES} an entry may take`;
    this.#reportBadEntry(id, new RangeError(`the entry is ${bytes} bytes, ${limit}: it was not read`));
    // An entry begins with its job's id (JSON text, or a v8 string after a few bytes of header).
    const named = new RegExp(`${this.id}-(\\d{1,15})(?!\\d)`).exec(head.toString('latin1'));
    const job = named === null ? undefined : this.#sent.get(`${this.id}-${named[1]}`);
    if (job === undefined) return;
    const outcomes = (this.#channel as CallerChannel).outcomes;
    for (const call of job.calls) {
      if (call.done()) continue;
      this.#failCall(
        call,
        new RuntimeError(
          `the outcome of ${describeWorkerFn(call.fn)} cannot be read: outcome entry ${id} on ${outcomes}, of its job ${job.id}, is ${bytes} bytes, ${limit}`,
        ),
      );
    }
  }

  /** @internal OutcomeSink: a worker's start notice; the calls of the job not done are running (cancel() cannot stop their futures any more). */
  started(jobId: string): void {
    const job = this.#sent.get(jobId);
    if (job === undefined) return;
    for (const call of job.calls) if (!call.done() && !call.running()) call._setRunningOrNotifyCancel();
  }

  /** An outcome entry that is not one: the loop's exception handler hears of it (the logger when no loop used this executor). */
  #reportBadEntry(id: string, error: unknown): void {
    const message = `BullMQExecutor: outcome entry ${id} on ${(this.#channel as CallerChannel).outcomes} was dropped: ${String((error as Error | null)?.message ?? error)}`;
    const loop = this.#loop;
    if (loop === null || loop.isClosed()) {
      logger.error(message, error);
      return;
    }
    loop.callExceptionHandler({ message, exception: error instanceof Error ? error : new TypeError(String(error)) });
  }

  /**
   * Settle the calls an outcome entry names, each at most once; a TypeError saying what is
   * wrong when the entry is not what a worker writes (nothing of it is applied then).
   */
  #apply(entry: Buffer): void {
    if (entry.length > MAX_OUTCOME_BYTES) throw new TypeError(`the entry is ${entry.length} bytes, more than the ${MAX_OUTCOME_BYTES} an entry may take`);
    const flat = decodeOutcomes(entry);
    const job = this.#sent.get(flat[0] as string);
    if (job === undefined) return;
    const size = job.calls.length;
    // Checked whole before any of it settles a call: half an entry applied is worse than none.
    for (let i = 1; i + 3 < flat.length; i += 4) {
      const index = flat[i];
      const kind = flat[i + 1];
      const ms = flat[i + 3];
      if (kind === OUTCOME_JOB_ERROR) {
        if (index !== -1) throw new TypeError(`a job error names call ${repr(index)} (it names -1)`);
      } else if (kind !== OUTCOME_VALUE && kind !== OUTCOME_ERROR) {
        throw new TypeError(`outcome kind ${repr(kind)} is none of value (${OUTCOME_VALUE}), error (${OUTCOME_ERROR}), job error (${OUTCOME_JOB_ERROR})`);
      } else if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= size) {
        throw new TypeError(`call index ${repr(index)} is not one of job ${job.id}'s ${size} call(s)`);
      }
      if (typeof ms !== 'number' || !(ms >= 0) || ms === Infinity) throw new TypeError(`the run time ${repr(ms)} of call ${repr(index)} is not a number of milliseconds`);
    }
    if ((flat.length - 1) % 4 !== 0) throw new TypeError(`it holds ${flat.length - 1} values after the job id, not a multiple of 4`);
    for (let i = 1; i + 3 < flat.length; i += 4) {
      const index = flat[i] as number;
      const kind = flat[i + 1] as number;
      const payload = flat[i + 2];
      const ms = flat[i + 3] as number;
      if (kind === OUTCOME_JOB_ERROR) {
        for (const call of job.calls) if (!call.done()) this.#failCall(call, this.#decodeFailure(payload));
        continue;
      }
      const call = job.calls[index] as CallFuture;
      if (call.done()) continue;
      this.#learn(call.key, ms);
      if (kind === OUTCOME_ERROR) {
        this.#failCall(call, this.#decodeFailure(payload));
        continue;
      }
      let value: unknown;
      try {
        value = unwireValue(payload);
      } catch (error) {
        this.#failCall(call, error as Error);
        continue;
      }
      this.#completeCall(call, value);
    }
  }

  #decodeFailure(payload: unknown): unknown {
    try {
      return unwireFailure(payload);
    } catch (error) {
      return error;
    }
  }

  #completeCall(call: CallFuture, value: unknown): void {
    call._setResult(value);
    this.#completed++;
    this.#finished(call);
  }

  #failCall(call: CallFuture, error: unknown): void {
    call._setException(error);
    this.#completed++;
    this.#finished(call);
  }

  /** Bookkeeping once `call` is done, whichever way. */
  #finished(call: CallFuture): void {
    call.args = NO_ARGS;
    call.given = NO_ARGS;
    const job = call.job;
    if (job !== null && --job.left === 0 && this.#sent.get(job.id) === job) this.#sent.delete(job.id);
    if (call.probe && this.#probes.has(call.key)) this.#endProbe(call.key);
    this.#live--;
    this.#checkIdle();
  }

  // ───────────────────────────── server away ─────────────────────────────

  /** The server became unreachable; `reason` says why when no error event said it first. */
  #down(reason: string | null): void {
    if (reason !== null) this.#lastError = reason;
    if (this.#closing || this.#downSince !== null) return;
    this.#downSince = performance.now();
    if (Number.isFinite(this.#unreachableMs)) this.#downTimer = setTimeout(this.#expire, this.#unreachableMs).unref();
  }

  #checkUp(): void {
    if (this.#channel?.usable !== true || this.#downSince === null) return;
    if (this.#downTimer !== null) clearTimeout(this.#downTimer);
    this.#downTimer = null;
    this.#downSince = null;
    this.#expired = false;
    if (this.#everConnected) void this.#recover();
    this.#everConnected = true;
  }

  readonly #expire = (): void => {
    this.#downTimer = null;
    this.#expired = true;
    this.#failAll(this.#unreachableError());
  };

  #unreachableError(): RuntimeError {
    const seconds = this.#unreachableMs / 1000;
    return new RuntimeError(
      `${this.server} at ${this.#where} has been unreachable for ${seconds} s (options.unreachableTimeout): the job's outcome cannot arrive ` +
        `(the job may still run once ${this.server} is back); last error: ${this.#lastError}`,
    );
  }

  /**
   * The server is back after an outage: read the outcomes it holds, then send again the jobs it no
   * longer has (it restarted without persistence), whose calls did not settle.
   */
  async #recover(): Promise<void> {
    const channel = this.#channel;
    if (channel === null || this.#sent.size === 0) return;
    try {
      await channel.readBacklog(this);
      const jobs = [...this.#sent.values()];
      const exists = await channel.jobsExist(jobs.map((job) => job.id));
      let lost = 0;
      for (let i = 0; i < jobs.length; i++) {
        const job = jobs[i] as SentJob;
        if (exists[i] === true || this.#sent.get(job.id) !== job) continue;
        this.#sent.delete(job.id);
        lost++;
        for (const call of job.calls) {
          if (call.done()) continue;
          call.job = null;
          this.#resent++;
          this.#queue.push(call);
        }
      }
      if (lost > 0) {
        logger.warning(`BullMQExecutor: ${this.server} at ${this.#where} lost ${lost} job(s) of this executor (restarted without persistence?); their calls were sent again`);
        this.#scheduleFlush();
      }
    } catch (error) {
      if (!this.#closing) logger.warning(`BullMQExecutor: cannot check the jobs ${this.server} holds after it came back: ${(error as Error).message}`);
    }
  }

  // ───────────────────────────── ending ─────────────────────────────

  /** Fail every call not done with `error`. */
  #failAll(error: Error): void {
    const calls: CallFuture[] = [...this.#queue];
    this.#queue = [];
    for (const held of this.#held.values()) calls.push(...held);
    this.#held.clear();
    for (const job of this.#sent.values()) calls.push(...job.calls);
    for (const call of calls) if (!call.done()) this.#failCall(call, error);
  }

  /** Cancel the calls no worker is known to have started (concurrent.futures' cancel_futures); with `started`, end those too (with CancelledError; their jobSignal() aborts). */
  #cancelAll(started: boolean): void {
    const calls: CallFuture[] = [...this.#queue];
    for (const held of this.#held.values()) calls.push(...held);
    for (const job of this.#sent.values()) calls.push(...job.calls);
    for (const call of calls) {
      if (call.done()) continue;
      if (!call.running()) this.cancel(call);
      else if (started) {
        this.cancel(call);
        // A running future cannot end cancelled: it ends with the error a cancelled one raises.
        this.#failCall(call, new CancelledError('the executor stopped waiting for this call (shutdown without wait): its worker was asked to stop it'));
      }
    }
  }

  #checkIdle(): void {
    if (this.#onIdle !== null && this.#live === 0) {
      const resolve = this.#onIdle;
      this.#onIdle = null;
      resolve();
    }
  }

  async #close(): Promise<void> {
    this.#closing = true;
    if (this.#downTimer !== null) clearTimeout(this.#downTimer);
    for (const timer of this.#probes.values()) clearTimeout(timer);
    this.#probes.clear();
    const port = this.#port;
    if (port === null) return;
    const channel = this.#channel;
    const connected = channel === null ? false : await channel.close().catch(() => false);
    await port.close(!connected).catch(() => undefined);
  }
}
