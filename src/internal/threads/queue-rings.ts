/**
 * How the threads that hold a ThreadQueue learn of the new data buffer its ring moved to (a
 * SharedArrayBuffer cannot shrink: to give memory back, the ring moves to a small new one, see
 * queue-memory.ts "Shrinking").
 *
 * Shared memory cannot hold a SharedArrayBuffer, so the new buffer goes by message: each thread
 * that holds the queue keeps a BroadcastChannel named after it, open from the moment it has the
 * queue, and the thread that moves the ring posts the new buffer there, under both of the queue's
 * locks, before it changes the generation in the control block. A post reaches every other open
 * channel of that name before postMessage returns, so a thread that sees the new generation under
 * a lock finds the buffer waiting in its channel and takes it synchronously
 * (`receiveMessageOnPort`): a thread blocked in getSync/putSync, with no loop to read messages,
 * moves over as it wakes. A thread whose loop turns also takes the offers as they come, so that an
 * idle thread does not keep old buffers alive; a thread that neither runs a loop nor touches the
 * queue keeps its last buffer (and the offers since) until its next operation.
 *
 * The channel is unref'd (it keeps no thread alive) and closed once the queue's memory in this
 * thread is garbage: it refers to that memory weakly.
 */
import { BroadcastChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

/** receiveMessageOnPort takes a BroadcastChannel too (Node 15.12), though @types/node says MessagePort only. */
const receive = receiveMessageOnPort as (port: MessagePort | BroadcastChannel) => { message: unknown } | undefined;

/** Who takes the offers of a channel: it checks them (another copy of the library may post). */
export interface RingReceiver {
  offer(message: unknown): void;
}

const closing = new FinalizationRegistry<BroadcastChannel>((channel) => channel.close());

/** One thread's channel for the data buffers of one queue. */
export class RingChannel {
  readonly #channel: BroadcastChannel;

  /** Open the channel of queue `id` for `receiver` (held weakly). */
  constructor(id: string, receiver: RingReceiver) {
    const channel = new BroadcastChannel(`multiloop:ThreadQueue:${id}`);
    const weak = new WeakRef(receiver);
    channel.onmessage = (event: unknown) => {
      weak.deref()?.offer((event as { data: unknown }).data);
    };
    channel.unref();
    this.#channel = channel;
    closing.register(receiver, channel);
  }

  /** Offer a buffer to every other thread that holds the queue (there when this returns); false when it could not be posted. */
  publish(message: object): boolean {
    try {
      this.#channel.postMessage(message);
      return true;
    } catch {
      return false;
    }
  }

  /** Hand the offers waiting in the channel to `receiver`, in the order they came. */
  drain(receiver: RingReceiver): void {
    for (;;) {
      const received = receive(this.#channel);
      if (received === undefined) return;
      receiver.offer(received.message);
    }
  }
}
