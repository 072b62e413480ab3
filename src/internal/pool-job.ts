/**
 * What travels between an executor and its pool threads, and the pool thread's side of it.
 *
 * Jobs travel in batches: one piscina task carries one or many jobs. Each batch has a
 * SharedArrayBuffer with one Int32 slot per job, the job's state, then one slot the thread
 * writes its id into when it starts the batch; both sides move a state with
 * `Atomics.compareExchange`, so a job cancelled while queued is skipped by the thread, and the
 * main thread knows whether a job already runs when it is cancelled:
 *
 *   QUEUED ──thread──▶ RUNNING ──thread──▶ DONE_* (its outcome is out of the thread)
 *     │                  └──main──▶ ABORT_REQUESTED ──thread──▶ DONE_*
 *     └──────main────▶ CANCELLED
 *
 * ABORT_REQUESTED asks a running job to stop: its `jobSignal()` is aborted. The signal is made
 * only when the job asks for it; it then waits on the job's slot with `Atomics.waitAsync`, which
 * the main thread notifies when it moves the slot to ABORT_REQUESTED and the thread notifies
 * when the job ends.
 *
 * A job's outcome leaves the thread the moment the job ends, never with the batch, so that a
 * thread that dies later in the batch (exit, uncaught error, out of memory, terminate) loses no
 * finished job: a number, boolean, null or undefined is written into the batch's shared memory
 * (no message at all); anything else, errors included, is posted on the thread's results port,
 * which the executor drains with `receiveMessageOnPort` when the batch ends or fails. Messages
 * queued on a port outlive the thread that posted them.
 */
// A LoopRef (a LoopThread passed to a job) is made a caller of its loop here.
import './loop-refs.js';
import { _enter, _exit, type Context } from '../contextvars.js';
import { callSpans, contextFor, isCarriedContext, runInCarriedStores, type CallSpan, type CarriedContext } from './travel.js';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { MessageChannel, parentPort, threadId, type MessagePort, type Transferable } from 'node:worker_threads';
import { _isThenable } from '../coroutines.js';
import { collectTransfers } from '../transfer.js';
import { encodeError, type EncodedError } from './errors.js';
import { typeName } from './format.js';
import { moduleUrlOf, quoteName, shortName } from './module-ref.js';
import { _compiledByStarter, importUserModule } from './ts-loader.js';
import { describeUncloneable, findUncloneable } from './uncloneable.js';
import { fromWire, toWire } from './wire.js';
import { _takeReceivedCallbacks } from '../comlink.js';
import { CancelledError } from '../exceptions.js';
import { _setPoolJobSignal } from '../job-signal.js';

/** The job waits: the thread has not reached it. */
export const QUEUED = 0;
/** The thread started the job. */
export const RUNNING = 1;
/** The main thread cancelled the job before it started; the thread skips it. */
export const CANCELLED = 2;
/** The job ended; its outcome (a value or an error) is on the thread's results port. */
export const DONE_POSTED = 3;
/** The job returned the number in its slot of the batch's `values`. */
export const DONE_NUMBER = 4;
/** The job returned undefined. */
export const DONE_UNDEFINED = 5;
/** The job returned null. */
export const DONE_NULL = 6;
/** The job returned true. */
export const DONE_TRUE = 7;
/** The job returned false. */
export const DONE_FALSE = 8;

/** The caller cancelled the running job: its `jobSignal()` is aborted; it may run on regardless. */
export const ABORT_REQUESTED = 9;

/** The key of the message by which a pool thread hands its results port to the executor. */
export const RESULTS_PORT = 'multiloop:results-port';

/**
 * Hand a pool thread's results port to the executor (through piscina's 'message' event).
 *
 * @example
 * ```ts
 * pool.on('message', (message) => { if (isResultsPortMessage(message)) ports.set(message.thread, message.port); });
 * ```
 */
export interface ResultsPortMessage {
  readonly [RESULTS_PORT]: true;
  /** The pool thread's id, as batches report it. */
  readonly thread: number;
  /** The port its outcomes arrive on. */
  readonly port: MessagePort;
}

