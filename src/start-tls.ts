/**
 * Upgrading a connection to TLS in place (asyncio's loop.start_tls and sslproto's handshake
 * timeout) on Node's `tls`: the transport's socket is handed to a TLSSocket, and a new Transport
 * drives the same protocol from it once the handshake is done. asyncio's `connect_accepted_socket`
 * lives here too: a socket accepted elsewhere becomes a transport, with TLS when asked.
 */
import type * as net from 'node:net';
import { createRequire } from 'node:module';
import type * as tls from 'node:tls';
import type { EventLoop } from './base-events.js';
import type { Coroutine } from './coroutines.js';
import type { Future } from './futures.js';
import { CancelledError, RuntimeError } from './exceptions.js';
import { repr } from './internal/format.js';
import { eventFuture } from './internal/node-events.js';
import type { Protocol } from './protocols.js';
import { Transport, type HandedOver } from './transports.js';

const require = createRequire(import.meta.url);
let tlsModule: typeof tls | null = null;

/** node:tls, loaded on first use (most programs never upgrade a connection). */
function loadTls(): typeof tls {
  return (tlsModule ??= require('node:tls') as typeof tls);
}

/** asyncio's SSL_HANDSHAKE_TIMEOUT: how long a handshake may take by default, in seconds. */
const SSL_HANDSHAKE_TIMEOUT = 60;

/** TLS settings: `node:tls` options (`ca`, `key`, `cert`, `rejectUnauthorized`, ...), asyncio's SSLContext. */
export type SslContext = tls.ConnectionOptions & tls.TlsOptions;

/** Options of `loop.startTls`. */
export interface StartTlsOptions {
  /** This side is the TLS server (default false: the client). */
  serverSide?: boolean;
  /** The name to check the server's certificate against, and to send as SNI (client side). */
  serverHostname?: string;
  /** Seconds the handshake may take before the connection is aborted (default 60). */
  sslHandshakeTimeout?: number;
}

/** Options of `loop.connectAcceptedSocket`. */
export interface ConnectAcceptedSocketOptions {
  /** TLS as the server side: `node:tls` server options (`key`, `cert`, ...). */
  ssl?: SslContext;
  /** Seconds the TLS handshake may take (default 60); only with `ssl`. */
  sslHandshakeTimeout?: number;
}

/** asyncio's ConnectionAbortedError, with Node's code for an aborted connection. */
function connectionAborted(message: string): Error {
  const error = new Error(message) as Error & { code: string };
  error.name = 'ConnectionAbortedError';
  error.code = 'ECONNABORTED';
  return error;
}

/** asyncio's ConnectionResetError('Connection lost'), with Node's code for a reset connection. */
function connectionReset(): Error {
  const error = new Error('Connection lost') as Error & { code: string };
  error.name = 'ConnectionResetError';
  error.code = 'ECONNRESET';
  return error;
}

/** @internal Fail `handshake` (a connect's or upgrade's Future) with asyncio's error for a handshake that took too long. */
export function _abortHandshake(handshake: Future<void>, timeout: number): void {
  if (!handshake.done()) handshake._setExceptionUnchecked(connectionAborted(`SSL handshake is taking longer than ${timeout} seconds: aborting the connection`));
}

/** @internal The handshake timeout in seconds, checked as asyncio's SSLProtocol checks it (default 60). */
export function _handshakeTimeout(value: unknown): number {
  if (value === undefined || value === null) return SSL_HANDSHAKE_TIMEOUT;
  if (typeof value !== 'number' || Number.isNaN(value)) throw new TypeError(`ssl_handshake_timeout must be a number, got ${repr(value)}`);
  if (value <= 0) throw new RangeError(`ssl_handshake_timeout should be a positive number, got ${value}`);
  return value;
}

/**
 * Run the TLS handshake over `socket` and make the transport that drives `protocol` from it;
 * on failure (the peer's certificate, a reset, the timeout, a cancellation) the socket is
 * destroyed, `protocol.connectionLost` hears the error once (null for a cancellation), and the
 * error is raised.
 */
function* handshake(
  loop: EventLoop,
  protocol: Protocol,
  handed: HandedOver,
  context: SslContext,
  serverSide: boolean,
  serverHostname: string | undefined,
  timeout: number,
  made: Future<undefined> | null,
): Coroutine<Transport> {
  const tlsApi = loadTls();
  const { socket } = handed;
  let secure: tls.TLSSocket;
  try {
    secure = serverSide
      ? new tlsApi.TLSSocket(socket, {
          ...context,
          isServer: true,
          secureContext: tlsApi.createSecureContext(context),
        })
      : tlsApi.connect({ ...context, socket, ...(serverHostname !== undefined ? { servername: serverHostname } : {}) });
  } catch (error) {
    socket.destroy();
    lose(loop, protocol, error);
    throw error;
  }
  const done = eventFuture(loop, secure, serverSide ? 'secure' : 'secureConnect');
  // A peer that goes away mid-handshake (one that refused our certificate) may say nothing else: EOF, then nothing.
  const onClose = (): void => {
    if (!done.done()) done._setExceptionUnchecked(connectionReset());
  };
  secure.once('end', onClose);
  secure.once('close', onClose);
  done.addDoneCallback(() => {
    secure.off('end', onClose);
    secure.off('close', onClose);
  });
  const timer = loop.callLater(timeout, () => _abortHandshake(done, timeout));
  try {
    yield* done;
    // A server that asked for the client's certificate and must reject a bad one says so here.
    if (serverSide && context.requestCert === true && context.rejectUnauthorized !== false && !secure.authorized) {
      throw secure.authorizationError ?? new RuntimeError('the peer certificate was not authorized');
    }
  } catch (error) {
    secure.destroy();
    socket.destroy();
    lose(loop, protocol, error instanceof CancelledError ? null : error);
    throw error;
  } finally {
    timer.cancel();
  }
  const transport = new Transport(loop, protocol, {
    readable: secure,
    writable: secure,
    owner: handed.owner,
    extra: { ...handed.extra, socket: secure, sslcontext: context },
    made,
    // asyncio's start_tls does not call connection_made again; connect_accepted_socket does.
    callConnectionMade: made !== null,
  });
  return transport;
}

