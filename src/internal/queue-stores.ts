/**
 * The item stores behind the queues: the store decides the order in which a queue returns
 * its items (FIFO ring buffer, LIFO array, binary heap).
 */
import { BinaryHeap } from './binary-heap.js';
import { Deque } from './deque.js';

/** Where a queue keeps its items; the order of `take()` is the queue's order. */
export abstract class Store<T> {
  abstract get length(): number;
  abstract add(item: T): void;
  abstract take(): T;
  /** The items as asyncio shows `_queue` in a repr. */
  abstract snapshot(): T[];
}

export class FifoStore<T> extends Store<T> {
  #items = new Deque<T>();
  get length(): number {
    return this.#items.length;
  }
  add(item: T): void {
    this.#items.push(item);
  }
  take(): T {
    return this.#items.shift() as T;
  }
  snapshot(): T[] {
    return [...this.#items];
  }
}

export class LifoStore<T> extends Store<T> {
  #items: T[] = [];
  get length(): number {
    return this.#items.length;
  }
  add(item: T): void {
    this.#items.push(item);
  }
  take(): T {
    return this.#items.pop() as T;
  }
  snapshot(): T[] {
    return this.#items.slice();
  }
}

export class HeapStore<T> extends Store<T> {
  #heap: BinaryHeap<T>;
  constructor(compare: (a: T, b: T) => number) {
    super();
    this.#heap = new BinaryHeap(compare);
  }
  get length(): number {
    return this.#heap.length;
  }
  add(item: T): void {
    this.#heap.push(item);
  }
  take(): T {
    return this.#heap.pop() as T;
  }
  snapshot(): T[] {
    return this.#heap.toArray();
  }
}
