/**
 * The scheduler of a simulation (multiloop/testing's `simulate`), in the thread that started it.
 *
 * Every loop of the simulation is driven through a gate: it runs an iteration only when the
 * coordinator grants one, and batches that reach it from other threads are held until the
 * coordinator delivers them. One loop runs at a time. Between two steps the coordinator polls
 * every gate (each takes in, synchronously, what was posted to it) and chooses, with the seed's
 * generator, among what could happen now: a loop with ready callbacks or due timers runs an
 * iteration, or a held batch is delivered (an iteration that takes it in). When nothing can, the
 * clock jumps to the earliest timer or delivery of any loop; when nothing ever can, the
 * simulation is deadlocked.
 *
 * What happens outside the simulation (a Promise a task awaits, a pool job, a thread starting, a
 * connect under way) holds the clock, and so does a connection a server of the simulation has not
 * taken in yet (for REAL_WORK_GRACE_MS at most); pool jobs and starting or dying threads also hold every choice until they are
 * done, for the order in which they end is real time's. Open connections, pipes and subprocesses
 * hold the clock for IO_QUIET_MS before each jump (what a loop wrote to another arrives within
 * it), and for good when nothing else is left (then the simulation may end as stuck, never as
 * deadlocked: the peer may be outside).
 */
import { performance } from 'node:perf_hooks';
import { Prng } from './prng.js';

/** What a gate says of its loop between two steps. */
export interface GateState {
  readonly running: boolean;
  /** Ready callbacks (and batches taken in already). */
  readonly ready: number;
  /** When the earliest timer is due (Infinity: none). */
  readonly nextTimer: number;
  /** Futures that wait for work outside the simulation (Promises, other threads' Futures). */
  readonly holds: number;
  /** Pool jobs submitted from this thread and running. */
  readonly jobs: number;
  /** Open connections, pipes and subprocesses (real I/O may be under way). */
  readonly io: number;
  /** The TCP sockets among them: endpoints and byte counts. */
  readonly sockets: readonly SocketCounts[];
  /** Where its TCP servers listen (`host:port`). */
  readonly listening: readonly string[];
  /** Batches held, per source, in the gate's order of sources. */
  readonly held: readonly HeldSource[];
}

/** A TCP socket of a loop: its endpoints and byte counts. */
export interface SocketCounts {
  readonly local: string;
  readonly remote: string;
  readonly written: number;
  readonly read: number;
  /** Whether its transport reads (a paused one leaves bytes in the kernel on purpose). */
  readonly reading: boolean;
}

/** The batches held from one source. */
export interface HeldSource {
  /** The source's name in this loop, the same from run to run. */
  readonly key: string;
  readonly count: number;
  /** Whether the first of them holds calls (a thread death may come instead). */
  readonly calls: boolean;
}

/** What a step did. */
export interface StepReport {
  /** What was delivered (null: nothing). */
  readonly delivered: string | null;
  /** Timers that fired. */
  readonly timers: number;
}

/** The coordinator's side of a gate. */
export interface GateHandle {
  /** The place of the loop in the simulation ('main', then '1', '2', '1.1'...). */
  readonly path: string;
  /** The loop's name in events ('main', or its thread's name). */
  readonly name: string;
  poll(): Promise<GateState>;
  /** Deliver `key`'s first held batch (null: none) and run one iteration. */
  step(key: string | null): Promise<StepReport>;
  /** The loop's pending tasks, a line each. */
  tasks(): Promise<string[]>;
  /** The thread dies now (a drawn fault; never the main thread's). */
  kill(): void;
  /** The simulation is over: the thread ends. */
  end(): void;
}

/** One thing that happened. */
export interface SimulationEvent {
  readonly time: number;
  readonly loop: string;
  readonly what: string;
}

/** The faults the coordinator draws itself. */
export interface CoordinatorFaults {
  readonly latency: readonly [number, number] | null;
  readonly threadDeath: number;
}

/** Why a simulation could not go on. */
export class Halt extends Error {
  constructor(
    message: string,
    /** 'deadlock' or 'stuck'. */
    readonly kind: 'deadlock' | 'stuck',
  ) {
    super(message);
  }
}

/** How close a timer must be to now to be due (as the loops' CLOCK_RESOLUTION). */
const RESOLUTION = 1e-9;
/**
 * How long (real ms) the clock waits, before it jumps, for real I/O on open connections, pipes and
 * subprocesses: bytes a loop of the simulation wrote to another arrive well within it.
 */
const IO_QUIET_MS = 20;
/** How long pool jobs and starting threads hold every choice at most (real ms): past it, the simulation goes on without them. */
const REAL_WORK_GRACE_MS = 2000;

