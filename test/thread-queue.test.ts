/**
 * ThreadQueue in one thread: asyncio.Queue's behaviour (Python 3.13's shutdown included), items
 * through its shared memory as call arguments cross, the blocking and async forms, bad input.
 * Across real threads: thread-queue-threads.test.ts.
 */
import { MessageChannel } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  QueueEmpty,
  QueueFull,
  QueueShutDown,
  RuntimeError,
  ThreadQueue,
  TimeoutError,
  createTask,
  move,
  newEventLoop,
  registerClass,
  sleep,
  type Coroutine,
  type SharedThreadQueue,
} from '../src/index.js';
import { _setByteLimit } from '../src/internal/threads/queue-memory.js';
import { WIRE, fromWire, toWire } from '../src/internal/wire.js';
import { caught } from './helpers/coroutines.js';
import { mulberry32 } from './helpers/prng.js';
import { expectError, expectThrow, thrownBy } from './helpers/errors.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
const { run } = useFreshLoop(() => (loop = new VirtualLoop()));

class Money {
  constructor(
    readonly cents: number,
    readonly currency: string,
  ) {}
  format(): string {
    return `${(this.cents / 100).toFixed(2)} ${this.currency}`;
  }
}
registerClass(Money);

class Unregistered {
  hello(): string {
    return 'hi';
  }
}

describe('ThreadQueue sizes and order', () => {
  it('returns items first in first out and reports qsize, empty, full, maxsize and name', () => {
    const q = new ThreadQueue<number>({ maxsize: 2, name: 'jobs' });
    expect([q.name, q.maxsize, q.qsize(), q.empty(), q.full()]).toEqual(['jobs', 2, 0, true, false]);
    q.putNowait(1);
    expect([q.qsize(), q.empty(), q.full()]).toEqual([1, false, false]);
    q.putNowait(2);
    expect([q.qsize(), q.empty(), q.full()]).toEqual([2, false, true]);
    expect([q.getNowait(), q.getNowait()]).toEqual([1, 2]);
    const unbounded = new ThreadQueue<number>();
    for (let i = 0; i < 5000; i++) unbounded.putNowait(i);
    expect([unbounded.maxsize, unbounded.qsize(), unbounded.full()]).toEqual([0, 5000, false]);
    for (let i = 0; i < 5000; i++) expect(unbounded.getNowait()).toBe(i);
  });

  it('throws QueueEmpty and QueueFull without waiting, as asyncio.Queue does', () => {
    const q = new ThreadQueue<string>({ maxsize: 1 });
    expectError(thrownBy(() => q.getNowait()), QueueEmpty, '');
    q.putNowait('a');
    expectError(thrownBy(() => q.putNowait('b')), QueueFull, '');
    expect(q.qsize()).toBe(1);
    expect(q.getNowait()).toBe('a');
  });

  it('names itself in its repr', () => {
    const q = new ThreadQueue<number>({ maxsize: 3, name: 'jobs' });
    q.putNowait(1);
    q.putNowait(2);
    q.getNowait();
    expect(String(q)).toBe("<ThreadQueue 'jobs' maxsize=3 qsize=1 tasks=2>");
    q.shutdown();
    expect(String(q)).toBe("<ThreadQueue 'jobs' maxsize=3 qsize=1 tasks=2 shutdown>");
    expect(new ThreadQueue().name).toMatch(/^ThreadQueue-\d+\.\d+$/);
  });

  it('keeps its order while its ring wraps around and grows with records across its end', () => {
    const q = new ThreadQueue<string>();
    const expected: string[] = [];
    const got: string[] = [];
    // Items of uneven sizes, taken while more come: the ring wraps, then grows while wrapped.
    for (let i = 0; i < 3000; i++) {
      const item = `${i}:${'x'.repeat((i * 37) % 301)}`;
      expected.push(item);
      q.putNowait(item);
      if (i % 3 !== 0) got.push(q.getNowait());
    }
    while (!q.empty()) got.push(q.getNowait());
    expect(got).toEqual(expected);
  });
});

