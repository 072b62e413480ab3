/**
 * Loops across worker threads: a LoopThread is a worker whose own loop runs forever and hosts
 * one module; loops call each other's exported functions through links (src/internal/link.ts),
 * and the hosted module reaches the loop that started it through `parentLoop()`.
 */
import { MessageChannel, Worker, isMainThread, parentPort, threadId as currentThreadId, workerData, MessagePort, type ResourceLimits, type Transferable } from 'node:worker_threads';
import { _closeServedComlinkPorts, _comlinkChannel, _serveComlink, type _ServedModule } from './comlink.js';
import type { EventLoop } from './base-events.js';
import type { Coroutine, YieldablePromise } from './coroutines.js';
import { yieldable } from './internal/yieldable.js';
import { getEventLoop, newEventLoop, setEventLoop, _setThreadName } from './events.js';
import { RuntimeError } from './exceptions.js';
import type { Future } from './futures.js';
import { ConcurrentFuture } from './concurrent.js';
import { decodeError, encodeError } from './internal/errors.js';
import { DEFAULT_MAX_CALLS_IN_FLIGHT, Link, checkMaxCallsInFlight, type CallTarget } from './internal/link.js';
import { _compiledByStarter, importUserModule, isTypeScriptPortMessage, serveTypeScript } from './internal/ts-loader.js';
import { threadExecArgv } from './internal/threads/exec-argv.js';
import type { FromWorker, LinkPorts, LoopThreadData, ToWorker } from './internal/messages.js';
import type { SimulatedChild } from './internal/testing/active.js';
import type { SimulatedLoop } from './testing/simulated-loop.js';
import { _getRunningLoop } from './internal/running.js';
import { allTasks, currentTask } from './task.js';
import { gather } from './tasks.js';
import { moduleUrlOf, notAFunction, notExported, quoteName } from './internal/module-ref.js';
import { INSPECT } from './internal/format.js';
import { _setThreadGuard, newThreadGuard, stopQueueOperations } from './internal/threads/guard.js';
import { currentThreadName, forgetThread, heartbeat, rememberThread } from './internal/introspect.js';
import { loopRecord, makeLinkPorts, proxyOf } from './internal/loop-refs.js';
import { FATE_CLOSING, FATE_OUT_OF_MEMORY, FATE_RUNNING, FATE_TERMINATED, closedError, deathDescriber, deathError, describeError, newFate } from './internal/thread-deaths.js';
import { CROSSES } from './internal/wire.js';
import { encodeInitializer, runInitializer } from './internal/threads/initializer.js';
import { simulation } from './internal/testing/active.js';
import { bundleFile } from './internal/bundle-files.js';
import { snapshotThisThread, thisHeartbeat, unresponsiveThread, type ThreadSnapshot } from './internal/snapshot.js';

/** The worker entry: the bundle's, whichever copy of multiloop starts the thread. */
const HOST_ENTRY = bundleFile('loop-host.js');

/** How long `close()` waits for a graceful end before it terminates the thread, in ms. */
const CLOSE_GRACE_MS = 10_000;

let threadCounter = 0;

/** The LoopThreads this thread started that are alive: a snapshot of the process asks each. */
const startedHere = new Set<LoopThread>();

/** How much of its own deadline a thread gives the threads it started, so that it answers in time. */
const NESTED_DEADLINE = 0.8;

/**
 * This thread's part of a snapshot (read by `here`) and that of every LoopThread under it, each
 * asked with `timeout` ms to answer; one that does not answer is listed as unresponsive.
 *
 * @internal
 */
export async function _snapshotFromHere(timeout: number, here: () => ThreadSnapshot | Promise<ThreadSnapshot> = snapshotThisThread): Promise<ThreadSnapshot[]> {
  const mine = here();
  const below = await Promise.all([...startedHere].map((thread) => thread._snapshot(timeout)));
  return [await mine, ...below.flat()];
}

/**
 * A snapshot of every thread of the process: taken from the main thread, which a LoopThread
 * asks through the threads that started it; `here` reads this thread's part when it is taken
 * from here.
 *
 * @internal
 */
