/**
 * Large job data left unparsed when BullMQ fetches a job. BullMQ's Worker parses a job's data
 * (JSON text) the moment it fetches the job (`Job.fromJSON`), before it applies a failure its
 * stalled check deferred ("job stalled more than allowable limit") and before the runner sees
 * the job. Text that parses into more objects than the worker's heap holds (24 MB of `[],` are
 * eight million arrays) then kills every worker that fetches the job, for ever: the deferred
 * failure is never applied, and the runner never counts the deaths. A worker made by
 * `guardedWorker` leaves such text unparsed: BullMQ applies its deferred failure first, and the
 * runner checks the size and counts the attempt in the store before it parses (runner.ts).
 */
import type { Job, JobJson, Worker } from 'bullmq';
import type { BullMQModule } from './backends.js';
import { requestBytes } from './wire.js';

/**
 * Job data larger than this (characters) is parsed only after the store counted the attempt:
 * parsing and decoding it may take more memory than the worker has, and kill it each time.
 */
export const GUARDED_DECODE_BYTES = 1 << 20;

/** What `JSON.stringify({ c: base64 })` adds to the base64 of a v8-serialized request. */
const V8_WRAPPING = '{"c":""}'.length;

/** A job's data as BullMQ stored it, JSON text not parsed yet. */
export class UnparsedData {
  readonly #text: string;

  constructor(text: string) {
    this.#text = text;
  }

  /**
   * The bytes an executor measured against its maxJobBytes: the base64 of a v8-serialized
   * request (the text less its `{"c":""}`), otherwise the whole text.
   */
  get bytes(): number {
    const text = this.#text;
    return text.startsWith('{"c":"') && text.endsWith('"}') ? text.length - V8_WRAPPING : text.length;
  }

  /** The data, parsed now; a TypeError when the text is not JSON. */
  parse(): unknown {
    try {
      return JSON.parse(this.#text);
    } catch (error) {
      throw new TypeError('the job was not sent by a BullMQExecutor: its data is not JSON', { cause: error });
    }
  }
}

/**
 * The bytes of a job's `data` as `requestBytes` tells them (wire.ts), or of its text when it was
 * left unparsed.
 *
 * @example
 * ```ts
 * jobBytes(job.data); // 1398104 for a job of a megabyte of v8-serialized arguments
 * ```
 */
export function jobBytes(data: unknown): number {
  return data instanceof UnparsedData ? data.bytes : requestBytes(data);
}

/** A job's `data`, parsed now when it was left unparsed (a TypeError when it is not JSON). */
export function parsedData(data: unknown): unknown {
  return data instanceof UnparsedData ? data.parse() : data;
}

/**
 * BullMQ's Worker class, changed to leave the data of a job larger than `maxJobBytes` or
 * GUARDED_DECODE_BYTES unparsed (`UnparsedData`): BullMQ's checks before the processor (a
 * deferred failure) run before anything large is built, and the processor decides.
 *
 * @example
 * ```ts
 * const worker = new (guardedWorker(bullmq, maxJobBytes))(name, processor, { connection, autorun: false });
 * ```
 */
export function guardedWorker(bullmq: BullMQModule, maxJobBytes: number): typeof Worker {
  const parseAbove = Math.min(GUARDED_DECODE_BYTES, maxJobBytes);
  return class GuardedWorker extends bullmq.Worker {
    protected override createJob(json: JobJson, jobId: string): Job {
      const text: unknown = json.data;
      if (typeof text !== 'string' || text.length <= parseAbove) return super.createJob(json, jobId);
      const job = super.createJob({ ...json, data: '{}' }, jobId);
      job.data = new UnparsedData(text);
      return job;
    }
  };
}
