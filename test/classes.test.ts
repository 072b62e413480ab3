/**
 * registerClass(): instances of registered classes cross threads as themselves (inside any
 * value, cycles kept), errors of registered classes are thrown across threads as themselves,
 * and an instance of a class with methods that nobody registered is refused with a TypeError
 * naming the class. The classes live in test/fixtures/geometry.mjs, which registers them in
 * every thread that imports it. This test process runs the library from src/ while the threads
 * run dist/: two copies of the library, two registries, so the test registers the same classes
 * once more with the src/ copy (an application, with one copy, registers them once).
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  LoopThread,
  PiscinaExecutor,
  newEventLoop,
  registerClass,
  workerFn,
  type ConcurrentFuture,
  type Coroutine,
} from '../src/index.js';
import { fromWire, toWire } from '../src/internal/wire.js';
import { decodeError, encodeError } from '../src/internal/errors.js';
import { Money, Node, Point, QuotaError, Registered, Secret } from './fixtures/geometry.mjs';

registerClass(Point);
registerClass(Node);
registerClass(Money, {
  serialize: (money) => money.toJSON(),
  deserialize: ([cents, currency]: [number, string]) => new Money(cents, currency),
});
registerClass(QuotaError);
registerClass(Registered);

const SERVICE = new URL('./fixtures/classes-service.mjs', import.meta.url);

/** What arrives in another thread: the wire form, structured-cloned, decoded. */
function cross<T>(value: T, what = 'argument 1'): T {
  return fromWire(structuredClone(toWire(value, what))) as T;
}

describe('registerClass in one thread (the wire form, structured-cloned)', () => {
  it('rebuilds an instance on its prototype, without running the constructor', () => {
    const arrived = cross(new Point(3, 4));
    expect(arrived).toBeInstanceOf(Point);
    expect(arrived.norm()).toBe(5);
    expect(Object.keys(arrived)).toEqual(['x', 'y']);
  });

  it('finds instances anywhere: in arrays, objects, maps and sets, and keeps shared references and cycles', () => {
    const shared = new Point(1, 1);
    const node = new Node('solo');
    const value = { list: [shared, shared], map: new Map([['p', shared]]), set: new Set([shared]), node };
    const arrived = cross(value);
    expect(arrived.list[0]).toBeInstanceOf(Point);
    expect(arrived.list[0]).toBe(arrived.list[1]);
    expect(arrived.map.get('p')).toBe(arrived.list[0]);
    expect([...arrived.set][0]).toBe(arrived.list[0]);
    expect(arrived.node).toBeInstanceOf(Node);
    expect(arrived.node.next).toBe(arrived.node);
    expect(arrived.node.describe()).toBe('solo -> solo');
  });

  it('crosses a class with #private fields through its serialize and deserialize', () => {
    const arrived = cross({ price: new Money(1999, 'EUR') });
    expect(arrived.price).toBeInstanceOf(Money);
    expect(arrived.price.format()).toBe('19.99 EUR');
  });

  it('keeps the class and own properties of an error inside a value', () => {
    const cause = new TypeError('bad size');
    const arrived = cross({ errors: [new QuotaError('over', 5), new RangeError('plain', { cause })] });
    expect(arrived.errors[0]).toBeInstanceOf(QuotaError);
    expect((arrived.errors[0] as QuotaError).advice()).toBe('stay under 5');
    expect(arrived.errors[1]).toBeInstanceOf(RangeError);
    expect((arrived.errors[1]!.cause as Error).message).toBe('bad size');
  });

  it('sends a value with no class instance and no error as it is, without a copy', () => {
    const plain = { a: [1, 2, { b: 'c' }], m: new Map([[1, new Uint8Array(4)]]) };
    expect(toWire(plain, 'argument 1')).toBe(plain);
  });

  it('refuses an instance of a class with methods that nobody registered, naming the class', () => {
    expect(() => toWire({ nested: [new Secret(1)] }, 'argument 2')).toThrow(
      new TypeError(
        'argument 2 holds an instance of class Secret, which would arrive as a plain object without its methods: ' +
          'call registerClass(Secret) in a module that both threads import',
      ),
    );
  });

  it('copies an instance of a class with fields only as a plain object, as structured clone does', () => {
    class Settings {
      retries = 3;
    }
    const arrived = cross({ settings: new Settings() });
    expect(arrived.settings).toEqual({ retries: 3 });
    expect(Object.getPrototypeOf(arrived.settings)).toBe(Object.prototype);
  });

  it('rebuilds a thrown error of a registered class as itself, and as its base where the class is not known', () => {
    const encoded = encodeError(new QuotaError('quota of 5 exceeded', 5));
    const decoded = decodeError(structuredClone(encoded)) as QuotaError;
    expect(decoded).toBeInstanceOf(QuotaError);
    expect([decoded.name, decoded.message, decoded.limit, decoded.advice()]).toEqual(['QuotaError', 'quota of 5 exceeded', 5, 'stay under 5']);
    const unknown = decodeError({ ...structuredClone(encoded), base: 'NotRegisteredHere' } as typeof encoded) as Error;
    expect(unknown).toBeInstanceOf(RangeError);
    expect(unknown.name).toBe('QuotaError');
  });

  it('checks what it is given', () => {
    expect(() => registerClass(Map as never)).toThrow(
      new TypeError('registerClass() takes classes of the application: Map is built in, and crosses as structured clone allows'),
    );
    expect(() => registerClass((() => 1) as never)).toThrow(/^registerClass\(\) needs a class, got /);
    class Point2 {}
    expect(() => registerClass(Point2, { name: 'Point' })).toThrow(
      new RangeError("registerClass(): another class is registered as 'Point' (a name stands for one class in every thread)"),
    );
    expect(() => registerClass(Point, { name: 'Other' })).toThrow(new RangeError("registerClass(): Point is registered already, as 'Point'"));
    expect(() => registerClass(QuotaError, { serialize: () => 1 } as never)).toThrow(
      new TypeError('registerClass() QuotaError is an error class: it crosses as errors do, without serialize or deserialize'),
    );
    registerClass(Point);
  });
});

