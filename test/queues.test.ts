import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  QueueEmpty,
  QueueFull,
  QueueShutDown,
  RuntimeError,
  createTask,
  sleep,
  type Coroutine,
} from '../src/index.js';
import { LifoQueue, PriorityQueue, Queue } from '../src/queues.js';
import { caught, settle } from './helpers/coroutines.js';
import { expectError, thrownBy } from './helpers/errors.js';
import { runOnFreshLoop, useFreshLoop } from './helpers/loops.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
const { run } = useFreshLoop(() => (loop = new VirtualLoop()));

const classes = [
  ['Queue', Queue, [1, 3, 2]],
  ['LifoQueue', LifoQueue, [2, 3, 1]],
  ['PriorityQueue', PriorityQueue, [1, 2, 3]],
] as const;

describe('Queue sizes and order', () => {
  for (const [name, QueueClass, order] of classes) {
    it(`${name} returns 1, 3, 2 as ${order.join(', ')} (QUE-01)`, () => {
      const q = new QueueClass<number>();
      for (const item of [1, 3, 2]) q.putNowait(item);
      expect([q.getNowait(), q.getNowait(), q.getNowait()]).toEqual(order);
    });

    it(`${name} reports empty, full, qsize and maxsize (QUE-01)`, () => {
      const q = new QueueClass<number>(2);
      expect([q.maxsize, q.qsize(), q.empty(), q.full()]).toEqual([2, 0, true, false]);
      q.putNowait(1);
      expect([q.qsize(), q.empty(), q.full()]).toEqual([1, false, false]);
      q.putNowait(2);
      expect([q.qsize(), q.empty(), q.full()]).toEqual([2, false, true]);
      const unbounded = new QueueClass<number>();
      for (let i = 0; i < 1000; i++) unbounded.putNowait(i);
      expect([unbounded.maxsize, unbounded.qsize(), unbounded.full()]).toEqual([0, 1000, false]);
      expect(new QueueClass(-1).full()).toBe(false);
    });

    it(`${name} throws QueueEmpty and QueueFull without waiting (QUE-01)`, () => {
      const q = new QueueClass<string>(1);
      expectError(thrownBy(() => q.getNowait()), QueueEmpty, '');
      q.putNowait('a');
      expectError(thrownBy(() => q.putNowait('b')), QueueFull, '');
      expect(q.qsize()).toBe(1);
      expect(q.getNowait()).toBe('a');
    });
  }

  it('treats a fractional maxsize as Python does (QUE-01)', () => {
    const q = new Queue<number>(1.3);
    q.putNowait(1);
    q.putNowait(2);
    expect(q.full()).toBe(true);
    expect(thrownBy(() => q.putNowait(3))).toBeInstanceOf(QueueFull);
  });

  it('rejects a maxsize that is not a number', () => {
    expect(() => new Queue('3' as never)).toThrow(TypeError);
    expect(() => new Queue('3' as never)).toThrow("maxsize must be a number, got '3'");
  });

  it('blocks a putter on a full queue and resumes it one iteration after a get (QUE-01)', async () => {
    const q = new Queue<number>(2);
    const havePut: number[] = [];
    await run(function* () {
      const putter = createTask(
        (function* (): Coroutine<boolean> {
          for (let i = 0; i < 3; i++) {
            yield* q.put(i);
            havePut.push(i);
          }
          return true;
        })(),
      );
      yield* sleep(0);
      yield* sleep(0);
      expect(havePut).toEqual([0, 1]);
      expect(yield* q.get()).toBe(0);
      yield* sleep(0);
      expect(havePut).toEqual([0, 1, 2]);
      expect([q.getNowait(), q.getNowait()]).toEqual([1, 2]);
      expect(putter.result()).toBe(true);
    });
  });
});

