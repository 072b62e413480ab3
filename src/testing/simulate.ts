/**
 * simulate() and explore(): a program of several loops in several threads, run on one virtual
 * clock with the seed deciding every order real threads leave to chance.
 */
import type { Coroutine } from '../coroutines.js';
import { RuntimeError } from '../exceptions.js';
import { repr } from '../internal/format.js';
import { _getRunningLoop } from '../internal/running.js';
import { Coordinator, Halt, type SimulationEvent } from '../internal/testing/coordinator.js';
import { randomSeed } from '../internal/testing/prng.js';
import { setSimulation } from '../internal/testing/active.js';
import { run } from '../runners.js';
import { LocalGate, RemoteGate, SimulatedThread } from './gates.js';
import { SimulatedLoop } from './simulated-loop.js';

export type { SimulationEvent } from '../internal/testing/coordinator.js';

/** The faults a simulation draws from its seed. */
export interface Faults {
  /** Virtual seconds added to each cross-thread message, drawn between min and max. */
  latency?: readonly [min: number, max: number];
  /** Probability per cross-thread call that the callee's thread dies before it answers. */
  threadDeath?: number;
  /** Probability per pool job that it fails with SimulatedFault instead of running. */
  jobFailure?: number;
}

/** The options of simulate(). */
export interface SimulationOptions {
  /** An unsigned 32-bit integer; random when left out (the result and every error name it). */
  seed?: number;
  /** Virtual time at the start (default 0). */
  start?: number;
  faults?: Faults;
  /** Real seconds without the clock moving before the simulation fails as stuck (default 10). */
  stuckAfter?: number;
}

/** What a simulation gives back. */
export interface SimulationResult<T> {
  readonly value: T;
  readonly seed: number;
  /** Virtual time when main returned. */
  readonly time: number;
  /** Every cross-thread delivery and every timer that fired, in order. */
  readonly events: readonly SimulationEvent[];
}

/** What explore() found. */
export interface Exploration {
  readonly runs: number;
  readonly failures: readonly { readonly seed: number; readonly error: unknown }[];
}

/**
 * A simulation failed: its seed and virtual time, and the cause (main's error, a deadlock, a
 * simulation that was stuck). Re-running `simulate` with the same seed reproduces it.
 */
export class SimulationError extends Error {
  readonly seed: number;
  readonly time: number;

  constructor(message: string, seed: number, time: number, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SimulationError';
    this.seed = seed;
    this.time = time;
  }
}

/** Whether a simulation runs in this process now. */
let running = false;

/** How long (real ms) the end of a halted simulation may take before it is left behind. */
const TEARDOWN_MS = 5000;

/**
 * Run `main()` in a simulation: its own loop and every loop of every thread it starts
 * (LoopThreads, LoopThreadPools) read one virtual clock, which jumps to the earliest timer of
 * any loop when nothing in the simulation can run; the seed decides which loop runs first at one
 * instant and the order in which messages from several threads reach a loop. The same program
 * and seed give the same value and the same `events`, run after run.
 *
 * What happens outside the simulation holds its clock: a Promise a task awaits, a pool job, a
 * thread starting (pool jobs and starting threads also hold every choice until they end, for
 * the order in which they end is real time's). Sockets run in real time and hold nothing.
 *
 * @example
 * ```ts
 * // not run: the vitest file that holds it runs it
 * const result = await simulate(main, { seed: 7, faults: { latency: [0.001, 0.05] } });
 * expect(result.value).toBe('done');
 * ```
 */
export async function simulate<T>(main: () => Coroutine<T>, options: SimulationOptions = {}): Promise<SimulationResult<T>> {
  if (typeof main !== 'function') throw new TypeError(`simulate() needs a function that returns a coroutine, got ${repr(main)}`);
  const { seed, start, latency, threadDeath, jobFailure, stuckAfter } = checkOptions(options, 'simulate()');
  if (running) throw new RuntimeError('a simulation is running already: simulate() runs one at a time in a process');
  if (_getRunningLoop() !== null) throw new RuntimeError('simulate() cannot run inside a running event loop: call it from a test, outside any loop');
  running = true;
  const coordinator = new Coordinator(seed, start, { latency, threadDeath }, stuckAfter);
  const remotes = new Set<RemoteGate>();
  const thread = new SimulatedThread('main', coordinator.clockBuffer, seed, jobFailure, {
    expect: (path, port) => void new RemoteGate(port, path, coordinator, remotes),
    exited: (path) => coordinator.exited(path),
    ready: (path) => coordinator.ready(path),
    kick: () => coordinator.signal(),
  });
  const loop = new SimulatedLoop(coordinator.clockBuffer);
  const gate = new LocalGate(loop, thread, coordinator);
  loop._gate = gate;
  coordinator.join(gate);
  setSimulation(thread);
  let outcome: { ok: true; value: T } | { ok: false; error: unknown } | null = null;
  let endTime = start;
  try {
    const done = run(main(), { loopFactory: () => loop }).then(
      (value) => {
        outcome = { ok: true, value };
      },
      (error: unknown) => {
        outcome = { ok: false, error };
      },
    );
    void done.then(() => {
      endTime = coordinator.clock[0] as number;
      coordinator.finish();
    });
    let halt: Halt | null = null;
    try {
      await coordinator.run();
    } catch (caught) {
      if (!(caught instanceof Halt)) throw caught;
      halt = caught;
    }
    if (halt !== null) {
      const time = coordinator.clock[0] as number;
      const stillRunning = halt.kind === 'stuck' ? await coordinator.describeRunning() : '';
      // Every loop drives itself again, in real time, to end: run() cancels what is left and closes it.
      coordinator.endThreads();
      loop._ungate();
      if (loop.isRunning()) loop.stop();
      await Promise.race([done, new Promise((resolve) => setTimeout(resolve, TEARDOWN_MS).unref())]);
      throw new SimulationError(`simulation (seed ${seed}) failed at virtual time ${time}: ${halt.message}${stillRunning}`, seed, time);
    }
    await done;
    const settled = outcome as { ok: true; value: T } | { ok: false; error: unknown } | null;
    if (settled === null) throw new RuntimeError('the simulation ended before main did');
    if (!settled.ok) {
      const error = settled.error;
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      throw new SimulationError(`simulation (seed ${seed}) failed at virtual time ${endTime}: ${message}`, seed, endTime, { cause: error });
    }
    return { value: settled.value, seed, time: endTime, events: coordinator.events };
  } finally {
    coordinator.endThreads();
    for (const remote of [...remotes]) remote.close();
    setSimulation(null);
    running = false;
  }
}

