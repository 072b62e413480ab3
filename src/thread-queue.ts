/**
 * A queue every thread can use (asyncio.Queue across threads): ThreadQueue.
 *
 * Its state lives in shared memory (internal/threads/queue-memory.ts), not in any thread: each
 * thread that holds the queue takes and adds items there itself, under one lock, so an item is
 * got exactly once however many threads get, and a thread that ends takes nothing with it but
 * the items it already got. Waiting goes through internal/threads/queue-waiters.ts.
 */
import { threadId } from 'node:worker_threads';
import type { Coroutine } from './coroutines.js';
import { QueueEmpty, QueueFull, QueueShutDown, RuntimeError, TimeoutError } from './exceptions.js';
import type { Future } from './futures.js';
import { INSPECT, repr } from './internal/format.js';
import { _getRunningLoop } from './internal/running.js';
import { decodeItem, detachMoved, encodeItem, encoded, readBuffer, remarkMoved } from './internal/threads/queue-items.js';
import {
  BROKEN_QUEUE,
  BUSY,
  DONES,
  EMPTY,
  FULL,
  GETS,
  NO_ROOM,
  OK,
  PUTS,
  QueueMemory,
  SHUT,
  STALE,
  TOO_BIG,
  TOO_MANY,
} from './internal/threads/queue-memory.js';
import { handleOfShared, sharedValue, type QueueHandle } from './internal/threads/queue-share.js';
import { PromiseWaiter, WordWatch, refuseInRunningLoop, sleepOn } from './internal/threads/queue-waiters.js';

/**
 * Options of `new ThreadQueue()`.
 *
 * @example
 * ```ts
 * const options: ThreadQueueOptions = { maxsize: 100, name: 'jobs' };
 * ```
 */
export interface ThreadQueueOptions {
  /** At most this many items wait in the queue (0 or left out: no bound). */
  maxsize?: number;
  /** A name for reprs and error messages (default `ThreadQueue-<thread>.<n>`). */
  name?: string;
}

/**
 * What `queue.share()` returns: a plain value (the queue's SharedArrayBuffers and its name) that
 * crosses to any thread through workerData or postMessage; only `ThreadQueue.attach()` makes a
 * queue of it again.
 *
 * @example
 * ```ts
 * const shared: SharedThreadQueue = jobs.share();
 * new Worker(new URL('./plain-worker.js', import.meta.url), { workerData: { jobs: shared } });
 * ```
 */
export interface SharedThreadQueue {
  readonly __sharedThreadQueue: true;
}

/** No item was there. */
const NONE = Symbol('none');

/** The ThreadQueue objects of this thread by queue: a queue that arrives again is the same object. */
const held = new Map<string, WeakRef<ThreadQueue<unknown>>>();
const forget = new FinalizationRegistry<string>((id) => {
  if (held.get(id)?.deref() === undefined) held.delete(id);
});

/** The handle the next construction attaches to (see `_fromWire`), instead of making a new queue. */
let arriving: QueueHandle | null = null;
/** Whether `arriving` was counted as on its way (a wire handle) rather than shared for good. */
let arrivingTravelled = false;

/** Wake one getter while items are left, every getter once shut down (or broken). */
function getterReadiness(memory: QueueMemory): number {
  if (memory.isShutdown() || memory.isBroken()) return 2;
  return memory.qsize() > 0 ? 1 : 0;
}

function putterReadiness(memory: QueueMemory): number {
  if (memory.isShutdown() || memory.isBroken()) return 2;
  return memory.full() ? 0 : 1;
}

function joinerReadiness(memory: QueueMemory): number {
  return memory.unfinished() === 0 || memory.isBroken() ? 2 : 0;
}

