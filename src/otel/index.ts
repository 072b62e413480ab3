/**
 * multiloop/otel: OpenTelemetry trace context across threads and processes.
 */
import { propagate } from '../internal/otel/propagate.js';

/** The options of `propagateTraceContext`. */
export interface PropagateTraceContextOptions {
  /** Also make a CLIENT span in the caller and a SERVER span in the callee per call (default false). */
  spans?: boolean;
}

/**
 * Let the active OpenTelemetry context travel with every call, job and ThreadQueue item of this
 * thread, through the global propagator: a span started in the callee (another thread, or a
 * BullMQ worker process) is a child of the caller's span, and a ThreadQueue consumer's span links
 * to the producer's. Call it in every thread, in a module both sides import, after the
 * OpenTelemetry SDK is set up there. `spans: true` also makes a CLIENT span around each
 * cross-thread call in the caller and a SERVER span around it in the callee, named
 * `multiloop call <export>`. Calling it again changes `spans`. A RuntimeError names
 * `@opentelemetry/api` when it is not installed.
 *
 * @example
 * ```ts
 * import { propagateTraceContext } from 'multiloop/otel';
 *
 * // In the module that sets up the tracer provider, imported by every thread:
 * propagateTraceContext({ spans: true });
 * ```
 */
export function propagateTraceContext(options: PropagateTraceContextOptions = {}): void {
  if (typeof options !== 'object' || options === null) throw new TypeError('propagateTraceContext(): options must be an object');
  const spans = options.spans ?? false;
  if (typeof spans !== 'boolean') throw new TypeError('propagateTraceContext(): options.spans must be a boolean');
  propagate(spans);
}
