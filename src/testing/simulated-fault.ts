/**
 * The error of a fault a simulation injected (multiloop/testing).
 */

/**
 * A pool job failed by the simulation's `jobFailure` fault, or a thread died by its
 * `threadDeath` fault (the death error's cause).
 *
 * @example
 * ```ts
 * // not run: needs a simulation
 * try { yield* loop.runInExecutor(null, work); } catch (error) { if (error instanceof SimulatedFault) retry(); }
 * ```
 */
export class SimulatedFault extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SimulatedFault';
  }
}
