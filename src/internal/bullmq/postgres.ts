/**
 * The PostgreSQL backend of the BullMQ engines (see channels.ts): BullMQ 6's own PostgreSQL
 * backend (`createPostgresBackend`) for the jobs, and beside it, in the same schema (BullMQ's
 * namespace, default `bullmq`), two tables of multiloop's and LISTEN/NOTIFY:
 *
 * - `multiloop_outcome`: a row per outcome entry (`data`, see wire.ts) or start notice
 *   (`notice`, the job's id), by executor. An executor reads its rows after a NOTIFY on
 *   `multiloop_out_<executor>`, when a wait of READ_BLOCK_MS ends, or when its connection is back,
 *   and deletes those it applied in its next read (postgres-outcomes.ts: each row is applied once
 *   through lost connections, a row whose transaction commits late is read by a later read, never
 *   skipped, and a row too large is never fetched). Workers write their rows again when the
 *   connection was lost (an executor applies a row written twice once).
 * - `multiloop_call_marks`: per job, the calls done and cancelled (integer arrays) and the count
 *   of a large job's decodes; a row goes when BullMQ has its job completed.
 *
 * Cancel requests are NOTIFYs on `multiloop_cancel_<hash of schema and queue>`, which every
 * worker process LISTENs to. The channels of a connection (the executor's reader, the worker's
 * subscriber) are `pg` clients of their own, connected again 100 ms to 2 s apart when lost.
 * Rows of executors and jobs that vanished are swept by the workers once they are a day old.
 */
import { createHash } from 'node:crypto';
import type { Client, ClientConfig, Notification, Pool, PoolConfig } from 'pg';
import type { JobsOptions, PostgresQueueBackend, Processor, Queue, Worker } from 'bullmq';
import { repr } from '../format.js';
import { importOptional } from '../optional.js';
import type { Backend, BullMQModule, WorkerSettings } from './backends.js';
import { credentialsCutShort, redactConnection } from './redact.js';
import { queueCalls, type CallMarks, type CallerChannel, type ChannelEvents, type OutcomeSink, type QueuePort, type RunnerChannel } from './channels.js';
import { OutcomeTake, retryDelay, retryWhileLost } from './postgres-outcomes.js';
import { guardedWorker } from './unparsed.js';
import { KEY_TTL_SECONDS } from './wire.js';

/** How long a read waits for a NOTIFY (milliseconds) before it looks at the table anyway. */
const READ_BLOCK_MS = 10_000;
/** How often a worker sweeps rows older than KEY_TTL_SECONDS. */
const SWEEP_EVERY_MS = 60 * 60 * 1000;
/** BullMQ's schema when none is named. */
const DEFAULT_SCHEMA = 'bullmq';

export type { PostgresConnection } from './connections.js';

/** Quote a schema name BullMQ accepts (a plain identifier) for SQL; a TypeError naming it otherwise. */
function quoteSchema(schema: unknown, caller: string): string {
  if (typeof schema !== 'string' || !/^[A-Za-z_][A-Za-z0-9_$]{0,62}$/.test(schema)) {
    throw new TypeError(`${caller}: options.connection.postgres.schema must be a plain identifier (letters, digits, _ and $, at most 63), got ${repr(schema)}`);
  }
  return `"${schema}"`;
}

/**
 * Check a PostgreSQL `connection` (a `postgres://` URL already parsed as `url` from `text`, or
 * `{ postgres: config }`) of `caller` and make the PostgreSQL backend of it; with `migrate`, its
 * Queue and Worker bring a fresh database to BullMQ's schema and make multiloop's tables.
 *
 * @example
 * ```ts
 * const backend = postgresBackend('postgres://127.0.0.1/jobs', new URL('postgres://127.0.0.1/jobs'), 'BullMQExecutor', true);
 * ```
 */
