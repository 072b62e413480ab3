/**
 * comlink, the worker RPC library most Node and web teams know, as a door to every loop and back:
 * `lt.comlinkPort()` serves a LoopThread's module to any comlink client, `wrapComlink()` lets a
 * coroutine await any comlink-exposed worker as Futures (failing them when its thread dies, where
 * bare comlink waits forever), and a `Comlink.proxy(fn)` argument of `lt.call`,
 * `lt.callSoonThreadsafe`, `runInExecutor` or `toThread` stays home and runs in the caller's loop
 * each time the other side calls it. The only module that imports comlink.
 *
 * Errors thrown across comlink keep more than comlink alone keeps (its message, name and stack):
 * this module gives comlink's `throw` handler the library's error encoding beside those three,
 * so a thread that imports multiloop rebuilds the error's class, cause and own properties, and a
 * bare comlink client still gets an Error with the message, name, stack and own primitive
 * properties (`code`...).
 *
 * A Buffer crosses as a Buffer between two ends that import multiloop: the sending end lists
 * the Buffers inside the values of a message in a field of the message that comlink ignores,
 * and the receiving end makes those Uint8Arrays Buffers again. A bare comlink end ignores the
 * field and gets Uint8Arrays, as structured clone makes them.
 */
import { isNativeError } from 'node:util/types';
import { MessageChannel, MessagePort, Worker, receiveMessageOnPort, type Transferable } from 'node:worker_threads';
import { createRequire } from 'node:module';
import type * as ComlinkModule from 'comlink';
import type nodeAdapter from 'comlink/dist/umd/node-adapter.js';
import type { EventLoop } from './base-events.js';
import { _isThenable, isCoroutine } from './coroutines.js';
import { RuntimeError } from './exceptions.js';
import { Future, type LoopOption } from './futures.js';
import { type ConcurrentFuture } from './internal/concurrent-future.js';
import { copyFields } from './internal/classes.js';
import { buffersIn, makeBuffers } from './internal/buffers.js';
import { decodeError, encodeError, type EncodedError } from './internal/errors.js';
import { repr } from './internal/format.js';
import { quoteName } from './internal/module-ref.js';
import { WaitNote } from './internal/introspect.js';
import { _getEventLoop, _getRunningLoop } from './internal/running.js';
import { WIRE, _setCallbackDecoder } from './internal/wire.js';
import { ensureFuture } from './task.js';
import { move } from './transfer.js';

// comlink is CommonJS: required rather than imported, it is the same module users import, without
// the ES-module loader's scan of its source for export names at every thread's start.
const require = createRequire(import.meta.url);
const Comlink = require('comlink') as typeof ComlinkModule;
/** comlink's adapter of Node's ports and workers (its CommonJS export is the function itself). */
const nodeEndpoint = require('comlink/dist/umd/node-adapter.js') as typeof nodeAdapter.default;

// ───────────────────────────── errors through comlink ─────────────────────────────

/** The key, beside comlink's message, name and stack, that carries the library's encoding of an error. */
const ENCODED = WIRE;

interface ThrownValue {
  isError: boolean;
  value: unknown;
}

const comlinkThrow = Comlink.transferHandlers.get('throw') as ComlinkModule.TransferHandler<{ value: unknown }, ThrownValue>;

Comlink.transferHandlers.set('throw', {
  canHandle: comlinkThrow.canHandle,
  serialize(thrown: { value: unknown }): [ThrownValue, Transferable[]] {
    const error = thrown.value;
    if (!(error instanceof Error) && !isNativeError(error)) return comlinkThrow.serialize(thrown);
    const value: Record<string, unknown> = {};
    // Own primitive properties (code, errno...) for a bare comlink client, which assigns them to its Error.
    for (const key of Object.keys(error)) {
      const item = (error as unknown as Record<string, unknown>)[key];
      if (item === null || (typeof item !== 'object' && typeof item !== 'function' && typeof item !== 'symbol')) value[key] = item;
    }
    value.message = error.message;
    value.name = error.name;
    value.stack = error.stack;
    value[ENCODED] = encodeError(error);
    return [{ isError: true, value }, []];
  },
  deserialize(serialized: ThrownValue): never {
    const value = serialized.value as Record<string, unknown> | null;
    if (serialized.isError && value !== null && typeof value === 'object') {
      if (value[ENCODED] !== undefined) throw decodeError(value[ENCODED] as EncodedError);
      throw errorOfFields(value);
    }
    return comlinkThrow.deserialize(serialized) as never;
  },
});

