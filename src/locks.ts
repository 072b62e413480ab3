/**
 * Synchronisation primitives for tasks of one loop (asyncio.locks): Lock, Event, Condition,
 * Semaphore, BoundedSemaphore, Barrier.
 *
 * They are not thread-safe. Each binds to the running loop the first time it has to wait
 * (Barrier: on every wait, reset or abort), and using it from another loop afterwards is a
 * RuntimeError. Waiters queue FIFO; a waiter is woken by completing its future, so the woken
 * task runs one iteration later, behind whatever is already ready. Until it runs, the wake-up
 * is reserved for it: a newcomer never overtakes a live waiter, and a woken waiter that is
 * cancelled before it runs hands its wake-up (or permit) to the next one.
 */
import { isCoroutine, type Coroutine } from './coroutines.js';
import { BrokenBarrierError, CancelledError, RuntimeError } from './exceptions.js';
import type { Future } from './futures.js';
import { Deque } from './internal/deque.js';
import { repr } from './internal/format.js';
import { LoopBound } from './internal/loop-bound.js';
import { allCancelled, removeWaiter } from './internal/waiters.js';

/** Marks "no CancelledError caught" in Condition.wait, where any value may be thrown. */
const NONE: unique symbol = Symbol('NONE');

function checkBody(body: unknown): void {
  if (typeof body !== 'function') {
    throw new TypeError(`run() expects a function returning a coroutine, got ${repr(body)}`);
  }
}

function startBody<A extends unknown[], R>(body: (...args: A) => Coroutine<R>, ...args: A): Coroutine<R> {
  const coro = body(...args);
  if (!isCoroutine(coro)) throw new TypeError(`run() body must return a coroutine, got ${repr(coro)}`);
  return coro;
}

interface Acquirable {
  acquire(): Coroutine<boolean>;
  release(): void;
}

function* runHolding<R>(holder: Acquirable, body: () => Coroutine<R>): Coroutine<R> {
  yield* holder.acquire();
  try {
    return yield* startBody(body);
  } finally {
    holder.release();
  }
}

/**
 * Make `yield* obj` fail as `await obj` does in Python. Defined outside the class types, so
 * that TypeScript still rejects `yield* lock` at compile time.
 */
function refuseAwait(cls: abstract new (...args: never[]) => object): void {
  Object.defineProperty(cls.prototype, Symbol.iterator, {
    value: function refuseAwait(this: object): never {
      throw new TypeError(`object ${this.constructor.name} can't be used in 'await' expression`);
    },
    writable: true,
    configurable: true,
  });
}

function withWaiters(state: string, waiters: Deque<unknown> | null): string {
  return waiters !== null && waiters.length > 0 ? `${state}, waiters:${waiters.length}` : state;
}

/**
 * Guard a critical section with a mutual-exclusion lock that hands over in FIFO order
 * (asyncio.Lock).
 *
 * `acquire()` takes a free lock at once only when no live task waits for it; otherwise it
 * queues, so a newcomer never overtakes a waiter. `release()` wakes the first waiter, which
 * takes the lock when it runs.
 *
 * @example
 * ```ts
 * const lock = new Lock();
 * function* worker(): Coroutine<void> {
 *   yield* lock.run(function* () {
 *     yield* sleep(0.1); // one worker at a time in here
 *   });
 * }
 * ```
 */
export class Lock extends LoopBound {
  #waiters: Deque<Future<boolean>> | null = null;
  #locked = false;

  /** Whether the lock is held (locked). */
  locked(): boolean {
    return this.#locked;
  }

