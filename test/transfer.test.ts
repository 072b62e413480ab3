import { MessageChannel, type Transferable } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { collectTransfers, move } from '../src/transfer.js';
import { workerFn } from '../src/worker-fn.js';
import { startHost, type Host } from './fixtures/xthread-client.js';

function collected(value: unknown): Transferable[] {
  const out: Transferable[] = [];
  collectTransfers(value, out);
  return out;
}

/** Post `value` through a MessageChannel with its collected transfer list; resolves to the copy received. */
async function post<T>(value: T): Promise<T> {
  const { port1, port2 } = new MessageChannel();
  try {
    const received = new Promise<T>((resolve) => port2.once('message', resolve));
    port1.postMessage(value, collected(value));
    return await received;
  } finally {
    port1.close();
  }
}

describe('move', () => {
  it('returns its argument: an ArrayBuffer, a typed array or a DataView', () => {
    const buffer = new ArrayBuffer(4);
    const bytes = new Uint8Array(4);
    const view = new DataView(new ArrayBuffer(2));
    expect(move(buffer)).toBe(buffer);
    expect(move(bytes)).toBe(bytes);
    expect(move(view)).toBe(view);
    expect(collected([buffer, bytes, view])).toEqual([buffer, bytes.buffer, view.buffer]);
  });

  it.each([
    ['number', 42],
    ['string', 'bytes'],
    ['null', null],
    ['undefined', undefined],
    ['Object', { byteLength: 1 }],
    ['Array', [1, 2]],
    ['Map', new Map()],
  ])('refuses a value of type %s with a TypeError naming the type', (type, value) => {
    expect(() => move(value as never)).toThrow(
      new TypeError(`move() needs an ArrayBuffer, a typed array, a DataView or a MessagePort, got ${type}`),
    );
  });

  it('refuses a SharedArrayBuffer and views on one', () => {
    const shared = new SharedArrayBuffer(8);
    const message = 'move() cannot transfer a SharedArrayBuffer: threads share it without copying';
    expect(() => move(shared as never)).toThrow(new TypeError(message));
    expect(() => move(new Int32Array(shared))).toThrow(new TypeError(message));
  });
});

