/**
 * The Redis backend of the BullMQ engines (see channels.ts): BullMQ's default Redis backend for
 * the jobs, and beside it, under BullMQ's key prefix so that obliterating the queue removes them
 * too, a stream per executor for its outcomes and notices (read with a blocking XREAD), a "done"
 * and a "cancel" bitmap per job, a counter of a large job's decodes, and a pub/sub channel per
 * queue for cancel requests.
 *
 * Outcomes travel on the stream `<prefix>:<queue>:ml-out:<executor>`: each entry's field `d` is
 * an outcome entry (wire.ts), `s` a start notice (the job's id). The same script that appends an
 * entry sets the calls' bits in the job's done bitmap (a lone call's too), kept until BullMQ has
 * the job completed. The caller cancels a call not started by setting its bit in the job's cancel
 * bitmap and publishing `<jobId> <index>` on the queue's cancel channel, which every worker
 * process subscribes to; a call started, by publishing `<jobId> <index> stop`.
 */
import { createHash } from 'node:crypto';
import type { JobsOptions, Processor, Queue, Worker } from 'bullmq';
import { repr } from '../format.js';
import { importOptional } from '../optional.js';
import type { Backend, BullMQModule, WorkerSettings } from './backends.js';
import type { RedisConnection } from './connections.js';
import { queueCalls, type CallMarks, type CallerChannel, type ChannelEvents, type OutcomeSink, type QueuePort, type RunnerChannel } from './channels.js';
import { guardedWorker } from './unparsed.js';
import { KEY_TTL_SECONDS } from './wire.js';

/** Outcome entries read per XREAD. */
const READ_COUNT = 256;
/** How long one XREAD blocks (milliseconds); the read is issued again at once. */
const READ_BLOCK_MS = 10_000;
/** Entries read are trimmed from the outcome stream once this many accumulated. */
const TRIM_EVERY = 128;

export type { RedisConnection } from './connections.js';

/** Reconnect soon after Redis comes back: 100 ms, 200 ms, ... at most 2 s apart. */
function retryStrategy(times: number): number {
  return Math.min(100 * times, 2000);
}

/**
 * Check a Redis `connection` (a `redis://` URL already parsed as `url`, or an object of host and
 * port) of `caller` and make the Redis backend of it: commands wait while Redis is away (the
 * executor's `unreachableTimeout` decides how long), and reconnecting is retried at most 2 s apart.
 *
 * @example
 * ```ts
 * const backend = redisBackend(new URL('redis://127.0.0.1:6390'), 'BullMQExecutor');
 * ```
 */
export function redisBackend(connection: URL | object, caller: string): Backend {
  const common = { maxRetriesPerRequest: null, retryStrategy, enableReadyCheck: true };
  if (connection instanceof URL) {
    const url = connection;
    const port = url.port === '' ? 6379 : Number(url.port);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
    const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
    if (!Number.isInteger(db) || db < 0) throw new TypeError(`${caller}: the database of options.connection must be a number, got ${repr(url.pathname.slice(1))}`);
    const options: Record<string, unknown> = { ...common, host, port, db };
    if (url.username !== '') options.username = decodeURIComponent(url.username);
    if (url.password !== '') options.password = decodeURIComponent(url.password);
    if (url.protocol === 'rediss:') options.tls = {};
    return new RedisBackend(options, `${host}:${port}`);
  }
  const { host = '127.0.0.1', port = 6379, username, password, db = 0, tls } = connection as Exclude<RedisConnection, string>;
  if (typeof host !== 'string' || host === '') throw new TypeError(`${caller}: options.connection.host must be a non-empty string, got ${repr(host)}`);
  // Not shown: what comes before the '@' is likely a password, and the host is in messages and logs.
  if (host.includes('@')) throw new TypeError(`${caller}: options.connection.host must be a host name or address, without credentials (give them as username and password), got one with '@'`);
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new RangeError(`${caller}: options.connection.port must be an integer from 1 to 65535, got ${repr(port)}`);
  }
  if (typeof db !== 'number' || !Number.isInteger(db) || db < 0) throw new RangeError(`${caller}: options.connection.db must be a non-negative integer, got ${repr(db)}`);
  const options: Record<string, unknown> = { ...common, host, port, db };
  if (username !== undefined) options.username = username;
  if (password !== undefined) options.password = password;
  if (tls !== undefined) options.tls = tls;
  return new RedisBackend(options, `${host}:${port}`);
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

/** Whether stream id `a` comes after `b` (`<ms>-<seq>`). */
function after(a: string, b: string): boolean {
  const [aMs = '0', aSeq = '0'] = a.split('-');
  const [bMs = '0', bSeq = '0'] = b.split('-');
  if (aMs.length !== bMs.length) return aMs.length > bMs.length;
  if (aMs !== bMs) return aMs > bMs;
  return Number(aSeq) > Number(bSeq);
}

/** The executor's channel: its stream read on a connection of its own, cancel requests on the queue's. */
class RedisCallerChannel implements CallerChannel {
  readonly outcomes: string;
  readonly #client: RedisLike;
  readonly #reader: RedisLike;
  readonly #keys: QueueKeys;
  #lastId = '0';
  /** Entries read since the stream was last trimmed. */
  #unTrimmed = 0;

