/**
 * comlink, for real and across real threads: lt.comlinkPort() served to bare comlink clients
 * (from the main thread and from another thread), wrapComlink() over a LoopThread's port and over
 * a plain comlink Worker (including threads that die mid-call), and Comlink.proxy(fn) arguments
 * of lt.call, lt.callSoonThreadsafe, toThread and runInExecutor.
 */
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeAdapter from 'comlink/dist/umd/node-adapter.js';
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  PiscinaExecutor,
  RuntimeError,
  currentTask,

  getRunningLoop,
  move,
  run,
  sleep,
  toThread,
  workerFn,
  wrapComlink,
  type Coroutine,
  type EventLoop,
  type ExceptionContext,
} from '../src/index.js';
import { ask } from './helpers/comlink.js';
import { awaitPromise, errorOf, outcome, useThreads } from './helpers/loop-threads.js';

type Service = typeof import('./fixtures/comlink-service.mjs');

const SERVICE = new URL('./fixtures/comlink-service.mjs', import.meta.url);
const CLIENT = new URL('./fixtures/comlink-client.mjs', import.meta.url);
const WORKER = new URL('./fixtures/comlink-worker.mjs', import.meta.url);
const BARE_CLIENT = new URL('./fixtures/comlink-bare-client.mjs', import.meta.url);
const JOBS = new URL('./fixtures/comlink-jobs.mjs', import.meta.url);
const GUARDED = new URL('./fixtures/comlink-guarded.mjs', import.meta.url);
const HOSTILE_CALLEE = new URL('./fixtures/comlink-hostile-callee.mjs', import.meta.url);

/** comlink's adapter of Node ports and workers (a CommonJS module whose default export is the function). */
const nodeEndpoint = nodeAdapter as unknown as typeof nodeAdapter.default;

const threads = useThreads();

/** Exceptions the running loop's handler received during `body`. */
function* handled<T>(body: () => Coroutine<T>): Coroutine<{ value: T; contexts: ExceptionContext[] }> {
  const contexts: ExceptionContext[] = [];
  getRunningLoop().setExceptionHandler((_loop, context) => contexts.push(context));
  return { value: yield* body(), contexts };
}

describe('lt.comlinkPort()', () => {
  it('serves the hosted module to a bare comlink client: plain, coroutine and async functions, each run in the thread loop', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'svc' });
    const svc = Comlink.wrap<Service>(nodeEndpoint(lt.comlinkPort()));
    expect(await svc.add(1, 2)).toBe(3);
    expect(await svc.where()).toEqual({ thread: lt.threadId, inLoop: true, inTask: false });
    expect(await svc.twiceLater(21)).toEqual({ value: 42, inTask: true });
    expect(await svc.asyncAdd(40, 2)).toBe(42);
    svc[Comlink.releaseProxy]();
  });

  it('refuses names that are not own exported functions, with the same errors as lt.call', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'svc' });
    const svc = Comlink.wrap<Record<string, () => Promise<unknown>>>(nodeEndpoint(lt.comlinkPort()));
    for (const name of ['toString', 'constructor', 'hasOwnProperty', '__proto__', 'missing']) {
      const error = (await svc[name]!().catch((e: unknown) => e)) as Error;
      expect(error).toBeInstanceOf(Error);
      expect(error.message).toMatch(/is not a function exported by .*comlink-service\.mjs \(its functions: 'QuotaError', 'activePorts', 'add'/);
    }
    const error = (await svc.version!().catch((e: unknown) => e)) as Error;
    expect(error.message).toMatch(/'version' .*is not a function/);
    svc[Comlink.releaseProxy]();
  });

  it("keeps an error's class, message, code and cause for a client that imports multiloop, and message, name and code for a bare one", async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'svc' });
    const svc = Comlink.wrap<Service>(nodeEndpoint(lt.comlinkPort()));
    // This thread imports multiloop: the error is rebuilt whole.
    const error = (await svc.fail('range').catch((e: unknown) => e)) as RangeError & { code?: string };
    expect(error).toBeInstanceOf(RangeError);
    expect([error.message, error.code]).toEqual(['out of range', 'E_RANGE']);
    const quota = (await svc.fail('quota').catch((e: unknown) => e)) as Error;
    expect(quota.name).toBe('Error');
    expect(quota.message).toBe('over quota');
    expect(quota.cause).toBeInstanceOf(TypeError);
    svc[Comlink.releaseProxy]();

    // A client in another thread that imports multiloop (a LoopThread): the class is kept there too.
    await run(
      (function* () {
        const client = yield* threads.start(CLIENT, { name: 'client' });
        expect(yield* client.call<number>('connect', move(lt.comlinkPort()))).toBe(42);
        expect(yield* client.call('callFail')).toEqual({ name: 'RangeError', message: 'out of range', code: 'E_RANGE', isRange: true });
      })(),
    );

    // A plain worker that imports comlink only: comlink rebuilds an Error with the name, message and code.
    const bare = new Worker(BARE_CLIENT);
    const port = lt.comlinkPort();
    bare.postMessage(port, [port]);
    const [report] = (await once(bare, 'message')) as [unknown];
    expect(report).toEqual({ sum: 5, name: 'RangeError', message: 'out of range', code: 'E_RANGE', isRange: false, isError: true });
    await bare.terminate();
  });

  it('lets a client in another thread call through a moved port, and forgets that client when its thread dies', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const before = yield* lt.call<number>('activePorts');
        const client = yield* threads.start(CLIENT, { name: 'client' });
        expect(yield* client.call<number>('connect', move(lt.comlinkPort()))).toBe(42);
        expect(yield* lt.call<number>('activePorts')).toBe(before + 1);
        yield* awaitPromise(client.terminate());
        // The served port closes with its client: nothing is left listening in the service thread.
        let now = before + 1;
        for (let i = 0; i < 200 && now !== before; i++) {
          yield* sleep(0.005);
          now = yield* lt.call<number>('activePorts');
        }
        expect(now).toBe(before);
      })(),
    );
  });

  it('throws the death error for a thread that is gone', async () => {
    const lt = await threads.startOutside(SERVICE, { name: 'svc' });
    await lt.close();
    expect(() => lt.comlinkPort()).toThrow(RuntimeError);
    expect(() => lt.comlinkPort()).toThrow("LoopThread 'svc' is closed");
  });
});

