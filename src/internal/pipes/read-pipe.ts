/**
 * The read end of a pipe as a transport (asyncio's _UnixReadPipeTransport), on a Node stream.
 * Node reads outside the loop's iterations; what arrives is queued and handed to the protocol
 * in an iteration, in order. At EOF asyncio calls `eofReceived()` and then, whatever it
 * returns, `connectionLost(null)`: a pipe has no half to keep open.
 */
import type { Readable } from 'node:stream';
import type { EventLoop } from '../../base-events.js';
import { _isEscaping } from '../../exceptions.js';
import { _trackOpen, _untrackOpen, type LoopResource } from '../../transports.js';
import { Deque } from '../deque.js';
import { INSPECT } from '../format.js';

/** What a read pipe transport calls (asyncio.Protocol's methods for a read pipe): any Protocol fits. */
export interface ReadPipeProtocol {
  /** The pipe is connected; `transport` is its transport. */
  connectionMade(transport: ReadPipeTransport): void;
  /** Bytes arrived. */
  dataReceived(data: Uint8Array): void;
  /** The writer closed its end; the return value is ignored, `connectionLost(null)` follows. */
  eofReceived(): boolean | void;
  /** The transport closed: `exc` is null at EOF or on `close()`, else the read error. */
  connectionLost(exc: Error | null): void;
}

/** Whether `error` is an OS error as Node reports them (asyncio's OSError): it carries an errno code. */
export function _isOsError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code);
}

/**
 * The read end of a pipe, a FIFO, or a socket read as one (asyncio.ReadTransport, as
 * `loop.connectReadPipe` makes it). When it closes, the pipe it was given is closed too.
 *
 * @example
 * ```ts
 * const [transport, protocol] = yield* loop.connectReadPipe(() => new Collect(), child.stdout!);
 * transport.pauseReading();
 * ```
 */
export class ReadPipeTransport implements LoopResource {
  readonly #loop: EventLoop;
  #protocol: ReadPipeProtocol;
  #stream: Readable | null;
  readonly #extra: Record<string, unknown>;
  /** Chunks read and not delivered yet, in order. */
  readonly #inbox = new Deque<Buffer>(4);
  #scheduled = false;
  /** Whether `connectionMade` ran: nothing is delivered before it. */
  #made = false;
  #eof = false;
  #closing = false;
  #paused = false;
  /** Whether `connectionLost` was scheduled: it runs once. */
  #lostScheduled = false;

  /** @internal Made by `loop.connectReadPipe` and the subprocess transport. */
  constructor(loop: EventLoop, protocol: ReadPipeProtocol, stream: Readable, pipe: unknown, made: (() => void) | null) {
    this.#loop = loop;
    this.#protocol = protocol;
    this.#stream = stream;
    this.#extra = { pipe };
    stream.on('data', this.#onData);
    stream.on('end', this.#onEnd);
    stream.on('error', this.#onError);
    stream.on('close', this.#onClose);
    loop.callSoon(this.#connectionMade);
    loop.callSoon(() => {
      this.#made = true;
      made?.();
      this.#deliverSoon();
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

  readonly #onData = (chunk: Buffer | string): void => {
    this.#inbox.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    this.#deliverSoon();
  };

  readonly #onEnd = (): void => {
    this.#eof = true;
    this.#deliverSoon();
  };

  /** The stream was destroyed under us (by its owner) without an end or an error: that is EOF too. */
  readonly #onClose = (): void => {
    if (this.#eof || this.#closing) return;
    this.#eof = true;
    this.#deliverSoon();
  };

  readonly #onError = (error: Error): void => {
    if (this.#closing || this.#loop.isClosed()) return;
    // asyncio's _fatal_error: EIO (a terminal whose other side went) is only logged in debug mode.
    if ((error as { code?: unknown }).code !== 'EIO') {
      this.#loop.callExceptionHandler({ message: 'Fatal read error on pipe transport', exception: error, transport: this, protocol: this.#protocol });
    }
    this.#close(error);
  };

  #deliverSoon(): void {
    if (this.#scheduled || this.#closing || this.#loop.isClosed()) return;
    this.#scheduled = true;
    this.#loop.callSoon(this.#deliver);
  }

  readonly #deliver = (): void => {
    this.#scheduled = false;
    if (!this.#made) return;
    const inbox = this.#inbox;
    while (inbox.length > 0 && !this.#paused && !this.#closing) {
      const chunk = inbox.shift() as Buffer;
      try {
        this.#protocol.dataReceived(chunk);
      } catch (error) {
        // As asyncio's reader callback failing: reported, and reading goes on.
        if (_isEscaping(error)) throw error;
        this.#loop.callExceptionHandler({ message: 'Exception in callback ReadPipeTransport._readReady()', exception: error as Error, transport: this, protocol: this.#protocol });
      }
    }
    if (this.#eof && inbox.length === 0 && !this.#paused && !this.#closing) {
      this.#closing = true;
      this.#loop.callSoon(this.#eofReceived);
      this.#scheduleLost(null);
    }
  };

  readonly #eofReceived = (): void => {
    this.#protocol.eofReceived();
  };

  #close(error: Error | null): void {
    this.#closing = true;
    this.#inbox.clear();
    this.#stream?.pause();
    this.#scheduleLost(error);
  }

  #scheduleLost(error: Error | null): void {
    if (this.#lostScheduled) return;
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

  /** Let the stream (and the descriptor under it) go. */
  #release(): void {
    const stream = this.#stream;
    if (stream === null) return;
    this.#stream = null;
    stream.off('data', this.#onData);
    stream.off('end', this.#onEnd);
    stream.off('close', this.#onClose);
    // Errors of a stream being torn down are no one's to hear any more.
    stream.off('error', this.#onError);
    stream.on('error', ignore);
    stream.destroy();
    _untrackOpen(this.#loop, this);
  }

  /** Stop calling `dataReceived` (and reading from the pipe) until `resumeReading()` (pause_reading). */
  pauseReading(): void {
    if (!this.isReading()) return;
    this.#paused = true;
    this.#stream?.pause();
  }

  /** Deliver data again after `pauseReading()` (resume_reading). */
  resumeReading(): void {
    if (this.#closing || !this.#paused) return;
    this.#paused = false;
    this.#stream?.resume();
    this.#deliverSoon();
  }

  /** Whether data is being delivered: neither paused nor closing (is_reading). */
  isReading(): boolean {
    return !this.#paused && !this.#closing;
  }

  /** Close the transport: nothing more is delivered, `connectionLost(null)` follows, and the pipe is closed. */
  close(): void {
    if (!this.#closing) this.#close(null);
  }

  /** Whether the transport is closing or closed (is_closing). */
  isClosing(): boolean {
    return this.#closing;
  }

  /** The protocol the transport drives. */
  getProtocol(): ReadPipeProtocol {
    return this.#protocol;
  }

  /** Drive `protocol` from now on (set_protocol). */
  setProtocol(protocol: ReadPipeProtocol): void {
    this.#protocol = protocol;
  }

  /** `'pipe'`: the pipe given (a descriptor or a stream); another key: `defaultValue` (default null) (get_extra_info). */
  getExtraInfo(name: string, defaultValue: unknown = null): unknown {
    return Object.prototype.hasOwnProperty.call(this.#extra, name) ? this.#extra[name] : defaultValue;
  }

  toString(): string {
    const state = this.#stream === null ? 'closed' : this.#closing ? 'closing' : this.#paused ? 'paused' : 'open';
    return `<ReadPipeTransport ${state}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

function ignore(): void {
  // A stream being destroyed may still report an error: nobody is listening any more.
}