describe('ThreadQueue items', () => {
  it('carries items as call arguments cross: primitives, containers, Buffers, errors, registered classes', () => {
    const q = new ThreadQueue();
    const error = Object.assign(new RangeError('bad frame'), { frame: Buffer.from([0xde, 0xad]) });
    const shared = { n: 1 };
    const items: unknown[] = [
      0,
      -0,
      NaN,
      -Infinity,
      2 ** 53,
      '',
      'héllo wörld ✓ 𝄞',
      'x'.repeat(2_000_000),
      true,
      false,
      null,
      undefined,
      12345678901234567890n,
      { a: [1, 'two', { three: 3 }], m: new Map([['k', new Set([1, 2])]]), d: new Date(86_400_000) },
      [shared, shared],
      Buffer.from('bytes'),
      new Uint16Array([1, 2, 65535]),
      error,
      new Money(1250, 'EUR'),
    ];
    for (const item of items) q.putNowait(item);
    const out = items.map(() => q.getNowait());
    expect(out.slice(0, 14)).toEqual(items.slice(0, 14));
    expect(Object.is(out[1], -0)).toBe(true);
    const pair = out[14] as Array<{ n: number }>;
    expect(pair[0]).toBe(pair[1]);
    expect(Buffer.isBuffer(out[15])).toBe(true);
    expect(String(out[15])).toBe('bytes');
    expect(out[16]).toEqual(new Uint16Array([1, 2, 65535]));
    expect(out[17]).toBeInstanceOf(RangeError);
    expect((out[17] as Error).message).toBe('bad frame');
    expect(Buffer.isBuffer((out[17] as { frame: unknown }).frame)).toBe(true);
    expect(out[18]).toBeInstanceOf(Money);
    expect((out[18] as Money).format()).toBe('12.50 EUR');
  });

  it('makes of plain data what structured clone makes of it, edge cases included', () => {
    const q = new ThreadQueue();
    // A hole, as `[1, , 3]` makes one.
    const sparse = [1, 2, 3];
    delete sparse[1];
    const extra = Object.assign([1, 2], { note: 'kept' });
    const shared = { n: 1 };
    const withProtoKey = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as object;
    const withGetter = { get computed(): number { return 42; }, plain: 'x' };
    const deep: Record<string, unknown> = {};
    let cursor = deep;
    for (let i = 0; i < 100; i++) cursor = cursor.next = {} as Record<string, unknown>;
    const cases: unknown[] = [
      { id: 7, name: 'item' },
      [1, 'two', null, undefined, true, false, -0, NaN, Infinity, 2 ** 31, -(2 ** 31), 1.5],
      { 'ключ': 'значение', emoji: '𝄞✓', long: 'é'.repeat(100), ascii: 'a'.repeat(100), empty: '' },
      { 2: 'b', 1: 'a', z: 1, y: 2 },
      sparse,
      extra,
      { a: shared, b: shared },
      withProtoKey,
      withGetter,
      deep,
      Array.from({ length: 100 }, (_, i) => i),
      Object.create(null) as object,
      { nested: [[[{ x: [1, { y: 'z' }] }]]] },
    ];
    for (const item of cases) q.putNowait(item);
    for (const item of cases) expect(q.getNowait()).toStrictEqual(structuredClone(item));
    q.putNowait({ a: shared, b: shared });
    const got = q.getNowait() as { a: object; b: object };
    expect(got.a).toBe(got.b);
    const protoBack = (q.putNowait(withProtoKey), q.getNowait()) as Record<string, unknown>;
    expect(Object.getPrototypeOf(protoBack)).toBe(Object.prototype);
    expect(Object.keys(protoBack)).toEqual(['__proto__', 'a']);
  });

  it('makes of random JSON-like values what structured clone makes of them', () => {
    const next = mulberry32(0x7e57);
    const text = (): string => {
      const alphabet = ['a', 'Z', '0', ' ', 'é', 'ß', '中', '𝄞', '"', '\\', '\u0000'];
      let out = '';
      const length = Math.floor(next() * 24);
      for (let i = 0; i < length; i++) out += alphabet[Math.floor(next() * alphabet.length)];
      return out;
    };
    const value = (depth: number): unknown => {
      const pick = Math.floor(next() * (depth > 3 ? 6 : 8));
      switch (pick) {
        case 0:
          return Math.floor(next() * 2 ** 32) - 2 ** 31;
        case 1:
          return (next() - 0.5) * 1e12;
        case 2:
          return text();
        case 3:
          return next() < 0.5;
        case 4:
          return null;
        case 5:
          return undefined;
        case 6:
          return Array.from({ length: Math.floor(next() * 8) }, () => value(depth + 1));
        default: {
          const object: Record<string, unknown> = {};
          const count = Math.floor(next() * 6);
          for (let i = 0; i < count; i++) object[text()] = value(depth + 1);
          return object;
        }
      }
    };
    const q = new ThreadQueue();
    for (let i = 0; i < 500; i++) {
      const item = value(0);
      q.putNowait(item);
      expect(q.getNowait()).toStrictEqual(structuredClone(item));
    }
  });

  it('detaches a move()d buffer once its item is in, and leaves it marked when the put fails', () => {
    const q = new ThreadQueue<{ pixels: Uint8Array }>({ maxsize: 1 });
    q.putNowait({ pixels: new Uint8Array(1) });
    const pixels = new Uint8Array([1, 2, 3]);
    expect(thrownBy(() => q.putNowait({ pixels: move(pixels) }))).toBeInstanceOf(QueueFull);
    expect(pixels.byteLength).toBe(3);
    q.getNowait();
    // Still marked: the second put moves it without a second move().
    q.putNowait({ pixels });
    expect(pixels.byteLength).toBe(0);
    expect([...q.getNowait().pixels]).toEqual([1, 2, 3]);
  });

  it('refuses an item that cannot cross with a TypeError naming it, and leaves the queue unchanged', () => {
    const q = new ThreadQueue<unknown>({ name: 'jobs' });
    q.putNowait('before');
    const { port1 } = new MessageChannel();
    const cases: Array<[unknown, string]> = [
      [() => 1, 'the item is a function, which cannot be cloned'],
      [{ reply: Symbol('x') }, 'the item.reply is a symbol, which cannot be cloned'],
      [
        { job: new Unregistered() },
        'the item holds an instance of class Unregistered, which would arrive as a plain object without its methods: ' +
          'call registerClass(Unregistered) in a module that both threads import',
      ],
      [
        { reply: new ThreadQueue() },
        "the item holds a SharedArrayBuffer or a ThreadQueue, which cannot travel inside a ThreadQueue's items (they are copied " +
          'through shared memory): send it to the other thread as an argument of a call instead',
      ],
      [
        { port: move(port1) },
        "the item holds a moved MessagePort, which cannot travel inside a ThreadQueue's items (they are copied through shared " +
          'memory): send it to the other thread as an argument of a call instead',
      ],
    ];
    for (const [item, why] of cases) expectThrow(() => q.putNowait(item), TypeError, `cannot put into ThreadQueue 'jobs': ${why}`);
    port1.close();
    expect(String(q)).toBe("<ThreadQueue 'jobs' maxsize=0 qsize=1 tasks=1>");
    expect(q.getNowait()).toBe('before');
  });

  it('refuses, as it arrives, a ThreadQueue record without the shared memory of one', () => {
    const q = new ThreadQueue();
    const { buffers } = q._toWire();
    const forged = [
      { buffers: { control: new SharedArrayBuffer(256), data: new SharedArrayBuffer(4096) }, name: 'x' },
      { buffers: { control: buffers.control, data: new SharedArrayBuffer(4096) }, name: 'x' },
      { buffers, name: 7 },
      null,
    ];
    for (const queue of forged) {
      expectThrow(() => fromWire({ [WIRE]: 'value', value: { [WIRE]: 'threadqueue', queue } }), TypeError, 'a ThreadQueue arrived without the shared memory of one');
    }
  });

  it('is itself again when it comes back from the wire encoding', () => {
    const q = new ThreadQueue();
    expect(fromWire(toWire({ q }, 'argument 1'))).toEqual({ q });
    expect((fromWire(toWire({ q }, 'argument 1')) as { q: unknown }).q).toBe(q);
  });
});

