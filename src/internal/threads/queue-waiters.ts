/**
 * Waiting, in one thread, for a change of a ThreadQueue's shared state: an item put (PUTS), an
 * item got (GETS), an item done (DONES); a shutdown changes all three. Every way of waiting follows one protocol:
 * read the sequence word, look at the queue, and if there is nothing to take, sleep until the
 * word differs from what was read (a change in between is never missed: the word differs
 * already). What sleeps:
 * - a thread outside any loop (`getSync`/`putSync`/`joinSync`): `Atomics.wait` on the word,
 *   blocking it (refused where a loop runs: it would block the loop, see `refuseInRunningLoop`);
 * - tasks of a loop and `for await` code: a WordWatch, one per queue and word in the thread. It
 *   keeps the thread's waiters in order and arms one `Atomics.waitAsync` for all of them. A loop
 *   with a task waiting polls the word while it spins before sleeping, as it polls its links
 *   (base-events.ts `#spin`), takes a change through its inbox like a link's batch, and arms the
 *   waitAsync only as it gives libuv a turn: a consumer that keeps up costs its producers no
 *   notify.
 * A spinning loop gathers the changes of a stream before it takes them: once it sees the word
 * change, it lets the change stand until the word has been still for GATHER_QUIET_MS, or
 * GATHER_COUNT changes wait, or GATHER_LIMIT_MS passed. A lone item is taken half a microsecond
 * later; a stream is taken in runs. Taken one by one, each item of a stream cost its consumer a
 * wake-up and both threads a transfer of the producers' cache line (about 0.4 µs each way between
 * the cores of these machines), and a consumer that kept pace that way went no faster than one
 * that lagged and took runs.
 * On a change the watch wakes its first waiter (every waiter when the queue was shut down, or
 * for DONES); a woken getter that took an item wakes the next one while items are left, and one
 * that found nothing waits again in its place at the front.
 */
import type { EventLoop, InboxReceiver, Pollable } from '../../base-events.js';
import { RuntimeError } from '../../exceptions.js';
import { Future } from '../../futures.js';
import { Deque } from '../deque.js';
import { _getRunningLoop } from '../running.js';
import { removeWaiter } from '../waiters.js';
import { waitingCounter } from './queue-memory.js';

/** A `for await` waiting outside any loop's futures: a Promise to resolve. */
export class PromiseWaiter {
  #resolve: () => void;
  #done = false;

  constructor(resolve: () => void) {
    this.#resolve = resolve;
  }

  done(): boolean {
    return this.#done;
  }

  setResult(_value?: undefined): void {
    this.#done = true;
    this.#resolve();
  }
}

type Waiter = Future<void> | PromiseWaiter;

/** Atomics.waitAsync (ES2024; Node 20 has it, the project's lib is ES2022). */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(array: Int32Array, index: number, value: number): { async: false; value: string } | { async: true; value: Promise<string> };
  }
).waitAsync;

const NOTHING: unknown[] = [];

/** A change seen by a poll is taken once the word has been still this long (ms)… */
const GATHER_QUIET_MS = 0.0005;
/** …or this many changes wait… */
const GATHER_COUNT = 32;
/** …or this long (ms) after it was first seen. */
const GATHER_LIMIT_MS = 0.008;

let clock: () => number = () => performance.now();

/** @internal Tests: the clock the gathering of changes reads (ms); returns the one it replaces. */
export function _setGatherClock(next: () => number): () => number {
  const before = clock;
  clock = next;
  return before;
}

/**
 * Promise waiters in this thread: while there are some, a timer keeps the thread alive (a pending
 * `Atomics.waitAsync` does not), as a running loop does for its tasks.
 */
let promiseWaiters = 0;
let keepAlive: NodeJS.Timeout | null = null;

function holdThread(delta: number): void {
  promiseWaiters += delta;
  if (promiseWaiters > 0 && keepAlive === null) keepAlive = setInterval(() => undefined, 1 << 30);
  else if (promiseWaiters === 0 && keepAlive !== null) {
    clearInterval(keepAlive);
    keepAlive = null;
  }
}

/**
 * Refuse a blocking call (`getSync`, `putSync`, `joinSync`) in a thread whose event loop is
 * running: it would block that loop, and with it every task that could make the change it waits
 * for. A RuntimeError naming `method` and what to use there instead.
 */
export function refuseInRunningLoop(method: string, instead: string): void {
  if (_getRunningLoop() === null) return;
  throw new RuntimeError(`${method}() would block the event loop running in this thread: in a loop, use ${instead}; ${method}() is for code outside any loop`);
}

