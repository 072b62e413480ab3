/** The pricing thread of the otel example: asks the inventory thread (a third thread) for stock. */
import type { Coroutine, LoopRef } from 'multiloop';
import { finishedSpans, inSpan } from './tracing.js';

export function* quote(item: string, units: number, inventory: LoopRef): Coroutine<number> {
  const inStock = yield* inSpan('look up stock', () => inventory.call<number>('stock', item));
  return Math.round(units * 0.5 * (inStock > 10 ? 0.9 : 1) * 100) / 100;
}

export function spans(traceId: string): unknown {
  return finishedSpans(traceId, "thread 'pricing'");
}
