/**
 * A loop whose clock only moves when told to (Trio's MockClock): timing logic is tested in no
 * real time.
 */
import { EventLoop } from '../base-events.js';
import { repr } from '../internal/format.js';

/** The options of a VirtualClockLoop. */
export interface VirtualClockLoopOptions {
  /** What `time()` reads at first, in seconds (default 0). */
  start?: number;
  /**
   * Jump straight to the next timer whenever the loop has nothing but timers to wait for
   * (default true). Without it the clock moves only by `jump()`.
   */
  autojump?: boolean;
}

/**
 * Run a loop on a virtual clock (Trio's `MockClock`): `time()` starts at `start` and moves only
 * by `jump(seconds)` or, with `autojump`, straight to the next timer whenever the loop has
 * nothing but timers to wait for. A 30 s timeout and a backoff of 1, 2, 4, 8 s then run at once,
 * in the order real time would give them.
 *
 * What else the loop may wait for holds the clock: a Promise a task awaits, another thread's
 * Future (runInExecutor, toThread, wrapFuture), a call to a LoopThread not answered yet. Those
 * run in real time and the clock waits for them; so do a connect, a bind and a subprocess's spawn
 * under way (they always end). Open sockets do not hold it (a server that waits
 * for clients would stop the clock for ever): a timeout around a read fires as soon as nothing
 * else can run. LoopThreads and pools keep their own real clocks; `simulate()` puts every loop of
 * every thread on one virtual clock.
 *
 * @example
 * ```ts
 * const took = run(main(), { loopFactory: () => new VirtualClockLoop() });
 * // main's sleep(3600) returned at once; loop.time() read 3600 after it
 * ```
 */
export class VirtualClockLoop extends EventLoop {
  #now: number;
  readonly #autojump: boolean;

  constructor(options: VirtualClockLoopOptions = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError(`VirtualClockLoop options must be an object, got ${repr(options)}`);
    const { start = 0, autojump = true } = options;
    if (typeof start !== 'number' || !Number.isFinite(start)) throw new TypeError(`options.start must be a finite number of seconds, got ${repr(start)}`);
    if (typeof autojump !== 'boolean') throw new TypeError(`options.autojump must be a boolean, got ${repr(autojump)}`);
    super();
    this.#now = start;
    this.#autojump = autojump;
  }

  /** Read the virtual clock, in seconds (time). */
  override time(): number {
    return this.#now;
  }

  /**
   * Move the clock `seconds` forward (MockClock.jump); the timers due by then run at the loop's
   * next iteration.
   *
   * @example
   * ```ts
   * const loop = new VirtualClockLoop({ autojump: false });
   * loop.callLater(10, done);
   * loop.jump(10); // done runs at the next iteration
   * ```
   */
  jump(seconds: number): void {
    if (typeof seconds !== 'number' || Number.isNaN(seconds)) throw new TypeError(`jump() needs a number of seconds, got ${repr(seconds)}`);
    if (seconds < 0) throw new RangeError(`time can't go backwards: jump(${seconds})`);
    if (!Number.isFinite(seconds)) throw new RangeError('jump() needs a finite number of seconds, got Infinity');
    this.#now += seconds;
    this._wakeUp();
  }

  /** @internal Jump to the next timer when nothing but timers is left to wait for. */
  override _advanceClock(seconds: number): boolean {
    if (!this.#autojump || this._clockHeld()) return false;
    this.#now += seconds;
    return true;
  }

  /** @internal */
  override _clockIsVirtual(): boolean {
    return true;
  }
}
