/**
 * Blocking work for the pool in the examples: pure CPU, no awaiting.
 */

/** Spin on arithmetic for about `milliseconds` of CPU and return a checksum of the work. */
export function crunch(milliseconds: number, seed: number): number {
  const end = performance.now() + milliseconds;
  let x = seed;
  let rounds = 0;
  while (performance.now() < end) {
    for (let i = 0; i < 10_000; i++) x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
    rounds++;
  }
  return rounds;
}
