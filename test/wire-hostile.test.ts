/**
 * What a hostile thread can post on the wire cannot choose a prototype or define an accessor:
 * the records of registered classes and errors, written by hand with `__proto__` and
 * `constructor` keys, decode to objects of the registered class (or Error) whose such keys are
 * own data properties; the same from a real LoopThread whose results are such records, and from
 * a plain worker that answers comlink requests with such an error.
 */
import { Worker } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeAdapter from 'comlink/dist/umd/node-adapter.js';
import { describe, expect, it } from 'vitest';
import { registerClass, run, wrapComlink } from '../src/index.js';
import { classNamed } from '../src/internal/classes.js';
import { decodeError, encodeError, type EncodedError } from '../src/internal/errors.js';
import { WIRE, fromWire, toWire } from '../src/internal/wire.js';
import { Node, Point, QuotaError } from './fixtures/geometry.mjs';
import { errorOf, outcome, useThreads } from './helpers/loop-threads.js';

// The threads run dist/, this process src/: the src/ copy registers the classes too.
registerClass(Point);
registerClass(Node);
registerClass(QuotaError);

const HOSTILE_SERVICE = new URL('./fixtures/wire-hostile-service.mjs', import.meta.url);
const HOSTILE_WORKER = new URL('./fixtures/comlink-hostile-worker.mjs', import.meta.url);

const nodeEndpoint = nodeAdapter as unknown as typeof nodeAdapter.default;

const threads = useThreads();

/** A payload's fields as a hostile sender writes them: JSON.parse keeps `__proto__` an own key, as structured clone does. */
const HOSTILE_FIELDS = '{"x":3,"y":4,"__proto__":{"isAdmin":true,"norm":"not a method"},"constructor":{"name":"Evil"}}';

/** What arrives in this thread when another posts `envelope` (structured clone, then the decoder). */
function arrive(envelope: unknown): unknown {
  return fromWire(structuredClone(envelope));
}

/** V8's own `stack` getter, which an Error gets as an own accessor from V8 12 (Node 22) on. */
const nativeStackGetter = Object.getOwnPropertyDescriptor(new Error('probe'), 'stack')?.get;

/** Every own property of `value` is a data property (none has a getter or setter but V8's own `stack`). */
function onlyData(value: object): boolean {
  return Reflect.ownKeys(value).every((key) => {
    const descriptor = Object.getOwnPropertyDescriptor(value, key)!;
    return 'value' in descriptor || (key === 'stack' && nativeStackGetter !== undefined && descriptor.get === nativeStackGetter);
  });
}

/** `value`'s own `key`, as a data property of its own: its value (a failed expectation otherwise). */
function ownData(value: object, key: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(value, key);
  expect(descriptor).toMatchObject({ writable: true, enumerable: true, configurable: true });
  return descriptor!.value;
}

/** A Point arrived from a hostile sender is a Point all the same: its prototype, its methods, the keys as data. */
function expectPlainPoint(point: unknown): void {
  expect(Object.getPrototypeOf(point)).toBe(Point.prototype);
  expect(point).toBeInstanceOf(Point);
  expect(point).not.toBeInstanceOf(Node);
  const p = point as Point & { isAdmin?: unknown };
  expect(p.norm()).toBe(5);
  expect(p.isAdmin).toBeUndefined();
  expect(ownData(p, '__proto__')).toEqual({ isAdmin: true, norm: 'not a method' });
  expect(ownData(p, 'constructor')).toEqual({ name: 'Evil' });
  expect(Object.keys(p)).toEqual(['x', 'y', '__proto__', 'constructor']);
  expect(onlyData(p)).toBe(true);
}