describe('ThreadQueue.put and ThreadQueue.get in a loop', () => {
  it('resumes a waiting get with an item put later', async () => {
    const q = new ThreadQueue<number>();
    const log: string[] = [];
    await run(function* () {
      loop.callLater(0.01, () => {
        log.push(`put at ${loop.time()}`);
        q.putNowait(1);
      });
      const item = yield* q.get();
      log.push(`got ${item} at ${loop.time()}`);
    });
    expect(log).toEqual(['put at 0.01', 'got 1 at 0.01']);
  });

  it('holds a put on a full queue (the task, not the thread: other tasks run) until a get frees a slot', async () => {
    const q = new ThreadQueue<number>({ maxsize: 2 });
    const havePut: number[] = [];
    let ticks = 0;
    await run(function* () {
      const putter = createTask(
        (function* (): Coroutine<void> {
          for (let i = 0; i < 3; i++) {
            yield* q.put(i);
            havePut.push(i);
          }
        })(),
      );
      const ticker = createTask(
        (function* (): Coroutine<void> {
          for (;;) {
            ticks++;
            yield* sleep(0.001);
          }
        })(),
      );
      yield* sleep(0.01);
      expect(havePut).toEqual([0, 1]);
      expect(ticks).toBeGreaterThan(5);
      expect(yield* q.get()).toBe(0);
      yield* sleep(0);
      expect(havePut).toEqual([0, 1, 2]);
      expect([q.getNowait(), q.getNowait()]).toEqual([1, 2]);
      yield* putter;
      ticker.cancel();
    });
  });

  it('hands items to waiting getters in the order they came to wait', async () => {
    const q = new ThreadQueue<string>();
    const got: string[] = [];
    await run(function* () {
      const getters = ['a', 'b', 'c'].map((name) =>
        createTask(
          (function* (): Coroutine<void> {
            got.push(`${name}:${yield* q.get()}`);
          })(),
        ),
      );
      yield* sleep(0);
      for (const item of ['1', '2', '3']) q.putNowait(item);
      for (const getter of getters) yield* getter;
    });
    expect(got).toEqual(['a:1', 'b:2', 'c:3']);
  });

  it('passes the wake-up of a getter cancelled after it was woken to the next getter (asyncio test_get_cancelled_race)', async () => {
    const q = new ThreadQueue<string>();
    await run(function* () {
      const first = createTask(q.get());
      const second = createTask(q.get());
      yield* sleep(0);
      q.putNowait('a');
      first.cancel();
      expect(yield* caught(first)).toBeInstanceOf(CancelledError);
      expect(yield* second).toBe('a');
    });
  });

  it('passes the wake-up of a putter cancelled after it was woken to the next putter', async () => {
    const q = new ThreadQueue<string>({ maxsize: 1 });
    await run(function* () {
      q.putNowait('x');
      const first = createTask(q.put('a'));
      const second = createTask(q.put('b'));
      yield* sleep(0);
      expect(q.getNowait()).toBe('x');
      first.cancel();
      expect(yield* caught(first)).toBeInstanceOf(CancelledError);
      yield* second;
      expect(q.getNowait()).toBe('b');
      expect(q.empty()).toBe(true);
    });
  });

  it('forgets cancelled getters (asyncio test_cancelled_getters_not_being_held_in_self_getters)', async () => {
    const q = new ThreadQueue<number>();
    await run(function* () {
      const getter = createTask(q.get());
      yield* sleep(0);
      expect(String(q)).toMatch(/_getters\[1\]/);
      getter.cancel();
      yield* caught(getter);
      expect(String(q)).not.toMatch(/_getters/);
    });
  });

  it('needs a running loop to wait, and says so', () => {
    const q = new ThreadQueue();
    const get = q.get();
    expectThrow(() => get.next(), RuntimeError, 'no running event loop (outside a loop, use getSync()/putSync()/joinSync() or for await)');
  });
});

