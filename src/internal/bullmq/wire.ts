/**
 * What travels between a `BullMQExecutor` and its `serveBullMQ` workers besides BullMQ's own
 * jobs: Redis key names, the outcome records, the Lua script that writes them, the encoding of
 * values, and the Redis connection options. Shared by the caller's engine (caller.ts)
 * and the worker's runner (runner.ts); nothing here imports BullMQ.
 *
 * One BullMQ job carries one or more calls. Its `name` is the id of the executor that sent it
 * (so a worker knows where outcomes go even when it cannot read the job's data), its `data` is
 * `{ c: base64 }` of a v8-serialized `JobRequest`: serialized once per job, not per call (a call
 * of its own costs several microseconds in `node:v8`). A request whose arguments JSON carries
 * exactly (see `jsonExact`) goes as `{ j: [fns, at, args] }` instead, in the JSON BullMQ writes
 * anyway: a lone tiny call spends no time in `node:v8` on either side. Arguments and results first go through
 * `toWire` (errors and registered classes become records), and arguments are rebuilt on the
 * worker after the call's module is imported (it may register the classes they hold).
 *
 * Outcomes travel on a Redis stream per executor (`<prefix>:<queue>:ml-out:<executor>`), read by
 * the executor with a blocking XREAD: each entry's field `d` is a v8-serialized flat array
 * `[jobId, index, kind, payload, ms, index, kind, payload, ms, ...]` — the outcomes of one job's
 * calls that ended in the same turn of the worker's event loop — or, when JSON carries that array
 * exactly, its JSON text (v8's output starts with byte 0xFF, JSON's with `[`). The same script that appends an
 * entry sets the calls' bits in the job's "done" bitmap (a lone call's too), kept until BullMQ has
 * the job completed, so a job run again (its worker died, it lost its lock, or BullMQ retries it)
 * skips the calls whose outcomes were delivered. A worker also writes an entry `s: jobId` when
 * it starts a job that will wait: its start notice, after which the caller's `cancel()` of the
 * job's calls returns false. The caller cancels a call not started by setting its bit in the
 * job's "cancel" bitmap and publishing `<jobId> <index>` on the queue's cancel channel, which
 * every worker process subscribes to; a call started, by publishing `<jobId> <index> stop` (it
 * runs on with its `jobSignal()` aborted, and its outcome is delivered).
 */
import { createHash } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import type { ConnectionOptions as TlsConnectionOptions } from 'node:tls';
import { decodeError, encodeError, type EncodedError } from '../errors.js';
import { repr } from '../format.js';
import type { CarriedContext } from '../travel.js';
import { describeUncloneable, findUncloneable } from '../uncloneable.js';
import { fromWire, toWire } from '../wire.js';

/** The queue served when none is named. */
export const DEFAULT_QUEUE = 'multiloop';
/** BullMQ's default key prefix. */
export const DEFAULT_PREFIX = 'bull';
/** Seconds the outcome stream and the bitmaps of a job live after their last write (an executor or job that vanished). */
export const KEY_TTL_SECONDS = 24 * 60 * 60;

/** The most bytes a job's data takes in Redis when no `maxJobBytes` says otherwise: 16 MiB. */
export const DEFAULT_MAX_JOB_BYTES = 16 * 1024 * 1024;
/** The most bytes of outcomes one job writes to its executor's stream when no `maxOutcomeBytes` says otherwise: 16 MiB. */
export const DEFAULT_MAX_OUTCOME_BYTES = 16 * 1024 * 1024;
/** The largest outcome entry an executor reads (and the largest `maxOutcomeBytes` a worker takes): 64 MiB. */
export const MAX_OUTCOME_BYTES = 64 * 1024 * 1024;

/** A call returned: its payload is the value. */
export const OUTCOME_VALUE = 0;
/** A call threw: its payload is the encoded error. */
export const OUTCOME_ERROR = 1;
/** The whole job failed (index -1): every call of it without an outcome fails with the payload's error. */
export const OUTCOME_JOB_ERROR = 2;

/**
 * Where Redis is: a `redis://` / `rediss://` URL, or the host, port and credentials of ioredis's
 * options (the subset BullMQ needs).
 *
 * @example
 * ```ts
 * const connection: RedisConnection = { host: '10.0.0.5', port: 6379, password: process.env.REDIS_PASSWORD };
 * ```
 */
