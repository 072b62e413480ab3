/**
 * Streams (asyncio.streams): a connection as a StreamReader and a StreamWriter, read and written
 * from coroutines. `openConnection` and `startServer` (and their Unix-socket twins) build them on
 * the loop's transports; subprocess pipes use them too.
 *
 * The reader keeps what arrived in a buffer: a coroutine waiting in `readexactly`, `readuntil`
 * or `read` that is cancelled leaves every byte in the buffer for the next reader. Past twice
 * its limit the reader pauses the transport, which stops reading from the socket (back-pressure
 * towards the peer) until the buffer drains.
 */
import type { EventLoop } from './base-events.js';
import { _createConnection, _createServer, type CreateConnectionOptions, type Server, type ServerEndpoint } from './connections.js';
import { isCoroutine, type Coroutine } from './coroutines.js';
import { IncompleteReadError, LimitOverrunError, RuntimeError } from './exceptions.js';
import type { Future } from './futures.js';
import { Deque } from './internal/deque.js';
import { WaitNote } from './internal/introspect.js';
import { INSPECT, repr } from './internal/format.js';
import { _getEventLoop, _getRunningLoop } from './internal/running.js';
import { Protocol } from './protocols.js';
import type { SslContext, StartTlsOptions } from './start-tls.js';
import { sleep } from './tasks.js';
import type { SocketAddress, Transport } from './transports.js';
import type { Server as NetServer, Socket } from 'node:net';
import type * as tls from 'node:tls';

/** asyncio's default buffer limit of a StreamReader: 64 KiB. */
const DEFAULT_LIMIT = 64 * 1024;
const NEWLINE = new Uint8Array([0x0a]);
const encoder = new TextEncoder();

/** Options of `openConnection` / `openUnixConnection`. */
export interface OpenConnectionOptions {
  /** The StreamReader's buffer limit in bytes (default 64 KiB). */
  limit?: number;
  /** TLS: `true` for Node's defaults (verify the peer), or `node:tls` connect options (`ca`, `rejectUnauthorized`, ...). */
  ssl?: boolean | tls.ConnectionOptions;
  /** The host name to check the server's certificate against (SNI), when it differs from `host`. */
  serverHostname?: string;
  /** The local `[host, port]` to bind to before connecting (TCP only). */
  localAddr?: [host: string, port: number];
  /** Seconds the TLS handshake may take before the connection is aborted (default 60); only with `ssl`. */
  sslHandshakeTimeout?: number;
}

/** Options of `startServer` / `startUnixServer`. */
export interface StartServerOptions {
  /** The StreamReaders' buffer limit in bytes (default 64 KiB). */
  limit?: number;
  /** The listen backlog (the most connections queued before accept). */
  backlog?: number;
  /** TLS: `node:tls` server options (`key`, `cert`, ...). */
  ssl?: tls.TlsOptions;
  /** Start accepting at once (default true). */
  startServing?: boolean;
  /** Seconds each client's TLS handshake may take before its connection is dropped (default 60); only with `ssl`. */
  sslHandshakeTimeout?: number;
  /**
   * Several servers (in several LoopThreads) on one port (SO_REUSEPORT); TCP only. Needs Node
   * 22.12 or later on Linux (or FreeBSD 12+, Solaris 11.4, AIX 7.2.5+); elsewhere a RangeError.
   */
  reusePort?: boolean;
  /** Serve on this already listening `net.Server` instead of a host and port or a path (asyncio's `sock`). */
  sock?: NetServer;
  /** TCP: turn on TCP keep-alive on every accepted connection (asyncio 3.13's `keep_alive`). */
  keepAlive?: boolean;
  /** Unix: remove the socket file on close (default true), unless another file replaced it (3.13's `cleanup_socket`). */
  cleanupSocket?: boolean;
}

/** What a StreamReader pauses and resumes for back-pressure: a transport, or the pipes of a subprocess. */
export interface ReadingControl {
  pauseReading(): void;
  resumeReading(): void;
}

/** What `startServer` calls for each connection: a plain function, or a generator function run as a Task. */
export type ClientConnectedCallback = (reader: StreamReader, writer: StreamWriter) => Coroutine<unknown> | void;

