/**
 * The worker's side of `serveBullMQ` (src/bullmq.ts hands it each BullMQ job): it runs a job's
 * calls one after the other, imports only modules on the allow list, reports each call's outcome
 * to its executor's stream, and stops a call whose caller cancelled it.
 *
 * A job's calls run in order, each to its end (an async call is awaited, a coroutine runs as a
 * Task of the worker's loop), like one thread of a pool: the executor packs a job with about
 * 10 ms of work, so a job of many calls is a job of tiny ones. Synchronous calls run back to back
 * for up to SLICE_MS, then the runner lets the event loop turn, so BullMQ renews its locks, cancel
 * requests arrive, and outcomes go out.
 *
 * Outcomes that end in the same turn go out as one entry (see wire.ts). A job run again
 * — its worker died, BullMQ retries it, or it was handed back — skips the calls its marks say are
 * done or cancelled. A call that throws fails its caller's future on the job's last attempt;
 * before that the job fails as a whole after its other calls ran, and BullMQ retries it (with its
 * backoff), running again only the calls that failed.
 */
import { performance } from 'node:perf_hooks';
import { resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { EventLoop } from '../../base-events.js';
import { _isThenable, isCoroutine, type Coroutine } from '../../coroutines.js';
import { CancelledError, RuntimeError } from '../../exceptions.js';
import { _jobContext, _runAsJob, type JobSignalSource } from '../../job-signal.js';
import { logger } from '../../log.js';
import { typeName } from '../format.js';
import { isModuleSpecifier, moduleUrlOf, normalizeSpecifier, quoteName, shortName } from '../module-ref.js';
import { importUserModule } from '../ts-loader.js';
import { fromWire } from '../wire.js';
import { callSpans, contextFor, isCarriedContext, runInCarriedStores, type CallSpan, type CarriedContext } from '../travel.js';
import type { Context } from '../../contextvars.js';
import type { CallMarks, RunnerChannel } from './channels.js';
import {
  OUTCOME_ERROR,
  OUTCOME_JOB_ERROR,
  OUTCOME_VALUE,
  decodeRequest,
  encodeOutcomes,
  wireFailure,
  wireValue,
  type JobRequest,
  type Outcome,
} from './wire.js';
import { GUARDED_DECODE_BYTES, jobBytes, parsedData } from './unparsed.js';

/** Synchronous calls run back to back for this long before the event loop gets a turn. */
const SLICE_MS = 5;
/** Cancel requests for calls this process does not run (yet) are remembered, this many. */
const RECENT_CANCELS = 10_000;

/** What the runner needs of a BullMQ job. */
export interface JobLike {
  readonly id?: string | undefined;
  /** The id of the executor that sent it. */
  readonly name: string;
  readonly data: unknown;
  readonly attemptsMade: number;
  readonly attemptsStarted: number;
  readonly opts: { readonly attempts?: number | undefined };
}

/** How a job ended in this process. */
export type JobEnd = 'done' | 'handed-back';

/**
 * The modules a worker may import, as given (`./jobs/math.js`, `@acme/jobs`, a `file:` URL or
 * an absolute path), in the form jobs are compared in; a TypeError naming the entry otherwise.
 *
 * @example
 * ```ts
 * const allowed = allowList(['./jobs/math.js'], 'serveBullMQ()'); // Set { './jobs/math.js' }
 * ```
 */
export function allowList(allow: unknown, caller: string): Set<string> {
  if (!Array.isArray(allow)) throw new TypeError(`${caller}: options.allow must be an array of module specifiers, got ${typeName(allow)}`);
  const allowed = new Set<string>();
  allow.forEach((entry: unknown, i) => {
    if (isModuleSpecifier(entry)) allowed.add(normalizeSpecifier(entry));
    else if (entry instanceof URL || (typeof entry === 'string' && entry !== '' && !entry.includes('\0'))) {
      try {
        allowed.add(moduleUrlOf(entry, caller));
      } catch {
        throw new TypeError(`${caller}: options.allow[${i}] must be a module specifier (a package name or a ./relative path), a file: URL or an absolute path, got ${quoteName(String(entry))}`);
      }
    } else {
      throw new TypeError(`${caller}: options.allow[${i}] must be a module specifier (a package name or a ./relative path), a file: URL or an absolute path, got ${typeName(entry)}`);
    }
  });
  return allowed;
}

/** Add `key` to `recent`, forgetting the oldest past RECENT_CANCELS. */
function remember(recent: Set<string>, key: string): void {
  recent.add(key);
  if (recent.size > RECENT_CANCELS) recent.delete(recent.values().next().value as string);
}

/** A call running here: the source of its `jobSignal()`. */
class RunningCall implements JobSignalSource {
  #controller: AbortController | null = null;
  #aborted = false;

  signal(): AbortSignal {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(new CancelledError('the caller cancelled the job'));
    }
    return this.#controller.signal;
  }

  abort(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#controller?.abort(new CancelledError('the caller cancelled the job'));
  }
}