/**
 * Run `main` under many seeds: `seeds` is a count (from a random first seed) or a list. Returns
 * how many ran and the seeds that failed, with their errors (`simulate` with one of them
 * reproduces it); `stopAtFirst` ends at the first failure.
 *
 * @example
 * ```ts
 * // not run: the vitest file that holds it runs it
 * const { failures } = await explore(main, { seeds: 200 });
 * expect(failures).toEqual([]);
 * ```
 */
export async function explore(
  main: () => Coroutine<unknown>,
  options: Omit<SimulationOptions, 'seed'> & { seeds: number | Iterable<number>; stopAtFirst?: boolean },
): Promise<Exploration> {
  if (typeof main !== 'function') throw new TypeError(`explore() needs a function that returns a coroutine, got ${repr(main)}`);
  if (options === null || typeof options !== 'object') throw new TypeError(`explore() options must be an object with seeds, got ${repr(options)}`);
  const { seeds, stopAtFirst = false, ...rest } = options;
  if (typeof stopAtFirst !== 'boolean') throw new TypeError(`explore() options.stopAtFirst must be a boolean, got ${repr(stopAtFirst)}`);
  checkOptions(rest, 'explore()');
  let list: Iterable<number>;
  if (typeof seeds === 'number') {
    if (!Number.isInteger(seeds) || seeds < 0) throw new RangeError(`explore() options.seeds must be a whole number of runs or a list of seeds, got ${repr(seeds)}`);
    const first = randomSeed();
    list = Array.from({ length: seeds }, (_, i) => (first + i) >>> 0);
  } else if (seeds !== null && typeof seeds === 'object' && Symbol.iterator in seeds) {
    list = [...seeds];
    for (const seed of list) checkSeed(seed, 'explore()');
  } else {
    throw new TypeError(`explore() options.seeds must be a number of runs or an iterable of seeds, got ${repr(seeds)}`);
  }
  let runs = 0;
  const failures: Array<{ seed: number; error: unknown }> = [];
  for (const seed of list) {
    runs++;
    try {
      await simulate(main, { ...rest, seed });
    } catch (error) {
      if (!(error instanceof SimulationError)) throw error;
      failures.push({ seed, error });
      if (stopAtFirst) break;
    }
  }
  return { runs, failures };
}

function checkSeed(seed: unknown, where: string): number {
  if (typeof seed !== 'number' || !Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(`${where}: a seed must be an unsigned 32-bit integer (0 to 4294967295), got ${repr(seed)}`);
  }
  return seed;
}

function checkProbability(value: unknown, name: string, where: string): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !(value >= 0 && value <= 1)) throw new RangeError(`${where}: faults.${name} must be a probability from 0 to 1, got ${repr(value)}`);
  return value;
}

function checkOptions(options: SimulationOptions, where: string) {
  if (options === null || typeof options !== 'object') throw new TypeError(`${where} options must be an object, got ${repr(options)}`);
  const seed = options.seed === undefined ? randomSeed() : checkSeed(options.seed, where);
  const start = options.start ?? 0;
  if (typeof start !== 'number' || !Number.isFinite(start)) throw new TypeError(`${where}: options.start must be a finite number of seconds, got ${repr(start)}`);
  const stuckAfter = options.stuckAfter ?? 10;
  if (typeof stuckAfter !== 'number' || !(stuckAfter > 0) || !Number.isFinite(stuckAfter)) {
    throw new RangeError(`${where}: options.stuckAfter must be a positive number of real seconds, got ${repr(stuckAfter)}`);
  }
  const faults = options.faults ?? {};
  if (faults === null || typeof faults !== 'object') throw new TypeError(`${where}: options.faults must be an object, got ${repr(faults)}`);
  let latency: readonly [number, number] | null = null;
  if (faults.latency !== undefined) {
    const range = faults.latency as unknown;
    if (!Array.isArray(range) || range.length !== 2 || !range.every((n) => typeof n === 'number' && Number.isFinite(n) && n >= 0) || (range[0] as number) > (range[1] as number)) {
      throw new RangeError(`${where}: faults.latency must be [min, max] seconds with 0 <= min <= max, got ${repr(range)}`);
    }
    latency = [range[0] as number, range[1] as number];
  }
  return {
    seed,
    start,
    stuckAfter,
    latency,
    threadDeath: checkProbability(faults.threadDeath, 'threadDeath', where),
    jobFailure: checkProbability(faults.jobFailure, 'jobFailure', where),
  };
}
