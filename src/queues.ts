/**
 * Queues for tasks of one loop (asyncio.queues): Queue (FIFO), PriorityQueue (smallest
 * first) and LifoQueue (last in, first out), with Python 3.13's shutdown().
 *
 * Not thread-safe. A queue binds to the running loop the first time a put or get has to
 * wait. A blocked getter or putter is woken by completing its future and takes its item when
 * it runs; if it is cancelled first, it wakes the next one in its place, so an item is never
 * lost or delivered twice.
 */
import type { Coroutine } from './coroutines.js';
import { QueueEmpty, QueueFull, QueueShutDown } from './exceptions.js';
import type { Future } from './futures.js';
import { Deque } from './internal/deque.js';
import { repr, typeName } from './internal/format.js';
import { LoopBound } from './internal/loop-bound.js';
import { FifoStore, HeapStore, LifoStore, Store } from './internal/queue-stores.js';
import { removeWaiter } from './internal/waiters.js';
import { Event } from './locks.js';

/** Wake the first waiter not woken yet, dropping the ones skipped (asyncio's `_wakeup_next`). */
function wakeupNext(waiters: Deque<Future<void>>): void {
  while (waiters.length > 0) {
    const waiter = waiters.shift() as Future<void>;
    if (!waiter.done()) {
      waiter.setResult(undefined);
      return;
    }
  }
}

/**
 * Pass items from producer to consumer tasks of one loop, first in first out (asyncio.Queue).
 *
 * `put()` waits while the queue is full, `get()` while it is empty; `putNowait()` and
 * `getNowait()` throw QueueFull and QueueEmpty instead. Every item put counts as unfinished
 * until a `taskDone()`; `join()` waits until none is left. `shutdown()` ends the queue.
 *
 * @example
 * ```ts
 * const queue = new Queue<number>(10);
 * function* producer(): Coroutine<void> {
 *   for (let i = 0; i < 3; i++) yield* queue.put(i);
 *   queue.shutdown();
 * }
 * function* consumer(): Coroutine<number[]> {
 *   const seen: number[] = [];
 *   try {
 *     for (;;) { seen.push(yield* queue.get()); queue.taskDone(); }
 *   } catch (e) {
 *     if (!(e instanceof QueueShutDown)) throw e;
 *   }
 *   return seen; // [0, 1, 2]
 * }
 * ```
 */
export class Queue<T = unknown> extends LoopBound {
  #maxsize: number;
  #store: Store<T>;
  #getters = new Deque<Future<void>>(4);
  #putters = new Deque<Future<void>>(4);
  #unfinishedTasks = 0;
  #finished = new Event();
  #isShutdown = false;

  /** A queue holding at most `maxsize` items; 0 or less (the default) means unbounded. */
  constructor(maxsize?: number);
  /** @internal Subclasses pass the store that decides the order. */
  constructor(maxsize: number | undefined, store: Store<T>);
  constructor(maxsize = 0, store?: Store<T>) {
    super();
    if (typeof maxsize !== 'number') throw new TypeError(`maxsize must be a number, got ${repr(maxsize)}`);
    this.#maxsize = maxsize;
    this.#store = store instanceof Store ? store : new FifoStore<T>();
    this.#finished.set();
  }

  /** The capacity given at construction (maxsize). */
  get maxsize(): number {
    return this.#maxsize;
  }

  /** The number of items in the queue (qsize). */
  qsize(): number {
    return this.#store.length;
  }

  /** Whether the queue has no items (empty). */
  empty(): boolean {
    return this.#store.length === 0;
  }

  /** Whether the queue holds `maxsize` items; never when unbounded (full). */
  full(): boolean {
    return this.#maxsize > 0 && this.#store.length >= this.#maxsize;
  }