describe('decoding what a hostile thread posts', () => {
  it("gives an instance of a registered class the class's prototype whatever its fields say: __proto__ and constructor are own data", () => {
    const envelope = { [WIRE]: 'value', value: { [WIRE]: 'class', name: 'Point', data: JSON.parse(HOSTILE_FIELDS) as unknown } };
    expectPlainPoint(arrive(envelope));
    // Inside other values too, and in a cycle.
    const node = { [WIRE]: 'class', name: 'Node', data: JSON.parse('{"label":"n","__proto__":{"describe":"no"}}') as Record<string, unknown> };
    node.data.next = node;
    const arrived = arrive({ [WIRE]: 'value', value: { list: [node], map: new Map([['n', node]]) } }) as { list: Node[]; map: Map<string, Node> };
    expect(Object.getPrototypeOf(arrived.list[0])).toBe(Node.prototype);
    expect(arrived.list[0]!.describe()).toBe('n -> n');
    expect(arrived.map.get('n')).toBe(arrived.list[0]);
  });

  it("keeps __proto__ a key of plain objects inside a value, and of an error's own properties", () => {
    const error: EncodedError = {
      kind: 'error',
      base: 'TypeError',
      name: 'TypeError',
      message: 'bad',
      stack: null,
      props: JSON.parse('{"code":"E_BAD","__proto__":{"isAdmin":true},"constructor":"Evil"}') as Record<string, unknown>,
    };
    const arrived = arrive({ [WIRE]: 'value', value: { plain: JSON.parse('{"__proto__":{"isAdmin":true}}') as unknown, error: { [WIRE]: 'error', error } } }) as {
      plain: { isAdmin?: unknown };
      error: TypeError & { code?: unknown; isAdmin?: unknown };
    };
    expect(Object.getPrototypeOf(arrived.plain)).toBe(Object.prototype);
    expect(arrived.plain.isAdmin).toBeUndefined();
    expect(ownData(arrived.plain, '__proto__')).toEqual({ isAdmin: true });
    expect(Object.getPrototypeOf(arrived.error)).toBe(TypeError.prototype);
    expect([arrived.error.code, arrived.error.isAdmin]).toEqual(['E_BAD', undefined]);
    expect(ownData(arrived.error, '__proto__')).toEqual({ isAdmin: true });
    expect(ownData(arrived.error, 'constructor')).toBe('Evil');
    expect(onlyData(arrived.error)).toBe(true);
  });

  it("rebuilds a registered error class on its prototype, and resolves a reference only to an error made before (never to an array's property)", () => {
    const encoded = {
      kind: 'error',
      base: 'QuotaError',
      fallback: 'RangeError',
      name: 'QuotaError',
      message: 'over',
      stack: null,
      props: JSON.parse('{"limit":5,"__proto__":{"isAdmin":true}}') as Record<string, unknown>,
      cause: { kind: 'ref', index: 'constructor' },
      errorKeys: 'limit',
    };
    const decoded = decodeError(structuredClone(encoded) as unknown as EncodedError) as QuotaError & { isAdmin?: unknown };
    expect(Object.getPrototypeOf(decoded)).toBe(QuotaError.prototype);
    expect([decoded.advice(), decoded.isAdmin, decoded.cause]).toEqual(['stay under 5', undefined, undefined]);
    expect(Object.hasOwn(decoded, 'cause')).toBe(true);
    for (const index of ['__proto__', 'length', 'push', -1, 0.5, 99]) {
      const cause = (decodeError({ ...encoded, props: {}, errorKeys: [], cause: { kind: 'ref', index } } as unknown as EncodedError) as Error).cause;
      expect(cause, String(index)).toBeUndefined();
    }
    // A reference to an error made before still resolves to it: a cycle.
    const looped = decodeError({ ...encoded, props: {}, errorKeys: [], cause: { kind: 'ref', index: 0 } } as unknown as EncodedError) as Error;
    expect(looped.cause).toBe(looped);
  });

  it('refuses the record of an instance whose fields are not an object, or whose class has no name, with a TypeError', () => {
    for (const [data, got] of [
      [5, 'number'],
      [null, 'null'],
      ['xy', 'string'],
    ] as const) {
      expect(() => arrive({ [WIRE]: 'value', value: { [WIRE]: 'class', name: 'Point', data } })).toThrow(
        new TypeError(`an instance of class 'Point' arrived with ${got} for its fields, not an object`),
      );
    }
    expect(() => arrive({ [WIRE]: 'value', value: { [WIRE]: 'class', name: { toString: 1 }, data: {} } })).toThrow(
      new TypeError('an instance of a registered class arrived without the name of its class (got object)'),
    );
  });

  it('sends an own __proto__ key of an instance or an error as a key, which arrives as one', () => {
    const point = new Point(3, 4);
    Object.defineProperty(point, '__proto__', { value: { tag: 1 }, writable: true, enumerable: true, configurable: true });
    const arrived = fromWire(structuredClone(toWire(point, 'argument 1'))) as Point;
    expect(Object.getPrototypeOf(arrived)).toBe(Point.prototype);
    expect(ownData(arrived, '__proto__')).toEqual({ tag: 1 });
    const error = new RangeError('tagged');
    Object.defineProperty(error, '__proto__', { value: 'a key', writable: true, enumerable: true, configurable: true });
    const decoded = decodeError(structuredClone(encodeError(error))) as Error;
    expect(Object.getPrototypeOf(decoded)).toBe(RangeError.prototype);
    expect(ownData(decoded, '__proto__')).toBe('a key');
    // The default deserialize of a registration does the same for data it is handed.
    const rebuilt = classNamed('Point')!.deserialize(JSON.parse(HOSTILE_FIELDS));
    expectPlainPoint(rebuilt);
  });
});

describe('across real threads', () => {
  it("a LoopThread's results written by hand as records with __proto__ keys arrive on the registered classes' prototypes", async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(HOSTILE_SERVICE, { name: 'hostile' });
        expectPlainPoint(yield* lt.call('point'));
        const { failure } = yield* lt.call<{ failure: QuotaError & { isAdmin?: unknown } }>('quotaError');
        expect(Object.getPrototypeOf(failure)).toBe(QuotaError.prototype);
        expect([failure.advice(), failure.isAdmin, failure.cause]).toEqual(['stay under 5', undefined, undefined]);
        expect(ownData(failure, '__proto__')).toEqual({ isAdmin: true });
        expect(ownData(failure, 'constructor')).toBe('Evil');
        expect(onlyData(failure)).toBe(true);
      })(),
    );
  });

  it('an error a plain comlink worker throws keeps the prototype of Error, its __proto__ field an own key (wrapComlink and Comlink.wrap)', async () => {
    const worker = new Worker(HOSTILE_WORKER);
    try {
      const checkHostile = (error: Error & { code?: unknown; isAdmin?: unknown }): void => {
        expect(Object.getPrototypeOf(error)).toBe(Error.prototype);
        expect([error.message, error.name, error.code, error.isAdmin]).toEqual(['hostile', 'RangeError', 'E_HOSTILE', undefined]);
        expect(ownData(error, '__proto__')).toEqual({ isAdmin: true });
        expect(onlyData(error)).toBe(true);
      };
      await run(
        (function* () {
          const api = wrapComlink<{ anything(): void }>(worker);
          checkHostile(errorOf(yield* outcome(api.anything())));
          api.close();
        })(),
      );
      const bare = Comlink.wrap<{ anything(): void }>(nodeEndpoint(worker));
      checkHostile((await bare.anything().catch((error: unknown) => error)) as Error);
    } finally {
      await worker.terminate();
    }
  });
});
