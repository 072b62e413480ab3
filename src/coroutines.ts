/**
 * Coroutines: generator objects driven by a Task (asyncio.coroutines).
 */
import type { Future } from './futures.js';

/** A coroutine: a generator object driven by a Task; `yield*` awaits, a bare `yield` gives up one iteration. */
export type Coroutine<T = unknown> = Generator<unknown, T, unknown>;

/** Anything `ensureFuture` accepts: a Future/Task, a coroutine, or a Promise/thenable. */
export type Awaitable<T = unknown> = Future<T> | Coroutine<T> | PromiseLike<T>;

/**
 * A Promise that a coroutine can also `yield*`: every multiloop API that returns a Promise
 * returns one (`LoopThread.start`, `lt.close`, `ps`, `pstree`, executors' `shutdown`,
 * `startMonitor`...). It is a real Promise (`instanceof Promise`, `await`, `.then`,
 * `Promise.all`); in a coroutine, `yield*` makes it a Future of the running loop and awaits that.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<void> {
 *   const svc = yield* LoopThread.start(new URL('./svc.js', import.meta.url)); // no ensureFuture
 *   console.log(yield* pstree());
 *   yield* svc.close();
 * }
 * ```
 */
export interface YieldablePromise<T> extends Promise<T> {
  [Symbol.iterator](): Generator<unknown, T, unknown>;
}

/** The value an awaitable produces when awaited (a Future's, coroutine's or thenable's result). */
export type AwaitedResult<A> =
  A extends Future<infer T>
    ? T
    : A extends Generator<unknown, infer T, unknown>
      ? T
      : A extends PromiseLike<unknown>
        ? Awaited<A>
        : never;

/** The prototype of every generator function's `prototype` (%GeneratorPrototype%). */
const GENERATOR_PROTOTYPE: object = Object.getPrototypeOf(function* () {}.prototype) as object;
/**
 * Whether %GeneratorPrototype% is on an object's prototype chain, bound as the module loads
 * (V8 inlines it: about 3x faster than two Object.getPrototypeOf calls).
 */
const isGeneratorObject: (x: object) => boolean = Object.prototype.isPrototypeOf.bind(GENERATOR_PROTOTYPE);

/**
 * Whether `x` is a coroutine: a generator object, or an object that behaves as one
 * (`next`, `throw` and `return` methods), as asyncio accepts coroutine-like objects.
 *
 * @example
 * ```ts
 * function* work() { yield; }
 * isCoroutine(work()); // true
 * isCoroutine(work);   // false: a coroutine function, not a coroutine
 * ```
 */
export function isCoroutine(x: unknown): x is Coroutine<unknown> {
  if (x === null || typeof x !== 'object') return false;
  // A generator object, told by its prototype chain: no property lookups (this function sees
  // objects of every kind, its property lookups would be megamorphic).
  if (isGeneratorObject(x)) return true;
  const candidate = x as { next?: unknown; throw?: unknown; return?: unknown; [_FUTURE]?: unknown };
  // A Future is its own `yield*` iterator, hence has the same methods: it is not a coroutine.
  return (
    typeof candidate.next === 'function' &&
    typeof candidate.throw === 'function' &&
    typeof candidate.return === 'function' &&
    candidate[_FUTURE] === undefined
  );
}

/**
 * @internal Whether `x` has a callable `then`: a Promise, a thenable, or a Future (which is
 * PromiseLike too).
 */
export function _isThenable(x: unknown): x is PromiseLike<unknown> {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof (x as { then?: unknown }).then === 'function';
}

/** @internal Marks Future.prototype (not each future): what tells a future from a coroutine. */
export const _FUTURE = Symbol('multiloop.Future');

/**
 * @internal The await protocol's flag (asyncio's `_asyncio_future_blocking`), held once for the
 * thread rather than on every future: the future whose `yield*` just yielded it to its Task. The
 * hand-over is synchronous (the future's `next()` returns, the Task's step reads it at once).
 */
export const _awaiting: { future: object | null } = { future: null };

/** @internal Whether `x` is a native generator object. */
export function _isGenerator(x: unknown): boolean {
  return Object.prototype.toString.call(x) === '[object Generator]';
}
