/**
 * Transports (asyncio.transports and selector_events, on Node's streams): a Transport drives a
 * Protocol from a Node socket (`net`, `tls`) or pipe. Node emits its events outside the loop's
 * iterations; the transport queues what arrives and delivers it to the protocol in an iteration
 * (data in order, then EOF, then the connection's end), never re-entrantly, as asyncio's
 * selector transports call their protocols from the loop.
 *
 * Flow control both ways, as asyncio's: a paused transport stops reading from Node (which then
 * stops reading from the kernel); writes go to Node's buffer, whose size past the high-water mark
 * calls the protocol's `pauseWriting()`, and `resumeWriting()` follows once it drained below the
 * low-water mark.
 *
 * Plain TCP and Unix sockets the loop opens or accepts are read through Node's `onread` rather
 * than as streams (internal/socket-reads.ts): fewer allocations, and reads of up to 256 KiB.
 * TLS sockets and pipes are read as streams. A BufferedProtocol gets its bytes copied into the
 * memory its `getBuffer()` returns, straight from the thread's read buffer when the loop runs at
 * once.
 */
import type { Socket as DgramSocket } from 'node:dgram';
import type { Socket as NetSocket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { EventLoop } from './base-events.js';
import { RuntimeError, _isEscaping } from './exceptions.js';
import { Deque } from './internal/deque.js';
import { INSPECT, typeName } from './internal/format.js';
import { cipherInfo, peerCertInfo } from './internal/tls-info.js';
import { copyOut, readBytes, type SocketReads } from './internal/socket-reads.js';
import { logger } from './log.js';
import { BufferedProtocol, _feedBuffered, type DatagramProtocol, type Protocol } from './protocols.js';

/** A socket address: `[host, port]` for TCP and UDP (asyncio's `(host, port)` tuple), a path for a Unix socket. */
export type SocketAddress = [host: string, port: number] | string;

/** asyncio's default high-water mark of a transport's write buffer. */
export const _DEFAULT_HIGH = 64 * 1024;
const DEFAULT_HIGH = _DEFAULT_HIGH;

/**
 * @internal A write buffer's [high, low] marks from set_write_buffer_limits' arguments: high
 * defaults to 64 KiB (or 4 × low), low to a quarter of high; asyncio's ValueError otherwise.
 */
export function _writeBufferLimits(high: number | null | undefined, low: number | null | undefined): [high: number, low: number] {
  let h = high ?? null;
  let l = low ?? null;
  if (h === null) h = l === null ? DEFAULT_HIGH : 4 * l;
  if (l === null) l = Math.floor(h / 4);
  if (!(h >= l && l >= 0)) throw new RangeError(`high (${h}) must be >= low (${l}) must be >= 0`);
  return [h, l];
}
/** How many writes to a lost connection pass silently before each one is logged (asyncio's LOG_THRESHOLD_FOR_CONNLOST_WRITES). */
const LOG_THRESHOLD_FOR_CONNLOST_WRITES = 5;
const EMPTY = Buffer.alloc(0);

/** What is open on a loop and must not outlive it: closed when the loop closes. */
export interface LoopResource {
  /** The loop closed: let the underlying Node handles go at once (no callback can run any more). */
  _closeAtLoopClose(): void;
  /** True for what only waits for others to come (a listening server): no I/O of its own is under way. */
  readonly _listens?: boolean;
  /** A listening TCP server's `host:port` (null: closed, or not TCP). */
  _listeningOn?(): string | null;
}

const openOnLoop = new WeakMap<EventLoop, Set<LoopResource>>();

/**
 * Remember `resource` as open on `loop`: when the loop closes, whatever is still open is closed,
 * so that no socket, server or pipe keeps the process alive after its loop is gone.
 *
 * @internal
 */
export function _trackOpen(loop: EventLoop, resource: LoopResource): void {
  let open = openOnLoop.get(loop);
  if (open === undefined) {
    const set = new Set<LoopResource>();
    open = set;
    openOnLoop.set(loop, set);
    loop._addCloseHook(() => {
      for (const item of [...set]) item._closeAtLoopClose();
      set.clear();
    });
  }
  open.add(resource);
}

/**
 * @internal How many of the loop's open resources may have I/O under way (connections, pipes,
 * subprocesses; not listening servers): a simulation's clock waits a moment for them before it jumps.
 * Also the TCP sockets among them, and where the loop's TCP servers listen (`host:port`).
 */
export function _openIo(loop: EventLoop): { count: number; sockets: ByteCounts[]; listening: string[] } {
  let count = 0;
  const sockets: ByteCounts[] = [];
  const listening: string[] = [];
  const open = openOnLoop.get(loop);
  if (open !== undefined) {
    for (const resource of open) {
      if (resource._listens === true) {
        const at = resource._listeningOn?.() ?? null;
        if (at !== null) listening.push(at);
        continue;
      }
      count++;
      const counts = resource instanceof Transport ? resource._byteCounts() : null;
      if (counts !== null) sockets.push(counts);
    }
  }
  return { count, sockets, listening };
}

/** @internal A TCP socket's endpoints and byte counts (see Transport._byteCounts). */
export interface ByteCounts {
  readonly local: string;
  readonly remote: string;
  readonly written: number;
  readonly read: number;
  readonly reading: boolean;
}

/** @internal `resource` closed by itself. */
export function _untrackOpen(loop: EventLoop, resource: LoopResource): void {
  openOnLoop.get(loop)?.delete(resource);
}

/**
 * Tell the loop's exception handler that a protocol callback failed; returns the error, made an
 * Error. KeyboardInterrupt and SystemExit are thrown on instead: they are not the protocol's
 * failure, and leave the loop as asyncio's transports let them.
 */
function reportProtocolError(loop: EventLoop, message: string, error: unknown, transport: object, protocol: object): Error {
  if (_isEscaping(error)) throw error;
  const exception = error instanceof Error ? error : new RuntimeError(String(error));
  loop.callExceptionHandler({ message, exception, transport, protocol });
  return exception;
}

/** Whether `stream` is a TLS socket (checked without loading node:tls: TLSSockets say `encrypted`). */
function isTlsSocket(stream: unknown): stream is TLSSocket {
  return (stream as { encrypted?: unknown } | null)?.encrypted === true;
}

/** Who keeps count of a transport: the Server that accepted its connection. */
export interface TransportOwner {
  /** The transport's connection ended. */
  _detach(transport: Transport): void;
  /** The connection goes on in `next` (startTls): count it instead of `previous`. */
  _replace?(previous: Transport, next: Transport): void;
}

/** What a Transport is made from: its streams and what `getExtraInfo` knows. */
export interface TransportParts {
  /** Where data comes from, or null for a write-only pipe. */
  readable: Readable | null;
  /** Where data goes, or null for a read-only pipe. */
  writable: Writable | null;
  /** `getExtraInfo` keys known up front (`pipe`, `subprocess`...). */
  extra?: Record<string, unknown>;
  /** The Server that accepted the connection, which counts it. */
  owner?: TransportOwner | null;
  /** A Future of the loop to set once `connectionMade` ran (what `createConnection` waits for). */
  made?: { setResult(value: undefined): void; done(): boolean } | null;
  /** The socket (`readable`) is read through `onread` with these options, not as a stream. */
  reads?: SocketReads | null;
  /** Whether to call the protocol's `connectionMade` (default true; false after startTls, as asyncio's). */
  callConnectionMade?: boolean;
}

/** What a Transport hands over to the transport that replaces it on the same socket (startTls). */
export interface HandedOver {
  /** The socket, no longer read or watched by the old transport. */
  socket: NetSocket;
  /** The Server that counted the old transport, to count the new one. */
  owner: TransportOwner | null;
  /** The old transport's `getExtraInfo` keys. */
  extra: Record<string, unknown>;
}

/**
 * A stream connection seen from a Protocol (asyncio.Transport): a socket or a pipe. Made by
 * `loop.createConnection`, `loop.createServer`, the stream functions and subprocesses.
 *
 * @example
 * ```ts
 * const [transport, protocol] = yield* loop.createConnection(() => new Client(), '127.0.0.1', port);
 * transport.write(new TextEncoder().encode('hello\n'));
 * transport.close();
 * ```
 */
export class Transport implements LoopResource {
  readonly #loop: EventLoop;
  #protocol: Protocol;
  readonly #readable: Readable | null;
  readonly #writable: Writable | null;
  readonly #extra: Record<string, unknown>;
  #owner: TransportOwner | null;
  /** Chunks that arrived and were not delivered yet, in order. */
  readonly #inbox = new Deque<Buffer>(4);
  /** Whether the protocol is a BufferedProtocol: it receives through `getBuffer`/`bufferUpdated`. */
  #buffered: boolean;
  /**
   * The length of a read still in the thread's read buffer (0: none), while a loop that runs at
   * once delivers it to a BufferedProtocol straight from there; whatever is not delivered when
   * the read's callback returns is copied into the inbox.
   */
  #inPlace = 0;
  /** Whether a delivery is scheduled in the loop. */
  #scheduled = false;
  /** Whether `connectionMade` ran: nothing is delivered before it. */
  #made = false;
  #eofReceived = false;
  #eofDelivered = false;
  /** Whether the Node streams are gone (their 'close' events came). */
  #readClosed: boolean;
  #writeClosed: boolean;
  /** The error the connection ended with. */
  #error: Error | null = null;
  #closing = false;
  #lost = false;
  #paused = false;
  #eofWritten = false;
  #connLostWrites = 0;
  #high = DEFAULT_HIGH;
  #low = DEFAULT_HIGH / 4;
  #protocolPaused = false;
  #watchingFlush = false;
  readonly #isTls: boolean;
  readonly #reads: SocketReads | null;

  /** @internal Made by the loop's connection functions: wrap `parts` and drive `protocol` from them. */
  constructor(loop: EventLoop, protocol: Protocol, parts: TransportParts) {
    this.#loop = loop;
    this.#protocol = protocol;
    this.#buffered = protocol instanceof BufferedProtocol;
    this.#readable = parts.readable;
    this.#writable = parts.writable;
    this.#extra = parts.extra ?? {};
    this.#owner = parts.owner ?? null;
    this.#readClosed = parts.readable === null || parts.readable.closed;
    this.#writeClosed = parts.writable === null || parts.writable.closed;
    this.#isTls = isTlsSocket(parts.readable);
    this.#reads = parts.reads ?? null;
    if (parts.readable === (parts.writable as unknown) && typeof (parts.readable as NetSocket | null)?.address === 'function') {
      // What asyncio learns when the connection is made, kept: a closed socket no longer knows it.
      const socket = parts.readable as NetSocket;
      const extra = this.#extra;
      if (socket.remoteAddress !== undefined) extra.peername ??= [socket.remoteAddress, socket.remotePort];
      else if (extra.path !== undefined) extra.peername ??= extra.path;
      if (socket.localAddress !== undefined) extra.sockname ??= [socket.localAddress, socket.localPort];
      else if (extra.path !== undefined) extra.sockname ??= extra.path;
      extra.socket ??= socket;
      if (isTlsSocket(socket)) {
        // asyncio's shapes; Node's own objects stay reachable under names of their own.
        extra.peercert ??= peerCertInfo(socket);
        extra.cipher ??= cipherInfo(socket);
        extra.nodePeerCertificate ??= socket.getPeerCertificate(true);
        extra.nodeCipher ??= socket.getCipher();
        extra.ssl_object ??= socket;
        extra.compression ??= null;
      }
    }
    const made = parts.made ?? null;
    const readable = parts.readable;
    const writable = parts.writable;
    if (readable !== null) {
      if (this.#reads !== null) this.#reads.attach(this, readable as NetSocket);
      else {
        readable.on('data', this.#onData);
        // As asyncio reads any socket or pipe it is given: one paused (a pauseOnConnect server's
        // accept, or by hand) is not started by a 'data' listener, only by resume().
        if (readable.readableFlowing === false) readable.resume();
      }
      readable.on('end', this.#onEnd);
      readable.on('error', this.#onError);
      readable.on('close', this.#onReadClose);
    }
    if (writable !== null && writable !== (readable as unknown)) {
      writable.on('error', this.#onError);
      writable.on('close', this.#onWriteClose);
    }
    if (parts.callConnectionMade === false) {
      this.#made = true;
      if (made !== null && !made.done()) made.setResult(undefined);
    } else {
      loop.callSoon(() => {
        if (this.#lost) return;
        try {
          this.#protocol.connectionMade(this);
        } finally {
          this.#made = true;
          if (made !== null && !made.done()) made.setResult(undefined);
          this.#deliverSoon();
        }
      });
    }
    _trackOpen(loop, this);
  }

  /**
   * @internal Let the socket go on without this transport (startTls): nothing more is read or
   * delivered, the protocol hears nothing; null when it is not a socket, or closing.
   */
  _handOver(): HandedOver | null {
    const socket = this.#readable as NetSocket | null;
    if (this.#closing || this.#lost || socket === null || socket !== (this.#writable as unknown) || typeof socket.setNoDelay !== 'function') return null;
    this.#lost = true;
    this.#closing = true;
    this.#inbox.clear();
    this.#reads?.detach();
    socket.off('data', this.#onData);
    socket.off('end', this.#onEnd);
    socket.off('error', this.#onError);
    socket.off('close', this.#onReadClose);
    _untrackOpen(this.#loop, this);
    const owner = this.#owner;
    this.#owner = null;
    return { socket, owner, extra: { ...this.#extra } };
  }

  /** @internal Whether the protocol was told `pauseWriting()` and not yet `resumeWriting()` (sendfile's fallback takes that over). */
  _isProtocolPaused(): boolean {
    return this.#protocolPaused;
  }

  /** @internal Whether `_handOver()` can give its socket: an open socket (startTls's `_start_tls_compatible`). */
  _canHandOver(): boolean {
    const socket = this.#readable as NetSocket | null;
    return !this.#closing && socket !== null && socket === (this.#writable as unknown) && typeof socket.setNoDelay === 'function';
  }

  /** @internal */
  _closeAtLoopClose(): void {
    this.#lost = true;
    this.#closing = true;
    this.#readable?.destroy();
    this.#writable?.destroy();
  }

  // ───────────────────────────── what arrives from Node ─────────────────────────────

  readonly #onData = (chunk: Buffer | string): void => {
    this.#inbox.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    this.#deliverSoon();
  };

  /** @internal Bytes read through `onread` before the transport was made (a copy of their own). */
  _received(chunk: Buffer): void {
    this.#inbox.push(chunk);
    this.#deliverSoon(true);
  }

  /**
   * @internal `nread` bytes read through `onread`, in the thread's read buffer until the next
   * read; whether to go on reading (always). Called from libuv's poll phase.
   */
  _read(nread: number): boolean {
    if (this.#buffered && this.#inbox.length === 0 && !this.#scheduled) {
      // A loop waiting for I/O runs at once: the protocol's getBuffer() memory is then filled
      // straight from the read buffer, with no copy of the bytes' own in between.
      this.#inPlace = nread;
      this.#deliverSoon(true);
      if (this.#inPlace === 0) return true;
      this.#inPlace = 0;
    }
    this.#inbox.push(copyOut(nread));
    this.#deliverSoon(true);
    return true;
  }

  readonly #onEnd = (): void => {
    this.#eofReceived = true;
    this.#deliverSoon();
  };

  readonly #onError = (error: Error): void => {
    this.#error ??= error;
  };

  readonly #onReadClose = (): void => {
    this.#readClosed = true;
    if (this.#writable === (this.#readable as unknown)) this.#writeClosed = true;
    this.#deliverSoon();
  };

  readonly #onWriteClose = (): void => {
    this.#writeClosed = true;
    this.#deliverSoon();
  };

  /**
   * Deliver what arrived in a loop iteration (once, however much arrives meanwhile); `fromPoll`:
   * called straight from libuv's poll phase, where a loop waiting for I/O may run at once.
   */
  #deliverSoon(fromPoll = false): void {
    if (this.#scheduled || this.#lost) return;
    if (this.#loop.isClosed()) {
      // Nobody will ever read it: let the connection go.
      this.#readable?.destroy();
      this.#writable?.destroy();
      return;
    }
    this.#scheduled = true;
    if (fromPoll) this.#loop._callSoonFromPoll(this.#deliver);
    else this.#loop.callSoon(this.#deliver);
  }

  readonly #deliver = (): void => {
    this.#scheduled = false;
    if (this.#lost || !this.#made) return;
    const inPlace = this.#inPlace;
    if (inPlace !== 0) {
      // The read this delivery was scheduled for, still in the thread's read buffer (the inbox is empty).
      this.#inPlace = 0;
      // Closing: dropped, as below. A protocol set meanwhile that is not a BufferedProtocol may
      // keep what it is given: it gets a copy.
      if (this.#paused) this.#inbox.push(copyOut(inPlace));
      else if (!this.#closing && (!this.#receive(this.#buffered ? readBytes(inPlace) : copyOut(inPlace)) || this.#lost)) return;
    }
    const inbox = this.#inbox;
    while (inbox.length > 0 && !this.#paused && !this.#closing) {
      if (!this.#receive(inbox.shift() as Buffer) || this.#lost) return;
    }
    // Closed by this side: what had not been delivered is dropped, as asyncio stops reading.
    if (this.#closing && inbox.length > 0) inbox.clear();
    const drained = inbox.length === 0;
    if (this.#eofReceived && !this.#eofDelivered && drained && !this.#paused && !this.#closing) {
      this.#eofDelivered = true;
      let keepOpen: boolean | void;
      try {
        keepOpen = this.#protocol.eofReceived();
      } catch (error) {
        this.#fatal(error, 'Fatal error: protocol.eofReceived() call failed.');
        return;
      }
      if (keepOpen !== true) this.close();
    }
    // Paused with chunks still here: they are delivered (then EOF) when reading resumes, before the end.
    if (this.#readClosed && this.#writeClosed && (drained || this.#closing)) this.#connectionLost(this.#error);
  };

  /** Give `data` to the protocol; false when its callback failed (the connection then ends with the error). */
  #receive(data: Uint8Array): boolean {
    if (this.#buffered) {
      const failed = _feedBuffered(this.#protocol as BufferedProtocol, data);
      if (failed === null) return true;
      this.#fatal(failed.error, failed.message);
      return false;
    }
    try {
      this.#protocol.dataReceived(data);
    } catch (error) {
      this.#fatal(error, 'Fatal error: protocol.dataReceived() call failed.');
      return false;
    }
    return true;
  }

  /** A protocol callback failed: report it to the exception handler and end the connection with it. */
  #fatal(error: unknown, message: string): void {
    this.#forceClose(reportProtocolError(this.#loop, message, error, this, this.#protocol));
  }

  #forceClose(error: Error | null): void {
    if (this.#lost) return;
    if (error !== null) this.#error ??= error;
    this.#closing = true;
    this.#inbox.clear();
    this.#readable?.destroy();
    if (this.#writable !== (this.#readable as unknown)) this.#writable?.destroy();
    else if (this.#readable !== null) {
      // A socket: closed now, as asyncio closes it; connectionLost follows in the next iteration, not after Node's 'close'.
      this.#socketGone();
      return;
    }
    if (this.#readClosed && this.#writeClosed) this.#connectionLost(this.#error);
  }

  /** The socket was destroyed by this side: nothing more can arrive, the connection is lost at the next delivery. */
  #socketGone(): void {
    this.#readClosed = true;
    this.#writeClosed = true;
    this.#deliverSoon();
  }

  #connectionLost(error: Error | null): void {
    if (this.#lost) return;
    this.#lost = true;
    this.#closing = true;
    const protocol = this.#protocol;
    try {
      protocol.connectionLost(error);
    } catch (caught) {
      reportProtocolError(this.#loop, 'Exception in protocol.connectionLost()', caught, this, this.#protocol);
    } finally {
      this.#readable?.off('data', this.#onData);
      this.#reads?.detach();
      _untrackOpen(this.#loop, this);
      this.#owner?._detach(this);
      this.#owner = null;
    }
  }

  // ───────────────────────────── writing ─────────────────────────────

  /** Queue `data` for sending; never blocks (the protocol hears `pauseWriting` past the high-water mark). */
  write(data: Uint8Array): void {
    if (!(data instanceof Uint8Array)) throw new TypeError(`data argument must be a bytes-like object, not '${typeName(data)}'`);
    if (this.#eofWritten) throw new RuntimeError('Cannot call write() after writeEof()');
    const writable = this.#writable;
    if (writable === null) throw new RuntimeError('this transport cannot write: it is the read end of a pipe');
    if (data.length === 0) return;
    if (this.#lost || this.#writeClosed || writable.destroyed || writable.writableEnded) {
      if (this.#connLostWrites >= LOG_THRESHOLD_FOR_CONNLOST_WRITES) logger.warning('socket.send() raised exception.');
      this.#connLostWrites++;
      return;
    }
    writable.write(data);
    this.#maybePauseProtocol();
  }

  /** Queue every chunk of `data`, in order. */
  writelines(data: Iterable<Uint8Array>): void {
    for (const chunk of data) this.write(chunk);
  }

  /** Whether `writeEof()` is supported: true for TCP, Unix sockets and pipes, false for TLS. */
  canWriteEof(): boolean {
    return !this.#isTls && this.#writable !== null;
  }

  /** Close the write half after the buffered data (half-close); reading goes on. */
  writeEof(): void {
    if (!this.canWriteEof()) throw new RuntimeError('TLS does not support half-closes: writeEof() is not available (canWriteEof() is false)');
    if (this.#closing || this.#eofWritten) return;
    this.#eofWritten = true;
    this.#writable?.end();
  }

  /** The number of bytes buffered for sending. */
  getWriteBufferSize(): number {
    return this.#writable?.writableLength ?? 0;
  }

  /** The low- and high-water marks of the write buffer, in bytes (get_write_buffer_limits). */
  getWriteBufferLimits(): [low: number, high: number] {
    return [this.#low, this.#high];
  }

  /**
   * Set the high- and low-water marks of the write buffer (bytes) that trigger `pauseWriting` /
   * `resumeWriting`; default high 64 KiB, low a quarter of high (set_write_buffer_limits).
   */
  setWriteBufferLimits(high?: number | null, low?: number | null): void {
    [this.#high, this.#low] = _writeBufferLimits(high, low);
    this.#maybePauseProtocol();
  }

  #maybePauseProtocol(): void {
    if (this.#protocolPaused || this.getWriteBufferSize() <= this.#high) return;
    this.#protocolPaused = true;
    try {
      this.#protocol.pauseWriting();
    } catch (error) {
      reportProtocolError(this.#loop, 'protocol.pauseWriting() failed', error, this, this.#protocol);
    }
    this.#watchFlush();
  }

  /** Hear when Node has handed everything written so far to the kernel (an empty write's callback). */
  #watchFlush(): void {
    const writable = this.#writable;
    if (this.#watchingFlush || writable === null || writable.destroyed || writable.writableEnded) return;
    this.#watchingFlush = true;
    writable.write(EMPTY, this.#onFlushed);
  }

  readonly #onFlushed = (error?: Error | null): void => {
    this.#watchingFlush = false;
    // An error: the stream was destroyed (abort, reset) and its buffer dropped; nothing resumes.
    if (error !== undefined && error !== null) return;
    if (this.#lost || !this.#protocolPaused || this.#writable?.destroyed === true) return;
    if (this.getWriteBufferSize() > this.#low) {
      this.#watchFlush();
      return;
    }
    if (this.#loop.isClosed()) return;
    this.#loop.callSoon(() => {
      if (this.#lost || !this.#protocolPaused || this.getWriteBufferSize() > this.#low) return;
      this.#protocolPaused = false;
      try {
        this.#protocol.resumeWriting();
      } catch (error) {
        reportProtocolError(this.#loop, 'protocol.resumeWriting() failed', error, this, this.#protocol);
      }
    });
  };

  // ───────────────────────────── closing, reading ─────────────────────────────

  /** Close after the buffered data is sent; the protocol's `connectionLost(null)` follows. */
  close(): void {
    if (this.#closing) return;
    this.#closing = true;
    const readable = this.#readable;
    const writable = this.#writable;
    if (writable !== null && !writable.destroyed) {
      if (writable === (readable as unknown)) {
        const socket = writable as unknown as NetSocket;
        if (!this.#isTls && socket.writableLength === 0) {
          // Everything written is with the kernel, which sends it before the FIN: the socket
          // closes now and connectionLost follows in the next iteration, as asyncio's does.
          socket.destroy();
          this.#socketGone();
          return;
        }
        // End the write half after the buffered data, then let the whole socket go.
        if (socket.writableFinished) socket.destroy();
        else {
          socket.once('finish', () => socket.destroy());
          if (!socket.writableEnded) socket.end();
        }
      } else {
        writable.end();
      }
    }
    if (readable !== null && readable !== (writable as unknown)) readable.destroy();
    if (this.#readClosed && this.#writeClosed) this.#deliverSoon();
  }

  /** Close at once, dropping buffered data; the protocol's `connectionLost(null)` follows. */
  abort(): void {
    this.#forceClose(null);
  }

  /** Whether the transport is closing or closed. */
  isClosing(): boolean {
    return this.#closing;
  }

  /** Stop calling `dataReceived` until `resumeReading()`. */
  pauseReading(): void {
    if (this.#closing || this.#paused) return;
    this.#paused = true;
    this.#readable?.pause();
  }

  /** Deliver data again after `pauseReading()`. */
  resumeReading(): void {
    if (this.#closing || !this.#paused) return;
    this.#paused = false;
    this.#readable?.resume();
    this.#deliverSoon();
  }

  /** Whether data is being delivered (not paused, not closing). */
  isReading(): boolean {
    return !this.#paused && !this.#closing;
  }

  /**
   * @internal What a simulation reads to know whether bytes are on their way between two of its
   * loops: the TCP endpoints and byte counts of the transport's socket (null: not a TCP socket).
   */
  _byteCounts(): { local: string; remote: string; written: number; read: number; reading: boolean } | null {
    const socket = this.#extra.socket as NetSocket | undefined;
    if (socket === undefined || typeof socket.remotePort !== 'number' || typeof socket.localPort !== 'number') return null;
    return {
      local: `${socket.localAddress}:${socket.localPort}`,
      remote: `${socket.remoteAddress}:${socket.remotePort}`,
      written: socket.bytesWritten,
      read: socket.bytesRead,
      reading: this.isReading(),
    };
  }

  /** The protocol the transport drives. */
  getProtocol(): Protocol {
    return this.#protocol;
  }

  /** Drive `protocol` from now on (set_protocol); a BufferedProtocol receives through its buffers. */
  setProtocol(protocol: Protocol): void {
    this.#protocol = protocol;
    this.#buffered = protocol instanceof BufferedProtocol;
  }

  /** The peer's or the local address (`[host, port]`, or a path for a Unix socket), null when unknown (get_extra_info). */
  getExtraInfo(name: 'peername' | 'sockname'): SocketAddress | null;
  /** The underlying `net.Socket` (a `tls.TLSSocket` under TLS) (get_extra_info('socket')). */
  getExtraInfo(name: 'socket'): NetSocket | null;
  /**
   * Another key asyncio defines, else `defaultValue` (default null) (get_extra_info). Under TLS:
   * `cipher` is asyncio's `[name, version, secretBits]`, `peercert` its getpeercert() dict
   * (`{ subject: [[['commonName', 'localhost']]], notAfter, subjectAltName: [['DNS', 'localhost']], ... }`,
   * `{}` when the peer was not verified, null without a certificate); Node's `getCipher()` and
   * `getPeerCertificate(true)` are `nodeCipher` and `nodePeerCertificate`, and `ssl_object` the TLSSocket.
   */
  getExtraInfo<D = null>(name: string, defaultValue?: D): unknown;
  getExtraInfo(name: string, defaultValue: unknown = null): unknown {
    return Object.prototype.hasOwnProperty.call(this.#extra, name) ? this.#extra[name] : defaultValue;
  }

  toString(): string {
    const state = this.#lost ? 'closed' : this.#closing ? 'closing' : 'open';
    const peer = this.getExtraInfo('peername');
    const where = peer === null ? '' : ` peername=${Array.isArray(peer) ? `${peer[0]}:${peer[1]}` : peer}`;
    return `<Transport ${state}${where} write_buffer=${this.getWriteBufferSize()}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/**
 * A UDP endpoint seen from a DatagramProtocol (asyncio.DatagramTransport); made by
 * `loop.createDatagramEndpoint`. Datagrams that arrive are delivered in loop iterations, in order.
 *
 * @example
 * ```ts
 * const [transport] = yield* loop.createDatagramEndpoint(() => new Client(), { remoteAddr: ['127.0.0.1', port] });
 * transport.sendto(new TextEncoder().encode('ping'));
 * ```
 */
export class DatagramTransport implements LoopResource {
  readonly #loop: EventLoop;
  readonly #socket: DgramSocket;
  #protocol: DatagramProtocol;
  readonly #remote: [host: string, port: number] | null;
  /** Datagrams and errors that arrived and were not delivered yet, in order. */
  #inbox: Array<[Buffer, SocketAddress] | Error> = [];
  #scheduled = false;
  #made = false;
  #closing = false;
  #closed = false;
  #lost = false;
  #connLostWrites = 0;

  /** @internal Made by `loop.createDatagramEndpoint`: drive `protocol` from the bound (and maybe connected) `socket`. */
  constructor(loop: EventLoop, socket: DgramSocket, protocol: DatagramProtocol, remote: [host: string, port: number] | null, made: { setResult(value: undefined): void; done(): boolean }) {
    this.#loop = loop;
    this.#socket = socket;
    this.#protocol = protocol;
    this.#remote = remote;
    socket.on('message', (data: Buffer, info: { address: string; port: number }) => {
      this.#inbox.push([data, [info.address, info.port]]);
      this.#deliverSoon();
    });
    socket.on('error', (error: Error) => {
      this.#inbox.push(error);
      this.#deliverSoon();
    });
    socket.on('close', () => {
      this.#closed = true;
      this.#deliverSoon();
    });
    loop.callSoon(() => {
      if (this.#lost) return;
      try {
        this.#protocol.connectionMade(this);
      } finally {
        this.#made = true;
        if (!made.done()) made.setResult(undefined);
        this.#deliverSoon();
      }
    });
    _trackOpen(loop, this);
  }

  /** @internal */
  _closeAtLoopClose(): void {
    this.#lost = true;
    this.#closing = true;
    if (!this.#closed) this.#socket.close();
  }

  #deliverSoon(): void {
    if (this.#scheduled || this.#lost) return;
    if (this.#loop.isClosed()) {
      if (!this.#closed) this.#socket.close();
      return;
    }
    this.#scheduled = true;
    this.#loop.callSoon(this.#deliver);
  }

  readonly #deliver = (): void => {
    this.#scheduled = false;
    if (this.#lost || !this.#made) return;
    const inbox = this.#inbox;
    this.#inbox = [];
    for (let i = 0; i < inbox.length && !this.#closing; i++) {
      const item = inbox[i] as [Buffer, SocketAddress] | Error;
      try {
        if (item instanceof Error) this.#protocol.errorReceived(item);
        else this.#protocol.datagramReceived(item[0], item[1]);
      } catch (error) {
        reportProtocolError(this.#loop, item instanceof Error ? 'Fatal error: protocol.errorReceived() call failed.' : 'Fatal error: protocol.datagramReceived() call failed.', error, this, this.#protocol);
        this.abort();
        return;
      }
    }
    if (this.#closed) this.#connectionLost();
  };

  #connectionLost(): void {
    if (this.#lost) return;
    this.#lost = true;
    this.#closing = true;
    _untrackOpen(this.#loop, this);
    try {
      this.#protocol.connectionLost(null);
    } catch (error) {
      reportProtocolError(this.#loop, 'Exception in protocol.connectionLost()', error, this, this.#protocol);
    }
  }

  /** Send `data` to `addr` (default: the `remoteAddr` the endpoint was opened with); a failure goes to `errorReceived`. */
  sendto(data: Uint8Array, addr: SocketAddress | null = null): void {
    if (!(data instanceof Uint8Array)) throw new TypeError(`data argument must be a bytes-like object, not '${typeName(data)}'`);
    const remote = this.#remote;
    if (remote !== null && addr !== null && !(Array.isArray(addr) && addr[0] === remote[0] && addr[1] === remote[1])) {
      throw new RangeError(`Invalid address: must be null or ['${remote[0]}', ${remote[1]}]`);
    }
    if (remote === null && addr === null) throw new RangeError('sendto() needs an address: the endpoint was opened without remoteAddr');
    if (addr !== null && !Array.isArray(addr)) throw new TypeError(`a UDP address is [host, port], got ${typeName(addr)}`);
    if (this.#closing) {
      if (this.#connLostWrites >= LOG_THRESHOLD_FOR_CONNLOST_WRITES) logger.warning('socket.sendto() raised exception.');
      this.#connLostWrites++;
      return;
    }
    const onSent = (error: Error | null): void => {
      if (error === null || this.#lost) return;
      this.#inbox.push(error);
      this.#deliverSoon();
    };
    if (remote !== null) this.#socket.send(data, onSent);
    else this.#socket.send(data, (addr as [string, number])[1], (addr as [string, number])[0], onSent);
  }

  /** The number of bytes waiting to be sent. */
  getWriteBufferSize(): number {
    return this.#closed ? 0 : this.#socket.getSendQueueSize();
  }

  /** Close the endpoint; the protocol's `connectionLost(null)` follows. */
  close(): void {
    if (this.#closing) return;
    this.#closing = true;
    if (!this.#closed) this.#socket.close();
  }

  /** Close at once, dropping datagrams not delivered yet. */
  abort(): void {
    this.#inbox = [];
    this.close();
  }

  /** Whether the endpoint is closing or closed. */
  isClosing(): boolean {
    return this.#closing;
  }

  /** The protocol the transport drives. */
  getProtocol(): DatagramProtocol {
    return this.#protocol;
  }

  /** Drive `protocol` from now on (set_protocol). */
  setProtocol(protocol: DatagramProtocol): void {
    this.#protocol = protocol;
  }

  /** `sockname`, `peername` ([host, port]), `socket` (the `dgram.Socket`); else `defaultValue` (null). */
  getExtraInfo<D = null>(name: string, defaultValue?: D): unknown {
    switch (name) {
      case 'socket':
        return this.#socket;
      case 'sockname': {
        if (this.#closed) return defaultValue ?? null;
        const address = this.#socket.address();
        return [address.address, address.port];
      }
      case 'peername':
        return this.#remote ?? defaultValue ?? null;
      default:
        return defaultValue ?? null;
    }
  }

  toString(): string {
    return `<DatagramTransport ${this.#lost ? 'closed' : this.#closing ? 'closing' : 'open'}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}