/**
 * Carry a batch of jobs to a pool thread: the payload of one piscina task.
 *
 * @example
 * ```ts
 * const request: BatchRequest = { id: 7, fns: [url, 'add'], jobs: Int32Array.of(0, 2), args: [40, 2], slots, values };
 * ```
 */
export interface BatchRequest {
  /** The batch's number, which its outcome messages carry. */
  readonly id: number;
  /** The batch's distinct functions, flattened: module URL, export name, module URL, ... */
  readonly fns: string[];
  /**
   * Per job, two numbers: the position of its function in `fns` (counted in pairs) and how
   * many arguments it has. A typed array crosses as one copy of its bytes.
   */
  readonly jobs: Int32Array;
  /** The arguments of all jobs, one after the other: one flat array clones far faster than an array per job. */
  readonly args: unknown[];
  /** Per job, its state; then the id of the thread that runs the batch (0 until one does). Over a SharedArrayBuffer. */
  readonly slots: Int32Array;
  /** Per job, the number it returned (state DONE_NUMBER). Over a SharedArrayBuffer. */
  readonly values: Float64Array;
  /** Per job, the values of registered context variables it carries (internal/travel.ts); absent when no job carries any. */
  readonly contexts?: ReadonlyArray<CarriedContext | null>;
}

/**
 * Report, when a batch ends, what it cost (outcomes travel on their own).
 *
 * @example
 * ```ts
 * const { ran, ms } = (await pool.run(request)) as BatchResponse;
 * ```
 */
export interface BatchResponse {
  /** How many jobs ran (skipped ones excluded). */
  readonly ran: number;
  /** Milliseconds the jobs took, module loading excluded. */
  readonly ms: number;
}

/**
 * One outcome on a results port: `[batch id, job index, value]`, or `[batch id, ~job index,
 * encoded error]` for a job that failed.
 */
export type Outcome = [number, number, unknown];

/** A module namespace, as `import()` gives it. */
type Namespace = Record<string, unknown>;
/** A job's function. */
type JobFunction = (...args: unknown[]) => unknown;

/** Modules imported by this thread, by URL: each is imported once. */
const modules = new Map<string, Namespace>();
/** Resolved functions, by module URL and export name. */
const functions = new Map<string, JobFunction>();

/** Milliseconds this thread spent importing during the current batch. */
let importMs = 0;

/** The port this thread posts outcomes on; the executor holds its other end. */
let results: MessagePort | null = null;

/**
 * Open this pool thread's results port and hand its other end to the executor, before any job
 * runs: messages posted on it survive the thread; the executor's thread also compiles this
 * thread's TypeScript. Called once by the pool worker entry.
 *
 * @example
 * ```ts
 * // workers/pool-worker.ts
 * openResultsPort();
 * export default runBatch;
 * ```
 */
export function openResultsPort(): void {
  if (results !== null || parentPort === null) return;
  _compiledByStarter(parentPort);
  const { port1, port2 } = new MessageChannel();
  results = port1;
  results.unref();
  const message: ResultsPortMessage = { [RESULTS_PORT]: true, thread: threadId, port: port2 };
  parentPort.postMessage(message, [port2]);
}

/** Whether `message` (from piscina's 'message' event) hands over a results port. */
export function isResultsPortMessage(message: unknown): message is ResultsPortMessage {
  return typeof message === 'object' && message !== null && (message as Partial<ResultsPortMessage>)[RESULTS_PORT] === true;
}

function pathOf(url: string): string {
  try {
    return fileURLToPath(url);
  } catch {
    return url;
  }
}

async function importModule(url: string, exportName: string): Promise<Namespace> {
  const started = performance.now();
  try {
    // Checked again where it is imported: nothing but a file: module gets in.
    const namespace = await importUserModule(moduleUrlOf(url, 'a pool thread'));
    modules.set(url, namespace);
    return namespace;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    // Only the module itself being absent is reworded; a missing import inside it keeps its own message.
    if (code === 'ERR_MODULE_NOT_FOUND' && String((error as Error).message).includes(pathOf(url))) {
      const missing = new Error(`cannot run ${shortName(exportName)} of ${url}: the module was not found`, { cause: error });
      (missing as Error & { code: string }).code = code;
      throw missing;
    }
    throw error;
  } finally {
    importMs += performance.now() - started;
  }
}