export type RedisConnection =
  | string
  | { host?: string; port?: number; username?: string; password?: string; db?: number; tls?: TlsConnectionOptions };

/** Options for ioredis, as BullMQ's `connection` takes them, and how messages name the server. */
export interface ResolvedConnection {
  readonly options: Record<string, unknown>;
  /** `host:port`, without credentials. */
  readonly where: string;
}

/** Reconnect soon after Redis comes back: 100 ms, 200 ms, ... at most 2 s apart. */
function retryStrategy(times: number): number {
  return Math.min(100 * times, 2000);
}

/**
 * Check `connection` (option `name` of `caller`) and turn it into ioredis options: commands wait
 * while Redis is away (the executor's `unreachableTimeout` decides how long), and reconnecting is
 * retried at most 2 s apart.
 *
 * @example
 * ```ts
 * const { options, where } = resolveConnection('redis://127.0.0.1:6390', 'BullMQExecutor');
 * ```
 */
export function resolveConnection(connection: unknown, caller: string): ResolvedConnection {
  const common = { maxRetriesPerRequest: null, retryStrategy, enableReadyCheck: true };
  if (typeof connection === 'string') {
    let url: URL;
    try {
      url = new URL(connection);
    } catch {
      // Said without what may be credentials: messages end up in logs.
      const shown = connection.replace(/\/\/[^/]*@/, '//***@');
      throw new TypeError(`${caller}: options.connection must be a redis:// or rediss:// URL or an object of host and port, got ${repr(shown)}`);
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw new TypeError(`${caller}: options.connection must be a redis:// or rediss:// URL, got the ${url.protocol} URL ${repr(url.host)}`);
    }
    const port = url.port === '' ? 6379 : Number(url.port);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
    const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
    if (!Number.isInteger(db) || db < 0) throw new TypeError(`${caller}: the database of options.connection must be a number, got ${repr(url.pathname.slice(1))}`);
    const options: Record<string, unknown> = { ...common, host, port, db };
    if (url.username !== '') options.username = decodeURIComponent(url.username);
    if (url.password !== '') options.password = decodeURIComponent(url.password);
    if (url.protocol === 'rediss:') options.tls = {};
    return { options, where: `${host}:${port}` };
  }
  if (typeof connection !== 'object' || connection === null) {
    throw new TypeError(`${caller}: options.connection must be a redis:// URL or an object of host and port, got ${repr(connection)}`);
  }
  const { host = '127.0.0.1', port = 6379, username, password, db = 0, tls } = connection as Exclude<RedisConnection, string>;
  if (typeof host !== 'string' || host === '') throw new TypeError(`${caller}: options.connection.host must be a non-empty string, got ${repr(host)}`);
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new RangeError(`${caller}: options.connection.port must be an integer from 1 to 65535, got ${repr(port)}`);
  }
  if (typeof db !== 'number' || !Number.isInteger(db) || db < 0) throw new RangeError(`${caller}: options.connection.db must be a non-negative integer, got ${repr(db)}`);
  const options: Record<string, unknown> = { ...common, host, port, db };
  if (username !== undefined) options.username = username;
  if (password !== undefined) options.password = password;
  if (tls !== undefined) options.tls = tls;
  return { options, where: `${host}:${port}` };
}

/**
 * The keys of one queue, under BullMQ's own prefix (`<prefix>:<queue>:`), so that obliterating
 * the queue removes them too.
 *
 * @example
 * ```ts
 * const keys = new QueueKeys('bull', 'multiloop');
 * keys.results('3f9c'); // 'bull:multiloop:ml-out:3f9c'
 * ```
 */
export class QueueKeys {
  readonly base: string;

  constructor(prefix: string, queue: string) {
    this.base = `${prefix}:${queue}:`;
  }

  /** The stream an executor reads its outcomes from. */
  results(executorId: string): string {
    return `${this.base}ml-out:${executorId}`;
  }

  /** The bitmap of a job's calls whose outcomes were delivered. */
  done(jobId: string): string {
    return `${this.base}${jobId}:ml-done`;
  }