export function _snapshotProcess(timeout: number, here?: () => ThreadSnapshot | Promise<ThreadSnapshot>): Promise<ThreadSnapshot[]> {
  if (isMainThread || parentPort === null || hostedHere === null) return _snapshotFromHere(timeout, here);
  const { port1, port2 } = new MessageChannel();
  const message: FromWorker = { type: 'ps', port: port2, timeout };
  return new Promise<ThreadSnapshot[]>((resolve) => {
    // The parent may be too busy to answer: then this thread's part (and those below) is what is known.
    const timer = setTimeout(() => {
      port1.close();
      void _snapshotFromHere(timeout * NESTED_DEADLINE, here).then(resolve);
    }, timeout * 2);
    port1.once('message', (answer: ThreadSnapshot[]) => {
      clearTimeout(timer);
      port1.close();
      resolve(answer);
    });
    parentPort!.postMessage(message, [port2]);
  });
}

/** Answer a snapshot request on `port`. */
function answerSnapshot(port: MessagePort, take: Promise<ThreadSnapshot[]>): void {
  void take.then(
    (answer) => {
      port.postMessage(answer);
      port.close();
    },
    () => port.close(),
  );
}

/** The value a call of `F` produces on the caller's side: a coroutine's, Future's or Promise's result. */
export type RemoteResult<R> =
  R extends Generator<unknown, infer T, unknown> ? T : R extends Future<infer T> ? T : R extends PromiseLike<infer T> ? T : R;

/** The functions of module `M`, each returning a Future of the caller's loop. */
export type RemoteProxy<M> = {
  [K in keyof M as M[K] extends (...args: never[]) => unknown ? K : never]: M[K] extends (...args: infer A) => infer R
    ? (...args: A) => Future<RemoteResult<R>>
    : never;
};

/** A loop in another thread, as calls see it. */
export interface LoopRef {
  /** Run export `name` there (a coroutine function becomes a Task there); a Future of the caller's loop follows it. */
  call<T = unknown>(name: string, ...args: unknown[]): Future<T>;
  /** Schedule a call of export `name` there; returns at once. */
  callSoonThreadsafe(name: string, ...args: unknown[]): void;
  /**
   * Call export `name` there and return a ConcurrentFuture, whose `result(timeout)` may block
   * this thread until the reply arrives: for synchronous code of a worker thread (asyncio's
   * `run_coroutine_threadsafe(...).result(timeout)` from a thread). If the thread exits
   * meanwhile (process.exit, an uncaught error) the wait ends with its death; a thread killed
   * without running JavaScript (terminate(), out of memory) cannot say so: give a timeout.
   */
  submit<T = unknown>(name: string, ...args: unknown[]): ConcurrentFuture<T>;
  /** A typed view: `ref.proxy<typeof import('./svc.js')>().add(1, 2)` is a `Future<number>`. */
  proxy<M>(): RemoteProxy<M>;
}

/** Options of `LoopThread.start`. */
export interface LoopThreadOptions {
  /** The thread's name, in messages and in `threadName` of the worker (default `LoopThread-<n>`). */
  name?: string;
  /**
   * Functions of the starting loop the hosted module may call through `parentLoop()`; they run
   * in the loop that was running when `start` was called (which is then required).
   */
  expose?: Record<string, (...args: never[]) => unknown>;
  /** Resource limits of the worker (node:worker_threads). */
  resourceLimits?: ResourceLimits;
  /**
   * Node options of the worker (default: the parent's `process.execArgv` without tsx's flags: the
   * thread's TypeScript modules are compiled by the thread that starts it, by the loader it runs
   * under, and tsx in each thread would cost more than the thread; and without the V8 options
   * (`--max-old-space-size`, `--expose-gc`, ...) and process-wide options a worker refuses: they are
   * in force in every thread already; a thread's own heap is set with `resourceLimits`).
   */
  execArgv?: string[];
  /** The worker's `process.env` (default: a copy of the parent's). */
  env?: Record<string, string | undefined>;
  /**
   * Back-pressure: how many calls (`call`, `submit`, `callSoonThreadsafe`, and replies) one side
   * of a link to this thread may have sent that the other side has not taken in yet (its loop
   * has not dispatched them), in each direction (default 65,536; 1 to 2^30). Past it, the sending thread waits for
   * the other side to take a quarter of them, as a writer on a full pipe does: a `call` or
   * `callSoonThreadsafe` in a loop that never yields is held too. While it waits the thread takes
   * its own messages, so two threads flooding each other both go on; a side that takes nothing
   * for 5 s (blocked, or ended without running JavaScript) no longer holds the sender until it
   * takes again.
   */
  maxCallsInFlight?: number;
}


