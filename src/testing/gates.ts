/**
 * The plumbing of a simulation between its threads: the hooks the core calls in each thread
 * (names, children, pool jobs), the gate of each loop, and the coordinator's handle of a gate
 * in another thread (a MessagePort).
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { ConcurrentFuture } from '../internal/concurrent-future.js';
import type { Coordinator, GateHandle, GateState, StepReport } from '../internal/testing/coordinator.js';
import { Prng, threadSeed } from '../internal/testing/prng.js';
import { setSimulation, type LoopGate, type SimulatedChild, type ThreadSimulation } from '../internal/testing/active.js';
import { SimulatedLoop } from './simulated-loop.js';
import { SimulatedFault } from './simulated-fault.js';

/** How a thread's hooks reach the coordinator. */
interface Upstream {
  /** A child at `path` will join through `port` (the coordinator's end). */
  expect(path: string, port: MessagePort): void;
  exited(path: string): void;
  ready(path: string): void;
  kick(): void;
}

/** The hooks of the simulation in one thread. */
export class SimulatedThread implements ThreadSimulation {
  /** Pool jobs submitted from this thread, running. */
  jobs = 0;
  #children = 0;
  readonly #names = new Map<string, number>();
  readonly #prng: Prng;

  constructor(
    readonly path: string,
    readonly clock: SharedArrayBuffer,
    readonly seed: number,
    readonly jobFailure: number,
    readonly upstream: Upstream,
  ) {
    this.#prng = new Prng(threadSeed(seed, path));
  }

