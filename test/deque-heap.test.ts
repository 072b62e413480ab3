import { describe, expect, it } from 'vitest';
import { Deque } from '../src/internal/deque.js';
import { heapify, heapPop, heapPush, type HeapItem } from '../src/internal/heap.js';
import { mulberry32 } from './helpers/prng.js';

interface Item extends HeapItem {
  label: string;
}

function item(when: number, seq: number, label = `${when}/${seq}`): Item {
  return { _when: when, _seq: seq, label };
}

function drain(heap: Item[]): string[] {
  const out: string[] = [];
  while (heap.length > 0) out.push(heapPop(heap).label);
  return out;
}

describe('Deque', () => {
  it('shifts items in the order they were pushed', () => {
    const deque = new Deque<number>();
    for (let i = 0; i < 5; i++) deque.push(i);
    expect(deque.length).toBe(5);
    expect([deque.shift(), deque.shift(), deque.shift(), deque.shift(), deque.shift()]).toEqual([0, 1, 2, 3, 4]);
    expect(deque.length).toBe(0);
  });

  it('returns undefined from shift, pop and peek when empty', () => {
    const deque = new Deque<string>();
    expect(deque.shift()).toBeUndefined();
    expect(deque.pop()).toBeUndefined();
    expect(deque.peek()).toBeUndefined();
    expect(deque.length).toBe(0);
  });

  it('pops from the back and unshifts at the front', () => {
    const deque = new Deque<string>();
    deque.push('b');
    deque.push('c');
    deque.unshift('a');
    expect([...deque]).toEqual(['a', 'b', 'c']);
    expect(deque.pop()).toBe('c');
    expect(deque.peek()).toBe('a');
    expect(deque.shift()).toBe('a');
    expect([...deque]).toEqual(['b']);
  });

  it('keeps FIFO order while growing past its capacity with the head wrapped around', () => {
    const deque = new Deque<number>(4);
    const expected: number[] = [];
    let next = 0;
    // Move the head to the middle of the ring before it has to grow.
    for (let i = 0; i < 3; i++) deque.push(next++);
    expect(deque.shift()).toBe(0);
    expect(deque.shift()).toBe(1);
    expected.push(2);
    for (let i = 0; i < 40; i++) {
      deque.push(next);
      expected.push(next++);
    }
    expect(deque.length).toBe(41);
    expect([...deque]).toEqual(expected);
    const shifted: number[] = [];
    while (deque.length > 0) shifted.push(deque.shift() as number);
    expect(shifted).toEqual(expected);
  });

  it('grows correctly when unshift fills it', () => {
    const deque = new Deque<number>(4);
    for (let i = 0; i < 10; i++) deque.unshift(i);
    expect([...deque]).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
  });

  it('indexes items from the front with at()', () => {
    const deque = new Deque<string>(4);
    deque.push('x');
    deque.shift();
    for (const s of ['a', 'b', 'c', 'd']) deque.push(s);
    expect([deque.at(0), deque.at(1), deque.at(2), deque.at(3)]).toEqual(['a', 'b', 'c', 'd']);
    expect(deque.at(4)).toBeUndefined();
    expect(deque.at(-1)).toBeUndefined();
  });

  it('removes the first occurrence of an item and reports whether it was found', () => {
    const deque = new Deque<string>(4);
    deque.push('pad');
    deque.shift();
    for (const s of ['a', 'b', 'a', 'c']) deque.push(s);
    expect(deque.remove('a')).toBe(true);
    expect([...deque]).toEqual(['b', 'a', 'c']);
    expect(deque.remove('zzz')).toBe(false);
    expect(deque.remove('c')).toBe(true);
    expect([...deque]).toEqual(['b', 'a']);
    expect(deque.length).toBe(2);
    deque.push('d');
    expect([...deque]).toEqual(['b', 'a', 'd']);
  });

  it('drops every item on clear() and stays usable', () => {
    const deque = new Deque<number>();
    for (let i = 0; i < 20; i++) deque.push(i);
    deque.clear();
    expect(deque.length).toBe(0);
    expect([...deque]).toEqual([]);
    deque.push(7);
    expect(deque.shift()).toBe(7);
  });

  it('behaves like an array used as a double-ended queue under a random workload', () => {
    const random = mulberry32(12345);
    const deque = new Deque<number>(4);
    const model: number[] = [];
    for (let step = 0; step < 5000; step++) {
      const op = Math.floor(random() * 4);
      if (op === 0) {
        deque.push(step);
        model.push(step);
      } else if (op === 1) {
        deque.unshift(step);
        model.unshift(step);
      } else if (op === 2) {
        expect(deque.shift()).toBe(model.shift());
      } else {
        expect(deque.pop()).toBe(model.pop());
      }
      expect(deque.length).toBe(model.length);
    }
    expect([...deque]).toEqual(model);
  });
});