/** The other end of a stream's transport, as ps() names it: `127.0.0.1:8080`, a socket path, or `a stream`. */
function peerOf(transport: unknown): string {
  // Read through the method, not instanceof: streams.js must not need transports.js loaded (an import cycle).
  if (typeof (transport as Partial<Transport> | null)?.getExtraInfo === 'function') {
    const peer = (transport as Transport).getExtraInfo('peername');
    if (typeof peer === 'string' && peer !== '') return peer;
    if (Array.isArray(peer)) return peer[0].includes(':') ? `[${peer[0]}]:${peer[1]}` : `${peer[0]}:${peer[1]}`;
  }
  return 'a stream';
}

/** @internal A StreamReader's buffer limit: the default for undefined, a RangeError unless a positive integer. */
export function _checkLimit(limit: unknown): number {
  if (limit === undefined) return DEFAULT_LIMIT;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit <= 0) throw new RangeError(`Limit cannot be <= 0: got ${repr(limit)}`);
  return limit;
}

/** A separator of readuntil as bytes (a string is UTF-8), or a TypeError naming what it got. */
function separatorBytes(separator: unknown): Uint8Array {
  if (typeof separator === 'string') return encoder.encode(separator);
  if (separator instanceof Uint8Array) return separator;
  throw new TypeError(`readuntil() separator must be a string, a Uint8Array or an array of them, got ${repr(separator)}`);
}

/** Several separators of readuntil as bytes, shortest first (asyncio sorts them by length). */
function separatorList(separators: ReadonlyArray<unknown>): Uint8Array[] {
  if (separators.length === 0) throw new RangeError('Separator should contain at least one element');
  return separators.map(separatorBytes).sort((a, b) => a.length - b.length);
}

/**
 * The reading half of a connection (asyncio.StreamReader); bytes are Uint8Arrays (Node Buffers).
 *
 * @example
 * ```ts
 * const [reader, writer] = yield* openConnection('127.0.0.1', 8888);
 * const line = yield* reader.readline();
 * ```
 */
export class StreamReader {
  readonly #limit: number;
  readonly #loop: EventLoop;
  /** What arrived and was not read, in order. */
  readonly #chunks = new Deque<Buffer>(4);
  #size = 0;
  #eof = false;
  #waiter: Future<void> | null = null;
  #exception: Error | null = null;
  #transport: ReadingControl | null = null;
  #paused = false;
  /** What a task waiting for data here waits for, as ps() says it (made at the first wait). */
  #note: WaitNote | null = null;
  /** Where the bytes come from, when the transport cannot say (a child's pipe). */
  #source: string | null = null;
  /** Where the bytes around an edge between chunks are searched (readuntil with a separator of several bytes). */
  #scratch: Buffer | null = null;
  /** Bytes searched, bytes copied and chunks stepped through (tests check that readuntil stays linear). */
  #scanned = 0;
  #copied = 0;
  #visited = 0;
  /**
   * The chunk where the last search started: its index and the offset of its first byte; -1
   * once bytes were taken, which moves every chunk.
   */
  #resumeIndex = -1;
  #resumeStart = 0;

  /** @internal Made by the stream functions and subprocesses (a buffer limit, the loop it serves). */
  constructor(limit: number = DEFAULT_LIMIT, loop: EventLoop = _getEventLoop()) {
    this.#limit = _checkLimit(limit);
    this.#loop = loop;
  }

  /** The buffer limit in bytes. */
  get limit(): number {
    return this.#limit;
  }

  /** @internal Bytes searched by readuntil, bytes copied and chunks stepped through so far (tests check that they stay linear). */
  _searchStatistics(): { scanned: number; copied: number; visited: number } {
    return { scanned: this.#scanned, copied: this.#copied, visited: this.#visited };
  }

  /** The error the stream failed with, or null. */
  exception(): Error | null {
    return this.#exception;
  }

  /** @internal The connection failed: waiting readers raise `exception`. */
  _setException(exception: Error): void {
    this.#exception = exception;
    const waiter = this.#waiter;
    if (waiter !== null) {
      this.#waiter = null;
      if (!waiter.done()) waiter.setException(exception);
    }
  }

  #wakeWaiter(): void {
    const waiter = this.#waiter;
    if (waiter !== null) {
      this.#waiter = null;
      if (!waiter.done()) waiter.setResult(undefined);
    }
  }

