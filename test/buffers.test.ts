/**
 * Node Buffers cross threads as Buffers: arguments and results of LoopThread calls and pool
 * jobs, nested anywhere in a value (one Buffer twice arrives as one), errors' own properties —
 * and a small Buffer sends its own bytes, not the 8 KiB pool it is a view of.
 */
import { describe, expect, it } from 'vitest';
import { LoopThread, run, toThread, workerFn, type Coroutine } from '../src/index.js';

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
