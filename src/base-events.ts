/**
 * The event loop (asyncio.base_events.BaseEventLoop) on top of Node's libuv loop.
 *
 * asyncio's `run_forever` blocks a thread in `while True: _run_once()`. JavaScript cannot block
 * and still run Node's I/O, so this loop borrows libuv's turns: iterations run back to back
 * within a short time slice, then the loop yields one turn (`setImmediate`) so I/O callbacks,
 * Promise reactions and MessagePort messages run; with nothing ready it sleeps on one Node timer
 * armed for the earliest TimerHandle, which also keeps the process alive while the loop runs.
 */
import { yieldable } from './internal/yieldable.js';
import type { YieldablePromise } from './coroutines.js';
import { performance } from 'node:perf_hooks';
import { _currentVars, type Context } from './contextvars.js';
import { RuntimeError, _isEscaping } from './exceptions.js';
import { Future, _reportUnretrieved, type LoopOption } from './futures.js';
import { Handle, TimerHandle, type AnyCallback, type Runnable } from './handles.js';
import { openAttachPoint } from './internal/attach/endpoint.js';
import { Fifo } from './internal/fifo.js';
import { INSPECT, repr, typeName } from './internal/format.js';
import { TimerHeap } from './internal/heap.js';
import { BUSY_SINCE, MONOTONIC_ORIGIN, TIME_ORIGIN, monotonicNow, currentThreadName, healthEnabled, heartbeat, newId, registerLoop, type SlowCallback } from './internal/introspect.js';
import { _getRunningLoop, _setRunningLoop } from './internal/running.js';
import { simulation, type LoopGate } from './internal/testing/active.js';
import { logger } from './log.js';
import { Task, eagerTaskFactory, ensureFuture } from './task.js';
import { asyncContextInUse } from './internal/als/scope.js';
import { isCoroutine, type Coroutine, type Awaitable } from './coroutines.js';
import { _cancelOnAbort, _checkSignal, type SignalOption } from './interop.js';
import { wrapFuture } from './concurrent.js';
import { createDefaultExecutor, type Executor } from './executor.js';
import { checkWorkerFn, resolvesModuleSpecifiers, type WorkerFn } from './worker-fn.js';
import type {
  AddrInfo,
  CreateConnectionOptions,
  CreateServerOptions,
  DatagramEndpointOptions,
  GetaddrinfoOptions,
  Server,
} from './connections.js';
import type {
  ReadPipe,
  ReadPipeProtocol,
  ReadPipeTransport,
  SubprocessArgs,
  SubprocessTransport,
  SubprocessTransportOptions,
  WritePipe,
  WritePipeProtocol,
  WritePipeTransport,
} from './pipes.js';
import type { DatagramProtocol, Protocol, SubprocessProtocol } from './protocols.js';
import { _addSignalHandler, _removeSignalHandler } from './signals.js';
import type { SendfileOptions, SendfileSource } from './sendfile.js';
import type { ConnectAcceptedSocketOptions, SslContext, StartTlsOptions } from './start-tls.js';
import type { Socket as NetSocket } from 'node:net';
import type { DatagramTransport, Transport } from './transports.js';

/** The engines of the I/O methods: transports, servers, pipes, subprocesses, sendfile and TLS. */
interface IoStack {
  connections: typeof import('./connections.js');
  pipes: typeof import('./pipes.js');
  sendfile: typeof import('./sendfile.js');
  startTls: typeof import('./start-tls.js');
}

let ioStack: IoStack | null = null;
let ioLoading: Promise<IoStack> | null = null;

/**
 * The I/O stack, loaded on the first I/O call of the thread: a thread that does no I/O (most
 * LoopThreads) does not carry its code. Every I/O method is a coroutine, so the first call
 * waits for the load within a step of its task, as it would wait for the I/O itself; later
 * calls go on at once.
 */
function* ioStackLoaded(): Coroutine<IoStack> {
  if (ioStack !== null) return ioStack;
  ioLoading ??= Promise.all([import('./connections.js'), import('./pipes.js'), import('./sendfile.js'), import('./start-tls.js')]).then(
    ([connections, pipes, sendfile, startTls]) => (ioStack = { connections, pipes, sendfile, startTls }),
    (error: unknown) => {
      ioLoading = null;
      throw error;
    },
  );
  return yield* ensureFuture(ioLoading);
}

/** How many slow callbacks a loop remembers for its health report. */
const SLOW_CALLBACKS_KEPT = 20;

/** asyncio: purge the timer heap when it holds more than this many timers... */
const MIN_SCHEDULED_TIMER_HANDLES = 100;
/** ...and more than this fraction of them are cancelled. */
const MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5;
/** asyncio caps one wait at a day; Node warns about timers past 2^31 ms. */
const MAXIMUM_SELECT_TIMEOUT = 24 * 3600;
/** How long iterations run back to back before the loop gives libuv a turn, in ms. */
const TIME_SLICE_MS = 2;
/** The slice's clock is read every this many iterations (a power of two), not every one. */
const SLICE_CHECK_EVERY = 8;
/** The clock's resolution in seconds: timers due within it count as due. */
const CLOCK_RESOLUTION = 1e-6;

/** Whether a timer stays in the heap at a clean-up: a cancelled one leaves it. */
function keepScheduled(timer: TimerHandle): boolean {
  if (!timer._cancelled) return true;
  timer._scheduled = false;
  return false;
}
/**
 * A loop about to sleep polls its links instead, for at most this long (ms), when batches from
 * other threads have lately been arriving this soon after it went idle: a thread woken through
 * libuv takes tens of microseconds, a poll sees the batch within one.
 */
const SPIN_WINDOW_MS = 0.05;
/** Spin while the running average of those gaps (ms) stays below this; a spin that catches nothing counts as a long gap. */
const SPIN_GAP_LIMIT_MS = 0.1;
/** The gap a spin that caught nothing counts as (ms). */
const SPIN_MISS_MS = 0.4;

 
const GeneratorFunction = Object.getPrototypeOf(function* () {}).constructor as unknown;

/** The context object passed to exception handlers; keys as in asyncio's `call_exception_handler`. */
export interface ExceptionContext {
  /** A description of the problem, e.g. "Exception in callback ...". */
  message: string;
  /** The error, when there is one. */
  exception?: Error;
  /** The future concerned, when there is one. */
  future?: Future<unknown>;
  /** The task concerned, when there is one. */
  task?: Task<unknown>;
  /** The handle whose callback failed, when there is one. */
  handle?: Handle;
  /** The original context, when a custom handler itself failed. */
  context?: ExceptionContext;
  /** Other keys asyncio defines (e.g. a source traceback in debug mode). */
  [key: string]: unknown;
}

/** A custom exception handler (asyncio: `handler(loop, context)`). */
export type ExceptionHandler = (loop: EventLoop, context: ExceptionContext) => void;

/**
 * Options accepted wherever a task is created.
 *
 * @example
 * ```ts
 * const options: TaskOptions = { name: 'fetch-1', eagerStart: true };
 * ```
 */
export interface TaskOptions {
  /** The task's name (default `Task-<n>`). */
  name?: string;
  /** The context the task runs in (default: a copy of the current one). */
  context?: Context;
  /**
   * Run the first step inside `createTask` / the Task constructor when the loop is running
   * (asyncio 3.12's eager_start, a `create_task` keyword from 3.14): a coroutine that finishes
   * there gives a task already done, one that waits is scheduled as usual.
   */
  eagerStart?: boolean;
}

/**
 * A task factory (asyncio: `factory(loop, coro, **kwargs)`): `loop.createTask(coro, options)`
 * calls `factory(loop, coro, options)`, or `factory(loop, coro)` without options, and returns
 * what it returns. As in asyncio 3.14 the factory receives every option (`name`, `context`,
 * `eagerStart`) and applies them itself, so that the name is in place during an eager first step.
 *
 * @example
 * ```ts
 * const factory: TaskFactory = (loop, coro, options) => new Task(coro, { ...options, loop });
 * ```
 */
export type TaskFactory = (loop: EventLoop, coro: Coroutine<unknown>, options?: TaskOptions) => Task<unknown>;

