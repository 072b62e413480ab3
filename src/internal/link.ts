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
 */
import { isMainThread, receiveMessageOnPort, type MessagePort, type Transferable } from 'node:worker_threads';
import { ConcurrentFuture } from './concurrent-future.js';
import type { CallsInFlight, EventLoop, Flushable, InboxReceiver } from '../base-events.js';
import { isCoroutine } from '../coroutines.js';
import { CancelledError, RuntimeError } from '../exceptions.js';
import { CANCELLED, FAILED, Future } from '../futures.js';
import { ensureFuture } from '../task.js';
import { collectTransfers } from '../transfer.js';
import { decodeError, encodeError } from './errors.js';
import { typeName } from './format.js';
import { findUncloneable } from './uncloneable.js';
import {
  ARGS_ARRAY,
  ARGS_NONE,
  ARGS_ONE,
  BELL_DEAD,
  CLOSING,
  BELL_EXIT_CODE,
  BELL_RINGS,
  OP_BELL,
  OP_CALL,
  OP_CANCEL,
  OP_CANCELLED,
  OP_ERROR,
  OP_MASK,
  OP_NAME,
  OP_NOTIFY,
  OP_RESULT,
  OP_SIZE,
  type LinkPorts,
} from './messages.js';

/** The functions a side offers to its peer. */
export interface CallTarget {
  /** The function exported as `name`; throws a TypeError naming the problem otherwise. */
  lookup(name: string): (...args: unknown[]) => unknown;
}

/** A Future for a call made through a link: cancelling it cancels the call on the other side. */
class RemoteCallFuture<T> extends Future<T> {
  _link: Link | null = null;
  _id = 0;

  override cancel(msg?: string): boolean {
    const cancelled = super.cancel(msg);
    if (cancelled && this._link !== null) this._link._cancelRemote(this._id, msg ?? null);
    return cancelled;
  }
}

interface RunningCall {
  future: Future<unknown>;
  name: string;
}

const NO_TRANSFERS: Transferable[] = [];
const NO_ARGS: unknown[] = [];
/** A batch is posted once it holds this many operations, so a long burst travels pipelined. */
const MAX_BATCH_OPS = 2048;
const found: Transferable[] = [];

/** Where the side is: running, or dead with the error every call now fails with. */
type Death = (() => Error) | null;

/** The bells of peers that may block waiting for this thread, rung dead when it exits. */
const peerBells = new Set<Int32Array>();
let exitHookInstalled = false;

function ringDeadOnExit(bell: Int32Array): void {
  peerBells.add(bell);
  // The main thread's exit ends every thread; a worker's must wake peers blocked on it.
  if (exitHookInstalled || isMainThread) return;
  exitHookInstalled = true;
  process.on('exit', (code) => {
    for (const peer of peerBells) {
      Atomics.store(peer, BELL_EXIT_CODE, code);
      Atomics.store(peer, BELL_DEAD, 1);
      Atomics.add(peer, BELL_RINGS, 1);
      Atomics.notify(peer, BELL_RINGS);
    }
  });
}

/** @internal One side of a link between two loops in different threads. */
export class Link implements InboxReceiver, Flushable, CallsInFlight {
  /** The loop that dispatches what arrives and owns the Futures of calls made here. */
  readonly loop: EventLoop;
  readonly #in: MessagePort;
  readonly #out: MessagePort;
  readonly #target: CallTarget;
  /** How messages name the other side, e.g. "LoopThread 'worker-1'". */
  readonly #peer: string;
  /** The error calls fail with when the peer's thread exited with `code` while this one was blocked. */
  readonly #describeExit: (code: number) => Error;
  /**
   * The batch being filled: one packed array reused for every batch (postMessage clones it
   * synchronously, so it can be refilled at once); `#count` slots are in use.
   */
  #outbox: unknown[] = Array.from({ length: MAX_BATCH_OPS * OP_SIZE }, () => 0);
  #count = 0;
  #opTransfers: Map<number, Transferable[]> | null = null;
  #flushScheduled = false;
  #pending = new Map<number, RemoteCallFuture<unknown> | ConcurrentFuture<unknown>>();
  /** The peer's bell, rung after each batch posted to it (the peer may block waiting). */
  #peerBell: Int32Array | null = null;
  /** This side's bell, once it was sent to the peer. */
  #bell: Int32Array | null = null;
  #running = new Map<number, RunningCall>();
  #nextId = 0;
  #death: Death = null;
  /** The ids of the function names sent so far, and the names by id. */
  #sentNames = new Map<string, number>();
  #sentList: string[] = [];
  /** The names received so far by id, and the functions found for them (module namespaces are slow to look up). */
  #names: string[] = [];
  #functions: Array<((...args: unknown[]) => unknown) | undefined> = [];