/** A scheduler of loops on one virtual clock. */
export class Coordinator {
  /** The virtual clock: one Float64, shared with every thread of the simulation. */
  readonly clockBuffer = new SharedArrayBuffer(8);
  readonly clock = new Float64Array(this.clockBuffer);
  readonly events: SimulationEvent[] = [];
  readonly #prng: Prng;
  readonly #faults: CoordinatorFaults;
  readonly #stuckAfterMs: number;
  #gates: GateHandle[] = [];
  /** Threads started and not joined yet, with when (real ms) they were expected. */
  readonly #expected = new Map<string, number>();
  /** Threads started whose starter has not taken in their 'ready' yet (it comes in real time). */
  readonly #unready = new Map<string, number>();
  /** Threads killed whose owner did not take note yet, with when (real ms). */
  readonly #dying = new Map<string, number>();
  /** Per gate path and source key: when (virtual) each held batch may be delivered. */
  readonly #arrivals = new Map<string, number[]>();
  #wake: (() => void) | null = null;
  /** A signal came while the coordinator was not waiting: the next wait ends at once. */
  #signalled = false;
  #finished = false;
  #lastProgress = performance.now();
  #jobsSince = -1;
  /** Since when (real ms) a connection to a server of the simulation waits to be accepted (-1: none does). */
  #acceptSince = -1;

  constructor(seed: number, start: number, faults: CoordinatorFaults, stuckAfter: number) {
    this.#prng = new Prng(seed);
    this.#faults = faults;
    this.#stuckAfterMs = stuckAfter * 1000;
    this.clock[0] = start;
  }

  /** Something changed outside a step (work became ready, a thread joined, a job ended). */
  signal(): void {
    const wake = this.#wake;
    this.#wake = null;
    if (wake === null) this.#signalled = true;
    else wake();
  }

  /** A thread at `path` is being started: the simulation waits for it to join. */
  expect(path: string): void {
    this.#expected.set(path, performance.now());
    this.#unready.set(path, performance.now());
  }

  /** The starter of the thread at `path` took in its 'ready'. */
  ready(path: string): void {
    this.#unready.delete(path);
    this.signal();
  }

  /** A gate joined. */
  join(gate: GateHandle): void {
    this.#lastProgress = performance.now();
    this.#expected.delete(gate.path);
    // A new array: a poll under way (over the old one) sees that the gates changed.
    this.#gates = [...this.#gates, gate].sort((a, b) => comparePaths(a.path, b.path));
    this.signal();
  }

