/**
 * Flags shared with the pool jobs of test/fixtures/pool-control.mjs: an Int32Array over a
 * SharedArrayBuffer in which jobs count their runs, and a slot they hold on until released.
 */

/** The slot `visit` jobs given it as `holdSlot` wait on until `release`. */
export const HOLD = 7;

/**
 * Make `count` zeroed flags that pool threads can see.
 *
 * @example
 * ```ts
 * const flags = flagsOf();
 * const holder = made.submit(visit, flags, 0, HOLD);
 * ```
 */
export function flagsOf(count = 8): Int32Array {
  return new Int32Array(new SharedArrayBuffer(count * Int32Array.BYTES_PER_ELEMENT));
}

/**
 * Let every job holding on `flags[HOLD]` go on.
 *
 * @example
 * ```ts
 * release(flags);
 * ```
 */
export function release(flags: Int32Array): void {
  Atomics.store(flags, HOLD, 1);
  Atomics.notify(flags, HOLD);
}