  /** The bitmap of a job's calls that their caller cancelled. */
  cancelled(jobId: string): string {
    return `${this.base}${jobId}:ml-cancel`;
  }

  /** How many takes of a large job began decoding it and never finished (the worker died). */
  decodes(jobId: string): string {
    return `${this.base}${jobId}:ml-decodes`;
  }

  /** BullMQ's hash of a job. */
  job(jobId: string): string {
    return `${this.base}${jobId}`;
  }

  /** The channel cancel requests are published on: `<jobId> <index>`. */
  get cancelChannel(): string {
    return `${this.base}ml-cancel`;
  }
}

/**
 * Append one entry to the outcome stream and record the calls it settles. KEYS: the stream, the
 * job's done bitmap, its cancel bitmap. ARGV: the entry, the keys' time to live, whether the job
 * is over ('1': its bitmaps go), then the indexes of the calls settled.
 */
const REPORT_LUA = `
redis.call('XADD', KEYS[1], '*', 'd', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[2], KEYS[3])
elseif #ARGV > 3 then
  for i = 4, #ARGV do redis.call('SETBIT', KEYS[2], ARGV[i], 1) end
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
return 1
`;

const REPORT_SHA = createHash('sha1').update(REPORT_LUA).digest('hex');

/**
 * The commands of an ioredis client this code uses (the client of BullMQ's Redis backend, `getBackend().client`, and its duplicates):
 * raw commands, so nothing depends on ioredis's typings or BullMQ's wrapper of them.
 */
export interface RedisLike {
  /** 'wait', 'connecting', 'connect', 'ready', 'close', 'reconnecting', 'end'. */
  readonly status: string;
  call(command: string, ...args: Array<string | number | Buffer>): Promise<unknown>;
  callBuffer(command: string, ...args: Array<string | number | Buffer>): Promise<unknown>;
  subscribe(...channels: string[]): Promise<unknown>;
  duplicate(): RedisLike;
  disconnect(): void;
  quit(): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'close' | 'ready' | 'end' | 'reconnecting', listener: () => void): unknown;
  removeAllListeners(event?: string): unknown;
}

/**
 * Run the report script (EVALSHA, loading it with EVAL when Redis does not know it, as after a
 * restart).
 *
 * @example
 * ```ts
 * await report(client, keys.results(executorId), keys.done(jobId), keys.cancelled(jobId), entry, false, [0, 1]);
 * ```
 */
export async function report(
  client: RedisLike,
  stream: string,
  done: string,
  cancelled: string,
  entry: Uint8Array,
  final: boolean,
  indexes: readonly number[],
): Promise<void> {
  const args: Array<string | number | Buffer> = [3, stream, done, cancelled, Buffer.from(entry.buffer, entry.byteOffset, entry.byteLength), KEY_TTL_SECONDS, final ? '1' : '0'];
  if (!final) for (const index of indexes) args.push(index);
  try {
    await client.call('EVALSHA', REPORT_SHA, ...args);
  } catch (error) {
    if (!String((error as Error | null)?.message).startsWith('NOSCRIPT')) throw error;
    await client.call('EVAL', REPORT_LUA, ...args);
  }
}

/** What one BullMQ job's `data.c` decodes to. */
export interface JobRequest {
  /** The job's distinct functions, flattened: module, export name, module, ... */
  readonly fns: string[];
  /** Per call, the position of its function in `fns` (counted in pairs). */
  readonly at: number[];
  /** Per call, its arguments as `wireArgs` prepared them (decode each with `fromWire` once the call's module is imported). */
  readonly args: unknown[][];
  /** Per call, the caller's values of registered context variables (internal/travel.ts) or null; absent when no call carries any. */
  readonly contexts?: ReadonlyArray<CarriedContext | null>;
}

/**
 * A call's arguments prepared to cross (`toWire`: errors and registered classes become records);
 * a TypeError naming what cannot cross (`what` names the call). Whether `node:v8` can serialize
 * them shows when the job's request is serialized (see `serializeCalls`).
 *
 * @example
 * ```ts
 * const wired = wireArgs([40, 2], 'add of ./jobs/math.js');
 * ```
 */
