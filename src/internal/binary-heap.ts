/**
 * A binary min-heap ordered by a comparator, for PriorityQueue. A comparator that throws
 * leaves the heap exactly as it was: each operation first finds where the item settles,
 * comparing only, and then moves items.
 */
export class BinaryHeap<T> {
  #items: T[] = [];
  #compare: (a: T, b: T) => number;

  constructor(compare: (a: T, b: T) => number) {
    this.#compare = compare;
  }

  get length(): number {
    return this.#items.length;
  }

  /** Insert `item`. */
  push(item: T): void {
    const items = this.#items;
    const compare = this.#compare;
    const start = items.length;
    let target = start;
    while (target > 0) {
      const parent = (target - 1) >> 1;
      if (!(compare(item, items[parent] as T) < 0)) break;
      target = parent;
    }
    items.push(item);
    let index = start;
    while (index > target) {
      const parent = (index - 1) >> 1;
      items[index] = items[parent] as T;
      index = parent;
    }
    items[target] = item;
  }

  /** Remove and return the smallest item; undefined when empty. */
  pop(): T | undefined {
    const items = this.#items;
    const size = items.length - 1;
    if (size <= 0) return items.pop();
    const top = items[0] as T;
    const last = items[size] as T;
    const compare = this.#compare;
    let target = 0;
    for (;;) {
      let child = 2 * target + 1;
      if (child >= size) break;
      const right = child + 1;
      if (right < size && compare(items[right] as T, items[child] as T) < 0) child = right;
      if (!(compare(items[child] as T, last) < 0)) break;
      target = child;
    }
    items.pop();
    // The nodes on the path from the root to `target` each move up one level; the bits of
    // target + 1 after its leading 1 spell that path (0: left child, 1: right child).
    const path = target + 1;
    let depth = 31 - Math.clz32(path);
    let node = 1;
    while (depth > 0) {
      depth--;
      const child = (node << 1) | ((path >> depth) & 1);
      items[node - 1] = items[child - 1] as T;
      node = child;
    }
    items[target] = last;
    return top;
  }

  /** The smallest item without removing it. */
  peek(): T | undefined {
    return this.#items[0];
  }

  /** Drop every item. */
  clear(): void {
    this.#items.length = 0;
  }

  /** A copy of the items in heap order. */
  toArray(): T[] {
    return this.#items.slice();
  }
}
