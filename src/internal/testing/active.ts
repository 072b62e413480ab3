/**
 * The simulation this thread takes part in (multiloop/testing's `simulate`), if any: the few
 * hooks the core calls. Nothing here runs outside a simulation but a null check.
 */
import type { ConcurrentFuture } from '../concurrent-future.js';

/** What drives a loop in a simulation. */
export interface LoopGate {
  /** The loop would drive itself now (work became ready, it started running). */
  kick(): void;
}

/** What a thread starting a LoopThread passes to it so that its loop joins the simulation. */
export interface SimulatedChild {
  /** The child's place in the simulation (its parent's path and its own number). */
  readonly path: string;
  /** The virtual clock (one Float64 shared by every loop of the simulation). */
  readonly clock: SharedArrayBuffer;
  /** The port the child's gate talks to the simulation through. */
  readonly port: import('node:worker_threads').MessagePort;
  readonly seed: number;
  readonly jobFailure: number;
}

/** The hooks of the simulation in this thread. */
export interface ThreadSimulation {
  /** A name for a LoopThread or a pool started with none, the same from run to run. */
  defaultName(kind: string): string;
  /** A LoopThread is being started here: what its worker needs to join (and the ports to transfer). */
  child(): SimulatedChild;
  /** The thread that started the child at `path` took in its 'ready' (or its failure to start). */
  childReady(path: string): void;
  /** A child started with `child()` exited and the thread that owns it took note. */
  childExited(path: string): void;
  /** A pool job is submitted: the error it fails with instead of running (a drawn fault), or null. */
  jobFault(caller: string): Error | null;
  /** A pool job runs: the simulation waits for it; returns `future`. */
  job<R>(future: ConcurrentFuture<R>): ConcurrentFuture<R>;
}

/** This thread's simulation, or null (nearly always). */
export let simulation: ThreadSimulation | null = null;

/** Set (or, with null, end) this thread's simulation. */
export function setSimulation(hooks: ThreadSimulation | null): void {
  simulation = hooks;
}