/**
 * The Error a bare comlink thread's thrown error stands for, as comlink rebuilds it (an Error of
 * the message, the fields assigned) but for a field `__proto__`, which comlink's `Object.assign`
 * would make the error's prototype: here it stays a field.
 */
function errorOfFields(fields: Record<string, unknown>): Error {
  const error = new Error(typeof fields.message === 'string' ? fields.message : undefined);
  copyFields(error, fields);
  return error;
}

// ───────────────────────────── Buffers through comlink ─────────────────────────────

/**
 * The key of the field listing the Buffers inside a comlink message's values; no application
 * data uses it, and comlink ignores it.
 */
const BUFFERS = `${WIRE}.buffers`;

/** List, in `message` (comlink's, about to be posted), the Buffers inside the values it carries. */
function listBuffers(message: unknown): void {
  if (typeof message !== 'object' || message === null) return;
  const fields = message as Record<string, unknown>;
  let values: unknown;
  switch (fields.type) {
    // A response is a wire value itself (a raw one holds the result); a SET's value is one.
    case 'RAW':
    case 'SET':
      values = fields.value;
      break;
    case 'APPLY':
    case 'CONSTRUCT':
      // Arguments that are all primitives (most calls) hold no Buffer: no walk, nothing made.
      if (!Array.isArray(fields.argumentList) || !fields.argumentList.some(holdsObject)) return;
      values = fields.argumentList;
      break;
    default:
      return;
  }
  const buffers = buffersIn(values);
  if (buffers !== null) fields[BUFFERS] = buffers;
}

function holdsObject(wireValue: unknown): boolean {
  const value = (wireValue as { value?: unknown } | null)?.value;
  return typeof value === 'object' && value !== null;
}

/** Make Buffers again of the Uint8Arrays that `data` (a message that arrived) lists. */
function restoreBuffers(data: unknown): void {
  if (typeof data !== 'object' || data === null) return;
  const list = (data as Record<string, unknown>)[BUFFERS];
  if (list === undefined) return;
  try {
    makeBuffers(list);
  } catch {
    // A list no multiloop end made: the message is still comlink's to answer.
  }
}

/**
 * `endpoint` for `Comlink.wrap`: the Buffers inside the values it posts are listed, the ones
 * listed in what arrives are made Buffers again before comlink reads it.
 */
function carryingBuffers(endpoint: ComlinkModule.Endpoint): ComlinkModule.Endpoint {
  type Listener = Parameters<ComlinkModule.Endpoint['addEventListener']>[1];
  const listeners = new Map<Listener, (event: MessageEvent) => void>();
  const carrying: ComlinkModule.Endpoint = {
    postMessage(message: unknown, transfer?: Transferable[]) {
      listBuffers(message);
      endpoint.postMessage(message, transfer);
    },
    addEventListener(type: string, listener: Listener, options?: object) {
      const restoring = (event: MessageEvent): void => {
        restoreBuffers(event.data);
        if (typeof listener === 'function') listener(event);
        else listener.handleEvent(event);
      };
      listeners.set(listener, restoring);
      endpoint.addEventListener(type, restoring, options);
    },
    removeEventListener(type: string, listener: Listener, options?: object) {
      const restoring = listeners.get(listener);
      if (restoring === undefined) return;
      listeners.delete(listener);
      endpoint.removeEventListener(type, restoring, options);
    },
  };
  if (endpoint.start !== undefined) carrying.start = () => endpoint.start!();
  return carrying;
}