/** Milliseconds of a `timeout` in seconds (undefined or null: no limit). */
function timeoutMs(timeout: unknown): number {
  if (timeout === undefined || timeout === null) return Infinity;
  if (typeof timeout !== 'number') throw new TypeError(`timeout must be a number of seconds or null, got ${repr(timeout)}`);
  if (!(timeout >= 0)) throw new RangeError(`timeout must be a non-negative number of seconds, got ${repr(timeout)}`);
  return timeout * 1000;
}

function runningLoopFuture(): Future<void> {
  const loop = _getRunningLoop();
  if (loop === null) throw new RuntimeError('no running event loop (outside a loop, use getSync()/putSync()/joinSync() or for await)');
  return loop.createFuture<void>();
}

/**
 * Pass items between loops in any threads, first in first out (asyncio.Queue across threads).
 *
 * asyncio.Queue's API: `put()` waits (the task, never the thread) while the queue is full,
 * `get()` while it is empty; `putNowait()`/`getNowait()` throw QueueFull/QueueEmpty instead;
 * `taskDone()`/`join()` count items processed in any thread; `shutdown(immediate)` as in Python
 * 3.13. Code outside any loop blocks its thread with `putSync()`/`getSync()`/`joinSync()` (each
 * with a timeout; a RuntimeError where a loop is running in the thread, as they would block it),
 * and async code reads with `for await`. `using` shuts it down.
 *
 * A ThreadQueue passed to another thread (an argument or result of `lt.call`, a pool job's
 * argument) is the same queue there. A thread that multiloop did not start (a bare `new Worker()`)
 * gets it as `queue.share()` through workerData or postMessage, and makes it the same queue there
 * with `ThreadQueue.attach()` (the queue itself would arrive as `{}`). Every item put is got
 * exactly once, by one getter in one thread; one producer's items arrive in the order it put them.
 * Items cross as call arguments do (structured clone, registered classes, Buffers, `move()`d
 * buffers), copied through shared memory: an item that cannot cross fails its put with a TypeError
 * naming it, and the queue is unchanged. An item the getter's thread cannot rebuild (an instance of
 * a class not registered there, a deserializer that throws there, nesting deeper than its stack)
 * fails that get with a TypeError saying why: the item is taken from the queue and counted as done
 * (call no `taskDone()` for it; `join()` does not wait for it), and the next get takes the next
 * item. Items holding a SharedArrayBuffer, a MessagePort or another ThreadQueue cannot cross this
 * way (pass those as call arguments).
 *
 * The items waiting in a queue take at most 1 GiB of its shared memory, `maxsize` or not: each
 * takes its encoded bytes (a string's UTF-8, a number 8, an object its serialized form) rounded
 * up to 8, and 8 more. An item larger than that fails its put at once with a RangeError; an item
 * that does not fit in what the others leave makes `put()` and `putSync()` wait as on a full
 * queue, and `putNowait()` raise QueueFull naming the limit; `full()` is true once the items fill
 * it. The shared memory grows as items need it; once items that made it grow past 256 KiB have
 * left (the queue is empty, or holds 1 KiB of items or less), the queue moves to a new 4 KiB
 * buffer and the large one is freed once every thread holding the queue has moved too (a
 * SharedArrayBuffer cannot shrink): a thread moves at its next operation on the queue, or as its
 * loop turns. Not while the queue is on its way to another thread as an argument or result: a
 * handle that never arrives (its call was dropped) keeps the queue from moving again.
 *
 * The queue belongs to no thread: it lives while any thread holds it, and the thread that made it
 * may end while the others go on using it. A thread that ends while it waits in `get()` or
 * `put()` takes no item and no slot with it; items it had got are its own. `lt.terminate()` waits
 * for its thread to be out of any queue operation. A thread ended in the middle of one by other
 * means (a pool thread of `abortRunning`, a heap limit) can leave the queue's lock held: seconds
 * later the queue is broken, and every operation and waiter, in every thread, fails with a
 * RuntimeError that says so (never a hang).
 *
 * @example
 * ```ts
 * const jobs = new ThreadQueue<number>({ maxsize: 100, name: 'jobs' });
 * const worker = yield* LoopThread.start(new URL('./worker.js', import.meta.url));
 * const done = worker.call('consume', jobs); // worker.js: for (;;) { const n = yield* jobs.get(); ...; jobs.taskDone(); }
 * for (let n = 0; n < 1000; n++) yield* jobs.put(n);
 * yield* jobs.join();
 * jobs.shutdown();
 * yield* done;
 * ```
 */
