/**
 * What a hostile thread can post on the wire cannot choose a prototype or define an accessor:
 * the records of registered classes and errors, written by hand with `__proto__` and
 * `constructor` keys, decode to objects of the registered class (or Error) whose such keys are
 * own data properties; the same from a plain worker that answers comlink requests with such an
 * error. And plain data cannot forge a record at all: what crosses as a registered class, an
 * error, a Buffer or any other special value is decided by the sender's encoder, so JSON from a
 * request body that uses the library's key arrives as the same plain data (in values encoded
 * here, call arguments and results across a real LoopThread, a context variable, a large
 * ThreadQueue item); bullmq-travel.test.ts checks BullMQ jobs.
 */
import { Worker } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeAdapter from 'comlink/dist/umd/node-adapter.js';
import { describe, expect, it } from 'vitest';
import { ContextVar, ThreadQueue, registerClass, registerContextVar, run, toThread, workerFn, wrapComlink, type Coroutine } from '../src/index.js';
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
const FORGED_SERVICE = new URL('./fixtures/wire-forged-service.mjs', import.meta.url);

// The variable the forged service reads (context-service.mjs registers it in the thread).
const user = registerContextVar(new ContextVar<unknown>('user'));

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

  it('refuses the record of an instance whose fields are not an object, or whose class has no name, and escaped plain data without a plain object, with a TypeError', () => {
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
    for (const [fields, got] of [
      [5, 'number'],
      [null, 'null'],
      [[1], 'object'],
      [new Map(), 'object'],
    ] as const) {
      expect(() => arrive({ [WIRE]: 'value', value: { [WIRE]: 'plain', fields } })).toThrow(
        new TypeError(`escaped plain data arrived with ${got} for its fields, not a plain object`),
      );
    }
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

/** The library's key as JSON text writes it. */
const KEY = '\\u0000multiloop';

/** Request bodies that use the library's key, each imitating a record the encoder makes (or its escape of plain data). */
const FORGED: ReadonlyArray<readonly [string, string]> = [
  ['a registered class in an envelope', `{"${KEY}":"value","value":{"${KEY}":"class","name":"Point","data":{"x":3,"y":4,"admin":true}}}`],
  ['an error', `{"${KEY}":"value","value":{"${KEY}":"error","error":{"kind":"error","base":"TypeError","name":"TypeError","message":"forged","stack":null}}}`],
  ['a Buffer', `{"${KEY}":"value","value":{"${KEY}":"buffer","bytes":{"0":1}}}`],
  ['a ThreadQueue', `{"${KEY}":"value","value":{"${KEY}":"threadqueue","queue":{}}}`],
  ['a LoopRef', `{"${KEY}":"value","value":{"${KEY}":"loop","peer":"forged","ports":{}}}`],
  ['a Comlink.proxy callback', `{"${KEY}":"callback","port":{}}`],
  ['a bare record', `{"${KEY}":"class","name":"Point","data":{"x":3,"y":4}}`],
  ['the escape of plain data', `{"${KEY}":"plain","fields":{"${KEY}":"class","name":"Point","data":{"x":3,"y":4}}}`],
  ['records inside', `{"session":{"${KEY}":"class","name":"Point","data":{"admin":true}},"list":[{"${KEY}":"value","value":1}]}`],
];

/** A fresh copy of each forged body, parsed as a server parses a request. */
function bodies(): Array<[string, Record<string, unknown>]> {
  return FORGED.map(([what, text]) => [what, JSON.parse(text) as Record<string, unknown>]);
}

describe('plain data that uses the envelope key', () => {
  it('arrives as the same plain data, whatever record it imitates', () => {
    for (const [what, body] of bodies()) {
      expect(arrive(toWire(body, 'argument 1')), what).toStrictEqual(body);
      expect(arrive(toWire([body], 'argument 1')), what).toStrictEqual([body]);
    }
  });

  it('arrives as plain data beside registered instances, errors and Buffers, which still arrive as themselves', () => {
    const forged = bodies().map(([, body]) => body);
    const value = {
      point: new Point(3, 4),
      error: new RangeError('real'),
      bytes: Buffer.from('real'),
      forged,
      map: new Map([[forged[0], forged[1]]]),
      set: new Set([forged[2]]),
    };
    const arrived = arrive(toWire(value, 'argument 1')) as typeof value;
    expect(arrived.point).toBeInstanceOf(Point);
    expect(arrived.point.norm()).toBe(5);
    expect(arrived.error).toBeInstanceOf(RangeError);
    expect(arrived.error.message).toBe('real');
    expect(Buffer.isBuffer(arrived.bytes) && arrived.bytes.toString()).toBe('real');
    expect(arrived.forged).toStrictEqual(bodies().map(([, body]) => body));
    expect([...arrived.map]).toStrictEqual([[forged[0], forged[1]]]);
    expect([...arrived.map.keys()][0]).toBe(arrived.forged[0]);
    expect([...arrived.set]).toStrictEqual([forged[2]]);
    expect([...arrived.set][0]).toBe(arrived.forged[2]);
  });

  it('keeps the sharing and the cycles of such objects', () => {
    const body = JSON.parse(FORGED[0]![1]) as Record<string, unknown>;
    body.self = body;
    const arrived = arrive(toWire({ a: body, b: [body], point: new Point(0, 1) }, 'argument 1')) as { a: Record<string, unknown>; b: unknown[] };
    expect(Object.getPrototypeOf(arrived.a)).toBe(Object.prototype);
    expect(arrived.a.self).toBe(arrived.a);
    expect(arrived.b[0]).toBe(arrived.a);
    expect(Object.keys(arrived.a)).toEqual([WIRE, 'value', 'self']);
    expect(Object.getPrototypeOf(arrived.a.value)).toBe(Object.prototype);
  });

  it("carries the key as data in a registered instance's fields, a class with fields only, a null-prototype object and an array's own key", () => {
    const [[, envelope]] = bodies() as [[string, Record<string, unknown>]];
    const point = Object.assign(new Point(3, 4), envelope);
    const arrivedPoint = arrive(toWire(point, 'argument 1')) as Point & Record<string, unknown>;
    expect(arrivedPoint).toBeInstanceOf(Point);
    expect({ ...arrivedPoint }).toStrictEqual({ x: 3, y: 4, ...envelope });
    class Form {}
    expect(arrive(toWire(Object.assign(new Form(), envelope), 'argument 1'))).toStrictEqual(envelope);
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, envelope);
    expect({ ...(arrive(toWire(bare, 'argument 1')) as object) }).toStrictEqual(envelope);
    const list = Object.assign([1, 2], envelope);
    const arrivedList = arrive(toWire(list, 'argument 1')) as unknown[] & Record<string, unknown>;
    expect(Array.isArray(arrivedList) && [...arrivedList]).toEqual([1, 2]);
    expect(Object.getPrototypeOf(arrivedList.value)).toBe(Object.prototype);
  });
});

describe('across real threads', () => {
  it("a LoopThread's results written by hand as the library's records, with __proto__ keys, arrive as the plain data they are", async () => {
    const data = JSON.parse(HOSTILE_FIELDS) as unknown;
    const props = JSON.parse('{"limit":5,"__proto__":{"isAdmin":true},"constructor":"Evil"}') as unknown;
    const error = { kind: 'error', base: 'QuotaError', fallback: 'RangeError', name: 'QuotaError', message: 'over', stack: null, props, cause: { kind: 'ref', index: 'constructor' } };
    await run(
      (function* () {
        const lt = yield* threads.start(HOSTILE_SERVICE, { name: 'hostile' });
        // toEqual, with the prototypes checked apart: toStrictEqual compares own `constructor` keys as classes.
        const point = (yield* lt.call('point')) as { value: { data: object } };
        expect(point).toEqual({ [WIRE]: 'value', value: { [WIRE]: 'class', name: 'Point', data } });
        expect([point, point.value, point.value.data].map((each) => Object.getPrototypeOf(each))).toEqual([Object.prototype, Object.prototype, Object.prototype]);
        expect(ownData(point.value.data, '__proto__')).toEqual({ isAdmin: true, norm: 'not a method' });
        expect(ownData(point.value.data, 'constructor')).toEqual({ name: 'Evil' });
        const quota = (yield* lt.call('quotaError')) as { value: { failure: object } };
        expect(quota).toEqual({ [WIRE]: 'value', value: { failure: { [WIRE]: 'error', error } } });
        expect(Object.getPrototypeOf(quota.value.failure)).toBe(Object.prototype);
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

describe('forged envelopes across real threads', () => {
  interface Seen {
    value: unknown;
    classes: string[];
  }

  it("arrive as the same plain data in a LoopThread call's arguments and results; registered classes still cross as themselves", async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(FORGED_SERVICE, { name: 'forged' });
        for (const [what, body] of bodies()) {
          expect(yield* lt.call<Seen>('seen', body), what).toStrictEqual({ value: body, classes: [] });
          const [, text] = FORGED.find(([name]) => name === what)!;
          expect(yield* lt.call('parsed', text), what).toStrictEqual(body);
        }
        const forged = bodies().map(([, body]) => body);
        const both = yield* lt.call<Seen>('seen', { point: new Point(3, 4), forged });
        expect(both.classes).toEqual(['Point']);
        const { point, forged: arrived } = both.value as { point: Point; forged: unknown };
        expect(point).toBeInstanceOf(Point);
        expect(point.norm()).toBe(5);
        expect(arrived).toStrictEqual(forged);
      })(),
    );
  });

  it("arrive as the same plain data in a pool job's arguments and result (toThread)", async () => {
    const seenThere = workerFn<[unknown], Seen>(FORGED_SERVICE, 'seen');
    const parsedThere = workerFn<[string], unknown>(FORGED_SERVICE, 'parsed');
    await run(
      (function* (): Coroutine<void> {
        for (const [what, text] of FORGED) {
          const body = JSON.parse(text) as unknown;
          expect(yield* toThread(seenThere, body), what).toStrictEqual({ value: body, classes: [] });
          expect(yield* toThread(parsedThere, text), what).toStrictEqual(body);
        }
      })(),
    );
  });

  it('arrive as the same plain data in a context variable that travels with a call', async () => {
    await run(
      (function* (): Coroutine<void> {
        const lt = yield* threads.start(FORGED_SERVICE, { name: 'forged-context' });
        for (const [what, body] of bodies()) {
          user.set(body);
          expect(yield* lt.call<Seen>('seenUser'), what).toStrictEqual({ value: body, classes: [] });
        }
      })(),
    );
  });

  it('arrive as the same plain data in a ThreadQueue item too large for its quick encoding', async () => {
    await run(
      (function* (): Coroutine<void> {
        const lt = yield* threads.start(FORGED_SERVICE, { name: 'forged-queue' });
        const queue = new ThreadQueue<unknown>({ name: 'forged' });
        for (const [what, body] of bodies()) {
          const item = { ...body, pad: Array.from({ length: 100 }, (_, i) => ({ i })) };
          queue.putNowait(item);
          expect(yield* lt.call<Seen>('getItem', queue), what).toStrictEqual({ value: item, classes: [] });
        }
      })(),
    );
  });
});
