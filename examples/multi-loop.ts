/**
 * An app made of several loops: the main loop and two LoopThreads, each service on its own
 * thread's loop, called concurrently from the main loop.
 *
 * Run: npm run build && node dist/examples/multi-loop.js
 */
import { LoopThread, gather, run, type Coroutine } from 'multiloop';

function* main(): Coroutine<void> {
  const inventory = yield* LoopThread.start(new URL('./services/inventory.js', import.meta.url), {
    name: 'inventory',
    expose: { report: (line: string) => console.log(line) },
  });
  const stock = inventory.proxy<typeof import('./services/inventory.js')>();
  const [apples, pears] = yield* gather(stock.available('apple'), stock.available('pear'));
  console.log(`in stock: ${apples} apples, ${pears} pears (asked thread ${inventory.threadId} concurrently)`);

  const outcomes = yield* gather([stock.reserve('apple', 5), stock.reserve('pear', 9)], { returnExceptions: true });
  for (const outcome of outcomes) {
    console.log(outcome instanceof Error ? `reservation failed: ${outcome.name}: ${outcome.message}` : `reserved, ${outcome} left`);
  }
  yield* inventory.close();
  console.log(`inventory thread closed: ${inventory.isDead()}`);
}

await run(main());
