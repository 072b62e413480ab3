/**
 * The simulation's random numbers: one small generator (mulberry32) per seed, so that a seed
 * names one run whatever the platform.
 */

/** A generator of numbers in [0, 1) drawn from an unsigned 32-bit seed. */
export class Prng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed | 0;
  }

  /** The next number in [0, 1). */
  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) | 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A whole number from 0 to `count` - 1. */
  below(count: number): number {
    return Math.floor(this.next() * count);
  }

  /** A number between `low` and `high`. */
  between(low: number, high: number): number {
    return low + (high - low) * this.next();
  }
}

/** The seed of the generator of one thread of a simulation: `seed` mixed with the thread's `path`. */
export function threadSeed(seed: number, path: string): number {
  let hash = (seed ^ 0x811c9dc5) >>> 0;
  for (let i = 0; i < path.length; i++) hash = Math.imul(hash ^ path.charCodeAt(i), 0x01000193) >>> 0;
  return hash;
}

/** A seed no one chose: an unsigned 32-bit integer from the platform's random source. */
export function randomSeed(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0] as number;
}
