/**
 * The loop's network functions (asyncio's base_events: create_connection, create_server,
 * create_datagram_endpoint, getaddrinfo, and Server), on Node's `net`, `tls`, `dgram` and `dns`.
 * The EventLoop's methods of the same names call these; streams.ts builds on them.
 */
import * as dgram from 'node:dgram';
import { lstatSync, renameSync, statSync, unlinkSync } from 'node:fs';
import * as net from 'node:net';
import { createRequire } from 'node:module';
import { getSystemErrorMap } from 'node:util';
import type * as tls from 'node:tls';
import type { EventLoop } from './base-events.js';
import type { Coroutine } from './coroutines.js';
import { CancelledError, RuntimeError } from './exceptions.js';
import type { Future } from './futures.js';
import { CAN_PROBE_DESCRIPTORS, OUT_OF_RESOURCE_CODES, probeDescriptor } from './internal/descriptors.js';
import { INSPECT, repr } from './internal/format.js';
import { eventFuture } from './internal/node-events.js';
import { reusePortMissing, reusePortRefused } from './internal/reuse-port.js';
import type { DatagramProtocol, Protocol } from './protocols.js';
import { _abortHandshake, _handshakeTimeout } from './start-tls.js';
import { SocketReads, adoptWithOnread } from './internal/socket-reads.js';
import { DatagramTransport, Transport, _trackOpen, _untrackOpen, type LoopResource, type TransportOwner } from './transports.js';

/** Options of `loop.createConnection`. */
export interface CreateConnectionOptions {
  /** TLS: `true` for Node's defaults (verify the peer), or `node:tls` connect options (`ca`, `rejectUnauthorized`, ...). */
  ssl?: boolean | tls.ConnectionOptions;
  /** The host name for SNI and certificate checks, when it differs from `host`. */
  serverHostname?: string;
  /**
   * The local `[host, port]` to bind the socket to before it connects (port 0: any); the first
   * local address of the remote's family is used (TCP only).
   */
  localAddr?: [host: string, port: number];
  /** Seconds the TLS handshake may take before the connection is aborted (default 60); only with `ssl`. */
  sslHandshakeTimeout?: number;
}

/** Options of `loop.createServer`. */
export interface CreateServerOptions {
  /** The listen backlog (the most connections queued before accept). */
  backlog?: number;
  /** TLS: `node:tls` server options (`key`, `cert`, ...). */
  ssl?: tls.TlsOptions;
  /** Start accepting at once (default true); else `startServing()` or `serveForever()` starts it. */
  startServing?: boolean;
  /** Seconds each client's TLS handshake may take before its connection is dropped (default 60); only with `ssl`. */
  sslHandshakeTimeout?: number;
  /**
   * Let several servers (in several threads) listen on the same port, the kernel spreading the
   * connections (SO_REUSEPORT). TCP only, not with `sock`. Needs Node 22.12 or later on Linux
   * (or FreeBSD 12+, Solaris 11.4, AIX 7.2.5+); elsewhere a RangeError names what is missing.
   */
  reusePort?: boolean;
  /**
   * Serve on this `net.Server`, already listening (Node binds a server as it listens), instead of
   * a host and port or a path (asyncio's `sock`). The Server takes it over: closing it closes
   * this one. With `ssl`, its connections are wrapped in TLS.
   */
  sock?: net.Server;
  /** TCP servers: turn on TCP keep-alive (SO_KEEPALIVE) on every accepted connection (asyncio 3.13's `keep_alive`). */
  keepAlive?: boolean;
  /**
   * Unix servers: remove the socket file when the server closes (default true), unless another
   * file has replaced it meanwhile (asyncio 3.13's `cleanup_socket`).
   */
  cleanupSocket?: boolean;
}

/** Options of `loop.createDatagramEndpoint`: at least one of the two addresses, or `sock`. */
export interface DatagramEndpointOptions {
  /** Use this `dgram.Socket` (bound, maybe connected) instead of addresses (asyncio's `sock`); the transport takes it over. */
  sock?: dgram.Socket;
  /** The local `[host, port]` to bind (port 0: a free one). */
  localAddr?: [host: string, port: number];
  /** The peer `[host, port]` that `sendto(data)` without an address sends to. */
  remoteAddr?: [host: string, port: number];
}

/** Options of `loop.getaddrinfo`. */
export interface GetaddrinfoOptions {
  /** 4 or 6 to restrict the address family; 0 (default) for both. */
  family?: 0 | 4 | 6;
}

/** One result of `getaddrinfo`: asyncio's 5-tuple, with Node's address family numbers (4, 6). */
export type AddrInfo = [family: 4 | 6, type: number, proto: number, canonname: string, sockaddr: [host: string, port: number]];

const require = createRequire(import.meta.url);
let tlsModule: typeof tls | null = null;
let dnsModule: typeof import('node:dns') | null = null;

/** node:tls, loaded on first use: most programs never open a TLS connection, and loading it costs every thread several ms. */
function loadTls(): typeof tls {
  return (tlsModule ??= require('node:tls') as typeof tls);
}

/** node:dns, loaded on first use, for the same reason. */
function loadDns(): typeof import('node:dns') {
  return (dnsModule ??= require('node:dns') as typeof import('node:dns'));
}

