/**
 * The job of the distributed example, run by `multiloop worker` processes: a third of a
 * millisecond of CPU on `i`, and who ran it.
 */

/** Work on `i` for about 0.3 ms of CPU; returns `i`, a checksum of the work, and this process's pid. */
export function score(i: number): { i: number; checksum: number; pid: number } {
  const end = performance.now() + 0.3;
  let x = i + 1;
  while (performance.now() < end) {
    for (let k = 0; k < 200; k++) x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
  }
  return { i, checksum: x, pid: process.pid };
}
