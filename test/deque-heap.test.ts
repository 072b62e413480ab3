import { describe, expect, it } from 'vitest';
import { Deque } from '../src/internal/deque.js';
import { Fifo } from '../src/internal/fifo.js';
import { TimerHeap, type HeapItem } from '../src/internal/heap.js';
import { mulberry32 } from './helpers/prng.js';

interface Item extends HeapItem {
  _seq: number;
  label: string;
}

function item(when: number, seq: number, label = `${when}/${seq}`): Item {
  return { _when: when, _seq: seq, label };
}

function drain(heap: TimerHeap<Item>): string[] {
  const out: string[] = [];
  while (heap.length > 0) out.push(heap.pop().label);
  return out;
}

/** Push `entry` with its own sequence number. */
function push(heap: TimerHeap<Item>, entry: Item): void {
  heap.push(entry, entry._seq);
}

const byKey = (a: Item, b: Item): number => a._when - b._when || a._seq - b._seq;

describe('Fifo', () => {
  it('shifts in push order across many blocks, and undefined once empty', () => {
    const fifo = new Fifo<number>();
    for (let i = 0; i < 5000; i++) fifo.push(i);
    expect(fifo.length).toBe(5000);
    const out: number[] = [];
    for (let item = fifo.shift(); item !== undefined; item = fifo.shift()) out.push(item);
    expect(out).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(fifo.length).toBe(0);
    expect(fifo.shift()).toBeUndefined();
  });

  it('keeps FIFO order through random pushes and shifts, emptied at block edges and in between', () => {
    const next = mulberry32(0xf1f0);
    const fifo = new Fifo<number>();
    const model: number[] = [];
    let counter = 0;
    for (let step = 0; step < 200_000; step++) {
      // Phases that mostly push, then mostly shift, so that the queue spans several blocks and empties.
      const pushing = Math.floor(step / 5000) % 2 === 0 ? next() < 0.8 : next() < 0.2;
      if (pushing) {
        fifo.push(counter);
        model.push(counter++);
      } else {
        expect(fifo.shift()).toBe(model.shift());
      }
      expect(fifo.length).toBe(model.length);
    }
    while (model.length > 0) expect(fifo.shift()).toBe(model.shift());
    expect(fifo.shift()).toBeUndefined();
  });

  it('keeps the model order with items put back at the front, across block edges', () => {
    const next = mulberry32(0xfa57);
    const fifo = new Fifo<number>();
    const model: number[] = [];
    let counter = 0;
    for (let step = 0; step < 100_000; step++) {
      const roll = next();
      if (roll < 0.45) {
        fifo.push(counter);
        model.push(counter++);
      } else if (roll < 0.7) {
        fifo.unshift(counter);
        model.unshift(counter++);
      } else {
        expect(fifo.shift()).toBe(model.shift());
      }
      expect(fifo.length).toBe(model.length);
    }
    while (model.length > 0) expect(fifo.shift()).toBe(model.shift());
    fifo.unshift(-1);
    fifo.push(-2);
    expect([fifo.shift(), fifo.shift(), fifo.shift()]).toEqual([-1, -2, undefined]);
  });

  it('goes on after exactly one block was filled and emptied, and after clear()', () => {
    const fifo = new Fifo<string>();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 1024; i++) fifo.push(`${round}:${i}`);
      for (let i = 0; i < 1024; i++) expect(fifo.shift()).toBe(`${round}:${i}`);
      expect(fifo.shift()).toBeUndefined();
    }
    fifo.push('a');
    fifo.push('b');
    fifo.clear();
    expect(fifo.length).toBe(0);
    expect(fifo.shift()).toBeUndefined();
    fifo.push('c');
    expect(fifo.shift()).toBe('c');
  });
});

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

