/**
 * The connection options of the distributed executor, apart from its engines: these types name
 * nothing of BullMQ's, ioredis's or pg's (optional packages), so multiloop's declarations
 * type-check in an app that has not installed them.
 */
import type { ConnectionOptions as TlsConnectionOptions } from 'node:tls';

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

/**
 * node-postgres's pool config as `{ postgres: config }` takes it: its usual options typed, any
 * other of pg's passed through as is (pg reads them).
 *
 * @example
 * ```ts
 * const config: PostgresPoolConfig = { host: '10.0.0.7', database: 'jobs', max: 4, ssl: { rejectUnauthorized: true } };
 * ```
 */
export interface PostgresPoolConfig {
  connectionString?: string;
  host?: string;
  port?: number;
  user?: string;
  password?: string | (() => string | Promise<string>);
  database?: string;
  ssl?: boolean | TlsConnectionOptions;
  max?: number;
  idleTimeoutMillis?: number;
  connectionTimeoutMillis?: number;
  application_name?: string;
  statement_timeout?: number;
  keepAlive?: boolean;
  [option: string]: unknown;
}

/**
 * Where PostgreSQL is, for BullMQ's PostgreSQL backend: a `postgres://` / `postgresql://` URL,
 * or `{ postgres: config }` with node-postgres's pool config (host, port, user, password,
 * database, ssl, ...) and BullMQ's `schema` (the namespace of its tables, default `'bullmq'`).
 *
 * @example
 * ```ts
 * const connection: PostgresConnection = { postgres: { host: '10.0.0.7', database: 'jobs', password: process.env.PGPASSWORD } };
 * ```
 */
export type PostgresConnection = string | { postgres: PostgresPoolConfig & { schema?: string } };
