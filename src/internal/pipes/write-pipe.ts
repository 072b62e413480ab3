/**
 * The write end of a pipe as a transport (asyncio's _UnixWritePipeTransport), on a Node stream.
 * Writes go to the stream's buffer at once; past the high-water mark the protocol hears
 * `pauseWriting()`, and `resumeWriting()` once Node handed the buffer to the kernel down to the
 * low-water mark. `close()` is `writeEof()`: the pipe closes once the buffer is written, then
 * `connectionLost(null)`. A write error (the reader went: EPIPE) closes the transport with the
 * error, as asyncio's does, without troubling the exception handler: it is an OS error.
 *
 * asyncio hears a reader go even while nothing is written, by watching the write end for
 * readability. Node can do that for a socket given as a descriptor (it is read for EOF); for a
 * pipe or FIFO the loss shows at the next write.
 */
import type { Writable } from 'node:stream';
import type { EventLoop } from '../../base-events.js';
import { RuntimeError, _isEscaping } from '../../exceptions.js';
import { logger } from '../../log.js';
import { _DEFAULT_HIGH, _trackOpen, _untrackOpen, _writeBufferLimits, type LoopResource } from '../../transports.js';
import { INSPECT, typeName } from '../format.js';
import { _isOsError } from './read-pipe.js';

/** asyncio's default high-water mark of a write buffer. */
/** How many writes to a lost pipe pass silently before each one is logged (asyncio's LOG_THRESHOLD_FOR_CONNLOST_WRITES). */
const LOG_THRESHOLD_FOR_CONNLOST_WRITES = 5;
const EMPTY = Buffer.alloc(0);

/** What a write pipe transport calls (asyncio.BaseProtocol's methods): any Protocol fits. */
export interface WritePipeProtocol {
  /** The pipe is connected; `transport` is its transport. */
  connectionMade(transport: WritePipeTransport): void;
  /** The transport closed: `exc` is null after `close()`/`writeEof()`/`abort()`, else the write error. */
  connectionLost(exc: Error | null): void;
  /** The write buffer went over its high-water mark. */
  pauseWriting(): void;
  /** The write buffer drained below its low-water mark. */
  resumeWriting(): void;
}

/** asyncio's BrokenPipeError, as Node would report it: the reader went with data still buffered. */
function brokenPipe(): Error {
  const error = new Error('Broken pipe: the reading end closed with data still buffered') as Error & { code: string };
  error.name = 'BrokenPipeError';
  error.code = 'EPIPE';
  return error;
}

/**
 * The write end of a pipe, a FIFO, or a socket written as one (asyncio.WriteTransport, as
 * `loop.connectWritePipe` makes it). When it closes, the pipe it was given is closed too.
 *
 * @example
 * ```ts
 * const [transport] = yield* loop.connectWritePipe(() => new Protocol(), fd);
 * transport.write(new TextEncoder().encode('hello\n'));
 * transport.close();
 * ```
 */
export class WritePipeTransport implements LoopResource {
  readonly #loop: EventLoop;
  #protocol: WritePipeProtocol;
  #stream: Writable | null;
  readonly #extra: Record<string, unknown>;
  /** Set by `close()`, `writeEof()`, `abort()` or a loss: nothing more is written. */
  #closing = false;
  #lostScheduled = false;
  #connLost = 0;
  #high = _DEFAULT_HIGH;
  #low = _DEFAULT_HIGH / 4;
  #protocolPaused = false;
  #watchingFlush = false;

