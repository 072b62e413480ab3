/**
 * A binary min-heap of timers ordered by (when, sequence): equal deadlines fire first-in
 * first-out, as libuv orders its timers.
 */
export interface HeapItem {
  _when: number;
  _seq: number;
}

function less(a: HeapItem, b: HeapItem): boolean {
  return a._when < b._when || (a._when === b._when && a._seq < b._seq);
}

/** Insert `item` into `heap`. */
export function heapPush<T extends HeapItem>(heap: T[], item: T): void {
  let index = heap.length;
  heap.push(item);
  while (index > 0) {
    const parent = (index - 1) >> 1;
    const up = heap[parent] as T;
    if (!less(item, up)) break;
    heap[index] = up;
    index = parent;
  }
  heap[index] = item;
}

/** Remove and return the smallest item; the heap must not be empty. */
export function heapPop<T extends HeapItem>(heap: T[]): T {
  const top = heap[0] as T;
  const last = heap.pop() as T;
  if (heap.length > 0) siftDown(heap, 0, last);
  return top;
}

/** Restore the heap property over an arbitrary array, in place. */
export function heapify<T extends HeapItem>(heap: T[]): void {
  for (let index = (heap.length >> 1) - 1; index >= 0; index--) siftDown(heap, index, heap[index] as T);
}

function siftDown<T extends HeapItem>(heap: T[], start: number, item: T): void {
  const length = heap.length;
  let index = start;
  for (;;) {
    let child = 2 * index + 1;
    if (child >= length) break;
    const right = child + 1;
    if (right < length && less(heap[right] as T, heap[child] as T)) child = right;
    const smaller = heap[child] as T;
    if (!less(smaller, item)) break;
    heap[index] = smaller;
    index = child;
  }
  heap[index] = item;
}