/** Functions offered by name, with the library's errors for names that are not among them. */
function functionTable(table: Record<string, unknown>, what: string): CallTarget & _ServedModule {
  return {
    lookup(name: string): (...args: unknown[]) => unknown {
      if (typeof name !== 'string') throw new TypeError(`a function name must be a string, got ${typeof name}`);
      if (!Object.prototype.hasOwnProperty.call(table, name)) {
        throw new TypeError(notExported(name, what, functionNames(table)));
      }
      const value = table[name];
      if (typeof value !== 'function') throw new TypeError(notAFunction(name, what));
      return value as (...args: unknown[]) => unknown;
    },
    refusal(name: string, how?: string): TypeError {
      return new TypeError(notExported(name, what, functionNames(table), how));
    },
  };
}

/** The names of the functions in `table`. */
function functionNames(table: Record<string, unknown>): string[] {
  return Object.keys(table).filter((name) => typeof table[name] === 'function');
}


/**
 * A worker thread whose own loop runs forever and hosts one module.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   const svc = yield* ensureFuture(LoopThread.start(new URL('./svc.js', import.meta.url), { name: 'svc' }));
 *   const sum = yield* svc.call<number>('add', 1, 2);      // 3, computed in the svc thread
 *   const typed = svc.proxy<typeof import('./svc.js')>();
 *   console.log(yield* typed.add(40, 2));                  // typed Future<number>
 *   yield* ensureFuture(svc.close());
 * }
 * ```
 */
export class LoopThread implements LoopRef {
  /** The worker's thread id. */
  readonly threadId: number;
  /** The thread's name. */
  readonly name: string;
  /** The hosted module. */
  readonly moduleUrl: string;
  readonly #worker: Worker;
  /** The thread's guard of ThreadQueue operations (see terminateSafely). */
  #guard: SharedArrayBuffer = newThreadGuard();
  /** What was done to the thread, for the LoopRefs to it in other threads (internal/thread-deaths.ts). */
  readonly #fate: Int32Array;
  readonly #links = new Map<EventLoop, Link>();
  readonly #exports: Set<string>;
  readonly #others: Set<string>;
  readonly #exited: Promise<void>;
  #death: (() => Error) | null = null;
  #closing: YieldablePromise<void> | null = null;
  /** The last name checked and the last loop's link: a burst of calls looks them up once. */
  #checkedName: string | null = null;
  #lastLoop: EventLoop | null = null;
  #lastLink: Link | null = null;
  #terminated = false;
  readonly #heartbeat: Float64Array | null;
  #deathWatchers: Array<(error: Error) => void> = [];
  /** The back-pressure bound of its links (LoopThreadOptions.maxCallsInFlight). */
  #maxCallsInFlight = DEFAULT_MAX_CALLS_IN_FLIGHT;

  protected constructor(
    worker: Worker,
    name: string,
    moduleUrl: string,
    ready: { exports: string[]; others: string[]; heartbeat?: Float64Array },
    exited: Promise<void>,
    fate: Int32Array,
  ) {
    this.#fate = fate;
    this.#worker = worker;
    this.threadId = worker.threadId;
    this.name = name;
    this.moduleUrl = moduleUrl;
    this.#exports = new Set(ready.exports);
    this.#others = new Set(ready.others);
    this.#heartbeat = ready.heartbeat ?? null;
    this.#exited = exited;
  }

  /** @internal The thread's heartbeat (internal/introspect.ts), which its loops write and any thread may read. */
  _heartbeat(): Float64Array | null {
    return this.#heartbeat;
  }