export class ThreadQueue<T = unknown> {
  readonly #memory: QueueMemory;
  readonly #name: string;
  /** How errors name the queue: "ThreadQueue 'jobs'". */
  readonly #where: string;
  readonly #getters: WordWatch;
  readonly #putters: WordWatch;
  readonly #joiners: WordWatch;

  /** A new queue holding at most `options.maxsize` items (0 or left out: no bound). */
  constructor(options?: ThreadQueueOptions) {
    const handle = arriving;
    arriving = null;
    let memory: QueueMemory;
    let name: string;
    if (handle !== null) {
      memory = new QueueMemory(handle.buffers);
      if (arrivingTravelled) memory.arrived();
      name = handle.name;
    } else {
      const { maxsize, name: given } = checkOptions(options);
      memory = new QueueMemory(maxsize, threadId);
      name = given ?? `ThreadQueue-${memory.birth}`;
    }
    this.#memory = memory;
    this.#name = name;
    this.#where = `ThreadQueue ${repr(name)}`;
    this.#getters = new WordWatch(memory.ctl, PUTS, () => getterReadiness(memory));
    this.#putters = new WordWatch(memory.ctl, GETS, () => putterReadiness(memory));
    this.#joiners = new WordWatch(memory.ctl, DONES, () => joinerReadiness(memory));
    held.set(memory.id, new WeakRef(this as ThreadQueue<unknown>));
    forget.register(this, memory.id);
  }

  /** The bound given at construction (0: none). */
  get maxsize(): number {
    return this.#memory.maxsize;
  }

  /** The name given at construction, the same in every thread. */
  get name(): string {
    return this.#name;
  }

  /** The number of items in the queue now, in all threads (qsize). */
  qsize(): number {
    return this.#memory.qsize();
  }

  /** Whether the queue has no items now (empty). */
  empty(): boolean {
    return this.#memory.qsize() === 0;
  }

  /**
   * Whether the queue holds `maxsize` items now, or items that fill its 1 GiB byte limit (full).
   * A put may find no room for a large item while this says false: see the class's notes.
   */
  full(): boolean {
    return this.#memory.full();
  }

