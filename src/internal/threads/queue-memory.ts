/**
 * The shared memory of a ThreadQueue: a control block of 32-bit words and a growable ring of
 * item records, the same two SharedArrayBuffers in every thread that holds the queue. No thread
 * owns them: the queue lives while any thread holds them.
 *
 * Two locks (futex words), as in Michael and Scott's two-lock queue: producers append records at
 * TAIL under PUT_LOCK, consumers remove the record at HEAD under GET_LOCK, so a put and a get run
 * at once in two threads, each on cache lines of its own side. An item is in the queue exactly
 * while its record lies between HEAD and TAIL: a get takes the record at HEAD and moves HEAD past
 * it in one critical section, so an item is got once, and records leave in the order they came,
 * so one producer's items keep their order. Each side keeps a copy of the other side's index and
 * reads the real one only when its copy says full (producers) or empty (consumers): a consumer
 * that finds a run of records takes them without touching the producers' line. Growing the ring
 * takes both locks.
 *
 * Shrinking: a SharedArrayBuffer grows but never shrinks, so a ring that grew for a burst of large
 * items gives its memory back by moving: the get that leaves a large ring empty, or nearly
 * (SHRINK_USED), takes the producers' lock too, if free, copies the records left to a new small
 * buffer, offers that buffer to every other thread that holds the queue (queue-rings.ts), and
 * moves GEN on. Every operation already compares LAYOUT (moved on by each grow and each move)
 * under its lock; when it differs and GEN too, the thread takes the new buffer from its channel
 * before it touches the ring. A queue on its way to another thread (TRAVELLING) does not move: the
 * thread it goes to listens for its offers only as it arrives, and would miss one.
 *
 * Waiting is not done here: PUTS, GETS and DONES count puts, gets and items done, and threads
 * that wait for one of them to change sleep on it (queue-waiters.ts); a change notifies sleepers
 * only when the word's WAITING count says some sleep (see WAITING).
 *
 * Dying inside: a thread ended while it holds a lock (`worker.terminate()` stops a thread at
 * whatever it runs, Atomics calls included) would leave the lock held for good. LoopThreads are
 * never terminated inside an operation (guard.ts: each operation below runs between
 * `enterQueueOperation()` and `leaveQueueOperation()`). A thread that finds one holder on a lock
 * for a few seconds (a live holder holds it for microseconds) takes that holder for dead, ended
 * some other way, and marks the queue BROKEN: every operation, in every thread, then fails at
 * once with an error that says why, instead of hanging. The hold is timed by the holder, not by
 * the wait (see LockWait): each holder stamps the lock as it lets go, so a wait behind many
 * holders in turn never counts as one long hold, and a process stopped for a while (SIGSTOP, a
 * container pause: its holders stopped too) counts the stop as one look at the lock, not as the
 * time it lasted.
 */

import { enterQueueOperation, leaveQueueOperation } from './guard.js';
import { drain, listen, publish, type RingReceiver } from './queue-rings.js';

/*
 * Control block words, by cache line (16 words), so that producers and consumers write lines of
 * their own. Positions (TAIL, HEAD) count bytes through the ring and wrap at 2^32 like the
 * counters; a position's offset in the ring is `position & (CAPACITY - 1)`.
 */
/** Producers' line. 0 free, 1 held, 2 held and a thread may sleep in Atomics.wait for it (the holder then notifies). */
const PUT_LOCK = 0;
/** Where the next record goes; changed under PUT_LOCK, after the record's bytes are written. */
const TAIL = 1;
/** Items put, ever (plus one per shutdown): getters wait on it. Changed under PUT_LOCK. */
export const PUTS = 2;
/**
 * Each lock's stamp, at this distance from it (PUT_LOCK's in the producers' line, GET_LOCK's in
 * the consumers'): bumped by each holder as it lets go, so that a waiter tells one long hold from
 * many holders in turn (see LockWait).
 */
const STAMP = 5;
/** Consumers' line: GET_LOCK as PUT_LOCK. */
const GET_LOCK = 16;
/** Where the first record is; changed under GET_LOCK. Records lie in [HEAD, TAIL). */
const HEAD = 17;
/** Items got, ever (plus one per shutdown, plus the items a shutdown dropped): putters wait on it. Changed under GET_LOCK. */
export const GETS = 18;
/**
 * Items marked done, ever (plus one per shutdown, plus those a shutdown dropped): joiners wait on
 * it. Changed under GET_LOCK. Invariants: PUTS - GETS items are in the ring; PUTS - DONES are
 * unfinished (asyncio's `_unfinished_tasks`).
 */
export const DONES = 19;
/** Read-mostly line. 1 once shut down; set under both locks, never back to 0. */
const SHUTDOWN = 32;
/** The ring's length in bytes (a power of two), changed with it under both locks: views and copied indexes are remade when it differs from theirs. */
const CAPACITY = 33;
/** The bound on PUTS - GETS (0: none), fixed at creation. */
const MAXSIZE = 34;
/**
 * Who made the queue and its number there, and a random number of the copy of this module that
 * made it (two copies of the library in one thread count their queues apart): its identity.
 */