/** The module comlink-guarded.mjs as a comlink client sees it, property chains included. */
interface Guarded {
  add(a: number, b: number): number;
  twice(x: number): number;
  inspect(): { ran: string[]; marker: string | null };
  config: { secret: string };
}

/** A comlink remote as a hostile client walks it: any property of anything, called, constructed or read. */
type Walk = { readonly [key: string]: Walk } & ((...args: unknown[]) => Promise<unknown>) & (new (...args: unknown[]) => Promise<unknown>);

/** Read what `remote` stands for: comlink sends a GET when its proxy is awaited. */
function read(remote: unknown): Promise<unknown> {
  return Promise.resolve(remote);
}

/** The TypeError lt.call's unknown names get from comlink-guarded.mjs, for `name`; `how` leads the parenthesis. */
function notServed(name: string, how?: string): string {
  return `'${name}' is not a function exported by ${GUARDED.href} (${how === undefined ? '' : `${how}; `}its functions: 'add', 'inspect', 'twice')`;
}

/** What leads the parenthesis of a refused request of comlink's `type`. */
function notACall(type: string): string {
  return `comlink ${type} refused, only calls are served`;
}

/** Code a hostile client would have run in the thread: a global set, a file written. */
function smuggled(file: string): string {
  return `globalThis.__hostileMarker = 'pwned'; return import('node:fs').then((fs) => fs.writeFileSync(${JSON.stringify(file)}, 'pwned'));`;
}

/** The error an answer carries (comlink's 'throw' handler rebuilds it), or null for a value. */
function refusalIn(reply: Record<string, unknown>): Error | null {
  if (reply.type !== 'HANDLER' || reply.name !== 'throw') return null;
  try {
    Comlink.transferHandlers.get('throw')!.deserialize(reply.value);
  } catch (error) {
    return error as Error;
  }
  return null;
}

