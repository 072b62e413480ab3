/**
 * A stage of the pipeline example, hosted by every thread of a LoopThreadPool: it prices orders
 * taken from one ThreadQueue and puts them on the next, until the first queue is shut down.
 */
import { threadId } from 'node:worker_threads';
import { ContextVar, QueueShutDown, registerContextVar, sleep, type Coroutine, type ThreadQueue } from 'multiloop';

/** The run an order belongs to: set where the pipeline starts, it travels with the calls. */
export const runId = registerContextVar(new ContextVar<string>('runId'));

export interface Order {
  id: number;
  quantity: number;
  unitCents: number;
}

export interface Priced {
  id: number;
  cents: number;
  run: string;
  thread: number;
}

/**
 * Price orders until `orders` is shut down and drained; how many this thread priced. After
 * pricing order `crashAfter` the thread exits: a crash between two orders, which the pool heals.
 */
export function* stage(orders: ThreadQueue<Order>, priced: ThreadQueue<Priced>, crashAfter: number): Coroutine<number> {
  let handled = 0;
  for (;;) {
    let order: Order;
    try {
      order = yield* orders.get(); // this task waits while the queue is empty; the thread goes on
    } catch (error) {
      if (error instanceof QueueShutDown) return handled;
      throw error;
    }
    yield* sleep(0.002); // the pricing: a call to a rates service, say
    yield* priced.put({ id: order.id, cents: order.quantity * order.unitCents, run: runId.get('?'), thread: threadId });
    orders.taskDone();
    handled++;
    if (order.id === crashAfter) process.exit(1);
  }
}
