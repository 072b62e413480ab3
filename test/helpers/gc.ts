/**
 * Forcing garbage collection and waiting for FinalizationRegistry callbacks, for the tests of
 * "exception was never retrieved" reports.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');

/**
 * Run a full garbage collection.
 *
 * @example
 * ```ts
 * gc();
 * ```
 */
export const gc = runInNewContext('gc') as () => void;

function macrotask(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}

/**
 * Run full collections until `condition` holds (or give up after many rounds). Each `gc()`
 * starts a fresh macrotask: `WeakRef.deref()` keeps its target alive until the current job
 * ends, so a collection in the same job as the check could never free it. The macrotask
 * after each collection lets the FinalizationRegistry callbacks run.
 *
 * @example
 * ```ts
 * await collectUntil(() => ref.deref() === undefined && reports.length > 0);
 * ```
 */
export async function collectUntil(condition: () => boolean): Promise<void> {
  for (let round = 0; round < 60; round++) {
    await macrotask();
    gc();
    await macrotask();
    if (condition()) return;
  }
}

/**
 * Let a few more collections and macrotasks pass so that any pending finalizer report would
 * have arrived.
 *
 * @example
 * ```ts
 * await drainFinalizers();
 * expect(reports).toHaveLength(1);
 * ```
 */
export async function drainFinalizers(): Promise<void> {
  for (let round = 0; round < 5; round++) {
    await macrotask();
    gc();
  }
  await macrotask();
}