/** Where a server or a connection goes: a TCP host and port, or a Unix socket path. */
export type Endpoint = { host: string | null; port: number } | { path: string };

/** Where a server listens: as an Endpoint, or nothing (both null) when it is given `sock`. */
export type ServerEndpoint = { host: string | null; port: number | null | undefined } | { path: string | null };

/** The socket types and protocols getaddrinfo lists for each address, as Linux's does without hints. */
const SOCKET_TYPES: ReadonlyArray<[type: number, proto: number]> = [
  [1, 6], // SOCK_STREAM, IPPROTO_TCP
  [2, 17], // SOCK_DGRAM, IPPROTO_UDP
  [3, 0], // SOCK_RAW
];

function checkPort(port: unknown, what: string): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`${what} port must be an integer from 0 to 65535, got ${repr(port)}`);
  }
  return port;
}

function checkFactory(factory: unknown, what: string): void {
  if (typeof factory !== 'function') throw new TypeError(`${what} needs a protocol factory (a function returning a Protocol), got ${repr(factory)}`);
}

// ───────────────────────────── connections ─────────────────────────────

/**
 * Connect to `endpoint` and drive `protocolFactory()` from the socket (create_connection,
 * create_unix_connection); returns once the protocol's `connectionMade` ran.
 *
 * @internal
 */
export function* _createConnection<P extends Protocol>(
  loop: EventLoop,
  protocolFactory: () => P,
  endpoint: Endpoint,
  options: CreateConnectionOptions,
  what: string,
): Coroutine<[Transport, P]> {
  checkFactory(protocolFactory, what);
  if (options === null || typeof options !== 'object') throw new TypeError(`${what} options must be an object, got ${repr(options)}`);
  if ('port' in endpoint) {
    if (typeof endpoint.host !== 'string' || endpoint.host === '') throw new TypeError(`${what} host must be a non-empty string, got ${repr(endpoint.host)}`);
    checkPort(endpoint.port, what);
  } else if (typeof endpoint.path !== 'string' || endpoint.path === '') {
    throw new TypeError(`${what} path must be a non-empty string, got ${repr(endpoint.path)}`);
  }
  const ssl = options.ssl;
  if (options.serverHostname !== undefined && (ssl === undefined || ssl === false)) {
    throw new RangeError('serverHostname is only meaningful with ssl');
  }
  if (options.sslHandshakeTimeout !== undefined && (ssl === undefined || ssl === false)) {
    throw new RangeError('ssl_handshake_timeout is only meaningful with ssl');
  }
  const timeout = ssl === undefined || ssl === false ? 0 : _handshakeTimeout(options.sslHandshakeTimeout);
  let target: { host: string; port: number; localAddress?: string; localPort?: number } | { path: string } =
    'port' in endpoint ? { host: endpoint.host as string, port: endpoint.port } : { path: endpoint.path };
  if (options.localAddr !== undefined) {
    if (!('port' in target)) throw new TypeError(`${what} got an unexpected keyword argument 'localAddr'`);
    target = yield* bindTarget(loop, target, options.localAddr, what);
  }
  const reads = ssl === undefined || ssl === false ? new SocketReads() : null;
  const socket =
    reads !== null
      ? net.connect({ ...target, allowHalfOpen: true, onread: reads.options })
      : loadTls().connect({
          ...(ssl === true ? {} : ssl),
          ...target,
          ...(options.serverHostname !== undefined ? { servername: options.serverHostname } : {}),
          // The host resolved for localAddr: its name still checks the certificate, as without localAddr.
          ...(options.serverHostname === undefined && 'port' in endpoint && net.isIP(endpoint.host as string) === 0 ? { servername: endpoint.host as string } : {}),
        });
  const connected = eventFuture(loop, socket, ssl === undefined || ssl === false ? 'connect' : 'secureConnect');
  const timer = timeout === 0 ? null : loop.callLater(timeout, () => _abortHandshake(connected, timeout));
  try {
    yield* connected;
  } catch (error) {
    socket.destroy();
    throw 'localAddress' in target ? bindError(error, target) : error;
  } finally {
    timer?.cancel();
  }
  let protocol: P;
  try {
    protocol = protocolFactory();
  } catch (error) {
    socket.destroy();
    throw error;
  }
  const made = loop.createFuture<undefined>();
  // TCP_NODELAY, as asyncio sets on every TCP transport: a small write goes out at once.
  if ('port' in target) socket.setNoDelay(true);
  const transport = new Transport(loop, protocol, { readable: socket, writable: socket, made, reads, extra: 'path' in target ? { path: target.path } : {} });
  try {
    yield* made;
  } catch (error) {
    transport.close();
    throw error;
  }
  return [transport, protocol];
}

/** The name asyncio prints for an address family. */
function familyName(family: 4 | 6): string {
  return family === 6 ? 'AF_INET6' : 'AF_INET';
}

/**
 * Where to connect from `localAddr` (asyncio binds before it connects): the remote's address
 * resolved, and the first local address of its family; none of that family is an error naming it.
 */