/** Outcomes of one job waiting to go out, and the writes that carry them. */
class Reporter {
  readonly #channel: RunnerChannel;
  readonly #executorId: string;
  readonly #jobId: string;
  readonly #describe: (index: number) => string;
  /** Bytes of outcomes this job may still write (`maxOutcomeBytes`, less what its entries took). */
  #budget: number;
  readonly #maxBytes: number;
  #pending: Outcome[] = [];
  #scheduled = false;
  /** The last write, so the final one follows it. */
  #last: Promise<void> = Promise.resolve();
  /** Writes begun and not yet ended. */
  #writing = 0;
  /** Whether a write failed. */
  #failed = false;

  constructor(channel: RunnerChannel, executorId: string, jobId: string, maxBytes: number, describe: (index: number) => string) {
    this.#budget = maxBytes;
    this.#maxBytes = maxBytes;
    this.#channel = channel;
    this.#executorId = executorId;
    this.#jobId = jobId;
    this.#describe = describe;
  }

  /**
   * Send `outcome` once the event loop turns (outcomes ending meanwhile travel with it); with
   * `last`, with the final flush that follows at once.
   */
  add(outcome: Outcome, last: boolean): void {
    this.#pending.push(outcome);
    if (last || this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#enqueue();
      // A write that fails here fails the final flush, which awaits it.
      this.#last.catch(() => undefined);
    });
  }

  /** Send what waits. */
  async flush(): Promise<void> {
    this.#enqueue();
    await this.#last;
  }

  /**
   * Write what waits after the writes before it (none once one failed: the job's flush then
   * fails, and BullMQ runs its undelivered calls again); with none in flight and none failed,
   * its commands go out now, not a turn later.
   */
  #enqueue(): void {
    const idle = this.#writing === 0 && !this.#failed;
    this.#writing++;
    this.#last = idle ? this.#write() : this.#last.then(() => this.#write());
    this.#last.then(
      () => {
        this.#writing--;
      },
      () => {
        this.#writing--;
        this.#failed = true;
      },
    );
  }

  async #write(): Promise<void> {
    const outcomes = this.#pending;
    this.#pending = [];
    if (outcomes.length === 0) return;
    let entry = encodeOutcomes(this.#jobId, outcomes, this.#describe);
    if (entry.length > this.#budget) {
      // Outcomes past the job's budget go as a short error each: a job of many calls that
      // return (or throw) big values cannot fill the store.
      for (const outcome of outcomes) {
        const failure = new RuntimeError(
          `the outcome of ${this.#describe(outcome[0])} was not sent back: the outcomes of job ${this.#jobId} would take more than ${this.#maxBytes} bytes (the worker's maxOutcomeBytes)`,
        );
        outcome[1] = OUTCOME_ERROR;
        outcome[2] = wireFailure(failure);
      }
      entry = encodeOutcomes(this.#jobId, outcomes, this.#describe);
    }
    this.#budget -= entry.length;
    // Every outcome marks its call done, a lone call too, and the marks stay until BullMQ
    // has the job completed (see JobRunner.jobCompleted): a job that lost its lock (the store frozen
    // past lockDuration) runs again, and must skip the calls whose outcomes went out.
    await this.#channel.report(
      this.#executorId,
      this.#jobId,
      entry,
      false,
      outcomes.map((outcome) => outcome[0]),
    );
  }
}

/** No call marked: a job read without its marks. */
const NONE_MARKED: CallMarks = { has: () => false };

/** A job being processed here: its running call, and the calls cancelled while it runs. */
interface JobState {
  readonly skip: Set<number>;
}

