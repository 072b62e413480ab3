/**
 * Checks of the LoopThreadPool options that every thread of a pool gets (its initializer and
 * resource limits): an option of the wrong shape fails the start before any thread is made,
 * with an error naming the option and what is wrong with it.
 */
import type { ResourceLimits } from 'node:worker_threads';
import { repr } from '../format.js';
import { holdsMoved } from '../../transfer.js';
import { describeUncloneable, findUncloneable } from '../uncloneable.js';

/** The keys of node:worker_threads' ResourceLimits. */
const LIMITS: ReadonlyArray<keyof ResourceLimits> = ['maxYoungGenerationSizeMb', 'maxOldGenerationSizeMb', 'codeRangeSizeMb', 'stackSizeMb'];

/**
 * `options.initializer` checked: `[exportName, ...args]`, whose arguments can be sent to every
 * thread, replacements too (so none moves a buffer or port); null when left out.
 */
export function checkInitializer(initializer: unknown, where: string): readonly [string, ...unknown[]] | null {
  if (initializer === undefined) return null;
  if (!Array.isArray(initializer) || typeof initializer[0] !== 'string' || initializer[0] === '') {
    throw new TypeError(`${where}.initializer must be [exportName, ...args] (a non-empty name first), got ${repr(initializer)}`);
  }
  const args = initializer.slice(1) as unknown[];
  if (holdsMoved(args)) {
    throw new TypeError(`${where}.initializer cannot move buffers or ports (move()): its arguments go to every thread, replacements too`);
  }
  for (let i = 0; i < args.length; i++) {
    const found = findUncloneable(args[i], `argument ${i + 1}`);
    if (found !== null) throw new TypeError(`${where}.initializer: ${describeUncloneable(found)}`);
  }
  return [initializer[0], ...args];
}

/** `options.resourceLimits` checked: node:worker_threads' ResourceLimits, each a positive number of MB; undefined when left out. */
export function checkResourceLimits(limits: unknown, where: string): ResourceLimits | undefined {
  if (limits === undefined) return undefined;
  if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
    throw new TypeError(`${where}.resourceLimits must be an object of ${LIMITS.join(', ')}, got ${repr(limits)}`);
  }
  const checked: ResourceLimits = {};
  for (const [key, value] of Object.entries(limits)) {
    if (!(LIMITS as readonly string[]).includes(key)) {
      throw new TypeError(`${where}.resourceLimits has no limit ${repr(key)} (the limits: ${LIMITS.join(', ')})`);
    }
    if (value === undefined) continue;
    if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) {
      throw new RangeError(`${where}.resourceLimits.${key} must be a positive number of MB, got ${repr(value)}`);
    }
    checked[key as keyof ResourceLimits] = value;
  }
  return checked;
}