/**
 * comlink's own `Comlink.proxy` handler, with both ends of the port it makes carrying Buffers: a
 * proxy passed through a comlink call, or returned by one, runs over a port of its own that no
 * multiloop endpoint sees. Its wire is comlink's (a MessagePort); a bare comlink end at the other
 * side works as before (it ignores the list and sees Uint8Arrays).
 */
const comlinkProxy = Comlink.transferHandlers.get('proxy') as ComlinkModule.TransferHandler<object, MessagePort>;

Comlink.transferHandlers.set('proxy', {
  canHandle: comlinkProxy.canHandle,
  serialize(target: object): [MessagePort, Transferable[]] {
    const { port1, port2 } = new MessageChannel();
    Comlink.expose(target, carryingBuffers(port1 as unknown as ComlinkModule.Endpoint));
    return [port2, [port2]];
  },
  deserialize(port: MessagePort): unknown {
    port.start();
    return Comlink.wrap(carryingBuffers(port as unknown as ComlinkModule.Endpoint));
  },
});

// ───────────────────────────── running a call in a loop ─────────────────────────────

/**
 * Run `fn(...args)` in `loop`, inside an iteration (at once when this is one of its iterations);
 * a coroutine runs as a Task, an awaitable is awaited. The Promise settles with the outcome.
 */
function runInLoop(loop: EventLoop, fn: (...args: unknown[]) => unknown, args: unknown[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const run = (): void => {
      let result: unknown;
      try {
        result = fn(...args);
      } catch (error) {
        reject(error);
        return;
      }
      if (!isCoroutine(result) && !_isThenable(result)) {
        resolve(result);
        return;
      }
      ensureFuture(result, { loop }).addDoneCallback((done) => {
        if (done.cancelled()) reject(done._makeCancelledError());
        else if (done.exception() !== null) reject(done.exception());
        else resolve(done.result());
      });
    };
    if (loop.isClosed()) reject(new RuntimeError('Event loop is closed'));
    else if (_getRunningLoop() === loop && loop._inDrive()) run();
    else loop.callSoonThreadsafe(run);
  });
}

// ───────────────────────────── what a served port answers ─────────────────────────────

/**
 * A comlink request rebuilt from its checked parts: the only form `Comlink.expose` is handed.
 * Arguments are decoded already (comlink's handlers ran on them, inside the check), so each
 * crosses as a raw value.
 */
interface Request {
  readonly id: unknown;
  readonly type: 'APPLY' | 'RELEASE';
  readonly path?: readonly string[];
  readonly argumentList?: readonly { readonly type: 'RAW'; readonly value: unknown }[];
}

/** What an object served with comlink lets its clients do: calls at the paths it admits, and release. */
interface Door {
  /** Throw the TypeError that refuses a call at `path` (any value a client sent), unless the call is served. */
  checkCall(path: readonly unknown[]): void;
  /** The TypeError that refuses a request of `kind` (`comlink GET`...) at `path`. */
  refusal(kind: string, path: readonly unknown[]): TypeError;
}

/**
 * comlink's request handler behind `door`: a call the door admits reaches `handler` rebuilt from
 * its checked parts (the Buffers a multiloop client listed made Buffers again); any other
 * request (a GET, SET, CONSTRUCT or ENDPOINT, a call at a path that walks properties, arguments
 * comlink would choke on) is answered with the TypeError that refuses it, as comlink answers a
 * call that threw; what is no request at all is dropped, as comlink drops it. comlink's
 * `expose` alone would walk any path a client sends, from the served object to `Function` and
 * beyond (`new remote.fn.constructor(code)` runs code here), and throw out of the port's
 * listener, ending the thread, on arguments it cannot decode.
 */
function screened(
  door: Door,
  handler: (event: { data: unknown }) => void,
  post: (message: unknown, transfer: Transferable[]) => void,
): (data: unknown) => void {
  return (data) => {
    if (typeof data !== 'object' || data === null) return;
    restoreBuffers(data);
    const message = data as Record<string, unknown>;
    let request: Request;
    try {
      request = admit(door, message);
    } catch (error) {
      const thrown = Comlink.transferHandlers.get('throw') as ComlinkModule.TransferHandler<{ value: unknown }, unknown>;
      const [value, transfer] = thrown.serialize({ value: error });
      post({ type: 'HANDLER', name: 'throw', value, id: message.id }, transfer);
      return;
    }
    handler({ data: request });
  };
}