/** The settings of a runner. */
export interface RunnerOptions {
  /** The modules jobs may name (see `allowList`). */
  readonly allow: ReadonlySet<string>;
  /** The directory `./relative` specifiers resolve against. */
  readonly root: string;
  /** The loop coroutine jobs run in. */
  readonly loop: EventLoop;
  /** The most bytes a job's data may take: a larger job fails without being decoded. */
  readonly maxJobBytes: number;
  /** The most bytes of outcomes one job writes (see `Reporter`). */
  readonly maxOutcomeBytes: number;
  /** How often a job may lose its worker (BullMQ's maxStalledCount): a large job whose decoding killed more workers fails undecoded. */
  readonly maxStalledCount: number;
}

/** Runs the calls of BullMQ jobs in this process. */
export class JobRunner {
  readonly #allow: ReadonlySet<string>;
  readonly #rootUrl: string;
  readonly #loop: EventLoop;
  readonly #maxJobBytes: number;
  readonly #maxOutcomeBytes: number;
  readonly #maxStalledCount: number;
  #channel: RunnerChannel | null = null;

  /** Functions resolved, by `exportName \0 module`; modules imported, by module. */
  readonly #functions = new Map<string, (...args: unknown[]) => unknown>();
  readonly #modules = new Map<string, Promise<Record<string, unknown>>>();

  /** Calls running here, by `jobId index`. */
  readonly #running = new Map<string, RunningCall>();
  /** Jobs being processed here, by id. */
  readonly #jobs = new Map<string, JobState>();
  /** Cancel requests for calls not running here, `jobId index`, oldest first. */
  readonly #recentCancels = new Set<string>();
  /** Stop requests for calls not running here (yet), `jobId index`, oldest first. */
  readonly #recentStops = new Set<string>();
  /** Jobs whose every call this process accounted for, so a 'failed' event need not report them. */
  readonly #reported = new Set<string>();

  /** Set by `stopStarting()`: no call starts any more, jobs with calls left are handed back. */
  #stopping = false;
  /** Resolves when running calls are abandoned (`handBack()`). */
  #handBack: () => void = () => undefined;
  readonly #handedBack: Promise<'handed-back'>;

