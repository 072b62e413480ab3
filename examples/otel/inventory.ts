/** The inventory thread of the otel example: counts stock inside a span of its own. */
import { sleep, type Coroutine } from 'multiloop';
import { finishedSpans, tracer } from './tracing.js';

export function* stock(item: string): Coroutine<number> {
  const span = tracer.startSpan(`count ${item}`);
  yield* sleep(0.005);
  span.end();
  return item === 'apple' ? 12 : 3;
}

export function spans(traceId: string): unknown {
  return finishedSpans(traceId, "thread 'inventory'");
}