  /** The gate at `path` is gone (its thread ended). */
  leave(path: string): void {
    this.#gates = this.#gates.filter((gate) => gate.path !== path);
    this.#expected.delete(path);
    this.#unready.delete(path);
    for (const key of [...this.#arrivals.keys()]) if (key.startsWith(`${path}\u0000`)) this.#arrivals.delete(key);
    this.signal();
  }

  /** The owner of the thread at `path` took note of its end. */
  exited(path: string): void {
    this.#dying.delete(path);
    this.#expected.delete(path);
    this.#unready.delete(path);
    this.signal();
  }

  /** Main returned (or failed): the scheduler stops. */
  finish(): void {
    this.#finished = true;
    this.signal();
  }

  /** End every thread that joined. */
  endThreads(): void {
    for (const gate of this.#gates) if (gate.path !== 'main') gate.end();
  }

  /** Schedule until `finish()`; throws a Halt when the simulation deadlocks or is stuck. */
  async run(): Promise<void> {
    while (!this.#finished) {
      // What the last step set off in this thread (microtasks, immediates) comes first.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.#finished) return;
      this.#checkStuck();
      if (this.#waitingForThreads()) {
        await this.#wait();
        continue;
      }
      const gates = this.#gates;
      // A signal from now on may say something the polls do not show.
      this.#signalled = false;
      const states = await Promise.all(gates.map((gate) => gate.poll()));
      if (this.#finished) return;
      if (gates !== this.#gates) continue;
      const now = this.clock[0] as number;
      const options: Array<{ gate: GateHandle; key: string | null; calls: boolean }> = [];
      let holds = 0;
      let jobs = 0;
      let io = 0;
      const sockets = new Map<string, SocketCounts>();
      const listening = new Set<string>();
      let next = Infinity;
      let mainRunning = false;
      for (let i = 0; i < gates.length; i++) {
        const gate = gates[i] as GateHandle;
        const state = states[i] as GateState;
        holds += state.holds;
        jobs += state.jobs;
        io += state.io;
        for (const socket of state.sockets) sockets.set(`${socket.local}>${socket.remote}`, socket);
        for (const at of state.listening) listening.add(at);
        if (!state.running) continue;
        if (gate.path === 'main') mainRunning = true;
        if (state.ready > 0 || state.nextTimer <= now + RESOLUTION) options.push({ gate, key: null, calls: false });
        else next = Math.min(next, state.nextTimer);
        for (const source of state.held) {
          const times = this.#deliveryTimes(gate, source, now);
          const first = times[0] as number;
          if (first <= now) options.push({ gate, key: source.key, calls: source.calls });
          else next = Math.min(next, first);
        }
      }
      if (jobs > 0) {
        if (this.#jobsSince < 0) this.#jobsSince = performance.now();
        if (performance.now() - this.#jobsSince < REAL_WORK_GRACE_MS) {
          await this.#wait(REAL_WORK_GRACE_MS - (performance.now() - this.#jobsSince));
          continue;
        }
      } else {
        this.#jobsSince = -1;
      }
      if (options.length > 0) {
        const chosen = options[options.length === 1 ? 0 : this.#prng.below(options.length)] as (typeof options)[number];
        if (chosen.calls && chosen.gate.path !== 'main' && this.#faults.threadDeath > 0 && this.#prng.next() < this.#faults.threadDeath) {
          this.#kill(chosen.gate);
          continue;
        }
        const report = await chosen.gate.step(chosen.key);
        if (chosen.key !== null) this.#arrivals.get(`${chosen.gate.path}\u0000${chosen.key}`)?.shift();
        const time = this.clock[0] as number;
        if (report.delivered !== null) this.events.push({ time, loop: chosen.gate.name, what: report.delivered });
        for (let i = 0; i < report.timers; i++) this.events.push({ time, loop: chosen.gate.name, what: 'timer fired' });
        continue;
      }
      if (holds > 0 || jobs > 0 || !mainRunning || (io > 0 && next === Infinity) || bytesOnTheirWay(sockets)) {
        await this.#wait();
        continue;
      }
      // A connection its server has not taken in yet (that comes in real time) holds the clock,
      // up to REAL_WORK_GRACE_MS: what the server does with it may come before the next timer.
      if (notAcceptedYet(sockets, listening)) {
        if (this.#acceptSince < 0) this.#acceptSince = performance.now();
        const left = REAL_WORK_GRACE_MS - (performance.now() - this.#acceptSince);
        if (left > 0) {
          await this.#wait(left);
          continue;
        }
      } else {
        this.#acceptSince = -1;
      }
      if (next < Infinity) {
        // Real I/O may be under way: the clock waits a moment for what it brings.
        if (io > 0 && (await this.#wait(IO_QUIET_MS))) continue;
        this.clock[0] = next;
        this.#lastProgress = performance.now();
        continue;
      }
      throw new Halt(await this.#describeDeadlock(gates), 'deadlock');
    }
  }

  /** Threads starting or dying hold every choice (up to REAL_WORK_GRACE_MS each). */
  #waitingForThreads(): boolean {
    const now = performance.now();
    for (const since of this.#expected.values()) if (now - since < REAL_WORK_GRACE_MS * 5) return true;
    for (const since of this.#unready.values()) if (now - since < REAL_WORK_GRACE_MS * 5) return true;
    for (const since of this.#dying.values()) if (now - since < REAL_WORK_GRACE_MS) return true;
    return false;
  }

  /** When the held batches of `source` may be delivered, drawing a latency for those seen first now. */
  #deliveryTimes(gate: GateHandle, source: HeldSource, now: number): number[] {
    const id = `${gate.path}\u0000${source.key}`;
    let times = this.#arrivals.get(id);
    if (times === undefined) this.#arrivals.set(id, (times = []));
    if (times.length > source.count) times.splice(0, times.length - source.count);
    const latency = this.#faults.latency;
    while (times.length < source.count) {
      const at = latency === null ? now : now + this.#prng.between(latency[0], latency[1]);
      // A link keeps its order: a batch is never delivered before the one ahead of it.
      times.push(times.length > 0 ? Math.max(at, times[times.length - 1] as number) : at);
    }
    return times;
  }

  #kill(gate: GateHandle): void {
    this.events.push({ time: this.clock[0] as number, loop: gate.name, what: 'thread death (fault)' });
    this.#dying.set(gate.path, performance.now());
    this.leave(gate.path);
    gate.kill();
  }

  /** Wait for a signal, at most `ms` (and never past the point the simulation counts as stuck). */
  /** Whether a signal ended the wait (else the time ran out). */
  #wait(ms = Infinity): Promise<boolean> {
    if (this.#signalled) {
      this.#signalled = false;
      this.#lastProgress = performance.now();
      return Promise.resolve(true);
    }
    const left = this.#stuckAfterMs - (performance.now() - this.#lastProgress);
    const bound = Math.max(1, Math.min(ms, left + 1));
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = null;
        resolve(false);
      }, bound);
      this.#wake = () => {
        clearTimeout(timer);
        // Something outside the steps happened (real work ended, a thread started): progress.
        this.#lastProgress = performance.now();
        resolve(true);
      };
    });
  }

  #checkStuck(): void {
    if (performance.now() - this.#lastProgress <= this.#stuckAfterMs) return;
    throw new Halt(
      `the simulation is stuck: for ${this.#stuckAfterMs / 1000} s of real time its clock has not moved and nothing outside its steps has happened`,
      'stuck',
    );
  }

  /** Name what is still running (for a stuck simulation's error). */
  async describeRunning(): Promise<string> {
    const lines: string[] = [];
    for (const gate of this.#gates) {
      const state = await gate.poll();
      const parts: string[] = [];
      if (!state.running) parts.push('its loop is not running');
      const held = state.held.reduce((sum, source) => sum + source.count, 0);
      if (held > 0) parts.push(`${held} message(s) to deliver`);
      if (state.ready > 0) parts.push(`${state.ready} ready callback(s)`);
      if (state.holds > 0) parts.push(`${state.holds} future(s) waiting for work outside the simulation`);
      if (state.jobs > 0) parts.push(`${state.jobs} pool job(s) running`);
      if (state.io > 0) parts.push(`${state.io} open connection(s), pipe(s) or subprocess(es)`);
      if (parts.length > 0) lines.push(`  ${gate.name}: ${parts.join(', ')}`);
    }
    for (const path of this.#expected.keys()) lines.push(`  thread ${path}: starting`);
    for (const path of this.#dying.keys()) lines.push(`  thread ${path}: dying`);
    return lines.length > 0 ? `; still running:\n${lines.join('\n')}` : '';
  }

  async #describeDeadlock(gates: readonly GateHandle[]): Promise<string> {
    const lines: string[] = [];
    for (const gate of gates) {
      const tasks = await gate.tasks();
      lines.push(`  ${gate.name}: ${tasks.length === 0 ? 'no task' : ''}`);
      for (const task of tasks) lines.push(`    ${task}`);
    }
    return `the simulation is deadlocked: nothing can run, nothing is in flight and no timer is set; the waiting tasks:\n${lines.join('\n')}`;
  }
}

/**
 * Whether a socket of the simulation has written bytes that its peer, a socket of the simulation
 * too, has not read yet (they are in the kernel, on their way).
 */
/**
 * Whether a socket connected to a server of the simulation (`listening`: `host:port`, a wildcard
 * host for every local address) has no peer among the simulation's sockets yet: the server has
 * not taken it in.
 */
export function notAcceptedYet(sockets: ReadonlyMap<string, SocketCounts>, listening: ReadonlySet<string>): boolean {
  if (listening.size === 0) return false;
  for (const socket of sockets.values()) {
    if (sockets.has(`${socket.remote}>${socket.local}`)) continue;
    if (listening.has(socket.remote)) return true;
    const colon = socket.remote.lastIndexOf(':');
    const host = socket.remote.slice(0, colon);
    const port = socket.remote.slice(colon + 1);
    const local = host === socket.local.slice(0, socket.local.lastIndexOf(':')) || host.startsWith('127.') || host === '::1' || host === '::ffff:127.0.0.1';
    if (local && (listening.has(`0.0.0.0:${port}`) || listening.has(`:::${port}`))) return true;
  }
  return false;
}

function bytesOnTheirWay(sockets: ReadonlyMap<string, SocketCounts>): boolean {
  for (const socket of sockets.values()) {
    const peer = sockets.get(`${socket.remote}>${socket.local}`);
    if (peer !== undefined && peer.reading && socket.written > peer.read) return true;
  }
  return false;
}

/** Order of gate paths: 'main' first, then by their numbers ('2' before '10', '1' before '1.1'). */
function comparePaths(a: string, b: string): number {
  if (a === b) return 0;
  if (a === 'main') return -1;
  if (b === 'main') return 1;
  const left = a.split('.').map(Number);
  const right = b.split('.').map(Number);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const diff = (left[i] as number) - (right[i] as number);
    if (diff !== 0) return diff;
  }
  return left.length - right.length;
}
