/**
 * The seam between the BullMQ engines (caller.ts, runner.ts) and the store behind BullMQ: what
 * travels beside BullMQ's own jobs — outcome entries and start notices to an executor, the
 * "done" and "cancel" marks of a job's calls, cancel requests to the workers, the count of a
 * large job's decodes — and the BullMQ classes opened on that store. One implementation per
 * backend: redis.ts (streams, bitmaps, pub/sub, one Lua script) and postgres.ts (tables and
 * LISTEN/NOTIFY). Nothing here imports BullMQ; the engines know only these interfaces.
 */
import type { Queue } from 'bullmq';
import type { JobData } from './wire.js';

/** A job as BullMQ's `addBulk` takes it. */
export interface AddedJob {
  readonly name: string;
  readonly data: JobData;
  readonly opts: { jobId: string };
}

/** What the caller's engine needs of a BullMQ queue. */
export interface QueuePort {
  /** Add the jobs in one round trip (BullMQ's `addBulk`). */
  addBulk(jobs: AddedJob[]): Promise<void>;
  /** Remove a job no worker holds; whether it was removed. */
  remove(jobId: string): Promise<boolean>;
  /** The executor's channel, once connected. */
  readonly channel: Promise<CallerChannel>;
  /** Have `listener` told the queue's errors (those of its connection included). */
  onError(listener: (error: Error) => void): void;
  /** Close the queue's connection: `force` drops it without waiting for the server. */
  close(force: boolean): Promise<void>;
}

/** What the caller's engine is told of its connections. */
export interface ChannelEvents {
  /** A connection was lost. */
  down(): void;
  /** Every connection is usable (again). */
  up(): void;
  /** Something failed: `message` is the last error an unreachable-server error names. */
  error(message: string): void;
}

/** Where the entries an executor reads go, in the order they were read. */
export interface OutcomeSink {
  /** A worker's start notice: job `jobId` started. */
  started(jobId: string): void;
  /** An outcome entry (see wire.ts), untrusted; `id` names it in messages. */
  outcome(id: string, entry: Buffer): void;
  /** An entry of `bytes` bytes, more than MAX_OUTCOME_BYTES, not read: `head` holds its first bytes (untrusted). */
  oversized(id: string, bytes: number, head: Buffer): void;
}

/** The executor's side: its outcomes and notices in, its cancel requests out. */
export interface CallerChannel {
  /** Where the executor's outcomes arrive, for messages (a Redis stream key, a table). */
  readonly outcomes: string;
  /** Tell `events` of the connections from now on; `up()` at once when they are usable. */
  watch(events: ChannelEvents): void;
  /** Whether every connection is usable now. */
  readonly usable: boolean;
  /** Read what arrived, waiting some seconds at most for something; how many entries it held (0: none came). */
  read(sink: OutcomeSink): Promise<number>;
  /** Read everything that arrived, without waiting (after an outage). */
  readBacklog(sink: OutcomeSink): Promise<void>;
  /** Per job id, whether the store still holds that BullMQ job. */
  jobsExist(jobIds: readonly string[]): Promise<boolean[]>;
  /** Ask the workers to skip call `index` of job `jobId`; `mark` also records it for a run of the job not begun yet (a job of several calls). */
  cancel(jobId: string, index: number, mark: boolean): Promise<void>;
  /** Ask the worker running call `index` of job `jobId` to abort its `jobSignal()`. */
  stop(jobId: string, index: number): Promise<void>;
  /** The job was removed: forget its cancel marks. */
  forgetCancelled(jobId: string): Promise<void>;
  /** Stop reading and drop the executor's outcomes from the store when it is reachable; whether it was. */
  close(): Promise<boolean>;
}

/** Which calls of a job are marked (done, or cancelled). */
export interface CallMarks {
  has(index: number): boolean;
}

/** The worker's side: outcomes and notices out, marks and cancel requests in. */
export interface RunnerChannel {
  /**
   * Deliver one outcome entry to executor `executorId` and mark the calls it settles done (the
   * calls of `indexes`); with `final` (a job error), forget the job's marks instead.
   */
  report(executorId: string, jobId: string, entry: Uint8Array, final: boolean, indexes: readonly number[]): Promise<void>;
  /** Tell executor `executorId` that job `jobId` started here; best effort (a notice lost is a cancel() that returns true for a call that runs). */
  notice(executorId: string, jobId: string): void;
  /** The calls of job `jobId` done, and those cancelled. */
  marks(jobId: string): Promise<[done: CallMarks, cancelled: CallMarks]>;
  /** Count one more take of job `jobId` that began decoding it; the count. */
  countDecode(jobId: string): Promise<number>;
  /** The decoding ended: forget the count; best effort. */
  clearDecodes(jobId: string): void;
  /** How many takes of job `jobId` began decoding it and never ended (their workers died). */
  decodes(jobId: string): Promise<number>;
  /** BullMQ has the job completed: forget its marks; best effort. */
  forget(jobId: string): void;
  /** Hear the cancel requests of the queue: `<jobId> <index>`, or `<jobId> <index> stop`. */
  subscribe(listener: (message: string) => void): Promise<void>;
  /** Stop hearing cancel requests and drop the connections of this channel's own. */
  close(): void;
}

/**
 * The calls of a QueuePort that go to BullMQ's Queue itself, the same on every backend: a lone
 * job through `add` (no MULTI around one job), several through `addBulk`.
 *
 * @example
 * ```ts
 * return { ...queueCalls(queue), get channel() { ... }, onError, close };
 * ```
 */
export function queueCalls(queue: Queue): Pick<QueuePort, 'addBulk' | 'remove'> {
  return {
    async addBulk(jobs: AddedJob[]): Promise<void> {
      if (jobs.length === 1) {
        const [job] = jobs as [AddedJob];
        await queue.add(job.name, job.data, job.opts);
      } else {
        await queue.addBulk(jobs.map((job) => ({ name: job.name, data: job.data, opts: job.opts })));
      }
    },
    async remove(jobId: string): Promise<boolean> {
      return (await queue.remove(jobId)) === 1;
    },
  };
}
