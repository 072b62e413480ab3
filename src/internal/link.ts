/**
 * One side of a link between two loops in different threads.
 *
 * Each side listens on its own inbox port (the read end of its loop's self-pipe) and posts to
 * the other side's. Operations queued during a loop iteration travel as one batch when the
 * iteration's callbacks have run (or at the next microtask, outside iterations); a batch's
 * arrival wakes the receiving loop, which dispatches the whole batch at the start of its next
 * iteration. Calls chain futures as asyncio's `_chain_future` does: the result or error comes
 * back to the caller's loop; cancelling the caller's Future cancels the remote Task; a remote
 * cancellation arrives as a cancelled Future.
 *
 * Nothing sent is lost when the other thread cannot read it (a value nested deeper than its
 * stack allows, say): each side numbers the messages it posts and keeps those that hold objects
 * (numbers and strings are always read) until the other side says, through a shared counter,
 * that it read them. A message that could not be read is
 * named back (UNREADABLE); its sender posts its records again one by one (REPLAY, REPLAY_END),
 * and the receiver holds everything that arrived after it until then, so order and the table of
 * function names stay whole. A record that still cannot be read fails alone: its call's Future
 * fails with the reason, or a result that cannot be read becomes an error.
 */
import { _currentVars, type Context, type VarMap } from '../contextvars.js';
import {
  callSpans,
  carriedContext,
  contextFor,
  currentStores,
  endWhenDone,
  isCarriedContext,
  runInCarriedStores,
  sameStores,
  travelling,
  type CallSpan,
  type CarriedContext,
} from './travel.js';
import { isMainThread, receiveMessageOnPort, type MessagePort, type Transferable } from 'node:worker_threads';
import { ConcurrentFuture } from './concurrent-future.js';
import type { CallsInFlight, EventLoop, Flushable, InboxReceiver, Pollable } from '../base-events.js';
import { _isThenable, isCoroutine, type Coroutine } from '../coroutines.js';
import { RuntimeError } from '../exceptions.js';
import { CANCELLED, FAILED, Future } from '../futures.js';
import { ensureFuture } from '../task.js';
import { collectTransfers, move } from '../transfer.js';
import { decodeError, encodeError, type EncodedError } from './errors.js';
import { typeName } from './format.js';
import { quoteName } from './module-ref.js';
import { CALLBACK_HINT, findUncloneable } from './uncloneable.js';
import { fromWire, toWire } from './wire.js';
import { currentThreadName, idOf, threadOfId } from './introspect.js';
import { setRemoteAwaiters, type RemoteRef } from './awaited-by.js';
import { _Callbacks, _isComlinkProxy, _takeReceivedCallbacks } from '../comlink.js';
import {
  ARGS_ARRAY,
  ARGS_NONE,
  ARGS_ONE,
  CLOSING,
  OP_BELL,
  OP_CALL,
  OP_CANCEL,
  OP_CANCELLED,
  OP_DIED,
  OP_ERROR,
  OP_MASK,
  OP_NAME,
  OP_NOTIFY,
  OP_ORIGIN,
  OP_CONTEXT,
  OP_LINK,
  OP_REPLAY,
  OP_REPLAY_END,
  OP_RESULT,
  OP_SIZE,
  OP_UNREADABLE,
  isLinkPorts,
  type LinkPorts,
} from './messages.js';

/** The functions a side offers to its peer. */
export interface CallTarget {
  /** The function exported as `name`; throws a TypeError naming the problem otherwise. */
  lookup(name: string): (...args: unknown[]) => unknown;
}

/** How a side learns of its peer's death, beyond the port closing. */
export interface LinkOptions {
  /**
   * The peer is a LoopThread whose worker events ('error', 'exit') report its death with the
   * cause, so the port closing (which may come first) says nothing.
   */
  ownedByThread?: boolean;
  /** The error calls fail with when the peer's thread ended by itself: its exit code and uncaught error (or null). */
  describeDeath?: (code: number, uncaught: unknown) => Error;
  /** Told when the link learned of the peer's death itself (from the dying thread's last message). */
  onDeath?: (makeError: () => Error) => void;
  /** The error calls fail with when the peer's end of the link closed without a word (default: "<peer> is gone"). */
  describeGone?: () => Error;
  /**
   * How many operations (calls, callSoonThreadsafe, replies) this side may have posted that the
   * peer has not taken in yet; beyond it, the thread waits for the peer (see #makeRoom).
   */
  maxCallsInFlight?: number;
}

/**
 * The default bound of operations in flight on a link: 65,536, a few MiB of messages. A flood
 * that never yields then goes at its peer's pace in a bounded memory, and faster than unbounded
 * (the batches in flight stay in cache; README, "Back-pressure", has the figures).
 */
export const DEFAULT_MAX_CALLS_IN_FLIGHT = 1 << 16;

/**
 * Check a `maxCallsInFlight` option: a whole number from 1 to 2^30; a RangeError or TypeError
 * naming the option otherwise.
 */
export function checkMaxCallsInFlight(value: unknown, where: string): number {
  if (value === undefined) return DEFAULT_MAX_CALLS_IN_FLIGHT;
  if (typeof value !== 'number') throw new TypeError(`${where}: maxCallsInFlight must be a number, got ${typeName(value)}`);
  if (!Number.isInteger(value) || value < 1 || value > 2 ** 30) {
    throw new RangeError(`${where}: maxCallsInFlight must be a whole number from 1 to 2^30, got ${value}`);
  }
  return value;
}

/** How long a sender waits for a peer that takes nothing before it stops waiting for it (ms). */
let stallMs = 5000;
/** How often a waiting sender looks at its own inbox and at its peer's death (ms). */
const WAIT_SLICE_MS = 20;

/** @internal Tests: set how long a sender waits on a peer that takes nothing; returns the previous value. */
export function _setStallMs(ms: number): number {
  const before = stallMs;
  stallMs = ms;
  return before;
}

/** A Future for a call made through a link: cancelling it cancels the call on the other side. */
class RemoteCallFuture<T> extends Future<T> {
  _link: Link | null = null;
  _id = 0;
  /** It failed because the peer died before it started the call (its function never ran there). */
  _notStarted = false;
  /** The function called there, for ps() and reprs. */
  _callName = '';
  /** Told once the call has ended in the peer's thread (see `onCallEnded`). */
  _ended: (() => void) | null = null;

  override cancel(msg?: string): boolean {
    const cancelled = super.cancel(msg);
    if (cancelled && this._link !== null) this._link._cancelRemote(this._id, msg ?? null);
    return cancelled;
  }
}

/**
 * Whether `future`, a Future of a call made through a link, failed because the peer's thread died
 * before it started the call: its function never ran, so it may be sent elsewhere once.
 */
export function notStarted(future: unknown): boolean {
  return future instanceof RemoteCallFuture && future._notStarted;
}

/**
 * Call `ended` once the call that `future` (a Future or ConcurrentFuture a link's `call` or
 * `submit` returned) follows has ended in the peer's thread: its reply arrived, or the link
 * died. A cancelled call ends there when its task has ended, which the peer's reply to the
 * cancellation says; until then the call still occupies the peer. Any other future: once done.
 */
export function onCallEnded(future: Future<unknown> | ConcurrentFuture<unknown>, ended: () => void): void {
  // Pending in a link: a RemoteCallFuture it made, or a ConcurrentFuture its submit made (only that sets a blocker).
  if (future instanceof RemoteCallFuture) {
    if (future._link !== null && !future.done()) {
      future._ended = ended;
      return;
    }
  } else if (future instanceof ConcurrentFuture && future._blocker !== null && !future.done()) {
    future._ended = ended;
    return;
  }
  (future as Future<unknown>).addDoneCallback(ended);
}

