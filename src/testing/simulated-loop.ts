/**
 * A loop that a simulation drives (see simulate.ts): it reads the simulation's one virtual
 * clock, never drives itself once it joined, and holds what other threads send it until the
 * simulation delivers it.
 */
import { performance } from 'node:perf_hooks';
import { EventLoop, type InboxReceiver } from '../base-events.js';
import type { GateState, HeldSource, StepReport } from '../internal/testing/coordinator.js';
import {
  OP_BELL,
  OP_CALL,
  OP_CANCEL,
  OP_CANCELLED,
  OP_CONTEXT,
  OP_DIED,
  OP_ERROR,
  OP_LINK,
  OP_MASK,
  OP_NAME,
  OP_NOTIFY,
  OP_ORIGIN,
  OP_REPLAY,
  OP_REPLAY_END,
  OP_RESULT,
  OP_SIZE,
  OP_UNREADABLE,
} from '../internal/messages.js';
import { allTasks } from '../task.js';
import { _openIo } from '../transports.js';

/** The batches a loop holds from one source (a link, a ThreadQueue's watch). */
interface Source {
  readonly receiver: InboxReceiver;
  readonly key: string;
  readonly batches: Array<{ batch: unknown[]; callsOnly: boolean }>;
  /** The function names the link sent (OP_NAME), to name its calls. */
  readonly names: string[];
}

/** A loop of a simulation. */
export class SimulatedLoop extends EventLoop {
  readonly #clock: Float64Array;
  readonly #sources = new Map<InboxReceiver, Source>();
  readonly #order: Source[] = [];
  readonly #keys = new Map<string, number>();

  /**
   * Whether what other threads send is held for the simulation to deliver: from the start (a
   * thread's loop runs freely while its module loads, but what reaches it then must wait for the
   * simulation as everything after, or its order would be real time's), until the simulation ends.
   */
  #holding = true;

  constructor(clock: SharedArrayBuffer) {
    super();
    this.#clock = new Float64Array(clock);
  }

  /** After the simulation: real seconds minus this offset (the clock goes on from where it was). */
  #offset: number | null = null;

  /** The simulation's clock (after it, the real clock, going on from the virtual time it ended at). */
  override time(): number {
    const offset = this.#offset;
    return offset === null ? (this.#clock[0] as number) : performance.now() / 1000 - offset;
  }

  /** @internal The simulation moves the clock, never the loop. */
  override _advanceClock(_seconds: number): boolean {
    return false;
  }

  /** @internal */
  override _clockIsVirtual(): boolean {
    return this.#offset === null;
  }

  /** @internal While the simulation runs, what other threads send waits for it to deliver. */
  override _holdsDeliveries(): boolean {
    return this.#holding;
  }

  /** @internal Held until the simulation delivers it (once the loop joined). */
  override _deliver(receiver: InboxReceiver, batch: unknown[], callsOnly = false): void {
    if (!this.#holding) {
      super._deliver(receiver, batch, callsOnly);
      return;
    }
    if (this.isClosed()) return;
    let source = this.#sources.get(receiver);
    if (source === undefined) {
      const peer = (receiver as { _peer?: unknown })._peer;
      const name = typeof peer === 'string' ? peer : 'a ThreadQueue';
      const count = (this.#keys.get(name) ?? 0) + 1;
      this.#keys.set(name, count);
      source = { receiver, key: count === 1 ? name : `${name} #${count}`, batches: [], names: [] };
      this.#sources.set(receiver, source);
      this.#order.push(source);
    }
    source.batches.push({ batch, callsOnly });
    this._gate?.kick();
  }

  /** @internal Take in what was posted to the loop and say where it stands. */
  _gateState(jobs: number): GateState {
    this._simPoll();
    const state = this._simState();
    const held: HeldSource[] = [];
    for (const source of this.#order) {
      const first = source.batches[0];
      if (first !== undefined) held.push({ key: source.key, count: source.batches.length, calls: hasCalls(first.batch) });
    }
    // By name, not by which arrived first: that order is real time's.
    held.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const io = _openIo(this);
    return { running: state.running, ready: state.ready, nextTimer: state.nextTimer, holds: state.holds, jobs, io: io.count, sockets: io.sockets, listening: io.listening, held };
  }

  /** @internal Deliver `key`'s first held batch (null: none) and run one iteration. */
  _gateStep(key: string | null): StepReport {
    let delivered: string | null = null;
    let receiver: InboxReceiver | null = null;
    let batch: unknown[] | null = null;
    let callsOnly = false;
    if (key !== null) {
      const source = this.#order.find((each) => each.key === key);
      const first = source?.batches.shift();
      if (source !== undefined && first !== undefined) {
        receiver = source.receiver;
        batch = first.batch;
        callsOnly = first.callsOnly;
        delivered = `delivery from ${source.key}: ${describeBatch(source, first.batch)}`;
      }
    }
    const fired = this._timersFired;
    this._simIterate(receiver, batch, callsOnly);
    return { delivered, timers: this._timersFired - fired };
  }

  /** @internal The loop's pending tasks, a line each. */
  _gateTasks(): string[] {
    return [...allTasks(this)].map((task) => String(task));
  }

  /** @internal The simulation is over: the loop drives itself again, with what it held. */
  _ungate(): void {
    if (this.#offset !== null) return;
    this.#offset = performance.now() / 1000 - (this.#clock[0] as number);
    this._gate = null;
    this.#holding = false;
    const order = this.#order.splice(0);
    this.#sources.clear();
    for (const source of order) for (const { batch, callsOnly } of source.batches) super._deliver(source.receiver, batch, callsOnly);
    this._wakeUp();
  }
}

/** Whether a batch holds a call (a thread death may come instead of its delivery). */
function hasCalls(batch: unknown[]): boolean {
  for (let i = 0; i < batch.length; i += OP_SIZE) if (((batch[i] as number) & OP_MASK) === OP_CALL) return true;
  return false;
}

/** A batch in words that are the same from run to run ("call 'fetch', result"). */
function describeBatch(source: Source, batch: unknown[]): string {
  if (batch.length === 0) return 'a change';
  const items: string[] = [];
  for (let i = 0; i < batch.length; i += OP_SIZE) {
    const op = (batch[i] as number) & OP_MASK;
    if (op === OP_NAME) source.names[batch[i + 1] as number] = String(batch[i + 2]);
    else if (op === OP_CALL) items.push(`call '${source.names[batch[i + 2] as number] ?? '?'}'`);
    else if (op === OP_NOTIFY) items.push(`callSoonThreadsafe '${source.names[batch[i + 2] as number] ?? '?'}'`);
    else if (op === OP_RESULT) items.push('result');
    else if (op === OP_ERROR) items.push('error');
    else if (op === OP_CANCEL) items.push('cancel');
    else if (op === OP_CANCELLED) items.push('cancelled');
    else if (op === OP_DIED) items.push('death');
    else if (op === OP_BELL) items.push('bell');
    else if (op === OP_LINK) items.push('link');
    else if (op === OP_ORIGIN) items.push('origin');
    else if (op === OP_CONTEXT) items.push('context');
    else if (op === OP_UNREADABLE || op === OP_REPLAY || op === OP_REPLAY_END) items.push('replay');
  }
  return items.length === 0 ? 'names' : items.join(', ');
}