  /**
   * `ownedByThread`: the peer is a LoopThread whose worker events ('error', 'exit') report its
   * death with the cause, so the port closing (which may come first) says nothing.
   */
  constructor(
    loop: EventLoop,
    ports: LinkPorts,
    target: CallTarget,
    peer: string,
    ownedByThread = false,
    describeExit: (code: number) => Error = (code) => new RuntimeError(`${peer} died: it exited with code ${code}`),
  ) {
    this.loop = loop;
    this.#describeExit = describeExit;
    this.#in = ports.inPort;
    this.#out = ports.outPort;
    this.#target = target;
    this.#peer = peer;
    this.#in.on('message', (batch: unknown[]) => this.loop._deliver(this, batch));
    if (!ownedByThread) {
      this.#in.on('close', () => this._fail(() => new RuntimeError(`${this.#peer} is gone: its end of the link closed`)));
    }
    // The running loop keeps the thread alive; an idle inbox must not.
    this.#in.unref();
    loop._addCloseHook(() => this.close());
    loop._addCallsInFlight(this);
  }

  /** Call `name(...args)` there; a Future of this side's loop follows the remote call. */
  call<T>(name: string, args: unknown[]): Future<T> {
    const future = new RemoteCallFuture<T>({ loop: this.loop });
    const death = this.#death;
    if (death !== null) {
      future._setExceptionUnchecked(death());
      return future;
    }
    const id = ++this.#nextId;
    future._link = this;
    future._id = id;
    this.#pending.set(id, future as RemoteCallFuture<unknown>);
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
    // The bell goes first: the peer must know it before the call runs (the call may end the thread).
    const bell = this.#ensureBell();
    const id = ++this.#nextId;
    this.#pending.set(id, future as ConcurrentFuture<unknown>);
    future._blocker = (timeout) => this.#block(future as ConcurrentFuture<unknown>, bell, timeout);
    future.addDoneCallback((done) => {
      if (done.cancelled()) this._cancelRemote(id, null);
    });
    this.#pushCall(OP_CALL, id, name, args);
    return future;
  }

