/**
 * Node Buffers through comlink, across real threads: between two ends that import multiloop
 * (lt.comlinkPort() and wrapComlink, Comlink.proxy callbacks) a Buffer arrives as a Buffer,
 * wherever it sits in a value; a bare comlink end on either side works as before and sees
 * Uint8Arrays; a hostile list of Buffers beside a request disturbs nothing.
 */
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeAdapter from 'comlink/dist/umd/node-adapter.js';
import { describe, expect, it } from 'vitest';
import { run, wrapComlink } from '../src/index.js';
import { ask } from './helpers/comlink.js';
import { useThreads } from './helpers/loop-threads.js';

type Service = typeof import('./fixtures/comlink-buffers.mjs');

const SERVICE = new URL('./fixtures/comlink-buffers.mjs', import.meta.url);
const BARE_CLIENT = new URL('./fixtures/comlink-buffers-bare-client.mjs', import.meta.url);
const BARE_WORKER = new URL('./fixtures/comlink-worker.mjs', import.meta.url);

/** comlink's adapter of Node ports and workers (a CommonJS module whose default export is the function). */
const nodeEndpoint = nodeAdapter as unknown as typeof nodeAdapter.default;

/** The field in which a multiloop end lists the Buffers of a comlink message (src/comlink.ts). */
const BUFFERS = '\u0000multiloop.buffers';

const threads = useThreads();

/** What a Buffer or Uint8Array arrived as, in the service's words. */
function seen(buffer: boolean, hex: string): { buffer: boolean; bytes: true; hex: string } {
  return { buffer, bytes: true, hex };
}

/** A class whose instances comlink copies as plain objects. */
class Frame {
  constructor(readonly payload: Buffer) {}

  size(): number {
    return this.payload.length;
  }
}