/** `message` as the request comlink may answer; throws the TypeError refusing it. */
function admit(door: Door, message: Record<string, unknown>): Request {
  const { id, type } = message;
  const path = message.path === undefined ? [] : message.path;
  if (!Array.isArray(path)) throw door.refusal(kindOf(type), [path]);
  switch (type) {
    case 'APPLY':
      door.checkCall(path);
      return { id, type, path: path as string[], argumentList: decodeArguments(message.argumentList) };
    case 'RELEASE':
      return { id, type };
    default:
      throw door.refusal(kindOf(type), path);
  }
}

/** The request type `type` for a message (`comlink GET`), whatever a client sent. */
function kindOf(type: unknown): string {
  if (type === 'GET' || type === 'SET' || type === 'CONSTRUCT' || type === 'ENDPOINT' || type === 'APPLY') return `comlink ${type}`;
  return typeof type === 'string' ? `comlink message of type ${quoteName(type)}` : 'comlink message without a type';
}

/** `path` as one dotted name for messages; parts that are not strings are named by their type. */
function pathName(path: readonly unknown[]): string {
  return path.map((part) => (typeof part === 'string' ? part : typeof part === 'number' ? String(part) : `[${typeof part}]`)).join('.');
}

/** A call's arguments as comlink sent them, decoded; a TypeError for one that is not comlink's wire form. */
function decodeArguments(list: unknown): { readonly type: 'RAW'; readonly value: unknown }[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw new TypeError(`a comlink call's argumentList must be an array, got ${typeof list}`);
  const decoded: { readonly type: 'RAW'; readonly value: unknown }[] = [];
  for (let i = 0; i < list.length; i++) decoded.push({ type: 'RAW', value: decodeArgument(list[i], i) });
  return decoded;
}

function decodeArgument(wire: unknown, index: number): unknown {
  if (typeof wire === 'object' && wire !== null) {
    const { type, name, value } = wire as Record<string, unknown>;
    if (type === 'RAW') return value;
    // 'throw' stands for a thrown error and throws when decoded: no argument is one. 'proxy' wraps a port.
    const handler = type === 'HANDLER' && typeof name === 'string' && name !== 'throw' ? Comlink.transferHandlers.get(name) : undefined;
    if (handler !== undefined && (name !== 'proxy' || value instanceof MessagePort)) return handler.deserialize(value);
  }
  throw new TypeError(
    `argument ${index + 1} of a comlink call is not in comlink's wire form ` +
      "({ type: 'RAW', value }, or { type: 'HANDLER', name, value } naming a transfer handler)",
  );
}

// ───────────────────────────── lt.comlinkPort(): serving a LoopThread ─────────────────────────────

/**
 * A module served through `lt.comlinkPort()`: its functions by name, and the errors for the rest.
 *
 * @internal
 */
export interface _ServedModule {
  /** Its function exported as `name`; throws the TypeError `lt.call` refuses other names with. */
  lookup(name: string): (...args: unknown[]) => unknown;
  /** That TypeError for `name`; `how` (what was asked instead of a call) leads its parenthesis. */
  refusal(name: string, how?: string): TypeError;
}

/** Whose thread serves each `lt.comlinkPort()` port made here, to name it in errors. */
const owners = new WeakMap<MessagePort, string>();

/** The ports this thread serves with comlink, closed when its loop ends so that nothing keeps the thread alive. */
const served = new Set<MessagePort>();

/**
 * Serve `module`'s exported functions on `port` with comlink: each call runs in `loop`, a
 * coroutine function as a Task. Only calls of them are answered, each at a one-name path: any
 * other name, and any other request (reading, setting or constructing, a property of a function,
 * another endpoint), is refused with the TypeError `lt.call` gives an unknown name.
 *
 * @internal
 */