describe('heapPush / heapPop', () => {
  it('pops items in deadline order', () => {
    const heap: Item[] = [];
    for (const [when, seq] of [
      [5, 0],
      [1, 1],
      [4, 2],
      [-3, 3],
      [2, 4],
    ] as const) {
      heapPush(heap, item(when, seq));
    }
    expect(drain(heap)).toEqual(['-3/3', '1/1', '2/4', '4/2', '5/0']);
  });

  it('pops equal deadlines first-in first-out (by sequence number)', () => {
    const heap: Item[] = [];
    for (let seq = 0; seq < 12; seq++) heapPush(heap, item(10, seq, String(seq)));
    expect(drain(heap)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11']);
  });

  it('orders by deadline first, then by sequence', () => {
    const heap: Item[] = [];
    heapPush(heap, item(2, 0, 'late-first'));
    heapPush(heap, item(1, 1, 'early-second'));
    heapPush(heap, item(2, 2, 'late-third'));
    heapPush(heap, item(1, 3, 'early-fourth'));
    expect(drain(heap)).toEqual(['early-second', 'early-fourth', 'late-first', 'late-third']);
  });

  it('matches a stable sort under random pushes and pops', () => {
    const random = mulberry32(99);
    const heap: Item[] = [];
    const model: Item[] = [];
    const popped: string[] = [];
    const expected: string[] = [];
    const byKey = (a: Item, b: Item): number => a._when - b._when || a._seq - b._seq;
    for (let seq = 0; seq < 3000; seq++) {
      if (random() < 0.6 || model.length === 0) {
        // Few distinct deadlines, so ties are frequent.
        const entry = item(Math.floor(random() * 20), seq);
        heapPush(heap, entry);
        model.push(entry);
      } else {
        model.sort(byKey);
        expected.push((model.shift() as Item).label);
        popped.push(heapPop(heap).label);
      }
    }
    model.sort(byKey);
    expect(popped).toEqual(expected);
    expect(drain(heap)).toEqual(model.map((entry) => entry.label));
  });
});

describe('heapify', () => {
  it('turns an arbitrary array into a heap in place', () => {
    const random = mulberry32(7);
    const items: Item[] = [];
    for (let seq = 0; seq < 500; seq++) items.push(item(Math.floor(random() * 50), seq));
    const expected = [...items].sort((a, b) => a._when - b._when || a._seq - b._seq).map((entry) => entry.label);
    const heap = [...items].reverse();
    heapify(heap);
    expect(heap).toHaveLength(500);
    expect(drain(heap)).toEqual(expected);
  });

  it('accepts empty and single-item arrays', () => {
    const empty: Item[] = [];
    heapify(empty);
    expect(empty).toEqual([]);
    const one = [item(3, 0, 'only')];
    heapify(one);
    expect(drain(one)).toEqual(['only']);
  });

  it('keeps working with heapPush and heapPop afterwards', () => {
    const heap = [item(9, 0), item(3, 1), item(6, 2)];
    heapify(heap);
    heapPush(heap, item(1, 3));
    heapPush(heap, item(6, 4));
    expect(drain(heap)).toEqual(['1/3', '3/1', '6/2', '6/4', '9/0']);
  });
});