/** @internal A gather running children without a Task each until one is needed (gather.ts). */
export interface LightParent {
  /** Make the Task of the child running its first step now (`_lightIndex`), current for the rest of the step. */
  _promoteStepping(): Task<unknown>;
  /** Make the Tasks of the children not started yet. */
  _promoteAll(): void;
}

/** @internal `_lightMode()`: gather makes a Task per child at once. */
export const LIGHT_NONE = 0;
/** @internal `_lightMode()`: children run as lazy Tasks would, from the ready queue. */
export const LIGHT_LAZY = 1;
/** @internal `_lightMode()`: children run as eager Tasks would, their first step inside gather. */
export const LIGHT_EAGER = 2;

/** @internal Something that receives batches of operations from another thread. */
export interface InboxReceiver {
  /** Take a whole batch. */
  _dispatch(batch: unknown[]): void;
  /** Take the calls of a batch whose replies were taken already (by a thread that blocked). */
  _dispatchCalls(batch: unknown[]): void;
}

/** @internal Something with operations queued for another thread. */
export interface Flushable {
  _flush(): void;
}

/** @internal Something a loop about to sleep can poll for batches from another thread (a link). */
export interface Pollable {
  /** Take what arrived (to the loop's inbox); whether anything did. */
  _poll(): boolean;
  /** Take what arrived, without the shortcuts `_poll` may take (a simulation's poll). */
  _drain?(): boolean;
  /**
   * The loop is about to give libuv a turn (to sleep, or at the end of a time slice): arm
   * whatever must wake it then; whether something arrived meanwhile (in the loop's inbox).
   */
  _beforeYield?(): boolean;
}

/** @internal Something whose Futures of this loop wait for calls made to another thread (a link). */
export interface CallsInFlight {
  /** Cancel those Futures with `message` (and the calls there); returns how many were cancelled. */
  _cancelCallsInFlight(message: string): number;
  /** Whether a call made through it still waits for its answer (a virtual clock waits for it). */
  _hasCallsPending(): boolean;
}


function checkCallback(callback: unknown, method: string, debug: boolean): void {
  if (typeof callback !== 'function') {
    throw new TypeError(`a callable object was expected by ${method}(), got ${repr(callback)}`);
  }
  if (debug && callback instanceof (GeneratorFunction as typeof Function)) {
    throw new TypeError(`coroutines cannot be used with ${method}()`);
  }
}

function checkTime(value: unknown, what: 'delay' | 'when'): number {
  if (typeof value !== 'number') {
    throw new TypeError(`${what} must be a number, got ${typeName(value)}`);
  }
  if (Number.isNaN(value)) {
    throw new RangeError(`Invalid ${what}: NaN (not a number)`);
  }
  return value;
}

function runUntilCompleteCallback(future: Future<unknown>): void {
  // A KeyboardInterrupt or SystemExit is already on its way out of the loop: stopping here too
  // would leave a stale stop request for the next run.
  if (!future.cancelled() && _isEscaping(future.exception())) return;
  future.getLoop().stop();
}

/**
 * An asyncio-style event loop; create one with `newEventLoop()` (asyncio.AbstractEventLoop).
 *
 * @example
 * ```ts
 * const loop = newEventLoop();
 * loop.callSoon(() => { console.log('hello'); loop.stop(); });
 * await loop.runForever();
 * loop.close();
 * ```
 */
export class EventLoop {
  /** In debug mode, callbacks running longer than this many seconds are logged (slow_callback_duration). */
  slowCallbackDuration = 0.1;

  constructor() {
    registerLoop(this);
    openAttachPoint();
  }

  #ready = new Fifo<Runnable>();
  #scheduled = new TimerHeap<TimerHandle>();
  #timerCancelledCount = 0;
  #timerSeq = 0;
  #stopping = false;
  #closed = false;
  #running = false;
  #debug = false;
  /** Whether the loop is inside `#drive`: a callSoon there needs no wake-up. */
  #inDrive = false;
  #wakePending = false;
  #immediate: NodeJS.Immediate | null = null;
  #timer: NodeJS.Timeout | null = null;
  #timerDue = 0;
  #settle: ((error: unknown) => void) | null = null;
  #exceptionHandler: ExceptionHandler | null = null;
  /** Batches that arrived from other threads, dispatched at the start of an iteration. */
  #inbox: Array<{ receiver: InboxReceiver; batch: unknown[]; callsOnly: boolean }> = [];
  /** Outbound links to flush once the current iteration's callbacks have run. */
  #flushes: Flushable[] = [];
  #closeHooks: Array<() => void> = [];
  #callsInFlight = new Set<CallsInFlight>();
  /** Work outside the loop that a Future of it waits for (a Promise, another thread's Future): a virtual clock waits for it. */
  #clockHolds = 0;
  /** The links to poll instead of sleeping (see SPIN_WINDOW_MS). */
  #pollables: Pollable[] = [];
  /** When the loop last went idle (performance.now()), or 0 while it runs. */
  #idleSince = 0;
  /** A running average of how soon (ms) a batch arrived after the loop went idle. */
  #arrivalGap = SPIN_MISS_MS;
  #taskFactory: TaskFactory | null = null;
  /** `{ loop: this }`, made once. */
  readonly #ownLoop: LoopOption & TaskOptions = Object.freeze({ loop: this });
  #defaultExecutor: Executor | null = null;
  #executorShutdownCalled = false;

  /** @internal The loop's id, unique in the process (ps, the monitor). */
  readonly _id: number = newId();
  /** @internal Iterations run so far (loop health). */
  _iterations = 0;
  /**
   * @internal When the current run of iterations began, in whole ms of `performance.now()`: a
   * task parked on a future notes it, so a snapshot can say how long it has been waiting.
   */
  _tick = 0;
  /** @internal The last slow callbacks debug mode saw, oldest first (loop health). */
  _slowCallbacks: SlowCallback[] = [];
  /** @internal The task whose step runs now (asyncio's `_current_tasks[loop]`). */
  _currentTask: Task<unknown> | null = null;
  /** @internal The first of the loop's pending tasks, linked through `_prevTask`/`_nextTask`. */
  _taskList: Task<unknown> | null = null;
  /**
   * @internal The gather whose child runs its first step now without a Task (gather.ts), the
   * child's index in `_lightIndex`; null otherwise. `_runningTask()` makes the child's Task then.
   */
  _lightParent: LightParent | null = null;
  /** @internal */
  _lightIndex = 0;
  /** @internal The gathers with children not started yet and no Task made for them: their Tasks are made when the loop's tasks are listed. */
  _lightGathers: Set<LightParent> | null = null;
  /** @internal Failed futures of this loop whose error nobody retrieved yet (reported at close at the latest). */
  _unretrieved: Set<WeakRef<Future<unknown>>> | null = null;
  /** @internal What drives the loop in a simulation (multiloop/testing): the loop never drives itself then. */
  _gate: LoopGate | null = null;
  /** @internal Timers moved to the ready queue so far (a simulation logs each one that fires). */
  _timersFired = 0;

  // ───────────────────────────── scheduling ─────────────────────────────

