/** A seeded pseudo-random generator, so property-style and soak tests replay exactly. */

/**
 * Make a small deterministic PRNG (mulberry32): numbers in [0, 1), the same for the same seed.
 *
 * @example
 * ```ts
 * const next = mulberry32(0x5eed);
 * const index = Math.floor(next() * items.length);
 * ```
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
