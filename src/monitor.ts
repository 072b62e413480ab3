/**
 * The live monitor: a small read-only web page (and its JSON) showing every thread's loop health
 * and the task tree across threads, refreshing itself. Served by `node:http` from the thread
 * that starts it, on loopback unless told otherwise. It answers only requests addressed to it by
 * a name it knows (the `Host` header: a page of another site that rebinds its DNS name to this
 * address is refused), and only to the monitor's own page (a fetch from a page of another origin
 * is refused). However many clients ask, it takes at most one snapshot at a time and at most one
 * per `minInterval`, serialised once and shared. It never keeps the process alive by itself: it
 * watches an app, it is not one.
 *
 * The server is internal/monitor-server.ts, loaded when a monitor is first started: a thread that
 * starts none loads neither it nor node:http.
 */
import type { YieldablePromise } from './coroutines.js';
import { yieldable } from './internal/yieldable.js';

/** Options of `startMonitor`. */
export interface MonitorOptions {
  /** The TCP port (0: a free one). */
  port: number;
  /** The address to listen on (default `'127.0.0.1'`: loopback only). */
  host?: string;
  /**
   * Further names the monitor answers to, as `Host` headers carry them: `'name'` (any port) or
   * `'name:port'`, e.g. `['monitor.internal', '10.0.0.5:8123']` behind a proxy or on another
   * interface. Without them it answers only to the address it listens on (and to `localhost`,
   * `127.0.0.1` and `[::1]` with its port when that is loopback or every interface).
   */
  allowedHosts?: string[];
  /**
   * The least time between two snapshots, in seconds (default 1, the page's refresh): a request
   * within it of the last snapshot gets that one, except on a connection that was sent that one
   * already, which waits for the next. Requests while a snapshot is being taken wait for it,
   * whatever this is.
   */
  minInterval?: number;
  /** How long each thread has to answer a snapshot, in seconds (default 0.5); one that does not is listed as unresponsive. */
  timeout?: number;
  /**
   * How long a connection may stay idle, in seconds (default 10): one that sends nothing for this
   * long (before its first request or between two), sends a request's headers for longer, or
   * does not read its answer for this long, is closed. Waiting for a snapshot does not count.
   */
  idleTimeout?: number;
  /** The most connections served at once (default 100); Node closes the others as they come. */
  maxConnections?: number;
}

/** What a monitor has done since it started (Trio-style `statistics()`). */
export interface MonitorStatistics {
  /** Requests received. */
  readonly requests: number;
  /** Requests refused: addressed to a name the monitor does not answer to, or sent by a page of another origin. */
  readonly refused: number;
  /** Snapshots taken (each shared by the requests made while it was taken and within `minInterval` after). */
  readonly snapshots: number;
}

/** A running monitor: a read-only live page (and JSON) of every thread's loop health and task tree. */
export interface Monitor {
  /** The page's URL, e.g. `http://127.0.0.1:8123/`. */
  readonly url: string;
  /** The port it listens on. */
  readonly port: number;
  /** Report the requests received and refused, and the snapshots taken. */
  statistics(): MonitorStatistics;
  /** Stop serving. */
  close(): YieldablePromise<void>;
  /** `await using monitor = await startMonitor(...)`: `close()` when the scope ends. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Serve the live monitor page: every thread's loop lag, utilisation, iterations, ready queue,
 * timers and tasks, and the task tree across threads, refreshed every second. `GET /` is the
 * page, `GET /snapshot.json` its data, `GET /pstree.txt` the tree as `pstree()` prints it;
 * nothing else is served and nothing can be changed through it.
 *
 * Who can reach it: it listens on loopback unless `host` says otherwise, and answers only
 * requests whose `Host` header names it — the address it listens on with its port (`localhost`,
 * `127.0.0.1` and `[::1]` too when that is loopback or every interface), or one of
 * `allowedHosts`; others get `421` and one line of text. A browser's request that a page of
 * another origin makes (`Origin`, `Sec-Fetch-Site`) gets `403`. The page itself forbids framing.
 *
 * What it costs the app: a snapshot reads every task of every loop of each thread — the
 * monitor's own thread a thousand tasks per turn of its event loop (when it is the main thread:
 * its rows are then not all of one moment, unlike `ps()`'s), the others in one go each; the
 * monitor takes at most one at a time (requests meanwhile wait for it) and at most one per
 * `minInterval` seconds (default 1: requests within it of the last snapshot get that one; a
 * connection asking again for the one it has waits for the next), and serialises it once for
 * every client — a thousand tasks per turn of the event loop, gzipped once for the clients
 * that take gzip — so that clients refreshing as fast as they can cost the app about one
 * snapshot a second. `statistics()` counts the snapshots taken.
 *
 * @example
 * ```ts
 * const monitor = await startMonitor({ port: 0 });
 * console.log(`watch it at ${monitor.url}`);
 * // Behind a proxy that forwards `Host: monitor.internal`:
 * const proxied = await startMonitor({ port: 8123, allowedHosts: ['monitor.internal'] });
 * // ...
 * await monitor.close();
 * await proxied.close();
 * ```
 */
export function startMonitor(options: MonitorOptions): YieldablePromise<Monitor> {
  return yieldable(import('./internal/monitor-server.js').then(({ startServing }) => startServing(options)));
}