function exportOf(namespace: Namespace, url: string, exportName: string, key: string): JobFunction {
  if (!Object.hasOwn(namespace, exportName)) {
    throw new TypeError(`cannot run ${shortName(exportName)} of ${url}: the module has no export named ${quoteName(exportName)}`);
  }
  const fn = namespace[exportName];
  if (typeof fn !== 'function') {
    throw new TypeError(`cannot run ${shortName(exportName)} of ${url}: the export is not a function (it is ${typeName(fn)})`);
  }
  functions.set(key, fn as JobFunction);
  return fn as JobFunction;
}

/** Call `fn` with `argc` arguments from `args[first]` on, without an array for the usual few. */
function call(fn: JobFunction, args: unknown[], first: number, argc: number): unknown {
  switch (argc) {
    case 0:
      return fn();
    case 1:
      return fn(args[first]);
    case 2:
      return fn(args[first], args[first + 1]);
    case 3:
      return fn(args[first], args[first + 1], args[first + 2]);
    default:
      return fn(...args.slice(first, first + argc));
  }
}


/** The state slots of the batch whose job runs now, or null between jobs; the job's index there. */
let jobSlots: Int32Array | null = null;
let jobIndex = 0;
/** The running job's signal, made when the job first calls `jobSignal()`. */
let jobController: AbortController | null = null;

/** Atomics.waitAsync (ES2024; in Node 20), typed here since the build's lib is ES2022. */
const waitAsync = (Atomics as unknown as {
  waitAsync(array: Int32Array, index: number, value: number): { async: false; value: string } | { async: true; value: Promise<string> };
}).waitAsync;

/** The running job's signal, made on first use: it aborts when the slot moves to ABORT_REQUESTED. */
function runningJobSignal(): AbortSignal | null {
  const slots = jobSlots;
  if (slots === null) return null;
  if (jobController !== null) return jobController.signal;
  const controller = new AbortController();
  jobController = controller;
  const index = jobIndex;
  const abortIfAsked = (): void => {
    if (Atomics.load(slots, index) === ABORT_REQUESTED && !controller.signal.aborted) {
      controller.abort(new CancelledError('the caller cancelled the job'));
    }
  };
  const waited = waitAsync(slots, index, RUNNING);
  if (waited.async) void waited.value.then(abortIfAsked);
  else abortIfAsked();
  return controller.signal;
}

_setPoolJobSignal(runningJobSignal);

/** The batch this thread runs or last ran: the next one starts after it. */
let previous: Promise<unknown> = Promise.resolve();

/**
 * Run a batch in this pool thread (the pool worker's task handler): each job not cancelled
 * meanwhile is run in order, awaited when it returns a thenable, and its outcome sent at once
 * (see the module's description). Moved buffers in results are transferred back.
 *
 * A thread holds up to two batches; the second starts once the first is done, so a thread runs
 * one job at a time, as a thread of ThreadPoolExecutor does, even while an async job awaits.
 *
 * @example
 * ```ts
 * // workers/pool-worker.ts
 * export default runBatch;
 * ```
 */
export function runBatch(request: BatchRequest): Promise<BatchResponse> {
  const run = previous.then(() => runJobs(request));
  previous = run.catch(() => undefined);
  return run;
}