  /**
   * Schedule `callback(...args)` for the next iteration, FIFO (call_soon).
   *
   * @example
   * ```ts
   * loop.callSoon(console.log, 'hello', 'world');
   * ```
   */
  callSoon<A extends unknown[]>(callback: (...args: A) => void, ...args: A): Handle;
  callSoon(callback: AnyCallback): Handle {
    if (this.#closed) throw new RuntimeError('Event loop is closed');
    checkCallback(callback, 'callSoon', this.#debug);
    const argc = arguments.length - 1;
    const handle =
      argc === 0
        ? new Handle(callback, this, 0, undefined, undefined, _currentVars())
        : argc === 1
          ? new Handle(callback, this, 1, arguments[1], undefined, _currentVars())
          : argc === 2
            ? new Handle(callback, this, 2, arguments[1], arguments[2], _currentVars())
            : new Handle(callback, this, argc, Array.prototype.slice.call(arguments, 1), undefined, _currentVars());
    this.#ready.push(handle);
    if (!this.#inDrive && this.#running && !this.#wakePending) this.#wake();
    return handle;
  }

  /**
   * Like `callSoon`, callable from outside the loop's callbacks: a Promise reaction, a Node
   * callback, a timer; it wakes the loop (call_soon_threadsafe).
   *
   * @example
   * ```ts
   * fs.readFile(path, (err, data) => loop.callSoonThreadsafe(onData, err, data));
   * ```
   */
  callSoonThreadsafe<A extends unknown[]>(callback: (...args: A) => void, ...args: A): Handle {
    if (this.#closed) throw new RuntimeError('Event loop is closed');
    checkCallback(callback, 'callSoonThreadsafe', this.#debug);
    const handle = new Handle(callback as AnyCallback, this, args.length, args.length > 2 ? args : args[0], args[1], _currentVars());
    this.#ready.push(handle);
    if (!this.#inDrive && this.#running && !this.#wakePending) this.#wake();
    return handle;
  }

  /**
   * Schedule `callback(...args)` after `delay` seconds (call_later).
   *
   * @example
   * ```ts
   * const timer = loop.callLater(0.5, () => console.log('half a second later'));
   * ```
   */
  callLater<A extends unknown[]>(delay: number, callback: (...args: A) => void, ...args: A): TimerHandle;
  callLater(delay: number, callback: AnyCallback): TimerHandle {
    checkTime(delay, 'delay');
    if (this.#closed) throw new RuntimeError('Event loop is closed');
    checkCallback(callback, 'callLater', this.#debug);
    const argc = arguments.length - 2;
    return this.#schedule(
      this.time() + delay,
      callback,
      argc,
      arguments[2],
      arguments[3],
      argc > 2 ? Array.prototype.slice.call(arguments, 2) : null,
    );
  }

  /**
   * Schedule `callback(...args)` at the loop time `when`, in seconds (call_at).
   *
   * @example
   * ```ts
   * loop.callAt(loop.time() + 2, () => console.log('two seconds later'));
   * ```
   */
  callAt<A extends unknown[]>(when: number, callback: (...args: A) => void, ...args: A): TimerHandle;
  callAt(when: number, callback: AnyCallback): TimerHandle {
    checkTime(when, 'when');
    if (this.#closed) throw new RuntimeError('Event loop is closed');
    checkCallback(callback, 'callAt', this.#debug);
    const argc = arguments.length - 2;
    return this.#schedule(
      when,
      callback,
      argc,
      arguments[2],
      arguments[3],
      argc > 2 ? Array.prototype.slice.call(arguments, 2) : null,
    );
  }

  #schedule(when: number, callback: AnyCallback, argc: number, a0: unknown, a1: unknown, args: unknown[] | null): TimerHandle {
    const timer = new TimerHandle(when, callback, this, argc, argc > 2 ? args : a0, a1, _currentVars());
    this.#scheduled.push(timer, this.#timerSeq++);
    timer._scheduled = true;
    if (!this.#inDrive && this.#running && !this.#wakePending) this.#wake();
    return timer;
  }

  /** @internal Schedule a prepared handle or a Task's step; same rules as `callSoon`. */
  _scheduleHandle(handle: Runnable): void {
    if (this.#closed) throw new RuntimeError('Event loop is closed');
    this.#ready.push(handle);
    if (!this.#inDrive && this.#running && !this.#wakePending) this.#wake();
  }

  /** @internal Put `handle` back at the front of the ready queue (what an escaping error interrupted runs first next time). */
  _scheduleFirst(handle: Runnable): void {
    if (this.#closed) return;
    this.#ready.unshift(handle);
  }

  /**
   * @internal `callSoon(callback)` for I/O that libuv's poll phase reports right now (a socket
   * read): a loop idle waiting for I/O runs its iterations at once, as asyncio's loop runs what
   * select() made ready, rather than after the rest of the poll phase (`setImmediate`), so that a
   * protocol's answer is written before the next socket is read; a loop running or about to run
   * runs it in its next iteration, as `callSoon` does.
   */
  _callSoonFromPoll(callback: () => void): void {
    if (this.#closed) throw new RuntimeError('Event loop is closed');
    this.#ready.push(new Handle(callback, this, 0, undefined, undefined, _currentVars()));
    if (this.#running && !this.#inDrive && !this.#wakePending) this.#drive();
  }

  /** @internal Schedule `callback(arg)` in `context` (a Context, or a captured variable map). */
  _callSoonWith(callback: AnyCallback, arg: unknown, context: Context | null, vars: Context['_vars']): void {
    this._scheduleHandle(new Handle(callback, this, 1, arg, undefined, context ?? vars));
  }

  /**
   * @internal The task whose step runs now (`currentTask()`): a child of gather running its first
   * step without a Task gets one now, and is that task for the rest of its life.
   */
  _runningTask(): Task<unknown> | null {
    const task = this._currentTask;
    if (task !== null) return task;
    const parent = this._lightParent;
    return parent === null ? null : parent._promoteStepping();
  }

  /** @internal Make the Tasks of every child of a gather not started yet (the loop's tasks are listed). */
  _promoteLight(): void {
    // The child running its first step now is one of the pending tasks.
    this._runningTask();
    const gathers = this._lightGathers;
    if (gathers === null || gathers.size === 0) return;
    this._lightGathers = null;
    for (const gather of gathers) gather._promoteAll();
  }

  /**
   * @internal How gather may run coroutines on this loop without a Task each until one is needed
   * (gather.ts): LIGHT_LAZY as the Tasks `createTask` makes here would run, LIGHT_EAGER as eager
   * ones, LIGHT_NONE when a Task must be made at once (a task factory or `createTask` of one's
   * own, debug mode, AsyncLocalStorage in use, a closed loop).
   */
  _lightMode(): number {
    if (this.#closed || this.#debug || asyncContextInUse || this.createTask !== EventLoop.prototype.createTask) return LIGHT_NONE;
    const factory = this.#taskFactory;
    if (factory === null) return LIGHT_LAZY;
    if (factory !== eagerTaskFactory) return LIGHT_NONE;
    return this.#running ? LIGHT_EAGER : LIGHT_LAZY;
  }

  /** @internal Register a new pending task. */
  _addTask(task: Task<unknown>): void {
    const head = this._taskList;
    task._nextTask = head;
    if (head !== null) head._prevTask = task;
    this._taskList = task;
  }

  /** @internal Unregister a task once it is done. */
  _removeTask(task: Task<unknown>): void {
    const prev = task._prevTask;
    const next = task._nextTask;
    if (prev === null) {
      if (this._taskList === task) this._taskList = next;
    } else prev._nextTask = next;
    if (next !== null) next._prevTask = prev;
    task._prevTask = null;
    task._nextTask = null;
  }

  /** @internal What a health report says of this loop right now. */
  _stats(): { running: boolean; closed: boolean; debug: boolean; ready: number; timers: number } {
    return {
      running: this.#running,
      closed: this.#closed,
      debug: this.#debug,
      ready: this.#ready.length,
      timers: this.#scheduled.length - this.#timerCancelledCount,
    };
  }

  /** @internal Count a cancelled timer still in the heap (asyncio's `_timer_handle_cancelled`). */
  _timerHandleCancelled(handle: TimerHandle): void {
    if (handle._scheduled) this.#timerCancelledCount++;
  }

  /**
   * The loop's monotonic clock, in seconds (time).
   *
   * @example
   * ```ts
   * const started = loop.time();
   * ```
   */
  time(): number {
    return performance.now() / 1000;
  }

  // ───────────────────────────── futures and tasks ─────────────────────────────

  /**
   * Create a Future bound to this loop (create_future).
   *
   * @example
   * ```ts
   * const fut = loop.createFuture<number>();
   * loop.callLater(1, () => fut.setResult(42));
   * ```
   */
  createFuture<T = unknown>(): Future<T> {
    return new Future<T>({ loop: this });
  }

  /**
   * Wrap a coroutine in a Task scheduled on this loop, or started at once with `eagerStart`
   * (create_task). With a task factory set, the factory makes the task from `options` (asyncio
   * 3.14: every option is passed on, none applied afterwards).
   *
   * @example
   * ```ts
   * const task = loop.createTask(main(), { name: 'main' });
   * const cached = loop.createTask(lookup(key), { eagerStart: true }); // done already on a cache hit
   * ```
   */
  createTask<T>(coro: Coroutine<T>, options?: TaskOptions): Task<T> {
    if (this.#closed) {
      (coro as { return?: (value?: unknown) => unknown } | null)?.return?.(undefined);
      throw new RuntimeError('Event loop is closed');
    }
    const factory = this.#taskFactory;
    if (factory === null) {
      // A task with no options (gather's children, most tasks) shares one options object.
      if (options === undefined) return new Task(coro, this.#ownLoop);
      return new Task(coro, { loop: this, name: options.name, context: options.context, eagerStart: options.eagerStart });
    }
    // The factory gets options of its own, as asyncio's gets its own **kwargs.
    return (options === undefined ? factory(this, coro) : factory(this, coro, { ...options })) as Task<T>;
  }

  /**
   * Set the factory `createTask` uses, or null for plain Tasks (set_task_factory).
   *
   * @example
   * ```ts
   * loop.setTaskFactory((loop, coro, opts) => new Task(coro, { loop, ...opts }));
   * ```
   */
  setTaskFactory(factory: TaskFactory | null): void {
    if (factory !== null && typeof factory !== 'function') {
      throw new TypeError('task factory must be a callable or null');
    }
    this.#taskFactory = factory;
  }

  /** The current task factory, or null (get_task_factory). */
  getTaskFactory(): TaskFactory | null {
    return this.#taskFactory;
  }

  // ───────────────────────────── running and stopping ─────────────────────────────

  /**
   * Run until `stop()`; the returned Promise settles when the loop has stopped (run_forever).
   * The first iterations run before this method returns.
   *
   * @example
   * ```ts
   * loop.callLater(1, () => loop.stop());
   * await loop.runForever();
   * ```
   */
  runForever(): YieldablePromise<void> {
    try {
      this.#checkClosed();
      this.#checkRunning();
    } catch (error) {
      return yieldable(Promise.reject(error as Error));
    }
    this.#running = true;
    _setRunningLoop(this);
    return yieldable(
      new Promise<void>((resolve, reject) => {
        this.#settle = (error) => (error === undefined ? resolve() : reject(error));
        this.#drive();
      }),
    );
  }

  /**
   * Run until `aw` is done; settles with its result or error (run_until_complete). A coroutine
   * is wrapped in a Task; if the loop stops first the Promise rejects with RuntimeError.
   * Aborting `options.signal` cancels it; once it ended cancelled the Promise rejects with
   * `signal.reason` (an already-aborted signal: a coroutine never starts).
   *
   * @example
   * ```ts
   * const answer = await loop.runUntilComplete(compute(), { signal: AbortSignal.timeout(5000) });
   * ```
   */
  runUntilComplete<T>(aw: Awaitable<T>, options?: SignalOption): YieldablePromise<T> {
    return yieldable(this.#runUntilComplete(aw, options));
  }

  async #runUntilComplete<T>(aw: Awaitable<T>, options?: SignalOption): Promise<T> {
    this.#checkClosed();
    this.#checkRunning();
    const signal = _checkSignal(options?.signal, 'runUntilComplete()');
    if (signal?.aborted === true && isCoroutine(aw)) {
      aw.return(undefined as T);
      throw signal.reason;
    }
    const newTask = !(aw instanceof Future);
    const future = ensureFuture(aw as Awaitable<T>, { loop: this }) as Future<T>;
    const unwatch = signal === undefined ? null : _cancelOnAbort(future, signal);
    future.addDoneCallback(runUntilCompleteCallback);
    try {
      await this.runForever();
    } catch (error) {
      // The error is on its way to the caller: the wrapping task must not also report it as
      // "never retrieved".
      if (newTask && future.done() && !future.cancelled()) future.exception();
      throw error;
    } finally {
      future.removeDoneCallback(runUntilCompleteCallback);
      unwatch?.();
    }
    if (!future.done()) {
      throw new RuntimeError('Event loop stopped before Future completed.');
    }
    if (signal?.aborted === true && future.cancelled()) throw signal.reason;
    return future.result();
  }

  /**
   * Stop after the callbacks already ready have run (stop). Called before `runForever`, the
   * next run performs exactly one iteration.
   *
   * @example
   * ```ts
   * loop.callSoon(() => loop.stop());
   * ```
   */
  stop(): void {
    this.#stopping = true;
    if (!this.#inDrive && this.#running && !this.#wakePending) this.#wake();
  }

  /** Whether the loop is running (is_running). */
  isRunning(): boolean {
    return this.#running;
  }

  /** Whether the loop was closed (is_closed). */
  isClosed(): boolean {
    return this.#closed;
  }

  /**
   * Close the loop: report the errors of failed futures and tasks that nobody retrieved (each
   * once, through the exception handler), drop pending callbacks and shut the default executor
   * down without waiting; a no-op when already closed; RuntimeError while running (close).
   *
   * @example
   * ```ts
   * await loop.runUntilComplete(main());
   * loop.close();
   * ```
   */
  close(): void {
    if (this.#running) throw new RuntimeError('Cannot close a running event loop');
    if (this.#closed) return;
    // Before the loop is closed, so that what the hooks end (calls to other threads) can still
    // be settled: the callbacks that scheduled are dropped with the others below.
    for (const hook of this.#closeHooks.splice(0)) hook();
    _reportUnretrieved(this);
    this.#closed = true;
    this.#inbox.length = 0;
    this.#ready.clear();
    this.#scheduled.clear();
    this.#timerCancelledCount = 0;
    this.#disarm();
    const executor = this.#defaultExecutor;
    this.#defaultExecutor = null;
    if (executor !== null) void executor.shutdown(false);
  }

  /**
   * Finalize async generators (shutdown_asyncgens). Coroutines here are synchronous generators
   * that their Tasks close, so there is nothing to finalize: the Future is already done.
   */
  shutdownAsyncgens(): Future<void> {
    const future = this.createFuture<void>();
    future.setResult(undefined);
    return future;
  }

  /**
   * Shut the default executor down, waiting at most `timeout` seconds (shutdown_default_executor).
   * On timeout a RuntimeWarning is emitted and the executor is told to stop without waiting.
   *
   * @example
   * ```ts
   * yield* loop.shutdownDefaultExecutor(5);
   * ```
   */
  shutdownDefaultExecutor(timeout: number | null = null): Future<void> {
    this.#executorShutdownCalled = true;
    const future = this.createFuture<void>();
    const executor = this.#defaultExecutor;
    if (executor === null) {
      future.setResult(undefined);
      return future;
    }
    let timer: NodeJS.Timeout | null = null;
    // The threads' ending is work outside the loop: a virtual clock waits for it.
    let held = true;
    this._holdClock();
    const finish = (error?: unknown): void => {
      if (timer !== null) clearTimeout(timer);
      if (held) {
        held = false;
        this._releaseClock();
      }
      if (future.done() || this.#closed) return;
      this.callSoonThreadsafe(() => {
        if (future.done()) return;
        if (error === undefined) future.setResult(undefined);
        else future.setException(error as Error);
      });
    };
    if (timeout !== null) {
      timer = setTimeout(() => {
        timer = null;
        process.emitWarning(`The executor did not finishing joining its threads within ${timeout} seconds.`, 'RuntimeWarning');
        void executor.shutdown(false);
        finish();
      }, Math.max(0, timeout) * 1000);
    }
    executor.shutdown(true).then(() => finish(), (error: unknown) => finish(error));
    return future;
  }

  // ───────────────────────────── signals ─────────────────────────────

  /**
   * Call `callback(...args)` in a loop iteration whenever signal `sig` arrives; replaces this
   * loop's previous handler for `sig` (add_signal_handler). Main thread only: in a worker thread
   * it throws RuntimeError, as it does for a closed loop or a signal that cannot be caught
   * (SIGKILL, SIGSTOP); a number outside 1..64 is a RangeError, a non-function a TypeError.
   * While the loop handles SIGINT, `run()` leaves SIGINT to it.
   *
   * @example
   * ```ts
   * loop.addSignalHandler('SIGTERM', () => server.close());
   * ```
   */
  addSignalHandler<A extends unknown[]>(sig: NodeJS.Signals | number, callback: (...args: A) => void, ...args: A): void {
    // As asyncio: a coroutine function is refused whether or not in debug mode.
    checkCallback(callback, 'addSignalHandler', true);
    _addSignalHandler(this, sig, callback as unknown as (...args: never[]) => void, args);
  }

  /**
   * Remove the handler for `sig`; the signal's default behaviour comes back (unless another
   * listener is left); returns whether a handler was set (remove_signal_handler). In a worker
   * thread it throws RuntimeError.
   */
  removeSignalHandler(sig: NodeJS.Signals | number): boolean {
    return _removeSignalHandler(this, sig);
  }

  // ───────────────────────────── network ─────────────────────────────

  /**
   * Connect to `host:port` and drive `protocolFactory()` from the socket; returns once the
   * protocol's `connectionMade` ran (create_connection). A connection refused or a name that
   * does not resolve raises Node's error, with its `code`.
   *
   * @example
   * ```ts
   * const [transport, protocol] = yield* loop.createConnection(() => new Client(), '127.0.0.1', 8888);
   * ```
   */
  *createConnection<P extends Protocol>(
    protocolFactory: () => P,
    host: string,
    port: number,
    options: CreateConnectionOptions = {},
  ): Coroutine<[transport: Transport, protocol: P]> {
    this.#checkClosed();
    const { connections } = yield* ioStackLoaded();
    return yield* connections._createConnection(this, protocolFactory, { host, port }, options, 'createConnection()');
  }

  /** Connect to the Unix socket at `path` (create_unix_connection). */
  *createUnixConnection<P extends Protocol>(
    protocolFactory: () => P,
    path: string,
    options: CreateConnectionOptions = {},
  ): Coroutine<[transport: Transport, protocol: P]> {
    this.#checkClosed();
    const { connections } = yield* ioStackLoaded();
    return yield* connections._createConnection(this, protocolFactory, { path }, options, 'createUnixConnection()');
  }

  /**
   * Listen on `host:port` (null host: every interface; port 0: a free one), or serve on
   * `options.sock` (host and port null); each connection gets `protocolFactory()` (create_server).
   *
   * @example
   * ```ts
   * const server = yield* loop.createServer(() => new Echo(), '127.0.0.1', 0);
   * const [, port] = server.address() as [string, number];
   * ```
   */
  *createServer(protocolFactory: () => Protocol, host: string | null, port: number | null, options: CreateServerOptions = {}): Coroutine<Server> {
    this.#checkClosed();
    const { connections } = yield* ioStackLoaded();
    return yield* connections._createServer(this, protocolFactory, { host, port }, options, 'createServer()');
  }

  /**
   * Listen on the Unix socket at `path`, or serve on `options.sock` (path null); closing the
   * server removes the socket file unless `cleanupSocket` is false (create_unix_server).
   */
  *createUnixServer(protocolFactory: () => Protocol, path: string | null, options: CreateServerOptions = {}): Coroutine<Server> {
    this.#checkClosed();
    const { connections } = yield* ioStackLoaded();
    return yield* connections._createServer(this, protocolFactory, { path }, options, 'createUnixServer()');
  }

  /**
   * Open a UDP endpoint bound to `localAddr` and/or connected to `remoteAddr`
   * (create_datagram_endpoint).
   *
   * @example
   * ```ts
   * const [transport] = yield* loop.createDatagramEndpoint(() => new Pinger(), { remoteAddr: ['127.0.0.1', port] });
   * ```
   */
  *createDatagramEndpoint<P extends DatagramProtocol>(
    protocolFactory: () => P,
    options: DatagramEndpointOptions,
  ): Coroutine<[transport: DatagramTransport, protocol: P]> {
    this.#checkClosed();
    const { connections } = yield* ioStackLoaded();
    return yield* connections._createDatagramEndpoint(this, protocolFactory, options);
  }

  /**
   * Drive `protocolFactory()` from the read end of a pipe: a file descriptor of a pipe, FIFO,
   * socket or terminal (the transport then owns it and closes it when it closes), or a Node
   * Readable (`child.stdout`, `process.stdin`...); returns once the protocol's `connectionMade`
   * ran (connect_read_pipe). At EOF: `eofReceived()`, then `connectionLost(null)`. A regular
   * file raises RangeError('Pipe transport is for pipes/sockets only.').
   *
   * @example
   * ```ts
   * const fd = openSync(fifoPath, constants.O_RDONLY | constants.O_NONBLOCK);
   * const [transport, protocol] = yield* loop.connectReadPipe(() => new Collect(), fd);
   * ```
   */
  *connectReadPipe<P extends ReadPipeProtocol>(protocolFactory: () => P, pipe: ReadPipe): Coroutine<[transport: ReadPipeTransport, protocol: P]> {
    this.#checkClosed();
    const { pipes } = yield* ioStackLoaded();
    return yield* pipes._connectReadPipe(this, protocolFactory, pipe);
  }

  /**
   * Drive `protocolFactory()` from the write end of a pipe: a file descriptor of a pipe, FIFO,
   * socket or terminal (owned by the transport from then on), or a Node Writable
   * (`child.stdin`...); returns once the protocol's `connectionMade` ran (connect_write_pipe).
   * The write buffer has asyncio's flow control (`pauseWriting`/`resumeWriting`).
   *
   * @example
   * ```ts
   * const [transport] = yield* loop.connectWritePipe(() => new Protocol(), fd);
   * transport.write(new TextEncoder().encode('hello\n'));
   * transport.close();
   * ```
   */
  *connectWritePipe<P extends WritePipeProtocol>(protocolFactory: () => P, pipe: WritePipe): Coroutine<[transport: WritePipeTransport, protocol: P]> {
    this.#checkClosed();
    const { pipes } = yield* ioStackLoaded();
    return yield* pipes._connectWritePipe(this, protocolFactory, pipe);
  }

  /**
   * Run `program` with the string arguments that follow one by one (no shell), optionally
   * followed by the options, a plain object (stdin, stdout, stderr default PIPE), and drive `protocolFactory()` (a
   * SubprocessProtocol) from it; returns once its `connectionMade` ran (subprocess_exec). The OS
   * error (with its `code`, e.g. ENOENT) when it cannot start.
   *
   * @example
   * ```ts
   * const [transport, protocol] = yield* loop.subprocessExec(() => new Collect(), 'ls', '-1', '/', { stderr: DEVNULL });
   * ```
   */
  *subprocessExec<P extends SubprocessProtocol>(protocolFactory: () => P, program: string, ...args: SubprocessArgs): Coroutine<[transport: SubprocessTransport, protocol: P]> {
    this.#checkClosed();
    const { pipes } = yield* ioStackLoaded();
    return yield* pipes._subprocessExec(this, protocolFactory, program, args);
  }

  /**
   * Run `cmd` through the shell (`/bin/sh -c`) and drive `protocolFactory()` from it
   * (subprocess_shell).
   *
   * @example
   * ```ts
   * const [transport, protocol] = yield* loop.subprocessShell(() => new Collect(), 'ls -1 | wc -l');
   * ```
   */
  *subprocessShell<P extends SubprocessProtocol>(protocolFactory: () => P, cmd: string, options: SubprocessTransportOptions = {}): Coroutine<[transport: SubprocessTransport, protocol: P]> {
    this.#checkClosed();
    const { pipes } = yield* ioStackLoaded();
    return yield* pipes._subprocessShell(this, protocolFactory, cmd, options);
  }

  /**
   * Upgrade the connection of `transport` to TLS (start_tls): the handshake runs over its socket
   * (as the client unless `serverSide`), then the transport returned drives `protocol`, without
   * another `connectionMade`; the old transport is done with. A handshake that fails or takes
   * longer than `sslHandshakeTimeout` seconds (default 60) closes the connection, tells
   * `protocol.connectionLost` the error once and raises it.
   *
   * @example
   * ```ts
   * const secure = yield* loop.startTls(transport, protocol, { ca }, { serverHostname: 'example.com' });
   * ```
   */
  *startTls(transport: Transport, protocol: Protocol, sslContext: SslContext, options: StartTlsOptions = {}): Coroutine<Transport> {
    this.#checkClosed();
    const { startTls } = yield* ioStackLoaded();
    return yield* startTls._startTls(this, transport, protocol, sslContext, options);
  }

  /**
   * Send `count` bytes of `file` (a file descriptor or a `node:fs/promises` FileHandle) from
   * `offset` (null: to its end) through `transport`; returns the number of bytes sent
   * (sendfile). Node has no sendfile(2) for sockets: the file is read off the loop in 16 KiB
   * blocks and written through the transport, waiting while its write buffer is over the
   * high-water mark; meanwhile the protocol receives nothing (reading is paused). The file's own
   * position does not move (reads are positional).
   *
   * @example
   * ```ts
   * const file = yield* ensureFuture(open('index.html')); // open of node:fs/promises
   * const sent = yield* loop.sendfile(transport, file);
   * ```
   */
  *sendfile(transport: Transport, file: SendfileSource, offset = 0, count: number | null = null, options: SendfileOptions = {}): Coroutine<number> {
    this.#checkClosed();
    const { sendfile } = yield* ioStackLoaded();
    return yield* sendfile._sendfile(this, transport, file, offset, count, options);
  }

  /**
   * Drive `protocolFactory()` from a `net.Socket` connected elsewhere (connect_accepted_socket);
   * with `ssl` this side is the TLS server. Returns once `connectionMade` ran.
   *
   * @example
   * ```ts
   * netServer.on('connection', (socket) => loop.createTask(loop.connectAcceptedSocket(() => new Echo(), socket)));
   * ```
   */
  *connectAcceptedSocket<P extends Protocol>(
    protocolFactory: () => P,
    sock: NetSocket,
    options: ConnectAcceptedSocketOptions = {},
  ): Coroutine<[transport: Transport, protocol: P]> {
    this.#checkClosed();
    const { startTls } = yield* ioStackLoaded();
    return yield* startTls._connectAcceptedSocket(this, protocolFactory, sock, options);
  }

  /**
   * Resolve `host` and `port` without blocking the loop (getaddrinfo): asyncio's 5-tuples, one
   * per address and socket type.
   *
   * @example
   * ```ts
   * const [[family, , , , [address]]] = yield* loop.getaddrinfo('localhost', 80);
   * ```
   */
  *getaddrinfo(host: string | null, port: number | string | null, options: GetaddrinfoOptions = {}): Coroutine<AddrInfo[]> {
    this.#checkClosed();
    const { connections } = yield* ioStackLoaded();
    return yield* connections._getaddrinfo(this, host, port, options);
  }

  /**
   * The host name and service of a numeric address (asyncio's getnameinfo): `[host, port]` (or
   * `[host, port, flowinfo, scopeId]` for IPv6) to `[name, service]`, e.g. `['localhost', 'http']`
   * for `['127.0.0.1', 80]`. `flags` are getnameinfo's (`NI_NUMERICHOST`, `NI_NUMERICSERV`,
   * `NI_NAMEREQD`, `NI_NOFQDN`; NI_DGRAM is accepted and has no effect: Node names TCP services).
   * An address without a name comes back as it is, unless `NI_NAMEREQD`: then Node's error
   * (ENOTFOUND, or EAI_AGAIN when no DNS answers); a host that is no numeric address is ENOTFOUND.
   *
   * @example
   * ```ts
   * const [name, service] = yield* loop.getnameinfo(['127.0.0.1', 443]); // ['localhost', 'https']
   * ```
   */
  *getnameinfo(sockaddr: [host: string, port: number] | [host: string, port: number, flowinfo: number, scopeId: number], flags = 0): Coroutine<[string, string]> {
    this.#checkClosed();
    const { connections } = yield* ioStackLoaded();
    return yield* connections._getnameinfo(this, sockaddr, flags);
  }

  /**
   * Run `fn(...args)` in `executor`, or in the loop's default executor (a piscina pool created
   * on first use) when null; returns a Future of this loop (run_in_executor). Cancelling the
   * Future of a queued job removes it from the queue; a running job runs on, as in asyncio, and
   * its `jobSignal()` is aborted.
   *
   * @example
   * ```ts
   * const digest = yield* loop.runInExecutor(null, workerFn<[Uint8Array], string>(hashUrl, 'sha256'), data);
   * ```
   */
  runInExecutor<A extends unknown[], R>(executor: Executor | null, fn: WorkerFn<A, R>, ...args: A): Future<R> {
    return this._runInExecutor(executor, fn, args, 'runInExecutor()');
  }

  /** @internal `runInExecutor`, with errors naming `caller` (`toThread()` calls it too). */
  _runInExecutor<A extends unknown[], R>(executor: Executor | null, fn: WorkerFn<A, R>, args: A, caller: string): Future<R> {
    this.#checkClosed();
    // A distributed executor (set as the default one too) takes module specifiers its workers resolve.
    const chosen = executor ?? this.#defaultExecutor;
    const checked = checkWorkerFn<A, R>(fn, caller, chosen !== null && resolvesModuleSpecifiers(chosen));
    let target = executor;
    if (target === null) {
      if (this.#executorShutdownCalled) throw new RuntimeError('Executor shutdown has been called');
      target = this.#defaultExecutor ??= createDefaultExecutor();
    }
    const sim = simulation;
    const fault = sim === null ? null : sim.jobFault(caller);
    if (fault !== null) {
      const failed = this.createFuture<R>();
      failed.setException(fault);
      return failed;
    }
    const submitted = target.submit<A, R>(checked, ...args);
    return wrapFuture<R>(sim === null ? submitted : sim.job(submitted), { loop: this });
  }

  /**
   * Replace the executor `runInExecutor(null, ...)` uses (set_default_executor).
   *
   * @example
   * ```ts
   * loop.setDefaultExecutor(new PiscinaExecutor({ maxThreads: 4 }));
   * ```
   */
  setDefaultExecutor(executor: Executor): void {
    if (
      executor === null ||
      typeof executor !== 'object' ||
      typeof (executor as Partial<Executor>).submit !== 'function' ||
      typeof (executor as Partial<Executor>).shutdown !== 'function'
    ) {
      throw new TypeError(`executor must be an Executor (with submit and shutdown methods), got ${repr(executor)}`);
    }
    this.#defaultExecutor = executor;
  }

  // ───────────────────────────── errors and debugging ─────────────────────────────

  /**
   * Set the handler for errors the loop cannot raise anywhere, or null for the default
   * (set_exception_handler).
   *
   * @example
   * ```ts
   * loop.setExceptionHandler((loop, ctx) => report(ctx.message, ctx.exception));
   * ```
   */
  setExceptionHandler(handler: ExceptionHandler | null): void {
    if (handler !== null && typeof handler !== 'function') {
      throw new TypeError(`A callable object or null is expected, got ${repr(handler)}`);
    }
    this.#exceptionHandler = handler;
  }

  /** The custom exception handler, or null (get_exception_handler). */
  getExceptionHandler(): ExceptionHandler | null {
    return this.#exceptionHandler;
  }

  /**
   * The default handling: log `context.message`, the other keys and the error through the
   * logger (default_exception_handler).
   */
  defaultExceptionHandler(context: ExceptionContext): void {
    const message = context.message === undefined || context.message === '' ? 'Unhandled exception in event loop' : context.message;
    const lines = [message];
    for (const key of Object.keys(context).sort()) {
      if (key === 'message' || key === 'exception') continue;
      const value = context[key];
      lines.push(`${key}: ${key === 'context' ? JSON.stringify(Object.keys(value as object)) : repr(value)}`);
    }
    logger.error(lines.join('\n'), context.exception);
  }

  /**
   * Route `context` to the custom handler, else the default one (call_exception_handler).
   * Errors thrown by handlers are logged, never raised (KeyboardInterrupt and SystemExit escape).
   *
   * @example
   * ```ts
   * loop.callExceptionHandler({ message: 'lost a connection', exception: err });
   * ```
   */
  callExceptionHandler(context: ExceptionContext): void {
    const handler = this.#exceptionHandler;
    if (handler === null) {
      try {
        this.defaultExceptionHandler(context);
      } catch (error) {
        if (_isEscaping(error)) throw error;
        logger.error('Exception in default exception handler', error);
      }
      return;
    }
    try {
      handler(this, context);
    } catch (error) {
      if (_isEscaping(error)) throw error;
      try {
        this.defaultExceptionHandler({ message: 'Unhandled error in exception handler', exception: error as Error, context });
      } catch (inner) {
        if (_isEscaping(inner)) throw inner;
        logger.error(
          'Exception in default exception handler while handling an unexpected error in custom exception handler',
          inner,
        );
      }
    }
  }

  /** Turn debug mode on or off (set_debug). */
  setDebug(enabled: boolean): void {
    this.#debug = Boolean(enabled);
  }

  /** Whether debug mode is on (get_debug). */
  getDebug(): boolean {
    return this.#debug;
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    return `<EventLoop running=${this.#running} closed=${this.#closed} debug=${this.#debug}>`;
  }

  // ───────────────────────────── the iteration ─────────────────────────────

  /**
   * Run one full iteration (asyncio's `_run_once`), in these phases:
   * 1. drop cancelled timers: all of them when more than 100 are scheduled and over half are
   *    cancelled, else those at the head of the heap;
   * 2. move every timer due by now (plus the clock's resolution) to the end of the ready queue,
   *    in deadline order;
   * 3. run exactly the handles that were ready when this phase began, FIFO, skipping cancelled
   *    ones; handles scheduled meanwhile wait for the next iteration.
   * Waiting for I/O (asyncio's `select`) happens between iterations, in `#drive`.
   * This is the only place callbacks run.
   *
   * @internal
   */
  _runOnce(): void {
    this._iterations++;
    if (this.#inbox.length > 0) this.#drainInbox();
    const scheduled = this.#scheduled;
    if (
      scheduled.length > MIN_SCHEDULED_TIMER_HANDLES &&
      this.#timerCancelledCount / scheduled.length > MIN_CANCELLED_TIMER_HANDLES_FRACTION
    ) {
      scheduled.retain(keepScheduled);
      this.#timerCancelledCount = 0;
    } else {
      this.#dropCancelledHead();
    }

    const ready = this.#ready;
    if (scheduled.length > 0) {
      const end = this.time() + CLOCK_RESOLUTION;
      while (scheduled.length > 0 && scheduled.peekWhen() < end) {
        const timer = scheduled.pop();
        timer._scheduled = false;
        ready.push(timer);
        this._timersFired++;
      }
    }

    let count = ready.length;
    if (this.#debug) {
      while (count-- > 0) this.#runTimed(ready.shift() as Runnable);
    } else {
      while (count-- > 0) (ready.shift() as Runnable)._run();
    }
    if (this.#flushes.length > 0) this.#flushOutbound();
  }

  #drainInbox(): void {
    const inbox = this.#inbox;
    this.#inbox = [];
    for (const { receiver, batch, callsOnly } of inbox) {
      if (callsOnly) receiver._dispatchCalls(batch);
      else receiver._dispatch(batch);
    }
  }

  #flushOutbound(): void {
    const flushes = this.#flushes;
    this.#flushes = [];
    for (const link of flushes) link._flush();
  }

  /**
   * @internal Take a batch that arrived from another thread (the self-pipe's payload). A running
   * loop dispatches it in its next iteration, woken at once; a stopped loop keeps it for its
   * next run; a closed loop drops it.
   */
  _deliver(receiver: InboxReceiver, batch: unknown[], callsOnly = false): void {
    if (this.#closed) return;
    if (this.#idleSince !== 0) {
      // A gap past a missed spin's counts as one: a long idle must not keep the next burst from spinning.
      this.#noteArrivalGap(Math.min(performance.now() - this.#idleSince, SPIN_MISS_MS));
      this.#idleSince = 0;
    }
    this.#inbox.push({ receiver, batch, callsOnly });
    if (this.#running && !this.#inDrive && !this.#wakePending) this.#drive();
  }

  /**
   * @internal Take a batch that arrived while this thread waits for a peer (back-pressure, see
   * link.ts): it is taken when the loop turns, never now (the wait may be inside a callback).
   */
  _deliverLater(receiver: InboxReceiver, batch: unknown[]): void {
    if (this.#closed) return;
    this.#inbox.push({ receiver, batch, callsOnly: false });
    if (this.#running && !this.#inDrive && !this.#wakePending) this.#wake();
  }

  /** @internal Whether callbacks of this loop are running now (flushes can wait for the iteration's end). */
  _inDrive(): boolean {
    return this.#inDrive;
  }

  /** @internal Flush `link` once the current iteration's callbacks have run. */
  _flushAfterIteration(link: Flushable): void {
    this.#flushes.push(link);
  }

  /** @internal Call `hook` when the loop is closed, before it is marked closed (links end their calls and close their ports). */
  _addCloseHook(hook: () => void): void {
    if (this.#closed) hook();
    else this.#closeHooks.push(hook);
  }

  /** @internal Poll `source` instead of sleeping while batches arrive soon after the loop idles. */
  _addPollable(source: Pollable): void {
    this.#pollables.push(source);
  }

  /** @internal Stop polling `source`. */
  _removePollable(source: Pollable): void {
    const at = this.#pollables.indexOf(source);
    if (at !== -1) this.#pollables.splice(at, 1);
  }

  #noteArrivalGap(ms: number): void {
    this.#arrivalGap += (ms - this.#arrivalGap) / 4;
  }

  /**
   * About to sleep for `wait` seconds: when batches have lately arrived soon after the loop went
   * idle, poll the links for a short window instead; whether something arrived.
   */
  #spin(wait: number): boolean {
    const pollables = this.#pollables;
    // No links: no batch to time (a loop serving sockets idles after nearly every read; the clock is not free).
    if (pollables.length === 0) return false;
    const started = performance.now();
    this.#idleSince = started;
    if (this.#arrivalGap >= SPIN_GAP_LIMIT_MS) return false;
    const end = started + Math.min(SPIN_WINDOW_MS, wait * 1000);
    do {
      for (let i = 0; i < pollables.length; i++) {
        if ((pollables[i] as Pollable)._poll() && this.#inbox.length > 0) return true;
      }
    } while (performance.now() < end);
    this.#noteArrivalGap(SPIN_MISS_MS);
    this.#idleSince = performance.now();
    return false;
  }

  /**
   * Between two busy iterations: take what arrived from other threads into the inbox (the next
   * iteration dispatches it). A poll that finds nothing new costs one shared-memory read.
   */
  #pollBusy(): void {
    const pollables = this.#pollables;
    for (let i = 0; i < pollables.length; i++) (pollables[i] as Pollable)._poll();
    // The loop takes in messages although its drive goes on: a pool may send it calls.
    heartbeat[BUSY_SINCE] = monotonicNow();
  }

  /** Tell the pollables the loop gives libuv a turn; whether something arrived meanwhile. */
  #beforeYield(): boolean {
    const pollables = this.#pollables;
    let arrived = false;
    for (let i = 0; i < pollables.length; i++) {
      if ((pollables[i] as Pollable)._beforeYield?.() === true) arrived = true;
    }
    return arrived && this.#inbox.length > 0;
  }

  /** @internal Register what cancels this loop's calls still in flight to other threads (a link). */
  _addCallsInFlight(source: CallsInFlight): void {
    this.#callsInFlight.add(source);
  }

  /** @internal Forget a source registered with `_addCallsInFlight`. */
  _removeCallsInFlight(source: CallsInFlight): void {
    this.#callsInFlight.delete(source);
  }

  /**
   * @internal Cancel, with `message`, every Future of this loop that waits for a call to
   * another thread; returns how many were cancelled (run() does this as it ends, after the tasks).
   */
  _cancelCallsInFlight(message: string): number {
    let cancelled = 0;
    for (const source of [...this.#callsInFlight]) cancelled += source._cancelCallsInFlight(message);
    return cancelled;
  }

  /**
   * Called when the loop would sleep `seconds` until its next timer. A loop with a virtual
   * clock advances it and returns true, and the loop goes on at once; the real clock cannot
   * jump, so the base loop returns false and sleeps.
   *
   * @internal
   */
  _advanceClock(_seconds: number): boolean {
    return false;
  }

  /**
   * @internal Whether `time()` is a virtual clock that real time does not move: such a loop,
   * idle with timers it did not jump to, waits for a wake-up (a jump, something arriving)
   * rather than for real seconds.
   */
  _clockIsVirtual(): boolean {
    return false;
  }

  /**
   * @internal Whether the loop holds what other threads send until something else delivers it
   * (a simulation's loop): a link then counts a batch as taken when it arrives, not when the
   * loop dispatches it.
   */
  _holdsDeliveries(): boolean {
    return false;
  }

  /** @internal A Future of this loop waits for work outside it (a Promise, another thread): see `_clockHeld`. */
  _holdClock(): void {
    this.#clockHolds++;
  }

  /** @internal That work ended. */
  _releaseClock(): void {
    this.#clockHolds--;
  }

  /**
   * @internal Whether the loop waits for something besides its timers: a Promise or another
   * thread's Future one of its Futures follows, or a call to another thread not answered yet.
   */
  _clockHeld(): boolean {
    if (this.#clockHolds > 0) return true;
    for (const source of this.#callsInFlight) if (source._hasCallsPending()) return true;
    return false;
  }

  /** @internal Drive the loop soon if it runs and sleeps (its virtual clock moved). */
  _wakeUp(): void {
    if (this.#running && !this.#inDrive && !this.#wakePending) this.#wake();
  }

  /**
   * @internal A simulation's step: take `receiver`'s batch (when given) and run one iteration,
   * as `#drive` would, ending the run when the loop was stopped or an error escaped.
   */
  _simIterate(receiver: InboxReceiver | null, batch: unknown[] | null, callsOnly: boolean): void {
    if (!this.#running) return;
    if (receiver !== null) this.#inbox.push({ receiver, batch: batch as unknown[], callsOnly });
    this.#inDrive = true;
    this._tick = performance.now() | 0;
    let finished = false;
    let error: unknown;
    try {
      this._runOnce();
      finished = this.#stopping;
    } catch (caught) {
      error = caught === undefined ? new RuntimeError('undefined was thrown out of the event loop') : caught;
      finished = true;
    }
    this.#inDrive = false;
    if (finished) this.#finish(error);
  }

  /** @internal A simulation's poll: take in, now, what other threads posted to this loop. */
  _simPoll(): void {
    const pollables = this.#pollables;
    for (let i = 0; i < pollables.length; i++) {
      const pollable = pollables[i] as Pollable;
      pollable._beforeYield?.();
      if (pollable._drain === undefined) pollable._poll();
      else pollable._drain();
    }
  }

  /** @internal What a simulation needs to know of the loop between its steps. */
  _simState(): { running: boolean; ready: number; nextTimer: number; holds: number } {
    this.#dropCancelledHead();
    const scheduled = this.#scheduled;
    return {
      running: this.#running,
      ready: this.#ready.length + this.#inbox.length,
      nextTimer: scheduled.length === 0 ? Infinity : scheduled.peekWhen(),
      holds: this.#clockHolds,
    };
  }

  #runTimed(handle: Runnable): void {
    const started = this.time();
    handle._run();
    const took = this.time() - started;
    if (took >= this.slowCallbackDuration) {
      const callback = handle._describe();
      logger.warning(`Executing ${callback} took ${took.toFixed(3)} seconds (thread '${currentThreadName()}')`);
      const slow = this._slowCallbacks;
      if (slow.length === SLOW_CALLBACKS_KEPT) slow.shift();
      slow.push({ callback, seconds: took, at: Date.now() });
    }
  }

  #dropCancelledHead(): void {
    const scheduled = this.#scheduled;
    while (scheduled.length > 0 && (scheduled.peek() as TimerHandle)._cancelled) {
      this.#timerCancelledCount--;
      scheduled.pop()._scheduled = false;
    }
  }

  /**
   * Run iterations back to back while work is ready, for at most one time slice; then give
   * libuv a turn (work left), sleep until the earliest timer, or idle until a wake-up.
   */
  #drive = (): void => {
    this.#wakePending = false;
    this.#immediate = null;
    if (!this.#running) return;
    if (this._gate !== null) {
      this._gate.kick();
      return;
    }
    this.#inDrive = true;
    // Woken by something other than a batch: the next batch's gap is not measured from the last sleep.
    this.#idleSince = 0;
    const started = performance.now();
    const sliceEnd = started + TIME_SLICE_MS;
    this._tick = started | 0;
    const beating = healthEnabled();
    if (beating) heartbeat[0] = TIME_ORIGIN + started;
    // Until the drive returns to libuv, nothing new is taken in: pools read it (loop-thread-pool.ts).
    heartbeat[BUSY_SINCE] = MONOTONIC_ORIGIN + started;
    let iterations = 0;
    let error: unknown;
    try {
      for (;;) {
        this._runOnce();
        if (this.#stopping) break;
        // Busy: take what other threads sent at every iteration, as asyncio's select(0) does,
        // not only when libuv gets its turn at the slice's end.
        if (this.#ready.length !== 0 && this.#pollables.length !== 0) this.#pollBusy();
        if (this.#ready.length === 0) {
          // Batches taken while a flush waited for its peer (back-pressure) are the next iteration's.
          if (this.#inbox.length > 0) continue;
          this.#dropCancelledHead();
          const scheduled = this.#scheduled;
          const wait = scheduled.length === 0 ? MAXIMUM_SELECT_TIMEOUT : scheduled.peekWhen() - this.time();
          if (wait > CLOCK_RESOLUTION) {
            if (scheduled.length > 0 && this._advanceClock(wait)) continue;
            const virtual = this._clockIsVirtual();
            if (!virtual && this.#spin(wait)) continue;
            if (this.#beforeYield()) continue;
            this.#sleep(virtual ? MAXIMUM_SELECT_TIMEOUT : Math.min(wait, MAXIMUM_SELECT_TIMEOUT), started);
            this.#inDrive = false;
            if (beating) heartbeat[0] = 0;
            heartbeat[BUSY_SINCE] = 0;
            return;
          }
        }
        if ((++iterations & (SLICE_CHECK_EVERY - 1)) === 0 && performance.now() >= sliceEnd) {
          this.#beforeYield();
          this.#wake();
          this.#inDrive = false;
          if (beating) heartbeat[0] = 0;
          heartbeat[BUSY_SINCE] = 0;
          return;
        }
      }
    } catch (caught) {
      error = caught === undefined ? new RuntimeError('undefined was thrown out of the event loop') : caught;
    }
    this.#inDrive = false;
    if (beating) heartbeat[0] = 0;
    heartbeat[BUSY_SINCE] = 0;
    this.#finish(error);
  };

  #onTimer = (): void => {
    this.#timer = null;
    if (!this.#wakePending) this.#drive();
  };

  #wake(): void {
    this.#wakePending = true;
    this.#immediate = setImmediate(this.#drive);
  }

  /** Sleep `seconds` (until the next timer, or idle); `driveStarted`: when this run of iterations began. */
  #sleep(seconds: number, driveStarted: number): void {
    // Idle with a timer armed a second or more from the drive's start (one armed for idling, or
    // for a timer since cancelled): keep it, a wake-up drives the loop anyway and an early firing
    // only drives it once for nothing. No clock read: a socket's loop idles after nearly every read.
    if (seconds >= MAXIMUM_SELECT_TIMEOUT && this.#timer !== null && this.#timerDue - driveStarted >= 1000) return;
    const due = performance.now() + seconds * 1000;
    if (this.#timer !== null) {
      // Keep an armed timer that fires at the right time (within a millisecond).
      if (Math.abs(this.#timerDue - due) < 1) return;
      clearTimeout(this.#timer);
    }
    this.#timerDue = due;
    this.#timer = setTimeout(this.#onTimer, Math.ceil(seconds * 1000));
  }

  #disarm(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#immediate !== null) {
      clearImmediate(this.#immediate);
      this.#immediate = null;
    }
    this.#wakePending = false;
  }

  #finish(error: unknown): void {
    if (this.#flushes.length > 0) this.#flushOutbound();
    this.#stopping = false;
    this.#running = false;
    if (_getRunningLoop() === this) _setRunningLoop(null);
    this.#disarm();
    const settle = this.#settle;
    this.#settle = null;
    settle?.(error);
  }

  #checkClosed(): void {
    if (this.#closed) throw new RuntimeError('Event loop is closed');
  }

  #checkRunning(): void {
    if (this.#running) throw new RuntimeError('This event loop is already running');
    if (_getRunningLoop() !== null) {
      throw new RuntimeError('Cannot run the event loop while another loop is running');
    }
  }
}
