/** BullMQ jobs of the otel example, run by a `multiloop worker` process. */
import { finishedSpans, tracer } from './tracing.js';

export async function ship(item: string, units: number): Promise<string> {
  const span = tracer.startSpan('pack parcel');
  await new Promise((resolve) => setTimeout(resolve, 5));
  span.end();
  return `${units} ${item}s packed`;
}

export function spans(traceId: string): unknown {
  return finishedSpans(traceId, `worker process ${process.pid}`);
}
