/** The last stage of the pipeline example, on a LoopThread of its own: it totals what arrives. */
import { type Coroutine, type ThreadQueue } from 'multiloop';
import type { Priced } from './pipeline-stage.js';

export interface Totals {
  count: number;
  distinct: number;
  cents: number;
  runs: string[];
  threads: number[];
}

/** Take `count` priced orders from `priced` and total them. */
export function* collect(priced: ThreadQueue<Priced>, count: number): Coroutine<Totals> {
  const ids = new Set<number>();
  const runs = new Set<string>();
  const threads = new Set<number>();
  let cents = 0;
  for (let i = 0; i < count; i++) {
    const item = yield* priced.get();
    ids.add(item.id);
    runs.add(item.run);
    threads.add(item.thread);
    cents += item.cents;
  }
  return { count, distinct: ids.size, cents, runs: [...runs], threads: [...threads].sort((a, b) => a - b) };
}