export function postgresBackend(text: string | null, url: URL | null, config: unknown, caller: string, migrate: boolean): Backend {
  if (url !== null && text !== null) {
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost';
    return new PostgresBackend({ connectionString: text }, DEFAULT_SCHEMA, `${host}:${url.port === '' ? 5432 : Number(url.port)}`, migrate);
  }
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    throw new TypeError(`${caller}: options.connection.postgres must be an object of node-postgres pool options, got ${repr(config)}`);
  }
  const { schema = DEFAULT_SCHEMA, ...pool } = config as PoolConfig & { schema?: unknown };
  quoteSchema(schema, caller);
  // Not shown: what comes before the '@' is likely a password (a socket directory may hold one).
  if (typeof pool.host === 'string' && pool.host.includes('@') && !pool.host.startsWith('/')) {
    throw new TypeError(`${caller}: options.connection.postgres.host must be a host name, an address or a socket directory, without credentials (give them as user and password), got one with '@'`);
  }
  let host = typeof pool.host === 'string' && pool.host !== '' ? pool.host : 'localhost';
  let port = typeof pool.port === 'number' ? pool.port : 5432;
  if (typeof pool.connectionString === 'string') {
    let parsed: URL | null = null;
    try {
      parsed = new URL(pool.connectionString);
    } catch {
      // node-postgres reads forms a URL does not (a socket directory): the defaults name it.
    }
    if (parsed !== null && credentialsCutShort(parsed)) {
      throw new TypeError(
        `${caller}: options.connection.postgres.connectionString has an '@' after its host: a '/', '?' or '#' in its user name or password must be percent-encoded (encodeURIComponent), got ${repr(redactConnection(pool.connectionString))}`,
      );
    }
    if (parsed !== null && pool.host === undefined) {
      host = parsed.hostname.replace(/^\[(.*)\]$/, '$1') || host;
      if (parsed.port !== '' && pool.port === undefined) port = Number(parsed.port);
    }
  }
  return new PostgresBackend(pool, schema as string, `${host}:${port}`, migrate);
}

/** multiloop's tables, made in BullMQ's schema (already there: BullMQ's migrations made it). */
function tablesSql(schema: string): string {
  return `
CREATE TABLE IF NOT EXISTS ${schema}.multiloop_outcome (
  id bigserial PRIMARY KEY,
  executor text NOT NULL,
  notice text,
  data bytea,
  at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS multiloop_outcome_executor_idx ON ${schema}.multiloop_outcome (executor, id);
CREATE TABLE IF NOT EXISTS ${schema}.multiloop_call_marks (
  queue text NOT NULL,
  job text NOT NULL,
  done integer[] NOT NULL DEFAULT '{}',
  cancelled integer[] NOT NULL DEFAULT '{}',
  decodes integer NOT NULL DEFAULT 0,
  at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, job)
);`;
}

/** The NOTIFY channel of an executor's outcomes (its id is hex: a plain identifier). */
function outcomeChannel(executorId: string): string {
  return `multiloop_out_${executorId}`;
}

/** The ways things are named in SQL for one queue. */
class Names {
  readonly schema: string;
  readonly outcome: string;
  readonly marks: string;
  readonly job: string;
  /** The NOTIFY channel of the queue's cancel requests. */
  readonly cancelChannel: string;

  constructor(schema: string, queue: string) {
    this.schema = `"${schema}"`;
    this.outcome = `${this.schema}.multiloop_outcome`;
    this.marks = `${this.schema}.multiloop_call_marks`;
    this.job = `${this.schema}.job`;
    this.cancelChannel = `multiloop_cancel_${createHash('sha1').update(`${schema}\0${queue}`).digest('hex').slice(0, 24)}`;
  }
}

/** node-postgres, an optional peer dependency, loaded on first use. */
let pgModule: Promise<typeof import('pg')> | null = null;

/** node-postgres; when it is not installed, a RuntimeError saying so (and tried again next time). */
function loadPg(user = 'the distributed executor on PostgreSQL'): Promise<typeof import('pg')> {
  pgModule ??= importOptional('pg', user, () => import('pg')).catch((error: unknown) => {
    pgModule = null;
    throw error;
  });
  return pgModule;
}

/**
 * A client of its own that LISTENs to one channel, connected again when lost (what a Redis
 * subscriber does by itself). Its queries go on the same connection, in order.
 */
class Listener {
  readonly #config: ClientConfig;
  readonly #channel: string;
  readonly #onNotify: (payload: string) => void;
  readonly #onUp: () => void;
  #events: ChannelEvents | null = null;
  #client: Client | null = null;
  #connected = false;
  #closed = false;
  #attempts = 0;
  #timer: NodeJS.Timeout | null = null;
  #lastError = 'not connected yet';

