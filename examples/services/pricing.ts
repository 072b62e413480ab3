/**
 * A pricing service hosted by a LoopThread in the examples. It asks the inventory service (in
 * another thread) through the parent loop, chaining futures across three threads.
 */
import { parentLoop, sleep, type Coroutine } from 'multiloop';

const prices: Record<string, number> = { apple: 0.5, pear: 0.8, plum: 1.2 };

/** The price of `units` of `item`, with a discount when stock is plentiful (asks the inventory). */
export function* quote(item: string, units: number): Coroutine<number> {
  const price = prices[item];
  if (price === undefined) throw new RangeError(`no price for ${item}`);
  const inStock = yield* parentLoop()!.call<number>('inventoryAvailable', item);
  yield* sleep(0.01);
  const discount = inStock > 10 ? 0.9 : 1;
  return Math.round(price * units * discount * 100) / 100;
}