/** What a Future of a call to another thread stands for ("call 'f' in LoopThread 'svc'"), or null for any other future. */
export function describeCall(future: unknown): string | null {
  if (!(future instanceof RemoteCallFuture)) return null;
  const link = future._link;
  return `call ${quoteName(future._callName)}${link === null ? '' : ` in ${link._peerName()}`}`;
}

interface RunningCall {
  future: Future<unknown>;
  name: string;
  /** The task that made the call in the peer's thread, when it was made in one. */
  origin: RemoteRef | null;
}

/** A call between threads as a snapshot sees it, from one side of its link. */
export interface CallInFlight {
  /** The id of the calls of the link's calling side (LinkPorts.id) and the call's id: together they name the call in the process. */
  readonly linkId: number;
  readonly callId: number;
  /** The function called. */
  readonly name: string;
  /** The peer, as messages name it ("LoopThread 'svc'"). */
  readonly peer: string;
  /** Caller side: the Future of the call (or ConcurrentFuture of a submit). Callee side: the Task or Future running it. */
  readonly future: Future<unknown> | ConcurrentFuture<unknown>;
  /** Callee side: the task that made the call, in the caller's thread. */
  readonly origin: RemoteRef | null;
}

/** A message posted and kept until the other side read it. */
interface Sent {
  readonly records: unknown[];
  /** The moved buffers of its records, by the record's offset. */
  readonly transfers: Map<number, Transferable[]> | null;
  /** Whether its first record is a REPLAY header (the records to send again come after it). */
  readonly replay: boolean;
}

/** A message that arrived while an earlier one could not be read, kept to be taken in order. */
interface Held {
  readonly seq: number;
  /** Its records; null for an unreadable message until its records arrived again. */
  records: unknown[] | null;
  /** The records of an unreadable message sent again so far. */
  replayed: unknown[];
}

const NO_TRANSFERS: Transferable[] = [];
const NO_ARGS: unknown[] = [];
/** A batch is posted once it holds this many operations, so a long burst travels pipelined. */
const MAX_BATCH_OPS = 2048;
const found: Transferable[] = [];

/** Where the side is: running, or dead with the error every call now fails with. */
type Death = (() => Error) | null;

/** The live links of this thread: told when the thread ends, so that no peer waits in vain. */
const liveLinks = new Set<Link>();
/** Every open link of this thread, for snapshots (liveLinks leaves the main thread's out). */
const openLinks = new Set<Link>();

/** Calls between threads in flight through this thread's links: made here (`out`) and served here (`in`). */
export function callsInFlight(): { out: CallInFlight[]; in: CallInFlight[] } {
  const out: CallInFlight[] = [];
  const served: CallInFlight[] = [];
  for (const link of openLinks) link._snapshot(out, served);
  return { out, in: served };
}

// Call graphs ask who, in another thread, awaits a task serving a call here.
setRemoteAwaiters((future) => {
  const refs: RemoteRef[] = [];
  for (const link of openLinks) link._originsOf(future, refs);
  return refs;
});
let exitHookInstalled = false;
/** The error that is ending this thread, seen before the 'exit' event. */
let uncaughtError: unknown = null;

function watchExit(link: Link): void {
  // The main thread's exit ends every thread: nobody is left to tell.
  if (isMainThread) return;
  liveLinks.add(link);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('uncaughtExceptionMonitor', (error) => {
    uncaughtError = error;
    // The thread ends in the same turn unless an 'uncaughtException' handler kept it alive.
    setImmediate(() => {
      if (uncaughtError === error) uncaughtError = null;
    }).unref();
  });
  process.on('exit', (code) => {
    for (const live of liveLinks) live._tellDeath(code, uncaughtError);
  });
}

/** @internal One side of a link between two loops in different threads. */
export class Link implements InboxReceiver, Flushable, CallsInFlight, Pollable {
  /** The loop that dispatches what arrives and owns the Futures of calls made here. */
  readonly loop: EventLoop;
  readonly #in: MessagePort;
  readonly #out: MessagePort;
  /** The ids of the calls this side makes and of those the peer makes (see LinkPorts). */
  readonly #id: number;
  readonly #peerId: number;
  /** The task whose calls the last ORIGIN sent named (undefined: none sent yet). */
  #lastOrigin: object | null | undefined = undefined;
  /** The caller the last ORIGIN received named. */
  #origin: RemoteRef | null = null;
  /** The context variables the last CONTEXT sent was made from (undefined: none sent yet). */
  #lastVars: VarMap | undefined = undefined;
  /** The stores of registered AsyncLocalStorages the last CONTEXT sent was made from. */
  #lastStores: unknown[] | null = null;
  /** The values of context variables the calls that arrive now carry (the last CONTEXT received). */
  #carried: CarriedContext | null = null;
  readonly #target: CallTarget;
  /** How messages name the other side, e.g. "LoopThread 'worker-1'". */
  readonly #peer: string;
  readonly #describeDeath: (code: number, uncaught: unknown) => Error;
  readonly #onDeath: ((makeError: () => Error) => void) | null;
  /** The batch being filled: `#count` slots of it are in use. */
  #outbox: unknown[] = newOutbox();
  #count = 0;
  #opTransfers: Map<number, Transferable[]> | null = null;
  /** Whether the outbox holds objects, which the peer may fail to read (primitives it always reads). */
  #mayBeUnreadable = false;
  #flushScheduled = false;
  #pending = new Map<number, RemoteCallFuture<unknown> | ConcurrentFuture<unknown>>();
  /** Calls cancelled here whose end there someone waits to hear of (`onCallEnded`), by id: the peer's reply says it. */
  #ending = new Map<number, () => void>();
  /** The peer's bell, rung after each batch posted to it (the peer may block waiting). */
  #peerBell: Int32Array | null = null;
  /** This side's bell, once it was sent to the peer. */
  #bell: Int32Array | null = null;
  /** The bell's count when this side last took messages by polling. */
  #rungSeen = 0;
  #running = new Map<number, RunningCall>();
  #nextId = 0;
  #death: Death = null;
  /** The ids of the function names sent so far, and the names by id. */
  #sentNames = new Map<string, number>();
  #sentList: string[] = [];
  /** The names received so far by id, and the functions found for them (module namespaces are slow to look up). */
  #names: string[] = [];
  #functions: Array<((...args: unknown[]) => unknown) | undefined> = [];

  /** How many messages this side posted; each is kept, by number, until the peer read it. */
  #posted = 0;
  #kept = new Map<number, Sent>();
  #oldestKept = 1;
  /** Slot 0: how many of this side's messages the peer read, with none missing before them. */
  readonly #peerRead: Int32Array;
  /** How many messages arrived here, read or not; slot 0 of `#read` says how many were taken in order. */
  #arrived = 0;
  readonly #read: Int32Array;
  /** Messages that arrived since the first one that could not be read, in order; empty when none is missing. */
  #held: Held[] = [];
  #missing = 0;
  /** Whether the inbox port closed: reading a closed port crashes Node 20. */
  #inClosed = false;
  /** Operations posted (replays aside), modulo 2^32: with the peer's slot 1 of `#peerRead`, those in flight. */
  #opsPosted = 0;
  readonly #maxOps: number;
  /** The peer's count of operations taken, as last read (it only grows). */
  #takenSeen = 0;
  /**
   * Operations that arrived and wait in the loop's inbox, not yet counted as taken: they are
   * counted when the loop's next iteration dispatches them (or when this thread is about to
   * block), so that the bound on the peer counts what this side has not begun to run, wherever
   * it waits (port or inbox), and a loop that takes its port between busy iterations and again
   * in libuv's turn does not let the peer post beyond it.
   */
  #unacked = 0;
  /** Whether this side waits for room (#makeRoom): what arrives meanwhile waits for the loop whole, replies too. */
  #holding = false;
  /** The peer's count of operations taken when it last took none for `stallMs` (-1: not stalled). */
  #stalledAt = -1;

