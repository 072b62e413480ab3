/**
 * The stores BullMQ runs on, as the engines' seam (channels.ts) sees them: a `Backend` opens
 * BullMQ's Queue and Worker on its store and the channels beside them. `resolveBackend` reads an
 * executor's or a worker's `connection` option and picks the backend it names.
 */
import type { JobsOptions, Processor, Worker } from 'bullmq';
import { repr } from '../format.js';
import type { QueuePort, RunnerChannel } from './channels.js';
import { redisBackend } from './redis.js';

/** BullMQ, as `import('bullmq')` gives it. */
export type BullMQModule = typeof import('bullmq');

/** The options of a BullMQ Worker that `serveBullMQ` sets. */
export interface WorkerSettings {
  readonly concurrency: number;
  readonly lockDuration: number;
  readonly stalledInterval: number;
  readonly maxStalledCount: number;
}

/** A store BullMQ runs on, and the channels beside it. */
export interface Backend {
  /** The server's name in messages: 'Redis'. */
  readonly server: string;
  /** The server's name in a repr: 'redis'. */
  readonly scheme: string;
  /** `host:port`, without credentials. */
  readonly where: string;
  /** Open queue `name` for an executor whose id is `executorId`. */
  openQueue(bullmq: BullMQModule, name: string, prefix: string, defaultJobOptions: JobsOptions, executorId: string): Promise<QueuePort>;
  /** Make a Worker of queue `name` running `processor` (not running yet: `autorun` is off). */
  openWorker(bullmq: BullMQModule, name: string, prefix: string, processor: Processor, settings: WorkerSettings): Worker;
  /** The channel of a worker of queue `name`, once its connection is ready. */
  runnerChannel(worker: Worker, name: string, prefix: string): Promise<RunnerChannel>;
}

/**
 * Check `connection` (option `connection` of `caller`) and make the backend it names.
 *
 * @example
 * ```ts
 * const backend = resolveBackend('redis://127.0.0.1:6390', 'BullMQExecutor');
 * backend.where; // '127.0.0.1:6390'
 * ```
 */
export function resolveBackend(connection: unknown, caller: string): Backend {
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
    return redisBackend(url, caller);
  }
  if (typeof connection !== 'object' || connection === null) {
    throw new TypeError(`${caller}: options.connection must be a redis:// URL or an object of host and port, got ${repr(connection)}`);
  }
  return redisBackend(connection, caller);
}