/**
 * Block this thread until `ctl[word]` differs from `seen` or `ms` milliseconds passed (Infinity:
 * no limit), counted among the word's waiters meanwhile.
 */
export function sleepOn(ctl: Int32Array, word: number, seen: number, ms: number): void {
  const counter = waitingCounter(word);
  Atomics.add(ctl, counter, 1);
  let woken = false;
  try {
    woken = Atomics.wait(ctl, word, seen, ms) === 'ok';
  } finally {
    // Woken by a notify: the change took this wait off the count already.
    if (!woken) Atomics.sub(ctl, counter, 1);
  }
}

/** The waiters of one thread for changes of one sequence word of a queue (see the module's comment). */
export class WordWatch implements Pollable, InboxReceiver {
  readonly #ctl: Int32Array;
  readonly #word: number;
  readonly #counter: number;
  /** Whom a change wakes: 0 nobody (nothing to take), 1 the first waiter, 2 every waiter. */
  readonly #readiness: () => number;
  /**
   * In order; woken ones are taken off. Invariant: while it holds a waiter not done, the watch
   * is armed (a change wakes it: see `#arm`), or a change is on its way to be looked at
   * (`#onNotified` queued), or a running loop polls this watch and arms it before it gives libuv
   * a turn (`_beforeYield`).
   */
  readonly #waiters = new Deque<Waiter>(4);
  /** How many of them are PromiseWaiters (no loop arms the watch for them: it is armed at once). */
  #promises = 0;
  /** Whether a change is to be delivered when the pending waitAsync ends. */
  #armed = false;
  /**
   * Whether a waitAsync of this watch is pending on the word, counted in its WAITING count (the
   * change that wakes it takes it off). It outlives a disarming: a poll that saw a change first
   * leaves it pending, and the next arming uses it, as it is woken by the next change.
   */
  #pending = false;
  /** Which arming a change found before any wait is for: one disarmed meanwhile is stale. */
  #arming = 0;
  /** The word as it was when a waiter last found nothing to take: a change is any other value. */
  #seen = 0;
  /** When a poll first saw the change it lets stand (-1: none stands). */
  #heldSince = -1;
  /** The word at the last poll that saw it move, and when that was. */
  #heldWord = 0;
  #movedAt = 0;
  /** The loop that polls this watch while one of its futures waits here. */
  #loop: EventLoop | null = null;

  constructor(ctl: Int32Array, word: number, readiness: () => number) {
    this.#ctl = ctl;
    this.#word = word;
    this.#counter = waitingCounter(word);
    this.#readiness = readiness;
  }

