/**
 * A loop on a virtual clock for timing tests: `time()` starts at 0 and only moves when the
 * test advances it, or, with `autojump` (the default), when the loop would otherwise sleep
 * until its next timer: it jumps straight to that deadline. No test needs real time.
 */
import { EventLoop } from '../../src/index.js';

export class VirtualLoop extends EventLoop {
  #now = 0;
  readonly autojump: boolean;
  /** How many times the clock jumped ahead by itself. */
  jumps = 0;

  constructor(options?: { autojump?: boolean }) {
    super();
    this.autojump = options?.autojump ?? true;
  }

  override time(): number {
    return this.#now;
  }

  /** Move the clock forward by `seconds`. */
  advance(seconds: number): void {
    this.#now += seconds;
  }

  override _advanceClock(seconds: number): boolean {
    if (!this.autojump) return false;
    this.#now += seconds;
    this.jumps++;
    return true;
  }
}

/** Run exactly one iteration of `loop` (asyncio's test `run_once`). */
export async function runOnce(loop: EventLoop): Promise<void> {
  loop.callSoon(() => loop.stop());
  await loop.runForever();
}

/** Run a few iterations of `loop` (asyncio's test_utils.run_briefly). */
export async function runBriefly(loop: EventLoop): Promise<void> {
  function* once(): Generator<unknown, void, unknown> {
    yield;
  }
  await loop.runUntilComplete(once());
}