export function wireArgs(args: readonly unknown[], what: string): unknown[] {
  const wired = new Array<unknown>(args.length);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (typeof arg !== 'object' || arg === null) {
      if (typeof arg === 'function' || typeof arg === 'symbol') throw new TypeError(`cannot send ${what} to a BullMQ worker: ${uncloneable(arg, `argument ${i + 1}`)}`);
      wired[i] = arg;
      continue;
    }
    try {
      wired[i] = toWire(arg, `argument ${i + 1}`);
    } catch (error) {
      throw new TypeError(`cannot send ${what} to a BullMQ worker: ${(error as Error).message}`, { cause: error });
    }
  }
  return wired;
}

/** Say what in `value` (at `path`) cannot be serialized. */
function uncloneable(value: unknown, path: string, error?: unknown): string {
  const found = findUncloneable(value, path);
  if (found !== null) return describeUncloneable(found);
  return `${path} cannot be serialized (${String((error as Error | undefined)?.message ?? typeof value)})`;
}

/**
 * Why the arguments of one call (`wireArgs` output) cannot be serialized, or null when they can:
 * what the caller fails a call with when its job's request would not serialize.
 *
 * @example
 * ```ts
 * const reason = whyUnserializable(wired, originalArgs); // 'argument 1 is a function, which cannot be cloned'
 * ```
 */
export function whyUnserializable(wired: readonly unknown[], original: readonly unknown[]): string | null {
  try {
    serialize(wired);
    return null;
  } catch (error) {
    for (let i = 0; i < wired.length; i++) {
      try {
        serialize(wired[i]);
      } catch (inner) {
        return uncloneable(original[i], `argument ${i + 1}`, inner);
      }
    }
    return String((error as Error).message);
  }
}

/** The most values `jsonExact` looks at before it leaves a value to `node:v8`. */
const JSON_EXACT_BUDGET = 256;

/**
 * How much of `budget` is left after checking that JSON carries `value` exactly, or -1 when it
 * does not (or the value is too big to check cheaply): strings, booleans, null, finite numbers
 * other than -0, and plain arrays of them with nothing but their elements.
 */
function jsonBudget(value: unknown, budget: number): number {
  if (--budget < 0) return -1;
  switch (typeof value) {
    case 'string':
      // Long strings go to v8: a request's JSON stays far below the size that splits a job.
      return budget - (value.length >> 6);
    case 'boolean':
      return budget;
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0) ? budget : -1;
    case 'object': {
      if (value === null) return budget;
      if (!Array.isArray(value) || Object.getPrototypeOf(value) !== Array.prototype) return -1;
      const length = value.length;
      if (length > budget || Object.keys(value).length !== length) return -1;
      for (let i = 0; i < length && budget >= 0; i++) budget = jsonBudget(value[i], budget);
      return budget;
    }
    default:
      return -1;
  }
}

/**
 * Whether `JSON.parse(JSON.stringify(value))` gives back exactly what `node:v8` would (only
 * strings, booleans, null, finite numbers but -0, and plain arrays of them), for a value small
 * enough to check at once (a few hundred values, strings of some kilobytes in all).
 *
 * @example
 * ```ts
 * jsonExact([1, 'a', [true, null]]); // true
 * jsonExact([-0]); // false
 * ```
 */
export function jsonExact(value: unknown): boolean {
  return jsonBudget(value, JSON_EXACT_BUDGET) >= 0;
}

/** A BullMQ job's `data`: a v8-serialized request in base64, or the request in JSON. */
export type JobData = { readonly c: string } | { readonly j: readonly [string[], number[], unknown[][]] };

/** The `data` of a BullMQ job carrying `request`; throws what `node:v8` throws for a value it cannot serialize. */
export function encodeRequest(request: JobRequest): JobData {
  if (request.contexts === undefined && jsonExact(request.args)) return { j: [request.fns, request.at, request.args] };
  return { c: serialize(request).toString('base64') };
}

/**
 * The bytes of a job's encoded request, as far as they can be told without decoding it: the
 * length of a v8-serialized request's base64, 0 for a request in JSON (BullMQ parsed it already).
 */
export function requestBytes(data: unknown): number {
  const encoded = (data as { c?: unknown } | null)?.c;
  return typeof encoded === 'string' ? encoded.length : 0;
}

/**
 * The request carried by a BullMQ job's `data`; a TypeError saying what is wrong when it is not
 * one (a job some other producer put on the queue).
 */