function* bindTarget(
  loop: EventLoop,
  target: { host: string; port: number },
  localAddr: unknown,
  what: string,
): Coroutine<{ host: string; port: number; localAddress: string; localPort: number }> {
  if (!Array.isArray(localAddr) || localAddr.length !== 2 || typeof localAddr[0] !== 'string') {
    throw new TypeError(`${what} localAddr must be [host, port], got ${repr(localAddr)}`);
  }
  const localPort = checkPort(localAddr[1], `${what} localAddr`);
  const [remote] = yield* _getaddrinfo(loop, target.host, target.port, {});
  if (remote === undefined) throw new Error('getaddrinfo() returned empty list');
  const family = remote[0];
  const locals = yield* _getaddrinfo(loop, localAddr[0] as string, localPort, {});
  if (locals.length === 0) throw new Error('getaddrinfo() returned empty list');
  const local = locals.find((info) => info[0] === family);
  if (local === undefined) throw new Error(`no matching local address with family=${familyName(family)} found`);
  return { host: remote[4][0], port: target.port, localAddress: local[4][0], localPort };
}

/** A bind that failed before the connect, reported as asyncio words it (with the OS error's code and errno kept). */
function bindError(error: unknown, target: { localAddress?: string; localPort?: number }): unknown {
  const failed = error as (Error & { syscall?: string; code?: string; errno?: number }) | null;
  if (failed === null || typeof failed !== 'object' || failed.syscall !== 'bind') return error;
  const reason = typeof failed.errno === 'number' ? (getSystemErrorMap().get(failed.errno)?.[1] ?? failed.message) : failed.message;
  const wrapped = new Error(`error while attempting to bind on address ['${target.localAddress}', ${target.localPort}]: ${reason.toLowerCase()}`, { cause: error });
  Object.assign(wrapped, { code: failed.code, errno: failed.errno, syscall: 'bind' });
  return wrapped;
}

// ───────────────────────────── servers ─────────────────────────────

/**
 * A listening server made by `startServer` / `loop.createServer` (asyncio.Server). It counts the
 * connections it accepted: `waitClosed()` waits until it is closed and they all ended.
 *
 * An accept that leaves the process without a file descriptor is reported to the loop's exception
 * handler as asyncio reports a failed accept ("socket.accept() out of system resource", with the
 * EMFILE or ENFILE error, `socket` and `server`), once until an accept finds one free again. Unlike
 * asyncio's, the server cannot stop accepting meanwhile: Node's libuv accepts and closes every
 * connection that comes while none is free, and serves again as soon as one is.
 *
 * @example
 * ```ts
 * const server = yield* startServer(handle, '127.0.0.1', 8888);
 * yield* server.run(function* () { yield* server.serveForever(); });
 * ```
 */
export class Server implements TransportOwner, LoopResource {
  readonly #loop: EventLoop;
  readonly #factory: () => Protocol;
  readonly #netServer: net.Server;
  readonly #listen: net.ListenOptions | null;
  readonly #unixPath: string | null;
  readonly #secure: boolean;
  readonly #keepAlive: boolean;
  /** The inode of the socket file this server bound, removed on close only while it is still that file; null: leave it. */
  #unixInode: number | null = null;
  readonly #cleanupSocket: boolean;
  #open = true;
  #serving = false;
  #listening = false;
  readonly #clients = new Set<Transport>();
  #waiters: Array<Future<void>> | null = [];
  #servingForever: Future<void> | null = null;
  /** Whether accepts probe for a descriptor left (not on Windows, nor where the null device cannot be opened). */
  #probing = CAN_PROBE_DESCRIPTORS;
  /** Set once a shortage was reported; an accept that finds the process with room again ends it, so each shortage is reported once. */
  #outOfResources = false;
  /** @internal A listening server waits for clients: no I/O of its own (a simulation's clock does not wait for it). */
  readonly _listens = true;

