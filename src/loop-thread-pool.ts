/**
 * A pool of LoopThreads hosting one module, that heals: each call goes to the thread with the
 * fewest calls in flight among those whose loops take in messages; a thread that dies fails only
 * the calls it had started (the others go to another thread) and is replaced, within a restart
 * budget, each new thread set up by the pool's initializer before it takes calls. Built on
 * LoopThread's public face: every thread is a LoopThread named `<pool>-<i>`, so ps() and pstree()
 * list the pool's threads by their names.
 */
import { availableParallelism } from 'node:os';
import type { ResourceLimits } from 'node:worker_threads';
import type { ConcurrentFuture } from './concurrent.js';
import type { YieldablePromise } from './coroutines.js';
import { getEventLoop } from './events.js';
import { RuntimeError } from './exceptions.js';
import type { Future } from './futures.js';
import { repr } from './internal/format.js';
import { _getRunningLoop } from './internal/running.js';
import type { EventLoop } from './base-events.js';
import { yieldable } from './internal/yieldable.js';
import { CROSSES, WIRE } from './internal/wire.js';
import { checkMaxCallsInFlight, notStarted, onCallEnded } from './internal/link.js';
import { BUSY_SINCE, monotonicNow } from './internal/introspect.js';
import { checkInitializer, checkResourceLimits } from './internal/threads/pool-options.js';
import { holdsMoved } from './transfer.js';
import { LoopThread, type LoopRef, type RemoteProxy } from './loop-thread.js';
import { gather } from './tasks.js';
import { simulation } from './internal/testing/active.js';

/** Options of `LoopThreadPool.start`. */
export interface LoopThreadPoolOptions {
  /** How many LoopThreads (default: the machine's available parallelism). */
  size?: number;
  /** A name: threads are named `${name}-0`, `${name}-1`... (default `LoopThreadPool-<n>`). */
  name?: string;
  /**
   * Replace a thread that dies: at most `max` replacements within `within` seconds (defaults 5
   * within 60); past that the pool is broken and every call fails at once with a RuntimeError
   * naming the last cause. `false`: never replace (the pool shrinks).
   */
  restart?: { max?: number; within?: number } | false;
  /** What the threads may call back in the starting loop (as LoopThread's `expose`). */
  expose?: Record<string, (...args: never[]) => unknown>;
  /** Each thread's back-pressure bound (as LoopThread's `maxCallsInFlight`). */
  maxCallsInFlight?: number;
  /**
   * `[exportName, ...args]`: every thread calls this export of the module with these arguments
   * (a coroutine function runs as a Task; a Promise is awaited) before it takes calls,
   * replacements too (concurrent.futures' `initializer` and `initargs`). One that fails is a failed
   * start: `start` rejects, a replacement counts against the restart budget. The arguments go to
   * every thread, so none may be moved.
   */
  initializer?: readonly [exportName: string, ...args: unknown[]];
  /** Resource limits of every thread of the pool, replacements too (as LoopThread's `resourceLimits`). */
  resourceLimits?: ResourceLimits;
}

/** The figures of `pool.statistics()`. */
export interface LoopThreadPoolStatistics {
  /** Threads alive now. */
  size: number;
  /**
   * Calls sent whose task in the thread has not ended, per thread slot, in slot order: a call
   * cancelled here counts until the thread says its task ended.
   */
  inFlight: number[];
  /** Calls settled with a result. */
  completed: number;
  /** Calls settled with an error, or cancelled. */
  failed: number;
  /** Threads started to replace dead ones (those that failed to start included). */
  restarts: number;
}

let poolCounter = 0;

/**
 * A thread whose loop has not taken in messages for this long (ms) gets no new calls while
 * another can take them: a loop takes them in at least every time slice (2 ms) unless one of its
 * callbacks blocks it.
 */
const BLOCKED_MS = 100;

/** One place of the pool: its thread (null while it is replaced, or for good), and its calls in flight. */
class Slot {
  thread: LoopThread | null = null;
  /** The thread's heartbeat: slot BUSY_SINCE says since when its loop has not taken in messages (0: it waits for them). */
  beat: Float64Array | null = null;
  /** Calls sent to the thread whose task there has not ended. */
  inFlight = 0;
  /** Counts one call of this slot out once it ended in the thread; one function per slot, not one per call. */
  readonly released: () => void;

  constructor(readonly index: number) {
    this.released = () => {
      this.inFlight--;
    };
  }
}