describe('collectTransfers', () => {
  it('collects nothing from buffers that were not moved', () => {
    expect(collected(new ArrayBuffer(8))).toEqual([]);
    expect(collected([new Uint8Array(8), { data: new ArrayBuffer(8) }])).toEqual([]);
  });

  it('finds a moved buffer as the value, under a view, or inside plain arrays and objects', () => {
    const direct = move(new ArrayBuffer(1));
    expect(collected(direct)).toEqual([direct]);

    const floats = move(new Float64Array(2));
    expect(collected(floats)).toEqual([floats.buffer]);

    const deep = move(new ArrayBuffer(3));
    const plain = new ArrayBuffer(3);
    expect(collected({ a: [{ b: deep, c: plain }] })).toEqual([deep]);

    const bare = move(new ArrayBuffer(4));
    expect(collected([Object.assign(Object.create(null) as object, { bare })])).toEqual([bare]);
  });

  it('looks however deep: a chain deeper than any stack, cycles, and a sparse array billions long end', () => {
    const buffer = move(new ArrayBuffer(8));
    let chain: unknown = [buffer];
    for (let i = 0; i < 200_000; i++) chain = i % 2 === 0 ? [chain] : { next: chain };
    expect(collected(chain)).toEqual([buffer]);

    const cyclic = move(new ArrayBuffer(8));
    const a: Record<string, unknown> = {};
    const b: unknown[] = [a];
    a.b = b;
    a.self = a;
    b.push(b, { cyclic });
    expect(collected([a, b])).toEqual([cyclic]);

    const sparse = move(new ArrayBuffer(8));
    const holes: unknown[] = [];
    holes.length = 2 ** 32 - 1;
    holes[2 ** 32 - 2] = { sparse };
    expect(collected({ holes })).toEqual([sparse]);
  });

  it('looks inside Maps and Sets (keys too), not inside class instances', () => {
    class Box {
      constructor(readonly buffer: ArrayBuffer) {}
    }
    const boxed = move(new ArrayBuffer(8));
    expect(collected([new Box(boxed)])).toEqual([]);
    expect(collected(boxed)).toEqual([boxed]);
    const key = move(new ArrayBuffer(1));
    const value = move(new ArrayBuffer(2));
    const item = move(new ArrayBuffer(3));
    expect(new Set(collected([new Map([[key, { value }]]), new Set([[item]])]))).toEqual(new Set([key, value, item]));
  });

  it('lists a buffer once, and a mark is used up by one transfer', () => {
    const buffer = new ArrayBuffer(8);
    move(new Uint8Array(buffer, 0, 4));
    move(new Uint16Array(buffer, 4, 2));
    expect(collected([new Uint8Array(buffer), buffer, { again: buffer }])).toEqual([buffer]);
    expect(collected(buffer)).toEqual([]);
  });

  it('appends to the list it is given', () => {
    const first = move(new ArrayBuffer(1));
    const second = move(new ArrayBuffer(1));
    const out: Transferable[] = [first];
    collectTransfers(second, out);
    expect(out).toEqual([first, second]);
    expect(collected(first)).toEqual([first]);
  });

  it('does not look inside values while no mark is live', async () => {
    vi.resetModules();
    const fresh = await import('../src/transfer.js');
    const looked: string[] = [];
    const value = new Proxy(
      { data: new ArrayBuffer(1) },
      {
        getPrototypeOf: (target) => (looked.push('prototype'), Object.getPrototypeOf(target)),
        get: (target, key) => (looked.push(`get ${String(key)}`), Reflect.get(target, key)),
      },
    );
    const out: Transferable[] = [];
    fresh.collectTransfers(value, out);
    expect(looked).toEqual([]);

    const buffer = fresh.move(new ArrayBuffer(2));
    fresh.collectTransfers(value, out);
    expect(looked).toContain('get data');
    fresh.collectTransfers(buffer, out);
    expect(out).toEqual([buffer]);

    looked.length = 0;
    fresh.collectTransfers(value, out);
    expect(looked).toEqual([]);
  });
});

describe('move across a MessageChannel', () => {
  it('transfers a moved buffer: the original is detached and the receiver has the bytes', async () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const received = await post({ payload: move(bytes) });
    expect(bytes.byteLength).toBe(0);
    expect(bytes.buffer.byteLength).toBe(0);
    expect([...received.payload]).toEqual([1, 2, 3]);
  });

  it('copies a buffer that was not moved', async () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const received = await post({ payload: bytes });
    received.payload[0] = 9;
    expect([...bytes]).toEqual([1, 2, 3]);
    expect([...received.payload]).toEqual([9, 2, 3]);
  });

  it('copies a buffer the second time it is sent', async () => {
    const bytes = new Uint8Array([5]);
    const first = await post(move(bytes));
    expect(first.byteLength).toBe(1);
    expect(bytes.byteLength).toBe(0);
    const again = move(first);
    const second = await post([again]);
    expect(again.byteLength).toBe(0);
    expect([...second[0]!]).toEqual([5]);
    // No mark left: a third send copies.
    const third = await post(second);
    expect(second[0]!.byteLength).toBe(1);
    expect([...third[0]!]).toEqual([5]);
  });
});

describe('move across a worker thread', () => {
  let host: Host;
  const bump = workerFn<[Uint8Array, number, boolean], Uint8Array>(
    new URL('./fixtures/xthread-math.mjs', import.meta.url),
    'bump',
  );

  beforeAll(() => {
    host = startHost();
  });

  afterAll(async () => {
    await host.terminate();
  });

  it('transfers a moved argument and a moved result', async () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const reply = await host.call(bump, move(bytes), 10, true);
    expect(bytes.byteLength).toBe(0);
    expect([...reply.result]).toEqual([11, 12, 13]);
    expect(reply.resultBytesAfterPost).toBe(0);
  });

  it('copies an argument and a result that were not moved', async () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const reply = await host.call(bump, bytes, 10, false);
    expect([...bytes]).toEqual([1, 2, 3]);
    expect([...reply.result]).toEqual([11, 12, 13]);
    expect(reply.resultBytesAfterPost).toBe(3);
  });
});