  /**
   * @internal This thread's part of a snapshot and that of the LoopThreads it started, or, when
   * it does not answer within `timeout` ms, what its heartbeat says.
   */
  _snapshot(timeout: number): Promise<ThreadSnapshot[]> {
    const unresponsive = (): ThreadSnapshot[] => [unresponsiveThread(this.threadId, this.name, this.#heartbeat?.[0] ?? 0)];
    if (this.#death !== null) return Promise.resolve([]);
    const { port1, port2 } = new MessageChannel();
    const message: ToWorker = { type: 'snapshot', port: port2, timeout: timeout * NESTED_DEADLINE };
    return new Promise<ThreadSnapshot[]>((resolve) => {
      const timer = setTimeout(() => {
        port1.close();
        resolve(unresponsive());
      }, timeout);
      port1.once('message', (answer: ThreadSnapshot[]) => {
        clearTimeout(timer);
        port1.close();
        resolve(answer);
      });
      // A thread that ends meanwhile answers nothing: its port closes.
      port1.once('close', () => {
        clearTimeout(timer);
        resolve(this.#death !== null ? [] : unresponsive());
      });
      try {
        this.#worker.postMessage(message, [port2]);
      } catch {
        clearTimeout(timer);
        port1.close();
        resolve([]);
      }
    });
  }

  /**
   * Start a thread hosting the module at `moduleUrl`; resolves once the module is loaded and
   * the thread's loop runs, rejects with the module's error when it cannot be loaded. A coroutine
   * can `yield*` it (a YieldablePromise).
   */
  static start(moduleUrl: string | URL, options: LoopThreadOptions = {}): YieldablePromise<LoopThread> {
    return yieldable(LoopThread.#start(moduleUrl, options));
  }

  /**
   * @internal `start`, the thread calling export `initializer[0]` with the rest as arguments
   * before it is ready (a pool's initializer): its failure is the start's.
   */
  static _startInitialized(moduleUrl: string | URL, options: LoopThreadOptions, initializer: readonly [string, ...unknown[]]): Promise<LoopThread> {
    return LoopThread.#start(moduleUrl, options, initializer);
  }

  static async #start(moduleUrl: string | URL, options: LoopThreadOptions, initializer: readonly [string, ...unknown[]] | null = null): Promise<LoopThread> {
    const url = moduleUrlOf(moduleUrl, 'LoopThread.start()');
    const sim = simulation;
    const name = options.name ?? sim?.defaultName('LoopThread') ?? `LoopThread-${++threadCounter}`;
    const loop = _getRunningLoop();
    const expose = options.expose ?? {};
    const maxCallsInFlight = checkMaxCallsInFlight(options.maxCallsInFlight, 'LoopThread.start()');
    if (options.expose !== undefined && loop === null) {
      throw new RuntimeError('LoopThread.start() with expose needs a running loop: the exposed functions run in it');
    }
    const transferList: Transferable[] = [];
    // Before the thread's own link is made: an argument that cannot cross fails the start here.
    const init = initializer === null ? null : encodeInitializer(initializer, transferList);
    let parentSide: LinkPorts | null = null;
    let threadSide: LinkPorts | null = null;
    if (loop !== null) [parentSide, threadSide] = makeLinkPorts();
    const data: LoopThreadData = {
      moduleUrl: url,
      name,
      parent: threadSide,
      exposed: Object.keys(expose),
      starter: { threadId: currentThreadId, name: currentThreadName(), heartbeat },
      guard: newThreadGuard(),
      maxCallsInFlight,
      initializer: init,
      simulation: sim === null ? null : sim.child(),
    };
    if (threadSide !== null) transferList.push(threadSide.inPort, threadSide.outPort);
    if (data.simulation !== null) transferList.push(data.simulation.port);
    let worker: Worker;
    try {
      worker = new Worker(HOST_ENTRY, {
        workerData: data,
        transferList,
        name,
        resourceLimits: options.resourceLimits,
        execArgv: options.execArgv ?? threadExecArgv(),
        env: options.env,
      });
    } catch (error) {
      for (const item of transferList) if (item instanceof MessagePort) item.close();
      parentSide?.inPort.close();
      parentSide?.outPort.close();
      if (init === null || (error as Error | null)?.name !== 'DataCloneError') throw error;
      throw new TypeError(`cannot send the arguments of initializer ${quoteName(init.name)} to LoopThread '${name}': ${(error as Error).message}`, { cause: error });
    }
    const peer = `LoopThread '${name}'`;
    // Read now: a worker that exited reports -1.
    const threadId = worker.threadId;
    let thread: LoopThread | null = null;
    const firstLink =
      loop !== null && parentSide !== null
        ? new Link(loop, parentSide, functionTable(expose, `the parent of ${peer}`), peer, {
            ownedByThread: true,
            describeDeath: deathDescriber(name, threadId),
            onDeath: (makeError) => {
              if (thread !== null) thread.#kill(makeError);
            },
            maxCallsInFlight,
          })
        : null;

    let failure: Error | null = null;
    const fate = newFate();
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const ready = await new Promise<{ exports: string[]; others: string[]; heartbeat: Float64Array } | null>((resolve) => {
      worker.on('message', (message: FromWorker) => {
        if (isTypeScriptPortMessage(message)) serveTypeScript(message.port);
        else if (message.type === 'ready') resolve(message);
        else if (message.type === 'ps') answerSnapshot(message.port, _snapshotProcess(message.timeout));
        else if (message.type === 'link' && loop !== null) {
          new Link(loop, message.ports, functionTable(expose, `the parent of ${peer}`), `a thread reaching the parent of ${peer}`, { maxCallsInFlight });
        }
        else if (message.type === 'failed') {
          failure = decodeError(message.error) as Error;
          resolve(null);
        }
      });
      // A worker's uncaught throw may be any value (@types/node 26 types it `unknown`).
      worker.on('error', (thrown: unknown) => {
        if (thread === null) {
          failure ??= thrown instanceof Error ? thrown : new RuntimeError(`${peer} failed before its loop ran: uncaught ${String(thrown)}`, { cause: thrown });
          resolve(null);
        } else {
          if ((thrown as { code?: unknown } | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY') Atomics.store(fate, 0, FATE_OUT_OF_MEMORY);
          thread.#kill(() => deathError(name, threadId, describeError(thrown), thrown));
        }
      });
      worker.on('exit', (code) => {
        if (thread === null) {
          failure ??= new RuntimeError(`${peer} exited with code ${code} before its loop ran`);
          resolve(null);
        } else thread.#onExit(code);
        if (data.simulation !== null) sim?.childExited(data.simulation.path);
      });
    });
    if (data.simulation !== null) sim?.childReady(data.simulation.path);
    if (ready === null) {
      firstLink?.close();
      void terminateSafely(worker, data.guard);
      throw failure ?? new RuntimeError(`${peer} could not start`);
    }
    worker.unref();
    thread = new LoopThread(worker, name, url, ready, exited, fate);
    thread.#guard = data.guard;
    thread.#maxCallsInFlight = maxCallsInFlight;
    const started = thread;
    startedHere.add(started);
    rememberThread(threadId, name, ready.heartbeat);
    void exited.then(() => {
      startedHere.delete(started);
      forgetThread(threadId);
    });
    if (firstLink !== null && loop !== null) thread.#links.set(loop, firstLink);
    return thread;
  }

  /**
   * Run export `name` in the thread's loop (a coroutine function becomes a Task there); returns
   * a Future of the caller's loop chained to it. Cancelling that Future cancels the remote Task.
   */
  call<T = unknown>(name: string, ...args: unknown[]): Future<T> {
    this.#checkName(name);
    const loop = getEventLoop();
    const death = this.#death;
    if (death !== null) {
      const future = loop.createFuture<T>();
      future.setException(death());
      return future;
    }
    return this.#linkFor(loop).call<T>(name, args);
  }

  /** Schedule a call of export `name` in the thread's loop; returns at once. */
  callSoonThreadsafe(name: string, ...args: unknown[]): void {
    this.#checkName(name);
    const death = this.#death;
    if (death !== null) throw death();
    this.#linkFor(getEventLoop()).notify(name, args);
  }

  /** Call export `name` in the thread's loop; the ConcurrentFuture's `result(timeout)` may block until it is done. */
  submit<T = unknown>(name: string, ...args: unknown[]): ConcurrentFuture<T> {
    this.#checkName(name);
    const death = this.#death;
    if (death !== null) {
      const future = ConcurrentFuture._create<T>();
      future._setRunningOrNotifyCancel();
      future._setException(death());
      return future;
    }
    return this.#linkFor(getEventLoop()).submit<T>(name, args);
  }

  /**
   * A new MessagePort whose far end the thread serves with comlink: any comlink client (in any
   * thread it is moved to) calls the hosted module's own exported functions through
   * `Comlink.wrap(port)`, each call run in the thread's loop (a coroutine function as a Task);
   * other names are refused as by `call`, and so is every request that is not such a call:
   * reading, setting or constructing anything, a property of a function (`fn.call`,
   * `fn.constructor`), another endpoint (`Comlink.createEndpoint`: ask for another port
   * instead). `wrapComlink(port)` gives Futures instead of Promises.
   * The port closes when the thread ends (a `wrapComlink` proxy then fails its pending calls).
   *
   * @example
   * ```ts
   * const svc = Comlink.wrap<typeof import('./svc.js')>(lt.comlinkPort() as unknown as Comlink.Endpoint);
   * await svc.add(1, 2); // 3
   * ```
   */
  comlinkPort(): MessagePort {
    const death = this.#death;
    if (death !== null) throw death();
    const { port1, port2 } = _comlinkChannel(`LoopThread '${this.name}' (thread ${this.threadId})`);
    const message: ToWorker = { type: 'comlink', port: port2 };
    this.#worker.postMessage(message, [port2]);
    return port1;
  }

  /** A typed view of the hosted module: `lt.proxy<typeof import('./svc.js')>().add(1, 2)`. */
  proxy<M>(): RemoteProxy<M> {
    return proxyOf<M>(this);
  }

  /** Whether the thread is gone (closed, exited, crashed or terminated). */
  isDead(): boolean {
    return this.#death !== null;
  }

  /**
   * Stop the thread's loop, cancel its tasks (their `finally` blocks run) and end the thread;
   * idempotent. A thread that does not end within 10 s is terminated.
   */
  close(): YieldablePromise<void> {
    if (this.#closing !== null) return this.#closing;
    this.#closing = yieldable((async () => {
      if (this.#death === null) {
        const message: ToWorker = { type: 'close' };
        Atomics.compareExchange(this.#fate, 0, FATE_RUNNING, FATE_CLOSING);
        this.#worker.postMessage(message);
        // Whoever awaits the close is kept alive until the thread is gone (the worker is unref'd otherwise).
        this.#worker.ref();
        const timer = setTimeout(() => {
          this.#terminated = true;
          Atomics.store(this.#fate, 0, FATE_TERMINATED);
          void terminateSafely(this.#worker, this.#guard);
        }, CLOSE_GRACE_MS);
        timer.unref();
        await this.#exited;
        clearTimeout(timer);
      } else {
        await this.#exited;
      }
    })());
    return this.#closing;
  }

  /**
   * @internal Cross to another thread as a LoopRef to this thread's loop over a link of its own
   * (see internal/loop-refs.ts); a TypeError once the thread is gone.
   */
  [CROSSES](what: string): Record<string, unknown> {
    const death = this.#death;
    if (death !== null) throw new TypeError(`${what} holds ${this}, whose thread is gone: ${death().message}`);
    const thread = { name: this.name, threadId: this.threadId, fate: this.#fate };
    return loopRecord(`LoopThread '${this.name}'`, (ports) => {
      const message: ToWorker = { type: 'link', ports };
      this.#worker.postMessage(message, [ports.inPort, ports.outPort]);
    }, thread);
  }

  /** `await using lt = await LoopThread.start(...)`: `close()` when the scope ends. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** End the thread at once (Worker.terminate); pending calls fail. */
  terminate(): YieldablePromise<void> {
    this.#terminated = true;
    // Before the thread ends: a LoopRef to it reads why as its end of the link closes.
    Atomics.store(this.#fate, 0, FATE_TERMINATED);
    return yieldable(terminateSafely(this.#worker, this.#guard).then(() => this.#exited));
  }

  /** The repr, also in `util.inspect` and console.log (no internals). */
  [INSPECT](): string {
    return this.toString();
  }

  toString(): string {
    return `<LoopThread name='${this.name}' thread=${this.threadId}${this.#death === null ? '' : ' dead'}>`;
  }

  #checkName(name: string): void {
    if (name === this.#checkedName) return;
    if (typeof name !== 'string') throw new TypeError(`a function name must be a string, got ${typeof name}`);
    if (this.#exports.has(name)) {
      this.#checkedName = name;
      return;
    }
    if (this.#others.has(name)) throw new TypeError(notAFunction(name, this.moduleUrl));
    throw new TypeError(notExported(name, this.moduleUrl, [...this.#exports], `LoopThread '${this.name}'`));
  }

  #linkFor(loop: EventLoop): Link {
    const last = this.#lastLink;
    if (loop === this.#lastLoop && last !== null && !last.isDead() && !loop.isClosed()) return last;
    if (loop.isClosed()) throw new RuntimeError('Event loop is closed');
    let link = this.#links.get(loop);
    if (link === undefined || link.isDead()) {
      const [here, there] = makeLinkPorts();
      const message: ToWorker = { type: 'link', ports: there };
      this.#worker.postMessage(message, [there.inPort, there.outPort]);
      link = new Link(loop, here, functionTable({}, `a loop calling LoopThread '${this.name}'`), `LoopThread '${this.name}'`, {
        ownedByThread: true,
        describeDeath: deathDescriber(this.name, this.threadId),
        onDeath: (makeError) => this.#kill(makeError),
        maxCallsInFlight: this.#maxCallsInFlight,
      });
      this.#links.set(loop, link);
      loop._addCloseHook(() => this.#links.delete(loop));
    }
    this.#lastLoop = loop;
    this.#lastLink = link;
    return link;
  }

  #onExit(code: number): void {
    if (this.#closing !== null && !this.#terminated && code === 0) {
      this.#kill(() => closedError(this.name));
    } else if (this.#terminated) {
      this.#kill(() => deathError(this.name, this.threadId, 'it was terminated', null));
    } else {
      this.#kill(deathDescriber(this.name, this.threadId).bind(null, code, null));
    }
  }

  #kill(makeError: () => Error): void {
    if (this.#death !== null) return;
    this.#death = makeError;
    for (const link of this.#links.values()) link._fail(makeError);
    const watchers = this.#deathWatchers;
    this.#deathWatchers = [];
    for (const watcher of watchers) watcher(makeError());
  }

  /**
   * @internal Call `watcher` with the error calls fail with once the thread is gone (closed,
   * exited, crashed, terminated); at once, from a microtask, when it is gone already.
   */
  _onDeath(watcher: (error: Error) => void): void {
    const death = this.#death;
    if (death !== null) queueMicrotask(() => watcher(death()));
    else this.#deathWatchers.push(watcher);
  }
}

/**
 * Terminate `worker` once it is out of any ThreadQueue operation: a thread ended in the middle of
 * one would leave the queue's lock held (threads/guard.ts).
 */
function terminateSafely(worker: Worker, guard: SharedArrayBuffer): Promise<number> {
  stopQueueOperations(guard);
  return worker.terminate();
}

// ───────────────────────────── inside the thread ─────────────────────────────

let parentRef: LoopRef | null = null;
/** The module this thread hosts, when it is a LoopThread. */
let hostedHere: string | null = null;

/**
 * The loop that started this LoopThread, to call the functions it exposed; null outside a
 * LoopThread or when the thread was started outside a running loop.
 *
 * @example
 * ```ts
 * // in a module hosted by a LoopThread
 * export function* report(line: string): Coroutine<void> {
 *   yield* parentLoop()!.call('log', line);
 * }
 * ```
 */
export function parentLoop(): LoopRef | null {
  return parentRef;
}

class ParentLoop implements LoopRef {
  readonly #link: Link;

  constructor(link: Link) {
    this.#link = link;
  }

  call<T = unknown>(name: string, ...args: unknown[]): Future<T> {
    this.#checkLoop();
    return this.#link.call<T>(name, args);
  }

  callSoonThreadsafe(name: string, ...args: unknown[]): void {
    this.#checkLoop();
    this.#link.notify(name, args);
  }

  submit<T = unknown>(name: string, ...args: unknown[]): ConcurrentFuture<T> {
    return this.#link.submit<T>(name, args);
  }

  proxy<M>(): RemoteProxy<M> {
    return proxyOf<M>(this);
  }

  /** @internal Cross to another thread as a LoopRef to the parent loop, over a link the parent serves. */
  [CROSSES](): Record<string, unknown> {
    return loopRecord(`the loop that started LoopThread '${currentThreadName()}'`, (ports) => {
      const message: FromWorker = { type: 'link', ports };
      (parentPort as MessagePort).postMessage(message, [ports.inPort, ports.outPort]);
    });
  }

  #checkLoop(): void {
    if (getEventLoop() !== this.#link.loop) {
      throw new RuntimeError("parentLoop() is called from the thread's own loop only");
    }
  }
}

/**
 * Host the module named in `workerData` on a new loop of this thread, until the parent asks
 * the thread to close. The body of `workers/loop-host.ts`.
 *
 * @internal
 */
export async function _hostLoopThread(): Promise<void> {
  const data = workerData as LoopThreadData;
  const control = parentPort;
  if (control === null) throw new RuntimeError('_hostLoopThread() runs inside a LoopThread worker only');
  _setThreadName(data.name);
  _compiledByStarter(control);
  _setThreadGuard(data.guard);
  rememberThread(data.starter.threadId, data.starter.name, data.starter.heartbeat);
  hostedHere = data.moduleUrl;
  const simulated = data.simulation === null ? null : await import('./testing/gates.js');
  const loop = simulated === null ? newEventLoop() : simulated.simulatedLoopForThread(data.simulation as SimulatedChild);
  setEventLoop(loop);
  // Calls that arrive before the module is loaded find nothing; then its namespace (one table, not one per call).
  let hosted = functionTable({}, data.moduleUrl);
  const target: CallTarget = {
    lookup: (name) => hosted.lookup(name),
  };
  if (data.parent !== null) {
    const link = new Link(loop, data.parent, target, 'the parent loop', { maxCallsInFlight: data.maxCallsInFlight });
    parentRef = new ParentLoop(link);
  }

  let namespace: Record<string, unknown>;
  try {
    namespace = await importUserModule(moduleUrlOf(data.moduleUrl, 'a LoopThread'));
  } catch (error) {
    const message: FromWorker = { type: 'failed', error: encodeError(error) };
    control.postMessage(message);
    return;
  }
  hosted = functionTable(namespace, data.moduleUrl);
  const names = Object.keys(namespace);

  control.on('message', (message: ToWorker) => {
    if (message.type === 'link') new Link(loop, message.ports, target, 'a loop of the parent thread', { maxCallsInFlight: data.maxCallsInFlight });
    else if (message.type === 'comlink') _serveComlink(loop, message.port, hosted);
    else if (message.type === 'snapshot') answerSnapshot(message.port, _snapshotFromHere(message.timeout));
    else if (message.type === 'close') loop.callSoonThreadsafe(() => void loop.createTask(shutdown(loop)));
  });
  control.unref();

  const running = loop.runForever();
  const failure = data.initializer === null ? null : await runInitializer(loop, target.lookup, data.initializer, data.name);
  if (failure !== null) {
    const message: FromWorker = { type: 'failed', error: encodeError(failure) };
    control.postMessage(message);
    loop.stop();
    await running;
    loop.close();
    control.close();
    return;
  }
  const ready: FromWorker = {
    type: 'ready',
    heartbeat: thisHeartbeat(),
    exports: names.filter((name) => typeof namespace[name] === 'function'),
    others: names.filter((name) => typeof namespace[name] !== 'function'),
  };
  if (simulated !== null) simulated.joinSimulation(loop as SimulatedLoop, data.name);
  control.postMessage(ready);
  await running;
  _closeServedComlinkPorts();
  loop.close();
  control.close();
}

/** Cancel every other task of the thread's loop, wait until they are done, stop the loop. */
function* shutdown(loop: EventLoop): Coroutine<void> {
  const self = currentTask(loop);
  const others = [...allTasks(loop)].filter((task) => task !== self);
  for (const task of others) task.cancel();
  if (others.length > 0) yield* gather(others, { returnExceptions: true });
  loop.stop();
}
