/**
 * How the threads that hold a ThreadQueue learn of the new data buffer its ring moved to (a
 * SharedArrayBuffer cannot shrink: to give memory back, the ring moves to a small new one, see
 * queue-memory.ts "Shrinking").
 *
 * Shared memory cannot hold a SharedArrayBuffer, so the new buffer goes by message: each thread
 * keeps one BroadcastChannel for all its queues, open from the moment it has its first one, and
 * the thread that moves a ring posts the new buffer there, with the queue's identity, under both
 * of the queue's locks, before it changes the generation in the control block. A post reaches
 * every other open channel of that name in the process before postMessage returns, so a thread
 * that sees the new generation under a lock finds the buffer waiting in its channel and takes it
 * synchronously (`receiveMessageOnPort`): a thread blocked in getSync/putSync, with no loop to read
 * messages, moves over as it wakes. A thread whose loop turns also takes the offers as they come,
 * so that an idle thread does not keep old buffers alive; a thread that neither runs a loop nor
 * touches a queue keeps the offers that came meanwhile (and their buffers) until its next
 * operation on any queue. One channel per thread, not per queue: opening a BroadcastChannel costs
 * more than making a queue, and moves are rare.
 *
 * The channel is unref'd (it keeps no thread alive); it holds the queues' memories weakly.
 */
import { BroadcastChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

/** receiveMessageOnPort takes a BroadcastChannel too (Node 15.12), though @types/node says MessagePort only. */
const receive = receiveMessageOnPort as (port: MessagePort | BroadcastChannel) => { message: unknown } | undefined;

/** Who takes the offers for one queue: it checks them (another copy of the library may post). */
export interface RingReceiver {
  offer(message: Record<string, unknown>): void;
}

/** An offer: the queue's identity, the generation and the buffer. */
export interface RingOffer {
  readonly id: string;
  readonly gen: number;
  readonly data: SharedArrayBuffer;
}

let channel: BroadcastChannel | null = null;
/** This thread's queue memories, by queue identity. */
const receivers = new Map<string, WeakRef<RingReceiver>>();
const forget = new FinalizationRegistry<string>((id) => {
  if (receivers.get(id)?.deref() === undefined) receivers.delete(id);
});

/** Give `message` (from another thread, maybe not an offer) to the memory of the queue it names, if this thread holds it. */
function dispatch(message: unknown): void {
  if (typeof message !== 'object' || message === null) return;
  const id = (message as Record<string, unknown>).id;
  if (typeof id === 'string') receivers.get(id)?.deref()?.offer(message as Record<string, unknown>);
}

/** From now on, offers for queue `id` go to `receiver` (held weakly). */
export function listen(id: string, receiver: RingReceiver): void {
  if (channel === null) {
    channel = new BroadcastChannel('multiloop:ThreadQueue');
    channel.onmessage = (event: unknown) => dispatch((event as { data: unknown }).data);
    channel.unref();
  }
  receivers.set(id, new WeakRef(receiver));
  forget.register(receiver, id);
}

/** Offer a buffer to every other thread (there when this returns); false when it could not be posted. */
export function publish(offer: RingOffer): boolean {
  try {
    (channel as BroadcastChannel).postMessage(offer);
    return true;
  } catch {
    return false;
  }
}

/** Hand the offers waiting in this thread's channel to their queues, in the order they came. */
export function drain(): void {
  if (channel === null) return;
  for (;;) {
    const received = receive(channel);
    if (received === undefined) return;
    dispatch(received.message);
  }
}