describe('Queue.get and Queue.put', () => {
  it('resumes a blocked get with an item put later (QUE-02)', async () => {
    const q = new Queue<number>();
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

  it('resumes a blocked put after getNowait (QUE-02)', async () => {
    const q = new Queue<number>(1);
    const log: string[] = [];
    await run(function* () {
      q.putNowait(1);
      loop.callLater(0.01, () => log.push(`took ${q.getNowait()}`));
      yield* q.put(2);
      log.push(`put 2, queue ${q}`);
    });
    expect(log).toEqual(['took 1', 'put 2, queue <Queue maxsize=1 _queue=[2] tasks=2>']);
  });

  it('wakes a queued putter when a get frees a slot (QUE-02)', async () => {
    const q = new Queue<string>(1);
    await run(function* () {
      q.putNowait('a');
      const putter = createTask(q.put('b'));
      yield* sleep(0);
      expect(String(q)).toBe("<Queue maxsize=1 _queue=['a'] _putters[1] tasks=1>");
      expect(yield* q.get()).toBe('a');
      yield* putter;
      expect(putter.result()).toBe(undefined);
      expect(q.getNowait()).toBe('b');
    });
  });

  it('delivers the items of blocked putters in order (QUE-02)', async () => {
    const q = new Queue<string>(1);
    await run(function* () {
      q.putNowait('x');
      const putters = [createTask(q.put('a')), createTask(q.put('b'))];
      yield* sleep(0);
      expect(q.getNowait()).toBe('x');
      expect(yield* q.get()).toBe('a');
      expect(yield* q.get()).toBe('b');
      yield* settle(putters);
      expect(putters.map((putter) => putter.done())).toEqual([true, true]);
    });
  });

  it('hands a later put to a waiting getter, getters in FIFO order (QUE-02)', async () => {
    const q = new Queue<number>();
    const log: string[] = [];
    function* getter(name: string): Coroutine<void> {
      log.push(`${name} got ${yield* q.get()}`);
    }
    await run(function* () {
      const getters = [createTask(getter('g1')), createTask(getter('g2'))];
      yield* sleep(0);
      expect(String(q)).toBe('<Queue maxsize=0 _getters[2]>');
      yield* q.put(10);
      yield* q.put(20);
      yield* settle(getters);
    });
    expect(log).toEqual(['g1 got 10', 'g2 got 20']);
  });

  it('lets a producer and a consumer share a Queue(1) without deadlock (QUE-02)', async () => {
    const q = new Queue<number>(1);
    const log: string[] = [];
    await run(function* () {
      const producer = createTask(
        (function* (): Coroutine<void> {
          for (let i = 0; i < 5; i++) {
            yield* q.put(i);
            log.push(`put ${i}`);
          }
        })(),
      );
      const consumer = createTask(
        (function* (): Coroutine<void> {
          for (let i = 0; i < 5; i++) log.push(`got ${yield* q.get()}`);
        })(),
      );
      yield* settle([producer, consumer]);
      expect([producer.exception(), consumer.exception()]).toEqual([null, null]);
    });
    expect(log).toEqual(['put 0', 'got 0', 'put 1', 'got 1', 'put 2', 'got 2', 'put 3', 'got 3', 'put 4', 'got 4']);
  });

  it('lets a getter drain a Queue(2) while four putters wait (QUE-02)', async () => {
    const q = new Queue<number>(2);
    const got: number[] = [];
    await run(function* () {
      const putters = [0, 1, 2, 3].map((i) => createTask(q.put(i)));
      const drainer = createTask(
        (function* (): Coroutine<void> {
          yield* sleep(0);
          for (let i = 0; i < 4; i++) got.push(yield* q.get());
        })(),
      );
      yield* settle([...putters, drainer]);
      expect(putters.every((putter) => putter.done() && !putter.cancelled())).toBe(true);
    });
    expect(got).toEqual([0, 1, 2, 3]);
  });
});

describe('Queue cancellation', () => {
  it('drops a cancelled getter so the next item goes to a live one (QUE-03)', async () => {
    const q = new Queue<string>();
    await run(function* () {
      const t1 = createTask(q.get());
      const t2 = createTask(q.get());
      yield* sleep(0);
      t1.cancel();
      yield* sleep(0);
      expect(t1.cancelled()).toBe(true);
      expect(String(q)).toBe('<Queue maxsize=0 _getters[1]>');
      yield* q.put('a');
      yield* sleep(0);
      expect(t2.result()).toBe('a');
      expect(String(q)).toBe('<Queue maxsize=0 tasks=1>');
    });
  });

  it('loses no item when a woken getter is cancelled before it runs (QUE-03)', async () => {
    const q = new Queue<number>();
    await run(function* () {
      let reader = createTask(q.get());
      yield* sleep(0);
      q.putNowait(1);
      q.putNowait(2);
      reader.cancel();
      expect(yield* caught(reader)).toBeInstanceOf(CancelledError);
      reader = createTask(q.get());
      expect(yield* reader).toBe(1);
      expect(q.getNowait()).toBe(2);
    });
  });

  it('passes the wake-up of a cancelled woken getter to the next getter (QUE-03)', async () => {
    const q = new Queue<number>();
    await run(function* () {
      const readers = [createTask(q.get()), createTask(q.get()), createTask(q.get())];
      yield* sleep(0);
      q.putNowait(1);
      q.putNowait(2);
      readers[0]!.cancel();
      expect(yield* caught(readers[0]!)).toBeInstanceOf(CancelledError);
      yield* readers[2]!;
      expect(new Set([readers[1]!.result(), readers[2]!.result()])).toEqual(new Set([1, 2]));
      expect(q.empty()).toBe(true);
    });
  });

  it('puts the item of a cancelled woken putter exactly once, when retried (QUE-03)', async () => {
    const q = new Queue<number>(1);
    await run(function* () {
      q.putNowait(1);
      let writer = createTask(q.put(2));
      yield* sleep(0);
      expect(q.getNowait()).toBe(1);
      writer.cancel();
      expect(yield* caught(writer)).toBeInstanceOf(CancelledError);
      expect(q.qsize()).toBe(0);
      writer = createTask(q.put(2));
      yield* writer;
      expect(q.getNowait()).toBe(2);
      expect(q.qsize()).toBe(0);
    });
  });

  it('passes the wake-up of a cancelled woken putter to the next putter (QUE-03)', async () => {
    const q = new Queue<string>(1);
    await run(function* () {
      q.putNowait('x');
      const first = createTask(q.put('a'));
      const second = createTask(q.put('b'));
      yield* sleep(0);
      expect(q.getNowait()).toBe('x');
      first.cancel();
      yield* settle([first, second]);
      expect(first.cancelled()).toBe(true);
      expect(second.exception()).toBe(null);
      expect(String(q)).toBe("<Queue maxsize=1 _queue=['b'] tasks=2>");
    });
  });

  it('forgets cancelled getters and putters that were never woken (QUE-03)', async () => {
    const q = new Queue<number>(1);
    await run(function* () {
      const getters = [createTask(q.get()), createTask(q.get())];
      yield* sleep(0);
      for (const getter of getters) getter.cancel();
      yield* sleep(0);
      expect(String(q)).toBe('<Queue maxsize=1>');
      q.putNowait(1);
      const putters = [createTask(q.put(2)), createTask(q.put(3))];
      yield* sleep(0);
      for (const putter of putters) putter.cancel();
      yield* sleep(0);
      expect(String(q)).toBe('<Queue maxsize=1 _queue=[1] tasks=1>');
      expect([...getters, ...putters].map((task) => task.cancelled())).toEqual([true, true, true, true]);
    });
  });
});

describe('Queue.taskDone and Queue.join', () => {
  it('refuses more taskDone() calls than items (QUE-04)', () => {
    const q = new Queue<number>();
    expectError(thrownBy(() => q.taskDone()), RangeError, 'task_done() called too many times');
    q.putNowait(1);
    q.getNowait();
    q.taskDone();
    expectError(thrownBy(() => q.taskDone()), RangeError, 'task_done() called too many times');
  });

  it('joins once every item is marked done (QUE-04)', async () => {
    const q = new Queue<number>();
    let accumulator = 0;
    let running = true;
    await run(function* () {
      for (let i = 0; i < 100; i++) q.putNowait(i);
      function* worker(): Coroutine<void> {
        while (running) {
          accumulator += yield* q.get();
          q.taskDone();
        }
      }
      const workers = [createTask(worker()), createTask(worker())];
      yield* q.join();
      expect(accumulator).toBe(4950);
      running = false;
      for (let i = 0; i < workers.length; i++) q.putNowait(0);
      yield* settle(workers);
    });
  });

  it('waits for the last taskDone, not for the last get (QUE-04)', async () => {
    const q = new Queue<string>();
    const log: string[] = [];
    await run(function* () {
      q.putNowait('a');
      q.putNowait('b');
      const joiner = createTask(
        (function* (): Coroutine<void> {
          yield* q.join();
          log.push('joined');
        })(),
      );
      q.getNowait();
      q.getNowait();
      yield* sleep(0);
      log.push('both got');
      q.taskDone();
      yield* sleep(0);
      log.push('one done');
      q.taskDone();
      yield* joiner;
    });
    expect(log).toEqual(['both got', 'one done', 'joined']);
  });

  it('returns from join at once on a queue never used (QUE-04)', async () => {
    const q = new Queue<number>();
    const log: string[] = [];
    await run(function* () {
      loop.callSoon(() => log.push('next iteration'));
      yield* q.join();
      yield* q.join();
      log.push('joined twice');
    });
    expect(log).toEqual(['joined twice', 'next iteration']);
  });

  it('shows maxsize, items, waiters, unfinished tasks and shutdown (QUE-04)', async () => {
    const q = new Queue<number>();
    const reprs: string[] = [String(q)];
    await run(function* () {
      q.putNowait(1);
      q.putNowait(2);
      reprs.push(String(q));
      q.getNowait();
      q.getNowait();
      const getter = createTask(q.get());
      yield* sleep(0);
      reprs.push(String(q));
      getter.cancel();
      yield* sleep(0);
      q.shutdown();
      reprs.push(String(q));
    });
    expect(reprs).toEqual([
      '<Queue maxsize=0>',
      '<Queue maxsize=0 _queue=[1, 2] tasks=2>',
      '<Queue maxsize=0 _getters[1] tasks=2>',
      '<Queue maxsize=0 tasks=2 shutdown>',
    ]);
    expect(String(new LifoQueue(3))).toBe('<LifoQueue maxsize=3>');
    expect(String(new PriorityQueue(1.5))).toBe('<PriorityQueue maxsize=1.5>');
  });
});

describe('Queue.shutdown', () => {
  it('wakes a blocked get with QueueShutDown and refuses later puts and gets (QUE-05)', async () => {
    const q = new Queue<string>();
    await run(function* () {
      const getter = createTask(q.get());
      yield* sleep(0);
      q.shutdown();
      expect(q.qsize()).toBe(0);
      yield* q.join();
      expectError(yield* caught(getter), QueueShutDown, '');
      expect(String(q)).toBe('<Queue maxsize=0 shutdown>');
      expectError(yield* caught(q.put('data')), QueueShutDown, '');
      expectError(thrownBy(() => q.putNowait('data')), QueueShutDown, '');
      expectError(yield* caught(q.get()), QueueShutDown, '');
      expectError(thrownBy(() => q.getNowait()), QueueShutDown, '');
    });
  });

  it('lets gets drain the items left while puts fail (QUE-05)', async () => {
    const q = new Queue<string>(1);
    const log: string[] = [];
    await run(function* () {
      q.putNowait('data');
      const joiner = createTask(q.join());
      const putter = createTask(q.put('data2'));
      yield* sleep(0);
      expect(putter.done()).toBe(false);
      q.shutdown(false);
      expect(q.qsize()).toBe(1);
      yield* sleep(0);
      expectError(putter.exception(), QueueShutDown, '');
      log.push(`got ${yield* q.get()}`);
      yield* sleep(0);
      log.push(`joined ${joiner.done()}`);
      expect(yield* caught(q.put('data'))).toBeInstanceOf(QueueShutDown);
      expect(thrownBy(() => q.putNowait('data'))).toBeInstanceOf(QueueShutDown);
      expect(yield* caught(q.get())).toBeInstanceOf(QueueShutDown);
      expect(thrownBy(() => q.getNowait())).toBeInstanceOf(QueueShutDown);
      q.taskDone();
      yield* sleep(0);
      log.push(`joined ${joiner.done()}`);
      expectError(thrownBy(() => q.taskDone()), RangeError, 'task_done() called too many times');
    });
    expect(log).toEqual(['got data', 'joined false', 'joined true']);
  });

  it('refuses a put after shutdown even when the queue has room (QUE-05)', async () => {
    const q = new Queue<number>(5);
    q.putNowait(1);
    q.shutdown();
    expect(thrownBy(() => q.putNowait(2))).toBeInstanceOf(QueueShutDown);
    const error = await run(function* () {
      return yield* caught(q.put(2));
    });
    expect(error).toBeInstanceOf(QueueShutDown);
    expect(q.getNowait()).toBe(1);
  });

  it('drops the items and releases join at once when immediate (QUE-05)', async () => {
    const q = new Queue<string>();
    await run(function* () {
      q.putNowait('data');
      const joiner = createTask(q.join());
      q.shutdown(true);
      expect(q.qsize()).toBe(0);
      yield* sleep(0);
      expect(joiner.done()).toBe(true);
      expect(yield* caught(q.get())).toBeInstanceOf(QueueShutDown);
      expect(thrownBy(() => q.getNowait())).toBeInstanceOf(QueueShutDown);
      expect(yield* caught(q.put('data'))).toBeInstanceOf(QueueShutDown);
      expectError(thrownBy(() => q.taskDone()), RangeError, 'task_done() called too many times');
    });
  });

  it('keeps join waiting for items got before an immediate shutdown (QUE-05)', async () => {
    const q = new Queue<string>();
    await run(function* () {
      q.putNowait('data');
      q.putNowait('data');
      const joiner = createTask(q.join());
      expect(yield* q.get()).toBe('data');
      q.shutdown(true);
      expect(q.qsize()).toBe(0);
      yield* sleep(0);
      expect(joiner.done()).toBe(false);
      expect(String(q)).toBe('<Queue maxsize=0 tasks=1 shutdown>');
      q.taskDone();
      expect(thrownBy(() => q.taskDone())).toBeInstanceOf(RangeError);
      yield* sleep(0);
      expect(joiner.done()).toBe(true);
    });
  });

  it('wakes every blocked getter and putter (QUE-05)', async () => {
    const full = new Queue<number>(1);
    const empty = new Queue<number>();
    await run(function* () {
      full.putNowait(0);
      const putters = [createTask(full.put(1)), createTask(full.put(2))];
      const getters = [createTask(empty.get()), createTask(empty.get())];
      yield* sleep(0);
      full.shutdown();
      empty.shutdown(true);
      yield* settle([...putters, ...getters]);
      expect([...putters, ...getters].map((task) => task.exception()?.name)).toEqual([
        'QueueShutDown',
        'QueueShutDown',
        'QueueShutDown',
        'QueueShutDown',
      ]);
      expect(full.getNowait()).toBe(0);
    });
  });

  it('lets getters woken by a graceful shutdown take the items left', async () => {
    const q = new Queue<number>();
    const log: string[] = [];
    await run(function* () {
      const getters = [0, 1].map((i) =>
        createTask(
          (function* (): Coroutine<void> {
            try {
              log.push(`getter ${i} got ${yield* q.get()}`);
            } catch (error) {
              log.push(`getter ${i} ${(error as Error).name}`);
            }
          })(),
        ),
      );
      yield* sleep(0);
      // An item arrives and the queue shuts down before the woken getter runs.
      q.putNowait(7);
      q.shutdown();
      yield* settle(getters);
    });
    expect(log).toEqual(['getter 0 got 7', 'getter 1 QueueShutDown']);
  });
});

describe('PriorityQueue', () => {
  it('orders numbers, strings and tuple-like arrays as Python does', () => {
    const numbers = new PriorityQueue<number>();
    for (const n of [5, -1, 3.5, 10, 0, 3.5]) numbers.putNowait(n);
    expect(Array.from({ length: 6 }, () => numbers.getNowait())).toEqual([-1, 0, 3.5, 3.5, 5, 10]);
    const strings = new PriorityQueue<string>();
    for (const s of ['pear', 'apple', 'Zebra', 'apricot']) strings.putNowait(s);
    expect(Array.from({ length: 4 }, () => strings.getNowait())).toEqual(['Zebra', 'apple', 'apricot', 'pear']);
    const tuples = new PriorityQueue<unknown[]>();
    for (const t of [[2, 'b'], [1, 'z'], [2, 'a'], [1], [1, 'z', 0]]) tuples.putNowait(t);
    expect(Array.from({ length: 5 }, () => tuples.getNowait())).toEqual([[1], [1, 'z'], [1, 'z', 0], [2, 'a'], [2, 'b']]);
  });

  it('compares arrays only as far as needed, like tuples with payloads', () => {
    const q = new PriorityQueue<[number, { job: string }]>();
    q.putNowait([3, { job: 'c' }]);
    q.putNowait([1, { job: 'a' }]);
    q.putNowait([2, { job: 'b' }]);
    expect([q.getNowait()[1].job, q.getNowait()[1].job, q.getNowait()[1].job]).toEqual(['a', 'b', 'c']);
  });

  it('throws a clear TypeError for items it cannot order, and stays unchanged', () => {
    const q = new PriorityQueue<unknown>();
    q.putNowait({ id: 1 });
    expectError(
      thrownBy(() => q.putNowait({ id: 2 })),
      TypeError,
      "'<' not supported between instances of 'Object' and 'Object': give PriorityQueue a { compare } option to order such items",
    );
    expect(q.qsize()).toBe(1);
    const mixed = new PriorityQueue<unknown>();
    mixed.putNowait(1);
    mixed.putNowait(2);
    expectError(
      thrownBy(() => mixed.putNowait('3')),
      TypeError,
      "'<' not supported between instances of 'string' and 'number': give PriorityQueue a { compare } option to order such items",
    );
    expect(String(mixed)).toBe('<PriorityQueue maxsize=0 _queue=[1, 2] tasks=2>');
    expect([mixed.getNowait(), mixed.getNowait()]).toEqual([1, 2]);
    const pairs = new PriorityQueue<unknown[]>();
    pairs.putNowait([1, { job: 'a' }]);
    expect(thrownBy(() => pairs.putNowait([1, { job: 'b' }]))).toBeInstanceOf(TypeError);
    expect(pairs.qsize()).toBe(1);
  });

  it('keeps every item when ordering fails while taking one', () => {
    const q = new PriorityQueue<[number, { job: string }]>();
    q.putNowait([1, { job: 'a' }]);
    q.putNowait([2, { job: 'b' }]);
    q.putNowait([2, { job: 'c' }]);
    // Taking [1, a] must compare [2, b] with [2, c], which cannot be ordered.
    expect(thrownBy(() => q.getNowait())).toBeInstanceOf(TypeError);
    expect(q.qsize()).toBe(3);
    expect(String(q)).toMatch(/^<PriorityQueue maxsize=0 _queue=\[.*'a'.*'b'.*'c'.*\] tasks=3>$/);
  });

  it('orders other items with a compare option', () => {
    interface Job {
      name: string;
      deadline: number;
    }
    const q = new PriorityQueue<Job>(0, { compare: (a, b) => a.deadline - b.deadline });
    for (const [name, deadline] of [
      ['c', 30],
      ['a', 10],
      ['d', 40],
      ['b', 20],
    ] as const) {
      q.putNowait({ name, deadline });
    }
    expect(Array.from({ length: 4 }, () => q.getNowait().name)).toEqual(['a', 'b', 'c', 'd']);
    const reversed = new PriorityQueue<number>(0, { compare: (a, b) => b - a });
    for (const n of [1, 3, 2]) reversed.putNowait(n);
    expect([reversed.getNowait(), reversed.getNowait(), reversed.getNowait()]).toEqual([3, 2, 1]);
  });

  it('rejects bad options', () => {
    expect(() => new PriorityQueue(0, { compare: 3 } as never)).toThrow(TypeError);
    expect(() => new PriorityQueue(0, { compare: 3 } as never)).toThrow('options.compare must be a function, got 3');
    expect(() => new PriorityQueue(0, 'x' as never)).toThrow("PriorityQueue() options must be an object, got 'x'");
  });

  it('keeps heap order through many interleaved puts and gets', () => {
    const q = new PriorityQueue<number>();
    const reference: number[] = [];
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % 1000;
    };
    const got: number[] = [];
    const expected: number[] = [];
    for (let round = 0; round < 2000; round++) {
      if (random() % 3 !== 0 || reference.length === 0) {
        const n = random();
        q.putNowait(n);
        reference.push(n);
      } else {
        reference.sort((a, b) => a - b);
        expected.push(reference.shift()!);
        got.push(q.getNowait());
      }
    }
    expect(got).toEqual(expected);
    expect(q.qsize()).toBe(reference.length);
  });

  it('blocks and hands over like a Queue', async () => {
    const q = new PriorityQueue<number>(2);
    const got: number[] = [];
    await run(function* () {
      const consumer = createTask(
        (function* (): Coroutine<void> {
          for (let i = 0; i < 4; i++) got.push(yield* q.get());
        })(),
      );
      yield* sleep(0);
      for (const n of [4, 3, 2, 1]) yield* q.put(n);
      yield* consumer;
    });
    // The consumer woken by put(4) runs only after put(3): it takes the smaller one first.
    expect(got).toEqual([3, 4, 1, 2]);
  });
});

describe('Queue loop binding', () => {
  it('binds to the loop of its first wait', async () => {
    const q = new Queue<number>();
    await run(function* () {
      const getter = createTask(q.get());
      yield* sleep(0);
      q.putNowait(1);
      yield* getter;
    });
    const error = await runOnFreshLoop(() => caught(q.get()));
    expectError(error, RuntimeError, '<Queue maxsize=0 tasks=1> is bound to a different event loop');
    // Using it without waiting is fine from anywhere, as in asyncio.
    q.putNowait(2);
    expect(q.getNowait()).toBe(2);
  });
});