/**
 * N LoopThreads hosting the same module. `call`, `callSoonThreadsafe`, `submit` and `proxy` go to
 * the thread with the fewest calls in flight (a call counts until its task there has ended,
 * cancelled or not), skipping a thread whose loop has not taken in messages for 100 ms (a
 * callback blocks it) while another can take the call; `broadcast` calls every thread. A thread
 * that dies fails only the calls it had started (with its death error, as a LoopThread's); the
 * `call`s it had not started go to another thread, once. It is replaced under the restart
 * policy, the replacement running the `initializer` before it takes calls; while no thread is
 * alive, calls wait for a replacement. Past the restart budget (a replacement that fails to
 * start, or whose initializer fails, counts too) the pool is broken: every call fails at once
 * with a RuntimeError whose cause is the last death.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   await using pool = yield* LoopThreadPool.start(new URL('./resize.js', import.meta.url), {
 *     size: 4,
 *     name: 'resize',
 *     initializer: ['openCache', '/var/cache/resize'], // in every thread, before its first call
 *     resourceLimits: { maxOldGenerationSizeMb: 256 },
 *   });
 *   const sizes = yield* gather(...files.map((file) => pool.call<number>('resize', file)));
 * }
 * ```
 */
export class LoopThreadPool implements LoopRef {
  /** The name the threads are named after. */
  readonly name: string;
  readonly #url: string | URL;
  readonly #slots: Slot[];
  readonly #restart: { max: number; within: number } | null;
  readonly #expose: Record<string, (...args: never[]) => unknown> | undefined;
  readonly #maxCallsInFlight: number;
  readonly #initializer: readonly [string, ...unknown[]] | null;
  readonly #resourceLimits: ResourceLimits | undefined;
  /** The loop that started the pool: exposed functions run in it, so replacements start from it. */
  readonly #loop: EventLoop | null = _getRunningLoop();
  /** When each replacement started (ms, monotonic), for the restart budget. */
  readonly #restarts: number[] = [];
  #restartCount = 0;
  #completed = 0;
  #failed = 0;
  /**
   * Where the next call's search starts: the slot chosen last, so that among threads equally
   * idle the one just used (its loop still awake, polling) takes the call.
   */
  #next = 0;
  /** Calls that wait for a thread (none alive, some being replaced). */
  #waiting: Array<() => void> = [];
  #broken: Error | null = null;
  #closing: YieldablePromise<void> | null = null;
  readonly #tally = (failed: boolean): void => {
    if (failed) this.#failed++;
    else this.#completed++;
  };
  readonly #tallyCall = (future: Future<unknown>): void => this.#tally(future.cancelled() || future.exception() !== null);
  readonly #tallySubmit = (future: ConcurrentFuture<unknown>): void => this.#tally(future.cancelled() || future.exception() !== null);

  private constructor(
    url: string | URL,
    name: string,
    size: number,
    restart: { max: number; within: number } | null,
    expose: LoopThreadPoolOptions['expose'],
    maxCallsInFlight: number,
    initializer: readonly [string, ...unknown[]] | null,
    resourceLimits: ResourceLimits | undefined,
  ) {
    this.#url = url;
    this.#maxCallsInFlight = maxCallsInFlight;
    this.#initializer = initializer;
    this.#resourceLimits = resourceLimits;
    this.name = name;
    this.#restart = restart;
    this.#expose = expose;
    this.#slots = Array.from({ length: size }, (_, i) => new Slot(i));
  }

  /**
   * Start `size` LoopThreads hosting the module at `moduleUrl`; resolves once every one runs
   * (and ran the initializer), rejects with the first one's error when one cannot start (the
   * others are closed again): the module's error, or the initializer's, naming the export.
   */
  static start(moduleUrl: string | URL, options: LoopThreadPoolOptions = {}): YieldablePromise<LoopThreadPool> {
    return yieldable(LoopThreadPool.#start(moduleUrl, options));
  }

  static async #start(moduleUrl: string | URL, options: LoopThreadPoolOptions): Promise<LoopThreadPool> {
    if (options === null || typeof options !== 'object') throw new TypeError(`LoopThreadPool.start() options must be an object, got ${repr(options)}`);
    const size = options.size ?? availableParallelism();
    if (!Number.isSafeInteger(size) || size < 1) throw new RangeError(`LoopThreadPool.start() options.size must be a positive integer, got ${repr(options.size)}`);
    const name = options.name ?? simulation?.defaultName('LoopThreadPool') ?? `LoopThreadPool-${++poolCounter}`;
    if (typeof name !== 'string' || name === '') throw new TypeError(`LoopThreadPool.start() options.name must be a non-empty string, got ${repr(options.name)}`);
    const maxCallsInFlight = checkMaxCallsInFlight(options.maxCallsInFlight, 'LoopThreadPool.start() options');
    const initializer = checkInitializer(options.initializer, 'LoopThreadPool.start() options');
    const resourceLimits = checkResourceLimits(options.resourceLimits, 'LoopThreadPool.start() options');
    const pool = new LoopThreadPool(moduleUrl, name, size, restartPolicy(options.restart), options.expose, maxCallsInFlight, initializer, resourceLimits);
    const started = await Promise.allSettled(pool.#slots.map((slot) => pool.#startThread(slot)));
    const failure = started.find((outcome) => outcome.status === 'rejected');
    if (failure !== undefined) {
      await pool.close();
      throw (failure as PromiseRejectedResult).reason;
    }
    return pool;
  }

  /** The number of thread slots (threads alive: `statistics().size`). */
  get size(): number {
    return this.#slots.length;
  }

  /**
   * Run export `name` in the thread with the fewest calls in flight (among those whose loops take
   * in messages); a Future of the caller's loop. Should that thread die before it started the
   * call, the call goes to another thread (once). Cancelling the Future cancels the task there,
   * which counts in `statistics().inFlight` until it has ended.
   */
  call<T = unknown>(name: string, ...args: unknown[]): Future<T> {
    const future = getEventLoop().createFuture<T>();
    future.addDoneCallback(this.#tallyCall);
    // A call that moves buffers or ports cannot go twice: they went with it.
    this.#send(future, name, args, holdsMoved(args) ? 0 : 1, true);
    return future;
  }

  /**
   * Schedule a call of export `name` in the thread with the fewest calls in flight; returns at
   * once. Nothing to wait on: while no thread is alive it throws, as `submit` does.
   */
  callSoonThreadsafe(name: string, ...args: unknown[]): void {
    const slot = this.#pick() ?? this.#failNow();
    (slot.thread as LoopThread).callSoonThreadsafe(name, ...args);
  }

  /** Call export `name` in the thread with the fewest calls in flight; `result(timeout)` may block until it is done. */
  submit<T = unknown>(name: string, ...args: unknown[]): ConcurrentFuture<T> {
    const slot = this.#pick() ?? this.#failNow();
    const future = (slot.thread as LoopThread).submit<T>(name, ...args);
    slot.inFlight++;
    onCallEnded(future as ConcurrentFuture<unknown>, slot.released);
    (future as ConcurrentFuture<unknown>).addDoneCallback(this.#tallySubmit);
    return future;
  }

  /** Call export `name` in every live thread; a Future of their results in slot order (gather's rules). */
  broadcast<T = unknown>(name: string, ...args: unknown[]): Future<T[]> {
    this.#check();
    const calls: Array<Future<T>> = [];
    for (const slot of this.#slots) {
      if (slot.thread === null || slot.thread.isDead()) continue;
      const future = slot.thread.call<T>(name, ...args);
      slot.inFlight++;
      onCallEnded(future as Future<unknown>, slot.released);
      future.addDoneCallback(this.#tallyCall);
      calls.push(future);
    }
    return gather(calls) as unknown as Future<T[]>;
  }

  /** A typed view: `pool.proxy<typeof import('./svc.js')>().add(1, 2)` is a `Future<number>`. */
  proxy<M>(): RemoteProxy<M> {
    return new Proxy(Object.create(null) as object, {
      get: (_target, property) => {
        // Not a thenable: `await proxy` must not look for `then`.
        if (typeof property !== 'string' || property === 'then') return undefined;
        return (...args: unknown[]) => this.call(property, ...args);
      },
    }) as RemoteProxy<M>;
  }

  /** The pool's live threads, in slot order. */
  threads(): readonly LoopThread[] {
    return this.#slots.flatMap((slot) => (slot.thread === null || slot.thread.isDead() ? [] : [slot.thread]));
  }

  /** Threads alive, calls in flight per slot (until their tasks there ended), calls settled, replacements started. */
  statistics(): LoopThreadPoolStatistics {
    return {
      size: this.threads().length,
      inFlight: this.#slots.map((slot) => slot.inFlight),
      completed: this.#completed,
      failed: this.#failed,
      restarts: this.#restartCount,
    };
  }

  /** Stop every thread as LoopThread.close does; calls waiting for a thread fail. Idempotent. */
  close(): YieldablePromise<void> {
    if (this.#closing !== null) return this.#closing;
    this.#broken ??= new RuntimeError(`LoopThreadPool '${this.name}' is closed`);
    this.#flushWaiting();
    this.#closing = yieldable(Promise.all(this.#slots.map((slot) => slot.thread?.close())).then(() => undefined));
    return this.#closing;
  }

  /**
   * @internal Cross to another thread as a LoopRef that spreads calls over the threads alive now,
   * each over a link of its own (replacements made later are not reached through it).
   */
  [CROSSES](what: string): Record<string, unknown> {
    if (this.#broken !== null) throw new TypeError(`${what} holds ${this}: ${this.#broken.message}`);
    const loops = this.threads().map((thread) => thread[CROSSES](what));
    if (loops.length === 0) throw new TypeError(`${what} holds ${this}, which has no thread alive now`);
    return { [WIRE]: 'pool', name: this.name, loops };
  }

  /** `await using pool = await LoopThreadPool.start(...)`: `close()` when the scope ends. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The repr. */
  toString(): string {
    return `<LoopThreadPool '${this.name}' ${this.threads().length}/${this.#slots.length} threads${this.#broken === null ? '' : this.#closing !== null ? ' closed' : ' broken'}>`;
  }

  /**
   * The live slot with the fewest calls in flight (ties: the one used last, then the next ones),
   * a thread whose loop has not taken in messages for BLOCKED_MS coming after every other; null
   * when none is alive. Throws when broken.
   */
  #pick(): Slot | null {
    this.#check();
    const slots = this.#slots;
    const n = slots.length;
    let best: Slot | null = null;
    let bestBlocked = false;
    // Read once, and only when a thread is busy: an idle thread's heartbeat says 0.
    let now = 0;
    for (let k = 0, i = this.#next; k < n; k++, i = i + 1 === n ? 0 : i + 1) {
      const slot = slots[i] as Slot;
      if (slot.thread === null || slot.thread.isDead()) continue;
      const since = slot.beat === null ? 0 : (slot.beat[BUSY_SINCE] as number);
      let blocked = false;
      if (since !== 0) {
        if (now === 0) now = monotonicNow();
        blocked = now - since >= BLOCKED_MS;
      }
      if (best === null || (blocked === bestBlocked ? slot.inFlight < best.inFlight : bestBlocked)) {
        best = slot;
        bestBlocked = blocked;
        if (!blocked && slot.inFlight === 0) break;
      }
    }
    if (best !== null) this.#next = best.index;
    return best;
  }

  #check(): void {
    if (this.#broken !== null) throw this.#broken;
  }

  /**
   * Send call `name(...args)` for `future` to the thread with the fewest calls in flight (or once one
   * is alive), settling `future` as that call; one the thread never started, because it died,
   * is sent again while `resends` allow. `first`: the caller's own call, whose errors (a broken
   * pool, a name that is not exported) are thrown to it.
   */
  #send<T>(future: Future<T>, name: string, args: unknown[], resends: number, first: boolean): void {
    let slot: Slot | null;
    let call: Future<T>;
    try {
      slot = this.#pick();
      if (slot === null) {
        this.#whenAlive(future, () => this.#send(future, name, args, resends, false));
        return;
      }
      call = (slot.thread as LoopThread).call<T>(name, ...args);
    } catch (error) {
      if (first) throw error;
      future.setException(error as Error);
      return;
    }
    slot.inFlight++;
    onCallEnded(call as Future<unknown>, slot.released);
    call.addDoneCallback((done) => {
      if (future.done()) return;
      if (done.cancelled()) future.cancel();
      else if (done.exception() === null) future.setResult(done.result());
      else if (resends > 0 && notStarted(done) && this.#closing === null) this.#send(future, name, args, resends - 1, false);
      else future.setException(done.exception() as Error);
    });
    future.addDoneCallback(() => {
      if (future.cancelled()) call.cancel();
    });
  }

  /** Run `send` from `future`'s loop once a thread is alive (or the pool is broken); nothing when `future` is done by then. */
  #whenAlive(future: Future<unknown>, send: () => void): void {
    const loop = future.getLoop();
    this.#waiting.push(() => {
      if (!loop.isClosed()) loop.callSoonThreadsafe(() => {
        if (!future.done()) send();
      });
    });
  }

  /** For submit(), which cannot wait: no thread is alive now. */
  #failNow(): never {
    throw new RuntimeError(`LoopThreadPool '${this.name}' has no thread alive now (its threads are being replaced)`);
  }

  /** Run the calls that waited for a thread (or fail them, when the pool is broken or closed). */
  #flushWaiting(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const dispatch of waiting) dispatch();
  }

  /**
   * Start a thread in `slot` (it runs the initializer before it is ready); once it runs, calls
   * that waited go; when it dies, it is replaced.
   */
  async #startThread(slot: Slot): Promise<void> {
    const options = {
      name: `${this.name}-${slot.index}`,
      maxCallsInFlight: this.#maxCallsInFlight,
      ...(this.#expose === undefined ? {} : { expose: this.#expose }),
      ...(this.#resourceLimits === undefined ? {} : { resourceLimits: this.#resourceLimits }),
    };
    const initializer = this.#initializer;
    const thread = await (initializer === null ? LoopThread.start(this.#url, options) : LoopThread._startInitialized(this.#url, options, initializer));
    if (this.#closing !== null) {
      await thread.close();
      return;
    }
    slot.beat = thread._heartbeat();
    slot.thread = thread;
    thread._onDeath((error) => this.#died(slot, thread, error));
    this.#flushWaiting();
  }

  /** A replacement for `slot`: started from the pool's loop when the threads may call back into it (expose). */
  #spawn(slot: Slot): Promise<void> {
    const loop = this.#loop;
    if (this.#expose === undefined || loop === null) return this.#startThread(slot);
    return new Promise<void>((resolve, reject) => {
      if (loop.isClosed()) reject(new RuntimeError(`the loop that started LoopThreadPool '${this.name}' is closed: its exposed functions cannot run`));
      else loop.callSoonThreadsafe(() => this.#startThread(slot).then(resolve, reject));
    });
  }

  /** `thread` of `slot` died of `error`: replace it while the budget allows, else the pool is broken. */
  #died(slot: Slot, thread: LoopThread, error: Error): void {
    if (slot.thread !== thread || this.#closing !== null) return;
    slot.thread = null;
    this.#replace(slot, error);
  }

  #replace(slot: Slot, cause: Error): void {
    const policy = this.#restart;
    if (policy === null) {
      if (this.threads().length === 0) this.#breakDown(`all its threads died (restart: false)`, cause);
      return;
    }
    const now = performance.now();
    const restarts = this.#restarts;
    while (restarts.length > 0 && (restarts[0] as number) <= now - policy.within * 1000) restarts.shift();
    if (restarts.length >= policy.max) {
      this.#breakDown(`${policy.max} threads replaced within ${policy.within} s, and another died`, cause);
      return;
    }
    restarts.push(now);
    this.#restartCount++;
    const replacing = this.#spawn(slot);
    replacing.catch((failure: unknown) => {
      if (this.#closing !== null || this.#broken !== null) return;
      this.#replace(slot, failure instanceof Error ? failure : new RuntimeError(String(failure)));
    });
  }

  /** No more replacements: every call now fails at once, naming the last cause; the threads still alive are closed. */
  #breakDown(why: string, cause: Error): void {
    if (this.#broken !== null) return;
    this.#broken = new RuntimeError(`LoopThreadPool '${this.name}' is broken: ${why}; the last cause: ${cause.message}`, { cause });
    this.#flushWaiting();
    for (const slot of this.#slots) void slot.thread?.close();
  }
}

/** The restart option checked: the budget, or null for `false`. */
function restartPolicy(restart: LoopThreadPoolOptions['restart']): { max: number; within: number } | null {
  if (restart === false) return null;
  if (restart === undefined) return { max: 5, within: 60 };
  if (restart === null || typeof restart !== 'object') throw new TypeError(`LoopThreadPool.start() options.restart must be false or { max?, within? }, got ${repr(restart)}`);
  const { max = 5, within = 60 } = restart;
  if (!Number.isSafeInteger(max) || max < 0) throw new RangeError(`LoopThreadPool.start() options.restart.max must be a non-negative integer, got ${repr(max)}`);
  if (typeof within !== 'number' || !(within > 0) || !Number.isFinite(within)) {
    throw new RangeError(`LoopThreadPool.start() options.restart.within must be a positive number of seconds, got ${repr(within)}`);
  }
  return { max, within };
}

