/**
 * The stores BullMQ runs on, as the engines' seam (channels.ts) sees them: a `Backend` opens
 * BullMQ's Queue and Worker on its store and the channels beside them. `resolveBackend` reads an
 * executor's or a worker's `connection` option and picks the backend it names.
 */
import type { JobsOptions, Processor, Worker } from 'bullmq';
import { repr } from '../format.js';
import type { QueuePort, RunnerChannel } from './channels.js';
import { postgresBackend } from './postgres.js';
import { credentialsCutShort, redactConnection } from './redact.js';
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
  /** The server's name in messages: 'Redis', 'PostgreSQL'. */
  readonly server: string;
  /** The server's name in a repr: 'redis', 'postgres'. */
  readonly scheme: string;
  /** `host:port`, without credentials. */
  readonly where: string;
  /** Import the store's driver (ioredis, pg: optional packages) once; a RuntimeError naming `user` and the package when it is missing. */
  loadDriver(user: string): Promise<void>;
  /** Open queue `name` for an executor whose id is `executorId`. */
  openQueue(bullmq: BullMQModule, name: string, prefix: string, defaultJobOptions: JobsOptions, executorId: string): Promise<QueuePort>;
  /**
   * Make a Worker of queue `name` running `processor` (not running yet: `autorun` is off) that
   * leaves the data of a job larger than `maxJobBytes` or a megabyte unparsed (see unparsed.ts).
   */
  openWorker(bullmq: BullMQModule, name: string, prefix: string, processor: Processor, settings: WorkerSettings, maxJobBytes: number): Worker;
  /** The channel of a worker of queue `name`, once its connection is ready. */
  runnerChannel(worker: Worker, name: string, prefix: string): Promise<RunnerChannel>;
}

/** What a connection option may be, for messages. */
const CONNECTIONS = 'a redis://, rediss:// or postgres:// URL, an object of Redis host and port, or { postgres: pg.PoolConfig }';

/**
 * Check `connection` (option `connection` of `caller`) and make the backend it names: Redis for
 * a `redis://` or `rediss://` URL or an object of host and port, PostgreSQL for a `postgres://`
 * or `postgresql://` URL or `{ postgres: config }`. With `migrate`, a PostgreSQL backend brings
 * a fresh database to BullMQ's schema and makes multiloop's tables (Redis needs none).
 *
 * @example
 * ```ts
 * const backend = resolveBackend('redis://127.0.0.1:6390', 'BullMQExecutor', true);
 * backend.where; // '127.0.0.1:6390'
 * ```
 */
export function resolveBackend(connection: unknown, caller: string, migrate: boolean): Backend {
  if (typeof connection === 'string') {
    let url: URL;
    try {
      url = new URL(connection);
    } catch {
      // Said without what may be credentials: messages end up in logs.
      throw new TypeError(`${caller}: options.connection must be ${CONNECTIONS}, got ${repr(redactConnection(connection))}`);
    }
    if (credentialsCutShort(url)) {
      throw new TypeError(
        `${caller}: options.connection has an '@' after its host: a '/', '?' or '#' in its user name or password must be percent-encoded (encodeURIComponent), got ${repr(redactConnection(connection))}`,
      );
    }
    if (url.protocol === 'redis:' || url.protocol === 'rediss:') return redisBackend(url, caller);
    if (url.protocol === 'postgres:' || url.protocol === 'postgresql:') return postgresBackend(connection, url, null, caller, migrate);
    throw new TypeError(`${caller}: options.connection must be a redis://, rediss:// or postgres:// URL, got the ${url.protocol} URL ${repr(url.host)}`);
  }
  if (typeof connection !== 'object' || connection === null) {
    throw new TypeError(`${caller}: options.connection must be ${CONNECTIONS}, got ${repr(connection)}`);
  }
  if (Object.hasOwn(connection, 'postgres')) return postgresBackend(null, null, (connection as { postgres: unknown }).postgres, caller, migrate);
  return redisBackend(connection, caller);
}