export function decodeRequest(data: unknown): JobRequest {
  const json = (data as { j?: unknown } | null)?.j;
  let request: Partial<JobRequest> | null;
  if (Array.isArray(json) && json.length === 3) {
    request = { fns: json[0] as string[], at: json[1] as number[], args: json[2] as unknown[][] };
  } else {
    const encoded = (data as { c?: unknown } | null)?.c;
    if (typeof encoded !== 'string') throw new TypeError('the job was not sent by a BullMQExecutor: its data has no request');
    request = deserialize(Buffer.from(encoded, 'base64')) as Partial<JobRequest> | null;
  }
  const { fns, at, args } = request ?? {};
  if (!Array.isArray(fns) || !Array.isArray(at) || !Array.isArray(args) || at.length !== args.length) {
    throw new TypeError('the job was not sent by a BullMQExecutor: its request is malformed');
  }
  return request as JobRequest;
}

/**
 * A call's result prepared to cross (`toWire`); a TypeError naming what cannot cross otherwise
 * (`what` names the call). Whether `node:v8` can serialize it shows when its outcome entry is
 * serialized (see `encodeOutcomes`).
 */
export function wireValue(value: unknown, what: string): unknown {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'function' || typeof value === 'symbol') {
      throw new TypeError(`cannot send the result of ${what} back from the BullMQ worker: ${uncloneable(value, 'the result')}`);
    }
    return value;
  }
  try {
    return toWire(value, 'the result');
  } catch (error) {
    throw new TypeError(`cannot send the result of ${what} back from the BullMQ worker: ${(error as Error).message}`, { cause: error });
  }
}

/** A thrown error as plain data (class, message, stack, cause, own properties); never throws. */
export function wireFailure(error: unknown): EncodedError {
  return encodeError(error);
}

/** The error `wireFailure` made, rebuilt here. */
export function unwireFailure(encoded: unknown): unknown {
  return decodeError(encoded as EncodedError);
}

/** The value `wireValue` made, rebuilt here. */
export function unwireValue(wired: unknown): unknown {
  return fromWire(wired);
}

/** One outcome: `[index, kind, value or encoded error, milliseconds the call ran]`. */
export type Outcome = [index: number, kind: number, payload: unknown, ms: number];

/**
 * Serialize the outcomes of one job's calls: `[jobId, index, kind, payload, ms, ...]`. A result
 * `node:v8` cannot serialize is replaced by the TypeError saying so (`describe(index)` names the
 * call), and the others go.
 */
export function encodeOutcomes(jobId: string, outcomes: readonly Outcome[], describe: (index: number) => string): Buffer {
  const flat: unknown[] = [jobId];
  for (const outcome of outcomes) flat.push(outcome[0], outcome[1], outcome[2], outcome[3]);
  if (jsonExact(flat)) return Buffer.from(JSON.stringify(flat));
  try {
    return serialize(flat);
  } catch {
    for (let i = 0; i < outcomes.length; i++) {
      const [index, kind, payload] = outcomes[i] as Outcome;
      try {
        serialize(payload);
      } catch (error) {
        const reason = kind === OUTCOME_VALUE ? uncloneable(unwireValue(payload), 'the result', error) : String((error as Error).message);
        const failure = new TypeError(`cannot send the result of ${describe(index)} back from the BullMQ worker: ${reason}`);
        flat[1 + i * 4 + 1] = OUTCOME_ERROR;
        flat[1 + i * 4 + 2] = wireFailure(failure);
      }
    }
    return serialize(flat);
  }
}

/** The first byte of an outcome entry in JSON (`[`); v8's begin with 0xFF. */
const JSON_ARRAY_START = 0x5b;

/** The flat outcomes `encodeOutcomes` serialized: `[jobId, index, kind, payload, ms, ...]`. */
export function decodeOutcomes(entry: Uint8Array): unknown[] {
  const outcomes: unknown =
    entry[0] === JSON_ARRAY_START ? JSON.parse(Buffer.from(entry.buffer, entry.byteOffset, entry.byteLength).toString('utf8')) : deserialize(entry);
  if (!Array.isArray(outcomes) || typeof outcomes[0] !== 'string') throw new TypeError('an outcome entry is malformed');
  return outcomes;
}