const ID_THREAD = 35;
const ID_SERIAL = 36;
const ID_COPY = 38;
/** 1 once a lock was found held by a thread that is gone (see "Dying inside"); never back to 0. */
const BROKEN = 37;
/** The most bytes the records in the ring take (a power of two, MAX_BYTES but in tests), fixed at creation; the ring never grows past it. */
const BYTE_LIMIT = 39;
/**
 * Moved on (under both locks) each time the ring is laid out again, grown or moved to a new data
 * buffer: an operation reads it, not CAPACITY, to know that its views still fit.
 */
const LAYOUT = 40;
/** Which data buffer holds the ring: moved on (under both locks) as the ring moves to a new one (see "Shrinking"). */
const GEN = 41;
/**
 * Handles of the queue on their way to other threads (see `travel()`): the ring does not move
 * while one is. A handle lost on its way leaves the count up for good, and that ring
 * never moves again, as before shrinking existed: memory kept, nothing wrong.
 */
const TRAVELLING = 42;
/**
 * 1 once the queue's memory went out as a plain value that may be taken up by any number of
 * threads, at any time, or never (see `pin()`): the ring never moves again. Never back to 0.
 */
const PINNED = 43;
/**
 * Waiters' line: how many waits sleep on PUTS, GETS and DONES (`WAITING + word`'s place among
 * them, see `waitingCounter`). A waiter counts itself before it waits; the change that wakes it
 * takes it off (Atomics.notify says how many it woke), and a wait that ends otherwise (the word
 * differed already, a timeout) takes itself off. So a count is never below the sleepers: a change
 * that reads 0 has nobody to wake, and a change that woke the sleepers leaves the next changes
 * free of notifies until somebody sleeps again. A thread that dies while waiting leaves its count
 * behind: the changes that follow pay for a notify that wakes nobody, nothing worse.
 */
const WAITING = 48;

const CTL_WORDS = 64;

/**
 * How many items were put, as a consumer may count them: at least as many as were got. A
 * producer moves TAIL past its record before it counts the put in PUTS, so a get can take the
 * record, and its taskDone() come, in between; counted from PUTS alone, that taskDone found no
 * item unfinished (RangeError 'task_done() called too many times', and a join() that never ended).
 */
function putsCounted(ctl: Int32Array): number {
  const puts = Atomics.load(ctl, PUTS);
  const gets = Atomics.load(ctl, GETS);
  return ((gets - puts) | 0) > 0 ? gets : puts;
}

/** The WAITING count of the waits on `word` (PUTS, GETS or DONES). */
export function waitingCounter(word: number): number {
  return word === PUTS ? WAITING : word === GETS ? WAITING + 1 : WAITING + 2;
}

/** `word` (PUTS, GETS or DONES) changed: wake its sleepers, if any, and take them off its WAITING count. */
function wake(ctl: Int32Array, word: number, counter: number): void {
  if (Atomics.load(ctl, counter) <= 0) return;
  const woken = Atomics.notify(ctl, word);
  if (woken > 0) Atomics.sub(ctl, counter, woken);
}

/** @internal Tests: how many waits are counted on `word` (PUTS, GETS or DONES) now. */
export function _waitingOn(ctl: Int32Array, word: number): number {
  return Atomics.load(ctl, waitingCounter(word));
}

/** Kinds of record. Numbers travel in the record itself; the rest as bytes (queue-items.ts). */
export const K_UNDEFINED = 1;
export const K_NULL = 2;
export const K_FALSE = 3;
export const K_TRUE = 4;
export const K_NUMBER = 5;
export const K_STRING = 6;
export const K_SERIALIZED = 7;
export const K_PLAIN = 8;
/** A serialized `[trace fields, item]`: an item put while an OpenTelemetry span was active (multiloop/otel). */
export const K_TRACED = 9;

/**
 * A record is an 8-byte header (kind, payload length) and its payload, padded to 8 bytes; a
 * header never straddles the ring's end, a payload may (it continues at offset 0).
 */
const HEADER = 8;
const FIRST_CAPACITY = 4096;
/**
 * A ring moves to a new buffer of FIRST_CAPACITY bytes when a get leaves it at least this large
 * (smaller rings are not worth a new buffer and a message to every thread each time they drain)…
 */
const SHRINK_FROM = 64 * FIRST_CAPACITY;
/** …with records of at most this many bytes left in it. */
const SHRINK_USED = FIRST_CAPACITY / 4;
/**
 * The most bytes a queue's records take: 1 GiB (address space is reserved for it, memory is
 * not). A record takes its item's bytes rounded up to 8, and 8 more (see `recordBytes`).
 */
export const MAX_BYTES = 1 << 30;
/** The byte limit of the queues made from now on in this thread (see `_setByteLimit`). */
let byteLimit = MAX_BYTES;

/** @internal Tests: the byte limit of the queues made from now on (a power of two from 4096 to MAX_BYTES); returns the one it replaces. */
export function _setByteLimit(bytes: number): number {
  if (!isByteLimit(bytes)) throw new RangeError(`a ThreadQueue's byte limit must be a power of two from ${FIRST_CAPACITY} to ${MAX_BYTES}, got ${bytes}`);
  const before = byteLimit;
  byteLimit = bytes;
  return before;
}