describe('registerClass across real threads', () => {
  const executor = new PiscinaExecutor({ maxThreads: 1 });
  let thread: LoopThread | null = null;
  afterAll(async () => {
    await executor.shutdown();
    await thread?.terminate();
  });

  function settled<T>(future: ConcurrentFuture<T>): Promise<{ value?: T; error?: Error }> {
    return new Promise((resolve) =>
      future.addDoneCallback(() => resolve(future.exception() === null ? { value: future.result() } : { error: future.exception()! })),
    );
  }

  const job = <A extends unknown[], R>(name: string): ReturnType<typeof workerFn<A, R>> => workerFn<A, R>(SERVICE, name);

  it('a pool job takes and returns instances as themselves, and throws its own error class', async () => {
    const mirrored = await settled(executor.submit(job<[Point], Point>('mirror'), new Point(3, 4)));
    expect(mirrored.value).toBeInstanceOf(Point);
    expect(mirrored.value!.norm()).toBe(5);
    const value = { point: new Point(6, 8), map: new Map([['p', new Point(0, 1)]]), set: new Set([new Point(1, 0)]), money: new Money(250, 'USD'), node: new Node('n') };
    expect((await settled(executor.submit(job<[typeof value], unknown>('kinds'), value))).value).toEqual({
      point: 10,
      inMap: true,
      inSet: true,
      money: '2.50 USD',
      cycle: 'n -> n',
    });
    const ring = (await settled(executor.submit(job<[], { ring: Node; price: Money }>('makeRing')))).value!;
    expect(ring.ring.describe()).toBe('a -> b');
    expect(ring.ring.next.next).toBe(ring.ring);
    expect(ring.price.format()).toBe('19.99 EUR');
    const failed = await settled(executor.submit(job<[number], never>('failQuota'), 7));
    expect(failed.error).toBeInstanceOf(QuotaError);
    expect((failed.error as QuotaError).advice()).toBe('stay under 7');
    const within = (await settled(executor.submit(job<[], { failure: QuotaError }>('failWithin')))).value!;
    expect(within.failure).toBeInstanceOf(QuotaError);
  });

  it('a pool job fails clearly, never silently, with a class one side does not know', async () => {
    const sent = await settled(executor.submit(job<[Secret], unknown>('mirror'), new Secret(1)));
    expect(sent.error).toBeInstanceOf(TypeError);
    expect(sent.error!.message).toBe(
      `cannot send mirror of ${SERVICE.href} to a pool thread: argument 1 holds an instance of class Secret, which would arrive as a ` +
        'plain object without its methods: call registerClass(Secret) in a module that both threads import',
    );
    const leaked = await settled(executor.submit(job<[], unknown>('leakSecret')));
    expect(leaked.error!.message).toBe(
      `cannot send the result of leakSecret of ${SERVICE.href} back from the pool thread: the result holds an instance of class ` +
        'Secret, which would arrive as a plain object without its methods: call registerClass(Secret) in a module that both threads import',
    );
    const unknownThere = await settled(executor.submit(job<[Registered], string>('registeredHere'), new Registered()));
    expect(unknownThere.error).toBeInstanceOf(TypeError);
    expect(unknownThere.error!.message).toBe(
      "an instance of class 'Registered' arrived, but no class is registered as 'Registered' in this thread: call registerClass() for it in a module this thread imports",
    );
    const unknownHere = await settled(executor.submit(job<[], unknown>('onlyHere')));
    expect(unknownHere.error!.message).toBe(
      "an instance of class 'OnlyHere' arrived, but no class is registered as 'OnlyHere' in this thread: call registerClass() for it in a module this thread imports",
    );
  });

  it('a LoopThread call takes and returns instances as themselves, and refuses unregistered ones', async () => {
    thread = await LoopThread.start(SERVICE, { name: 'classes' });
    const lt = thread;
    const loop = newEventLoop();
    try {
      const seen = await loop.runUntilComplete(
        (function* (): Coroutine<unknown[]> {
          const mirrored = yield* lt.call<Point>('mirror', new Point(5, 12));
          let thrown: unknown = null;
          try {
            yield* lt.call('failQuota', 2);
          } catch (error) {
            thrown = error;
          }
          let refused: unknown = null;
          try {
            yield* lt.call('mirror', new Secret(1));
          } catch (error) {
            refused = error;
          }
          const ring = yield* lt.call<{ ring: Node }>('makeRing');
          let notified: unknown = null;
          try {
            lt.callSoonThreadsafe('mirror', new Secret(2));
          } catch (error) {
            notified = error;
          }
          let unknownHere: unknown = null;
          try {
            yield* lt.call('onlyHere');
          } catch (error) {
            unknownHere = error;
          }
          return [mirrored, thrown, refused, ring.ring.describe(), notified, unknownHere];
        })(),
      );
      expect(seen[0]).toBeInstanceOf(Point);
      expect((seen[0] as Point).norm()).toBe(13);
      expect(seen[1]).toBeInstanceOf(QuotaError);
      expect((seen[1] as QuotaError).advice()).toBe('stay under 2');
      expect((seen[2] as TypeError).message).toBe(
        "cannot send call 'mirror' to LoopThread 'classes': argument 1 holds an instance of class Secret, which would arrive as a " +
          'plain object without its methods: call registerClass(Secret) in a module that both threads import',
      );
      expect(seen[3]).toBe('a -> b');
      expect(seen[4]).toBeInstanceOf(TypeError);
      expect((seen[4] as TypeError).message).toMatch(/^cannot send callSoonThreadsafe 'mirror' to LoopThread 'classes': argument 1 holds an instance of class Secret/);
      expect((seen[5] as TypeError).message).toMatch(/^an instance of class 'OnlyHere' arrived, but no class is registered as 'OnlyHere'/);
    } finally {
      loop.close();
    }
  });
});
