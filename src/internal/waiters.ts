/**
 * Helpers for the FIFO queues of waiter futures kept by locks and queues.
 */
import type { Future } from '../futures.js';
import type { Deque } from './deque.js';

/**
 * Remove `waiter` from `waiters`; returns whether it was there. A woken waiter is usually at
 * the front, so that case costs O(1) instead of shifting the whole ring.
 */
export function removeWaiter<F>(waiters: Deque<F>, waiter: F): boolean {
  if (waiters.peek() === waiter) {
    waiters.shift();
    return true;
  }
  return waiters.remove(waiter);
}

/** Whether every waiter in `waiters` was cancelled (true when there are none). */
export function allCancelled(waiters: Deque<Future<unknown>> | null): boolean {
  if (waiters === null) return true;
  for (let i = 0; i < waiters.length; i++) if (!(waiters.at(i) as Future<unknown>).cancelled()) return false;
  return true;
}