function isByteLimit(bytes: number): boolean {
  return Number.isInteger(bytes) && bytes >= FIRST_CAPACITY && bytes <= MAX_BYTES && (bytes & (bytes - 1)) === 0;
}

/** The bytes a record of an item of `length` bytes takes in the ring (its header included). */
export function recordBytes(length: number): number {
  return HEADER + Math.ceil(length / 8) * 8;
}

/** What a try of the queue's state came to. */
export const OK = 0;
export const EMPTY = 1;
export const FULL = 2;
export const SHUT = 3;
/** A get: the record is larger than the buffer given; `needed` says how large. Nothing was taken. */
export const TOO_SMALL = 4;
/**
 * A put: the ring cannot grow for it, now: the records there and this one would pass the byte
 * limit (`failure` null; `needed` is the record's size, `used` the bytes the others take), or
 * no memory (`failure` says why).
 */
export const NO_ROOM = 5;
/** taskDone(): no item is unfinished. */
export const TOO_MANY = 6;
/** The other side's lock was held when both were needed: nothing changed, try again. */
export const BUSY = 7;
/** The queue is broken (see "Dying inside"): nothing changed. */
export const BROKEN_QUEUE = 8;
/** A put: the record alone is larger than the byte limit (`needed` says how large): it never fits. */
export const TOO_BIG = 9;
/**
 * The ring moved to a data buffer this thread was never offered: its handle arrived late (a
 * handle delivered twice). Nothing changed; the queue cannot be used in this thread.
 */
export const STALE = 10;

/** Spins on a held lock before sleeping on it (a critical section is some hundred ns). */
const LOCK_SPINS = 200;
/** A sleep on a held lock is cut in slices this long (at most), to see whether its holder is gone. */
const LOCK_SLICE_MS = 100;
/** A lock held this long by one holder, as its waiters count it, has a dead holder (see "Dying inside"). */
let stuckMs = 5000;

/** @internal Tests: how long a held lock is waited for before the queue is declared broken. */
export function _setStuckLockMs(ms: number): number {
  const before = stuckMs;
  stuckMs = ms;
  return before;
}

/** @internal Tests: take the producers' lock of a queue's control words, as a put does (false: the queue is broken). */
export function _holdPutLock(ctl: Int32Array): boolean {
  return lock(ctl, PUT_LOCK);
}

/** @internal Tests: let go of the producers' lock taken with `_holdPutLock`. */
export function _releasePutLock(ctl: Int32Array): void {
  unlock(ctl, PUT_LOCK);
}

/** A growable SharedArrayBuffer (ES2024; Node 20 has them, the project's lib is ES2022). */
interface GrowableBuffer extends SharedArrayBuffer {
  readonly growable: boolean;
  readonly maxByteLength: number;
  grow(byteLength: number): void;
}

const GrowableBuffer = SharedArrayBuffer as unknown as new (byteLength: number, options: { maxByteLength: number }) => GrowableBuffer;

/** The two SharedArrayBuffers of a queue, as they cross to another thread, and the generation of `data` (see "Shrinking"). */
export interface QueueBuffers {
  readonly control: SharedArrayBuffer;
  readonly data: SharedArrayBuffer;
  readonly gen: number;
}

function newDataBuffer(): GrowableBuffer {
  return new GrowableBuffer(FIRST_CAPACITY, { maxByteLength: MAX_BYTES });
}

/** Whether `data` (from another thread, maybe hostile) is a data buffer made here. */
function isDataBuffer(data: unknown): data is GrowableBuffer {
  return data instanceof SharedArrayBuffer && (data as GrowableBuffer).growable && (data as GrowableBuffer).maxByteLength === MAX_BYTES && data.byteLength >= FIRST_CAPACITY;
}

/**
 * A wait for a held lock, timing the lock's holder: how long one holder (the lock's stamp
 * unchanged) has held it, as this thread saw it. Each look at the lock adds the time since the
 * last look, but at most two sleep slices: a thread waits on the lock in slices, so a longer gap
 * means this process was stopped or not scheduled meanwhile (SIGSTOP, a container pause), and
 * the holder, stopped with it, could not go on either. Without that cap, a process stopped for
 * the limit found its queues broken on waking though no thread had died. A holder that has gone
 * is found out by the looks that follow, each a slice apart.
 */
class LockWait {
  #stamp = 0;
  #held = 0;
  /** When the last look was (0: the wait has not begun). */
  #last = 0;

  /** A new wait begins. */
  reset(): void {
    this.#last = 0;
  }

  /**
   * Wait until the lock at `word` may be free, holding none: false when the queue is broken, or
   * found broken here (one holder held it for the limit: it is gone). The first look of a wait
   * returns after a spin, without sleeping.
   */
  wait(ctl: Int32Array, word: number): boolean {
    if (Atomics.load(ctl, BROKEN) !== 0) return false;
    for (let i = 0; i < LOCK_SPINS; i++) if (Atomics.load(ctl, word) === 0) return true;
    const now = performance.now();
    const stamp = Atomics.load(ctl, word + STAMP);
    const slice = Math.min(LOCK_SLICE_MS, stuckMs / 10);
    const first = this.#last === 0;
    if (first || stamp !== this.#stamp) {
      this.#stamp = stamp;
      this.#held = 0;
    } else {
      this.#held += Math.min(now - this.#last, 2 * slice);
      if (this.#held > stuckMs) {
        breakQueue(ctl);
        return false;
      }
    }
    this.#last = now;
    if (!first && Atomics.compareExchange(ctl, word, 1, 2) !== 0) Atomics.wait(ctl, word, 2, slice);
    return true;
  }
}