describe('ThreadQueue.taskDone and ThreadQueue.join', () => {
  it('waits in join until every item put was marked done', async () => {
    const q = new ThreadQueue<number>();
    const log: string[] = [];
    await run(function* () {
      for (let i = 0; i < 3; i++) q.putNowait(i);
      const worker = createTask(
        (function* (): Coroutine<void> {
          for (let i = 0; i < 3; i++) {
            const item = yield* q.get();
            yield* sleep(0.01);
            log.push(`done ${item}`);
            q.taskDone();
          }
        })(),
      );
      yield* q.join();
      log.push(`joined at ${loop.time().toFixed(2)}`);
      yield* worker;
    });
    expect(log).toEqual(['done 0', 'done 1', 'done 2', 'joined at 0.03']);
  });

  it('returns from join at once when nothing is unfinished', async () => {
    const q = new ThreadQueue();
    await run(function* () {
      yield* q.join();
    });
  });

  it('throws a RangeError from taskDone called too many times (asyncio: ValueError)', () => {
    const q = new ThreadQueue();
    expectThrow(() => q.taskDone(), RangeError, 'task_done() called too many times');
    q.putNowait(1);
    q.taskDone();
    expectThrow(() => q.taskDone(), RangeError, 'task_done() called too many times');
  });
});