export function _serveComlink(loop: EventLoop, port: MessagePort, module: _ServedModule): void {
  const door: Door = {
    checkCall(path) {
      if (path.length === 1 && typeof path[0] === 'string') module.lookup(path[0]);
      else throw module.refusal(pathName(path));
    },
    refusal: (kind, path) => module.refusal(pathName(path), `${kind} refused, only calls are served`),
  };
  const callers = new Map<string, (...args: unknown[]) => Promise<unknown>>();
  // Asked only for the names the door admitted: exported functions.
  const target = new Proxy(Object.create(null) as object, {
    get(_target, property) {
      if (typeof property !== 'string') return undefined;
      let caller = callers.get(property);
      if (caller === undefined) {
        caller = (...args: unknown[]) => {
          let fn: (...args: unknown[]) => unknown;
          try {
            fn = module.lookup(property);
          } catch (error) {
            return Promise.reject(error as Error);
          }
          return runInLoop(loop, fn, args);
        };
        callers.set(property, caller);
      }
      return caller;
    },
  });
  let listener: ((data: unknown) => void) | null = null;
  const endpoint: ComlinkModule.Endpoint = {
    postMessage: (message: unknown, transfer?: Transferable[]) => {
      listBuffers(message);
      port.postMessage(message, transfer as never);
    },
    addEventListener: (_type: string, handler: Parameters<ComlinkModule.Endpoint['addEventListener']>[1]) => {
      listener = screened(door, handler as (event: { data: unknown }) => void, endpoint.postMessage);
      port.on('message', listener);
    },
    // comlink stops listening once the client released its proxy.
    removeEventListener: () => {
      if (listener !== null) port.off('message', listener);
      listener = null;
    },
  };
  served.add(port);
  // The client's thread ending closes the port: stop listening, let it go.
  port.once('close', () => {
    served.delete(port);
    port.removeAllListeners('message');
  });
  Comlink.expose(target, endpoint);
}

/**
 * Close every port this thread serves with comlink (its loop is ending); their clients' pending
 * calls fail there when the client is `wrapComlink`.
 *
 * @internal
 */
export function _closeServedComlinkPorts(): void {
  for (const port of [...served]) port.close();
  served.clear();
}

/**
 * A new MessageChannel for `lt.comlinkPort()`: the caller keeps `port1`, the thread serves `port2`.
 * `port1` remembers whose it is, so that `wrapComlink(port1)` names the thread when it dies.
 *
 * @internal
 */
export function _comlinkChannel(owner: string): MessageChannel {
  const channel = new MessageChannel();
  owners.set(channel.port1, owner);
  return channel;
}

// ───────────────────────────── wrapComlink(): awaiting a comlink worker ─────────────────────────────

/** What a method of a comlink-exposed object gives when called through `wrapComlink`: a generator's return value or the awaited result. */
export type ComlinkResult<R> = R extends Generator<unknown, infer U, unknown> ? U : Awaited<R>;

/**
 * The methods of `T` as seen through `wrapComlink`: same arguments, each call a Future of the
 * caller's loop; and `close()`, which releases the proxy.
 */
export type FutureProxy<T> = {
  readonly [K in keyof T as T[K] extends (...args: never[]) => unknown ? K : never]: T[K] extends (...args: infer A) => infer R
    ? (...args: A) => Future<ComlinkResult<R>>
    : never;
} & {
  /**
   * Release the proxy: the exposing side is told (comlink's release), a MessagePort given to
   * `wrapComlink` is closed, and calls still pending fail with a RuntimeError. Idempotent.
   */
  close(): void;
};

/**
 * A proxy of the object exposed with `Comlink.expose` at the far end of `endpoint` (a Worker, a
 * MessagePort such as `lt.comlinkPort()`'s, or any comlink Endpoint): each method call returns a
 * Future of `options.loop` (else the running or current loop). When the endpoint is a Worker, or
 * a MessagePort whose far end closes (its thread died), pending Futures fail with a RuntimeError
 * naming it — bare comlink would wait forever. Cancelling a Future stops waiting for the call;
 * comlink cannot stop the call itself. A remote method named `close` is shadowed by the proxy's
 * own `close()`.
 *
 * @example
 * ```ts
 * const svc = wrapComlink<typeof import('./svc.js')>(lt.comlinkPort());
 * const sum = yield* svc.add(1, 2);
 * svc.close();
 * ```
 */