/** The wait of `lock()` (one at a time in a thread: it never waits inside a wait). */
const lockWait = new LockWait();

/**
 * Take `lock` (a futex word: 0 free, 1 held, 2 held and a thread may sleep on it): spin, then
 * sleep on it marked 2, so that its holder wakes a sleeper. False when the queue is broken, or
 * found broken here: one holder held the lock longer than a live holder ever holds it.
 */
function lock(ctl: Int32Array, word: number): boolean {
  if (Atomics.compareExchange(ctl, word, 0, 1) === 0) return true;
  lockWait.reset();
  for (;;) {
    if (!lockWait.wait(ctl, word)) return false;
    if (Atomics.compareExchange(ctl, word, 0, 2) === 0) return true;
  }
}

function unlock(ctl: Int32Array, word: number): void {
  // The holder's stamp (see LockWait); the Atomics.sub that frees the lock publishes it.
  ctl[word + STAMP] = (ctl[word + STAMP] as number) + 1;
  if (Atomics.sub(ctl, word, 1) !== 1) {
    Atomics.store(ctl, word, 0);
    Atomics.notify(ctl, word, 1);
  }
}

/** Mark the queue broken and wake every waiter of every kind, to fail. */
function breakQueue(ctl: Int32Array): void {
  Atomics.store(ctl, BROKEN, 1);
  for (const word of [PUTS, GETS, DONES]) {
    Atomics.add(ctl, word, 1);
    wake(ctl, word, waitingCounter(word));
  }
}

let serial = 0;
const copy = (Math.random() * 0x7fffffff) | 0;

/** A ThreadQueue's shared state, seen from one thread. */
export class QueueMemory implements RingReceiver {
  readonly ctl: Int32Array;
  readonly #control: SharedArrayBuffer;
  /** The data buffer this thread knows of, and its generation (GEN when it is the ring's). */
  #data: GrowableBuffer;
  #gen: number;
  readonly #maxsize: number;
  readonly #byteLimit: number;
  /**
   * Views of the ring's first `#capacity` bytes, remade (under a lock) when LAYOUT says the ring
   * grew or moved (-1: remake them at the next operation). Not length-tracking views: V8 reads
   * and writes those several times slower.
   */
  #layout = -1;
  #capacity = 0;
  #bytes: Uint8Array = new Uint8Array(0);
  #words: Int32Array = new Int32Array(0);
  #floats: Float64Array = new Float64Array(0);
  /**
   * This thread's copies of the other side's words, never ahead of them: a producer's HEAD and
   * GETS (it sees less room than there is, and reads the real ones when it runs out), a
   * consumer's TAIL (it sees fewer records, and reads TAIL when it runs out). Made again when
   * CAPACITY changes (the ring grew: positions start again from 0).
   */
  #head = 0;
  #gets = 0;
  #tail = 0;

  /** What the last successful tryGet() took: its kind, its number, the length of its bytes. */
  kind = 0;
  num = 0;
  length = 0;
  /** After TOO_SMALL: the length of the record's payload; after NO_ROOM and TOO_BIG: the size of the record. */
  needed = 0;
  /** After NO_ROOM: the bytes the records in the ring took. */
  used = 0;
  /** After NO_ROOM: why the ring could not grow (null: the records would pass the byte limit). */
  failure: unknown = null;
  /** The wait of waitForGetLock(), which goes on across tries. */
  readonly #getLockWait = new LockWait();

  /** A new queue's memory (`maxsize` 0: unbounded), or the memory of one that arrived. */
  constructor(maxsizeOrBuffers: number | QueueBuffers, threadId = 0) {
    let buffers: QueueBuffers;
    if (typeof maxsizeOrBuffers === 'number') {
      buffers = {
        control: new SharedArrayBuffer(CTL_WORDS * Int32Array.BYTES_PER_ELEMENT),
        data: newDataBuffer(),
        gen: 0,
      };
      const ctl = new Int32Array(buffers.control);
      ctl[MAXSIZE] = maxsizeOrBuffers;
      ctl[ID_THREAD] = threadId;
      ctl[ID_SERIAL] = ++serial;
      ctl[ID_COPY] = copy;
      ctl[CAPACITY] = FIRST_CAPACITY;
      ctl[BYTE_LIMIT] = byteLimit;
    } else {
      buffers = maxsizeOrBuffers;
    }
    this.#control = buffers.control;
    this.ctl = new Int32Array(buffers.control);
    this.#data = buffers.data as GrowableBuffer;
    this.#gen = buffers.gen;
    this.#maxsize = this.ctl[MAXSIZE] as number;
    this.#byteLimit = this.ctl[BYTE_LIMIT] as number;
    // Open before anything else: from now on, every move of the ring is offered here.
    listen(this.id, this);
  }