  /**
   * Wait until the lock is free and no earlier waiter is left, then take it; returns true
   * (acquire).
   *
   * @example
   * ```ts
   * yield* lock.acquire();
   * try { criticalSection(); } finally { lock.release(); }
   * ```
   */
  *acquire(): Coroutine<boolean> {
    if (!this.#locked && allCancelled(this.#waiters)) {
      this.#locked = true;
      return true;
    }
    const waiters = (this.#waiters ??= new Deque<Future<boolean>>());
    const waiter = this._getLoop().createFuture<boolean>();
    waiters.push(waiter);
    try {
      try {
        yield* waiter;
      } finally {
        removeWaiter(waiters, waiter);
      }
    } catch (error) {
      // Woken and then cancelled before running: the lock is still free, so the next waiter
      // must be woken in our place.
      if (error instanceof CancelledError && !this.#locked) this.#wakeUpFirst();
      throw error;
    }
    this.#locked = true;
    return true;
  }

  /** Release the lock and wake the first waiter; RuntimeError('Lock is not acquired.') when unlocked (release). */
  release(): void {
    if (!this.#locked) throw new RuntimeError('Lock is not acquired.');
    this.#locked = false;
    this.#wakeUpFirst();
  }

  /**
   * Acquire, run `body()`, release whatever happens (`async with lock`); returns the body's
   * result.
   *
   * @example
   * ```ts
   * const value = yield* lock.run(function* () { return yield* readShared(); });
   * ```
   */
  run<R>(body: () => Coroutine<R>): Coroutine<R> {
    checkBody(body);
    return runHolding(this, body);
  }

  /** Describe the lock as asyncio's repr does: `<Lock [locked, waiters:1]>`. */
  override toString(): string {
    return `<Lock [${withWaiters(this.#locked ? 'locked' : 'unlocked', this.#waiters)}]>`;
  }

  #wakeUpFirst(): void {
    const first = this.#waiters?.peek();
    // A done first waiter was already woken and will take the lock itself.
    if (first !== undefined && !first.done()) first.setResult(true);
  }
}

/**
 * Let tasks wait until a flag is set (asyncio.Event).
 *
 * `set()` wakes every waiter; they run in the order they started waiting, behind whatever was
 * already ready.
 *
 * @example
 * ```ts
 * const ready = new Event();
 * function* consumer(): Coroutine<void> {
 *   yield* ready.wait();
 *   console.log('go');
 * }
 * createTask(consumer());
 * ready.set();
 * ```
 */
export class Event extends LoopBound {
  #waiters = new Deque<Future<boolean>>(4);
  #value = false;

  /** Whether the flag is set (is_set). */
  isSet(): boolean {
    return this.#value;
  }

  /** Set the flag and wake every waiter (set). */
  set(): void {
    if (this.#value) return;
    this.#value = true;
    const waiters = this.#waiters;
    for (let i = 0; i < waiters.length; i++) {
      const waiter = waiters.at(i) as Future<boolean>;
      if (!waiter.done()) waiter.setResult(true);
    }
  }

  /** Clear the flag; later `wait()` calls wait again (clear). */
  clear(): void {
    this.#value = false;
  }

  /**
   * Wait until the flag is set; returns true, at once when it is set already (wait).
   *
   * @example
   * ```ts
   * yield* event.wait();
   * ```
   */
  *wait(): Coroutine<boolean> {
    if (this.#value) return true;
    const waiters = this.#waiters;
    const waiter = this._getLoop().createFuture<boolean>();
    waiters.push(waiter);
    try {
      yield* waiter;
      return true;
    } finally {
      removeWaiter(waiters, waiter);
    }
  }

  /** Describe the event as asyncio's repr does: `<Event [unset, waiters:2]>`. */
  override toString(): string {
    return `<Event [${withWaiters(this.#value ? 'set' : 'unset', this.#waiters)}]>`;
  }
}

/**
 * Let tasks wait for a notification while holding a Lock (asyncio.Condition).
 *
 * `wait()` releases the lock, waits for `notify()`, and re-acquires the lock before it
 * returns or raises, even when cancelled. A notified waiter that fails or is cancelled passes
 * the notification on (a spurious wake-up is allowed, a lost one is not).
 *
 * @example
 * ```ts
 * const cond = new Condition();
 * const items: number[] = [];
 * function* consumer(): Coroutine<number> {
 *   return yield* cond.run(function* () {
 *     yield* cond.waitFor(() => items.length > 0);
 *     return items.shift()!;
 *   });
 * }
 * function* producer(): Coroutine<void> {
 *   yield* cond.run(function* () {
 *     items.push(1);
 *     cond.notify();
 *   });
 * }
 * ```
 */
export class Condition extends LoopBound {
  #lock: Lock;
  #waiters = new Deque<Future<boolean>>(4);

  /** A condition over `lock`, or over a new Lock when none is given. */
  constructor(lock?: Lock) {
    super();
    if (lock === undefined || lock === null) lock = new Lock();
    else if (!(lock instanceof Lock)) throw new TypeError(`lock must be a Lock, got ${repr(lock)}`);
    this.#lock = lock;
  }

  /** Whether the underlying lock is held (locked). */
  locked(): boolean {
    return this.#lock.locked();
  }

  /** Acquire the underlying lock; returns true (acquire). */
  acquire(): Coroutine<boolean> {
    return this.#lock.acquire();
  }

  /** Release the underlying lock (release). */
  release(): void {
    this.#lock.release();
  }

  /**
   * Release the lock, wait for a notification, re-acquire the lock; returns true (wait).
   * The lock is re-acquired even when the wait is cancelled; the CancelledError that arrived
   * last is re-raised as is. RuntimeError('cannot wait on un-acquired lock') without the lock.
   *
   * @example
   * ```ts
   * yield* cond.acquire();
   * try { while (!ready) yield* cond.wait(); } finally { cond.release(); }
   * ```
   */
  *wait(): Coroutine<boolean> {
    if (!this.locked()) throw new RuntimeError('cannot wait on un-acquired lock');
    this.release();
    try {
      try {
        const waiters = this.#waiters;
        const waiter = this._getLoop().createFuture<boolean>();
        waiters.push(waiter);
        try {
          yield* waiter;
          return true;
        } finally {
          removeWaiter(waiters, waiter);
        }
      } finally {
        // Only cancellation is retried: another error from acquire() must not make us spin.
        let cancelled: unknown = NONE;
        for (;;) {
          try {
            yield* this.#lock.acquire();
            break;
          } catch (error) {
            // eslint-disable-next-line no-unsafe-finally -- asyncio re-raises from this finally too
            if (!(error instanceof CancelledError)) throw error;
            cancelled = error;
          }
        }
        // eslint-disable-next-line no-unsafe-finally -- the cancellation that came while reacquiring
        if (cancelled !== NONE) throw cancelled;
      }
    } catch (error) {
      // We may have been notified before the error arrived: notify someone else instead.
      this.#notify(1);
      throw error;
    }
  }

  /**
   * Wait until `predicate()` returns a truthy value, checking it first and after every
   * wake-up; returns that value (wait_for).
   *
   * @example
   * ```ts
   * const item = yield* cond.waitFor(() => queue.shift());
   * ```
   */
  *waitFor<R>(predicate: () => R): Coroutine<R> {
    if (typeof predicate !== 'function') throw new TypeError(`predicate must be a function, got ${repr(predicate)}`);
    let result = predicate();
    while (!result) {
      yield* this.wait();
      result = predicate();
    }
    return result;
  }

  /** Wake up to `n` waiters (default 1); RuntimeError('cannot notify on un-acquired lock') without the lock (notify). */
  notify(n = 1): void {
    if (typeof n !== 'number') throw new TypeError(`n must be a number, got ${repr(n)}`);
    if (!this.locked()) throw new RuntimeError('cannot notify on un-acquired lock');
    this.#notify(n);
  }

  /** Wake every waiter; RuntimeError('cannot notify on un-acquired lock') without the lock (notify_all). */
  notifyAll(): void {
    this.notify(this.#waiters.length);
  }

  /**
   * Acquire the lock, run `body()`, release it (`async with cond`); returns the body's result.
   *
   * @example
   * ```ts
   * yield* cond.run(function* () { cond.notifyAll(); });
   * ```
   */
  run<R>(body: () => Coroutine<R>): Coroutine<R> {
    checkBody(body);
    return runHolding(this, body);
  }

  /** Describe the condition as asyncio's repr does: `<Condition [locked, waiters:1]>`. */
  override toString(): string {
    return `<Condition [${withWaiters(this.locked() ? 'locked' : 'unlocked', this.#waiters)}]>`;
  }

  #notify(n: number): void {
    const waiters = this.#waiters;
    let woken = 0;
    for (let i = 0; i < waiters.length && woken < n; i++) {
      const waiter = waiters.at(i) as Future<boolean>;
      if (!waiter.done()) {
        woken++;
        waiter.setResult(false);
      }
    }
  }
}

/**
 * Limit how many tasks hold a resource at once with a counter of permits (asyncio.Semaphore).
 *
 * `release()` hands its permit straight to the first waiter; `acquire()` takes a free permit
 * at once only when no live task waits, so permits go out in FIFO order.
 *
 * @example
 * ```ts
 * const slots = new Semaphore(3);
 * function* fetchOne(url: string): Coroutine<string> {
 *   return yield* slots.run(function* () { return yield* download(url); });
 * }
 * ```
 */
export class Semaphore extends LoopBound {
  #waiters: Deque<Future<boolean>> | null = null;
  #value: number;

  /** A semaphore with `value` permits (default 1); RangeError('Semaphore initial value must be >= 0') when negative. */
  constructor(value = 1) {
    super();
    if (typeof value !== 'number') throw new TypeError(`Semaphore value must be a number, got ${repr(value)}`);
    if (!(value >= 0)) throw new RangeError('Semaphore initial value must be >= 0');
    if (!Number.isInteger(value)) throw new TypeError(`Semaphore value must be an integer, got ${value}`);
    this.#value = value;
  }

  /** @internal The number of free permits (asyncio's `_value`). */
  get _value(): number {
    return this.#value;
  }

  /** Whether `acquire()` would wait: no permit is free, or a live task waits already (locked). */
  locked(): boolean {
    return this.#value === 0 || !allCancelled(this.#waiters);
  }

  /**
   * Wait for a permit and take it; returns true (acquire).
   *
   * @example
   * ```ts
   * yield* sem.acquire();
   * try { yield* work(); } finally { sem.release(); }
   * ```
   */
  *acquire(): Coroutine<boolean> {
    if (!this.locked()) {
      this.#value--;
      return true;
    }
    const waiters = (this.#waiters ??= new Deque<Future<boolean>>());
    const waiter = this._getLoop().createFuture<boolean>();
    waiters.push(waiter);
    try {
      try {
        yield* waiter;
      } finally {
        removeWaiter(waiters, waiter);
      }
    } catch (error) {
      // A permit was handed to us, but we will not take it: give it back.
      if (error instanceof CancelledError && waiter.done() && !waiter.cancelled()) this.#value++;
      throw error;
    } finally {
      // Newcomers queued behind us while permits were reserved: wake as many as are free.
      while (this.#value > 0) if (!this.#wakeUpNext()) break;
    }
    return true;
  }

  /** Return a permit, handing it to the first waiter (release). */
  release(): void {
    this.#value++;
    this.#wakeUpNext();
  }

  /**
   * Acquire a permit, run `body()`, release it (`async with sem`); returns the body's result.
   *
   * @example
   * ```ts
   * yield* sem.run(function* () { yield* work(); });
   * ```
   */
  run<R>(body: () => Coroutine<R>): Coroutine<R> {
    checkBody(body);
    return runHolding(this, body);
  }

  /** Describe the semaphore as asyncio's repr does: `<Semaphore [unlocked, value:2]>`, `<Semaphore [locked]>`. */
  override toString(): string {
    const state = this.locked() ? 'locked' : `unlocked, value:${this.#value}`;
    return `<${this.constructor.name} [${withWaiters(state, this.#waiters)}]>`;
  }

  /** Reserve a permit for the first waiter not woken yet; false when there is none. */
  #wakeUpNext(): boolean {
    const waiters = this.#waiters;
    if (waiters === null) return false;
    for (let i = 0; i < waiters.length; i++) {
      const waiter = waiters.at(i) as Future<boolean>;
      if (!waiter.done()) {
        this.#value--;
        waiter.setResult(true);
        return true;
      }
    }
    return false;
  }
}

/**
 * Count permits like a Semaphore, refusing a release above the initial value
 * (asyncio.BoundedSemaphore).
 *
 * @example
 * ```ts
 * const sem = new BoundedSemaphore(2);
 * sem.release(); // RangeError: BoundedSemaphore released too many times
 * ```
 */
export class BoundedSemaphore extends Semaphore {
  #bound: number;

  /** A bounded semaphore with `value` permits (default 1). */
  constructor(value = 1) {
    super(value);
    this.#bound = value;
  }

  /** Return a permit; RangeError('BoundedSemaphore released too many times') above the initial value (release). */
  override release(): void {
    if (this._value >= this.#bound) throw new RangeError('BoundedSemaphore released too many times');
    super.release();
  }
}

const FILLING = 'filling';
const DRAINING = 'draining';
const RESETTING = 'resetting';
const BROKEN = 'broken';
type BarrierState = typeof FILLING | typeof DRAINING | typeof RESETTING | typeof BROKEN;

/**
 * Make a fixed number of tasks wait for each other, then release them together
 * (asyncio.Barrier).
 *
 * The task that completes a round releases it; the released tasks leave ("draining") before
 * a new round can fill, so a task that comes back early waits for the next round. `reset()`
 * and `abort()` raise BrokenBarrierError in the tasks waiting.
 *
 * @example
 * ```ts
 * const barrier = new Barrier(3);
 * function* worker(): Coroutine<void> {
 *   yield* prepare();
 *   const index = yield* barrier.wait(); // 0, 1 or 2 in arrival order
 *   yield* proceed(index);
 * }
 * ```
 */
export class Barrier extends LoopBound {
  #cond = new Condition();
  #parties: number;
  #state: BarrierState = FILLING;
  #count = 0;

  /** A barrier for `parties` tasks; RangeError('parties must be > 0') otherwise. */
  constructor(parties: number) {
    super();
    if (typeof parties !== 'number') throw new TypeError(`parties must be a number, got ${repr(parties)}`);
    if (!(parties >= 1)) throw new RangeError('parties must be > 0');
    if (!Number.isInteger(parties)) throw new TypeError(`parties must be an integer, got ${parties}`);
    this.#parties = parties;
  }

  /**
   * Wait until `parties` tasks wait; returns this task's arrival index, 0 to parties - 1
   * (wait). BrokenBarrierError when the barrier is reset or aborted meanwhile, or is broken.
   *
   * @example
   * ```ts
   * const index = yield* barrier.wait();
   * if (index === 0) console.log('all arrived');
   * ```
   */
  *wait(): Coroutine<number> {
    this._getLoop();
    const cond = this.#cond;
    yield* cond.acquire();
    try {
      // Tasks of the previous round are still leaving, or a reset is in progress.
      yield* cond.waitFor(() => this.#state !== DRAINING && this.#state !== RESETTING);
      if (this.#state === BROKEN) throw new BrokenBarrierError('Barrier aborted');
      const index = this.#count++;
      try {
        if (index + 1 === this.#parties) {
          this.#state = DRAINING;
          cond.notifyAll();
        } else {
          yield* cond.waitFor(() => this.#state !== FILLING);
          // Read afresh: the state changed while we waited.
          const state = this.#state as BarrierState;
          if (state === BROKEN || state === RESETTING) {
            throw new BrokenBarrierError('Abort or reset of barrier');
          }
        }
        return index;
      } finally {
        this.#count--;
        this.#exit();
      }
    } finally {
      cond.release();
    }
  }

  /**
   * Return the barrier to the empty, filling state; tasks waiting get BrokenBarrierError
   * (reset).
   *
   * @example
   * ```ts
   * yield* barrier.reset();
   * ```
   */
  *reset(): Coroutine<void> {
    this._getLoop();
    const cond = this.#cond;
    yield* cond.acquire();
    try {
      if (this.#count > 0) this.#state = RESETTING;
      else this.#state = FILLING;
      cond.notifyAll();
    } finally {
      cond.release();
    }
  }

  /**
   * Break the barrier: tasks waiting and every later `wait()` get BrokenBarrierError, until
   * `reset()` (abort).
   *
   * @example
   * ```ts
   * yield* barrier.abort();
   * barrier.broken; // true
   * ```
   */
  *abort(): Coroutine<void> {
    this._getLoop();
    const cond = this.#cond;
    yield* cond.acquire();
    try {
      this.#state = BROKEN;
      cond.notifyAll();
    } finally {
      cond.release();
    }
  }

  /**
   * Wait, then run `body(index)` with this task's arrival index (`async with barrier as
   * index`); returns the body's result.
   *
   * @example
   * ```ts
   * yield* barrier.run(function* (index) { console.log('passed as', index); });
   * ```
   */
  run<R>(body: (index: number) => Coroutine<R>): Coroutine<R> {
    checkBody(body);
    return runAfterBarrier(this, body);
  }

  /** The number of tasks needed to pass (parties). */
  get parties(): number {
    return this.#parties;
  }

  /** The number of tasks waiting in the current round; 0 unless filling (n_waiting). */
  get nWaiting(): number {
    return this.#state === FILLING ? this.#count : 0;
  }

  /** Whether the barrier is broken (broken). */
  get broken(): boolean {
    return this.#state === BROKEN;
  }

  /** Describe the barrier as asyncio's repr does: `<Barrier [filling, waiters:1/3]>`, `<Barrier [broken]>`. */
  override toString(): string {
    const extra = this.#state === BROKEN ? BROKEN : `${this.#state}, waiters:${this.nWaiting}/${this.#parties}`;
    return `<Barrier [${extra}]>`;
  }

  /** The last task out ends draining or resetting and lets blocked tasks re-check. */
  #exit(): void {
    if (this.#count === 0) {
      if (this.#state === RESETTING || this.#state === DRAINING) this.#state = FILLING;
      this.#cond.notifyAll();
    }
  }
}

function* runAfterBarrier<R>(barrier: Barrier, body: (index: number) => Coroutine<R>): Coroutine<R> {
  const index = yield* barrier.wait();
  return yield* startBody(body, index);
}

for (const cls of [Lock, Event, Condition, Semaphore, Barrier]) refuseAwait(cls);
