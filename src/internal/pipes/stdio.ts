/**
 * The stdio options of child processes, in a module of their own that imports nothing: the
 * subprocess transport (loaded with the loop) and the high-level subprocess API (which extends
 * the streams' protocol) both need them, and neither may load the other.
 */

/** A `stdin`/`stdout`/`stderr` option: create a pipe (asyncio.subprocess.PIPE). */
export const PIPE = -1;
/** A `stderr` option: send it to the same place as stdout (asyncio.subprocess.STDOUT). */
export const STDOUT = -2;
/** A `stdin`/`stdout`/`stderr` option: the null device (asyncio.subprocess.DEVNULL). */
export const DEVNULL = -3;
