/**
 * Loops that work together: a pipeline of three stages in five threads. The main loop produces
 * orders into a bounded ThreadQueue (it waits while the stages are behind); a LoopThreadPool of
 * two threads prices them onto a second queue; an aggregator thread totals them. A TaskGroup holds
 * the stages (the first failure cancels the rest), a timeout bounds the whole run, and one stage
 * thread crashes half-way: the pool replaces it, and its stage goes on in the new thread. A
 * context variable set here travels with every call. pstree() shows the threads at the end.
 *
 * Run: npm run example:pipeline
 */
import { LoopThread, LoopThreadPool, RuntimeError, TaskGroup, ThreadQueue, pstree, run, sleep, timeout, type Coroutine } from 'multiloop';
import type { Totals } from './services/pipeline-aggregator.js';
import { runId, type Order, type Priced } from './services/pipeline-stage.js';

const ORDERS = 200;
const CRASH_AFTER = 57;
const STAGE = new URL('./services/pipeline-stage.js', import.meta.url);
const AGGREGATOR = new URL('./services/pipeline-aggregator.js', import.meta.url);

/** Keep one stage running in the pool: a stage whose thread died starts again, in the thread that replaced it. */
function* supervise(pool: LoopThreadPool, orders: ThreadQueue<Order>, priced: ThreadQueue<Priced>, log: string[]): Coroutine<void> {
  for (;;) {
    try {
      yield* pool.call<number>('stage', orders, priced, CRASH_AFTER);
      return;
    } catch (error) {
      if (!(error instanceof RuntimeError) || !error.message.includes(' died: ')) throw error;
      log.push(`${error.message}; the pool replaced it, and the stage goes on there`);
      // Until the replacement runs: the least busy thread is then the new one.
      while (pool.statistics().size < pool.size) yield* sleep(0.01);
    }
  }
}

function* produce(orders: ThreadQueue<Order>): Coroutine<void> {
  for (let id = 1; id <= ORDERS; id++) yield* orders.put({ id, quantity: 1 + (id % 5), unitCents: 250 }); // waits while 16 are queued
  yield* orders.join(); // every order priced, in whichever thread
  orders.shutdown(); // the stages' gets raise QueueShutDown now: they return
}

function* main(): Coroutine<void> {
  runId.set('run-2026-11-26'); // travels with every call below
  const orders = new ThreadQueue<Order>({ maxsize: 16, name: 'orders' });
  const priced = new ThreadQueue<Priced>({ name: 'priced' });
  const pool = yield* LoopThreadPool.start(STAGE, { size: 2, name: 'stage' });
  const aggregator = yield* LoopThread.start(AGGREGATOR, { name: 'aggregator' });
  const log: string[] = [];
  console.log(`pipeline: ${ORDERS} orders through a pool of 2 stage threads into an aggregator thread`);
  try {
    // The whole run within 30 s; the first stage to fail cancels the others.
    const totals = yield* timeout(30).run(function* () {
      return yield* new TaskGroup().run(function* (tg) {
        tg.createTask(produce(orders));
        for (let i = 0; i < pool.size; i++) tg.createTask(supervise(pool, orders, priced, log));
        return tg.createTask(
          (function* (): Coroutine<Totals> {
            return yield* aggregator.call<Totals>('collect', priced, ORDERS);
          })(),
        );
      });
    });
    for (const line of log) console.log(line);
    const { count, distinct, cents, runs, threads } = totals.result();
    console.log(`priced ${count} orders, ${distinct} distinct: each exactly once, none lost in the crash`);
    console.log(`total ${(cents / 100).toFixed(2)}; run ${runs.join(', ')} (set in the main thread, read in the stage threads)`);
    console.log(`${threads.length} stage threads priced them; the pool restarted ${pool.statistics().restarts} thread`);
    console.log('\nthe threads at the end, as pstree() sees them:');
    console.log(yield* pstree());
  } finally {
    yield* pool.close();
    yield* aggregator.close();
  }
}

await run(main());