  /** @internal Made by `loop.connectWritePipe` and the subprocess transport; `watchPeer`: the stream is a socket to read for the reader's going. */
  constructor(loop: EventLoop, protocol: WritePipeProtocol, stream: Writable, pipe: unknown, made: (() => void) | null, watchPeer: boolean) {
    this.#loop = loop;
    this.#protocol = protocol;
    this.#stream = stream;
    this.#extra = { pipe };
    stream.on('error', this.#onError);
    stream.on('close', this.#onClose);
    loop.callSoon(this.#connectionMade);
    loop.callSoon(() => {
      if (watchPeer) {
        const socket = stream as unknown as NodeJS.ReadableStream;
        socket.on('data', this.#onPeerGone);
        socket.on('end', this.#onPeerGone);
      }
      made?.();
    });
    _trackOpen(loop, this);
  }

  readonly #connectionMade = (): void => {
    this.#protocol.connectionMade(this);
  };

  /** @internal The loop closed: let the stream go at once (no callback can run any more). */
  _closeAtLoopClose(): void {
    this.#closing = true;
    this.#lostScheduled = true;
    this.#release();
  }

  readonly #onError = (error: Error): void => {
    if (this.#lostScheduled || this.#loop.isClosed()) return;
    this.#connLost++;
    if (!_isOsError(error)) {
      this.#loop.callExceptionHandler({ message: 'Fatal write error on pipe transport', exception: error, transport: this, protocol: this.#protocol });
    }
    this.#close(error);
  };

  /** The stream closed: after our end() (all written), or under us (a child's stdin when it exits). */
  readonly #onClose = (): void => {
    if (this.#lostScheduled || this.#loop.isClosed()) return;
    const stream = this.#stream;
    const buffered = stream !== null && stream.writableLength > 0 && !stream.writableFinished;
    this.#close(buffered ? brokenPipe() : null);
  };

  /** The peer closed its end (asyncio's _read_ready on a write pipe: any readability means that). */
  readonly #onPeerGone = (): void => {
    if (this.#lostScheduled) return;
    this.#close(this.getWriteBufferSize() > 0 ? brokenPipe() : null);
  };

  #close(error: Error | null): void {
    this.#closing = true;
    this.#stream?.destroy();
    if (this.#lostScheduled || this.#loop.isClosed()) return;
    this.#lostScheduled = true;
    this.#loop.callSoon(this.#callConnectionLost, error);
  }

  readonly #callConnectionLost = (error: Error | null): void => {
    try {
      this.#protocol.connectionLost(error);
    } finally {
      this.#release();
    }
  };

  #release(): void {
    const stream = this.#stream;
    if (stream === null) return;
    this.#stream = null;
    stream.off('error', this.#onError);
    stream.off('close', this.#onClose);
    stream.off('data', this.#onPeerGone);
    stream.off('end', this.#onPeerGone);
    stream.on('error', ignore);
    stream.destroy();
    _untrackOpen(this.#loop, this);
  }

  /** Queue `data` for writing; never blocks (the protocol hears `pauseWriting` past the high-water mark). */
  write(data: Uint8Array): void {
    if (!(data instanceof Uint8Array)) throw new TypeError(`data argument must be a bytes-like object, not '${typeName(data)}'`);
    if (data.length === 0) return;
    const stream = this.#stream;
    if (this.#connLost > 0 || this.#closing || stream === null) {
      if (this.#connLost >= LOG_THRESHOLD_FOR_CONNLOST_WRITES) logger.warning('pipe closed by peer or os.write(pipe, data) raised exception.');
      this.#connLost++;
      return;
    }
    stream.write(data);
    if (!this.#protocolPaused && stream.writableLength > this.#high) this.#pauseProtocol();
  }

  /** Queue every chunk of `data`, in order. */
  writelines(data: Iterable<Uint8Array>): void {
    for (const chunk of data) this.write(chunk);
  }

  /** Always true: a pipe is closed to say EOF (can_write_eof). */
  canWriteEof(): boolean {
    return true;
  }

  /** Close the pipe once the buffered data is written (write_eof); `connectionLost(null)` follows. */
  writeEof(): void {
    if (this.#closing) return;
    const stream = this.#stream;
    if (stream === null) throw new RuntimeError('writeEof() on a write pipe transport that is closed');
    this.#closing = true;
    // 'close' follows once everything is written and the descriptor closed: connectionLost(null) then.
    stream.end();
  }

  /** Close once the buffered data is written; the same as `writeEof()` for a pipe. */
  close(): void {
    if (this.#stream !== null && !this.#closing) this.writeEof();
  }

  /** Close at once, dropping buffered data; `connectionLost(null)` follows. */
  abort(): void {
    this.#close(null);
  }

  /** Whether the transport is closing or closed (is_closing). */
  isClosing(): boolean {
    return this.#closing;
  }

  /** The number of bytes buffered for writing. */
  getWriteBufferSize(): number {
    return this.#stream?.writableLength ?? 0;
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
    if (!this.#protocolPaused && this.getWriteBufferSize() > this.#high) this.#pauseProtocol();
  }

  #pauseProtocol(): void {
    this.#protocolPaused = true;
    try {
      this.#protocol.pauseWriting();
    } catch (error) {
      this.#report('protocol.pauseWriting() failed', error);
    }
    this.#watchFlush();
  }

  #report(message: string, error: unknown): void {
    if (_isEscaping(error)) throw error;
    this.#loop.callExceptionHandler({ message, exception: error as Error, transport: this, protocol: this.#protocol });
  }

  /** Hear when Node has handed everything written so far to the kernel (an empty write's callback). */
  #watchFlush(): void {
    const stream = this.#stream;
    if (this.#watchingFlush || stream === null || stream.destroyed || stream.writableEnded) return;
    this.#watchingFlush = true;
    stream.write(EMPTY, this.#onFlushed);
  }

  readonly #onFlushed = (error?: Error | null): void => {
    this.#watchingFlush = false;
    if ((error !== undefined && error !== null) || this.#lostScheduled || !this.#protocolPaused) return;
    if (this.getWriteBufferSize() > this.#low) {
      this.#watchFlush();
      return;
    }
    if (this.#loop.isClosed()) return;
    this.#loop.callSoon(this.#resumeProtocol);
  };

  readonly #resumeProtocol = (): void => {
    if (this.#lostScheduled || !this.#protocolPaused || this.getWriteBufferSize() > this.#low) return;
    this.#protocolPaused = false;
    try {
      this.#protocol.resumeWriting();
    } catch (error) {
      this.#report('protocol.resumeWriting() failed', error);
    }
  };

  /** The protocol the transport drives. */
  getProtocol(): WritePipeProtocol {
    return this.#protocol;
  }

  /** Drive `protocol` from now on (set_protocol). */
  setProtocol(protocol: WritePipeProtocol): void {
    this.#protocol = protocol;
  }

  /** `'pipe'`: the pipe given (a descriptor or a stream); another key: `defaultValue` (default null) (get_extra_info). */
  getExtraInfo(name: string, defaultValue: unknown = null): unknown {
    return Object.prototype.hasOwnProperty.call(this.#extra, name) ? this.#extra[name] : defaultValue;
  }

  toString(): string {
    const state = this.#stream === null ? 'closed' : this.#closing ? 'closing' : 'open';
    return `<WritePipeTransport ${state} bufsize=${this.getWriteBufferSize()}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

function ignore(): void {
  // A stream being destroyed may still report an error: nobody is listening any more.
}
