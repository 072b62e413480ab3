/**
 * What travels between a `BullMQExecutor` and its `serveBullMQ` workers besides BullMQ's own
 * jobs, whatever the store (channels.ts): the outcome records and the encoding of values. Shared
 * by the caller's engine (caller.ts) and the worker's runner (runner.ts); nothing here imports
 * BullMQ.
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
 * An outcome entry is a v8-serialized flat array `[jobId, index, kind, payload, ms, index, kind,
 * payload, ms, ...]` — the outcomes of one job's calls that ended in the same turn of the
 * worker's event loop — or, when JSON carries that array exactly, its JSON text (v8's output
 * starts with byte 0xFF, JSON's with `[`). Delivering an entry marks the calls it settles done
 * (a lone call's too), and the marks stay until BullMQ has the job completed, so a job run again
 * (its worker died, it lost its lock, or BullMQ retries it) skips the calls whose outcomes were
 * delivered. A worker also sends a start notice when it starts a job that will wait, after
 * which the caller's `cancel()` of the job's calls returns false. The caller cancels a call not
 * started by marking it cancelled and asking every worker process to skip it; a call started, by
 * asking its worker to stop it (it runs on with its `jobSignal()` aborted, and its outcome is
 * delivered).
 */
import { deserialize, serialize } from 'node:v8';
import { decodeError, encodeError, type EncodedError } from '../errors.js';
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