  /**
   * @internal Made by `loop.createServer` / `startServer`: `netServer` listens (with `listen`, or
   * already: null); `tlsFront`, when `netServer` is a plain server given as `sock` with `ssl`,
   * wraps its connections in TLS.
   */
  constructor(
    loop: EventLoop,
    factory: () => Protocol,
    netServer: net.Server,
    listen: net.ListenOptions | null,
    unixPath: string | null,
    secure: boolean,
    settings: { keepAlive: boolean; cleanupSocket: boolean; tlsFront: tls.Server | null },
  ) {
    this.#loop = loop;
    this.#factory = factory;
    this.#netServer = netServer;
    this.#listen = listen;
    this.#unixPath = unixPath;
    this.#secure = secure;
    this.#keepAlive = settings.keepAlive;
    this.#cleanupSocket = settings.cleanupSocket;
    const front = settings.tlsFront;
    if (front !== null) netServer.on('connection', (socket: net.Socket) => front.emit('connection', socket));
    const events = front ?? netServer;
    events.on(secure ? 'secureConnection' : 'connection', this.#accept);
    if (secure) {
      // The accept took its descriptor before the handshake: check right then.
      netServer.on('connection', this.#checkResources);
      // A client that fails its handshake never becomes a connection: asyncio logs it in debug mode only.
      events.on('tlsClientError', (_error: Error, socket: tls.TLSSocket) => socket.destroy());
    }
    _trackOpen(loop, this);
  }

  /** @internal */
  _closeAtLoopClose(): void {
    this.#open = false;
    this.#serving = false;
    this.#closeListener();
  }

  /**
   * Close the listening socket. A Unix socket's file goes with it only when `cleanupSocket` and
   * it is still the file this server bound (asyncio 3.13 compares inodes): libuv unlinks the
   * path it bound as it closes, synchronously, so a file to keep is moved aside meanwhile.
   */
  #closeListener(): void {
    const path = this.#unixPath;
    const inode = this.#unixInode;
    this.#unixInode = null;
    let aside: string | null = null;
    if (path !== null) {
      let present: number | null = null;
      try {
        present = statSync(path).ino;
      } catch {
        // Gone already: nothing to keep, nothing to remove.
      }
      if (present !== null && (inode === null || present !== inode)) {
        aside = `${path}.closing-${process.pid}-${++closingCount}`;
        try {
          renameSync(path, aside);
        } catch {
          aside = null;
        }
      }
    }
    this.#netServer.close();
    if (aside !== null) {
      try {
        renameSync(aside, path as string);
      } catch {
        // Moved or removed meanwhile by someone else: theirs to keep.
      }
    } else if (path !== null && inode !== null) removeIfInode(path, inode);
  }

  readonly #accept = (accepted: net.Socket): void => {
    if (!this.#serving || this.#loop.isClosed()) {
      accepted.destroy();
      return;
    }
    if (!this.#secure) this.#checkResources();
    // Until the transport listens, an error (a reset) must not go unheard; the socket then closes.
    accepted.on('error', ignoreEarlyError);
    // Nothing is read before the transport listens: a socket stays paused until then.
    this.#loop.callSoon(() => {
      accepted.off('error', ignoreEarlyError);
      if (!this.#open || accepted.destroyed) {
        accepted.destroy();
        return;
      }
      let protocol: Protocol;
      try {
        protocol = this.#factory();
      } catch (error) {
        accepted.destroy();
        this.#loop.callExceptionHandler({
          message: 'Error on transport creation for incoming connection',
          exception: error instanceof Error ? error : new RuntimeError(String(error)),
        });
        return;
      }
      const offered = this.#secure ? null : new SocketReads();
      const adopted = offered === null ? null : adoptWithOnread(accepted, offered);
      const socket = adopted ?? accepted;
      if (this.#unixPath === null) {
        socket.setNoDelay(true);
        if (this.#keepAlive) socket.setKeepAlive(true);
      }
      const transport = new Transport(this.#loop, protocol, {
        readable: socket,
        writable: socket,
        owner: this,
        reads: adopted === null ? null : offered,
        extra: this.#unixPath === null ? {} : { path: this.#unixPath },
      });
      this.#clients.add(transport);
    });
  };

  /**
   * After an accept: whether the process has a descriptor left for the next one. When it has none,
   * libuv closes every connection that comes until one is freed, without a word to Node (see
   * internal/descriptors.ts), so this is the one moment the shortage can be reported.
   */
  readonly #checkResources = (): void => {
    if (!this.#probing) {
      this.#outOfResources = false;
      return;
    }
    const shortage = probeDescriptor();
    if (shortage === null) {
      this.#outOfResources = false;
    } else if (OUT_OF_RESOURCE_CODES.has(shortage.code ?? '')) {
      this.#reportOutOfResources(shortage);
    } else {
      // The null device cannot be opened at all (a sandbox): probing tells nothing here.
      this.#probing = false;
    }
  };

  /** Tell the exception handler once per shortage that accepting fails for want of a resource (asyncio's message). */
  #reportOutOfResources(error: Error): void {
    if (this.#outOfResources || this.#loop.isClosed()) return;
    this.#outOfResources = true;
    // From the loop's iteration, where a handler's KeyboardInterrupt or SystemExit can leave the loop.
    this.#loop.callSoon(() => {
      this.#loop.callExceptionHandler({ message: 'socket.accept() out of system resource', exception: error, socket: this.#netServer, server: this });
    });
  }

  /** @internal A connection it accepted goes on in `next` (startTls). */
  _replace(previous: Transport, next: Transport): void {
    if (this.#clients.delete(previous)) this.#clients.add(next);
  }

  /** @internal A connection it accepted ended. */
  _detach(transport: Transport): void {
    this.#clients.delete(transport);
    this.#wakeIfDone();
  }

  #wakeIfDone(): void {
    if (this.#open || this.#clients.size > 0) return;
    const waiters = this.#waiters;
    if (waiters === null) return;
    this.#waiters = null;
    for (const waiter of waiters) if (!waiter.done()) waiter.setResult(undefined);
  }

  /**
   * @internal Bind (once; Node binds as it listens, and connections before `startServing()` are
   * refused with a reset): the Future settles when the socket is bound, or fails with the OS error.
   */
  *_startListening(): Coroutine<void> {
    if (this.#listening) return;
    this.#listening = true;
    const server = this.#netServer;
    const listen = this.#listen;
    if (listen !== null) {
      const bound = eventFuture(this.#loop, server, 'listening');
      try {
        if (this.#unixPath !== null) removeStaleSocket(this.#unixPath);
        server.listen(listen);
        yield* bound;
      } catch (error) {
        this.#open = false;
        this.#serving = false;
        server.close();
        _untrackOpen(this.#loop, this);
        throw (listen as net.ListenOptions & { reusePort?: boolean }).reusePort === true ? reusePortRefused(error) : error;
      }
    }
    if (this.#unixPath !== null && this.#cleanupSocket) {
      try {
        this.#unixInode = statSync(this.#unixPath).ino;
      } catch {
        // An abstract socket, or removed already: nothing to clean up.
      }
    }
    // A failed accept, as libuv reports it on Windows (on Unix it reports none: see #checkResources).
    server.on('error', (error: Error) => this.#reportOutOfResources(error));
    // Listening does not keep the process alive while the loop does not run.
    server.unref();
  }

  /** The listening sockets (the `net.Server`); empty once closed. */
  get sockets(): readonly net.Server[] {
    return this.#open ? [this.#netServer] : [];
  }

  /** The address it listens on: `[host, port]`, or the Unix socket's path; null when closed. */
  address(): [host: string, port: number] | string | null {
    if (!this.#open) return null;
    const address = this.#netServer.address();
    if (address === null) return null;
    return typeof address === 'string' ? address : [address.address, address.port];
  }

  /** @internal Where it listens, as `host:port` (null: closed, or a Unix socket). */
  _listeningOn(): string | null {
    const address = this.address();
    return Array.isArray(address) ? `${address[0]}:${address[1]}` : null;
  }

  /** Stop listening; open connections stay open. Idempotent. */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#serving = false;
    this.#closeListener();
    _untrackOpen(this.#loop, this);
    const forever = this.#servingForever;
    if (forever !== null && !forever.done()) forever.cancel();
    this.#wakeIfDone();
  }

  /** Wait until the server is closed and every connection it accepted has ended. */
  *waitClosed(): Coroutine<void> {
    if (this.#waiters === null) return;
    const waiter = this.#loop.createFuture<void>();
    this.#waiters.push(waiter);
    yield* waiter;
  }

  /**
   * `await using server = ...` in async code: close the server, then settle once every
   * connection it accepted has ended (`close()` and `waitClosed()`; asyncio's `async with server`).
   */
  [Symbol.asyncDispose](): Promise<void> {
    this.close();
    if (this.#waiters === null) return Promise.resolve();
    const waiter = this.#loop.createFuture<void>();
    this.#waiters.push(waiter);
    return new Promise<void>((resolve, reject) => {
      waiter.addDoneCallback(() => (waiter.cancelled() || waiter.exception() === null ? resolve() : reject(waiter.exception())));
    });
  }

  /** Start accepting connections (servers start serving at once by default; they are bound from their creation). */
  *startServing(): Coroutine<void> {
    if (!this.#open) throw new RuntimeError(`server ${this} is closed`);
    if (this.#serving) return;
    yield* this._startListening();
    this.#serving = true;
  }

  /** Whether the server accepts connections. */
  isServing(): boolean {
    return this.#serving;
  }

  /** Accept connections until cancelled, then close the server and wait until it is closed. */
  *serveForever(): Coroutine<void> {
    if (this.#servingForever !== null) throw new RuntimeError(`server ${this} is already being awaited on serveForever()`);
    if (!this.#open) throw new RuntimeError(`server ${this} is closed`);
    yield* this.startServing();
    const forever = this.#loop.createFuture<void>();
    this.#servingForever = forever;
    try {
      yield* forever;
    } catch (error) {
      if (error instanceof CancelledError) {
        try {
          this.close();
          yield* this.waitClosed();
        } finally {
          // The cancellation goes on.
        }
      }
      throw error;
    } finally {
      this.#servingForever = null;
    }
  }

  /** Close every connection the server accepted, after their buffered data. */
  closeClients(): void {
    for (const transport of [...this.#clients]) transport.close();
  }

  /** Close every connection the server accepted at once, dropping buffered data. */
  abortClients(): void {
    for (const transport of [...this.#clients]) transport.abort();
  }

  /** Run `body(this)`, then close the server and wait until it is closed (`async with server`). */
  *run<R>(body: (server: Server) => Coroutine<R>): Coroutine<R> {
    try {
      return yield* body(this);
    } finally {
      this.close();
      yield* this.waitClosed();
    }
  }

  /** The loop it serves in. */
  getLoop(): EventLoop {
    return this.#loop;
  }

  toString(): string {
    const address = this.address();
    const where = address === null ? '' : Array.isArray(address) ? `${address[0]}:${address[1]}` : address;
    return `<Server sockets=(${where})>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/** Names the socket files moved aside while a server closes apart. */
let closingCount = 0;

/** Remove the file at `path` if it is the one with `inode` (a server given `sock` bound it, not libuv). */
function removeIfInode(path: string, inode: number): void {
  try {
    if (statSync(path).ino === inode) unlinkSync(path);
  } catch {
    // Gone already.
  }
}

/** An accepted connection that failed before its transport was made: it is gone, nobody to tell. */
function ignoreEarlyError(): void {
  // The socket closes by itself.
}

/** Remove a Unix socket file left at `path` (by a server that did not close); anything else there stays. */
function removeStaleSocket(path: string): void {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch {
    // Nothing there.
  }
}

/**
 * Listen on `endpoint` and drive a `protocolFactory()` per connection (create_server,
 * create_unix_server); returns the Server, listening unless `startServing` is false.
 *
 * @internal
 */
export function* _createServer(
  loop: EventLoop,
  protocolFactory: () => Protocol,
  endpoint: ServerEndpoint,
  options: CreateServerOptions,
  what: string,
): Coroutine<Server> {
  checkFactory(protocolFactory, what);
  if (options === null || typeof options !== 'object') throw new TypeError(`${what} options must be an object, got ${repr(options)}`);
  if (typeof options.ssl === 'boolean') throw new TypeError("ssl argument must be node:tls server options (asyncio's SSLContext) or undefined");
  if (options.sslHandshakeTimeout !== undefined && options.ssl === undefined) throw new RangeError('ssl_handshake_timeout is only meaningful with ssl');
  // Node drops a client whose handshake outlasts it (tls.Server's handshakeTimeout, in ms).
  const handshakeTimeout = options.ssl === undefined ? {} : { handshakeTimeout: _handshakeTimeout(options.sslHandshakeTimeout) * 1000 };
  const sock = options.sock ?? null;
  const unix = 'path' in endpoint;
  if (unix && options.keepAlive !== undefined) throw new TypeError(`${what} got an unexpected keyword argument 'keepAlive'`);
  if (!unix && options.cleanupSocket !== undefined) throw new TypeError(`${what} got an unexpected keyword argument 'cleanupSocket'`);
  let listen: net.ListenOptions | null = {};
  let unixPath: string | null = null;
  if (!unix) {
    const port = endpoint.port ?? null;
    if (endpoint.host !== null || port !== null) {
      if (sock !== null) throw new RangeError('host/port and sock can not be specified at the same time');
      if (endpoint.host !== null && (typeof endpoint.host !== 'string' || endpoint.host === '')) {
        throw new TypeError(`${what} host must be a non-empty string or null (every interface), got ${repr(endpoint.host)}`);
      }
      listen.port = checkPort(port, what);
      if (endpoint.host !== null) listen.host = endpoint.host;
    } else if (sock === null) throw new RangeError('Neither host/port nor sock were specified');
  } else if (endpoint.path !== null) {
    if (sock !== null) throw new RangeError('path and sock can not be specified at the same time');
    if (typeof endpoint.path !== 'string' || endpoint.path === '') throw new TypeError(`${what} path must be a non-empty string, got ${repr(endpoint.path)}`);
    listen.path = endpoint.path;
    unixPath = endpoint.path;
  } else if (sock === null) throw new RangeError('path was not specified, and no sock specified');
  if (sock !== null) {
    unixPath = checkServerSock(sock, unix);
    listen = null;
  }
  if (options.backlog !== undefined) {
    if (!Number.isInteger(options.backlog) || options.backlog < 0) throw new RangeError(`${what} backlog must be a non-negative integer, got ${repr(options.backlog)}`);
    if (listen !== null) listen.backlog = options.backlog;
  }
  if (options.reusePort !== undefined) {
    // asyncio's create_unix_server has no reuse_port; Node would drop it without a word.
    if (unix) throw new TypeError(`${what} got an unexpected keyword argument 'reusePort'`);
    if (typeof options.reusePort !== 'boolean') throw new TypeError(`${what} reusePort must be a boolean, got ${repr(options.reusePort)}`);
  }
  if (options.reusePort === true) {
    // The option is set as a socket binds: a sock given is bound already.
    if (listen === null) throw new RangeError('reusePort and sock can not be specified at the same time: sock is listening already (give reusePort to its listen())');
    const missing = reusePortMissing();
    if (missing !== null) throw missing;
    (listen as net.ListenOptions & { reusePort?: boolean }).reusePort = true;
  }
  const secure = options.ssl !== undefined;
  let netServer: net.Server;
  let tlsFront: tls.Server | null = null;
  if (sock !== null) {
    netServer = sock;
    // Node reads these as it accepts: accepted sockets wait paused (plain) and keep a half-close.
    (sock as net.Server & { allowHalfOpen: boolean; pauseOnConnect: boolean }).allowHalfOpen = true;
    (sock as net.Server & { pauseOnConnect: boolean }).pauseOnConnect = !secure;
    if (secure) tlsFront = loadTls().createServer({ ...options.ssl, ...handshakeTimeout, allowHalfOpen: true });
  } else {
    // Accepted plain sockets wait paused: their handle moves to a socket read through onread (adoptWithOnread).
    netServer = secure ? loadTls().createServer({ ...options.ssl, ...handshakeTimeout, allowHalfOpen: true }) : net.createServer({ allowHalfOpen: true, pauseOnConnect: true });
  }
  const server = new Server(loop, protocolFactory, netServer, listen, unixPath, secure, {
    keepAlive: options.keepAlive === true,
    cleanupSocket: options.cleanupSocket !== false,
    tlsFront,
  });
  // asyncio binds at once and accepts from start_serving(): the address is known from here on.
  yield* server._startListening();
  if (options.startServing !== false) yield* server.startServing();
  return server;
}

/** A server's `sock` checked as asyncio checks it; the Unix socket's path, or null for TCP. */
function checkServerSock(sock: unknown, unix: boolean): string | null {
  if (!(sock instanceof net.Server)) throw new RangeError(`A Stream Socket was expected, got ${repr(sock)}`);
  // A tls.Server is TLS already, as an SSLSocket is: TLS comes from the ssl option.
  if (typeof (sock as Partial<tls.Server>).setSecureContext === 'function') throw new TypeError('Socket cannot be of type SSLSocket');
  if (!sock.listening) throw new RangeError(`sock must be a listening net.Server (Node binds a server as it listens), got ${repr(sock)}`);
  const address = sock.address();
  if (unix && typeof address !== 'string') throw new RangeError(`A UNIX Domain Stream Socket was expected, got ${repr(sock)}`);
  return typeof address === 'string' ? address : null;
}

// ───────────────────────────── datagrams, names ─────────────────────────────

/**
 * Open a UDP endpoint bound to `localAddr` and/or connected to `remoteAddr`
 * (create_datagram_endpoint); returns once the protocol's `connectionMade` ran.
 *
 * @internal
 */
export function* _createDatagramEndpoint<P extends DatagramProtocol>(
  loop: EventLoop,
  protocolFactory: () => P,
  options: DatagramEndpointOptions,
): Coroutine<[DatagramTransport, P]> {
  checkFactory(protocolFactory, 'createDatagramEndpoint()');
  if (options === null || typeof options !== 'object') throw new TypeError(`createDatagramEndpoint() options must be an object, got ${repr(options)}`);
  const { localAddr, remoteAddr } = options;
  if (options.sock !== undefined) return yield* adoptDatagramSocket(loop, protocolFactory, options.sock, options);
  if (localAddr === undefined && remoteAddr === undefined) throw new RangeError('unexpected address family: createDatagramEndpoint() needs localAddr or remoteAddr');
  for (const [name, addr] of [['localAddr', localAddr], ['remoteAddr', remoteAddr]] as const) {
    if (addr === undefined) continue;
    if (!Array.isArray(addr) || addr.length !== 2 || typeof addr[0] !== 'string') {
      throw new TypeError(`createDatagramEndpoint() ${name} must be [host, port], got ${repr(addr)}`);
    }
    checkPort(addr[1], `createDatagramEndpoint() ${name}`);
  }
  // The family of the first address given decides (a host name is resolved first).
  const first = (localAddr ?? remoteAddr) as [string, number];
  let family = net.isIP(first[0]);
  if (family === 0) {
    const [info] = yield* _getaddrinfo(loop, first[0], first[1], {});
    family = info === undefined ? 4 : info[0];
  }
  const socket = dgram.createSocket(family === 6 ? 'udp6' : 'udp4');
  try {
    const bound = eventFuture(loop, socket, 'listening');
    if (localAddr !== undefined) socket.bind(localAddr[1], localAddr[0]);
    else socket.bind(0);
    yield* bound;
    if (remoteAddr !== undefined) {
      const connected = eventFuture(loop, socket, 'connect');
      socket.connect(remoteAddr[1], remoteAddr[0]);
      yield* connected;
    }
  } catch (error) {
    socket.close();
    throw error;
  }
  let protocol: P;
  try {
    protocol = protocolFactory();
  } catch (error) {
    socket.close();
    throw error;
  }
  const made = loop.createFuture<undefined>();
  socket.unref();
  const transport = new DatagramTransport(loop, socket, protocol, remoteAddr === undefined ? null : [remoteAddr[0], remoteAddr[1]], made);
  yield* made;
  return [transport, protocol];
}

/** getnameinfo flag (socket.NI_NUMERICHOST): the address as it is, not its name. */
export const NI_NUMERICHOST = 1;
/** getnameinfo flag (socket.NI_NUMERICSERV): the port as a number, not its service name. */
export const NI_NUMERICSERV = 2;
/** getnameinfo flag (socket.NI_NOFQDN): the name up to its first dot. */
export const NI_NOFQDN = 4;
/** getnameinfo flag (socket.NI_NAMEREQD): an address without a name is an error. */
export const NI_NAMEREQD = 8;
/** getnameinfo flag (socket.NI_DGRAM): accepted, without effect (Node names TCP services). */
export const NI_DGRAM = 16;

/** A Node DNS error as `dns` makes them (`getnameinfo ENOTFOUND 192.0.2.1`). */
function nameError(host: string): Error {
  return Object.assign(new Error(`getnameinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', syscall: 'getnameinfo', hostname: host });
}

/** `dns.lookupService` as a Future of `loop`: [hostname, service], or its error. */
function* lookupService(loop: EventLoop, host: string, port: number): Coroutine<[string, string]> {
  const found = loop.createFuture<[string, string]>();
  loadDns().lookupService(host, port, (error, hostname, service) => {
    if (found.done()) return;
    if (error !== null) found._setExceptionUnchecked(error);
    else found._setResultUnchecked([hostname, service]);
  });
  return yield* found;
}

/** @internal loop.getnameinfo: see EventLoop.getnameinfo. */
export function* _getnameinfo(loop: EventLoop, sockaddr: unknown, flags: number): Coroutine<[string, string]> {
  if (!Array.isArray(sockaddr)) throw new TypeError(`getnameinfo() argument 1 must be a [host, port] array, got ${repr(sockaddr)}`);
  if (sockaddr.length !== 2 && sockaddr.length !== 4) throw new TypeError('getnameinfo(): illegal sockaddr argument');
  const [host, port] = sockaddr as unknown[];
  if (typeof host !== 'string') throw new TypeError(`getnameinfo() host must be a string, got ${repr(host)}`);
  if (typeof port !== 'number' || !Number.isInteger(port)) throw new TypeError(`getnameinfo() port must be an integer, got ${repr(port)}`);
  if (port < 0 || port > 65535) throw new RangeError('getnameinfo(): port must be 0-65535.');
  if (!Number.isInteger(flags)) throw new TypeError(`getnameinfo() flags must be an integer, got ${repr(flags)}`);
  // As getnameinfo(3) behind Python's: the address must be numeric, it is never resolved forward.
  if (net.isIP(host) === 0) throw nameError(host);
  const numericHost = (flags & NI_NUMERICHOST) !== 0;
  const numericService = (flags & NI_NUMERICSERV) !== 0;
  if (numericHost && numericService) return [host, String(port)];
  let name = host;
  let service: string | null = null;
  if (!numericHost) {
    try {
      [name, service] = yield* lookupService(loop, host, port);
    } catch (error) {
      // Node asks with NI_NAMEREQD: an address without a name (or no answer at all) fails. Without
      // the flag getnameinfo(3) answers with the address instead.
      if ((flags & NI_NAMEREQD) !== 0) throw error;
    }
    if ((flags & NI_NOFQDN) !== 0 && net.isIP(name) === 0) name = name.split('.')[0] as string;
  }
  if (numericService) return [name, String(port)];
  if (service === null) {
    // The service's name does not depend on the address: ask for it with one that has a name.
    try {
      [, service] = yield* lookupService(loop, net.isIP(host) === 6 ? '::1' : '127.0.0.1', port);
    } catch {
      service = String(port);
    }
  }
  return [name, service];
}

/** createDatagramEndpoint with `sock`: checked as asyncio checks it, bound if it is not yet, then driven. */
function* adoptDatagramSocket<P extends DatagramProtocol>(
  loop: EventLoop,
  protocolFactory: () => P,
  sock: unknown,
  options: DatagramEndpointOptions,
): Coroutine<[DatagramTransport, P]> {
  if (!(sock instanceof dgram.Socket)) throw new RangeError(`A datagram socket was expected, got ${repr(sock)}`);
  const problems = (['localAddr', 'remoteAddr'] as const).filter((name) => options[name] !== undefined).map((name) => `${name}=${repr(options[name])}`);
  if (problems.length > 0) throw new RangeError(`socket modifier keyword arguments can not be used when sock is specified. (${problems.join(', ')})`);
  let remote: [string, number] | null = null;
  try {
    sock.address();
  } catch {
    // Not bound yet: bound to any port, as a first sendto() binds it.
    const bound = eventFuture(loop, sock, 'listening');
    sock.bind(0);
    yield* bound;
  }
  try {
    const peer = sock.remoteAddress();
    remote = [peer.address, peer.port];
  } catch {
    // Not connected: every sendto() names its address.
  }
  const protocol = protocolFactory();
  const made = loop.createFuture<undefined>();
  sock.unref();
  const transport = new DatagramTransport(loop, sock, protocol, remote, made);
  yield* made;
  return [transport, protocol];
}

/**
 * Resolve `host` and `port` without blocking the loop (getaddrinfo): one entry per address and
 * socket type (stream, datagram, raw), as getaddrinfo lists them without hints.
 *
 * @internal
 */
export function* _getaddrinfo(loop: EventLoop, host: string | null, port: number | string | null, options: GetaddrinfoOptions): Coroutine<AddrInfo[]> {
  const family = options.family ?? 0;
  if (family !== 0 && family !== 4 && family !== 6) throw new RangeError(`getaddrinfo() family must be 0, 4 or 6, got ${repr(family)}`);
  let portNumber = 0;
  if (typeof port === 'number') portNumber = checkPort(port, 'getaddrinfo()');
  else if (typeof port === 'string') {
    if (!/^\d+$/.test(port)) throw new RangeError(`getaddrinfo() port must be a number or a numeric string, got ${repr(port)}`);
    portNumber = checkPort(Number(port), 'getaddrinfo()');
  } else if (port !== null) throw new TypeError(`getaddrinfo() port must be a number, a string or null, got ${repr(port)}`);
  const name = host ?? 'localhost';
  if (typeof name !== 'string') throw new TypeError(`getaddrinfo() host must be a string or null, got ${repr(host)}`);
  const resolved = loop.createFuture<Array<{ address: string; family: number }>>();
  loadDns().lookup(name, { all: true, family }, (error, addresses) => {
    if (resolved.done()) return;
    if (error !== null) resolved._setExceptionUnchecked(error);
    else resolved._setResultUnchecked(addresses);
  });
  const addresses = yield* resolved;
  const infos: AddrInfo[] = [];
  for (const { address, family: found } of addresses) {
    for (const [type, proto] of SOCKET_TYPES) infos.push([found === 6 ? 6 : 4, type, proto, '', [address, portNumber]]);
  }
  return infos;
}