  /** The word now: read it before looking at the queue, and give it to `add` when there was nothing. */
  observe(): number {
    return Atomics.load(this.#ctl, this.#word);
  }

  /** How many wait here (woken ones excepted). */
  get length(): number {
    return this.#waiters.length;
  }

  /**
   * Wait for the word to differ from `seen`: `waiter` is woken (its result set) by a change.
   * `again`: a woken waiter that found nothing waits in its place at the front.
   */
  add(waiter: Waiter, seen: number, again: boolean): void {
    if (again) this.#waiters.unshift(waiter);
    else this.#waiters.push(waiter);
    this.#seen = seen;
    if (waiter instanceof Future) {
      // Its loop polls the word while it spins and arms the watch only as it yields: while
      // changes are caught by polls, producers never pay for a notify.
      this.#pollFrom(waiter.getLoop());
    } else {
      this.#promises++;
      holdThread(1);
      this.#arm();
    }
  }

  /** Take `waiter` off (it was cancelled); whether it was still waiting. */
  remove(waiter: Waiter): boolean {
    const removed = removeWaiter(this.#waiters, waiter);
    if (waiter instanceof PromiseWaiter && removed) this.#forgetPromise();
    if (this.#waiters.length === 0) this.#stopPolling();
    return removed;
  }

  /**
   * Wake the first waiter not done yet (asyncio's `_wakeup_next`). A waiter whose loop was closed
   * while it waited is dropped on the way: nothing can resume it, and waking it would raise
   * "Event loop is closed" in whoever changed the queue (a put, a get, a taskDone, or the
   * iteration of another loop that took the change); the wake-up goes to the next waiter.
   */
  wakeNext(): void {
    const waiters = this.#waiters;
    while (waiters.length > 0) {
      const waiter = waiters.shift() as Waiter;
      if (waiter instanceof PromiseWaiter) this.#forgetPromise();
      else if (waiter.getLoop().isClosed()) continue;
      if (!waiter.done()) {
        waiter.setResult(undefined);
        break;
      }
    }
    if (waiters.length === 0) this.#stopPolling();
  }

  /** This thread changed the queue: wake its waiters as a change seen from another thread would, at once. */
  changedHere(): void {
    if (this.#waiters.length > 0) this.#changed();
  }

  /** The word changed: wake whom the queue's state calls for, and keep watching for the rest. */
  #changed(): void {
    // Read before the state: a change after this read makes the next wait return at once.
    this.#seen = Atomics.load(this.#ctl, this.#word);
    this.#heldSince = -1;
    const ready = this.#readiness();
    if (ready === 2) while (this.#waiters.length > 0) this.wakeNext();
    else if (ready === 1) this.wakeNext();
    if (this.#promises > 0 || (this.#waiters.length > 0 && this.#loop === null)) this.#arm();
  }

  #arm(): void {
    if (this.#armed) return;
    this.#armed = true;
    const arming = ++this.#arming;
    if (this.#pending) {
      // The pending wait is woken by the next change; one since `#seen` is not waited for.
      if (Atomics.load(this.#ctl, this.#word) !== this.#seen) queueMicrotask(() => this.#onNotified(arming));
      return;
    }
    Atomics.add(this.#ctl, this.#counter, 1);
    const wait = waitAsync(this.#ctl, this.#word, this.#seen);
    if (wait.async) {
      this.#pending = true;
      void wait.value.then(this.#onWoken);
    } else {
      // The word differed already: nobody notifies this wait, it takes itself off the count.
      Atomics.sub(this.#ctl, this.#counter, 1);
      queueMicrotask(() => this.#onNotified(arming));
    }
  }

  /** A change was seen without a notify: none is to be delivered when the pending wait ends. */
  #disarm(): void {
    this.#armed = false;
  }

  /** The pending waitAsync was woken (by a change, which took it off the count). */
  readonly #onWoken = (): void => {
    this.#pending = false;
    this.#onNotified(this.#arming);
  };

  /** A change for arming `arming` came. */
  #onNotified(arming: number): void {
    if (arming !== this.#arming || !this.#armed) return;
    this.#disarm();
    const loop = this.#loop;
    // In the loop's iteration, where its polls deliver changes too.
    if (loop !== null && loop.isRunning()) loop._deliver(this, NOTHING);
    else if (this.#waiters.length > 0) this.#changed();
  }

  /**
   * @internal The loop spins before it sleeps: whether a change is taken (then it is in the
   * loop's inbox). A change stands while more keep coming (see GATHER_QUIET_MS).
   */
  _poll(): boolean {
    const word = Atomics.load(this.#ctl, this.#word);
    if (word === this.#seen || this.#loop === null) return false;
    const now = clock();
    if (this.#heldSince < 0) {
      this.#heldSince = now;
      this.#heldWord = word;
      this.#movedAt = now;
      return false;
    }
    if (word !== this.#heldWord) {
      this.#heldWord = word;
      this.#movedAt = now;
    }
    if (now - this.#movedAt < GATHER_QUIET_MS && ((word - this.#seen) | 0) < GATHER_COUNT && now - this.#heldSince < GATHER_LIMIT_MS) return false;
    this.#take(word);
    return true;
  }

  /** Put the change up to `word` in the loop's inbox. */
  #take(word: number): void {
    this.#heldSince = -1;
    this.#seen = word;
    (this.#loop as EventLoop)._deliver(this, NOTHING);
  }

  /**
   * @internal The loop is about to give libuv a turn (to sleep, or at the end of its time slice):
   * arm the watch, so that a change wakes it; or, when the word changed already, put the change
   * in the loop's inbox and say so.
   */
  _beforeYield(): boolean {
    if (this.#waiters.length === 0 || this.#loop === null) return false;
    // The loop stops spinning: a change that stood is taken now.
    const word = Atomics.load(this.#ctl, this.#word);
    if (word !== this.#seen) {
      this.#take(word);
      return true;
    }
    this.#arm();
    return false;
  }

  /** @internal A change taken from the loop's inbox. */
  _dispatch(): void {
    this.#disarm();
    if (this.#waiters.length > 0) this.#changed();
    else this.#stopPolling();
  }

  /** @internal Nothing to take: changes come whole. */
  _dispatchCalls(): void {}

  #forgetPromise(): void {
    this.#promises--;
    holdThread(-1);
  }

  #pollFrom(loop: EventLoop): void {
    if (this.#loop === loop) return;
    this.#loop?._removePollable(this);
    this.#loop = loop;
    loop._addPollable(this);
  }

  #stopPolling(): void {
    this.#heldSince = -1;
    if (this.#loop === null) return;
    this.#loop._removePollable(this);
    this.#loop = null;
  }
}