async function runJobs(request: BatchRequest): Promise<BatchResponse> {
  const { id, fns, jobs, args, slots, values, contexts } = request;
  const count = values.length;
  let ran = 0;
  importMs = 0;
  const started = performance.now();
  const resolved = new Array<JobFunction | undefined>(fns.length >> 1);
  Atomics.store(slots, count, threadId);
  let next = 0;
  for (let i = 0; i < count; i++) {
    const at = jobs[i * 2] as number;
    const argc = jobs[i * 2 + 1] as number;
    const first = next;
    next += argc;
    if (Atomics.compareExchange(slots, i, QUEUED, RUNNING) !== QUEUED) continue;
    ran++;
    const url = fns[at * 2] as string;
    const exportName = fns[at * 2 + 1] as string;
    let state: number;
    let release: (() => void) | null = null;
    let outside: Context | null = null;
    let span: CallSpan | null = null;
    try {
      let fn = resolved[at];
      if (fn === undefined) {
        const key = `${exportName}\0${url}`;
        fn = functions.get(key);
        if (fn === undefined) {
          const namespace = modules.get(url) ?? (await importModule(url, exportName));
          fn = exportOf(namespace, url, exportName, key);
        }
        resolved[at] = fn;
      }
      // After the import: the job's module registers the classes its arguments may hold.
      let decoded = false;
      for (let k = first; k < first + argc; k++) {
        const arg = args[k];
        if (typeof arg === 'object' && arg !== null) {
          args[k] = fromWire(arg);
          decoded = true;
        }
      }
      if (decoded) release = _takeReceivedCallbacks();
      jobSlots = slots;
      jobIndex = i;
      // A thread runs one job at a time (see runBatch): its context stays current until the job settles.
      const carried = contexts?.[i];
      let result: unknown;
      if (carried !== null && carried !== undefined && isCarriedContext(carried)) {
        outside = _enter(contextFor(carried));
        const spans = callSpans;
        // Inside the AsyncLocalStorage stores it carried (and a SERVER span of it), which its awaits keep.
        result = runInCarriedStores(carried, () => {
          if (spans === null) return call(fn, args, first, argc);
          const inside = (span = spans.server(exportName));
          return inside.run(() => call(fn, args, first, argc));
        });
      } else result = call(fn, args, first, argc);
      if (_isThenable(result)) result = await result;
      (span as CallSpan | null)?.end(null);
      jobSlots = null;
      state = primitiveState(result);
      if (state === DONE_NUMBER) values[i] = result as number;
      else if (state === DONE_POSTED) sendValue(id, i, result, exportName, url);
    } catch (error) {
      (span as CallSpan | null)?.end(error);
      jobSlots = null;
      release ??= _takeReceivedCallbacks();
      sendError(id, i, error);
      state = DONE_POSTED;
    }
    if (outside !== null) _exit(outside);
    // Comlink.proxy callbacks the job was given: it ended, so they go.
    if (release !== null) {
      release();
      release = null;
    }
    Atomics.store(slots, i, state);
    if (jobController !== null) {
      // Wake the signal's waiter: it finds the job ended and lets go.
      jobController = null;
      Atomics.notify(slots, i);
    }
  }
  return { ran, ms: performance.now() - started - importMs };
}

/** The state that says how a job's `result` travels: in shared memory, or posted. */
function primitiveState(result: unknown): number {
  switch (typeof result) {
    case 'number':
      return DONE_NUMBER;
    case 'undefined':
      return DONE_UNDEFINED;
    case 'boolean':
      return result ? DONE_TRUE : DONE_FALSE;
    case 'object':
      return result === null ? DONE_NULL : DONE_POSTED;
    default:
      return DONE_POSTED;
  }
}

function sendValue(batch: number, index: number, result: unknown, exportName: string, url: string): void {
  const port = results as MessagePort;
  if (typeof result === 'object' || typeof result === 'function' || typeof result === 'symbol') {
    const found = findUncloneable(result, 'result');
    if (found !== null) {
      const error = new TypeError(`cannot send the result of ${shortName(exportName)} of ${url} back from the pool thread: ${describeUncloneable(found)}`);
      sendError(batch, index, error);
      return;
    }
  }
  let sent: unknown;
  try {
    sent = toWire(result, 'the result');
  } catch (error) {
    sendError(batch, index, new TypeError(`cannot send the result of ${shortName(exportName)} of ${url} back from the pool thread: ${(error as Error).message}`, { cause: error }));
    return;
  }
  const transfer: Transferable[] = [];
  collectTransfers(result, transfer);
  const outcome: Outcome = [batch, index, sent];
  try {
    port.postMessage(outcome, transfer);
  } catch (error) {
    const failure = new TypeError(`cannot send the result of ${shortName(exportName)} of ${url} back from the pool thread: ${(error as Error).message}`, { cause: error });
    sendError(batch, index, failure);
  }
}

function sendError(batch: number, index: number, error: unknown): void {
  const outcome: Outcome = [batch, ~index, encodeError(error) satisfies EncodedError];
  (results as MessagePort).postMessage(outcome);
}