describe('lt.comlinkPort() against a hostile client', () => {
  it('refuses every property walk of Comlink.wrap with the TypeError of an unknown name, and runs nothing but calls', async () => {
    const lt = await threads.startOutside(GUARDED, { name: 'guarded' });
    const dir = mkdtempSync(join(tmpdir(), 'multiloop-comlink-'));
    const file = join(dir, 'pwned');
    const remote = Comlink.wrap<Guarded>(nodeEndpoint(lt.comlinkPort()));
    const walk = remote as unknown as Walk;
    const code = smuggled(file);
    try {
      const attempts: Array<[string, () => Promise<unknown>]> = [
        // CONSTRUCT and APPLY of Function, reached from an export.
        [notServed('inspect.constructor', notACall('CONSTRUCT')), () => new (walk.inspect.constructor as Walk)(code)],
        [notServed('inspect.constructor'), () => walk.inspect.constructor(code)],
        [notServed('add.__proto__.constructor'), () => walk.add.__proto__.constructor(code)],
        [notServed('add.call'), () => walk.add.call(null, 1, 2)],
        [notServed('add.toString'), () => walk.add.toString()],
        // GET (comlink reads a property when its proxy is awaited): of a function, its prototype, getters.
        [notServed('add', notACall('GET')), () => read(walk.add)],
        [notServed('add.prototype', notACall('GET')), () => read(walk.add.prototype)],
        [notServed('add.__proto__', notACall('GET')), () => read(walk.add.__proto__)],
        [notServed('add.secret', notACall('GET')), () => read(walk.add.secret)],
        [notServed('config.secret', notACall('GET')), () => read(walk.config.secret)],
        [notServed('config', notACall('GET')), () => read(walk.config)],
        [notServed('', notACall('ENDPOINT')), () => remote[Comlink.createEndpoint]()],
      ];
      for (const [message, attempt] of attempts) {
        const error = (await attempt().then(
          (value: unknown) => ({ notRefused: typeof value }),
          (e: unknown) => e,
        )) as Error;
        expect(error).toBeInstanceOf(TypeError);
        expect(error.message).toBe(message);
      }
      // Calls still work, a coroutine function's too, and nothing else ran in the thread.
      expect(await remote.add(1, 2)).toBe(3);
      expect(await remote.twice(21)).toBe(42);
      expect(await remote.inspect()).toEqual({ ran: [], marker: null });
      expect(existsSync(file)).toBe(false);
      expect(lt.isDead()).toBe(false);
      remote[Comlink.releaseProxy]();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses comlink requests posted by hand (paths of several names, GET, SET, CONSTRUCT, ENDPOINT, other types, arguments comlink cannot decode), and lives on', async () => {
    const lt = await threads.startOutside(GUARDED, { name: 'guarded' });
    const dir = mkdtempSync(join(tmpdir(), 'multiloop-comlink-'));
    const file = join(dir, 'pwned');
    const port = lt.comlinkPort();
    const raw = (value: unknown): unknown => ({ type: 'RAW', value });
    const code = raw(smuggled(file));
    try {
      const requests: Array<[Record<string, unknown>, string]> = [
        [{ type: 'APPLY', path: ['inspect', 'constructor'], argumentList: [code] }, notServed('inspect.constructor')],
        [{ type: 'CONSTRUCT', path: ['inspect', 'constructor'], argumentList: [code] }, notServed('inspect.constructor', notACall('CONSTRUCT'))],
        [{ type: 'CONSTRUCT', path: ['add'], argumentList: [] }, notServed('add', notACall('CONSTRUCT'))],
        [{ type: 'APPLY', path: ['add', 'apply'], argumentList: [raw(null), raw([1, 2])] }, notServed('add.apply')],
        [{ type: 'APPLY', path: ['config', 'secret'], argumentList: [] }, notServed('config.secret')],
        [{ type: 'APPLY', path: [], argumentList: [] }, notServed('')],
        [{ type: 'APPLY', path: 'add', argumentList: [] }, notServed('add', notACall('APPLY'))],
        [{ type: 'APPLY', path: [['add']], argumentList: [] }, notServed('[object]')],
        [{ type: 'APPLY', path: ['__proto__'], argumentList: [] }, notServed('__proto__')],
        [{ type: 'GET', path: ['config', 'secret'] }, notServed('config.secret', notACall('GET'))],
        [{ type: 'GET', path: [] }, notServed('', notACall('GET'))],
        [{ type: 'SET', path: ['add', 'secret'], value: raw(1) }, notServed('add.secret', notACall('SET'))],
        [{ type: 'SET', path: ['__proto__', 'polluted'], value: raw(1) }, notServed('__proto__.polluted', notACall('SET'))],
        [{ type: 'ENDPOINT', path: ['add'] }, notServed('add', notACall('ENDPOINT'))],
        [{ type: 'FETCH', path: ['add'] }, notServed('add', "comlink message of type 'FETCH' refused, only calls are served")],
        [{ path: ['add'] }, notServed('add', 'comlink message without a type refused, only calls are served')],
        [{ type: 'APPLY', path: ['add'], argumentList: 5 }, "a comlink call's argumentList must be an array, got number"],
        ...[{ type: 'HANDLER', name: 'nope', value: 1 }, { type: 'HANDLER', name: 'throw', value: { isError: false, value: 1 } }, { type: 'HANDLER', name: 'proxy', value: {} }, null, 7].map(
          (argument): [Record<string, unknown>, string] => [
            { type: 'APPLY', path: ['add'], argumentList: [raw(1), argument] },
            "argument 2 of a comlink call is not in comlink's wire form ({ type: 'RAW', value }, or { type: 'HANDLER', name, value } naming a transfer handler)",
          ],
        ),
      ];
      for (const [request, message] of requests) {
        const error = refusalIn(await ask(port, request));
        expect(error, JSON.stringify(request)).toBeInstanceOf(TypeError);
        expect(error!.message).toBe(message);
      }
      // A call by hand is answered as comlink answers it, and the thread was not disturbed.
      expect(await ask(port, { type: 'APPLY', path: ['add'], argumentList: [raw(2), raw(3)] })).toMatchObject({ type: 'RAW', value: 5 });
      expect(await ask(port, { type: 'APPLY', path: ['inspect'] })).toMatchObject({ type: 'RAW', value: { ran: [], marker: null } });
      expect(existsSync(file)).toBe(false);
      expect(lt.isDead()).toBe(false);
      // RELEASE is still comlink's to answer.
      expect(await ask(port, { type: 'RELEASE' })).toMatchObject({ type: 'RAW', value: undefined });
      port.close();
      const again = Comlink.wrap<Guarded>(nodeEndpoint(lt.comlinkPort()));
      expect(await again.add(1, 1)).toBe(2);
      again[Comlink.releaseProxy]();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("serves a Comlink.proxy callback for calls only: the thread it was sent to cannot reach Function in the caller's thread", async () => {
    const lt = await threads.startOutside(HOSTILE_CALLEE, { name: 'hostile' });
    const marker = globalThis as { __hostileMarker?: unknown };
    const code = "globalThis.__hostileMarker = 'pwned'; return 'ran'";
    const answers = await run(
      (function* () {
        return yield* lt.call('probe', Comlink.proxy((x: number) => x + 1), code);
      })(),
    );
    const refused = (kind: string, path: string): { refused: string } => ({
      refused: `TypeError: a Comlink.proxy callback takes calls only: comlink ${kind} of '${path}' refused`,
    });
    expect(answers).toEqual({
      call: { value: 21 },
      construct: refused('CONSTRUCT', 'constructor'),
      applyConstructor: refused('APPLY', 'constructor'),
      get: refused('GET', 'constructor.name'),
      set: refused('SET', 'polluted'),
      endpoint: refused('ENDPOINT', ''),
    });
    expect(marker.__hostileMarker).toBeUndefined();
  });
});

describe('wrapComlink', () => {
  it('gives Futures of the caller loop for a LoopThread served through comlink', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const svc = wrapComlink<Service>(lt.comlinkPort());
        const future = svc.add(1, 2);
        expect(future.getLoop()).toBe(getRunningLoop());
        expect(yield* future).toBe(3);
        expect(yield* svc.twiceLater(5)).toEqual({ value: 10, inTask: true });
        const error = errorOf(yield* outcome(svc.fail('range')));
        expect(error).toBeInstanceOf(RangeError);
        expect(error.message).toBe('out of range');
        expect(errorOf(yield* outcome(svc.fail('quota'))).cause).toBeInstanceOf(TypeError);
        svc.close();
      })(),
    );
  });

  it('fails pending and later calls with a RuntimeError naming the LoopThread when its thread dies mid-call', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const svc = wrapComlink<Service>(lt.comlinkPort());
        const pending = svc.hang();
        yield* sleep(0.01);
        yield* awaitPromise(lt.terminate());
        const error = errorOf(yield* outcome(pending));
        expect(error).toBeInstanceOf(RuntimeError);
        expect(error.message).toMatch(/^LoopThread 'svc' \(thread \d+\) closed the comlink port: its thread ended or closed it$/);
        const later = errorOf(yield* outcome(svc.add(1, 2)));
        expect(later.message).toBe(error.message);
      })(),
    );
  });

  it('fails pending calls when a plain comlink Worker exits or crashes, naming the thread and the cause', async () => {
    await run(
      (function* () {
        const worker = new Worker(WORKER);
        type Api = { mul(a: number, b: number): number; hang(): Promise<never>; exitSoon(code: number): void; crashSoon(message: string): void };
        const api = wrapComlink<Api>(worker);
        const workerId = worker.threadId;
        expect(yield* api.mul(6, 7)).toBe(42);
        const pending = api.hang();
        yield* api.exitSoon(3);
        const error = errorOf(yield* outcome(pending));
        expect(error).toBeInstanceOf(RuntimeError);
        expect(error.message).toBe(`worker thread ${workerId} died: it exited with code 3`);

        const crashing = new Worker(WORKER);
        const api2 = wrapComlink<Api>(crashing);
        const crashingId = crashing.threadId;
        const pending2 = api2.hang();
        yield* api2.crashSoon('kaboom');
        const error2 = errorOf(yield* outcome(pending2));
        expect(error2.message).toBe(`worker thread ${crashingId} died: uncaught TypeError: kaboom`);
        expect(error2.cause).toBeInstanceOf(Error);
      })(),
    );
  });

  it('cancels a Future without disturbing the other calls, and close() fails what is pending', async () => {
    await run(
      (function* () {
        const worker = new Worker(WORKER);
        type Api = { later<T>(value: T, ms: number): Promise<T>; hang(): Promise<never> };
        const api = wrapComlink<Api>(worker);
        const cancelled = api.later('a', 50);
        const kept = api.later('b', 1);
        cancelled.cancel('no longer needed');
        expect(errorOf(yield* outcome(cancelled))).toBeInstanceOf(CancelledError);
        expect(yield* kept).toBe('b');
        const pending = api.hang();
        yield* sleep(0);
        api.close();
        api.close();
        const error = errorOf(yield* outcome(pending));
        expect(error).toBeInstanceOf(RuntimeError);
        expect(error.message).toBe('the comlink proxy is closed');
        expect(errorOf(yield* outcome(api.later('c', 1))).message).toBe('the comlink proxy is closed');
        yield* awaitPromise(worker.terminate());
      })(),
    );
  });

  it('is not a thenable, and refuses what is not an endpoint', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const svc = wrapComlink<Service>(lt.comlinkPort());
        expect((svc as unknown as { then?: unknown }).then).toBeUndefined();
        expect(yield* awaitPromise(Promise.resolve(svc))).toBe(svc);
        svc.close();
        expect(() => wrapComlink({} as never)).toThrow("wrapComlink() needs a Worker, a MessagePort or a comlink Endpoint, got {}");
      })(),
    );
  });
});