  /** Block this thread until `future` is done or `timeout` seconds passed, taking replies from the inbox port directly. */
  #ensureBell(): Int32Array {
    let bell = this.#bell;
    if (bell === null) {
      bell = new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT));
      this.#bell = bell;
      this.#push(OP_BELL, 0, bell, 0);
    }
    return bell;
  }

  #block(future: ConcurrentFuture<unknown>, bell: Int32Array, timeout: number | null): void {
    // What was queued must leave before this thread stops running.
    this._flush();
    const deadline = timeout === null ? Infinity : performance.now() + Math.max(0, timeout) * 1000;
    for (;;) {
      const rung = Atomics.load(bell, BELL_RINGS);
      for (let message = receiveMessageOnPort(this.#in); message !== undefined; message = receiveMessageOnPort(this.#in)) {
        this.#receive(message.message as unknown[]);
      }
      if (future.done() || this.#death !== null) return;
      if (Atomics.load(bell, BELL_DEAD) !== 0) {
        const code = Atomics.load(bell, BELL_EXIT_CODE);
        this._fail(() => this.#describeExit(code));
        return;
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) return;
      Atomics.wait(bell, BELL_RINGS, rung, remaining === Infinity ? undefined : remaining);
    }
  }

  /** A batch taken from the inbox while blocked: replies now, the rest when the loop runs. */
  #receive(batch: unknown[]): void {
    this.#process(batch, true, false);
    if (batchHasCalls(batch)) this.loop._deliver(this, batch, true);
  }

  /** Schedule `name(...args)` there, expecting no reply. */
  notify(name: string, args: unknown[]): void {
    const death = this.#death;
    if (death !== null) throw death();
    this.#pushCall(OP_NOTIFY, 0, name, args);
  }

  /** Whether the link is dead (its peer is gone or it was closed). */
  isDead(): boolean {
    return this.#death !== null;
  }

  /** @internal The caller's Future of call `id` was cancelled: cancel the remote side too. */
  _cancelRemote(id: number, message: string | null): void {
    if (this.#pending.delete(id) && this.#death === null) this.#push(OP_CANCEL, id, message, 0);
  }

  /**
   * Fail every pending call with `makeError()` and refuse new ones; calls the peer made here
   * are cancelled, since their results have nowhere to go.
   */
  _fail(makeError: () => Error): void {
    if (this.#death !== null) return;
    this.#death = makeError;
    this.loop._removeCallsInFlight(this);
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    const running = [...this.#running.values()];
    this.#running.clear();
    const loopOpen = !this.loop.isClosed();
    for (const future of pending) {
      // A ConcurrentFuture has no loop to wait for: whoever blocks on it learns at once.
      if (loopOpen || future instanceof ConcurrentFuture) settle(future.done() ? null : future, OP_ERROR, makeError());
    }
    if (loopOpen) for (const { future } of running) future.cancel();
  }

  /** @internal Cancel the Futures of calls still in flight, and the calls there (the loop is closing). */
  _cancelCallsInFlight(message: string): number {
    let cancelled = 0;
    for (const future of [...this.#pending.values()]) {
      if (future instanceof RemoteCallFuture && future.cancel(message)) cancelled++;
    }
    return cancelled;
  }

  /** Close both ports, as the loop closes: calls in flight are cancelled, those of ConcurrentFutures fail. */
  close(): void {
    if (this.#death === null) this._cancelCallsInFlight(CLOSING);
    this._fail(() => new RuntimeError(`the link to ${this.#peer} was closed`));
    // The cancellations must leave before the ports close.
    this._flush();
    this.#in.close();
    this.#out.close();
  }

  // ───────────────────────────── sending ─────────────────────────────

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
    const outbox = this.#outbox;
    const at = this.#count;
    outbox[at] = op;
    outbox[at + 1] = id;
    outbox[at + 2] = a;
    outbox[at + 3] = b;
    this.#count = at + OP_SIZE;
    collectTransfers((op & OP_MASK) === OP_RESULT ? a : b, found);
    if (found.length > 0) {
      (this.#opTransfers ??= new Map()).set(at, found.splice(0));
    }
    if (at + OP_SIZE === outbox.length) {
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
    const count = this.#count;
    if (count === 0) return;
    this.#count = 0;
    const outbox = this.#outbox;
    const batch = count === outbox.length ? outbox : outbox.slice(0, count);
    const opTransfers = this.#opTransfers;
    this.#opTransfers = null;
    const transfers = opTransfers === null ? NO_TRANSFERS : [...opTransfers.values()].flat();
    try {
      this.#out.postMessage(batch, transfers);
    } catch {
      this.#postOneByOne(batch, opTransfers);
    }
    // Values sent must not stay referenced until their slots are reused.
    outbox.fill(0, 0, count);
    const bell = this.#peerBell;
    if (bell !== null) {
      Atomics.add(bell, BELL_RINGS, 1);
      Atomics.notify(bell, BELL_RINGS);
    }
  }

  /** A batch could not be cloned: post its operations one by one and fail only those that cannot. */
  #postOneByOne(batch: unknown[], opTransfers: Map<number, Transferable[]> | null): void {
    for (let i = 0; i < batch.length; i += OP_SIZE) {
      const record = batch.slice(i, i + OP_SIZE);
      try {
        this.#out.postMessage(record, opTransfers?.get(i) ?? NO_TRANSFERS);
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
      const name = this.#sentList[a as number];
      const failure = new TypeError(`cannot send ${op === OP_CALL ? 'call' : 'callSoonThreadsafe'} '${name}' to ${this.#peer}: ${what} cannot be cloned (${reason})`);
      if (op === OP_CALL) {
        settle(this.#take(id), OP_ERROR, failure);
      } else {
        this.loop.callExceptionHandler({ message: failure.message, exception: failure });
      }
    } else if (op === OP_RESULT) {
      const failure = new TypeError(`the result of '${this.#names[b as number]}' cannot be sent to ${this.#peer}: ${typeName(a)} cannot be cloned (${reason})`);
      this.#out.postMessage([OP_ERROR, id, encodeError(failure), 0]);
    } else if (op === OP_ERROR) {
      this.#out.postMessage([OP_ERROR, id, encodeError(new RuntimeError(`an error could not be sent back: ${reason}`)), 0]);
    }
  }

  // ───────────────────────────── receiving ─────────────────────────────

  /**
   * @internal Take a batch that arrived, at the start of an iteration: replies complete their
   * Futures now; calls and cancellations of calls run, in order, in one callback of this
   * iteration (each call is isolated: its error goes to its caller or the exception handler).
   */
  _dispatch(batch: unknown[]): void {
    // A batch with calls is taken whole in one callback, so replies and calls keep their order.
    if (batchHasCalls(batch)) this.loop.callSoon(runBatch, this, batch);
    else this.#process(batch, true, false);
  }

  /** @internal Take a batch that was already dispatched for its replies: only its calls remain. */
  _dispatchCalls(batch: unknown[]): void {
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
        if (calls) this.#call(first, op === OP_CALL ? id : 0, a as number, batch[i + 3]);
        continue;
      }
      if (op === OP_CANCEL) {
        if (calls) this.#running.get(id)?.future.cancel((a as string | null) ?? undefined);
        continue;
      }
      if (!replies) continue;
      switch (op) {
        case OP_BELL:
          this.#peerBell = a as Int32Array;
          ringDeadOnExit(this.#peerBell);
          break;
        case OP_NAME:
          this.#names[id] = a as string;
          break;
        case OP_RESULT:
          settle(this.#take(id), OP_RESULT, a);
          break;
        case OP_ERROR:
          settle(this.#take(id), OP_ERROR, decodeError(a as Parameters<typeof decodeError>[0]));
          break;
        case OP_CANCELLED:
          settle(this.#take(id), OP_CANCELLED, (a as string | null) ?? null);
          break;
        default:
          throw new RuntimeError(`unknown operation ${op} from ${this.#peer}`);
      }
    }
  }

  /** Run one call of a batch; a callSoonThreadsafe's error goes to the exception handler. */
  #call(first: number, id: number, nameId: number, payload: unknown): void {
    const form = first & ~OP_MASK;
    const args = form === ARGS_NONE ? NO_ARGS : form === ARGS_ONE ? [payload] : (payload as unknown[]);
    try {
      this.#start(id, nameId, args);
    } catch (error) {
      this.loop.callExceptionHandler({
        message: `Exception in callSoonThreadsafe('${this.#names[nameId]}') from ${this.#peer}`,
        exception: error as Error,
      });
    }
  }

  #take(id: number): RemoteCallFuture<unknown> | ConcurrentFuture<unknown> | null {
    const future = this.#pending.get(id);
    if (future === undefined) return null;
    this.#pending.delete(id);
    return future.done() ? null : future;
  }

  /** Run a call that arrived, inside a loop callback: `id` 0 means no reply is expected. */
  #start(id: number, nameId: number, args: unknown[]): void {
    const name = this.#names[nameId] as string;
    let result: unknown;
    try {
      let fn = this.#functions[nameId];
      if (fn === undefined) {
        fn = this.#target.lookup(name);
        this.#functions[nameId] = fn;
      }
      result = fn(...args);
    } catch (error) {
      if (id === 0) throw error;
      this.#push(OP_ERROR, id, encodeError(error), 0);
      return;
    }
    const awaitable =
      isCoroutine(result) ||
      result instanceof Future ||
      (result !== null && typeof result === 'object' && typeof (result as PromiseLike<unknown>).then === 'function');
    if (!awaitable) {
      if (id !== 0) this.#push(OP_RESULT, id, result, nameId);
      return;
    }
    const future = ensureFuture(result as Future<unknown>, { loop: this.loop });
    if (id === 0) {
      future.addDoneCallback((done) => {
        if (done.cancelled() || done.exception() === null) return;
        this.loop.callExceptionHandler({
          message: `Exception in callSoonThreadsafe('${name}') from ${this.#peer}`,
          exception: done.exception() as Error,
          future: done,
        });
      });
      return;
    }
    this.#running.set(id, { future, name });
    future.addDoneCallback((done) => {
      if (this.#running.get(id)?.future !== done) return;
      this.#running.delete(id);
      if (done._state === CANCELLED) this.#push(OP_CANCELLED, id, done._makeCancelledError().message, 0);
      else if (done._state === FAILED) this.#push(OP_ERROR, id, encodeError(done.exception()), 0);
      else this.#push(OP_RESULT, id, done.result(), nameId);
    });
  }
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
    if (op === OP_CALL || op === OP_NOTIFY || op === OP_CANCEL) return true;
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