describe('ThreadQueue.shutdown (asyncio 3.13)', () => {
  it('refuses puts, lets gets drain, then raises QueueShutDown, waking every getter (test_shutdown_empty / _nonempty)', async () => {
    const q = new ThreadQueue<string>();
    await run(function* () {
      const getters = [createTask(caught(q.get())), createTask(caught(q.get()))];
      yield* sleep(0);
      q.shutdown();
      for (const getter of getters) expect(yield* getter).toBeInstanceOf(QueueShutDown);
      expectError(thrownBy(() => q.putNowait('late')), QueueShutDown, '');
      expect(yield* caught(q.put('late'))).toBeInstanceOf(QueueShutDown);
    });
    const r = new ThreadQueue<string>();
    r.putNowait('left');
    r.shutdown();
    expect(r.getNowait()).toBe('left');
    expectError(thrownBy(() => r.getNowait()), QueueShutDown, '');
  });

  it('wakes waiting putters with QueueShutDown', async () => {
    const q = new ThreadQueue<string>({ maxsize: 1 });
    await run(function* () {
      q.putNowait('a');
      const putters = [createTask(caught(q.put('b'))), createTask(caught(q.put('c')))];
      yield* sleep(0);
      q.shutdown();
      for (const putter of putters) expect(yield* putter).toBeInstanceOf(QueueShutDown);
      expect(q.getNowait()).toBe('a');
    });
  });

  it('with immediate, drops the items, counts them done and releases join (test_shutdown_immediate)', async () => {
    const q = new ThreadQueue<number>();
    await run(function* () {
      q.putNowait(1);
      q.putNowait(2);
      const joiner = createTask(q.join());
      yield* sleep(0);
      q.shutdown(true);
      yield* joiner;
      expect(q.qsize()).toBe(0);
      expectError(thrownBy(() => q.getNowait()), QueueShutDown, '');
      expectThrow(() => q.taskDone(), RangeError, 'task_done() called too many times');
    });
  });

  it('with immediate, keeps unfinished the items got and not done (test_shutdown_immediate_with_unfinished)', async () => {
    const q = new ThreadQueue<number>();
    await run(function* () {
      q.putNowait(1);
      q.putNowait(2);
      expect(q.getNowait()).toBe(1);
      q.shutdown(true);
      const joiner = createTask(q.join());
      yield* sleep(0.01);
      expect(joiner.done()).toBe(false);
      q.taskDone();
      yield* joiner;
      expectThrow(() => q.taskDone(), RangeError, 'task_done() called too many times');
    });
  });

  it('is what Symbol.dispose does', () => {
    const q = new ThreadQueue<number>();
    q.putNowait(1);
    q[Symbol.dispose]();
    expectError(thrownBy(() => q.putNowait(2)), QueueShutDown, '');
    expect(q.getNowait()).toBe(1);
  });
});

