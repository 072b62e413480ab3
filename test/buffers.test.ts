/**
 * Node Buffers cross threads as Buffers: arguments and results of LoopThread calls and pool
 * jobs, nested anywhere in a value (one Buffer twice arrives as one), errors' own properties —
 * and a small Buffer sends its own bytes, not the 8 KiB pool it is a view of. What comlink
 * messages carry beside their values: the Buffers found in them, made Buffers again on arrival.
 */
import { describe, expect, it } from 'vitest';
import { LoopThread, run, toThread, workerFn, type Coroutine } from '../src/index.js';
import { buffersIn, makeBuffers } from '../src/internal/buffers.js';

const SERVICE = new URL('./fixtures/buffers-service.mjs', import.meta.url);

interface Seen {
  buffer: boolean;
  text: string;
  memory: number;
}

describe('Buffer across threads', () => {
  it('crosses a LoopThread call both ways as a Buffer, nested, shared references kept, errors own properties too', async () => {
    const out = await run(
      (function* (): Coroutine<{ seen: Record<string, unknown>; made: { made: Buffer; list: Buffer[] }; error: unknown }> {
        const lt = yield* LoopThread.start(SERVICE);
        try {
          const one = Buffer.from('one');
          const seen = yield* lt.call<Record<string, unknown>>('describe', { one, nested: { deep: [Buffer.from('deep'), one] }, map: new Map([['k', Buffer.from('v')]]) });
          const made = yield* lt.call<{ made: Buffer; list: Buffer[] }>('make', 'back');
          let error: unknown = null;
          try {
            yield* lt.call('fail');
          } catch (caught) {
            error = caught;
          }
          return { seen, made, error };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    expect(out.seen).toEqual({
      one: { buffer: true, text: 'one', memory: 3 },
      nested: { buffer: true, text: 'deep', memory: 4 },
      same: true,
      inMap: true,
    });
    expect(Buffer.isBuffer(out.made.made)).toBe(true);
    expect(out.made.made.toString()).toBe('back');
    expect(Buffer.isBuffer(out.made.list[0])).toBe(true);
    expect(out.error).toBeInstanceOf(RangeError);
    expect(Buffer.isBuffer((out.error as { frame: unknown }).frame)).toBe(true);
    expect([...(out.error as { frame: Buffer }).frame]).toEqual([0xde, 0xad]);
  });

  it('crosses into and out of a pool job as a Buffer', async () => {
    const out = await run(
      (function* (): Coroutine<{ seen: { one: Seen }; made: { made: Buffer } }> {
        const one = Buffer.from('pooled');
        const seen = yield* toThread(workerFn<[unknown], { one: Seen }>(SERVICE, 'describe'), { one, nested: { deep: [one, one] }, map: new Map([['k', one]]) });
        const made = yield* toThread(workerFn<[string], { made: Buffer }>(SERVICE, 'make'), 'from the pool');
        return { seen, made };
      })(),
    );
    expect(out.seen.one).toEqual({ buffer: true, text: 'pooled', memory: 6 });
    expect(Buffer.isBuffer(out.made.made)).toBe(true);
    expect(out.made.made.toString()).toBe('from the pool');
  });
});

describe('buffersIn', () => {
  it('finds each Buffer once: the value itself, in arrays, plain objects, Map keys and values, Set items, through cycles', () => {
    const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map((text) => Buffer.from(text));
    const cyclic: Record<string, unknown> = { list: [a, a, { deep: b }], map: new Map<unknown, unknown>([[c, d]]), set: new Set([e]) };
    cyclic.self = cyclic;
    (cyclic.list as unknown[]).push(cyclic);
    const found = buffersIn(cyclic);
    expect(found?.map(String).sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(buffersIn(a)).toEqual([a]);
    expect(buffersIn(Object.assign(Object.create(null) as object, { a }))).toEqual([a]);
  });

  it('is null for values without Buffers, Uint8Arrays included, and for Buffers that structured clone would not copy (own properties of errors and typed arrays)', () => {
    const error = Object.assign(new RangeError('bad frame'), { frame: Buffer.from('x') });
    const bytes = Object.assign(new Uint8Array(2), { frame: Buffer.from('x') });
    for (const value of [undefined, 7, 'text', [1, 'two', null], { bytes: new Uint8Array(2) }, new Date(0), error, bytes]) {
      expect(buffersIn(value)).toBeNull();
    }
  });

  it("looks into what structured clone copies of an instance of a class (its own properties) and of an error (its cause)", () => {
    class Frame {
      constructor(readonly payload: Buffer) {}
      size(): number {
        return this.payload.length;
      }
    }
    const payload = Buffer.from('payload');
    expect(buffersIn({ frame: new Frame(payload) })).toEqual([payload]);
    const cause = Buffer.from('cause');
    expect(buffersIn([new Error('bad frame', { cause })])).toEqual([cause]);
  });

  it('is null for a value of more than 100,000 objects, and for one whose reading throws', () => {
    // 100,000 objects in all: the outer array, the Buffer, the inner array and what it holds.
    const many = Array.from({ length: 100_000 - 3 }, () => ({}));
    expect(buffersIn([Buffer.from('x'), many])).toHaveLength(1);
    many.push({});
    expect(buffersIn([Buffer.from('x'), many])).toBeNull();
    const throwing = {
      a: Buffer.from('a'),
      get b(): never {
        throw new Error('unreadable');
      },
    };
    expect(buffersIn(throwing)).toBeNull();
    // The walk after a failed one starts afresh.
    expect(buffersIn({ a: Buffer.from('a') })).toHaveLength(1);
  });

  it('walks a value read by a getter during another walk on its own', () => {
    const inner = Buffer.from('inner');
    const outer = Buffer.from('outer');
    const value = {
      outer,
      get nested(): unknown {
        expect(buffersIn({ inner })).toEqual([inner]);
        return null;
      },
    };
    expect(buffersIn(value)).toEqual([outer]);
  });
});

describe('makeBuffers', () => {
  it('makes each listed Uint8Array a whole Buffer in place, and passes over anything else', () => {
    const bytes = new Uint8Array([0xc0, 0xff, 0xee]);
    const other = new Uint16Array(1);
    makeBuffers([5, 'x', null, {}, [bytes], other, new ArrayBuffer(1), bytes]);
    expect(Buffer.isBuffer(bytes)).toBe(true);
    expect(bytes).toBeInstanceOf(Buffer);
    const buffer = bytes as Buffer;
    expect(buffer.toString('hex')).toBe('c0ffee');
    expect(buffer.equals(Buffer.from('c0ffee', 'hex'))).toBe(true);
    expect(Buffer.isBuffer(buffer.subarray(1))).toBe(true);
    expect(Object.getPrototypeOf(other)).toBe(Uint16Array.prototype);
  });

  it('ignores what is not an array, and an array longer than buffersIn ever makes', () => {
    const bytes = new Uint8Array(1);
    for (const list of [bytes, { 0: bytes, length: 1 }, 'list', 3, [bytes, ...new Array<number>(100_000).fill(0)]]) {
      makeBuffers(list);
      expect(Buffer.isBuffer(bytes)).toBe(false);
    }
  });
});