/** Tell `protocol` once, in a loop iteration as asyncio's SSLProtocol does, that the connection is lost. */
function lose(loop: EventLoop, protocol: Protocol, error: unknown): void {
  const exc = error === null ? null : error instanceof Error ? error : new RuntimeError(String(error));
  loop.callSoon(() => protocol.connectionLost(exc));
}

/**
 * Upgrade `transport` to TLS: the handshake runs over its socket, and the new transport it
 * returns drives `protocol` from then on (start_tls); the old one must not be used any more.
 *
 * @internal
 */
export function* _startTls(
  loop: EventLoop,
  transport: unknown,
  protocol: Protocol,
  sslContext: unknown,
  options: StartTlsOptions,
): Coroutine<Transport> {
  if (sslContext === null || typeof sslContext !== 'object') {
    throw new TypeError(`sslcontext is expected to be an object of node:tls options, got ${repr(sslContext)}`);
  }
  if (!(transport instanceof Transport) || !transport._canHandOver()) throw new TypeError(`transport ${repr(transport)} is not supported by startTls()`);
  if (options === null || typeof options !== 'object') throw new TypeError(`startTls() options must be an object, got ${repr(options)}`);
  const timeout = _handshakeTimeout(options.sslHandshakeTimeout);
  const serverSide = options.serverSide === true;
  const handed = transport._handOver() as HandedOver;
  const owner = handed.owner;
  let upgraded: Transport;
  try {
    upgraded = yield* handshake(loop, protocol, handed, sslContext as SslContext, serverSide, options.serverHostname, timeout, null);
  } catch (error) {
    // The connection ended: the server that counted it stops waiting for it, after connectionLost.
    if (owner !== null) loop.callSoon(() => owner._detach(transport));
    throw error;
  }
  owner?._replace?.(transport, upgraded);
  return upgraded;
}

/**
 * Drive `protocolFactory()` from `socket`, a connection accepted elsewhere (connect_accepted_socket);
 * with `ssl`, this side is the TLS server and the handshake runs first.
 *
 * @internal
 */
export function* _connectAcceptedSocket<P extends Protocol>(
  loop: EventLoop,
  protocolFactory: () => P,
  socket: unknown,
  options: ConnectAcceptedSocketOptions,
): Coroutine<[Transport, P]> {
  if (typeof protocolFactory !== 'function') throw new TypeError(`connectAcceptedSocket() needs a protocol factory (a function returning a Protocol), got ${repr(protocolFactory)}`);
  if (options === null || typeof options !== 'object') throw new TypeError(`connectAcceptedSocket() options must be an object, got ${repr(options)}`);
  if (!isStreamSocket(socket)) throw new RangeError(`A Stream Socket was expected, got ${repr(socket)}`);
  if ((socket as { encrypted?: unknown }).encrypted === true) throw new TypeError('Socket cannot be of type SSLSocket');
  if (options.ssl === undefined && options.sslHandshakeTimeout !== undefined) throw new RangeError('ssl_handshake_timeout is only meaningful with ssl');
  if (socket.destroyed) throw new RuntimeError(`connectAcceptedSocket() needs an open socket, got ${repr(socket)}`);
  // The peer's half-close is the protocol's to answer (eofReceived), as with the loop's own sockets.
  socket.allowHalfOpen = true;
  const timeout = _handshakeTimeout(options.sslHandshakeTimeout);
  const protocol = protocolFactory();
  let transport: Transport;
  const made = loop.createFuture<undefined>();
  if (options.ssl === undefined) {
    if (typeof socket.remotePort === 'number') socket.setNoDelay(true);
    transport = new Transport(loop, protocol, { readable: socket, writable: socket, made });
  } else {
    const extra: Record<string, unknown> = {};
    if (socket.remoteAddress !== undefined) extra.peername = [socket.remoteAddress, socket.remotePort];
    if (socket.localAddress !== undefined) extra.sockname = [socket.localAddress, socket.localPort];
    transport = yield* handshake(loop, protocol, { socket, owner: null, extra }, options.ssl, true, undefined, timeout, made);
  }
  try {
    yield* made;
  } catch (error) {
    transport.close();
    throw error;
  }
  return [transport, protocol];
}

/** Whether `value` is a Node stream socket (net.Socket, not a datagram socket). */
function isStreamSocket(value: unknown): value is net.Socket {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as net.Socket).setNoDelay === 'function' &&
    typeof (value as net.Socket).write === 'function' &&
    typeof (value as net.Socket).on === 'function'
  );
}