describe('ThreadQueue outside a loop', () => {
  it('reads with for await until shut down and drained', async () => {
    const q = new ThreadQueue<string>();
    setTimeout(() => {
      q.putNowait('a');
      q.putNowait('b');
      setTimeout(() => {
        q.putNowait('c');
        q.shutdown();
      }, 5);
    }, 5);
    const got: string[] = [];
    for await (const item of q) got.push(item);
    expect(got).toEqual(['a', 'b', 'c']);
  });

  it('blocks the thread in getSync and putSync, each with a timeout', () => {
    const q = new ThreadQueue<number>({ maxsize: 1, name: 'jobs' });
    q.putSync(1, 0);
    expectThrow(() => q.putSync(2, 0.02), TimeoutError, "no free slot in ThreadQueue 'jobs' within 0.02 seconds");
    expect(q.qsize()).toBe(1);
    expect(q.getSync(null)).toBe(1);
    expectThrow(() => q.getSync(0.02), TimeoutError, "no item in ThreadQueue 'jobs' within 0.02 seconds");
    q.shutdown();
    expectError(thrownBy(() => q.getSync()), QueueShutDown, '');
    expectError(thrownBy(() => q.putSync(3)), QueueShutDown, '');
  });

  it('blocks the thread in joinSync until every item is done, and times out leaving them unfinished', () => {
    const q = new ThreadQueue<number>({ name: 'jobs' });
    q.joinSync(0);
    q.putSync(1);
    q.putSync(2);
    expect(q.getSync()).toBe(1);
    q.taskDone();
    expectThrow(() => q.joinSync(0.02), TimeoutError, "1 item(s) of ThreadQueue 'jobs' not done within 0.02 seconds");
    expect(String(q)).toBe("<ThreadQueue 'jobs' maxsize=0 qsize=1 tasks=1>");
    expect(q.getSync()).toBe(2);
    q.taskDone();
    q.joinSync();
    q.joinSync(null);
    expectThrow(() => q.joinSync(-1), RangeError, 'timeout must be a non-negative number of seconds, got -1');
  });

  it('refuses a bad timeout', () => {
    const q = new ThreadQueue();
    expectThrow(() => q.getSync(-1), RangeError, 'timeout must be a non-negative number of seconds, got -1');
    expectThrow(() => q.getSync(NaN), RangeError, 'timeout must be a non-negative number of seconds, got NaN');
    expectThrow(() => q.putSync(1, '1' as never), TypeError, "timeout must be a number of seconds or null, got '1'");
    expect(q.qsize()).toBe(0);
  });
});

describe('ThreadQueue blocking calls where a loop runs', () => {
  const messages = {
    getSync: 'getSync() would block the event loop running in this thread: in a loop, use yield* queue.get() or queue.getNowait(); getSync() is for code outside any loop',
    putSync: 'putSync() would block the event loop running in this thread: in a loop, use yield* queue.put(item) or queue.putNowait(item); putSync() is for code outside any loop',
    joinSync: 'joinSync() would block the event loop running in this thread: in a loop, use yield* queue.join(); joinSync() is for code outside any loop',
  };

  /** Each blocking call on a queue holding one unfinished item: the errors, in order. */
  function blockingCalls(q: ThreadQueue<number>): unknown[] {
    // None of them would wait here (an item to get, no bound, a 0 timeout): refused all the same.
    return [thrownBy(() => q.getSync(0)), thrownBy(() => q.putSync(2, 0)), thrownBy(() => q.joinSync(0))];
  }

  function expectRefused(errors: unknown[]): void {
    expect(errors).toHaveLength(3);
    expectError(errors[0], RuntimeError, messages.getSync);
    expectError(errors[1], RuntimeError, messages.putSync);
    expectError(errors[2], RuntimeError, messages.joinSync);
  }

  it('raises a RuntimeError from getSync, putSync and joinSync in a task, saying what to use, and leaves the queue as it was', async () => {
    const q = new ThreadQueue<number>({ name: 'jobs' });
    q.putNowait(1);
    const errors = await run(function* () {
      return blockingCalls(q);
    });
    expectRefused(errors);
    expect(String(q)).toBe("<ThreadQueue 'jobs' maxsize=0 qsize=1 tasks=1>");
  });

  it("raises the same in a callback of the running loop and in a Node timer's callback while it runs", async () => {
    const q = new ThreadQueue<number>();
    q.putNowait(1);
    let inCallback: unknown[] = [];
    let inTimer: unknown[] = [];
    const real = newEventLoop();
    try {
      await real.runUntilComplete(
        (function* (): Coroutine<void> {
          real.callSoon(() => (inCallback = blockingCalls(q)));
          // A Node timer fires while the loop waits in libuv: the loop is running all the same.
          const fired = real.createFuture<void>();
          setTimeout(() => {
            inTimer = blockingCalls(q);
            fired.setResult();
          }, 5);
          yield* fired;
        })(),
      );
    } finally {
      real.close();
    }
    expectRefused(inCallback);
    expectRefused(inTimer);
    expect(q.qsize()).toBe(1);
    // Once the loop has stopped, the thread may block again.
    expect(q.getSync(0)).toBe(1);
  });
});