  /**
   * Put an item, waiting (the task, not the thread) while the queue is full or has no room for
   * its bytes; QueueShutDown once shut down; a TypeError naming what cannot cross in the item; a
   * RangeError, at once, for an item larger than the queue's byte limit (put).
   *
   * @example
   * ```ts
   * yield* jobs.put({ id: 7, payload: Buffer.from('...') });
   * ```
   */
  *put(item: T): Coroutine<void> {
    encodeItem(item, this.#where);
    const { kind, num, moved } = encoded;
    let payload = encoded.payload;
    let again = false;
    let seen: number | null = null;
    for (;;) {
      const status = this.#tryPut(kind, num, payload);
      if (status === OK) {
        this.#afterPut(moved);
        return;
      }
      this.#refuse(status, moved, true);
      // Full. The word is read before one more look (never on the way of a put that fits: it is
      // the consumers' cache line), so that a get in between wakes this put.
      if (seen === null) {
        seen = this.#putters.observe();
        continue;
      }
      // The encoded bytes must outlive the scratch buffer the next item is encoded in.
      if (!again && payload !== null) payload = payload.slice();
      const putter = runningLoopFuture();
      this.#putters.add(putter, seen, again);
      seen = null;
      try {
        yield* putter;
      } catch (error) {
        putter.cancel();
        this.#putters.remove(putter);
        // Woken for a free slot we will not fill: pass the wake-up on.
        if (!putter.cancelled() && !this.#memory.full()) this.#putters.wakeNext();
        if (moved !== null) remarkMoved(moved);
        throw error;
      }
      again = true;
    }
  }

  /** Put an item without waiting; QueueFull when full or without room for its bytes, QueueShutDown once shut down (put_nowait). */
  putNowait(item: T): void {
    encodeItem(item, this.#where);
    const { kind, num, payload, moved } = encoded;
    const status = this.#tryPut(kind, num, payload);
    if (status === OK) this.#afterPut(moved);
    else this.#refuse(status, moved, false);
  }

  /**
   * Put an item, blocking this thread while the queue is full, for code that runs outside any
   * loop (a plain worker); TimeoutError past `timeout` seconds (undefined or null: no limit). A
   * RuntimeError where a loop is running in this thread (it would block the loop): use `put()` or
   * `putNowait()` there.
   *
   * @example
   * ```ts
   * results.putSync(answer, 5);
   * ```
   */
  putSync(item: T, timeout?: number | null): void {
    refuseInRunningLoop('putSync', 'yield* queue.put(item) or queue.putNowait(item)');
    const ms = timeoutMs(timeout);
    encodeItem(item, this.#where);
    const { kind, num, payload, moved } = encoded;
    const deadline = performance.now() + ms;
    let seen: number | null = null;
    for (;;) {
      const status = this.#tryPut(kind, num, payload);
      if (status === OK) {
        this.#afterPut(moved);
        return;
      }
      this.#refuse(status, moved, true);
      // Full: read the word, then look once more (as put does).
      if (seen === null) {
        seen = this.#putters.observe();
        continue;
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        if (moved !== null) remarkMoved(moved);
        throw new TimeoutError(`no free slot in ${this.#where} within ${repr(timeout)} seconds`);
      }
      sleepOn(this.#memory.ctl, GETS, seen, remaining);
      seen = null;
    }
  }

  /**
   * Remove and return the first item, waiting (the task, not the thread) while the queue is
   * empty; QueueShutDown once shut down and empty; a TypeError when this thread cannot rebuild
   * the item (it is taken and counted as done: no `taskDone()` for it) (get).
   *
   * @example
   * ```ts
   * const job = yield* jobs.get();
   * ```
   */
  *get(): Coroutine<T> {
    let again = false;
    let seen: number | null = null;
    for (;;) {
      const item = this.#take();
      if (item !== NONE) return item;
      // Empty. The word is read before one more look (never on the way of a get that finds an
      // item: it is the producers' cache line), so that a put in between wakes this get.
      if (seen === null) {
        seen = this.#getters.observe();
        continue;
      }
      const getter = runningLoopFuture();
      this.#getters.add(getter, seen, again);
      seen = null;
      try {
        yield* getter;
      } catch (error) {
        getter.cancel();
        this.#getters.remove(getter);
        // Woken for an item we will not take: pass the wake-up on.
        if (!getter.cancelled() && this.#memory.qsize() > 0) this.#getters.wakeNext();
        throw error;
      }
      again = true;
    }
  }

  /** Remove and return the first item without waiting; QueueEmpty when empty, QueueShutDown once shut down and empty (get_nowait). */
  getNowait(): T {
    const item = this.#take();
    if (item === NONE) throw new QueueEmpty();
    return item;
  }

  /**
   * Remove and return the first item, blocking this thread while the queue is empty, for code
   * that runs outside any loop (a plain worker); TimeoutError past `timeout` seconds (undefined
   * or null: no limit), QueueShutDown once shut down and empty. A RuntimeError where a loop is
   * running in this thread (it would block the loop): use `get()` or `getNowait()` there.
   *
   * @example
   * ```ts
   * for (;;) {
   *   const job = jobs.getSync(); // QueueShutDown ends the loop
   *   results.putSync(work(job));
   *   jobs.taskDone();
   * }
   * ```
   */
  getSync(timeout?: number | null): T {
    refuseInRunningLoop('getSync', 'yield* queue.get() or queue.getNowait()');
    const ms = timeoutMs(timeout);
    const deadline = performance.now() + ms;
    let seen: number | null = null;
    for (;;) {
      const item = this.#take();
      if (item !== NONE) return item;
      // Empty: read the word, then look once more (as get does).
      if (seen === null) {
        seen = this.#getters.observe();
        continue;
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new TimeoutError(`no item in ${this.#where} within ${repr(timeout)} seconds`);
      sleepOn(this.#memory.ctl, PUTS, seen, remaining);
      seen = null;
    }
  }

  /**
   * Mark one item got earlier, in any thread, as processed; RangeError('task_done() called too
   * many times') when none is unfinished (task_done).
   *
   * @example
   * ```ts
   * const job = yield* jobs.get();
   * try { yield* handle(job); } finally { jobs.taskDone(); }
   * ```
   */
  taskDone(): void {
    const status = this.#memory.taskDone();
    if (status === TOO_MANY) throw new RangeError('task_done() called too many times');
    if (status === BROKEN_QUEUE) throw this.#broken();
    this.#joiners.changedHere();
  }

  /**
   * Wait until every item put, in any thread, has been marked done with `taskDone()` in any
   * thread (join).
   *
   * @example
   * ```ts
   * for (const job of batch) yield* jobs.put(job);
   * yield* jobs.join(); // all processed, wherever
   * ```
   */
  *join(): Coroutine<void> {
    let again = false;
    for (;;) {
      const seen = this.#joiners.observe();
      if (this.#memory.isBroken()) throw this.#broken();
      if (this.#memory.unfinished() === 0) return;
      const joiner = runningLoopFuture();
      this.#joiners.add(joiner, seen, again);
      try {
        yield* joiner;
      } catch (error) {
        joiner.cancel();
        this.#joiners.remove(joiner);
        throw error;
      }
      again = true;
    }
  }

  /**
   * Block this thread until every item put, in any thread, has been marked done with
   * `taskDone()` in any thread, for code that runs outside any loop (janus's `sync_q.join()`,
   * queue.Queue's `join()`). Past `timeout` seconds (undefined or null: no limit) a TimeoutError,
   * the queue unchanged: the items stay unfinished and a later join waits for them (Python's
   * joins take no timeout; this is what `asyncio.wait_for(q.join(), timeout)` does). A
   * RuntimeError where a loop is running in this thread (it would block the loop): use `join()`
   * there.
   *
   * @example
   * ```ts
   * for (const job of batch) jobs.putSync(job);
   * jobs.joinSync(60); // all processed, wherever, or TimeoutError
   * ```
   */
  joinSync(timeout?: number | null): void {
    refuseInRunningLoop('joinSync', 'yield* queue.join()');
    const ms = timeoutMs(timeout);
    const deadline = performance.now() + ms;
    for (;;) {
      // The word first: a taskDone after this read makes the sleep return at once.
      const seen = this.#joiners.observe();
      if (this.#memory.isBroken()) throw this.#broken();
      const unfinished = this.#memory.unfinished();
      if (unfinished === 0) return;
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new TimeoutError(`${unfinished} item(s) of ${this.#where} not done within ${repr(timeout)} seconds`);
      sleepOn(this.#memory.ctl, DONES, seen, remaining);
    }
  }

  /**
   * Return a plain value for a thread that multiloop did not start (a bare `new Worker()`), to
   * give it through workerData or postMessage: `ThreadQueue.attach(value)` there makes it this
   * queue.
   * (Between multiloop's threads, pass the queue itself.) A shared queue keeps the shared memory
   * its items are in for good: as any thread may attach it at any time, it no longer shrinks.
   *
   * @example
   * ```ts
   * const worker = new Worker(new URL('./plain-worker.js', import.meta.url), { workerData: { jobs: jobs.share() } });
   * // plain-worker.js: const jobs = ThreadQueue.attach(workerData.jobs); const job = jobs.getSync();
   * ```
   */
  share(): SharedThreadQueue {
    // Pinned: a thread may attach it at any time, or never, so no move may leave it behind.
    return sharedValue({ buffers: this.#memory.pinForSharing(), name: this.#name });
  }

  /**
   * Make the same queue, in this thread, of what `queue.share()` returned in another (this
   * thread's object for it when it holds the queue already); a TypeError naming what it got for
   * anything else. Nothing guards such a thread's queue operations as a LoopThread's are:
   * let it end on its own rather than `terminate()` it, as a thread terminated in the middle of
   * one can leave the queue broken (see the class's notes).
   *
   * @example
   * ```ts
   * import { workerData } from 'node:worker_threads';
   * const jobs = ThreadQueue.attach<Job>(workerData.jobs);
   * for (;;) { const job = jobs.getSync(); work(job); jobs.taskDone(); }
   * ```
   */
  static attach<T = unknown>(shared: SharedThreadQueue): ThreadQueue<T> {
    return ThreadQueue.#of(handleOfShared(shared), false) as ThreadQueue<T>;
  }

  /**
   * Shut the queue down in every thread (asyncio 3.13's shutdown): puts raise QueueShutDown from
   * now on, gets once the queue is empty; with `immediate` the items left are dropped (each
   * counting as done for `join()`) and gets raise at once. Every waiting `put()`, `get()`,
   * `putSync()` and `getSync()`, in every thread, wakes to look again.
   *
   * @example
   * ```ts
   * jobs.shutdown(); // consumers finish what is queued, then see QueueShutDown
   * ```
   */
  shutdown(immediate = false): void {
    let status: number;
    for (let waits = 0; (status = this.#memory.tryShutdown(immediate === true)) === BUSY; ) waits = this.#memory.waitForGetLock(waits);
    if (status === BROKEN_QUEUE) throw this.#broken();
    this.#getters.changedHere();
    this.#putters.changedHere();
    this.#joiners.changedHere();
  }

  /**
   * Read items with `for await` in async code, until the queue is shut down and empty.
   *
   * @example
   * ```ts
   * for await (const line of lines) console.log(line);
   * ```
   */
  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    const next = (): Promise<IteratorResult<T, undefined>> => this.#next();
    return {
      next,
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /**
   * `using queue = new ThreadQueue()` shuts it down at the end of the block.
   *
   * @example
   * ```ts
   * { using q = new ThreadQueue(); q.putNowait(1); } // q.shutdown()
   * ```
   */
  [Symbol.dispose](): void {
    this.shutdown();
  }

  /** Describe the queue: `<ThreadQueue 'jobs' maxsize=10 qsize=2 tasks=3 shutdown>`. */
  toString(): string {
    const memory = this.#memory;
    let text = `${repr(this.#name)} maxsize=${memory.maxsize} qsize=${memory.qsize()}`;
    if (this.#getters.length > 0) text += ` _getters[${this.#getters.length}]`;
    if (this.#putters.length > 0) text += ` _putters[${this.#putters.length}]`;
    const unfinished = memory.unfinished();
    if (unfinished > 0) text += ` tasks=${unfinished}`;
    if (memory.isShutdown()) text += ' shutdown';
    return `<ThreadQueue ${text}>`;
  }

  /** The repr, also in `util.inspect` and console.log. */
  [INSPECT](): string {
    return this.toString();
  }

  /**
   * @internal What crosses to another thread (wire.ts): the queue counts it as travelling, and
   * keeps its data buffer, until it arrives (see queue-memory.ts "Shrinking").
   */
  _toWire(): QueueHandle {
    return { buffers: this.#memory.travel(), name: this.#name };
  }

  /**
   * @internal Keep the queue's items in the shared buffer they are in for good: for its memory
   * handed out as a plain value that any number of threads may take up, at any time.
   */
  _pin(): void {
    this.#memory.pin();
  }

  /**
   * @internal Tests: the byte length of the shared data buffer that holds the queue's items now
   * (this thread moved to it first), and how many times the items moved to a new, small one.
   */
  _memoryStats(): { dataBytes: number; moves: number } {
    return this.#memory.dataStats();
  }

  /**
   * @internal The ThreadQueue of a handle that arrived: this thread's object for that queue, or
   * a new one. A TypeError when the handle is not a queue's.
   */
  static _fromWire(handle: unknown): ThreadQueue<unknown> {
    const { buffers, name } = (typeof handle === 'object' && handle !== null ? handle : {}) as Record<string, unknown>;
    if (!QueueMemory.isShaped(buffers) || typeof name !== 'string') throw new TypeError('a ThreadQueue arrived without the shared memory of one');
    return ThreadQueue.#of({ buffers, name }, true);
  }

  /**
   * This thread's object for the queue of `handle`, or a new one; `travelled`: the handle was
   * counted as on its way (`_toWire()`), and its arrival lets the ring move again.
   */
  static #of(handle: QueueHandle, travelled: boolean): ThreadQueue<unknown> {
    const known = held.get(QueueMemory.idOf(handle.buffers))?.deref();
    if (known !== undefined) {
      if (travelled) known.#memory.arrived();
      return known;
    }
    arriving = handle;
    arrivingTravelled = travelled;
    return new ThreadQueue();
  }

  /** The error of every operation on a queue whose memory moved without this thread (STALE). */
  #stale(): RuntimeError {
    return new RuntimeError(
      `${this.#where} moved its items to new shared memory while it was on its way to this thread, ` + 'so this thread cannot reach them (the handle arrived twice?)',
    );
  }

  /** The error of every operation on a broken queue. */
  #broken(): RuntimeError {
    return new RuntimeError(
      `${this.#where} is broken: a thread ended while it held the queue's lock (in the middle of a put or get), ` +
        'so its state cannot be trusted; make a new queue',
    );
  }

  /** Append the record: OK, SHUT, FULL, NO_ROOM or BROKEN_QUEUE (see QueueMemory.tryPut). */
  #tryPut(kind: number, num: number, payload: Uint8Array | null): number {
    const memory = this.#memory;
    let status: number;
    for (let waits = 0; (status = memory.tryPut(kind, num, payload)) === BUSY; ) waits = memory.waitForGetLock(waits);
    return status;
  }

  /** Take the first item, NONE when empty; QueueShutDown when shut down and empty. */
  #take(): T | typeof NONE {
    const memory = this.#memory;
    let into = readBuffer();
    for (;;) {
      const status = memory.tryGet(into);
      if (status === OK) break;
      if (status === EMPTY) return NONE;
      if (status === SHUT) throw new QueueShutDown();
      if (status === BROKEN_QUEUE) throw this.#broken();
      if (status === STALE) throw this.#stale();
      into = readBuffer(memory.needed);
    }
    // More items are left for this thread's other getters: wake the next one (one per item, as asyncio).
    if (this.#getters.length > 0 && memory.qsize() > 0) this.#getters.wakeNext();
    // A slot freed here: this thread's putters need not wait for the notification.
    if (this.#putters.length > 0) this.#putters.changedHere();
    try {
      return decodeItem(memory, into) as T;
    } catch (error) {
      throw this.#lost(error);
    }
  }

  /**
   * The item just taken cannot be rebuilt here: it counts as done (no taskDone() will come for
   * it, and join() must not wait for it), and the get fails saying why.
   */
  #lost(error: unknown): TypeError {
    if (this.#memory.taskDone() === OK) this.#joiners.changedHere();
    return new TypeError(`cannot get from ${this.#where}: the item could not be rebuilt in this thread (${whyUnbuildable(error)}); it was taken from the queue and counted as done`, {
      cause: error,
    });
  }

  /** The item is in: the buffers it moved are gone from here; this thread's getters need not wait for the notification. */
  #afterPut(moved: ArrayBuffer[] | null): void {
    if (moved !== null) detachMoved(moved);
    if (this.#getters.length > 0) this.#getters.changedHere();
    if (this.#putters.length > 0 && !this.#memory.full()) this.#putters.wakeNext();
  }

  /**
   * A put that did not go in: QueueShutDown, the grow error of a data buffer that could not grow,
   * a RangeError for an item larger than the byte limit (it never fits: no wait); or, full,
   * QueueFull when it was not to wait (naming the byte limit when that is what it meets). The
   * moved buffers stay, marked, when it throws.
   */
  #refuse(status: number, moved: ArrayBuffer[] | null, wait: boolean): void {
    const memory = this.#memory;
    let error: Error | null = null;
    if (status === SHUT) error = new QueueShutDown();
    else if (status === BROKEN_QUEUE) error = this.#broken();
    else if (status === STALE) error = this.#stale();
    else if (status === TOO_BIG) {
      error = new RangeError(`cannot put into ${this.#where}: the item takes ${memory.needed} bytes there, more than the ${memory.byteLimit} bytes its items may take`);
    } else if (status === NO_ROOM && memory.failure !== null) {
      error = new RuntimeError(`${this.#where} could not grow its shared memory for the item`, { cause: memory.failure });
    } else if (!wait && status === NO_ROOM) {
      error = new QueueFull(`no room in ${this.#where} for the item: it takes ${memory.needed} bytes, and the items there take ${memory.used} of the ${memory.byteLimit} bytes they may take`);
    } else if (!wait && status === FULL) error = new QueueFull();
    if (error === null) return;
    if (moved !== null) remarkMoved(moved);
    throw error;
  }

  async #next(): Promise<IteratorResult<T, undefined>> {
    let again = false;
    let seen: number | null = null;
    for (;;) {
      let item: T | typeof NONE;
      try {
        item = this.#take();
      } catch (error) {
        if (error instanceof QueueShutDown) return { done: true, value: undefined };
        throw error;
      }
      if (item !== NONE) return { done: false, value: item };
      // Empty: read the word, then look once more (as get does).
      if (seen === null) {
        seen = this.#getters.observe();
        continue;
      }
      const word = seen;
      await new Promise<void>((resolve) => this.#getters.add(new PromiseWaiter(resolve), word, again));
      seen = null;
      again = true;
    }
  }
}

/** Why an item taken could not be rebuilt, for the get's error. */
function whyUnbuildable(error: unknown): string {
  if (error instanceof RangeError && /call stack/i.test(error.message)) return `it is nested deeper than this thread's stack allows: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

function checkOptions(options: unknown): { maxsize: number; name: string | undefined } {
  if (options === undefined) return { maxsize: 0, name: undefined };
  if (typeof options !== 'object' || options === null) throw new TypeError(`ThreadQueue() options must be an object, got ${repr(options)}`);
  const { maxsize = 0, name } = options as Record<string, unknown>;
  if (typeof maxsize !== 'number') throw new TypeError(`options.maxsize must be a number, got ${repr(maxsize)}`);
  if (!Number.isInteger(maxsize) || maxsize < 0 || maxsize > 0x7fffffff) {
    throw new RangeError(`options.maxsize must be a non-negative integer (0: no bound), got ${repr(maxsize)}`);
  }
  if (name !== undefined && (typeof name !== 'string' || name === '')) throw new TypeError(`options.name must be a non-empty string, got ${repr(name)}`);
  return { maxsize, name };
}