  /** `onUp` hears each time it is connected and listening again (NOTIFYs sent meanwhile were lost). */
  constructor(config: ClientConfig, channel: string, onNotify: (payload: string) => void, onUp: () => void = () => undefined) {
    this.#config = config;
    this.#channel = channel;
    this.#onNotify = onNotify;
    this.#onUp = onUp;
  }

  /** Whether it is connected and listening. */
  get connected(): boolean {
    return this.#connected;
  }

  /** Tell `events` when it is lost and back. */
  watch(events: ChannelEvents): void {
    this.#events = events;
  }

  /** Connect and listen; rejects when the first try fails (and tries no more). */
  async start(): Promise<void> {
    try {
      await this.#connect();
    } catch (error) {
      this.close();
      throw error;
    }
  }

  async #connect(): Promise<void> {
    const { default: pg } = await loadPg();
    const client = new pg.Client(this.#config);
    const lost = (error?: Error): void => this.#lost(client, error);
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message: Notification) => {
      if (message.channel === this.#channel) this.#onNotify(message.payload ?? '');
    });
    this.#client = client;
    try {
      await client.connect();
      await client.query(`LISTEN "${this.#channel}"`);
    } catch (error) {
      this.#lost(client, error as Error);
      throw error;
    }
    if (this.#closed) {
      client.end().catch(() => undefined);
      return;
    }
    this.#attempts = 0;
    this.#connected = true;
    this.#onUp();
    this.#events?.up();
  }

  #lost(client: Client, error?: Error): void {
    if (this.#client !== client) return;
    this.#client = null;
    this.#connected = false;
    client.removeAllListeners('notification');
    client.end().catch(() => undefined);
    if (this.#closed) return;
    if (error !== undefined) {
      this.#lastError = error.message;
      this.#events?.error(error.message);
    }
    this.#events?.down();
    this.#timer = setTimeout(() => {
      this.#timer = null;
      if (!this.#closed) this.#connect().catch(() => undefined);
    }, retryDelay(++this.#attempts));
    this.#timer.unref();
  }

  /** Run `sql` on this connection; rejects at once while it is lost. */
  async query<T>(sql: string, values?: unknown[]): Promise<T[]> {
    const client = this.#client;
    if (client === null || !this.#connected) throw new Error(`the connection to PostgreSQL is lost: ${this.#lastError}`);
    return (await client.query(sql, values)).rows as T[];
  }

  /** Stop listening and end the connection. */
  close(): void {
    this.#closed = true;
    this.#connected = false;
    if (this.#timer !== null) clearTimeout(this.#timer);
    const client = this.#client;
    this.#client = null;
    client?.end().catch(() => undefined);
  }
}

/** The executor's channel: its rows taken on a listening connection of its own, cancel requests on BullMQ's pool. */
class PostgresCallerChannel implements CallerChannel {
  readonly outcomes: string;
  readonly #pool: Pool;
  readonly #names: Names;
  readonly #queue: string;
  readonly #executorId: string;
  readonly #reader: Listener;
  readonly #take: OutcomeTake;
  readonly #query = <T>(sql: string, values: unknown[]): Promise<T[]> => this.#reader.query<T>(sql, values);
  /** A NOTIFY arrived since the last take began. */
  #notified = false;
  #wake: (() => void) | null = null;

  constructor(pool: Pool, config: ClientConfig, names: Names, queue: string, executorId: string) {
    this.#pool = pool;
    this.#names = names;
    this.#queue = queue;
    this.#executorId = executorId;
    this.outcomes = `${names.outcome} (executor ${executorId})`;
    this.#take = new OutcomeTake(names.outcome, executorId);
    const wake = (): void => {
      this.#notified = true;
      const waiting = this.#wake;
      this.#wake = null;
      waiting?.();
    };
    // Back after an outage: what was written meanwhile is read now, not after READ_BLOCK_MS.
    this.#reader = new Listener(config, outcomeChannel(executorId), wake, wake);
  }

  /** Connect the reader. */
  start(): Promise<void> {
    return this.#reader.start();
  }

  get usable(): boolean {
    return this.#reader.connected;
  }

  watch(events: ChannelEvents): void {
    this.#reader.watch(events);
    if (this.#reader.connected) events.up();
  }

  async read(sink: OutcomeSink): Promise<number> {
    this.#notified = false;
    let count = await this.#take.take(this.#query, sink);
    if (count === 0) {
      if (!this.#notified) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            this.#wake = null;
            resolve();
          }, READ_BLOCK_MS);
          this.#wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      this.#notified = false;
      count = await this.#take.take(this.#query, sink);
    }
    return count;
  }

  async readBacklog(sink: OutcomeSink): Promise<void> {
    while ((await this.#take.take(this.#query, sink)) > 0);
  }

  async jobsExist(jobIds: readonly string[]): Promise<boolean[]> {
    const { rows } = await this.#pool.query<{ id: string }>(`SELECT id FROM ${this.#names.job} WHERE queue = $1 AND id = ANY($2)`, [this.#queue, jobIds]);
    const held = new Set(rows.map((row) => row.id));
    return jobIds.map((id) => held.has(id));
  }

  async cancel(jobId: string, index: number, mark: boolean): Promise<void> {
    const names = this.#names;
    if (!mark) {
      await this.#pool.query('SELECT pg_notify($1, $2)', [names.cancelChannel, `${jobId} ${index}`]);
      return;
    }
    await this.#pool.query(
      `WITH m AS (INSERT INTO ${names.marks} (queue, job, cancelled) VALUES ($1, $2, ARRAY[$3::integer]) ` +
        `ON CONFLICT (queue, job) DO UPDATE SET cancelled = ${names.marks}.cancelled || EXCLUDED.cancelled, at = now()) ` +
        'SELECT pg_notify($4, $5)',
      [this.#queue, jobId, index, names.cancelChannel, `${jobId} ${index}`],
    );
  }

  async stop(jobId: string, index: number): Promise<void> {
    await this.#pool.query('SELECT pg_notify($1, $2)', [this.#names.cancelChannel, `${jobId} ${index} stop`]);
  }

  async forgetCancelled(jobId: string): Promise<void> {
    await this.#pool.query(`DELETE FROM ${this.#names.marks} WHERE queue = $1 AND job = $2`, [this.#queue, jobId]);
  }

  async close(): Promise<boolean> {
    const connected = this.#reader.connected;
    if (connected) await this.#reader.query(`DELETE FROM ${this.#names.outcome} WHERE executor = $1`, [this.#executorId]).catch(() => undefined);
    this.#reader.close();
    this.#wake?.();
    return connected;
  }
}

/** Marks read from an integer array. */
class IndexMarks implements CallMarks {
  readonly #indexes: Set<number>;

  constructor(indexes: readonly number[] | null | undefined) {
    this.#indexes = new Set(Array.isArray(indexes) ? indexes : []);
  }

  has(index: number): boolean {
    return this.#indexes.has(index);
  }
}

/** The worker's channel: reports on BullMQ's pool, cancel requests on a listening connection of its own. */
class PostgresRunnerChannel implements RunnerChannel {
  readonly #pool: Pool;
  readonly #config: ClientConfig;
  readonly #names: Names;
  readonly #queue: string;
  readonly #report: string;
  readonly #reportFinal: string;
  #subscriber: Listener | null = null;
  #sweeper: NodeJS.Timeout | null = null;
  #closed = false;
  readonly #isClosed = (): boolean => this.#closed;

  constructor(pool: Pool, config: ClientConfig, names: Names, queue: string) {
    this.#pool = pool;
    this.#config = config;
    this.#names = names;
    this.#queue = queue;
    const insert = `WITH o AS (INSERT INTO ${names.outcome} (executor, data) VALUES ($1, $2))`;
    this.#report =
      `${insert}, m AS (INSERT INTO ${names.marks} (queue, job, done) VALUES ($3, $4, $5::integer[]) ` +
      `ON CONFLICT (queue, job) DO UPDATE SET done = ${names.marks}.done || EXCLUDED.done, at = now()) SELECT pg_notify($6, '')`;
    this.#reportFinal = `${insert}, m AS (DELETE FROM ${names.marks} WHERE queue = $3 AND job = $4) SELECT pg_notify($5, '')`;
  }

  async report(executorId: string, jobId: string, entry: Uint8Array, final: boolean, indexes: readonly number[]): Promise<void> {
    const data = Buffer.from(entry.buffer, entry.byteOffset, entry.byteLength);
    // Written again when the connection was lost (the server restarting): an outcome that
    // fails to go out fails its job, and BullMQ, which retries its own writes, would then
    // have the job failed once the server is back (Redis's client queues commands by itself).
    const [sql, values] = final
      ? [this.#reportFinal, [executorId, data, this.#queue, jobId, outcomeChannel(executorId)]]
      : [this.#report, [executorId, data, this.#queue, jobId, indexes, outcomeChannel(executorId)]];
    await retryWhileLost(() => this.#pool.query(sql, values), this.#isClosed);
  }

  notice(executorId: string, jobId: string): void {
    this.#pool
      .query(`WITH o AS (INSERT INTO ${this.#names.outcome} (executor, notice) VALUES ($1, $2)) SELECT pg_notify($3, '')`, [executorId, jobId, outcomeChannel(executorId)])
      .catch(() => undefined);
  }

  async marks(jobId: string): Promise<[CallMarks, CallMarks]> {
    const { rows } = await this.#pool.query<{ done: number[]; cancelled: number[] }>(`SELECT done, cancelled FROM ${this.#names.marks} WHERE queue = $1 AND job = $2`, [
      this.#queue,
      jobId,
    ]);
    const row = rows[0];
    return [new IndexMarks(row?.done), new IndexMarks(row?.cancelled)];
  }

  async countDecode(jobId: string): Promise<number> {
    const { rows } = await this.#pool.query<{ decodes: number }>(
      `INSERT INTO ${this.#names.marks} (queue, job, decodes) VALUES ($1, $2, 1) ` +
        `ON CONFLICT (queue, job) DO UPDATE SET decodes = ${this.#names.marks}.decodes + 1, at = now() RETURNING decodes`,
      [this.#queue, jobId],
    );
    return Number(rows[0]?.decodes);
  }

  clearDecodes(jobId: string): void {
    this.#pool.query(`UPDATE ${this.#names.marks} SET decodes = 0 WHERE queue = $1 AND job = $2`, [this.#queue, jobId]).catch(() => undefined);
  }

  async decodes(jobId: string): Promise<number> {
    const { rows } = await this.#pool.query<{ decodes: number }>(`SELECT decodes FROM ${this.#names.marks} WHERE queue = $1 AND job = $2`, [this.#queue, jobId]);
    return Number(rows[0]?.decodes ?? 0);
  }

  forget(jobId: string): void {
    this.#pool.query(`DELETE FROM ${this.#names.marks} WHERE queue = $1 AND job = $2`, [this.#queue, jobId]).catch(() => undefined);
  }

  async subscribe(listener: (message: string) => void): Promise<void> {
    const subscriber = new Listener(this.#config, this.#names.cancelChannel, listener);
    this.#subscriber = subscriber;
    await subscriber.start();
    this.#sweep();
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_EVERY_MS).unref();
  }

  /** Remove the rows of executors and jobs that vanished (Redis expires their keys). */
  #sweep(): void {
    const age = `now() - interval '${KEY_TTL_SECONDS} seconds'`;
    this.#pool.query(`DELETE FROM ${this.#names.outcome} WHERE at < ${age}`).catch(() => undefined);
    this.#pool.query(`DELETE FROM ${this.#names.marks} WHERE at < ${age}`).catch(() => undefined);
  }

  close(): void {
    this.#closed = true;
    if (this.#sweeper !== null) clearInterval(this.#sweeper);
    this.#subscriber?.close();
  }
}

/** What BullMQ's schema check throws on a database it never migrated. */
function isUnmigrated(error: unknown): boolean {
  return (error as Error | null)?.name === 'SchemaMigrationRequiredError';
}

/** BullMQ's PostgreSQL backend, and the tables and channels beside it. */
class PostgresBackend implements Backend {
  readonly server = 'PostgreSQL';
  readonly scheme = 'postgres';
  readonly where: string;
  readonly #pool: PoolConfig;
  readonly #schema: string;
  readonly #migrate: boolean;

  constructor(pool: PoolConfig, schema: string, where: string, migrate: boolean) {
    this.#pool = pool;
    this.#schema = schema;
    this.where = where;
    this.#migrate = migrate;
  }

  /** BullMQ's `connection`: the pool config with its schema, migrating on connect when asked to. */
  #connection(): Record<string, unknown> {
    const connection: Record<string, unknown> = { ...this.#pool, schema: this.#schema };
    if (this.#migrate) connection.migrate = true;
    return connection;
  }

  /**
   * Wait until BullMQ's backend is ready (its schema migrated or checked), then make or check
   * multiloop's tables; an Error saying what to do when the database is not migrated.
   */
  async #ready(backend: PostgresQueueBackend): Promise<Pool> {
    try {
      await backend.waitUntilReady();
    } catch (error) {
      if (!this.#migrate && isUnmigrated(error)) {
        throw new Error(
          `the database has no BullMQ schema ${repr(this.#schema)} and options.migrate is false: run BullMQ's migrations (runMigrations), or leave migrate on once`,
          { cause: error },
        );
      }
      throw error;
    }
    const pool = backend.connection.pool as unknown as Pool;
    const schema = `"${this.#schema}"`;
    if (this.#migrate) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        // Executors and workers starting together: one makes the tables, the others wait.
        await client.query("SELECT pg_advisory_xact_lock(hashtext('multiloop:tables'), hashtext($1))", [this.#schema]);
        await client.query(tablesSql(schema));
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    } else {
      const { rows } = await pool.query<{ made: boolean }>(
        `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AS made`,
        [`${schema}.multiloop_outcome`, `${schema}.multiloop_call_marks`],
      );
      if (rows[0]?.made !== true) {
        throw new Error(
          `the database has no multiloop tables (multiloop_outcome, multiloop_call_marks) in schema ${repr(this.#schema)} and options.migrate is false: ` +
            'let an executor or a worker with migrate on make them once, or make them as the README (Scaling out) shows',
        );
      }
    }
    return pool;
  }

  /** The config of a client of multiloop's own (a listening connection). */
  #clientConfig(): ClientConfig {
    return { ...this.#pool, keepAlive: true };
  }

  async loadDriver(user: string): Promise<void> {
    await loadPg(user);
  }

  async openQueue(bullmq: BullMQModule, name: string, _prefix: string, defaultJobOptions: JobsOptions, executorId: string): Promise<QueuePort> {
    const queue: Queue = new bullmq.Queue(name, { connection: this.#connection(), defaultJobOptions }, bullmq.createPostgresBackend as never);
    let onError: (error: Error) => void = () => undefined;
    queue.on('error', (error: Error) => onError(error));
    let pool: Pool;
    try {
      pool = await this.#ready(queue.getBackend() as unknown as PostgresQueueBackend);
    } catch (error) {
      await queue.close().catch(() => undefined);
      throw error;
    }
    const names = new Names(this.#schema, name);
    let channel: Promise<CallerChannel> | null = null;
    const config = this.#clientConfig();
    return {
      ...queueCalls(queue),
      get channel(): Promise<CallerChannel> {
        channel ??= (async () => {
          const opened = new PostgresCallerChannel(pool, config, names, name, executorId);
          await opened.start();
          return opened;
        })();
        return channel;
      },
      onError(listener: (error: Error) => void): void {
        onError = listener;
      },
      async close(force: boolean): Promise<void> {
        // Ending a pool waits for its clients: with the server away, it is not waited for long.
        const closed = queue.close();
        if (!force) return closed;
        await Promise.race([closed.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      },
    };
  }

  openWorker(bullmq: BullMQModule, name: string, _prefix: string, processor: Processor, settings: WorkerSettings, maxJobBytes: number): Worker {
    const GuardedWorker = guardedWorker(bullmq, maxJobBytes);
    return new GuardedWorker(name, processor, { connection: this.#connection(), ...settings, autorun: false }, bullmq.createPostgresBackend as never);
  }

  async runnerChannel(worker: Worker, name: string): Promise<RunnerChannel> {
    const pool = await this.#ready(worker.getBackend() as unknown as PostgresQueueBackend);
    return new PostgresRunnerChannel(pool, this.#clientConfig(), new Names(this.#schema, name), name);
  }
}