  /** The queue's buffers as this thread knows them (see `travel()` for a handle to send). */
  get buffers(): QueueBuffers {
    return { control: this.#control, data: this.#data, gen: this.#gen };
  }

  /**
   * The buffers for a handle about to cross to another thread: the ring's current data buffer,
   * and the queue counted as TRAVELLING (it does not move) until the handle's `arrived()`.
   */
  travel(): QueueBuffers {
    return this.#settledBuffers(false);
  }

  /**
   * Keep the ring in its data buffer for good: for memory handed out in a way no arrival is
   * counted for (a plain value any number of threads may take up, at any time), which a move
   * would leave behind. Call it before the buffers leave.
   */
  pin(): void {
    Atomics.store(this.ctl, PINNED, 1);
  }

  /**
   * The buffers for a plain value any number of threads may take up, at any time, or never
   * (`share()`): the ring is pinned first (under the consumers' lock, so that no move is under
   * way), as no arrival is ever counted for such a value.
   */
  pinForSharing(): QueueBuffers {
    return this.#settledBuffers(true);
  }

  /**
   * The buffers the ring is in now, read under the consumers' lock (no move under way), with
   * the ring pinned (`pinned`) or counted as TRAVELLING until the handle's `arrived()`.
   */
  #settledBuffers(pinned: boolean): QueueBuffers {
    enterQueueOperation();
    try {
      const ctl = this.ctl;
      // Set first: a move that holds the lock now ends before ours is taken, and none follows.
      if (pinned) this.pin();
      // Broken: nothing moves any more, the handle carries what this thread knows.
      if (Atomics.load(ctl, BROKEN) !== 0 || !lock(ctl, GET_LOCK)) return this.buffers;
      if (!pinned) Atomics.add(ctl, TRAVELLING, 1);
      if (ctl[LAYOUT] !== this.#layout) this.#remap();
      unlock(ctl, GET_LOCK);
      return this.buffers;
    } finally {
      leaveQueueOperation();
    }
  }

  /** A handle made by `travel()` arrived in this thread (its channel is open): the ring may move again. */
  arrived(): void {
    const ctl = this.ctl;
    for (let count = Atomics.load(ctl, TRAVELLING); count > 0; ) {
      const seen = Atomics.compareExchange(ctl, TRAVELLING, count, count - 1);
      if (seen === count) return;
      count = seen;
    }
  }

  /**
   * @internal A data buffer offered by the thread that moved the ring to it (queue-rings.ts), or
   * anything else posted on that channel: taken when it is a newer generation's buffer.
   */
  offer(message: Record<string, unknown>): void {
    const { gen, data } = message;
    if (typeof gen !== 'number' || (gen | 0) !== gen || ((gen - this.#gen) | 0) <= 0 || !isDataBuffer(data)) return;
    this.#data = data;
    this.#gen = gen;
    // The old buffer's views go now, so that this thread keeps no old buffer alive.
    this.#layout = -1;
    this.#capacity = 0;
    this.#bytes = new Uint8Array(0);
    this.#words = new Int32Array(0);
    this.#floats = new Float64Array(0);
  }

  /**
   * Under a lock, LAYOUT differs from this thread's: take the ring's data buffer (from the
   * channel, when it moved) and remake the views and the copied indexes. False when the ring
   * moved to a buffer never offered here (see STALE).
   */
  #remap(): boolean {
    const ctl = this.ctl;
    const gen = ctl[GEN] as number;
    if (gen !== this.#gen) {
      drain();
      if (gen !== this.#gen) return false;
    }
    const capacity = ctl[CAPACITY] as number;
    this.#layout = ctl[LAYOUT] as number;
    this.#capacity = capacity;
    this.#bytes = new Uint8Array(this.#data, 0, capacity);
    this.#words = new Int32Array(this.#data, 0, capacity >> 2);
    this.#floats = new Float64Array(this.#data, 0, capacity >> 3);
    this.#head = Atomics.load(ctl, HEAD);
    this.#gets = Atomics.load(ctl, GETS);
    this.#tail = Atomics.load(ctl, TAIL);
    return true;
  }

  /** @internal Tests: the byte length of the ring's data buffer now, this thread moved to it first (-1: STALE), and how many times the ring moved. */
  dataStats(): { dataBytes: number; moves: number } {
    enterQueueOperation();
    try {
      const ctl = this.ctl;
      if (!lock(ctl, GET_LOCK)) return { dataBytes: this.#data.byteLength, moves: this.#gen };
      const ok = ctl[LAYOUT] === this.#layout || this.#remap();
      const moves = ctl[GEN] as number;
      unlock(ctl, GET_LOCK);
      return { dataBytes: ok ? this.#data.byteLength : -1, moves };
    } finally {
      leaveQueueOperation();
    }
  }

  /** Whether `buffers` (from another thread, maybe hostile) have the shape of a queue's memory. */
  static isShaped(buffers: unknown): buffers is QueueBuffers {
    if (typeof buffers !== 'object' || buffers === null) return false;
    const { control, data, gen } = buffers as Record<string, unknown>;
    if (!(control instanceof SharedArrayBuffer) || control.byteLength !== CTL_WORDS * Int32Array.BYTES_PER_ELEMENT || !isDataBuffer(data) || typeof gen !== 'number' || (gen | 0) !== gen) {
      return false;
    }
    const ctl = new Int32Array(control);
    const capacity = Atomics.load(ctl, CAPACITY);
    // A ring whose length is no power of two was not made here; nor one longer than its buffer
    // (when the buffer is the ring's: one that moved on is another).
    const limit = ctl[BYTE_LIMIT] as number;
    return (
      capacity >= FIRST_CAPACITY &&
      (capacity & (capacity - 1)) === 0 &&
      (capacity <= data.byteLength || gen !== Atomics.load(ctl, GEN)) &&
      capacity <= limit &&
      isByteLimit(limit) &&
      (ctl[MAXSIZE] as number) >= 0
    );
  }

  /** The identity of the queue whose memory `buffers` are: the same string in every thread. */
  static idOf(buffers: QueueBuffers): string {
    const ctl = new Int32Array(buffers.control);
    return `${ctl[ID_THREAD] as number}.${ctl[ID_SERIAL] as number}.${ctl[ID_COPY] as number}`;
  }

  get id(): string {
    return QueueMemory.idOf({ control: this.#control, data: this.#data, gen: this.#gen });
  }

  /** Where the queue was made: `<thread>.<number>`, for default names. */
  get birth(): string {
    return `${this.ctl[ID_THREAD] as number}.${this.ctl[ID_SERIAL] as number}`;
  }

  get maxsize(): number {
    return this.#maxsize;
  }

  /** The most bytes the queue's records take (MAX_BYTES, but in tests). */
  get byteLimit(): number {
    return this.#byteLimit;
  }

  /** The bytes the records in the ring take now (read without a lock: 0 while the ring is laid out again). */
  bytesUsed(): number {
    const head = Atomics.load(this.ctl, HEAD);
    const used = (Atomics.load(this.ctl, TAIL) - head) | 0;
    return used < 0 || used > this.#byteLimit ? 0 : used;
  }

  /** Items in the queue now (read without a lock; never below 0, see putsCounted). */
  qsize(): number {
    const gets = Atomics.load(this.ctl, GETS);
    const count = (Atomics.load(this.ctl, PUTS) - gets) | 0;
    if (count < 0) return 0;
    return this.#maxsize > 0 && count > this.#maxsize ? this.#maxsize : count;
  }

  unfinished(): number {
    const dones = Atomics.load(this.ctl, DONES);
    return (putsCounted(this.ctl) - dones) | 0;
  }

  isShutdown(): boolean {
    return Atomics.load(this.ctl, SHUTDOWN) !== 0;
  }

  isBroken(): boolean {
    return Atomics.load(this.ctl, BROKEN) !== 0;
  }

  /** `maxsize` items wait, or their records fill the byte limit (not even an empty record fits). */
  full(): boolean {
    return (this.#maxsize > 0 && this.qsize() >= this.#maxsize) || this.bytesUsed() + HEADER > this.#byteLimit;
  }

  /**
   * Append a record of `kind` holding `num` (K_NUMBER) or the bytes of `payload` (a plain
   * Uint8Array): OK, SHUT, FULL, NO_ROOM, TOO_BIG, or BUSY (the ring must grow and a consumer
   * holds GET_LOCK: try again). On OK getters are woken.
   */
  tryPut(kind: number, num: number, payload: Uint8Array | null): number {
    enterQueueOperation();
    try {
      return this.#put(kind, num, payload);
    } finally {
      leaveQueueOperation();
    }
  }

  #put(kind: number, num: number, payload: Uint8Array | null): number {
    const ctl = this.ctl;
    if (Atomics.load(ctl, BROKEN) !== 0) return BROKEN_QUEUE;
    const length = kind === K_NUMBER ? 8 : payload === null ? 0 : payload.length;
    const size = HEADER + ((length + 7) & ~7);
    if (!lock(ctl, PUT_LOCK)) return BROKEN_QUEUE;
    if (ctl[LAYOUT] !== this.#layout && !this.#remap()) {
      unlock(ctl, PUT_LOCK);
      return STALE;
    }
    let status = OK;
    let capacity = this.#capacity;
    let tail = ctl[TAIL] as number;
    const puts = ctl[PUTS] as number;
    if (ctl[SHUTDOWN] !== 0) {
      status = SHUT;
    } else if (this.#maxsize > 0 && ((puts - this.#gets) | 0) >= this.#maxsize && ((puts - (this.#gets = Atomics.load(ctl, GETS))) | 0) >= this.#maxsize) {
      status = FULL;
    } else if (((tail - this.#head) | 0) + size > capacity && ((tail - (this.#head = Atomics.load(ctl, HEAD))) | 0) + size > capacity) {
      const taken = (tail - this.#head) | 0;
      if (size > this.#byteLimit) {
        status = TOO_BIG;
        this.needed = size;
      } else if (taken + size > this.#byteLimit) {
        status = NO_ROOM;
        this.needed = size;
        this.used = taken;
        this.failure = null;
      } else if (Atomics.compareExchange(ctl, GET_LOCK, 0, 1) !== 0) {
        // The ring must grow, which moves the consumers' records: take their lock too, if free.
        status = BUSY;
      } else {
        const head = ctl[HEAD] as number;
        const used = (tail - head) | 0;
        let wanted = capacity * 2;
        if (wanted < (used + size) * 2) wanted = 2 ** Math.ceil(Math.log2((used + size) * 2));
        if (wanted > this.#byteLimit) wanted = this.#byteLimit;
        if (used + size > wanted) {
          status = NO_ROOM;
          this.needed = size;
          this.used = used;
          this.failure = null;
        } else {
          try {
            this.#data.grow(wanted);
          } catch (error) {
            status = NO_ROOM;
            this.failure = error;
          }
        }
        if (status === OK) {
          // Lay the records out again from offset 0 of the larger ring: a wrapped run's second
          // part first goes after the first part (the ring at least doubled, so there is room).
          const bytes = new Uint8Array(this.#data, 0, wanted);
          const from = head & (capacity - 1);
          const to = tail & (capacity - 1);
          if (used > 0 && to <= from) bytes.copyWithin(capacity, 0, to);
          bytes.copyWithin(0, from, from + used);
          capacity = wanted;
          this.#layout = ((ctl[LAYOUT] as number) + 1) | 0;
          this.#capacity = wanted;
          this.#bytes = bytes;
          this.#words = new Int32Array(this.#data, 0, wanted >> 2);
          this.#floats = new Float64Array(this.#data, 0, wanted >> 3);
          tail = used;
          this.#head = 0;
          this.#gets = ctl[GETS] as number;
          this.#tail = used;
          ctl[HEAD] = 0;
          Atomics.store(ctl, TAIL, used);
          Atomics.store(ctl, CAPACITY, wanted);
          Atomics.store(ctl, LAYOUT, this.#layout);
        }
        unlock(ctl, GET_LOCK);
      }
    }
    if (status === OK) {
      const at = tail & (capacity - 1);
      this.#words[at >> 2] = kind;
      this.#words[(at >> 2) + 1] = length;
      if (kind === K_NUMBER) {
        this.#floats[(at >> 3) + 1] = num;
      } else if (length > 0 && payload !== null) {
        const start = (at + HEADER) & (capacity - 1);
        const first = capacity - start;
        if (first >= length) {
          this.#bytes.set(payload, start);
        } else {
          this.#bytes.set(new Uint8Array(payload.buffer, payload.byteOffset, first), start);
          this.#bytes.set(new Uint8Array(payload.buffer, payload.byteOffset + first, length - first), 0);
        }
      }
      // The record's bytes are written before TAIL passes it: a consumer reads TAIL first.
      Atomics.store(ctl, TAIL, tail + size);
      Atomics.store(ctl, PUTS, puts + 1);
    }
    unlock(ctl, PUT_LOCK);
    if (status === OK) wake(ctl, PUTS, WAITING);
    return status;
  }

  /**
   * Remove the first record, its bytes copied into `into`: OK (then `kind`, `num` and `length`
   * say what it was), EMPTY, SHUT (shut down and empty), or TOO_SMALL (nothing taken).
   */
  tryGet(into: Uint8Array): number {
    enterQueueOperation();
    try {
      return this.#get(into);
    } finally {
      leaveQueueOperation();
    }
  }

  #get(into: Uint8Array): number {
    const ctl = this.ctl;
    if (Atomics.load(ctl, BROKEN) !== 0) return BROKEN_QUEUE;
    if (!lock(ctl, GET_LOCK)) return BROKEN_QUEUE;
    if (ctl[LAYOUT] !== this.#layout && !this.#remap()) {
      unlock(ctl, GET_LOCK);
      return STALE;
    }
    let status = OK;
    const capacity = this.#capacity;
    const head = ctl[HEAD] as number;
    if (((this.#tail - head) | 0) <= 0 && (((this.#tail = Atomics.load(ctl, TAIL)) - head) | 0) <= 0) {
      status = ctl[SHUTDOWN] !== 0 ? SHUT : EMPTY;
    } else {
      const at = head & (capacity - 1);
      const kind = this.#words[at >> 2] as number;
      const length = this.#words[(at >> 2) + 1] as number;
      if (length > into.length) {
        status = TOO_SMALL;
        this.needed = length;
      } else {
        if (kind === K_NUMBER) {
          this.num = this.#floats[(at >> 3) + 1] as number;
        } else if (length > 0) {
          const start = (at + HEADER) & (capacity - 1);
          const first = capacity - start;
          if (first >= length) {
            into.set(new Uint8Array(this.#data, start, length));
          } else {
            into.set(new Uint8Array(this.#data, start, first));
            into.set(new Uint8Array(this.#data, 0, length - first), first);
          }
        }
        this.kind = kind;
        this.length = length;
        const next = head + HEADER + ((length + 7) & ~7);
        Atomics.store(ctl, HEAD, next);
        Atomics.store(ctl, GETS, (ctl[GETS] as number) + 1);
        // A large ring left (nearly) empty moves to a small buffer, when the producers' lock is free.
        if (capacity >= SHRINK_FROM && ((this.#tail - next) | 0) <= SHRINK_USED && Atomics.load(ctl, TRAVELLING) === 0 && Atomics.compareExchange(ctl, PUT_LOCK, 0, 1) === 0) {
          this.#shrink();
          unlock(ctl, PUT_LOCK);
        }
      }
    }
    unlock(ctl, GET_LOCK);
    if (status === OK) wake(ctl, GETS, WAITING + 1);
    return status;
  }

  /**
   * Holding both locks: move the ring to a new buffer of FIRST_CAPACITY bytes, the records left
   * copied to its start, and offer the buffer to the other threads before GEN says so (see
   * "Shrinking"). Nothing changes when the records left are too many, a handle travels, or no
   * buffer can be made or offered.
   */
  #shrink(): void {
    const ctl = this.ctl;
    const head = ctl[HEAD] as number;
    const used = ((ctl[TAIL] as number) - head) | 0;
    if (used > SHRINK_USED || used < 0 || ctl[TRAVELLING] !== 0 || ctl[PINNED] !== 0) return;
    let data: GrowableBuffer;
    try {
      data = newDataBuffer();
    } catch {
      return;
    }
    const capacity = this.#capacity;
    const bytes = new Uint8Array(data, 0, FIRST_CAPACITY);
    const from = head & (capacity - 1);
    const first = Math.min(used, capacity - from);
    bytes.set(this.#bytes.subarray(from, from + first), 0);
    if (used > first) bytes.set(this.#bytes.subarray(0, used - first), first);
    const gen = ((ctl[GEN] as number) + 1) | 0;
    if (!publish({ id: this.id, gen, data })) return;
    this.offer({ gen, data });
    this.#layout = ((ctl[LAYOUT] as number) + 1) | 0;
    this.#capacity = FIRST_CAPACITY;
    this.#bytes = bytes;
    this.#words = new Int32Array(data, 0, FIRST_CAPACITY >> 2);
    this.#floats = new Float64Array(data, 0, FIRST_CAPACITY >> 3);
    this.#head = 0;
    this.#gets = ctl[GETS] as number;
    this.#tail = used;
    ctl[HEAD] = 0;
    Atomics.store(ctl, TAIL, used);
    Atomics.store(ctl, CAPACITY, FIRST_CAPACITY);
    Atomics.store(ctl, GEN, gen);
    Atomics.store(ctl, LAYOUT, this.#layout);
  }

  /** Mark one item done: OK, TOO_MANY when none is unfinished, or BROKEN_QUEUE. Joiners wake when none is left. */
  taskDone(): number {
    enterQueueOperation();
    try {
      return this.#taskDone();
    } finally {
      leaveQueueOperation();
    }
  }

  #taskDone(): number {
    const ctl = this.ctl;
    if (Atomics.load(ctl, BROKEN) !== 0) return BROKEN_QUEUE;
    if (!lock(ctl, GET_LOCK)) return BROKEN_QUEUE;
    const dones = ctl[DONES] as number;
    const unfinished = (putsCounted(ctl) - dones) | 0;
    if (unfinished > 0) Atomics.store(ctl, DONES, dones + 1);
    unlock(ctl, GET_LOCK);
    if (unfinished === 1) wake(ctl, DONES, WAITING + 2);
    return unfinished > 0 ? OK : TOO_MANY;
  }

  /**
   * Shut the queue down (asyncio 3.13): with `immediate`, drop the records left, each counting
   * as done. PUTS, GETS and DONES each move on by one more (their differences stay), so that
   * every waiter of every kind wakes to look again; BUSY when GET_LOCK was held (nothing changed).
   */
  tryShutdown(immediate: boolean): number {
    enterQueueOperation();
    try {
      return this.#shutdown(immediate);
    } finally {
      leaveQueueOperation();
    }
  }

  #shutdown(immediate: boolean): number {
    const ctl = this.ctl;
    if (Atomics.load(ctl, BROKEN) !== 0) return BROKEN_QUEUE;
    if (!lock(ctl, PUT_LOCK)) return BROKEN_QUEUE;
    let status = BUSY;
    if (Atomics.compareExchange(ctl, GET_LOCK, 0, 1) === 0) {
      status = OK;
      Atomics.store(ctl, SHUTDOWN, 1);
      const puts = ctl[PUTS] as number;
      const gets = ctl[GETS] as number;
      const dones = ctl[DONES] as number;
      if (immediate) {
        const count = (puts - gets) | 0;
        const unfinished = (puts - dones) | 0;
        Atomics.store(ctl, HEAD, ctl[TAIL] as number);
        Atomics.store(ctl, GETS, puts + 1);
        Atomics.store(ctl, DONES, (unfinished > count ? dones + count : puts) + 1);
      } else {
        Atomics.store(ctl, GETS, gets + 1);
        Atomics.store(ctl, DONES, dones + 1);
      }
      Atomics.store(ctl, PUTS, puts + 1);
      unlock(ctl, GET_LOCK);
    }
    unlock(ctl, PUT_LOCK);
    if (status === OK) {
      wake(ctl, PUTS, WAITING);
      wake(ctl, GETS, WAITING + 1);
      wake(ctl, DONES, WAITING + 2);
    }
    return status;
  }

  /**
   * After BUSY, holding no lock: wait until GET_LOCK may be free. `waits`: how many waits came
   * before in this series (0 at first); returns the count for the next one (the next try returns
   * BROKEN_QUEUE when the lock's holder was found gone).
   */
  waitForGetLock(waits: number): number {
    if (waits === 0) this.#getLockWait.reset();
    this.#getLockWait.wait(this.ctl, GET_LOCK);
    return waits + 1;
  }
}