  constructor(loop: EventLoop, ports: LinkPorts, target: CallTarget, peer: string, options: LinkOptions = {}) {
    this.loop = loop;
    this.#in = ports.inPort;
    this.#out = ports.outPort;
    this.#id = ports.id;
    this.#peerId = ports.peerId;
    openLinks.add(this);
    this.#read = ports.inRead;
    this.#peerRead = ports.outRead;
    this.#target = target;
    this.#peer = peer;
    this.#describeDeath = options.describeDeath ?? ((code, uncaught) => describeDeath(peer, code, uncaught));
    this.#onDeath = options.onDeath ?? null;
    this.#maxOps = options.maxCallsInFlight ?? DEFAULT_MAX_CALLS_IN_FLIGHT;
    this.#in.on('message', (message: unknown[]) => this.#arrive(message, false));
    this.#in.on('messageerror', (error: unknown) => this.#unreadable(error));
    const gone = options.describeGone ?? (() => new RuntimeError(`${this.#peer} is gone: its end of the link closed`));
    let closedAlready = false;
    if (options.ownedByThread !== true) {
      // After every message that came before it: nothing is left to take (and a closed port cannot be read).
      this.#in.on('close', () => {
        this.#inClosed = true;
        this._fail(gone, false);
      });
      // Its peer may have closed before anyone listened (a LoopRef's ports wait unused until its first call).
      closedAlready = !isOpen(this.#in);
    }
    // The running loop keeps the thread alive; an idle inbox must not.
    this.#in.unref();
    loop._addCloseHook(() => this.close());
    loop._addCallsInFlight(this);
    // The peer rings this bell after each batch, so that the loop can poll instead of sleeping.
    this.#ensureBell();
    loop._addPollable(this);
    watchExit(this);
    if (closedAlready) {
      this.#inClosed = true;
      this._fail(gone, false);
    }
  }

  /** Call `name(...args)` there; a Future of this side's loop follows the remote call. */
  call<T>(name: string, args: unknown[]): Future<T> {
    const future = new RemoteCallFuture<T>({ loop: this.loop });
    const death = this.#death;
    if (death !== null) {
      future._setExceptionUnchecked(death());
      return future;
    }
    let callbacks: _Callbacks | null;
    let span: CallSpan | null = null;
    try {
      if (travelling.size !== 0) span = this.#sendContextSpanned('call', name);
      callbacks = this.#encodeArgs('call', name, args);
    } catch (error) {
      span?.end(error);
      future._setExceptionUnchecked(error);
      return future;
    }
    if (span !== null) endWhenDone(span, future);
    callbacks?.releaseWhenDone(future as Future<unknown>);
    const id = ++this.#nextId;
    future._link = this;
    future._id = id;
    future._callName = name;
    this.#pending.set(id, future as RemoteCallFuture<unknown>);
    this.#sendOrigin();
    this.#pushCall(OP_CALL, id, name, args);
    return future;
  }

  /**
   * Call `name(...args)` there; a ConcurrentFuture follows the call, whose `result(timeout)`
   * can block this thread until the reply arrives (no loop needs to run meanwhile).
   */
  submit<T>(name: string, args: unknown[]): ConcurrentFuture<T> {
    const future = ConcurrentFuture._create<T>();
    const death = this.#death;
    if (death !== null) {
      settle(future as ConcurrentFuture<unknown>, OP_ERROR, death());
      return future;
    }
    let callbacks: _Callbacks | null;
    let span: CallSpan | null = null;
    try {
      if (travelling.size !== 0) span = this.#sendContextSpanned('call', name);
      callbacks = this.#encodeArgs('call', name, args);
    } catch (error) {
      span?.end(error);
      settle(future as ConcurrentFuture<unknown>, OP_ERROR, error);
      return future;
    }
    if (span !== null) endWhenDone(span, future);
    callbacks?.releaseWhenDone(future as ConcurrentFuture<unknown>);
    // The bell goes first: the peer must know it before the call runs (the call may end the thread).
    const bell = this.#ensureBell();
    const id = ++this.#nextId;
    this.#pending.set(id, future as ConcurrentFuture<unknown>);
    future._blocker = (timeout) => this.#block(future as ConcurrentFuture<unknown>, bell, timeout);
    future._describeTimeout = (timeout) =>
      `no answer from ${this.#peer} within ${timeout} seconds: the call may still run there, or the thread ended ` +
      'without running JavaScript (terminated, or out of memory)';
    future.addDoneCallback((done) => {
      if (done.cancelled()) this._cancelRemote(id, null);
    });
    this.#sendOrigin();
    this.#pushCall(OP_CALL, id, name, args);
    return future;
  }

  #ensureBell(): Int32Array {
    let bell = this.#bell;
    if (bell === null) {
      bell = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
      this.#bell = bell;
      this.#push(OP_BELL, 0, bell, 0);
    }
    return bell;
  }

  /** Block this thread until `future` is done or `timeout` seconds passed, taking messages from the inbox port directly. */
  #block(future: ConcurrentFuture<unknown>, bell: Int32Array, timeout: number | null): void {
    const deadline = timeout === null ? Infinity : performance.now() + Math.max(0, timeout) * 1000;
    for (;;) {
      if (this.#inClosed) return;
      // What was queued (the call, a note that a message could not be read) must leave before this thread waits.
      this._flush();
      const rung = Atomics.load(bell, 0);
      this.#takeInbox();
      if (future.done() || this.#death !== null) return;
      if (this.#count > 0) continue;
      const remaining = deadline - performance.now();
      if (remaining <= 0) return;
      Atomics.wait(bell, 0, rung, remaining === Infinity ? undefined : remaining);
    }
  }

  /** Count `ops` operations as taken by this side (the peer's back-pressure reads the count). */
  #ack(ops: number): void {
    const read = this.#read;
    Atomics.add(read, 1, ops);
    if (read[2] !== 0) Atomics.notify(read, 1);
  }

  /** Count as taken what waits in the loop's inbox (see #unacked). */
  #ackInbox(): void {
    const ops = this.#unacked;
    if (ops === 0) return;
    this.#unacked = 0;
    this.#ack(ops);
  }

  /** Take what the inbox holds now, without the loop: replies complete their Futures, calls wait for the loop. */
  #takeInbox(): void {
    // This thread blocks until the loop runs again: what waits in the loop's inbox counts as taken.
    this.#ackInbox();
    for (;;) {
      if (this.#inClosed) return;
      let message: { message: unknown } | undefined;
      try {
        message = receiveMessageOnPort(this.#in);
      } catch (error) {
        this.#unreadable(error);
        continue;
      }
      if (message === undefined) return;
      this.#arrive(message.message as unknown[], true);
    }
  }

  /**
   * Back-pressure: with `#maxOps` operations of this side in flight (posted, not yet taken in by
   * the peer), wait until the peer took a quarter of them. The thread waits, as a writer on a
   * full pipe does, for that is the only way to hold a sender that never yields; meanwhile it
   * takes its own inbox, so two threads flooding each other both move on. A peer that takes
   * nothing for `stallMs` (blocked, or ended without running JavaScript) no longer holds this
   * side until it takes again: its death is then learned as usual, when the loop turns.
   */
  #makeRoom(): void {
    // The peer's count is read only once the last one read says the bound is reached: reading it
    // at every message would pull its cache line from the peer's core each time (a round trip
    // cost 7% more).
    if (((this.#opsPosted - this.#takenSeen) | 0) < this.#maxOps) return;
    const read = this.#peerRead;
    let taken = (this.#takenSeen = Atomics.load(read, 1));
    if (((this.#opsPosted - taken) | 0) < this.#maxOps || taken === this.#stalledAt) return;
    this.#stalledAt = -1;
    const low = this.#maxOps - (this.#maxOps >> 2);
    let since = performance.now();
    this.#ring();
    this.#holding = true;
    try {
      for (;;) {
        Atomics.store(read, 2, 1);
        this.#takeInbox();
        if (this.#death !== null || this.#inClosed) return;
        const now = (this.#takenSeen = Atomics.load(read, 1));
        if (((this.#opsPosted - now) | 0) <= low) return;
        if (now !== taken) {
          taken = now;
          since = performance.now();
        } else if (performance.now() - since >= stallMs) {
          this.#stalledAt = taken;
          return;
        }
        Atomics.wait(read, 1, now, WAIT_SLICE_MS);
      }
    } finally {
      this.#holding = false;
      Atomics.store(read, 2, 0);
    }
  }

  /** @internal Take, without waiting for libuv, what the peer posted since the bell last rang (the loop is about to sleep). */
  _poll(): boolean {
    const bell = this.#bell as Int32Array;
    const rung = Atomics.load(bell, 0);
    if (rung === this.#rungSeen || this.#inClosed) return false;
    this.#rungSeen = rung;
    return this._drain();
  }

  /**
   * @internal Take what the port holds now, bell or not (a simulation's poll: the peer rings
   * only once it has this side's bell, which may not have been delivered yet).
   */
  _drain(): boolean {
    if (this.#inClosed) return false;
    let took = false;
    for (;;) {
      let message: { message: unknown } | undefined;
      try {
        message = receiveMessageOnPort(this.#in);
      } catch (error) {
        this.#unreadable(error);
        took = true;
        continue;
      }
      if (message === undefined) return took;
      this.#arrive(message.message as unknown[], false);
      took = true;
    }
  }

  /** @internal Who is at the other end, in words (a simulation names the batches it delivers by it). */
  get _peer(): string {
    return this.#peer;
  }

  /** Schedule `name(...args)` there, expecting no reply. */
  notify(name: string, args: unknown[]): void {
    const death = this.#death;
    if (death !== null) throw death();
    // No reply comes: a CLIENT span ends once the call is on its way.
    const span = travelling.size !== 0 ? this.#sendContextSpanned('callSoonThreadsafe', name) : null;
    try {
      // Callbacks of a callSoonThreadsafe are released by the far side once the call has run.
      this.#encodeArgs('callSoonThreadsafe', name, args);
    } catch (error) {
      span?.end(error);
      throw error;
    }
    span?.end(null);
    this.#pushCall(OP_NOTIFY, 0, name, args);
  }

  /**
   * Prepare the arguments of a call to cross (see wire.ts); a TypeError naming the call when one
   * cannot. `Comlink.proxy(fn)` arguments stay here, served to the call: their release is returned.
   */
  #encodeArgs(what: string, name: string, args: unknown[]): _Callbacks | null {
    let callbacks: _Callbacks | null = null;
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (typeof arg !== 'object' || arg === null) {
        // Other functions fail as values that cannot be cloned do, when the batch is posted.
        if (typeof arg === 'function' && _isComlinkProxy(arg)) args[i] = (callbacks ??= new _Callbacks(this.loop)).send(arg);
        continue;
      }
      try {
        args[i] = toWire(arg, `argument ${i + 1}`);
      } catch (error) {
        callbacks?.release();
        throw new TypeError(`cannot send ${what} ${quoteName(name)} to ${this.#peer}: ${(error as Error).message}`, { cause: error });
      }
    }
    return callbacks;
  }

  /** Send back the result of call `id`, or the error of a result that cannot cross. */
  #reply(id: number, nameId: number, value: unknown): void {
    let sent: unknown;
    try {
      sent = toWire(value, 'the result');
    } catch (error) {
      const failure = new TypeError(`cannot send the result of ${this.#nameHere(nameId)} to ${this.#peer}: ${(error as Error).message}`, { cause: error });
      this.#push(OP_ERROR, id, encodeError(failure), nameId);
      return;
    }
    this.#push(OP_RESULT, id, sent, nameId);
  }

  /** @internal Add the calls in flight through this link to a snapshot: made here (`out`), served here (`served`). */
  _snapshot(out: CallInFlight[], served: CallInFlight[]): void {
    const linkId = this.#id;
    const peerId = this.#peerId;
    const peer = this.#peer;
    for (const [callId, future] of this.#pending) {
      if (future.done()) continue;
      const name = future instanceof RemoteCallFuture ? future._callName : '';
      out.push({ linkId, callId, name, peer, future, origin: null });
    }
    for (const [callId, call] of this.#running) served.push({ linkId: peerId, callId, name: call.name, peer, future: call.future, origin: call.origin });
  }

  /** @internal How messages name the peer ("LoopThread 'svc'"). */
  _peerName(): string {
    return this.#peer;
  }

  /** @internal Add the callers (in the peer's thread) of the calls `future` serves here. */
  _originsOf(future: Future<unknown>, refs: RemoteRef[]): void {
    for (const call of this.#running.values()) if (call.future === future && call.origin !== null) refs.push(call.origin);
  }

  /** @internal How many calls made here await their reply. */
  _inFlight(): number {
    return this.#pending.size;
  }

  /** Whether the link is dead (its peer is gone or it was closed). */
  isDead(): boolean {
    return this.#death !== null;
  }

  /** @internal The error calls fail with now that the link is dead; null while it lives. */
  _deathError(): Error | null {
    return this.#death === null ? null : this.#death();
  }

  /**
   * @internal Have the peer serve `ports` as a new link of its loop, offering what it offers this
   * side (a LoopRef passed on); they are moved with the message.
   */
  _introduce(ports: LinkPorts): void {
    move(ports.inPort);
    move(ports.outPort);
    this.#push(OP_LINK, 0, 0, ports);
  }

  /** @internal The caller's Future of call `id` was cancelled: cancel the remote side too. */
  _cancelRemote(id: number, message: string | null): void {
    const future = this.#pending.get(id);
    if (future === undefined) return;
    this.#pending.delete(id);
    if (this.#death !== null) return;
    this.#push(OP_CANCEL, id, message, 0);
    // The task there runs until it takes the cancellation and ends: its reply (result, error or cancelled) says when.
    const ended = future._ended;
    if (ended !== null) {
      future._ended = null;
      this.#ending.set(id, ended);
    }
  }

  /**
   * The peer is gone (or, `peerGone` false, this side closes): fail every pending call with
   * `makeError()` and refuse new ones; calls the peer made here are cancelled, since their
   * results have nowhere to go. What the peer sent before it went is taken first: its replies
   * settle their calls, its callSoonThreadsafe calls still run (not its calls: their caller is gone).
   */
  _fail(makeError: () => Error, peerGone = true): void {
    if (this.#death !== null) return;
    if (peerGone && !this.#inClosed) {
      this.#takeWhatIsLeft();
      // What was left may have been the peer's own word of its death, which failed the link already.
      if (this.#death !== null) return;
    }
    this.#death = makeError;
    liveLinks.delete(this);
    openLinks.delete(this);
    this.loop._removeCallsInFlight(this);
    this.loop._removePollable(this);
    // The peer starts calls in the order they were made: those after the last one it started never ran.
    const started = peerGone ? Atomics.load(this.#peerRead, 3) : null;
    const pending: Array<RemoteCallFuture<unknown> | ConcurrentFuture<unknown>> = [];
    for (const [id, future] of this.#pending) {
      if (started !== null && future instanceof RemoteCallFuture && ((id - started) | 0) > 0) future._notStarted = true;
      pending.push(future);
    }
    this.#pending.clear();
    // Whatever ran there is over, or will never be heard of: every call counts as ended.
    const ending = [...this.#ending.values()];
    this.#ending.clear();
    for (const future of pending) {
      const ended = future._ended;
      if (ended === null) continue;
      future._ended = null;
      ending.push(ended);
    }
    for (const ended of ending) ended();
    const running = [...this.#running.values()];
    this.#running.clear();
    this.#kept.clear();
    this.#held = [];
    const loopOpen = !this.loop.isClosed();
    for (const future of pending) {
      // A ConcurrentFuture has no loop to wait for: whoever blocks on it learns at once.
      if (loopOpen || future instanceof ConcurrentFuture) settle(future.done() ? null : future, OP_ERROR, makeError());
    }
    if (loopOpen) for (const { future } of running) future.cancel();
  }

  /** @internal Cancel the Futures of calls still in flight, and the calls there (the loop is closing). */
  _hasCallsPending(): boolean {
    return this.#pending.size > 0;
  }

  _cancelCallsInFlight(message: string): number {
    let cancelled = 0;
    for (const future of [...this.#pending.values()]) {
      if (future instanceof RemoteCallFuture && future.cancel(message)) cancelled++;
    }
    return cancelled;
  }

  /**
   * The peer is gone: take the messages still in the inbox, in order (the worker's events may
   * come before them), and those held behind a message that will never be sent again.
   */
  #takeWhatIsLeft(): void {
    for (;;) {
      let message: { message: unknown } | undefined;
      try {
        message = receiveMessageOnPort(this.#in);
      } catch {
        // Never sent again: the calls it carried fail with the peer's death.
        this.#held.push({ seq: ++this.#arrived, records: [], replayed: NO_ARGS });
        this.#missing++;
        continue;
      }
      if (message === undefined) break;
      this.#arrive(message.message as unknown[], true);
    }
    for (const held of this.#held.splice(0)) {
      const records = held.records ?? held.replayed;
      if (records.length > 0) this.#accept(records, true);
    }
    this.#missing = 0;
  }

  /** Close both ports, as the loop closes: calls in flight are cancelled, those of ConcurrentFutures fail. */
  close(): void {
    if (this.#death === null) this._cancelCallsInFlight(CLOSING);
    // The cancellations must leave before the ports close.
    this._flush();
    this._fail(() => new RuntimeError(`the link to ${this.#peer} was closed`), false);
    this.#inClosed = true;
    this.#in.close();
    this.#out.close();
  }

  /**
   * @internal This thread is ending (the 'exit' event): send what is queued, then the reason,
   * so that the peer fails its calls with the cause, also while it blocks on one.
   */
  _tellDeath(code: number, uncaught: unknown): void {
    if (this.#death !== null) return;
    this._flush();
    this.#postOne([OP_DIED, code, uncaught === null ? null : encodeError(uncaught), 0]);
    this.#ring();
  }

  // ───────────────────────────── sending ─────────────────────────────

  /**
   * Send the values of registered context variables the calls that follow carry, when the
   * caller's context is not the one they were last taken from; a TypeError naming the call and
   * the variable when one cannot cross (nothing is sent then).
   */
  #sendContext(what: string, name: string): void {
    const vars = _currentVars();
    const stores = currentStores();
    if (vars === this.#lastVars && sameStores(stores, this.#lastStores)) return;
    let carried: CarriedContext | null;
    try {
      carried = carriedContext(vars);
    } catch (error) {
      throw new TypeError(`cannot send ${what} ${quoteName(name)} to ${this.#peer}: ${(error as Error).message}`, { cause: error });
    }
    // The first time, or back to nothing after values: the peer must hear it; nothing to nothing it need not.
    if (carried !== null || this.#lastVars !== undefined) this.#push(OP_CONTEXT, 0, carried, 0);
    this.#lastVars = vars;
    this.#lastStores = stores;
  }

  /**
   * `#sendContext` for the call `name`, inside a CLIENT span of it when calls are spanned
   * (multiloop/otel): the span is returned, for the caller to end when the call is done.
   */
  #sendContextSpanned(what: string, name: string): CallSpan | null {
    const spans = callSpans;
    if (spans === null) {
      this.#sendContext(what, name);
      return null;
    }
    const span = spans.client(name);
    try {
      span.run(() => this.#sendContext(what, name));
    } catch (error) {
      span.end(error);
      throw error;
    }
    return span;
  }

  /** Name the task making the calls that follow, when it is not the one named last. */
  #sendOrigin(): void {
    const task = this.loop._runningTask();
    if (task === this.#lastOrigin) return;
    this.#lastOrigin = task;
    if (task === null) this.#push(OP_ORIGIN, 0, null, null);
    else this.#push(OP_ORIGIN, idOf(task), task.getName(), currentThreadName());
  }

  #pushCall(op: number, id: number, name: string, args: unknown[]): void {
    let nameId = this.#sentNames.get(name);
    if (nameId === undefined) {
      nameId = this.#sentList.length;
      this.#sentList.push(name);
      this.#sentNames.set(name, nameId);
      this.#push(OP_NAME, nameId, name, 0);
    }
    if (args.length === 0) this.#push(op | ARGS_NONE, id, nameId, 0);
    else if (args.length === 1) this.#push(op | ARGS_ONE, id, nameId, args[0]);
    else this.#push(op | ARGS_ARRAY, id, nameId, args);
  }

  #push(op: number, id: number, a: unknown, b: unknown): void {
    if (this.#death !== null) return;
    const outbox = this.#outbox;
    const at = this.#count;
    outbox[at] = op;
    outbox[at + 1] = id;
    outbox[at + 2] = a;
    outbox[at + 3] = b;
    this.#count = at + OP_SIZE;
    const kind = op & OP_MASK;
    const payload = kind === OP_RESULT || kind === OP_ERROR ? a : b;
    if (typeof payload === 'object' && payload !== null && kind !== OP_BELL && !this.#mayBeUnreadable) {
      this.#mayBeUnreadable = (op & ARGS_ARRAY) === 0 || !allPrimitive(payload as unknown[]);
    }
    collectTransfers(payload, found);
    if (found.length > 0) {
      (this.#opTransfers ??= new Map()).set(at, found.splice(0));
    }
    if (at + OP_SIZE >= outbox.length) {
      this._flush();
      return;
    }
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    if (this.loop._inDrive()) this.loop._flushAfterIteration(this);
    else queueMicrotask(() => this._flush());
  }

  /** @internal Post what was queued as one batch. */
  _flush(): void {
    this.#flushScheduled = false;
    if (this.#count === 0) return;
    // Before the batch is taken: what arrives meanwhile may add to it (a note that a message could not be read).
    if (this.#death === null) this.#makeRoom();
    const count = this.#count;
    if (count === 0) return;
    if (this.#death !== null) {
      this.#count = 0;
      this.#outbox.fill(0, 0, count);
      return;
    }
    this.#count = 0;
    const outbox = this.#outbox;
    // Kept until the peer read it only when it may be unreadable there (it holds objects): a copy.
    const keep = this.#mayBeUnreadable;
    this.#mayBeUnreadable = false;
    const batch = count === outbox.length && !keep ? outbox : outbox.slice(0, count);
    const opTransfers = this.#opTransfers;
    this.#opTransfers = null;
    const transfers = opTransfers === null ? NO_TRANSFERS : [...opTransfers.values()].flat();
    try {
      this.#post(batch, transfers, keep ? opTransfers : null, false, keep);
    } catch {
      this.#postOneByOne(batch, opTransfers);
    }
    // Values sent must not stay referenced until their slots are reused.
    outbox.fill(0, 0, count);
    this.#ring();
  }

  /** Ring the peer's bell: it may be blocked waiting for what was just posted. */
  #ring(): void {
    const bell = this.#peerBell;
    if (bell !== null) {
      Atomics.add(bell, 0, 1);
      Atomics.notify(bell, 0);
    }
  }

  /**
   * Post `records` as one message, numbered, and `keep` it until the peer read it; throws when
   * it cannot be cloned.
   */
  #post(records: unknown[], transfers: Transferable[], opTransfers: Map<number, Transferable[]> | null, replay: boolean, keep: boolean): void {
    this.#out.postMessage(records, transfers);
    const first = records[0];
    if (first !== OP_REPLAY && first !== OP_REPLAY_END) this.#opsPosted = (this.#opsPosted + records.length / OP_SIZE) | 0;
    const seq = ++this.#posted;
    if (keep) this.#kept.set(seq, { records, transfers: opTransfers, replay });
    if (this.#kept.size === 0) {
      this.#oldestKept = seq + 1;
      return;
    }
    // Forget what the peer read, all of it in order.
    const read = Atomics.load(this.#peerRead, 0);
    while (this.#oldestKept <= read) this.#kept.delete(this.#oldestKept++);
  }

  /** Post one message of records the library made (replays, replies that replace others). */
  #postOne(records: unknown[]): void {
    this.#post(records, NO_TRANSFERS, null, records[0] === OP_REPLAY, true);
  }

  /** A batch could not be cloned: post its operations one by one and fail only those that cannot. */
  #postOneByOne(batch: unknown[], opTransfers: Map<number, Transferable[]> | null): void {
    for (let i = 0; i < batch.length; i += OP_SIZE) {
      const record = batch.slice(i, i + OP_SIZE);
      const transfers = opTransfers?.get(i) ?? null;
      try {
        this.#post(record, transfers ?? NO_TRANSFERS, transfers === null ? null : new Map([[0, transfers]]), false, true);
      } catch (error) {
        this.#unsendable(record, error);
      }
    }
  }

  #unsendable(record: unknown[], error: unknown): void {
    const [first, id, a, b] = record as [number, number, unknown, unknown];
    const op = first & OP_MASK;
    const reason = error instanceof Error ? error.message : String(error);
    if (op === OP_CALL || op === OP_NOTIFY) {
      const what = describeUncloneable((first & ARGS_ARRAY) !== 0 ? (b as unknown[]) : [b]);
      const name = quoteName(this.#sentList[a as number] as string);
      const hint = what.endsWith('(Function)') ? CALLBACK_HINT : '';
      const failure = new TypeError(`cannot send ${op === OP_CALL ? 'call' : 'callSoonThreadsafe'} ${name} to ${this.#peer}: ${what} cannot be cloned (${reason})${hint}`);
      this.#failRecord(op, id, failure);
    } else if (op === OP_RESULT) {
      const failure = new TypeError(`the result of ${this.#nameHere(b)} cannot be sent to ${this.#peer}: ${typeName(a)} cannot be cloned (${reason})`);
      this.#postOne([OP_ERROR, id, encodeError(failure), b]);
    } else if (op === OP_ERROR) {
      this.#postOne([OP_ERROR, id, encodeError(new RuntimeError(`an error of ${this.#nameHere(b)} could not be sent back: ${reason}`)), b]);
    }
  }

  /** A call this side made cannot reach the peer: its Future fails, or the loop's exception handler hears of it. */
  #failRecord(op: number, id: number, failure: Error): void {
    if (op === OP_CALL) settle(this.#take(id), OP_ERROR, failure);
    else this.loop.callExceptionHandler({ message: failure.message, exception: failure });
  }

  /** How a message names a function the peer called here (the id of a RESULT or ERROR record). */
  #nameHere(nameId: unknown): string {
    const name = this.#names[nameId as number];
    return name === undefined ? 'a call' : quoteName(name);
  }

  /**
   * The peer could not read message `seq`: send its records again one by one, so that only a
   * record it still cannot read fails (its call's Future fails; a result becomes an error).
   */
  #replay(seq: number, encodedReason: EncodedError): void {
    if (this.#death !== null) return;
    const reason = decodeError(encodedReason) as Error;
    const sent = this.#kept.get(seq);
    if (sent === undefined) {
      // Only messages of primitives are not kept, and those are always read: end the link rather than leave a call hanging.
      this._fail(() => new RuntimeError(`${this.#peer} could not read a message of numbers and strings (${reason.name}: ${reason.message})`, { cause: reason }));
      return;
    }
    const { records, transfers } = sent;
    const start = sent.replay ? OP_SIZE : 0;
    // The peer counts none of the operations of a message it could not read (their replays neither).
    if (!sent.replay) this.#opsPosted = (this.#opsPosted - records.length / OP_SIZE) | 0;
    if (records.length - start === OP_SIZE) {
      const replacement = this.#giveUp(records.slice(start), transfers?.has(start) === true, reason);
      if (replacement !== null) this.#postOne([OP_REPLAY, seq, 0, 0, ...replacement]);
    } else {
      for (let i = start; i < records.length; i += OP_SIZE) {
        const record = records.slice(i, i + OP_SIZE);
        if (transfers?.has(i) === true) {
          // Its moved buffers went with the message that could not be read.
          const replacement = this.#giveUp(record, true, reason);
          if (replacement !== null) this.#postOne([OP_REPLAY, seq, 0, 0, ...replacement]);
          continue;
        }
        try {
          this.#post([OP_REPLAY, seq, 0, 0, ...record], NO_TRANSFERS, null, true, true);
        } catch (error) {
          this.#unsendable(record, error);
        }
      }
    }
    this.#postOne([OP_REPLAY_END, seq, 0, 0]);
    this.#ring();
  }

  /**
   * A record the peer cannot read: fail the call it carries, or return what replaces it there
   * (an error in place of a result), or null when nothing does.
   */
  #giveUp(record: unknown[], moved: boolean, reason: Error): unknown[] | null {
    const [first, id, a, b] = record as [number, number, unknown, unknown];
    const op = first & OP_MASK;
    const why = moved ? 'the buffers it moved were lost with the message' : `${reason.name}: ${reason.message}`;
    if (op === OP_CALL || op === OP_NOTIFY) {
      const name = quoteName(this.#sentList[a as number] as string);
      const what = op === OP_CALL ? 'call' : 'callSoonThreadsafe';
      this.#failRecord(op, id, new RangeError(`${this.#peer} could not read the arguments of ${what} ${name} (${why})`, { cause: reason }));
      return null;
    }
    if (op === OP_RESULT || op === OP_ERROR) {
      const what = op === OP_RESULT ? 'result' : 'error';
      const failure = new RangeError(`the ${what} of ${this.#nameHere(b)} could not be read by ${this.#peer} (${why})`, { cause: reason });
      return [OP_ERROR, id, encodeError(failure), b];
    }
    return null;
  }

  // ───────────────────────────── receiving ─────────────────────────────

  /**
   * A message arrived (`blocked`: taken from the port while this thread waits for a reply):
   * take it now, or hold it while an earlier message is missing.
   */
  #arrive(message: unknown[], blocked: boolean): void {
    const seq = ++this.#arrived;
    const op = message[0];
    if (op === OP_REPLAY || op === OP_REPLAY_END) {
      this.#replayed(message, blocked);
      return;
    }
    if (blocked || this.#holding || this.loop._holdsDeliveries()) {
      // Taken now: a blocked thread dispatches nothing until it runs again, and a peer waiting
      // for room meanwhile must not wait on it; a simulation delivers what it holds in its steps.
      this.#ack(message.length / OP_SIZE);
    } else {
      this.#unacked += message.length / OP_SIZE;
    }
    if (this.#missing === 0) {
      Atomics.store(this.#read, 0, seq);
      this.#accept(message, blocked);
    } else {
      this.#held.push({ seq, records: message, replayed: NO_ARGS });
    }
  }

  /** A message arrived that cannot be read: hold what follows until its records arrive again. */
  #unreadable(error: unknown): void {
    const seq = ++this.#arrived;
    this.#missing++;
    this.#held.push({ seq, records: null, replayed: [] });
    this.#push(OP_UNREADABLE, seq, encodeError(error), 0);
  }

  /** Records of an unreadable message arrived again, or all of them did. */
  #replayed(message: unknown[], blocked: boolean): void {
    const slot = this.#held.find((held) => held.seq === message[1] && held.records === null);
    if (slot === undefined) return;
    if (message[0] === OP_REPLAY) {
      for (let i = OP_SIZE; i < message.length; i++) slot.replayed.push(message[i]);
      return;
    }
    slot.records = slot.replayed;
    this.#missing--;
    const held = this.#held;
    while (held.length > 0 && (held[0] as Held).records !== null) {
      const records = (held.shift() as Held).records as unknown[];
      if (records.length > 0) this.#accept(records, blocked);
    }
    Atomics.store(this.#read, 0, held.length > 0 ? (held[0] as Held).seq - 1 : this.#arrived);
  }

  /** Take a batch in order: to the loop, or (blocked) its replies now and its calls when the loop runs. */
  #accept(batch: unknown[], blocked: boolean): void {
    if (this.#holding) {
      // Replies too: a reply taken before the calls that came ahead of it would overtake them.
      this.loop._deliverLater(this, batch);
      return;
    }
    if (!blocked) {
      this.loop._deliver(this, batch);
      return;
    }
    this.#process(batch, true, false);
    if (batchHasCalls(batch)) this.loop._deliver(this, batch, true);
  }

  /**
   * @internal Take a batch that arrived, at the start of an iteration: replies complete their
   * Futures now; calls and cancellations of calls run, in order, in one callback of this
   * iteration (each call is isolated: its error goes to its caller or the exception handler).
   */
  _dispatch(batch: unknown[]): void {
    this.#ackInbox();
    // A batch with calls is taken whole in one callback, so replies and calls keep their order.
    if (batchHasCalls(batch)) this.loop.callSoon(runBatch, this, batch);
    else this.#process(batch, true, false);
  }

  /** @internal Take a batch that was already dispatched for its replies: only its calls remain. */
  _dispatchCalls(batch: unknown[]): void {
    this.#ackInbox();
    if (batchHasCalls(batch)) this.loop.callSoon(runCalls, this, batch);
  }

  /** @internal Take a whole batch, replies and calls in order, inside a loop callback. */
  _runBatch(batch: unknown[]): void {
    this.#process(batch, true, true);
  }

  /** @internal Run the calls and cancellations of a batch whose replies were taken already. */
  _runCalls(batch: unknown[]): void {
    this.#process(batch, false, true);
  }

  /**
   * Take the operations of `batch` in order: with `replies`, complete the Futures of replies and
   * learn names and bells; with `calls`, run calls and cancellations.
   */
  #process(batch: unknown[], replies: boolean, calls: boolean): void {
    for (let i = 0; i < batch.length; i += OP_SIZE) {
      const first = batch[i] as number;
      const op = first & OP_MASK;
      const id = batch[i + 1] as number;
      const a = batch[i + 2];
      if (op === OP_CALL || op === OP_NOTIFY) {
        // Once the peer is gone, nobody waits for a call's reply: only callSoonThreadsafe still runs.
        if (calls && (op === OP_NOTIFY || this.#death === null)) this.#call(first, op === OP_CALL ? id : 0, a as number, batch[i + 3]);
        continue;
      }
      if (op === OP_CANCEL) {
        if (calls) this.#running.get(id)?.future.cancel((a as string | null) ?? undefined);
        continue;
      }
      if (op === OP_ORIGIN) {
        // In order with the calls it names (taken in the calls' pass).
        if (calls) this.#origin = id === 0 ? null : { threadId: threadOfId(id), threadName: batch[i + 3] as string, taskId: id, taskName: a as string };
        continue;
      }
      if (op === OP_CONTEXT) {
        if (calls) this.#carried = isCarriedContext(a) ? a : null;
        continue;
      }
      if (!replies) continue;
      switch (op) {
        case OP_BELL:
          this.#peerBell = a as Int32Array;
          break;
        case OP_NAME:
          this.#names[id] = a as string;
          break;
        case OP_RESULT: {
          const future = this.#take(id);
          let value: unknown;
          try {
            value = fromWire(a);
          } catch (error) {
            settle(future, OP_ERROR, error);
            break;
          }
          settle(future, OP_RESULT, value);
          break;
        }
        case OP_ERROR:
          settle(this.#take(id), OP_ERROR, decodeError(a as EncodedError));
          break;
        case OP_CANCELLED:
          settle(this.#take(id), OP_CANCELLED, (a as string | null) ?? null);
          break;
        case OP_UNREADABLE:
          this.#replay(id, a as EncodedError);
          break;
        case OP_DIED:
          this.#peerDied(id, a === null ? null : decodeError(a as EncodedError));
          break;
        case OP_LINK: {
          // A loop that holds a LoopRef to this one passed it on: serve the new link as this one.
          const ports = batch[i + 3];
          if (isLinkPorts(ports)) new Link(this.loop, ports, this.#target, 'a loop another thread introduced', { maxCallsInFlight: this.#maxOps });
          break;
        }
        default:
          throw new RuntimeError(`unknown operation ${op} from ${this.#peer}`);
      }
    }
  }

  /** The peer's thread said it is ending: fail every call with the reason, as its owner would. */
  #peerDied(code: number, uncaught: unknown): void {
    if (this.#death !== null) return;
    const makeError = (): Error => this.#describeDeath(code, uncaught);
    this._fail(makeError);
    this.#onDeath?.(makeError);
  }

  /** Run one call of a batch; a callSoonThreadsafe's error goes to the exception handler. */
  #call(first: number, id: number, nameId: number, payload: unknown): void {
    const form = first & ~OP_MASK;
    const args = form === ARGS_NONE ? NO_ARGS : form === ARGS_ONE ? [payload] : (payload as unknown[]);
    try {
      this.#start(id, nameId, args);
    } catch (error) {
      this.loop.callExceptionHandler({
        message: `Exception in callSoonThreadsafe(${quoteName(this.#names[nameId] ?? '')}) from ${this.#peer}`,
        exception: error as Error,
      });
    }
  }

  /** The pending call `id` has ended there (a reply arrived, or it could not be sent): its Future, unless it is done. */
  #take(id: number): RemoteCallFuture<unknown> | ConcurrentFuture<unknown> | null {
    const future = this.#pending.get(id);
    if (future === undefined) {
      // A call cancelled here: its task there has ended now.
      if (this.#ending.size !== 0) {
        const ended = this.#ending.get(id);
        if (ended !== undefined) {
          this.#ending.delete(id);
          ended();
        }
      }
      return null;
    }
    this.#pending.delete(id);
    const ended = future._ended;
    if (ended !== null) {
      future._ended = null;
      ended();
    }
    return future.done() ? null : future;
  }

  /** Run a call that arrived, inside a loop callback: `id` 0 means no reply is expected. */
  #start(id: number, nameId: number, args: unknown[]): void {
    // Before anything of it runs: should this thread die now, the caller knows this call may have run.
    if (id !== 0) Atomics.store(this.#read, 3, id);
    const name = this.#names[nameId] as string;
    let result: unknown;
    let context: Context | null = null;
    let carried: CarriedContext | null = null;
    let release: (() => void) | null = null;
    let span: CallSpan | null = null;
    try {
      let fn = this.#functions[nameId];
      if (fn === undefined) {
        fn = this.#target.lookup(name);
        this.#functions[nameId] = fn;
      }
      let decoded = false;
      for (let i = 0; i < args.length; i++) {
        const arg = args[i];
        if (typeof arg === 'object' && arg !== null) {
          args[i] = fromWire(arg);
          decoded = true;
        }
      }
      if (decoded) release = _takeReceivedCallbacks();
      carried = this.#carried;
      if (carried === null) result = fn(...args);
      else {
        const entered = (context = contextFor(carried));
        const spans = callSpans;
        result = runInCarriedStores(carried, () => {
          if (spans === null) return entered.run(fn, ...args);
          // A SERVER span, child of what the call carried; it ends with the call.
          const inside = (span = spans.server(name));
          return inside.run(() => entered.run(fn, ...args));
        });
      }
    } catch (error) {
      (span as CallSpan | null)?.end(error);
      (release ?? _takeReceivedCallbacks())?.();
      if (id === 0) throw error;
      this.#push(OP_ERROR, id, encodeError(error), nameId);
      return;
    }
    const served = span as CallSpan | null;
    if (!isCoroutine(result) && !_isThenable(result)) {
      served?.end(null);
      if (id !== 0) this.#reply(id, nameId, result);
      release?.();
      return;
    }
    // A coroutine runs as a Task in the context the call carried (a copy of this thread's with its
    // values), made inside the AsyncLocalStorage stores it carried (and its span), which the Task keeps.
    const entered = context;
    const future =
      entered !== null && isCoroutine(result)
        ? runInCarriedStores(carried, () => {
            const create = (): Future<unknown> => this.loop.createTask(result as Coroutine<unknown>, { context: entered });
            return served === null ? create() : served.run(create);
          })
        : ensureFuture(result as Future<unknown>, { loop: this.loop });
    if (served !== null) endWhenDone(served, future);
    if (release !== null) future.addDoneCallback(release);
    if (id === 0) {
      future.addDoneCallback((done) => {
        if (done.cancelled() || done.exception() === null) return;
        this.loop.callExceptionHandler({
          message: `Exception in callSoonThreadsafe(${quoteName(name)}) from ${this.#peer}`,
          exception: done.exception() as Error,
          future: done,
        });
      });
      return;
    }
    this.#running.set(id, { future, name, origin: this.#origin });
    future.addDoneCallback((done) => {
      if (this.#running.get(id)?.future !== done) return;
      this.#running.delete(id);
      if (done._state === CANCELLED) this.#push(OP_CANCELLED, id, done._makeCancelledError().message, 0);
      else if (done._state === FAILED) this.#push(OP_ERROR, id, encodeError(done.exception()), nameId);
      else this.#reply(id, nameId, done.result());
    });
  }
}

/** The error of a peer thread that ended by itself, when its owner gave no wording. */
function describeDeath(peer: string, code: number, uncaught: unknown): Error {
  if (uncaught === null) return new RuntimeError(`${peer} died: it exited with code ${code}`);
  const error = uncaught as { name?: unknown; message?: unknown };
  return new RuntimeError(`${peer} died: uncaught ${String(error.name)}: ${String(error.message)}`, { cause: uncaught });
}

/** Whether `port` is open: one that closed unheard says so only in that it can no longer be ref'd. */
function isOpen(port: MessagePort): boolean {
  const refs = port as MessagePort & { hasRef?: () => boolean };
  if (typeof refs.hasRef !== 'function') return true;
  port.ref();
  const open = refs.hasRef();
  port.unref();
  return open;
}

/** A packed array (not `new Array(n)`): V8 serializes a holey array in its sparse form, several times slower. */
function newOutbox(): unknown[] {
  return Array.from({ length: MAX_BATCH_OPS * OP_SIZE }, () => 0);
}

/** Whether every argument is a primitive (none can fail to be read). */
function allPrimitive(args: unknown[]): boolean {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (typeof arg === 'object' && arg !== null) return false;
  }
  return true;
}

/** Complete a pending call's Future (of a loop) or ConcurrentFuture with a reply. */
function settle(future: RemoteCallFuture<unknown> | ConcurrentFuture<unknown> | null, op: number, value: unknown): void {
  if (future === null) return;
  if (future instanceof ConcurrentFuture) {
    // As asyncio's _set_concurrent_future_state: a cancelled source cancels the future.
    if (op === OP_CANCELLED) future.cancel();
    else if (!future._setRunningOrNotifyCancel()) return;
    else if (op === OP_RESULT) future._setResult(value);
    else future._setException(value);
    return;
  }
  if (op === OP_RESULT) future._setResultUnchecked(value);
  else if (op === OP_ERROR) future._setExceptionUnchecked(value);
  else future._cancelFuture(value as string | null);
}

function batchHasCalls(batch: unknown[]): boolean {
  for (let i = 0; i < batch.length; i += OP_SIZE) {
    const op = (batch[i] as number) & OP_MASK;
    if (op === OP_CALL || op === OP_NOTIFY || op === OP_CANCEL || op === OP_ORIGIN || op === OP_CONTEXT) return true;
  }
  return false;
}

function runCalls(link: Link, batch: unknown[]): void {
  link._runCalls(batch);
}

function runBatch(link: Link, batch: unknown[]): void {
  link._runBatch(batch);
}

/** Name the first argument that structured clone refuses, with its type. */
function describeUncloneable(args: unknown[]): string {
  for (let i = 0; i < args.length; i++) {
    if (findUncloneable(args[i], 'argument') !== null) return `argument ${i + 1} (${typeName(args[i])})`;
  }
  return 'an argument';
}
