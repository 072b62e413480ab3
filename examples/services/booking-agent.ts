/**
 * A booking agent hosted by a LoopThread in the testing example: it books seats at the box
 * office, which lives in the parent loop. `bookRacy` has a planted race; `bookSafe` is the fix.
 */
import { RuntimeError, parentLoop, sleep, type Coroutine } from 'multiloop';

/** The box office's loop (this module runs in a LoopThread started by it). */
function parent(): NonNullable<ReturnType<typeof parentLoop>> {
  const loop = parentLoop();
  if (loop === null) throw new RuntimeError('the booking agent runs in a LoopThread started by the box office');
  return loop;
}

/** Ask how many seats are left, take the payment, then write back one fewer: a read-modify-write across threads. */
export function* bookRacy(customer: string): Coroutine<string> {
  const left = yield* parent().call<number>('seatsLeft');
  if (left === 0) return `${customer}: sold out`;
  yield* sleep(0.005); // the payment
  yield* parent().call('setSeatsLeft', left - 1);
  yield* parent().call('issueTicket', customer);
  return `${customer}: booked`;
}

/** Take the payment, then ask the box office to take a seat in one call (it checks and takes in one step). */
export function* bookSafe(customer: string): Coroutine<string> {
  yield* sleep(0.005); // the payment
  const taken = yield* parent().call<boolean>('takeSeat', customer);
  return taken ? `${customer}: booked` : `${customer}: sold out, refunded`;
}