export function wrapComlink<T>(endpoint: Worker | MessagePort | ComlinkModule.Endpoint, options?: LoopOption): FutureProxy<T> {
  const loop = options?.loop ?? _getEventLoop();
  if (endpoint instanceof Worker) return new ComlinkClient(loop, nodeEndpoint(endpoint), endpoint, null).proxy as FutureProxy<T>;
  if (endpoint instanceof MessagePort) return new ComlinkClient(loop, nodeEndpoint(endpoint), null, endpoint).proxy as FutureProxy<T>;
  if (
    endpoint === null ||
    typeof endpoint !== 'object' ||
    typeof (endpoint as Partial<ComlinkModule.Endpoint>).postMessage !== 'function' ||
    typeof (endpoint as Partial<ComlinkModule.Endpoint>).addEventListener !== 'function' ||
    typeof (endpoint as Partial<ComlinkModule.Endpoint>).removeEventListener !== 'function'
  ) {
    throw new TypeError(`wrapComlink() needs a Worker, a MessagePort or a comlink Endpoint, got ${repr(endpoint)}`);
  }
  return new ComlinkClient(loop, endpoint, null, null).proxy as FutureProxy<T>;
}

type Remote = Record<string, (...args: unknown[]) => Promise<unknown>> & { [Comlink.releaseProxy]: () => void };

/** The state behind one `wrapComlink` proxy. */
class ComlinkClient {
  readonly proxy: object;
  readonly #loop: EventLoop;
  readonly #remote: Remote;
  readonly #pending = new Set<Future<unknown>>();
  readonly #methods = new Map<string, (...args: unknown[]) => Future<unknown>>();
  readonly #worker: Worker | null;
  readonly #port: MessagePort | null;
  /** Why calls fail from now on; null while the proxy can be used. */
  #failure: (() => Error) | null = null;
  readonly #onExit: ((code: number) => void) | null = null;
  readonly #onError: ((error: Error) => void) | null = null;
  readonly #onClose: (() => void) | null = null;
  #uncaught: Error | null = null;