  defaultName(kind: string): string {
    const count = (this.#names.get(kind) ?? 0) + 1;
    this.#names.set(kind, count);
    return this.path === 'main' ? `${kind}-${count}` : `${kind}-${this.path}.${count}`;
  }

  child(): SimulatedChild {
    const path = this.path === 'main' ? `${++this.#children}` : `${this.path}.${++this.#children}`;
    const { port1, port2 } = new MessageChannel();
    this.upstream.expect(path, port1);
    return { path, clock: this.clock, port: port2, seed: this.seed, jobFailure: this.jobFailure };
  }

  childExited(path: string): void {
    this.upstream.exited(path);
  }

  childReady(path: string): void {
    this.upstream.ready(path);
  }

  jobFault(caller: string): Error | null {
    if (this.jobFailure <= 0 || this.#prng.next() >= this.jobFailure) return null;
    return new SimulatedFault(`a pool job failed by the simulation's jobFailure fault (${caller})`);
  }

  job<R>(future: ConcurrentFuture<R>): ConcurrentFuture<R> {
    this.jobs++;
    future.addDoneCallback(() => {
      this.jobs--;
      this.upstream.kick();
    });
    return future;
  }
}

/** The gate of the loop in the simulation's own thread: the coordinator calls it directly. */
export class LocalGate implements LoopGate, GateHandle {
  readonly path = 'main';
  readonly name = 'main';

  constructor(
    readonly loop: SimulatedLoop,
    readonly thread: SimulatedThread,
    readonly coordinator: Coordinator,
  ) {}

  kick(): void {
    this.coordinator.signal();
  }

  poll(): Promise<GateState> {
    return Promise.resolve(this.loop._gateState(this.thread.jobs));
  }

  step(key: string | null): Promise<StepReport> {
    return Promise.resolve(this.loop._gateStep(key));
  }

  tasks(): Promise<string[]> {
    return Promise.resolve(this.loop._gateTasks());
  }

  kill(): void {}

  end(): void {}
}

/** Messages from the coordinator to a gate in another thread. */
type Down = { op: 'poll'; id: number } | { op: 'step'; id: number; key: string | null } | { op: 'tasks'; id: number } | { op: 'kill' } | { op: 'end' };
/** Messages from a gate in another thread to the coordinator. */
type Up =
  | { op: 'reply'; id: number; value: unknown }
  | { op: 'kick' }
  | { op: 'join'; name: string }
  | { op: 'expect'; path: string; port: MessagePort }
  | { op: 'exited'; path: string }
  | { op: 'ready'; path: string };

/** The coordinator's handle of a gate in another thread. */
export class RemoteGate implements GateHandle {
  name = '(starting)';
  readonly #pending = new Map<number, { resolve: (value: never) => void; fallback: unknown }>();
  #next = 0;
  #gone = false;

  constructor(
    readonly port: MessagePort,
    readonly path: string,
    readonly coordinator: Coordinator,
    readonly all: Set<RemoteGate>,
  ) {
    all.add(this);
    coordinator.expect(path);
    port.on('message', (message: Up) => this.#onMessage(message));
    port.on('close', () => this.#onGone());
  }

  poll(): Promise<GateState> {
    return this.#request({ op: 'poll', id: 0 }, { running: false, ready: 0, nextTimer: Infinity, holds: 0, jobs: 0, io: 0, sockets: [], listening: [], held: [] } satisfies GateState);
  }

  step(key: string | null): Promise<StepReport> {
    return this.#request({ op: 'step', id: 0, key }, { delivered: null, timers: 0 } satisfies StepReport);
  }

  tasks(): Promise<string[]> {
    return this.#request({ op: 'tasks', id: 0 }, []);
  }

  kill(): void {
    if (!this.#gone) this.port.postMessage({ op: 'kill' } satisfies Down);
  }

  end(): void {
    if (!this.#gone) this.port.postMessage({ op: 'end' } satisfies Down);
  }

  /** The simulation is over: stop listening. */
  close(): void {
    this.#onGone();
    this.port.close();
  }

  #request<T>(message: Down & { id: number }, fallback: T): Promise<T> {
    if (this.#gone) return Promise.resolve(fallback);
    const id = ++this.#next;
    message.id = id;
    return new Promise<T>((resolve) => {
      this.#pending.set(id, { resolve: resolve as (value: never) => void, fallback });
      this.port.postMessage(message);
    });
  }

  #onMessage(message: Up): void {
    switch (message.op) {
      case 'reply': {
        const pending = this.#pending.get(message.id);
        this.#pending.delete(message.id);
        pending?.resolve(message.value as never);
        break;
      }
      case 'kick':
        this.coordinator.signal();
        break;
      case 'join':
        this.name = message.name;
        this.coordinator.join(this);
        break;
      case 'expect':
        new RemoteGate(message.port, message.path, this.coordinator, this.all);
        break;
      case 'exited':
        this.coordinator.exited(message.path);
        break;
      case 'ready':
        this.coordinator.ready(message.path);
        break;
    }
  }

  #onGone(): void {
    if (this.#gone) return;
    this.#gone = true;
    for (const { resolve, fallback } of this.#pending.values()) resolve(fallback as never);
    this.#pending.clear();
    this.all.delete(this);
    this.coordinator.leave(this.path);
  }
}

/** The gate of a loop in a thread the simulation started: it answers the coordinator through a port. */
class WorkerGate implements LoopGate {
  #kicked = false;

  constructor(
    readonly loop: SimulatedLoop,
    readonly thread: SimulatedThread,
    readonly port: MessagePort,
  ) {
    port.on('message', (message: Down) => this.#onMessage(message));
    // The simulation is over (or its thread gone) even if its word 'end' never came.
    port.on('close', () => this.#end());
    // The thread lives as long as its loop and links keep it; its loop closed, it leaves.
    port.unref();
    loop._addCloseHook(() => port.close());
  }

  kick(): void {
    if (this.#kicked) return;
    this.#kicked = true;
    this.#post({ op: 'kick' });
  }

  #post(message: Up, transfer?: MessagePort[]): void {
    this.port.postMessage(message, transfer);
  }

  #onMessage(message: Down): void {
    switch (message.op) {
      case 'poll':
        this.#kicked = false;
        this.#post({ op: 'reply', id: message.id, value: this.loop._gateState(this.thread.jobs) });
        break;
      case 'step': {
        const report = this.loop._gateStep(message.key);
        // What the step set off in this thread (microtasks, immediates) comes before the answer.
        setImmediate(() => this.#post({ op: 'reply', id: message.id, value: report }));
        break;
      }
      case 'tasks':
        this.#post({ op: 'reply', id: message.id, value: this.loop._gateTasks() });
        break;
      case 'kill':
        setImmediate(() => {
          throw new SimulatedFault("the thread died by the simulation's threadDeath fault");
        });
        break;
      case 'end':
        this.#end();
        this.port.close();
        break;
    }
  }

  /** The simulation is over: the loop goes on in real time, and this thread's hooks go. */
  #end(): void {
    this.loop._ungate();
    setSimulation(null);
  }

  /** Join the simulation: from now on the loop runs only when the coordinator says. */
  join(name: string): void {
    this.loop._gate = this;
    this.#post({ op: 'join', name });
    this.kick();
  }
}

/** The gates of this thread, by loop. */
const workerGates = new WeakMap<SimulatedLoop, WorkerGate>();

/**
 * In a thread a simulation started: its loop, on the simulation's clock, and the hooks of this
 * thread. The loop runs freely until `joinSimulation` (the thread's module is loaded meanwhile).
 */
export function simulatedLoopForThread(child: SimulatedChild): SimulatedLoop {
  const port = child.port;
  const loop = new SimulatedLoop(child.clock);
  let gate: WorkerGate | null = null;
  const thread = new SimulatedThread(child.path, child.clock, child.seed, child.jobFailure, {
    expect: (path, far) => port.postMessage({ op: 'expect', path, port: far } satisfies Up, [far]),
    exited: (path) => port.postMessage({ op: 'exited', path } satisfies Up),
    ready: (path) => port.postMessage({ op: 'ready', path } satisfies Up),
    kick: () => gate?.kick(),
  });
  gate = new WorkerGate(loop, thread, port);
  workerGates.set(loop, gate);
  setSimulation(thread);
  return loop;
}

/** The thread is ready: its loop joins the simulation, named `name`. */
export function joinSimulation(loop: SimulatedLoop, name: string): void {
  workerGates.get(loop)?.join(name);
}