describe('ThreadQueue waiters whose loop was closed', () => {
  /** Run `main` on a loop of its own until it returns, then close that loop, its tasks still waiting. */
  async function runAndClose(main: () => Coroutine<void>): Promise<void> {
    const dead = new VirtualLoop();
    await dead.runUntilComplete(main());
    dead.close();
  }

  it('drops them: a later putNowait, getNowait and taskDone in this thread raise nothing', async () => {
    const gets = new ThreadQueue<number>();
    const puts = new ThreadQueue<number>({ maxsize: 1 });
    const joins = new ThreadQueue<number>();
    puts.putNowait(0);
    joins.putNowait(0);
    await runAndClose(function* () {
      createTask(gets.get());
      createTask(puts.put(1));
      createTask(joins.join());
      yield* sleep(0);
    });
    expect([String(gets), String(puts)]).toEqual([expect.stringMatching(/_getters\[1\]/), expect.stringMatching(/_putters\[1\]/)]);
    gets.putNowait(7);
    expect(puts.getNowait()).toBe(0);
    expect(joins.getNowait()).toBe(0);
    joins.taskDone();
    expect([String(gets), String(puts)]).toEqual([expect.not.stringMatching(/_getters/), expect.not.stringMatching(/_putters/)]);
    expect([gets.getNowait(), puts.qsize(), joins.qsize()]).toEqual([7, 0, 0]);
  });

  it('drops them before the waiters of a live loop, which get what comes', async () => {
    const q = new ThreadQueue<number>();
    await runAndClose(function* () {
      createTask(q.get());
      createTask(q.get());
      yield* sleep(0);
    });
    const got = await run(function* () {
      const first = createTask(q.get());
      const second = createTask(q.get());
      yield* sleep(0);
      loop.callLater(0.01, () => {
        q.putNowait(1);
        q.putNowait(2);
      });
      return [yield* first, yield* second];
    });
    expect(got).toEqual([1, 2]);
    expect(String(q)).toBe(`<ThreadQueue '${q.name}' maxsize=0 qsize=0 tasks=2>`);
  });
});