  /** @internal Name where its bytes come from, for ps() (`the stdout of process 1234`). */
  _setSource(source: string): void {
    this.#source = source;
  }

  /** @internal The transport it reads from (paused and resumed for back-pressure). */
  _setTransport(transport: ReadingControl): void {
    if (this.#transport !== null) throw new RuntimeError('Transport already set');
    this.#transport = transport;
  }

  /** @internal The connection goes on over `transport` (startTls): it is the one paused and resumed now. */
  _replaceTransport(transport: ReadingControl): void {
    this.#transport = transport;
    if (this.#paused) transport.pauseReading();
  }

  #maybeResumeTransport(): void {
    if (this.#paused && this.#size <= this.#limit) {
      this.#paused = false;
      this.#transport?.resumeReading();
    }
  }

  /** @internal The peer sent EOF. */
  _feedEof(): void {
    this.#eof = true;
    this.#wakeWaiter();
  }

  /** Whether the buffer is empty and EOF was received. */
  atEof(): boolean {
    return this.#eof && this.#size === 0;
  }

  /** @internal Bytes arrived. */
  _feedData(data: Uint8Array): void {
    if (this.#eof) throw new RuntimeError('feedData after feedEof');
    if (data.length === 0) return;
    this.#chunks.push(Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    this.#size += data.length;
    this.#wakeWaiter();
    const transport = this.#transport;
    if (transport !== null && !this.#paused && this.#size > 2 * this.#limit) {
      try {
        transport.pauseReading();
        this.#paused = true;
      } catch {
        // A transport that cannot pause: the buffer grows.
      }
    }
  }

  /** Wait until data or EOF arrives; one reader at a time. */
  *#waitForData(funcName: string): Coroutine<void> {
    if (this.#waiter !== null) throw new RuntimeError(`${funcName}() called while another coroutine is already waiting for incoming data`);
    if (this.#eof) throw new RuntimeError('_wait_for_data after EOF');
    if (this.#paused) {
      this.#paused = false;
      this.#transport?.resumeReading();
    }
    const waiter = this.#loop.createFuture<void>();
    waiter._result = this.#note ??= new WaitNote(`read from ${this.#source ?? peerOf(this.#transport)}`, false);
    this.#waiter = waiter;
    try {
      yield* waiter;
    } finally {
      this.#waiter = null;
    }
  }

  /** The first `n` bytes of the buffer, taken out of it. */
  #take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    this.#resumeIndex = -1;
    const chunks = this.#chunks;
    const first = chunks.shift() as Buffer;
    let out: Buffer;
    if (first.length >= n) {
      out = first.length === n ? first : first.subarray(0, n);
      if (first.length > n) chunks.unshift(first.subarray(n));
    } else {
      out = Buffer.allocUnsafe(n);
      this.#copied += n;
      out.set(first);
      let at = first.length;
      while (at < n) {
        const chunk = chunks.shift() as Buffer;
        const want = n - at;
        if (chunk.length <= want) {
          out.set(chunk, at);
          at += chunk.length;
        } else {
          out.set(chunk.subarray(0, want), at);
          chunks.unshift(chunk.subarray(want));
          at = n;
        }
      }
    }
    this.#size -= n;
    return out;
  }

  /** The whole buffer, taken out. */
  #takeAll(): Buffer {
    return this.#take(this.#size);
  }

  /**
   * Where `separator` first starts in the buffer at or after `from` (< the buffer's size), or -1.
   * Each chunk is searched by itself, and the bytes around each edge between chunks in a small
   * window, so that a search costs the bytes after `from` and copies none of the buffer:
   * readuntil, searching again from just before what arrived last, stays linear in the bytes
   * received however small the pieces.
   */
  #indexOf(separator: Uint8Array, from: number): number {
    const chunks = this.#chunks;
    const count = chunks.length;
    let i = 0;
    let start = 0;
    // readuntil searches again from further on: resume where its last search started.
    if (this.#resumeIndex !== -1 && this.#resumeStart <= from) {
      i = this.#resumeIndex;
      start = this.#resumeStart;
    }
    let chunk = chunks.at(i) as Buffer;
    while (start + chunk.length <= from) {
      this.#visited++;
      start += chunk.length;
      chunk = chunks.at(++i) as Buffer;
    }
    this.#resumeIndex = i;
    this.#resumeStart = start;
    const reach = separator.length - 1;
    for (;;) {
      const skip = from > start ? from - start : 0;
      this.#visited++;
      this.#scanned += chunk.length - skip;
      const at = chunk.indexOf(separator, skip);
      if (at !== -1) return start + at;
      const end = start + chunk.length;
      if (++i === count) return -1;
      chunk = chunks.at(i) as Buffer;
      // A match that starts in this chunk's last `reach` bytes and ends in the next chunks.
      if (reach > 0) {
        const windowStart = Math.max(from, end - reach);
        const windowLength = Math.min(this.#size, end + reach) - windowStart;
        if (windowLength > reach) {
          this.#scanned += windowLength;
          const at = this.#edgeWindow(i - 1, start, windowStart, windowLength).indexOf(separator);
          // The scratch may hold older bytes past the window: the first match ending there
          // means that none ends within it.
          if (at !== -1 && at + reach < windowLength) return windowStart + at;
        }
      }
      start = end;
    }
  }

  /**
   * The `length` bytes of the buffer from `from`, which chunk `index` (starting at `start`)
   * holds, copied into a scratch buffer kept between searches (which may be longer).
   */
  #edgeWindow(index: number, start: number, from: number, length: number): Buffer {
    let scratch = this.#scratch;
    if (scratch === null || scratch.length < length) scratch = this.#scratch = Buffer.allocUnsafe(length);
    this.#copied += length;
    const chunks = this.#chunks;
    let skip = from - start;
    // A few bytes (twice the separator's length at most): a loop costs less than views to copy.
    for (let at = 0; at < length; index++, skip = 0) {
      const chunk = chunks.at(index) as Buffer;
      const end = Math.min(chunk.length, skip + length - at);
      for (let k = skip; k < end; k++) scratch[at++] = chunk[k] as number;
    }
    return scratch;
  }