describe('Buffers through lt.comlinkPort() and wrapComlink', () => {
  it('deliver a Buffer argument as a Buffer, nested in objects, arrays, Maps, Sets and instances, one Buffer twice as one; a Uint8Array stays one', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'buffers' });
    const described = await run(
      (function* () {
        const svc = wrapComlink<Service>(lt.comlinkPort());
        const top = Buffer.from('0a0b', 'hex');
        const value = {
          top,
          nested: { deep: { list: [Buffer.from('c0de', 'hex'), top] } },
          map: new Map([['k', Buffer.from('ee', 'hex')]]),
          set: new Set([Buffer.from('ff', 'hex')]),
          // comlink delivers an instance of a class as a plain object of its own properties.
          instance: new Frame(Buffer.from('f00d', 'hex')),
          plain: new Uint8Array([1, 2]),
        };
        const result = yield* svc.describe(value);
        svc.close();
        return result;
      })(),
    );
    expect(described).toEqual({
      top: seen(true, '0a0b'),
      nested: seen(true, 'c0de'),
      same: true,
      inMap: seen(true, 'ee'),
      inSet: seen(true, 'ff'),
      inInstance: seen(true, 'f00d'),
      plain: seen(false, '0102'),
    });
  });

  it('deliver a Buffer result, and Buffers nested in a result, as whole Buffers to a wrapComlink caller', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'buffers' });
    const { made, nested } = await run(
      (function* () {
        const svc = wrapComlink<Service>(lt.comlinkPort());
        const result = { made: yield* svc.make('c0ffee'), nested: yield* svc.makeNested('abcd') };
        svc.close();
        return result;
      })(),
    );
    expect(Buffer.isBuffer(made)).toBe(true);
    expect(made).toBeInstanceOf(Buffer);
    expect(made.toString('hex')).toBe('c0ffee');
    expect(made.equals(Buffer.from('c0ffee', 'hex'))).toBe(true);
    expect(Buffer.isBuffer(made.subarray(1))).toBe(true);
    expect(made.subarray(1).toString('hex')).toBe('ffee');
    expect(made.readUInt16BE(0)).toBe(0xc0ff);

    expect(Buffer.isBuffer(nested.one)).toBe(true);
    expect(nested.one.toString('hex')).toBe('abcd');
    expect(nested.list[0]).toBe(nested.one);
    expect(Buffer.isBuffer(nested.list[1])).toBe(true);
    expect(nested.list[1]!.toString('hex')).toBe('ff');
    expect(Buffer.isBuffer(nested.map.get('k'))).toBe(true);
    expect(nested.map.get('k')!.toString('hex')).toBe('ee');
    expect(nested.plain).toBeInstanceOf(Uint8Array);
    expect(Buffer.isBuffer(nested.plain)).toBe(false);
    expect([...nested.plain]).toEqual([1, 2]);
  });

  it('leave a bare comlink client of lt.comlinkPort() as it was: its calls work, a Buffer arrives there and from there as a Uint8Array', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'buffers' });
    // A client in a thread that imports comlink only.
    const bare = new Worker(BARE_CLIENT);
    try {
      const port = lt.comlinkPort();
      bare.postMessage(port, [port]);
      const [report] = (await once(bare, 'message')) as [unknown];
      expect(report).toEqual({
        made: { buffer: false, bytes: true, values: [0xc0, 0xff, 0xee] },
        nested: { buffer: false, same: true, values: [0xab, 0xcd] },
        sent: seen(false, '0102'),
      });
    } finally {
      await bare.terminate();
    }
    // comlink's own wrap in this thread is as bare: nothing of multiloop's is in its way.
    const svc = Comlink.wrap<Service>(nodeEndpoint(lt.comlinkPort()));
    const made = (await svc.make('0102')) as unknown as Uint8Array;
    expect(made).toBeInstanceOf(Uint8Array);
    expect(Buffer.isBuffer(made)).toBe(false);
    expect([...made]).toEqual([1, 2]);
    svc[Comlink.releaseProxy]();
  });

  it('leave a bare Comlink.expose worker as it was through wrapComlink: it gets a Uint8Array for a Buffer, and its Buffer arrives as one', async () => {
    const worker = new Worker(BARE_WORKER);
    try {
      const out = await run(
        (function* () {
          type Api = { describe(value: Uint8Array): { buffer: boolean; bytes: boolean; values: number[] }; make(values: number[]): Uint8Array };
          const api = wrapComlink<Api>(worker);
          const result = { described: yield* api.describe(Buffer.from([7, 8])), made: yield* api.make([9, 10]) };
          api.close();
          return result;
        })(),
      );
      expect(out.described).toEqual({ buffer: false, bytes: true, values: [7, 8] });
      expect(out.made).toBeInstanceOf(Uint8Array);
      expect(Buffer.isBuffer(out.made)).toBe(false);
      expect([...out.made]).toEqual([9, 10]);
    } finally {
      await worker.terminate();
    }
  });

  it('leave a bare Comlink.expose worker as it was with a Comlink.proxy callback: the calls work, Uint8Arrays both ways', async () => {
    const worker = new Worker(BARE_WORKER);
    try {
      const out = await run(
        (function* () {
          type Report = (value: Uint8Array) => Uint8Array;
          type Api = { callBack(report: Report): { buffer: boolean; bytes: boolean; values: number[] } };
          const api = wrapComlink<Api>(worker);
          const heard: Array<{ buffer: boolean; values: number[] }> = [];
          const report = Comlink.proxy((value: Uint8Array) => {
            heard.push({ buffer: Buffer.isBuffer(value), values: [...value] });
            return Buffer.from([1, 2]);
          });
          const answered = yield* api.callBack(report);
          api.close();
          return { answered, heard };
        })(),
      );
      expect(out.heard).toEqual([{ buffer: false, values: [5, 6] }]);
      expect(out.answered).toEqual({ buffer: false, bytes: true, values: [1, 2] });
    } finally {
      await worker.terminate();
    }
  });

  it('ignore a hostile list of Buffers beside a request: what is no Uint8Array, and a list too long; the call is answered and the thread lives on', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'buffers' });
    const port = lt.comlinkPort();
    const describeWith = async (list: (bytes: Uint8Array) => unknown): Promise<unknown> => {
      const bytes = new Uint8Array([0xaa, 0xbb]);
      const reply = await ask(port, { type: 'APPLY', path: ['describeOne'], argumentList: [{ type: 'RAW', value: bytes }], [BUFFERS]: list(bytes) });
      expect(reply.type).toBe('RAW');
      return reply.value;
    };
    const hugeSparse = (bytes: Uint8Array): unknown[] => {
      const list = new Array<unknown>(2 ** 32 - 1);
      list[0] = bytes;
      return list;
    };
    const tooLong = (bytes: Uint8Array): unknown[] => [bytes, ...new Array<number>(100_000).fill(0)];
    try {
      for (const bogus of [() => 5, () => 'list', () => null, () => ({ length: 1, 0: 1 }), (bytes: Uint8Array) => bytes, hugeSparse, tooLong]) {
        expect(await describeWith(bogus)).toEqual(seen(false, 'aabb'));
      }
      // Junk beside a Uint8Array the value holds: the junk is passed over, the Uint8Array made a Buffer.
      const mixed = (bytes: Uint8Array): unknown[] => [5, {}, 'x', null, [bytes], new Uint16Array(2), new ArrayBuffer(2), bytes];
      expect(await describeWith(mixed)).toEqual(seen(true, 'aabb'));
      // A Uint8Array listed that the value does not hold changes nothing.
      expect(await describeWith(() => [new Uint8Array(1)])).toEqual(seen(false, 'aabb'));
      expect(lt.isDead()).toBe(false);
      expect(await ask(port, { type: 'APPLY', path: ['make'], argumentList: [{ type: 'RAW', value: '01' }] })).toMatchObject({ type: 'RAW' });
    } finally {
      port.close();
    }
  });
});