  constructor(options: RunnerOptions) {
    this.#allow = options.allow;
    this.#rootUrl = pathToFileURL(resolvePath(options.root) + '/').href;
    this.#loop = options.loop;
    this.#maxJobBytes = options.maxJobBytes;
    this.#maxOutcomeBytes = options.maxOutcomeBytes;
    this.#maxStalledCount = options.maxStalledCount;
    this.#handedBack = new Promise((resolve) => {
      this.#handBack = () => resolve('handed-back');
    });
  }

  /** Use `channel` for reports and marks. */
  attach(channel: RunnerChannel): void {
    this.#channel = channel;
  }

  /** A cancel request arrived on the cancel channel: `<jobId> <index>`. */
  cancelRequested(message: string): void {
    if (message.endsWith(' stop')) {
      // A call its caller knows started: it runs (or runs on) with its jobSignal() aborted.
      const key = message.slice(0, -5);
      const running = this.#running.get(key);
      if (running !== undefined) running.abort();
      else remember(this.#recentStops, key);
      return;
    }
    const running = this.#running.get(message);
    if (running !== undefined) {
      running.abort();
      return;
    }
    const space = message.lastIndexOf(' ');
    const job = this.#jobs.get(message.slice(0, space));
    if (job !== undefined) job.skip.add(Number(message.slice(space + 1)));
    remember(this.#recentCancels, message);
  }

  /** Start no more calls: jobs with calls left end as 'handed-back' once their running call ended. */
  stopStarting(): void {
    this.#stopping = true;
  }

  /** Stop waiting for running calls: their jobs end as 'handed-back' now (their outcomes are dropped). */
  handBack(): void {
    this.#stopping = true;
    for (const call of this.#running.values()) call.abort();
    this.#handBack();
  }

  /**
   * Run the calls of `job`; resolves 'done' once every call's outcome went out, 'handed-back'
   * when the runner stopped before (the caller moves the job back to wait). Throws to have
   * BullMQ retry the job when calls failed on an attempt before its last.
   */
  async process(job: JobLike): Promise<JobEnd> {
    const channel = this.#channel as RunnerChannel;
    const jobId = String(job.id);
    let request: JobRequest;
    try {
      // Large data comes unparsed (unparsed.ts): nothing large was built from it yet.
      const bytes = jobBytes(job.data);
      if (bytes > this.#maxJobBytes) {
        throw new RangeError(`job ${jobId} takes ${bytes} bytes, more than this worker's maxJobBytes (${this.#maxJobBytes}): it was not decoded`);
      }
      if (bytes > GUARDED_DECODE_BYTES) {
        // Counted in the store before parsing and decoding: a worker that dies doing so leaves the count behind.
        const begun = await channel.countDecode(jobId);
        if (begun - 1 > this.#maxStalledCount) throw new RuntimeError(this.#poisonMessage(jobId, begun - 1, bytes));
        request = decodeRequest(parsedData(job.data));
        channel.clearDecodes(jobId);
      } else {
        request = decodeRequest(parsedData(job.data));
      }
    } catch (error) {
      await this.#reportJobError(job.name, jobId, error);
      return 'done';
    }
    const count = request.at.length;
    const rerun = job.attemptsStarted > 1;
    const marked = count > 1 || rerun;
    let done = NONE_MARKED;
    let cancelled = NONE_MARKED;
    // The start notice goes before the job first waits: a lone call that ends at once needs none
    // (its outcome says more), the others must not be cancelled by their caller any more.
    let noticed = false;
    const notice = (): void => {
      if (noticed) return;
      noticed = true;
      this.#notice(job.name, jobId);
    };
    if (marked) {
      notice();
      [done, cancelled] = await channel.marks(jobId);
    }
    const final = job.attemptsMade + 1 >= Math.max(1, job.opts.attempts ?? 1);
    const describe = (index: number): string => this.#describe(request, index);
    const reporter = new Reporter(channel, job.name, jobId, this.#maxOutcomeBytes, describe);
    const state: JobState = { skip: new Set() };
    this.#jobs.set(jobId, state);
    let failed = 0;
    let left = 0;
    let handedBack = false;
    try {
      let sliceEnd = performance.now() + SLICE_MS;
      for (let i = 0; i < count; i++) {
        if (done.has(i) || cancelled.has(i)) continue;
        if (performance.now() > sliceEnd) {
          notice();
          await new Promise((resolve) => setImmediate(resolve));
          sliceEnd = performance.now() + SLICE_MS;
        }
        const key = `${jobId} ${i}`;
        if (state.skip.has(i) || this.#recentCancels.has(key)) continue;
        if (this.#stopping) {
          left++;
          continue;
        }
        let outcome = this.#run(request, i, key);
        if (!Array.isArray(outcome)) {
          notice();
          const ended = await Promise.race([outcome, this.#handedBack]);
          if (ended === 'handed-back') {
            handedBack = true;
            left++;
            continue;
          }
          outcome = ended;
        }
        if (outcome[1] === OUTCOME_ERROR && !final) failed++;
        else reporter.add(outcome, i === count - 1);
      }
    } finally {
      this.#jobs.delete(jobId);
    }
    if (handedBack || left > 0) {
      await reporter.flush();
      return 'handed-back';
    }
    if (failed > 0) {
      await reporter.flush();
      throw new RuntimeError(`${failed} of the ${count} calls of job ${jobId} failed; BullMQ runs them again (attempt ${job.attemptsMade + 2})`);
    }
    // Marked reported once its outcomes went out: a job whose last outcomes could not be written
    // fails, and its failure must reach its caller.
    await reporter.flush();
    this.#reported.add(jobId);
    if (this.#reported.size > RECENT_CANCELS) this.#reported.delete(this.#reported.values().next().value as string);
    return 'done';
  }

  /**
   * BullMQ has `job` completed: its marks go (kept until now so that a run of it after a lost
   * lock skips the calls whose outcomes went out).
   */
  jobCompleted(job: JobLike | undefined): void {
    if (job === undefined) return;
    (this.#channel as RunnerChannel).forget(String(job.id));
  }

  /**
   * BullMQ failed `job` for good without its calls' outcomes (it stalled too often, or a retry
   * ran out of attempts): its caller's calls fail with `error`.
   */
  jobFailed(job: JobLike | undefined, error: Error, final: boolean): void {
    if (job === undefined || !final) return;
    const jobId = String(job.id);
    if (this.#reported.has(jobId)) {
      this.jobCompleted(job);
      return;
    }
    const tell = async (): Promise<void> => {
      let message = `BullMQ failed job ${jobId}: ${error.message}`;
      const bytes = jobBytes(job.data);
      if (bytes > GUARDED_DECODE_BYTES) {
        // Its workers died: say so when it was while decoding it.
        const died = await (this.#channel as RunnerChannel).decodes(jobId);
        if (died > 0) message = `${message}; ${this.#poisonMessage(jobId, died, bytes)}`;
      }
      await this.#reportJobError(job.name, jobId, new RuntimeError(message, { cause: error }));
    };
    tell().catch((reason: unknown) => logger.error(`serveBullMQ: cannot report the failure of job ${jobId}`, reason));
  }

  /** Tell executor `executorId` that job `jobId` started here; a notice lost is a cancel() that returns true for a call that runs. */
  #notice(executorId: string, jobId: string): void {
    (this.#channel as RunnerChannel).notice(executorId, jobId);
  }

  /** Why a large job is not decoded again: `died` workers died decoding it. */
  #poisonMessage(jobId: string, died: number, bytes: number): string {
    return (
      `job ${jobId} (${bytes} bytes) was not decoded again: ${died} worker(s) died while decoding it (out of memory?), ` +
      `more than maxStalledCount (${this.#maxStalledCount}) allows`
    );
  }

  async #reportJobError(executorId: string, jobId: string, error: unknown): Promise<void> {
    const channel = this.#channel as RunnerChannel;
    const outcome: Outcome = [-1, OUTCOME_JOB_ERROR, wireFailure(error), 0];
    const entry = encodeOutcomes(jobId, [outcome], () => `job ${jobId}`);
    await channel.report(executorId, jobId, entry, true, []);
    channel.clearDecodes(jobId);
  }

  #describe(request: JobRequest, index: number): string {
    const at = request.at[index] as number;
    return `${shortName(String(request.fns[at * 2 + 1]))} of ${String(request.fns[at * 2])}`;
  }

  /** Run call `index`: its outcome at once when it ended synchronously, else a promise of it. */
  #run(request: JobRequest, index: number, key: string): Outcome | Promise<Outcome> {
    const at = request.at[index] as number;
    const spec = request.fns[at * 2];
    const exportName = request.fns[at * 2 + 1];
    if (typeof spec !== 'string' || typeof exportName !== 'string') {
      return [index, OUTCOME_ERROR, wireFailure(new TypeError('the job names its function wrongly')), 0];
    }
    const fn = this.#functions.get(`${exportName}\0${spec}`);
    if (fn !== undefined) return this.#invoke(fn, request, index, key, exportName, spec);
    return this.#resolve(spec, exportName).then(
      (resolved) => this.#invoke(resolved, request, index, key, exportName, spec),
      (error: unknown): Outcome => [index, OUTCOME_ERROR, wireFailure(error), 0],
    );
  }

  /** Import `spec` when it is on the allow list, and find its export `exportName`. */
  async #resolve(spec: string, exportName: string): Promise<(...args: unknown[]) => unknown> {
    const what = `${shortName(exportName)} of ${spec}`;
    const normalized = isModuleSpecifier(spec) ? normalizeSpecifier(spec) : spec;
    if (!this.#allow.has(normalized)) {
      throw new RuntimeError(
        `this worker does not run ${what}: the module ${quoteName(spec)} is not on its allow list (serveBullMQ's allow, the worker command's --allow), so it was not imported`,
      );
    }
    let loading = this.#modules.get(normalized);
    if (loading === undefined) {
      loading = this.#import(normalized, what);
      this.#modules.set(normalized, loading);
      // A module that failed to load is tried again by the next job (it may have been deployed since).
      loading.catch(() => this.#modules.delete(normalized));
    }
    const namespace = await loading;
    if (!Object.hasOwn(namespace, exportName)) {
      throw new TypeError(`cannot run ${what}: the module has no export named ${quoteName(exportName)}`);
    }
    const fn = namespace[exportName];
    if (typeof fn !== 'function') throw new TypeError(`cannot run ${what}: the export is not a function (it is ${typeName(fn)})`);
    this.#functions.set(`${exportName}\0${spec}`, fn as (...args: unknown[]) => unknown);
    return fn as (...args: unknown[]) => unknown;
  }

  async #import(spec: string, what: string): Promise<Record<string, unknown>> {
    const url = spec.startsWith('file:') ? spec : spec.startsWith('.') ? new URL(spec, this.#rootUrl).href : null;
    try {
      if (url !== null) return await importUserModule(url);
      return (await import(spec)) as Record<string, unknown>;
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      const target = url ?? spec;
      const message = String((error as Error | null)?.message);
      if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'ERR_UNSUPPORTED_DIR_IMPORT') && (message.includes(target.replace(/^file:\/\//, '')) || message.includes(`'${spec}'`))) {
        const missing = new Error(`cannot run ${what}: the module was not found${url === null ? '' : ` (${url})`}`, { cause: error });
        (missing as Error & { code: unknown }).code = code;
        throw missing;
      }
      throw error;
    }
  }

  #invoke(
    fn: (...args: unknown[]) => unknown,
    request: JobRequest,
    index: number,
    key: string,
    exportName: string,
    spec: string,
  ): Outcome | Promise<Outcome> {
    const raw = request.args[index];
    const args = Array.isArray(raw) ? raw : [];
    const call = new RunningCall();
    if (this.#recentStops.delete(key)) call.abort();
    this.#running.set(key, call);
    const started = performance.now();
    let result: unknown;
    let context: Context | null = null;
    let carried: CarriedContext | null = null;
    let span: CallSpan | null = null;
    try {
      for (let i = 0; i < args.length; i++) {
        const arg: unknown = args[i];
        if (typeof arg === 'object' && arg !== null) args[i] = fromWire(arg);
      }
      const arrived = request.contexts?.[index];
      // The caller's values: a function sees them until it first awaits (other jobs' calls
      // run meanwhile), a coroutine for the whole of its Task; its AsyncLocalStorage stores, across its awaits too.
      if (arrived !== null && arrived !== undefined && isCarriedContext(arrived)) {
        carried = arrived;
        context = contextFor(arrived);
      }
      const entered = context;
      const spans = callSpans;
      result =
        entered === null
          ? _runAsJob(call, () => fn(...args))
          : runInCarriedStores(carried, () => {
              const run = (): unknown => entered.run(() => _runAsJob(call, () => fn(...args)));
              if (spans === null) return run();
              // A SERVER span, child of what the call carried; it ends with the job.
              const inside = (span = spans.server(exportName));
              return inside.run(run);
            });
    } catch (error) {
      (span as CallSpan | null)?.end(error);
      this.#running.delete(key);
      return [index, OUTCOME_ERROR, wireFailure(error), performance.now() - started];
    }
    const served = span as CallSpan | null;
    if (isCoroutine(result)) result = this.#runTask(result, call, context, carried, served);
    else if (!_isThenable(result)) {
      served?.end(null);
      this.#running.delete(key);
      return this.#valueOutcome(index, result, performance.now() - started, exportName, spec);
    }
    return Promise.resolve(result).then(
      (value) => {
        served?.end(null);
        this.#running.delete(key);
        return this.#valueOutcome(index, value, performance.now() - started, exportName, spec);
      },
      (error: unknown): Outcome => {
        served?.end(error);
        this.#running.delete(key);
        return [index, OUTCOME_ERROR, wireFailure(error), performance.now() - started];
      },
    );
  }

  #valueOutcome(index: number, value: unknown, ms: number, exportName: string, spec: string): Outcome {
    try {
      return [index, OUTCOME_VALUE, wireValue(value, `${shortName(exportName)} of ${spec}`), ms];
    } catch (error) {
      return [index, OUTCOME_ERROR, wireFailure(error), ms];
    }
  }

  /** Run a coroutine job as a Task of the worker's loop, in a context (a copy of `carried`, the caller's values, when given) where `jobSignal()` finds `call`, and in the AsyncLocalStorage stores `stores` holds. */
  #runTask(coro: Coroutine<unknown>, call: RunningCall, carried: Context | null, stores: CarriedContext | null, span: CallSpan | null): Promise<unknown> {
    const loop = this.#loop;
    return new Promise((resolve, reject) => {
      loop.callSoonThreadsafe(() => {
        const context = carried === null ? _jobContext(call) : carried.run(() => _jobContext(call));
        const create = () => loop.createTask(coro, { context });
        const task = runInCarriedStores(stores, () => (span === null ? create() : span.run(create)));
        task.addDoneCallback((ended) => {
          if (ended.cancelled()) {
            reject(new CancelledError('the job\'s task was cancelled'));
            return;
          }
          const error = ended.exception();
          if (error !== null) reject(error);
          else resolve(ended.result());
        });
      });
    });
  }
}
