/**
 * How much of the monitor's process a client can hold: at most `maxConnections` connections at
 * once (Node closes the others as they come), and none of them idle for longer than
 * `idleTimeout` seconds — before its first request, between two, or while its answer is not
 * being read — nor sending one request's headers for longer. Only waiting for a snapshot, which
 * the monitor itself paces, does not count as idle.
 */
import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';

/** How long a connection may stay idle, in seconds, by default. */
export const IDLE_TIMEOUT = 10;

/** The most connections served at once, by default: a monitor is watched by a few people. */
export const MAX_CONNECTIONS = 100;

/** The options of `http.createServer` that bound a request's arrival to `idleTimeout` seconds. */
export function requestLimits(idleTimeout: number): ServerOptions {
  const ms = Math.max(1, Math.round(idleTimeout * 1000));
  // Node checks headersTimeout and requestTimeout every connectionsCheckingInterval (30 s by default).
  return { headersTimeout: ms, requestTimeout: ms, connectionsCheckingInterval: Math.min(30_000, Math.max(10, Math.round(ms / 4))) };
}

/** What `limitConnections` gives the request handler: a way to say a request waits for the monitor, not for its client. */
export interface ConnectionLimits {
  /** `work` (taking a snapshot for the request on `socket`): the connection is not idle meanwhile. */
  waiting<T>(socket: Socket, work: Promise<T>): Promise<T>;
}

/**
 * Bound `server`'s connections: at most `maxConnections`, each closed once idle for
 * `idleTimeout` seconds (a keep-alive connection between requests too), except while it waits for
 * a snapshot.
 *
 * @example
 * ```ts
 * const server = createServer(requestLimits(10), handler);
 * const limits = limitConnections(server, 10, 100);
 * const served = await limits.waiting(request.socket, snapshots.forConnection(request.socket, 'json'));
 * ```
 */
export function limitConnections(server: Server, idleTimeout: number, maxConnections: number): ConnectionLimits {
  const ms = Math.max(1, Math.round(idleTimeout * 1000));
  const waits = new WeakMap<Socket, number>();
  server.maxConnections = maxConnections;
  server.keepAliveTimeout = ms;
  server.timeout = ms;
  // With a listener, Node leaves the idle socket to it: it goes unless the monitor is what it waits for.
  server.on('timeout', (socket: Socket) => {
    if ((waits.get(socket) ?? 0) === 0) socket.destroy();
  });
  // Node turns a keep-alive connection's timer off as its next request arrives: on again, for
  // an answer the client does not read.
  server.on('request', (request: { socket: Socket }) => request.socket.setTimeout(ms));
  return {
    async waiting<T>(socket: Socket, work: Promise<T>): Promise<T> {
      waits.set(socket, (waits.get(socket) ?? 0) + 1);
      try {
        return await work;
      } finally {
        const left = (waits.get(socket) ?? 1) - 1;
        if (left === 0) waits.delete(socket);
        else waits.set(socket, left);
        // Idle from here on counts afresh.
        if (!socket.destroyed) socket.setTimeout(ms);
      }
    },
  };
}
