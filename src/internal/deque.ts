/**
 * A FIFO ring buffer with a power-of-two capacity: O(1) push and shift, no per-item allocation.
 * The loop's ready queue and the queues of the toolkit are built on it.
 */
export class Deque<T> {
  #items: Array<T | undefined>;
  #mask: number;
  #head = 0;
  #length = 0;

  constructor(capacity = 16) {
    let size = 4;
    while (size < capacity) size <<= 1;
    this.#items = new Array<T | undefined>(size).fill(undefined);
    this.#mask = size - 1;
  }

  get length(): number {
    return this.#length;
  }

  /** Append at the back. */
  push(item: T): void {
    if (this.#length > this.#mask) this.#grow();
    this.#items[(this.#head + this.#length) & this.#mask] = item;
    this.#length++;
  }

  /** Prepend at the front. */
  unshift(item: T): void {
    if (this.#length > this.#mask) this.#grow();
    this.#head = (this.#head - 1) & this.#mask;
    this.#items[this.#head] = item;
    this.#length++;
  }

  /** Remove and return the front item; undefined when empty. */
  shift(): T | undefined {
    if (this.#length === 0) return undefined;
    const head = this.#head;
    const item = this.#items[head];
    this.#items[head] = undefined;
    this.#head = (head + 1) & this.#mask;
    this.#length--;
    return item;
  }

  /** Remove and return the back item; undefined when empty. */
  pop(): T | undefined {
    if (this.#length === 0) return undefined;
    const index = (this.#head + this.#length - 1) & this.#mask;
    const item = this.#items[index];
    this.#items[index] = undefined;
    this.#length--;
    return item;
  }

  /** The front item without removing it. */
  peek(): T | undefined {
    return this.#length === 0 ? undefined : this.#items[this.#head];
  }

  /** The item at `index` from the front. */
  at(index: number): T | undefined {
    if (index < 0 || index >= this.#length) return undefined;
    return this.#items[(this.#head + index) & this.#mask];
  }

  /** Remove the first occurrence of `item`; returns whether it was found. */
  remove(item: T): boolean {
    const length = this.#length;
    for (let i = 0; i < length; i++) {
      if (this.#items[(this.#head + i) & this.#mask] === item) {
        for (let j = i; j < length - 1; j++) {
          this.#items[(this.#head + j) & this.#mask] = this.#items[(this.#head + j + 1) & this.#mask];
        }
        this.#items[(this.#head + length - 1) & this.#mask] = undefined;
        this.#length--;
        return true;
      }
    }
    return false;
  }

  /** Drop every item. */
  clear(): void {
    this.#items.fill(undefined);
    this.#head = 0;
    this.#length = 0;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.#length; i++) yield this.#items[(this.#head + i) & this.#mask] as T;
  }

  #grow(): void {
    const old = this.#items;
    const size = old.length;
    const items = new Array<T | undefined>(size * 2).fill(undefined);
    for (let i = 0; i < size; i++) items[i] = old[(this.#head + i) & this.#mask];
    this.#items = items;
    this.#head = 0;
    this.#mask = size * 2 - 1;
  }
}