  constructor(loop: EventLoop, endpoint: ComlinkModule.Endpoint, worker: Worker | null, port: MessagePort | null) {
    this.#loop = loop;
    this.#worker = worker;
    this.#port = port;
    this.#remote = Comlink.wrap(carryingBuffers(endpoint)) as unknown as Remote;
    if (worker !== null) {
      const name = `worker thread ${worker.threadId}`;
      this.#onError = (error) => {
        this.#uncaught = error;
      };
      this.#onExit = (code) => {
        const uncaught = this.#uncaught;
        this.#die(() =>
          uncaught === null
            ? new RuntimeError(`${name} died: it exited with code ${code}`)
            : new RuntimeError(`${name} died: uncaught ${uncaught.name}: ${uncaught.message}`, { cause: uncaught }),
        );
      };
      worker.on('error', this.#onError);
      worker.once('exit', this.#onExit);
    } else if (port !== null) {
      const owner = owners.get(port) ?? 'the thread at the far end of the MessagePort';
      this.#onClose = () => this.#die(() => new RuntimeError(`${owner} closed the comlink port: its thread ended or closed it`));
      port.once('close', this.#onClose);
    }
    this.proxy = new Proxy(Object.create(null) as object, {
      get: (_target, property) => {
        // Not a thenable: `await proxy` must not look for `then`.
        if (typeof property !== 'string' || property === 'then') return undefined;
        if (property === 'close') return this.#close;
        let method = this.#methods.get(property);
        if (method === undefined) {
          method = (...args: unknown[]) => this.#call(property, args);
          this.#methods.set(property, method);
        }
        return method;
      },
    });
  }

  #call(name: string, args: unknown[]): Future<unknown> {
    const loop = this.#loop;
    const failure = this.#failure;
    let promise: Promise<unknown>;
    try {
      if (failure !== null) throw failure();
      promise = this.#remote[name]!(...args);
    } catch (error) {
      const failed = loop.createFuture<unknown>();
      failed._setExceptionUnchecked(error);
      return failed;
    }
    // ensureFuture settles it in a loop iteration, and ignores an outcome once it is done
    // (cancelled, or failed by the death of the far side).
    const future = ensureFuture(promise, { loop });
    // Snapshots (ps) read what a pending future stands for from its result slot, unused until it is done.
    if (!future.done()) future._result = new WaitNote(`comlink call ${repr(name)}`, true);
    this.#pending.add(future);
    future.addDoneCallback(() => this.#pending.delete(future));
    return future;
  }

  /** The far side is gone: fail what is pending and what comes. */
  #die(makeError: () => Error): void {
    if (this.#failure !== null) return;
    this.#failure = makeError;
    this.#detach();
    this.#failPending(makeError);
  }

  #failPending(makeError: () => Error): void {
    const loop = this.#loop;
    for (const future of [...this.#pending]) {
      if (loop.isClosed()) break;
      loop.callSoonThreadsafe(() => {
        if (!future.done()) future._setExceptionUnchecked(makeError());
      });
    }
    this.#pending.clear();
  }

  #detach(): void {
    if (this.#worker !== null) {
      this.#worker.off('error', this.#onError as (error: Error) => void);
      this.#worker.off('exit', this.#onExit as (code: number) => void);
    }
    if (this.#port !== null) this.#port.off('close', this.#onClose as () => void);
  }

  readonly #close = (): void => {
    if (this.#failure !== null) return;
    const makeError = (): Error => new RuntimeError('the comlink proxy is closed');
    this.#failure = makeError;
    this.#detach();
    try {
      this.#remote[Comlink.releaseProxy]();
    } catch {
      // Already released by comlink: nothing more to tell the far side.
    }
    this.#port?.close();
    this.#failPending(makeError);
  };
}

// ───────────────────────────── Comlink.proxy(fn) arguments ─────────────────────────────

/** Whether `fn` was marked with `Comlink.proxy()`. */
export function _isComlinkProxy(fn: unknown): fn is (...args: unknown[]) => unknown {
  if (typeof fn !== 'function') return false;
  if ((fn as { [Comlink.proxyMarker]?: unknown })[Comlink.proxyMarker] === true) return true;
  // The mark of another copy of comlink (its ES module build, say), by the symbol's description.
  for (const key of Object.getOwnPropertySymbols(fn)) {
    if (key.description === 'Comlink.proxy' && (fn as unknown as Record<symbol, unknown>)[key] === true) return true;
  }
  return false;
}

/** A `Comlink.proxy(fn)` argument takes calls of itself, at the empty path; nothing of `fn` is read or set from the far side. */
const CALLBACK_DOOR: Door = {
  checkCall(path) {
    if (path.length !== 0) throw CALLBACK_DOOR.refusal('comlink APPLY', path);
  },
  refusal: (kind, path) => new TypeError(`a Comlink.proxy callback takes calls only: ${kind} of ${quoteName(pathName(path))} refused`),
};

/**
 * The `Comlink.proxy(fn)` arguments of one call, sent from their loop: each stays home, served
 * on a MessageChannel whose far port crosses in its place; all are released together when the
 * call settles.
 *
 * @internal
 * @example
 * ```ts
 * const callbacks = new _Callbacks(loop);
 * args[i] = callbacks.send(args[i]);
 * callbacks.releaseWhenDone(future);
 * ```
 */
export class _Callbacks {
  readonly #loop: EventLoop;
  readonly #releases: (() => void)[] = [];

  constructor(loop: EventLoop) {
    this.#loop = loop;
  }

