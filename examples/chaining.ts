/**
 * Futures chained across threads: the main loop asks the pricing thread, which asks the
 * inventory thread through the main loop; then a remote call is cancelled by a timeout and the
 * remote `finally` reports back.
 *
 * Run: npm run build && node dist/examples/chaining.js
 */
import { LoopThread, TimeoutError, gather, getRunningLoop, run, waitFor, type Coroutine } from 'multiloop';

function* main(): Coroutine<void> {
  // Set once the inventory thread's audit has run its finally block (it reports back here).
  const auditEnded = getRunningLoop().createFuture<void>();
  const inventory = yield* LoopThread.start(new URL('./services/inventory.js', import.meta.url), {
    name: 'inventory',
    expose: {
      report: (line: string) => {
        console.log(line);
        if (line === 'inventory: audit finally ran') auditEnded.setResult(undefined);
      },
    },
  });
  const pricing = yield* LoopThread.start(new URL('./services/pricing.js', import.meta.url), {
    name: 'pricing',
    // The pricing thread reaches the inventory thread through this loop: a chain of futures.
    expose: { inventoryAvailable: (item: string) => inventory.call<number>('available', item) },
  });
  const quote = yield* pricing.call<number>('quote', 'apple', 10);
  console.log(`10 apples cost ${quote} (pricing -> main -> inventory -> main -> pricing -> main)`);

  try {
    yield* waitFor(inventory.call<string>('audit', 60), 0.2);
  } catch (error) {
    if (!(error instanceof TimeoutError)) throw error;
    console.log('audit timed out after 0.2 s: the remote task was cancelled');
  }
  // The timeout cancelled the call here at once; the remote task ends in its own thread, and
  // closing that thread before its finally block reported would cut the report off.
  yield* auditEnded;
  yield* gather(inventory.close(), pricing.close());
}

await run(main());
