/**
 * An inventory service hosted by a LoopThread in the examples: stock levels and reservations,
 * each reservation a little asynchronous work on the service's own loop.
 */
import { CancelledError, parentLoop, sleep, type Coroutine } from 'multiloop';

const stock = new Map<string, number>([
  ['apple', 12],
  ['pear', 4],
  ['plum', 0],
]);

/** The units of `item` in stock. */
export function available(item: string): number {
  return stock.get(item) ?? 0;
}

/** Reserve `units` of `item` after a short lookup; RangeError when there are not enough. */
export function* reserve(item: string, units: number): Coroutine<number> {
  yield* sleep(0.02);
  const left = available(item) - units;
  if (left < 0) throw new RangeError(`only ${available(item)} ${item} left, ${units} asked`);
  stock.set(item, left);
  return left;
}

/** A slow audit that reports to the parent loop when it is cancelled and when it ends. */
export function* audit(seconds: number): Coroutine<string> {
  try {
    yield* sleep(seconds);
    return 'audit complete';
  } catch (error) {
    if (error instanceof CancelledError) {
      yield* parentLoop()!.call('report', `inventory: audit cancelled${error.message === '' ? '' : ` (${error.message})`}`);
    }
    throw error;
  } finally {
    yield* parentLoop()!.call('report', 'inventory: audit finally ran');
  }
}