  /**
   * Read up to `n` bytes, returning as soon as any are buffered; `n` = -1 (default): read until
   * EOF; at EOF: empty.
   */
  *read(n = -1): Coroutine<Uint8Array> {
    if (typeof n !== 'number' || !Number.isInteger(n)) throw new TypeError(`read() n must be an integer, got ${repr(n)}`);
    if (this.#exception !== null) throw this.#exception;
    if (n === 0) return Buffer.alloc(0);
    if (n < 0) {
      // Read until EOF, a limit's worth at a time, so the transport keeps flowing.
      const blocks: Uint8Array[] = [];
      for (;;) {
        const block = yield* this.read(this.#limit);
        if (block.length === 0) break;
        blocks.push(block);
      }
      return Buffer.concat(blocks);
    }
    if (this.#size === 0 && !this.#eof) yield* this.#waitForData('read');
    const data = this.#take(Math.min(n, this.#size));
    this.#maybeResumeTransport();
    return data;
  }

  /**
   * Read one line ending in `\n` (included); at EOF the partial line; a line over the limit is a
   * RangeError, and the line is dropped (with its separator when it was found).
   */
  *readline(): Coroutine<Uint8Array> {
    try {
      return yield* this.readuntil(NEWLINE);
    } catch (error) {
      if (error instanceof IncompleteReadError) return error.partial;
      if (error instanceof LimitOverrunError) {
        if (this.#startsWithAt(NEWLINE, error.consumed)) this.#take(error.consumed + NEWLINE.length);
        else this.#takeAll();
        this.#maybeResumeTransport();
        throw new RangeError(error.message);
      }
      throw error;
    }
  }

  /** Whether the buffer holds `separator` at `at`. */
  #startsWithAt(separator: Uint8Array, at: number): boolean {
    if (this.#size < at + separator.length) return false;
    return this.#indexOf(separator, at) === at;
  }

  /**
   * Read up to and including `separator` (default `'\n'`, a string is UTF-8). EOF first:
   * IncompleteReadError with what was buffered (`expected` null); the separator not found
   * within the limit: LimitOverrunError (`consumed`), the data stays buffered.
   *
   * Several separators (an array, asyncio 3.13's tuple): the shortest line that ends in any of
   * them; when two end at the same byte, the shorter separator is the one that matched (for the
   * limit's check).
   *
   * @example
   * ```ts
   * const header = yield* reader.readuntil('\r\n\r\n');
   * const line = yield* reader.readuntil(['\r\n', '\n']);
   * ```
   */
  *readuntil(separator: string | Uint8Array | ReadonlyArray<string | Uint8Array> = NEWLINE): Coroutine<Uint8Array> {
    // One separator (the common case) is searched without an array around it.
    const several = Array.isArray(separator) ? separatorList(separator as ReadonlyArray<unknown>) : null;
    const sep = several === null ? separatorBytes(separator) : (several[0] as Uint8Array);
    const minLength = sep.length;
    const maxLength = several === null ? minLength : (several[several.length - 1] as Uint8Array).length;
    if (minLength === 0) throw new RangeError('Separator should be at least one-byte string');
    if (this.#exception !== null) throw this.#exception;
    // No separator starts before `offset`: each search covers what arrived since the last one,
    // and the longest separator's length - 1 bytes before it.
    let offset = 0;
    let matchStart = -1;
    let matchEnd = -1;
    for (;;) {
      const buflen = this.#size;
      if (buflen - offset >= minLength) {
        if (several === null) {
          matchStart = this.#indexOf(sep, offset);
          matchEnd = matchStart + minLength;
        } else {
          // The match that ends first; on a tie the shorter separator, which comes first.
          for (const candidate of several) {
            const at = this.#indexOf(candidate, offset);
            if (at !== -1 && (matchStart === -1 || at + candidate.length < matchEnd)) {
              matchStart = at;
              matchEnd = at + candidate.length;
            }
          }
        }
        if (matchStart !== -1) break;
        offset = Math.max(0, buflen + 1 - maxLength);
        if (offset > this.#limit) throw new LimitOverrunError('Separator is not found, and chunk exceed the limit', offset);
      }
      if (this.#eof) {
        const chunk = this.#takeAll();
        throw new IncompleteReadError(chunk, null);
      }
      yield* this.#waitForData('readuntil');
    }
    if (matchStart > this.#limit) throw new LimitOverrunError('Separator is found, but chunk is longer than limit', matchStart);
    const chunk = this.#take(matchEnd);
    this.#maybeResumeTransport();
    return chunk;
  }

  /** Read exactly `n` bytes; EOF first: IncompleteReadError (`partial`, `expected`); negative `n`: RangeError. */
  *readexactly(n: number): Coroutine<Uint8Array> {
    if (typeof n !== 'number' || !Number.isInteger(n)) throw new TypeError(`readexactly() n must be an integer, got ${repr(n)}`);
    if (n < 0) throw new RangeError('readexactly size can not be less than zero');
    if (this.#exception !== null) throw this.#exception;
    if (n === 0) return Buffer.alloc(0);
    while (this.#size < n) {
      if (this.#eof) {
        const incomplete = this.#takeAll();
        throw new IncompleteReadError(incomplete, n);
      }
      yield* this.#waitForData('readexactly');
    }
    const data = this.#take(n);
    this.#maybeResumeTransport();
    return data;
  }

  toString(): string {
    const info = ['StreamReader'];
    if (this.#size > 0) info.push(`${this.#size} bytes`);
    if (this.#eof) info.push('eof');
    if (this.#limit !== DEFAULT_LIMIT) info.push(`limit=${this.#limit}`);
    if (this.#waiter !== null) info.push('waiter');
    if (this.#exception !== null) info.push(`exception=${this.#exception.name}`);
    if (this.#paused) info.push('paused');
    return `<${info.join(' ')}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/**
 * The protocol between a transport and a StreamReader/StreamWriter pair (asyncio's
 * StreamReaderProtocol, with FlowControlMixin's drain).
 *
 * @internal
 */
export class _StreamReaderProtocol extends Protocol {
  readonly #loop: EventLoop;
  #reader: StreamReader | null;
  readonly #clientConnected: ClientConnectedCallback | null;
  #transport: Transport | null = null;
  #connectionLost = false;
  #paused = false;
  #drainWaiters: Array<Future<void>> = [];
  readonly #closed: Future<void>;
  /** What a task in drain() waits for, as ps() says it (made at the first wait). */
  #drainNote: WaitNote | null = null;
  /** @internal Where the writes go when the transport cannot say (`the stdin of process 1234`). */
  _target: string | null = null;

  constructor(reader: StreamReader | null, clientConnected: ClientConnectedCallback | null = null, loop: EventLoop = _getEventLoop()) {
    super();
    this.#loop = loop;
    this.#reader = reader;
    this.#clientConnected = clientConnected;
    this.#closed = loop.createFuture<void>();
  }

  override connectionMade(transport: Transport): void {
    this.#transport = transport;
    const reader = this.#reader;
    if (reader !== null) reader._setTransport(transport);
    const callback = this.#clientConnected;
    if (callback === null) return;
    const writer = new StreamWriter(transport, this, reader, this.#loop);
    const result = callback(reader as StreamReader, writer);
    if (isCoroutine(result)) {
      const task = this.#loop.createTask(result);
      task.addDoneCallback((done) => {
        if (done.cancelled()) {
          transport.close();
          return;
        }
        const error = done.exception();
        if (error !== null) {
          this.#loop.callExceptionHandler({
            message: 'Unhandled exception in client_connected_cb',
            exception: error,
            transport,
          });
          transport.close();
        }
      });
    }
  }

  override dataReceived(data: Uint8Array): void {
    this.#reader?._feedData(data);
  }

  override eofReceived(): boolean {
    this.#reader?._feedEof();
    // Over TLS a half-close cannot be kept: the transport closes.
    return this.#transport?.canWriteEof() ?? true;
  }

  override connectionLost(exc: Error | null): void {
    const reader = this.#reader;
    if (reader !== null) {
      if (exc === null) reader._feedEof();
      else reader._setException(exc);
    }
    const closed = this.#closed;
    if (!closed.done()) {
      if (exc === null) closed.setResult(undefined);
      else {
        closed.setException(exc);
        // Nobody may wait for it: the error is the reader's and the writer's to raise.
        closed._retrieved();
      }
    }
    this.#connectionLost = true;
    // Wake drain() waiters: they raise the connection's error, or ConnectionResetError.
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const waiter of waiters) {
      if (waiter.done()) continue;
      if (exc === null) waiter.setResult(undefined);
      else waiter.setException(exc);
    }
    this.#reader = null;
    this.#transport = null;
  }

  override pauseWriting(): void {
    this.#paused = true;
  }

  override resumeWriting(): void {
    this.#paused = false;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const waiter of waiters) if (!waiter.done()) waiter.setResult(undefined);
  }

  /** @internal Wait while the transport's buffer is above its high-water mark. */
  *_drainHelper(): Coroutine<void> {
    if (this.#connectionLost) throw connectionLost();
    if (!this.#paused) return;
    const waiter = this.#loop.createFuture<void>();
    waiter._result = this.#drainNote ??= new WaitNote(`drain of ${this._target ?? peerOf(this.#transport)}`, false);
    this.#drainWaiters.push(waiter);
    try {
      yield* waiter;
    } finally {
      const at = this.#drainWaiters.indexOf(waiter);
      if (at !== -1) this.#drainWaiters.splice(at, 1);
    }
  }

  /** @internal The Future that settles when the connection is closed. */
  _closedFuture(): Future<void> {
    return this.#closed;
  }

  /** @internal Whether it serves a connection a server accepted (the TLS server side, for startTls). */
  _isServerSide(): boolean {
    return this.#clientConnected !== null;
  }

  /** @internal The connection goes on over `transport` (startTls). */
  _replaceTransport(transport: Transport): void {
    this.#transport = transport;
    this.#reader?._replaceTransport(transport);
  }
}

/** asyncio's ConnectionResetError('Connection lost'), with Node's code for a reset connection. */
function connectionLost(): Error {
  const error = new Error('Connection lost') as Error & { code: string };
  error.name = 'ConnectionResetError';
  error.code = 'ECONNRESET';
  return error;
}

/**
 * The writing half of a connection (asyncio.StreamWriter).
 *
 * @example
 * ```ts
 * writer.write(new TextEncoder().encode('hello\n'));
 * yield* writer.drain();
 * writer.close();
 * yield* writer.waitClosed();
 * ```
 */
export class StreamWriter {
  #transport: Transport;
  readonly #protocol: _StreamReaderProtocol;
  readonly #reader: StreamReader | null;
  readonly #loop: EventLoop;

  /** @internal Made by the stream functions and subprocesses. */
  constructor(transport: Transport, protocol: _StreamReaderProtocol, reader: StreamReader | null, loop: EventLoop) {
    this.#transport = transport;
    this.#protocol = protocol;
    this.#reader = reader;
    this.#loop = loop;
  }

  /** The underlying transport (a new one after `startTls()`). */
  get transport(): Transport {
    return this.#transport;
  }

  /**
   * Upgrade the connection to TLS (start_tls): after the buffered data is sent, the handshake
   * runs as the server for a connection `startServer` accepted, else as the client; reading and
   * writing then go over TLS. A failed or timed-out handshake closes the connection and raises.
   *
   * @example
   * ```ts
   * writer.write(encoder.encode('STARTTLS\n'));
   * yield* writer.startTls({ ca }, { serverHostname: 'localhost' });
   * ```
   */
  *startTls(sslContext: SslContext, options: { serverHostname?: string; sslHandshakeTimeout?: number } = {}): Coroutine<void> {
    if (options === null || typeof options !== 'object') throw new TypeError(`startTls() options must be an object, got ${repr(options)}`);
    const protocol = this.#protocol;
    yield* this.drain();
    const upgrade: StartTlsOptions = { serverSide: protocol._isServerSide() };
    if (options.serverHostname !== undefined) upgrade.serverHostname = options.serverHostname;
    if (options.sslHandshakeTimeout !== undefined) upgrade.sslHandshakeTimeout = options.sslHandshakeTimeout;
    const transport = yield* this.#loop.startTls(this.#transport, protocol, sslContext, upgrade);
    this.#transport = transport;
    protocol._replaceTransport(transport);
  }

  /** Queue `data` for sending; never blocks (pair it with `drain()`). */
  write(data: Uint8Array): void {
    this.transport.write(data);
  }

  /** Queue every chunk of `data`, in order. */
  writelines(data: Iterable<Uint8Array>): void {
    this.transport.writelines(data);
  }

  /** Close the write half after the buffered data (half-close); reading goes on. */
  writeEof(): void {
    this.transport.writeEof();
  }

  /** Whether `writeEof()` is supported (true for TCP and Unix sockets, false for TLS). */
  canWriteEof(): boolean {
    return this.transport.canWriteEof();
  }

  /** Close the connection once the buffered data is sent. */
  close(): void {
    this.transport.close();
  }

  /** Whether `close()` was called or the connection is closing. */
  isClosing(): boolean {
    return this.transport.isClosing();
  }

  /** Wait until the connection is closed; raises the error it ended with. */
  *waitClosed(): Coroutine<void> {
    yield* this.#protocol._closedFuture();
  }

  /**
   * Wait while the transport's write buffer is above its high-water mark; raises the
   * connection's error (ConnectionResetError when it was lost without one).
   */
  *drain(): Coroutine<void> {
    const reader = this.#reader;
    if (reader !== null) {
      const error = reader.exception();
      if (error !== null) throw error;
    }
    if (this.transport.isClosing()) {
      // Let connectionLost() run first, so that it is seen below (asyncio yields once here too).
      yield* sleep(0);
    }
    yield* this.#protocol._drainHelper();
  }

  /** The peer's or the local address (`[host, port]`, or a path for a Unix socket), null when unknown (get_extra_info). */
  getExtraInfo(name: 'peername' | 'sockname'): SocketAddress | null;
  /** The underlying `net.Socket` (a `tls.TLSSocket` under TLS) (get_extra_info('socket')). */
  getExtraInfo(name: 'socket'): Socket | null;
  /** Another key asyncio defines (`peercert`, `cipher`, `sslcontext`, ...), else `defaultValue` (default null) (get_extra_info). */
  getExtraInfo<D = null>(name: string, defaultValue?: D): unknown;
  getExtraInfo(name: string, defaultValue: unknown = null): unknown {
    return this.transport.getExtraInfo(name, defaultValue);
  }

  /** The loop it belongs to. */
  getLoop(): EventLoop {
    return this.#loop;
  }

  toString(): string {
    const info = ['StreamWriter', `transport=${String(this.transport)}`];
    if (this.#reader !== null) info.push(`reader=${String(this.#reader)}`);
    return `<${info.join(' ')}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/** @internal The running loop, or a RuntimeError saying that `what` needs one. */
export function _runningLoop(what: string): EventLoop {
  const loop = _getRunningLoop();
  if (loop === null) throw new RuntimeError(`${what} must be awaited in a running loop: no running event loop`);
  return loop;
}

function* openWith(
  loop: EventLoop,
  endpoint: { host: string; port: number } | { path: string },
  options: OpenConnectionOptions,
  what: string,
): Coroutine<[StreamReader, StreamWriter]> {
  const reader = new StreamReader(options.limit, loop);
  const protocol = new _StreamReaderProtocol(reader, null, loop);
  const connection: CreateConnectionOptions = {};
  if (options.ssl !== undefined) connection.ssl = options.ssl;
  if (options.serverHostname !== undefined) connection.serverHostname = options.serverHostname;
  if (options.localAddr !== undefined) connection.localAddr = options.localAddr;
  if (options.sslHandshakeTimeout !== undefined) connection.sslHandshakeTimeout = options.sslHandshakeTimeout;
  const [transport] = yield* _createConnection(loop, () => protocol, endpoint, connection, what);
  const writer = new StreamWriter(transport, protocol, reader, loop);
  return [reader, writer];
}

/**
 * Connect to `host:port`; returns the connection's reader and writer (open_connection).
 *
 * @example
 * ```ts
 * const [reader, writer] = yield* openConnection('127.0.0.1', 8888);
 * writer.write(new TextEncoder().encode('ping\n'));
 * const answer = yield* reader.readline();
 * ```
 */
export function* openConnection(host: string, port: number, options: OpenConnectionOptions = {}): Coroutine<[reader: StreamReader, writer: StreamWriter]> {
  return yield* openWith(_runningLoop('openConnection()'), { host, port }, options, 'openConnection()');
}

/** Connect to the Unix socket at `path` (open_unix_connection). */
export function* openUnixConnection(path: string, options: OpenConnectionOptions = {}): Coroutine<[reader: StreamReader, writer: StreamWriter]> {
  return yield* openWith(_runningLoop('openUnixConnection()'), { path }, options, 'openUnixConnection()');
}

function checkCallback(callback: unknown, what: string): void {
  if (typeof callback !== 'function') throw new TypeError(`${what} clientConnected must be a function, got ${repr(callback)}`);
}

function* serveWith(
  loop: EventLoop,
  clientConnected: ClientConnectedCallback,
  endpoint: ServerEndpoint,
  options: StartServerOptions,
  what: string,
): Coroutine<Server> {
  checkCallback(clientConnected, what);
  const limit = _checkLimit(options.limit);
  const factory = (): Protocol => new _StreamReaderProtocol(new StreamReader(limit, loop), clientConnected, loop);
  const { limit: _limit, ...serverOptions } = options;
  void _limit;
  return yield* _createServer(loop, factory, endpoint, serverOptions, what);
}

/**
 * Listen on `host:port` (null host: every interface; port 0: a free one) and call
 * `clientConnected(reader, writer)` for each connection; a generator function runs as a Task,
 * whose error is reported to the loop's exception handler and closes its connection (start_server).
 *
 * @example
 * ```ts
 * function* echo(reader: StreamReader, writer: StreamWriter): Coroutine<void> {
 *   writer.write(yield* reader.readline());
 *   yield* writer.drain();
 *   writer.close();
 * }
 * const server = yield* startServer(echo, '127.0.0.1', 8888);
 * ```
 */
export function* startServer(
  clientConnected: ClientConnectedCallback,
  host: string | null,
  port: number | null,
  options: StartServerOptions = {},
): Coroutine<Server> {
  return yield* serveWith(_runningLoop('startServer()'), clientConnected, { host, port }, options, 'startServer()');
}

/**
 * Listen on the Unix socket at `path`, or serve on `options.sock` (path null); closing the server
 * removes the socket file unless `cleanupSocket` is false (start_unix_server).
 */
export function* startUnixServer(clientConnected: ClientConnectedCallback, path: string | null, options: StartServerOptions = {}): Coroutine<Server> {
  return yield* serveWith(_runningLoop('startUnixServer()'), clientConnected, { path }, options, 'startUnixServer()');
}