describe('ThreadQueue.share and ThreadQueue.attach', () => {
  it('makes a structured-cloneable value that attach turns into the same queue (this thread: the same object)', () => {
    const q = new ThreadQueue<number>({ maxsize: 3, name: 'jobs' });
    const shared = q.share();
    expect(ThreadQueue.attach(shared)).toBe(q);
    const cloned = structuredClone(shared);
    expect(ThreadQueue.attach(cloned)).toBe(q);
    q.putNowait(1);
    expect(ThreadQueue.attach<number>(cloned).getNowait()).toBe(1);
  });

  it('makes the same queue of a value that crossed a MessagePort', async () => {
    const q = new ThreadQueue<number>({ name: 'jobs' });
    const { port1, port2 } = new MessageChannel();
    const arrived = new Promise<unknown>((resolve) => port2.once('message', resolve));
    port1.postMessage({ jobs: q.share(), raw: q });
    const message = (await arrived) as { jobs: SharedThreadQueue; raw: unknown };
    port1.close();
    expect(ThreadQueue.attach(message.jobs)).toBe(q);
    expect(message.raw).toEqual({});
  });

  it('refuses anything else with a TypeError naming what it got', () => {
    const q = new ThreadQueue();
    const { buffers } = q._toWire();
    const notShared = [
      [undefined, 'ThreadQueue.attach() takes what queue.share() returned, got undefined'],
      [null, 'ThreadQueue.attach() takes what queue.share() returned, got null'],
      ['jobs', "ThreadQueue.attach() takes what queue.share() returned, got 'jobs'"],
      [{ buffers, name: 'jobs' }, /^ThreadQueue\.attach\(\) takes what queue\.share\(\) returned, got \{ buffers: /],
      [
        structuredClone({ q }).q,
        'ThreadQueue.attach() takes what queue.share() returned, got {} (a ThreadQueue given as it is to a thread multiloop did not start arrives as {}: give it queue.share())',
      ],
    ] as const;
    for (const [value, message] of notShared) expectThrow(() => ThreadQueue.attach(value as never), TypeError, message);
    const forged = [
      { __sharedThreadQueue: true, buffers: { control: new SharedArrayBuffer(256), data: new SharedArrayBuffer(4096) }, name: 'x' },
      { __sharedThreadQueue: true, buffers: { control: buffers.control, data: new SharedArrayBuffer(4096) }, name: 'x' },
      { __sharedThreadQueue: true, buffers, name: 7 },
      { __sharedThreadQueue: true, buffers, name: '' },
      { __sharedThreadQueue: true },
    ];
    for (const value of forged) {
      expectThrow(() => ThreadQueue.attach(value as never), TypeError, 'ThreadQueue.attach() got a shared queue without the shared memory of one (was it made by queue.share()?)');
    }
  });
});

describe('ThreadQueue byte limit', () => {
  /** A queue made under a byte limit of 64 KiB (1 GiB but in tests). */
  function small(name: string): ThreadQueue<string> {
    const before = _setByteLimit(1 << 16);
    try {
      return new ThreadQueue<string>({ name });
    } finally {
      _setByteLimit(before);
    }
  }
  /** A string item whose record takes `bytes` bytes in the queue (8 of them its header). */
  const taking = (bytes: number): string => 'x'.repeat(bytes - 8);

  it('says full() once its items fill the byte limit, and names the limit in QueueFull when an item does not fit', () => {
    const q = small('bytes');
    for (let i = 0; i < 7; i++) q.putNowait(taking(8192));
    expect(q.full()).toBe(false);
    // 8,192 bytes are left: a larger item does not fit (full() says false: a smaller one would).
    expectThrow(
      () => q.putNowait(taking(8200)),
      QueueFull,
      "no room in ThreadQueue 'bytes' for the item: it takes 8200 bytes, and the items there take 57344 of the 65536 bytes they may take",
    );
    q.putNowait(taking(8192));
    expect(q.full()).toBe(true);
    expectThrow(() => q.putNowait(''), QueueFull, "no room in ThreadQueue 'bytes' for the item: it takes 8 bytes, and the items there take 65536 of the 65536 bytes they may take");
    expect(q.getNowait()).toHaveLength(8184);
    expect(q.full()).toBe(false);
    q.putNowait(taking(8192));
    expect(q.qsize()).toBe(8);
  });

  it('refuses at once, with a RangeError, an item larger than the byte limit (put never waits for it), and the queue is unchanged', async () => {
    const q = small('bytes');
    q.putNowait('before');
    // 65,532 bytes of string and its 8-byte header, padded: 65,544 bytes, past the limit.
    const big = 'x'.repeat(65532);
    const why = "cannot put into ThreadQueue 'bytes': the item takes 65544 bytes there, more than the 65536 bytes its items may take";
    expectThrow(() => q.putNowait(big), RangeError, why);
    expectThrow(() => q.putSync(big), RangeError, why);
    await run(function* () {
      expectError(yield* caught(q.put(big)), RangeError, why);
    });
    expect(q.getNowait()).toBe('before');
    // The largest item that fits fills the queue alone.
    q.putNowait(taking(65536));
    expect(q.full()).toBe(true);
  });

  it('holds a put while the items there leave no room for it, until gets free enough', async () => {
    const q = small('bytes');
    for (let i = 0; i < 8; i++) q.putNowait(taking(8192));
    await run(function* () {
      const putting = createTask(q.put(taking(16384)));
      yield* sleep(0.01);
      expect(putting.done()).toBe(false);
      q.getNowait();
      yield* sleep(0.01);
      // 8,192 bytes free: not yet.
      expect(putting.done()).toBe(false);
      q.getNowait();
      yield* putting;
    });
    expect(q.qsize()).toBe(7);
  });
});

describe('new ThreadQueue options', () => {
  it('refuses a maxsize that is not a non-negative integer, naming the option', () => {
    for (const maxsize of [-1, 1.5, NaN, Infinity, 2 ** 31]) {
      expectThrow(() => new ThreadQueue({ maxsize }), RangeError, `options.maxsize must be a non-negative integer (0: no bound), got ${maxsize}`);
    }
    expectThrow(() => new ThreadQueue({ maxsize: '3' as never }), TypeError, "options.maxsize must be a number, got '3'");
  });

  it('refuses a name that is not a non-empty string, and options that are not an object', () => {
    expectThrow(() => new ThreadQueue({ name: 3 as never }), TypeError, 'options.name must be a non-empty string, got 3');
    expectThrow(() => new ThreadQueue({ name: '' }), TypeError, "options.name must be a non-empty string, got ''");
    expectThrow(() => new ThreadQueue(null as never), TypeError, 'ThreadQueue() options must be an object, got null');
    expectThrow(() => new ThreadQueue(5 as never), TypeError, 'ThreadQueue() options must be an object, got 5');
  });
});
