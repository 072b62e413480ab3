/**
 * A FIFO queue of fixed-size blocks linked one to the next (CPython's deque is built the same
 * way): push and shift are O(1) and a queue that grows never copies what it holds nor allocates
 * one large array. The loop's ready queue is one: a burst of 100k tasks made a ring buffer
 * double eleven times, and those copies into ever larger arrays cost twice the pushes.
 */

/** Items per block; each block has one more slot, which links it to the next block. */
const BLOCK = 1024;

type Block<T> = Array<T | Block<T> | undefined>;

function newBlock<T>(): Block<T> {
  return new Array<T | Block<T> | undefined>(BLOCK + 1).fill(undefined);
}

export class Fifo<T> {
  /** The block the front item is in, and its index there. */
  #head: Block<T> = newBlock();
  #headIndex = 0;
  /** The block the next item goes to, and its index there. */
  #tail: Block<T> = this.#head;
  #tailIndex = 0;
  #length = 0;
  /** The last block emptied, kept for the next one needed: a queue that hovers at a block's edge allocates nothing. */
  #spare: Block<T> | null = null;

  get length(): number {
    return this.#length;
  }

  /** Append at the back. */
  push(item: T): void {
    if (this.#tailIndex === BLOCK) {
      const next = this.#spare ?? newBlock<T>();
      this.#spare = null;
      this.#tail[BLOCK] = next;
      this.#tail = next;
      this.#tailIndex = 0;
    }
    this.#tail[this.#tailIndex++] = item;
    this.#length++;
  }

  /** Remove and return the front item; undefined when empty. */
  shift(): T | undefined {
    if (this.#length === 0) return undefined;
    const head = this.#head;
    let index = this.#headIndex;
    const item = head[index] as T;
    head[index] = undefined;
    this.#length--;
    if (++index === BLOCK) {
      const next = head[BLOCK];
      index = 0;
      if (next === undefined) {
        // Nothing left, the tail at this block's end: start again at its front.
        this.#tailIndex = 0;
      } else {
        head[BLOCK] = undefined;
        this.#spare = head;
        this.#head = next as Block<T>;
      }
    }
    this.#headIndex = index;
    return item;
  }

  /** Put `item` at the front, to be shifted next. */
  unshift(item: T): void {
    if (this.#headIndex === 0) {
      const block = newBlock<T>();
      block[BLOCK] = this.#head;
      this.#head = block;
      this.#headIndex = BLOCK;
    }
    this.#head[--this.#headIndex] = item;
    this.#length++;
  }

  /** Drop every item. */
  clear(): void {
    this.#head = this.#tail = newBlock();
    this.#headIndex = this.#tailIndex = 0;
    this.#length = 0;
    this.#spare = null;
  }
}