  /** What crosses in place of `fn`: a record holding the far port (moved, not copied). */
  send(fn: (...args: unknown[]) => unknown): unknown {
    const loop = this.#loop;
    const { port1, port2 } = new MessageChannel();
    let listener: ((data: unknown) => void) | null = null;
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      port1.close();
    };
    port1.once('close', () => {
      closed = true;
    });
    const endpoint: ComlinkModule.Endpoint = {
      postMessage: (message: unknown, transfer?: Transferable[]) => {
        if (closed) return;
        listBuffers(message);
        port1.postMessage(message, transfer as never);
      },
      addEventListener: (_type: string, handler: Parameters<ComlinkModule.Endpoint['addEventListener']>[1]) => {
        listener = screened(CALLBACK_DOOR, handler as (event: { data: unknown }) => void, endpoint.postMessage);
        port1.on('message', (data: unknown) => listener?.(data));
      },
      // comlink stops listening after the far side released the proxy: the channel is done.
      removeEventListener: () => {
        listener = null;
        queueMicrotask(close);
      },
    };
    Comlink.expose((...args: unknown[]) => runInLoop(loop, fn, args), endpoint);
    this.#releases.push(() => {
      if (closed) return;
      // Calls made before the call settled may still be on their way: they run now, in order.
      for (;;) {
        if (closed || listener === null) break;
        const received = receiveMessageOnPort(port1);
        if (received === undefined) break;
        listener(received.message);
      }
      close();
    });
    return { [WIRE]: 'callback', port: move(port2) };
  }

  /** Release the callbacks once `future` is done, inside an iteration of the loop when it still runs. */
  releaseWhenDone(future: Future<unknown> | ConcurrentFuture<unknown>): void {
    if (future instanceof Future) {
      future.addDoneCallback(() => this.release());
      return;
    }
    future.addDoneCallback(() => {
      const loop = this.#loop;
      if (loop.isClosed()) this.release();
      else loop.callSoonThreadsafe(() => this.release());
    });
  }

  /** Stop serving the callbacks; calls that arrived first still run. */
  release(): void {
    const releases = this.#releases.splice(0);
    for (const release of releases) release();
  }
}

/** Callbacks decoded by the arguments of the call being started, released when it ends. */
let received: (() => void)[] | null = null;

/**
 * The callable a `Comlink.proxy(fn)` argument arrives as: a comlink proxy of the port. Once the
 * call it came with has ended (or its caller is gone), calls fail with a RuntimeError; one still
 * waiting then fails too, without being reported as unhandled when nobody awaits it (a progress
 * report sent and forgotten).
 */
function receiveCallback(record: Record<string, unknown>): unknown {
  const port = record.port as MessagePort;
  const remote = Comlink.wrap(carryingBuffers(nodeEndpoint(port))) as unknown as ((...args: unknown[]) => Promise<unknown>) & Remote;
  const pending = new Map<Promise<unknown>, (error: Error) => void>();
  let closed = false;
  const ended = (): Error =>
    new RuntimeError('the Comlink.proxy callback was released: the call it was passed to has ended, or its caller is gone');
  const end = (): void => {
    if (closed) return;
    closed = true;
    const error = ended();
    for (const [promise, reject] of pending) {
      promise.catch(ignore);
      reject(error);
    }
    pending.clear();
  };
  port.once('close', end);
  port.unref();
  (received ??= []).push(() => {
    if (closed) return;
    end();
    try {
      remote[Comlink.releaseProxy]();
    } catch {
      // Already released.
    }
  });
  return (...args: unknown[]): Promise<unknown> => {
    if (closed) return Promise.reject(ended());
    let reject: (error: Error) => void = ignore;
    const promise = new Promise<unknown>((resolve, rejectCall) => {
      reject = rejectCall;
      remote(...args).then(
        (value) => {
          pending.delete(promise);
          resolve(value);
        },
        (error: unknown) => {
          pending.delete(promise);
          rejectCall(error as Error);
        },
      );
    });
    pending.set(promise, reject);
    return promise;
  };
}

function ignore(): void {
  // An outcome nobody needs.
}

_setCallbackDecoder(receiveCallback);

/**
 * The release of the callbacks the arguments just decoded brought (null when none): the
 * receiving side calls it when the call ends.
 *
 * @internal
 */
export function _takeReceivedCallbacks(): (() => void) | null {
  const taken = received;
  if (taken === null) return null;
  received = null;
  return () => {
    for (const release of taken) release();
  };
}