describe('TimerHeap push / pop', () => {
  it('pops items in deadline order', () => {
    const heap = new TimerHeap<Item>();
    for (const [when, seq] of [
      [5, 0],
      [1, 1],
      [4, 2],
      [-3, 3],
      [2, 4],
    ] as const) {
      push(heap, item(when, seq));
    }
    expect(heap.peekWhen()).toBe(-3);
    expect(heap.peek()?.label).toBe('-3/3');
    expect(drain(heap)).toEqual(['-3/3', '1/1', '2/4', '4/2', '5/0']);
    expect(heap.peek()).toBeUndefined();
  });

  it('pops equal deadlines first-in first-out (by sequence number)', () => {
    const heap = new TimerHeap<Item>();
    for (let seq = 0; seq < 12; seq++) push(heap, item(10, seq, String(seq)));
    expect(drain(heap)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11']);
  });

  it('orders by deadline first, then by sequence', () => {
    const heap = new TimerHeap<Item>();
    push(heap, item(2, 0, 'late-first'));
    push(heap, item(1, 1, 'early-second'));
    push(heap, item(2, 2, 'late-third'));
    push(heap, item(1, 3, 'early-fourth'));
    expect(drain(heap)).toEqual(['early-second', 'early-fourth', 'late-first', 'late-third']);
  });

  it('matches a stable sort under random pushes and pops, growing past its first capacity', () => {
    const random = mulberry32(99);
    const heap = new TimerHeap<Item>();
    const model: Item[] = [];
    const popped: string[] = [];
    const expected: string[] = [];
    for (let seq = 0; seq < 3000; seq++) {
      if (random() < 0.6 || model.length === 0) {
        // Few distinct deadlines, so ties are frequent.
        const entry = item(Math.floor(random() * 20), seq);
        push(heap, entry);
        model.push(entry);
      } else {
        model.sort(byKey);
        expected.push((model.shift() as Item).label);
        popped.push(heap.pop().label);
      }
    }
    model.sort(byKey);
    expect(popped).toEqual(expected);
    expect(heap.length).toBe(model.length);
    expect(drain(heap)).toEqual(model.map((entry) => entry.label));
  });

  it('keeps fractional deadlines and large sequence numbers exact', () => {
    const heap = new TimerHeap<Item>();
    push(heap, item(0.1 + 0.2, 2 ** 40 + 1, 'b'));
    push(heap, item(0.30000000000000004, 2 ** 40, 'a'));
    push(heap, item(0.3, 2 ** 40 + 2, 'first'));
    expect(drain(heap)).toEqual(['first', 'a', 'b']);
  });
});

describe('TimerHeap retain / clear', () => {
  it('keeps what retain accepts, in heap order again', () => {
    const random = mulberry32(7);
    const heap = new TimerHeap<Item>();
    const items: Item[] = [];
    for (let seq = 0; seq < 500; seq++) {
      const entry = item(Math.floor(random() * 50), seq);
      items.push(entry);
      push(heap, entry);
    }
    const dropped: number[] = [];
    heap.retain((entry) => {
      if (entry._seq % 3 !== 0) return true;
      dropped.push(entry._seq);
      return false;
    });
    const kept = items.filter((entry) => entry._seq % 3 !== 0).sort(byKey);
    expect(dropped.sort((a, b) => a - b)).toEqual(items.filter((entry) => entry._seq % 3 === 0).map((entry) => entry._seq));
    expect(heap.length).toBe(kept.length);
    expect(drain(heap)).toEqual(kept.map((entry) => entry.label));
  });

  it('retains from empty and single-item heaps, and works on afterwards', () => {
    const heap = new TimerHeap<Item>();
    heap.retain(() => true);
    expect(heap.length).toBe(0);
    push(heap, item(3, 0, 'only'));
    heap.retain(() => true);
    expect(drain(heap)).toEqual(['only']);
    for (const [when, seq] of [
      [9, 1],
      [3, 2],
      [6, 3],
    ] as const) {
      push(heap, item(when, seq));
    }
    heap.retain((entry) => entry._when !== 3);
    push(heap, item(1, 4));
    push(heap, item(6, 5));
    expect(drain(heap)).toEqual(['1/4', '6/3', '6/5', '9/1']);
  });

  it('clear() empties the heap, which takes items again', () => {
    const heap = new TimerHeap<Item>();
    for (let seq = 0; seq < 100; seq++) push(heap, item(100 - seq, seq));
    heap.clear();
    expect(heap.length).toBe(0);
    push(heap, item(2, 100));
    push(heap, item(1, 101));
    expect(drain(heap)).toEqual(['1/101', '2/100']);
  });
});