describe('Buffers through Comlink.proxy callbacks', () => {
  it('reach the callback as Buffers, and its Buffer answer reaches the callee as a Buffer (lt.call)', async () => {
    const out = await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'buffers' });
        const got: Array<{ buffer: boolean; hex: string }> = [];
        const report = Comlink.proxy((top: Buffer, value: { nested: Buffer[] }) => {
          for (const item of [top, value.nested[0]!]) got.push({ buffer: Buffer.isBuffer(item), hex: Buffer.from(item).toString('hex') });
          return { made: Buffer.from('0f0f', 'hex'), plain: new Uint8Array([3]) };
        });
        return { answered: yield* lt.call('callBack', report), got };
      })(),
    );
    expect(out.got).toEqual([
      { buffer: true, hex: 'cafe' },
      { buffer: true, hex: 'beef' },
    ]);
    expect(out.answered).toEqual({ answer: seen(true, '0f0f'), plain: seen(false, '03') });
  });
});

describe('Buffers through the ports of Comlink.proxy values passed through comlink itself', () => {
  it('reach a Comlink.proxy callback given to a wrapComlink call as Buffers, and its Buffer answer reaches the callee as one', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'buffers' });
    const out = await run(
      (function* () {
        const svc = wrapComlink<Service>(lt.comlinkPort());
        const got: Array<{ buffer: boolean; hex: string }> = [];
        const report = Comlink.proxy((top: Buffer, value: { nested: Buffer[] }) => {
          for (const item of [top, value.nested[0]!]) got.push({ buffer: Buffer.isBuffer(item), hex: Buffer.from(item).toString('hex') });
          return { made: Buffer.from('0f0f', 'hex'), plain: new Uint8Array([3]) };
        });
        const answered = yield* svc.callBack(report as unknown as Parameters<Service['callBack']>[0]);
        svc.close();
        return { answered, got };
      })(),
    );
    expect(out.got).toEqual([
      { buffer: true, hex: 'cafe' },
      { buffer: true, hex: 'beef' },
    ]);
    expect(out.answered).toEqual({ answer: seen(true, '0f0f'), plain: seen(false, '03') });
  });

  it('carry Buffers both ways through an object a LoopThread export returns as a Comlink.proxy', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'buffers' });
    const tools = await run(
      (function* () {
        const svc = wrapComlink<Service>(lt.comlinkPort());
        const remote = yield* svc.bufferTools();
        svc.close();
        return remote as unknown as Comlink.Remote<{ describeOne(item: Uint8Array): ReturnType<typeof seen>; make(hex: string): Buffer }>;
      })(),
    );
    try {
      expect(await tools.describeOne(Buffer.from('a1b2', 'hex'))).toEqual(seen(true, 'a1b2'));
      expect(await tools.describeOne(new Uint8Array([7]))).toEqual(seen(false, '07'));
      const made = await tools.make('d00d');
      expect(Buffer.isBuffer(made)).toBe(true);
      expect(made.toString('hex')).toBe('d00d');
    } finally {
      tools[Comlink.releaseProxy]();
    }
  });
});