describe('Comlink.proxy arguments', () => {
  it('runs the callback in the caller loop, inside an iteration, once per call and in order (lt.call)', async () => {
    await run(
      (function* () {
        const loop = getRunningLoop();
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const seen: Array<[number, boolean]> = [];
        const report = Comlink.proxy((i: number) => {
          seen.push([i, getRunningLoop() === loop]);
          return i * 10;
        });
        expect(yield* lt.call('withProgress', report, 3)).toEqual([0, 10, 20]);
        expect(seen).toEqual([
          [0, true],
          [1, true],
          [2, true],
        ]);
      })(),
    );
  });

  it('delivers reports sent and forgotten before the call ended, before the caller resumes', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        for (let round = 0; round < 5; round++) {
          const seen: number[] = [];
          const result = yield* lt.call('fireAndForget', Comlink.proxy((i: number) => void seen.push(i)), 20);
          expect(result).toBe('fired');
          expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => i));
        }
        // The thread was not disturbed by the reports it did not wait for.
        expect(yield* lt.call('add', 1, 1)).toBe(2);
      })(),
    );
  });

  it('runs a coroutine callback as a Task of the caller loop', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const inTask: boolean[] = [];
        const report = Comlink.proxy(function* (i: number): Coroutine<number> {
          yield* sleep(0.001);
          inTask.push(currentTask() !== null);
          return i + 1;
        });
        expect(yield* lt.call('progressCoroutine', report, 4)).toBe(1 + 2 + 3 + 4);
        expect(inTask).toEqual([true, true, true, true]);
      })(),
    );
  });

  it("rejects the remote call with the callback's error, class and message kept, leaving the caller loop alone", async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const { value, contexts } = yield* handled(function* () {
          return yield* lt.call(
            'callbackError',
            Comlink.proxy(() => {
              throw new RangeError('callback failed');
            }),
          );
        });
        expect(value).toEqual({ name: 'RangeError', message: 'callback failed', isRange: true, isQuota: false });
        expect(contexts).toEqual([]);
      })(),
    );
  });

  it('releases the callback when the call settles: a later call of it fails there', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        let calls = 0;
        expect(yield* lt.call('keep', Comlink.proxy(() => ++calls))).toBe('kept');
        expect(yield* lt.call('callKept')).toBe(
          'RuntimeError: the Comlink.proxy callback was released: the call it was passed to has ended, or its caller is gone',
        );
        expect(calls).toBe(0);
      })(),
    );
  });

  it('works with lt.callSoonThreadsafe', async () => {
    await run(
      (function* () {
        const loop: EventLoop = getRunningLoop();
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const got = loop.createFuture<string>();
        lt.callSoonThreadsafe(
          'notifyBack',
          Comlink.proxy((value: string) => got.setResult(value)),
          'hello',
        );
        expect(yield* got).toBe('hello');
      })(),
    );
  });

  it('reports progress from a pool job (toThread and runInExecutor)', async () => {
    await run(
      (function* () {
        const loop = getRunningLoop();
        const seen: Array<[number, boolean]> = [];
        const report = Comlink.proxy((i: number) => {
          seen.push([i, getRunningLoop() === loop]);
          return -i;
        });
        const job = workerFn<[typeof report, number], number[]>(JOBS, 'withProgress');
        expect(yield* toThread(job, report, 3)).toEqual([-0, -1, -2]);
        expect(seen).toEqual([
          [0, true],
          [1, true],
          [2, true],
        ]);
        const forgotten: number[] = [];
        const fire = workerFn<[(i: number) => void, number], string>(JOBS, 'fireAndForget');
        expect(yield* loop.runInExecutor(null, fire, Comlink.proxy((i: number) => void forgotten.push(i)), 10)).toBe('fired');
        expect(forgotten).toEqual(Array.from({ length: 10 }, (_, i) => i));
        const failing = workerFn<[() => never], unknown>(JOBS, 'callbackError');
        expect(
          yield* toThread(
            failing,
            Comlink.proxy(() => {
              throw new TypeError('no progress for you');
            }),
          ),
        ).toEqual({ name: 'TypeError', message: 'no progress for you', isType: true });
      })(),
    );
  });

  it('fails the job, and closes the callback, when the pool thread dies mid-job', async () => {
    const executor = new PiscinaExecutor({ maxThreads: 1 });
    try {
      await run(
        (function* () {
          const loop = getRunningLoop();
          const seen: string[] = [];
          const job = workerFn<[(what: string) => void], never>(JOBS, 'reportThenDie');
          const error = errorOf(yield* outcome(loop.runInExecutor(executor, job, Comlink.proxy((what: string) => void seen.push(what)))));
          expect(error).toBeInstanceOf(RuntimeError);
          expect(error.message).toMatch(/exited with code 7/);
          expect(seen).toEqual(['started']);
          // The pool goes on.
          const again = workerFn<[(i: number) => number, number], number[]>(JOBS, 'withProgress');
          expect(yield* loop.runInExecutor(executor, again, Comlink.proxy((i: number) => i), 2)).toEqual([0, 1]);
        })(),
      );
    } finally {
      await executor.shutdown();
    }
  });

  it('a plain function argument still fails with a clear error', async () => {
    await run(
      (function* () {
        const lt = yield* threads.start(SERVICE, { name: 'svc' });
        const error = errorOf(yield* outcome(lt.call('withProgress', (i: number) => i, 1)));
        expect(error).toBeInstanceOf(TypeError);
        expect(error.message).toMatch(
          /^cannot send call 'withProgress' to LoopThread 'svc': argument 1 \(Function\) cannot be cloned \(.+\) \(mark it with Comlink\.proxy\(fn\) to let the other side call it back\)$/,
        );
        const fromPool = errorOf(yield* outcome(toThread(workerFn(JOBS, 'withProgress'), (i: number) => i, 1)));
        expect(fromPool.message).toMatch(/^cannot send withProgress of .*comlink-jobs\.mjs to a pool thread: argument 1 is a function, which cannot be cloned \(mark it with Comlink\.proxy\(fn\) to let the other side call it back\)$/);
      })(),
    );
  });
});