  /**
   * Put an item, waiting while the queue is full; QueueShutDown once shut down (put).
   *
   * @example
   * ```ts
   * yield* queue.put(job);
   * ```
   */
  *put(item: T): Coroutine<void> {
    while (this.full()) {
      if (this.#isShutdown) throw new QueueShutDown();
      const putters = this.#putters;
      const putter = this._getLoop().createFuture<void>();
      putters.push(putter);
      try {
        yield* putter;
      } catch (error) {
        putter.cancel();
        // A getNowait() or shutdown() may have taken the putter off the queue already.
        removeWaiter(putters, putter);
        // Woken for a free slot we will not fill: pass the wake-up on.
        if (!this.full() && !putter.cancelled()) wakeupNext(putters);
        throw error;
      }
    }
    this.putNowait(item);
  }

  /** Put an item without waiting; QueueFull when full, QueueShutDown once shut down (put_nowait). */
  putNowait(item: T): void {
    if (this.#isShutdown) throw new QueueShutDown();
    if (this.full()) throw new QueueFull();
    this.#store.add(item);
    this.#unfinishedTasks++;
    this.#finished.clear();
    wakeupNext(this.#getters);
  }

  /**
   * Remove and return an item, waiting while the queue is empty; QueueShutDown once shut down
   * and empty (get).
   *
   * @example
   * ```ts
   * const job = yield* queue.get();
   * ```
   */
  *get(): Coroutine<T> {
    while (this.empty()) {
      if (this.#isShutdown) throw new QueueShutDown();
      const getters = this.#getters;
      const getter = this._getLoop().createFuture<void>();
      getters.push(getter);
      try {
        yield* getter;
      } catch (error) {
        getter.cancel();
        // A putNowait() or shutdown() may have taken the getter off the queue already.
        removeWaiter(getters, getter);
        // Woken for an item we will not take: pass the wake-up on.
        if (!this.empty() && !getter.cancelled()) wakeupNext(getters);
        throw error;
      }
    }
    return this.getNowait();
  }

  /** Remove and return an item without waiting; QueueEmpty when empty, QueueShutDown once shut down and empty (get_nowait). */
  getNowait(): T {
    if (this.empty()) {
      if (this.#isShutdown) throw new QueueShutDown();
      throw new QueueEmpty();
    }
    const item = this.#store.take();
    wakeupNext(this.#putters);
    return item;
  }

  /** Mark one item got earlier as processed; RangeError('task_done() called too many times') when none is unfinished (task_done). */
  taskDone(): void {
    if (this.#unfinishedTasks <= 0) throw new RangeError('task_done() called too many times');
    this.#unfinishedTasks--;
    if (this.#unfinishedTasks === 0) this.#finished.set();
  }

  /**
   * Wait until every item put has been marked done with `taskDone()` (join).
   *
   * @example
   * ```ts
   * for (const job of jobs) queue.putNowait(job);
   * yield* queue.join(); // all processed
   * ```
   */
  *join(): Coroutine<void> {
    if (this.#unfinishedTasks > 0) yield* this.#finished.wait();
  }

  /**
   * Shut the queue down (shutdown): puts raise QueueShutDown from now on, gets once the queue
   * is empty; with `immediate` the items left are dropped (each counting as done for `join()`)
   * and gets raise at once. Every blocked `put()` and `get()` is woken to re-check.
   *
   * @example
   * ```ts
   * queue.shutdown(true); // stop now, drop what is left
   * ```
   */
  shutdown(immediate = false): void {
    this.#isShutdown = true;
    if (immediate) {
      const store = this.#store;
      while (store.length > 0) {
        store.take();
        if (this.#unfinishedTasks > 0) this.#unfinishedTasks--;
      }
      if (this.#unfinishedTasks === 0) this.#finished.set();
    }
    for (const waiters of [this.#getters, this.#putters]) {
      while (waiters.length > 0) {
        const waiter = waiters.shift() as Future<void>;
        if (!waiter.done()) waiter.setResult(undefined);
      }
    }
  }

  /** Describe the queue as asyncio's `str()` does: `<Queue maxsize=0 _queue=[1, 2] tasks=2>`. */
  override toString(): string {
    let text = `maxsize=${repr(this.#maxsize)}`;
    if (this.#store.length > 0) text += ` _queue=[${this.#store.snapshot().map(repr).join(', ')}]`;
    if (this.#getters.length > 0) text += ` _getters[${this.#getters.length}]`;
    if (this.#putters.length > 0) text += ` _putters[${this.#putters.length}]`;
    if (this.#unfinishedTasks > 0) text += ` tasks=${this.#unfinishedTasks}`;
    if (this.#isShutdown) text += ' shutdown';
    return `<${this.constructor.name} ${text}>`;
  }
}

/**
 * Give a PriorityQueue its order (an addition to asyncio, whose items order themselves with `<`).
 *
 * @example
 * ```ts
 * const options: PriorityQueueOptions<Job> = { compare: (a, b) => a.deadline - b.deadline };
 * const jobs = new PriorityQueue<Job>(0, options);
 * ```
 */
export interface PriorityQueueOptions<T> {
  /** Order items: negative when `a` comes out before `b`, positive when after, 0 when equal. */
  compare?: (a: T, b: T) => number;
}

/**
 * Compare as Python's `<` does for the values it can order: numbers, bigints and booleans
 * together, strings together, arrays element by element like tuples. Anything else throws
 * TypeError.
 */
function naturalCompare(a: unknown, b: unknown): number {
  if (a === b) return 0;
  const kindA = orderKind(a);
  const kindB = orderKind(b);
  if (kindA === kindB && kindA !== OTHER) {
    if (kindA === SEQUENCE) return compareSequences(a as unknown[], b as unknown[]);
    const x = a as number | string;
    const y = b as number | string;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  throw new TypeError(
    `'<' not supported between instances of '${typeName(a)}' and '${typeName(b)}': ` +
      'give PriorityQueue a { compare } option to order such items',
  );
}

const NUMERIC = 0;
const TEXT = 1;
const SEQUENCE = 2;
const OTHER = 3;

function orderKind(value: unknown): number {
  switch (typeof value) {
    case 'number':
    case 'bigint':
    case 'boolean':
      return NUMERIC;
    case 'string':
      return TEXT;
    default:
      return Array.isArray(value) ? SEQUENCE : OTHER;
  }
}

function compareSequences(a: unknown[], b: unknown[]): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const order = naturalCompare(a[i], b[i]);
    if (order !== 0) return order;
  }
  return a.length - b.length;
}

/**
 * Hand out the smallest item first (asyncio.PriorityQueue); the items are kept in a binary heap.
 *
 * Numbers, bigints and booleans compare with each other, strings with strings, and arrays
 * element by element like Python tuples, so `[priority, item]` pairs work as in asyncio.
 * Other items need a `compare` option; without one, putting them throws TypeError and leaves
 * the queue unchanged.
 *
 * @example
 * ```ts
 * const jobs = new PriorityQueue<[number, string]>();
 * jobs.putNowait([2, 'later']);
 * jobs.putNowait([1, 'first']);
 * jobs.getNowait(); // [1, 'first']
 *
 * const byDeadline = new PriorityQueue<Job>(0, { compare: (a, b) => a.deadline - b.deadline });
 * ```
 */
export class PriorityQueue<T = unknown> extends Queue<T> {
  /** A priority queue holding at most `maxsize` items (≤ 0: unbounded), ordered by `options.compare` if given. */
  constructor(maxsize = 0, options?: PriorityQueueOptions<T>) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw new TypeError(`PriorityQueue() options must be an object, got ${repr(options)}`);
    }
    const compare = options?.compare;
    if (compare !== undefined && typeof compare !== 'function') {
      throw new TypeError(`options.compare must be a function, got ${repr(compare)}`);
    }
    super(maxsize, new HeapStore<T>(compare ?? naturalCompare));
  }
}

/**
 * Hand out the most recently added item first (asyncio.LifoQueue).
 *
 * @example
 * ```ts
 * const stack = new LifoQueue<number>();
 * stack.putNowait(1);
 * stack.putNowait(2);
 * stack.getNowait(); // 2
 * ```
 */
export class LifoQueue<T = unknown> extends Queue<T> {
  /** A LIFO queue holding at most `maxsize` items (≤ 0: unbounded). */
  constructor(maxsize = 0) {
    super(maxsize, new LifoStore<T>());
  }
}