  constructor(client: RedisLike, keys: QueueKeys, executorId: string) {
    this.#client = client;
    this.#reader = client.duplicate();
    this.#keys = keys;
    this.outcomes = keys.results(executorId);
  }

  get usable(): boolean {
    return this.#client.status === 'ready' && this.#reader.status === 'ready';
  }

  watch(events: ChannelEvents): void {
    for (const connection of [this.#client, this.#reader]) {
      connection.on('close', () => events.down());
      connection.on('error', (error: Error) => events.error(error.message));
      connection.on('ready', () => events.up());
    }
    events.up();
  }

  async read(sink: OutcomeSink): Promise<number> {
    if (this.#unTrimmed >= TRIM_EVERY) {
      // On the reader's connection, just before its XREAD: no round trip of its own, and none
      // in front of the next addBulk on the queue's connection.
      this.#unTrimmed = 0;
      this.#reader.call('XTRIM', this.outcomes, 'MINID', this.#lastId).catch(() => undefined);
    }
    const reply = await this.#reader.callBuffer('XREAD', 'COUNT', READ_COUNT, 'BLOCK', READ_BLOCK_MS, 'STREAMS', this.outcomes, this.#lastId);
    if (reply === null) return 0;
    const count = this.#apply(reply, sink);
    this.#unTrimmed += count;
    return count;
  }

  async readBacklog(sink: OutcomeSink): Promise<void> {
    const reply = await this.#client.callBuffer('XREAD', 'COUNT', 100_000, 'STREAMS', this.outcomes, this.#lastId);
    if (reply !== null) this.#apply(reply, sink);
  }

  /** Hand an XREAD reply (`[[stream, [[id, [field, value, ...]], ...]]]`) to `sink`; how many entries it held. */
  #apply(reply: unknown, sink: OutcomeSink): number {
    let count = 0;
    for (const [, entries] of reply as Array<[Buffer, Array<[Buffer, Buffer[]]>]>) {
      count += entries.length;
      for (const [rawId, fields] of entries) {
        const id = rawId.toString();
        if (after(id, this.#lastId)) this.#lastId = id;
        for (let f = 0; f + 1 < fields.length; f += 2) {
          const field = (fields[f] as Buffer).toString();
          if (field === 's') sink.started((fields[f + 1] as Buffer).toString());
          else if (field === 'd') sink.outcome(id, fields[f + 1] as Buffer);
        }
      }
    }
    return count;
  }

  async jobsExist(jobIds: readonly string[]): Promise<boolean[]> {
    const exists = await Promise.all(jobIds.map((id) => this.#client.call('EXISTS', this.#keys.job(id))));
    return exists.map((count) => count !== 0);
  }

  async cancel(jobId: string, index: number, mark: boolean): Promise<void> {
    const client = this.#client;
    const requests: Array<Promise<unknown>> = [];
    if (mark) requests.push(client.call('SETBIT', this.#keys.cancelled(jobId), index, 1), client.call('EXPIRE', this.#keys.cancelled(jobId), KEY_TTL_SECONDS));
    requests.push(client.call('PUBLISH', this.#keys.cancelChannel, `${jobId} ${index}`));
    await Promise.all(requests);
  }

  async stop(jobId: string, index: number): Promise<void> {
    await this.#client.call('PUBLISH', this.#keys.cancelChannel, `${jobId} ${index} stop`);
  }

  async forgetCancelled(jobId: string): Promise<void> {
    await this.#client.call('DEL', this.#keys.cancelled(jobId));
  }

  async close(): Promise<boolean> {
    this.#reader.disconnect();
    const connected = this.#client.status === 'ready';
    if (connected) await this.#client.call('DEL', this.outcomes).catch(() => undefined);
    return connected;
  }
}

/** A bitmap read with GET: bit `index` set. */
class Bitmap implements CallMarks {
  readonly #bits: Buffer | null;

  constructor(bits: Buffer | null) {
    this.#bits = bits;
  }

  has(index: number): boolean {
    const bits = this.#bits;
    if (bits === null) return false;
    const byte = index >> 3;
    return byte < bits.length && ((bits[byte] as number) & (0x80 >> (index & 7))) !== 0;
  }
}

/** The worker's channel: reports on the worker's connection, cancel requests on a subscriber of its own. */
class RedisRunnerChannel implements RunnerChannel {
  readonly #client: RedisLike;
  readonly #keys: QueueKeys;
  #subscriber: RedisLike | null = null;

  constructor(client: RedisLike, keys: QueueKeys) {
    this.#client = client;
    this.#keys = keys;
  }

  /** Run the report script (EVALSHA, loading it with EVAL when Redis does not know it, as after a restart). */
  async report(executorId: string, jobId: string, entry: Uint8Array, final: boolean, indexes: readonly number[]): Promise<void> {
    const keys = this.#keys;
    const args: Array<string | number | Buffer> = [
      3,
      keys.results(executorId),
      keys.done(jobId),
      keys.cancelled(jobId),
      Buffer.from(entry.buffer, entry.byteOffset, entry.byteLength),
      KEY_TTL_SECONDS,
      final ? '1' : '0',
    ];
    if (!final) for (const index of indexes) args.push(index);
    try {
      await this.#client.call('EVALSHA', REPORT_SHA, ...args);
    } catch (error) {
      if (!String((error as Error | null)?.message).startsWith('NOSCRIPT')) throw error;
      await this.#client.call('EVAL', REPORT_LUA, ...args);
    }
  }

  notice(executorId: string, jobId: string): void {
    const stream = this.#keys.results(executorId);
    this.#client.call('XADD', stream, '*', 's', jobId).catch(() => undefined);
    this.#client.call('EXPIRE', stream, KEY_TTL_SECONDS).catch(() => undefined);
  }

  async marks(jobId: string): Promise<[CallMarks, CallMarks]> {
    const [done, cancelled] = (await Promise.all([
      this.#client.callBuffer('GET', this.#keys.done(jobId)),
      this.#client.callBuffer('GET', this.#keys.cancelled(jobId)),
    ])) as [Buffer | null, Buffer | null];
    return [new Bitmap(done), new Bitmap(cancelled)];
  }

  async countDecode(jobId: string): Promise<number> {
    const decodes = this.#keys.decodes(jobId);
    const [begun] = (await Promise.all([this.#client.call('INCR', decodes), this.#client.call('EXPIRE', decodes, KEY_TTL_SECONDS)])) as [number, unknown];
    return begun;
  }

  clearDecodes(jobId: string): void {
    this.#client.call('DEL', this.#keys.decodes(jobId)).catch(() => undefined);
  }

  async decodes(jobId: string): Promise<number> {
    return Number(await this.#client.call('GET', this.#keys.decodes(jobId)));
  }

  forget(jobId: string): void {
    this.#client.call('DEL', this.#keys.done(jobId), this.#keys.cancelled(jobId)).catch(() => undefined);
  }

  async subscribe(listener: (message: string) => void): Promise<void> {
    const subscriber = this.#client.duplicate();
    this.#subscriber = subscriber;
    subscriber.on('error', () => undefined);
    subscriber.on('message', (_channel: string, message: string) => listener(message));
    await subscriber.subscribe(this.#keys.cancelChannel);
  }

  close(): void {
    this.#subscriber?.disconnect();
  }
}

/** BullMQ's default backend, and the channels beside it. */
class RedisBackend implements Backend {
  readonly server = 'Redis';
  readonly scheme = 'redis';
  readonly where: string;
  readonly #options: Record<string, unknown>;

  constructor(options: Record<string, unknown>, where: string) {
    this.#options = options;
    this.where = where;
  }

  async loadDriver(user: string): Promise<void> {
    // BullMQ requires ioredis itself; loaded here first, a missing one is named with the command.
    await importOptional('ioredis', user, () => import('ioredis'));
  }

  async openQueue(bullmq: BullMQModule, name: string, prefix: string, defaultJobOptions: JobsOptions, executorId: string): Promise<QueuePort> {
    const queue: Queue = new bullmq.Queue(name, { connection: this.#options, prefix, defaultJobOptions });
    // Without a listener, an EventEmitter throws its 'error' events.
    let onError: (error: Error) => void = () => undefined;
    queue.on('error', (error: Error) => onError(error));
    // BullMQ 6 keeps the raw client on its Redis backend (Queue#client is gone).
    const client = queue.getBackend().client as unknown as Promise<RedisLike>;
    let connected: RedisLike | null = null;
    client.then(
      (ready) => (connected = ready),
      () => undefined,
    );
    const keys = new QueueKeys(prefix, name);
    let channel: Promise<CallerChannel> | null = null;
    return {
      ...queueCalls(queue),
      // Made on first use: an executor shut down before it connected never opens its reader.
      get channel(): Promise<CallerChannel> {
        channel ??= client.then((ready) => new RedisCallerChannel(ready, keys, executorId));
        return channel;
      },
      onError(listener: (error: Error) => void): void {
        onError = listener;
      },
      async close(force: boolean): Promise<void> {
        // BullMQ's close() drops a connection never made, but waits for Redis to quit one that
        // was: with Redis away, that is for good. Its backend closed with force drops it.
        if (force) {
          connected?.disconnect();
          await queue.getBackend().close(true);
        }
        await queue.close();
      },
    };
  }

  openWorker(bullmq: BullMQModule, name: string, prefix: string, processor: Processor, settings: WorkerSettings, maxJobBytes: number): Worker {
    const GuardedWorker = guardedWorker(bullmq, maxJobBytes);
    return new GuardedWorker(name, processor, { connection: this.#options, prefix, ...settings, autorun: false });
  }

  async runnerChannel(worker: Worker, name: string, prefix: string): Promise<RunnerChannel> {
    const client = (await worker.getBackend().client) as unknown as RedisLike;
    return new RedisRunnerChannel(client, new QueueKeys(prefix, name));
  }
}
